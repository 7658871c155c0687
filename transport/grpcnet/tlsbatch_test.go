package grpcnet

import (
	"crypto/tls"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/credentials"
)

// TestTLSBatchesSystemCalls: a TLS connection of a link writes the records
// of one Write to its socket in one system call, and reads every record
// that has arrived in one, where crypto/tls alone takes one per record;
// the bytes are the same.
func TestTLSBatchesSystemCalls(t *testing.T) {
	tlsFor := creds(t, "127.0.0.1")
	var s settings
	tlsFor(0)(&s)
	ls, addrs := listeners(t, 1)
	const size = 32 << 10 // a few records; what a loopback socket holds before it is read
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte(i * 7)
	}

	sent := make(chan int64, 1) // the bytes of the server's records, once written
	echoed := make(chan []byte, 1)
	go func() {
		raw, err := ls[0].Accept()
		if err != nil {
			sent <- -1
			return
		}
		counted := &countingConn{Conn: raw}
		c := tls.Server(counted, &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{*s.cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: s.roots, NextProtos: []string{"h2"}})
		defer func() { _ = c.Close() }()
		got := make([]byte, size)
		if _, err := io.ReadFull(c, got); err != nil {
			sent <- -1
			return
		}
		echoed <- got
		counted.written.Store(0)
		if _, err := c.Write(payload); err != nil {
			sent <- -1
			return
		}
		sent <- counted.written.Load()
		_, _ = c.Read(make([]byte, 1)) // until the client closes
	}()

	tcp, err := net.Dial("tcp", addrs[0])
	require.NoError(t, err)
	raw := &countingConn{Conn: tcp}
	creds := batchedCreds{credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{*s.cert}, RootCAs: s.roots})}
	conn, _, err := creds.ClientHandshake(t.Context(), "127.0.0.1", raw)
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()

	raw.writes.Store(0)
	n, err := conn.Write(payload)
	require.NoError(t, err)
	require.Equal(t, size, n)
	require.Equal(t, int64(1), raw.writes.Load(), "the records of one Write, in one write to the socket")
	require.Equal(t, payload, <-echoed)

	want := <-sent
	require.Positive(t, want)
	waitForInput(t, tcp.(*net.TCPConn), int(want))
	raw.reads.Store(0)
	got := make([]byte, size)
	_, err = io.ReadFull(conn, got)
	require.NoError(t, err)
	require.Equal(t, payload, got)
	require.Equal(t, int64(1), raw.reads.Load(), "every record that arrived, in one read from the socket")
}

// countingConn counts the system calls made on a connection.
type countingConn struct {
	net.Conn
	reads, writes, written atomic.Int64
}

func (c *countingConn) Read(b []byte) (int, error) {
	c.reads.Add(1)
	return c.Conn.Read(b)
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	n, err := c.Conn.Write(b)
	c.written.Add(int64(n))
	return n, err
}

// waitForInput waits until c's socket holds n unread bytes.
func waitForInput(t *testing.T, c *net.TCPConn, n int) {
	rc, err := c.SyscallConn()
	require.NoError(t, err)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var queued int
		var ierr error
		require.NoError(t, rc.Control(func(fd uintptr) { queued, ierr = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }))
		require.NoError(t, ierr)
		if queued >= n {
			return
		}
		require.True(t, time.Now().Before(deadline), "%d of %d bytes arrived", queued, n)
		time.Sleep(time.Millisecond)
	}
}
