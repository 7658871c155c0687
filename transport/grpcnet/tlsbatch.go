package grpcnet

import (
	"bufio"
	"context"
	"net"
	"sync"

	"google.golang.org/grpc/credentials"
)

// crypto/tls moves a record (16 KiB at most) per system call: it reads
// the socket a record at a time, and writes each record of a Write with a
// write of its own. batchedCreds batch both: a TLS connection reads its
// socket through a buffer, so that one read takes every record that has
// arrived, and the records of one Write (gRPC writes 32 KiB at a time) go
// to the socket in one write. The bytes are the same TLS records: only
// the system calls are fewer.

// tlsReadBuffer is the buffer a TLS connection reads its socket through.
const tlsReadBuffer = 1 << 20

// batchedCreds are TLS credentials whose connections batch their socket's
// reads and writes.
type batchedCreds struct {
	credentials.TransportCredentials
}

func (c batchedCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	s := newSocketBatch(raw)
	conn, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, s)
	if err != nil {
		return nil, nil, err
	}
	return &batchedConn{Conn: conn, socket: s}, info, nil
}

func (c batchedCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	s := newSocketBatch(raw)
	conn, info, err := c.TransportCredentials.ServerHandshake(s)
	if err != nil {
		return nil, nil, err
	}
	return &batchedConn{Conn: conn, socket: s}, info, nil
}

func (c batchedCreds) Clone() credentials.TransportCredentials {
	return batchedCreds{c.TransportCredentials.Clone()}
}

// batchedConn is a TLS connection whose Write sends its records in one
// write to the socket.
type batchedConn struct {
	net.Conn // the TLS connection
	socket   *socketBatch
}

func (c *batchedConn) Write(b []byte) (int, error) {
	c.socket.hold()
	n, err := c.Conn.Write(b)
	if ferr := c.socket.release(); err == nil {
		err = ferr
	}
	return n, err
}

// socketBatch is the socket under a TLS connection: read through a buffer,
// and, between hold and release, written in one piece. What TLS writes on
// its own (an alert, a key update, the close notification) while nothing
// is held goes out at once; while something is, it goes out with it, in
// order.
type socketBatch struct {
	net.Conn
	r *bufio.Reader

	mu   sync.Mutex
	held bool
	out  []byte
}

func newSocketBatch(c net.Conn) *socketBatch {
	return &socketBatch{Conn: c, r: bufio.NewReaderSize(c, tlsReadBuffer)}
}

func (s *socketBatch) Read(b []byte) (int, error) { return s.r.Read(b) }

func (s *socketBatch) Write(b []byte) (int, error) {
	s.mu.Lock()
	if s.held {
		s.out = append(s.out, b...)
		s.mu.Unlock()
		return len(b), nil
	}
	s.mu.Unlock()
	return s.Conn.Write(b)
}

// hold keeps what TLS writes until release.
func (s *socketBatch) hold() {
	s.mu.Lock()
	s.held = true
	s.mu.Unlock()
}

// release writes what was held, in one write.
func (s *socketBatch) release() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held = false
	if len(s.out) == 0 {
		return nil
	}
	_, err := s.Conn.Write(s.out)
	s.out = s.out[:0]
	return err
}
