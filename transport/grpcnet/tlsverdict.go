package grpcnet

import (
	"context"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/pkg/errors"
	"google.golang.org/grpc/credentials"
)

// verdictCreds are a dialing peer's TLS credentials that wait for the
// server's verdict on this peer's certificate before the connection counts
// as made.
//
// In TLS 1.3 the client's side of the handshake is over once it has sent
// its certificate: the server checks it afterwards, and refuses it with an
// alert and a closed connection. gRPC writes its preface at once; when the
// refusal has already closed the socket, that write fails ("broken pipe",
// "connection reset") and the alert that named the cause is never read, so
// that a peer with a certificate of another CA looked like one that hung
// up, and was retried until the connect timeout. Here the client reads
// first: a gRPC server writes its settings as soon as it has accepted the
// certificate, so the first bytes are either those (kept for gRPC) or the
// alert, which this returns as the handshake's error ("remote error: tls:
// unknown certificate authority"), and the dial gives up at once.
type verdictCreds struct {
	credentials.TransportCredentials
}

func (c verdictCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, raw)
	if err != nil {
		return nil, nil, err
	}
	first, err := readVerdict(ctx, conn)
	if err != nil {
		_ = conn.Close()
		return nil, nil, err
	}
	return &peekedConn{Conn: conn, first: first}, info, nil
}

func (c verdictCreds) Clone() credentials.TransportCredentials {
	return verdictCreds{c.TransportCredentials.Clone()}
}

// readVerdict reads the server's first byte, waiting at most until ctx
// ends.
func readVerdict(ctx context.Context, conn net.Conn) ([]byte, error) {
	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetReadDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetReadDeadline(time.Unix(1, 0)) })
	b := make([]byte, 1)
	_, err := io.ReadFull(conn, b)
	if !stop() {
		return nil, errors.Wrap(context.Cause(ctx), "waiting for the server to accept this peer's certificate")
	}
	_ = conn.SetReadDeadline(time.Time{})
	switch {
	case err == nil:
		return b, nil
	case strings.Contains(err.Error(), "tls:"): // the server's alert
		return nil, errors.Wrap(err, "refused by the server after the TLS handshake")
	case hungUp(err):
		return nil, errors.Wrap(err, "the server closed the connection after the TLS handshake without saying why (it may have refused this peer's certificate: is it signed by the CA the server trusts? or the server is shutting down)")
	}
	return nil, errors.Wrap(err, "waiting for the server to accept this peer's certificate")
}

// hungUp reports whether err is the other end closing the connection.
func hungUp(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed)
}

// peekedConn is a connection whose first bytes were read already.
type peekedConn struct {
	net.Conn
	first []byte
}

func (c *peekedConn) Read(b []byte) (int, error) {
	if len(c.first) > 0 {
		n := copy(b, c.first)
		c.first = c.first[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}
