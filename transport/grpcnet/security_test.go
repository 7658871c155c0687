package grpcnet

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/transport"
	"github.com/pipemare/pipemare/transport/pki"
)

// creds writes a CA and certificates for stages on hosts and returns a
// loader of each peer's credentials.
func creds(t testing.TB, hosts ...string) func(transport.Peer) Option {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, pki.Write(dir, hosts))
	return func(p transport.Peer) Option {
		roots, cert, err := pki.Load(dir, p)
		require.NoError(t, err)
		return WithTLS(roots, cert)
	}
}

// openStage opens stage 0 of a one-stage pipeline in the background; its
// Open's error arrives on the channel.
func openStage(t *testing.T, ls net.Listener, n Network, opts ...Option) <-chan error {
	errc := make(chan error, 1)
	go func() {
		e, err := Open(context.Background(), 0, n, append(opts, WithListener(ls))...)
		if err == nil {
			err = e.Close()
		}
		errc <- err
	}()
	return errc
}

// TestMutualTLS: peers with certificates of the CA they trust talk, in
// TLS 1.3.
func TestMutualTLS(t *testing.T) {
	ls, addrs := listeners(t, 2)
	tlsFor := creds(t, "127.0.0.1", "localhost")
	addrs[1] = "localhost:" + addrs[1][len("127.0.0.1:"):] // the name its certificate holds
	n := Network{Addrs: addrs, Links: chain(2), Identity: transport.Identity{Plan: "fp"}}
	eps := make([]*Endpoint, 3)
	errs := make(chan error, 3)
	for i := -1; i < 2; i++ {
		go func() {
			opts := []Option{tlsFor(transport.Peer(i)), WithConnectTimeout(10 * time.Second)}
			if i >= 0 {
				opts = append(opts, WithListener(ls[i]))
			}
			e, err := Open(context.Background(), transport.Peer(i), n, opts...)
			eps[i+1] = e
			errs <- err
		}()
	}
	for range 3 {
		require.NoError(t, <-errs)
	}
	p := &pipeline{driver: eps[0], stages: eps[1:]}
	t.Cleanup(p.close)
	ctx := context.Background()
	require.NoError(t, p.stages[0].Send(ctx, transport.Message{Kind: transport.Activation, To: 1, Micro: 1}))
	m, err := p.stages[1].Recv(ctx, 0, transport.Activation)
	require.NoError(t, err)
	require.Equal(t, 1, m.Micro)
}

// TestPeerWithoutCertificateIsRefused: a client that presents no
// certificate is refused at the TLS handshake.
func TestPeerWithoutCertificateIsRefused(t *testing.T) {
	t.Parallel() // it waits for the stage's connect timeout
	ls, addrs := listeners(t, 1)
	tlsFor := creds(t, "127.0.0.1")
	stage := openStage(t, ls[0], Network{Addrs: addrs}, tlsFor(0), WithConnectTimeout(2*time.Second))

	// With TLS 1.3 the client's side of the handshake completes; the
	// server's refusal arrives as an alert on the first read.
	c, err := tls.Dial("tcp", addrs[0], &tls.Config{RootCAs: serverRoots(t, tlsFor), MinVersion: tls.VersionTLS13, NextProtos: []string{"h2"}})
	if err == nil {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, err = c.Read(make([]byte, 1))
		_ = c.Close()
	}
	require.ErrorContains(t, err, "tls: certificate required")
	err = <-stage
	require.ErrorIs(t, err, transport.ErrConnectTimeout)
	require.ErrorContains(t, err, "stage 0: not connected within 2s (the connect timeout): driver did not connect to stage 0")
	require.ErrorContains(t, err, "; the last connection refused: ")
	require.ErrorContains(t, err, "refused a connection from 127.0.0.1:")
	require.ErrorContains(t, err, "client didn't provide a certificate")
}

// serverRoots returns the CA pool a peer's option carries.
func serverRoots(t *testing.T, tlsFor func(transport.Peer) Option) *x509.CertPool {
	var s settings
	tlsFor(transport.Driver)(&s)
	return s.roots
}

// TestCertificateOfAnotherCAIsRefused: a driver whose certificate another
// CA signed is refused by the stage at once (not after the connect
// timeout), and the stage says why the driver never arrived, even when a
// connection closed during the handshake (a dial given up, a health check)
// came after the refusal.
func TestCertificateOfAnotherCAIsRefused(t *testing.T) {
	t.Parallel() // it waits for the stage's connect timeout
	ls, addrs := listeners(t, 1)
	ours, theirs := creds(t, "127.0.0.1"), creds(t, "127.0.0.1")
	stage := openStage(t, ls[0], Network{Addrs: addrs}, ours(0), WithConnectTimeout(2*time.Second))

	var s settings
	theirs(transport.Driver)(&s) // their certificate, but our CA: the stage must refuse it
	start := time.Now()
	_, err := Open(context.Background(), transport.Driver, Network{Addrs: addrs},
		WithTLS(serverRoots(t, ours), *s.cert), WithConnectTimeout(10*time.Second))
	require.ErrorContains(t, err, "driver: stage 0 at "+addrs[0]+": the TLS handshake failed")
	require.ErrorContains(t, err, "remote error: tls: unknown certificate authority")
	require.Less(t, time.Since(start), 5*time.Second, "a refused certificate is not retried until the timeout")
	c, err := net.Dial("tcp", addrs[0])
	require.NoError(t, err)
	require.NoError(t, c.Close())
	err = <-stage
	require.ErrorContains(t, err, "refused a connection from 127.0.0.1:")
	require.ErrorContains(t, err, "x509: certificate signed by unknown authority")
}

// TestDialerReadsTheServersVerdict: in TLS 1.3 a client's handshake is
// over before the server has checked its certificate; the dialing side
// waits for the server's answer, so that a refusal is reported as what
// the server said (not as the broken pipe of a later write, which would
// be retried), a server that hangs up is named as one, and an accepted
// connection loses no byte of what the server sent first.
func TestDialerReadsTheServersVerdict(t *testing.T) {
	ours, theirs := creds(t, "127.0.0.1"), creds(t, "127.0.0.1")
	var srv settings
	ours(0)(&srv)
	serverConf := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{*srv.cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: srv.roots, NextProtos: []string{"h2"}}
	dial := func(t *testing.T, client func(transport.Peer) Option, serve func(*tls.Conn)) (net.Conn, error) {
		ls, addrs := listeners(t, 1)
		done := make(chan struct{})
		go func() {
			defer close(done)
			c, err := ls[0].Accept()
			if err != nil {
				return
			}
			tc := tls.Server(c, serverConf)
			if tc.Handshake() == nil {
				serve(tc)
			}
			_ = tc.Close()
		}()
		t.Cleanup(func() { <-done })
		raw, err := net.Dial("tcp", addrs[0])
		require.NoError(t, err)
		var s settings
		client(transport.Driver)(&s)
		s.roots = srv.roots // the stage's CA: the client trusts the server
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, _, err := s.clientCreds().ClientHandshake(ctx, "127.0.0.1", raw)
		if err != nil {
			_ = raw.Close()
		}
		return conn, err
	}
	t.Run("refused", func(t *testing.T) {
		_, err := dial(t, theirs, nil)
		require.ErrorContains(t, err, "refused by the server after the TLS handshake: remote error: tls: unknown certificate authority")
		require.True(t, permanent(err))
	})
	t.Run("hung up", func(t *testing.T) {
		_, err := dial(t, ours, func(*tls.Conn) {})
		require.ErrorContains(t, err, "the server closed the connection after the TLS handshake without saying why")
		require.False(t, permanent(err), "a server that hangs up may be restarting: the dial is retried")
	})
	t.Run("accepted", func(t *testing.T) {
		conn, err := dial(t, ours, func(c *tls.Conn) {
			_, _ = c.Write([]byte("settings"))
			_, _ = c.Read(make([]byte, 1)) // until the client closes
		})
		require.NoError(t, err)
		got, err := io.ReadAll(io.LimitReader(conn, 8))
		require.NoError(t, err)
		require.Equal(t, "settings", string(got))
		require.NoError(t, conn.Close())
	})
}

// TestServerNameIsChecked: a stage whose certificate names another host
// is refused by the peer that dials it.
func TestServerNameIsChecked(t *testing.T) {
	t.Parallel() // it waits for the stage's connect timeout
	ls, addrs := listeners(t, 1)
	addrs[0] = "localhost:" + addrs[0][len("127.0.0.1:"):]
	tlsFor := creds(t, "pm-stage-0.example")
	stage := openStage(t, ls[0], Network{Addrs: addrs}, tlsFor(0), WithConnectTimeout(2*time.Second))
	_, err := Open(context.Background(), transport.Driver, Network{Addrs: addrs}, tlsFor(transport.Driver), WithConnectTimeout(10*time.Second))
	require.ErrorContains(t, err, "x509: certificate is valid for pm-stage-0.example, not localhost")
	require.Error(t, <-stage)
}

// TestTLS12IsRefused: TLS 1.3 is the minimum.
func TestTLS12IsRefused(t *testing.T) {
	t.Parallel() // it waits for the stage's connect timeout
	ls, addrs := listeners(t, 1)
	tlsFor := creds(t, "127.0.0.1")
	stage := openStage(t, ls[0], Network{Addrs: addrs}, tlsFor(0), WithConnectTimeout(2*time.Second))
	var s settings
	tlsFor(transport.Driver)(&s)
	c, err := tls.Dial("tcp", addrs[0], &tls.Config{RootCAs: s.roots, Certificates: []tls.Certificate{*s.cert}, MaxVersion: tls.VersionTLS12, NextProtos: []string{"h2"}})
	if err == nil {
		_ = c.Close()
	}
	require.ErrorContains(t, err, "protocol version not supported")
	require.ErrorContains(t, <-stage, "refused a connection")
}

// TestPlaintextOnlyOnLoopback: WithInsecure is refused for any address
// that is not loopback, including a stage listening on every interface.
func TestPlaintextOnlyOnLoopback(t *testing.T) {
	ctx := context.Background()
	_, err := Open(ctx, transport.Driver, Network{Addrs: []string{"127.0.0.1:7000", "10.1.2.3:7000"}}, WithInsecure())
	require.ErrorContains(t, err, "driver: plaintext refused: 10.1.2.3:7000 is not a loopback address; use WithTLS")
	_, err = Open(ctx, 0, Network{Addrs: []string{"127.0.0.1:0"}}, WithInsecure(), WithListenAddr(":0"))
	require.ErrorContains(t, err, "stage 0: plaintext refused: :0 is not a loopback address")
	_, err = Open(ctx, transport.Driver, Network{Addrs: []string{"pm-stage-0-0.pm:7000"}}, WithInsecure())
	require.ErrorContains(t, err, "plaintext refused: pm-stage-0-0.pm:7000 is not a loopback address")
	for _, a := range []string{"127.0.0.1:1", "[::1]:1", "localhost:1", "127.3.4.5:1"} {
		require.NoError(t, checkInsecure([]string{a}), a)
	}
}

// TestLoopback: the addresses WithInsecure allows.
func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7000": true, "127.3.2.1:1": true, "[::1]:7000": true, "localhost:7000": true, "LocalHost:1": true,
		"10.0.0.1:7000": false, "example.com:7000": false, "[::]:7000": false, ":7000": false, "127.0.0.1": false,
	} {
		require.Equal(t, want, Loopback(addr), addr)
	}
}
