//go:build unix

package launch

import (
	"context"
	"io/fs"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/transport"
	"github.com/pipemare/pipemare/transport/pki"
)

func TestParseAddrs(t *testing.T) {
	for _, c := range []struct {
		list string
		want []string
		err  string
	}{
		{list: "127.0.0.1:7000", want: []string{"127.0.0.1:7000"}},
		{list: "h0:7000, h1:7001 ,[::1]:7002", want: []string{"h0:7000", "h1:7001", "[::1]:7002"}},
		{list: "127.0.0.1", err: `"127.0.0.1" is not host:port`},
		{list: "h0:7000,h1:", err: `"h1:" is not host:port`},
		{list: "h0:7000,,h1:7000", err: `"" is not host:port`},
		{list: "", err: `"" is not host:port`},
	} {
		got, err := ParseAddrs(c.list)
		if c.err != "" {
			require.EqualError(t, err, c.err, c.list)
			continue
		}
		require.NoError(t, err, c.list)
		require.Equal(t, c.want, got)
	}
}

func TestPeer(t *testing.T) {
	require.Equal(t, transport.Driver, Place{Stage: -1}.Peer())
	require.Equal(t, transport.Peer(2), Place{Stage: 2}.Peer())
}

// TestCredentials: plaintext, or a peer's certificates from a directory
// pki.Write made; a peer without certificates there is an error that is
// fs.ErrNotExist; neither or both is refused.
func TestCredentials(t *testing.T) {
	opts, err := Credentials{Insecure: true}.Options(0)
	require.NoError(t, err)
	require.Len(t, opts, 1)

	dir := t.TempDir()
	require.NoError(t, pki.Write(dir, []string{"127.0.0.1"}))
	for _, p := range []transport.Peer{transport.Driver, 0} {
		opts, err := Credentials{Dir: dir}.Options(p)
		require.NoError(t, err, p)
		require.Len(t, opts, 1)
	}
	_, err = Credentials{Dir: dir}.Options(1)
	require.ErrorIs(t, err, fs.ErrNotExist, "stage 1 has no certificate")
	require.Contains(t, err.Error(), "stage-1.pem")

	_, err = Credentials{}.Options(0)
	require.EqualError(t, err, "no credentials: a directory of certificates, or plaintext on loopback")
	_, err = Credentials{Dir: dir, Insecure: true}.Options(0)
	require.EqualError(t, err, "certificates in "+dir+" and plaintext: choose one")
}

// inherited is the "fd:N" of a new descriptor of f's file, as a process
// inherits one: ListenOptions takes it over (and closes it).
func inherited(t *testing.T, f *os.File) string {
	t.Helper()
	fd, err := syscall.Dup(int(f.Fd()))
	require.NoError(t, err)
	return "fd:" + strconv.Itoa(fd)
}

// TestListenOptions: the driver and a stage on its own address need no
// option; an address or an inherited listening socket is one; "fd:N" that
// is not a listening socket of this process is an error naming it.
func TestListenOptions(t *testing.T) {
	for _, pl := range []Place{{Stage: -1, Listen: "fd:3"}, {Stage: 0}} {
		opts, err := pl.ListenOptions()
		require.NoError(t, err)
		require.Empty(t, opts, "%+v", pl)
	}
	opts, err := Place{Stage: 1, Listen: ":7000"}.ListenOptions()
	require.NoError(t, err)
	require.Len(t, opts, 1)

	for _, listen := range []string{"fd:x", "fd:2", "fd:-1"} {
		_, err := Place{Stage: 0, Listen: listen}.ListenOptions()
		require.EqualError(t, err, listen+": a file descriptor of 3 or more")
	}
	f, err := os.CreateTemp(t.TempDir(), "file")
	require.NoError(t, err)
	defer f.Close()
	listen := inherited(t, f)
	_, err = Place{Stage: 0, Listen: listen}.ListenOptions()
	require.ErrorContains(t, err, listen+": not a listening socket: ")
}

// mlpPlan is the test MLP cut into 2 stages.
func mlpPlan(t *testing.T) *graphsplit.Plan {
	t.Helper()
	m, err := testmodels.MLP(tensor.Float64, 4, 1)
	require.NoError(t, err)
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.Stages(2))
	require.NoError(t, err)
	t.Cleanup(func() { plan.Close() })
	return plan
}

// TestConnector: the driver and two stages, each with its Place and the
// same Credentials, connect over loopback — the stages serving on
// listeners they inherit as file descriptors, as StartLocal's do — with
// mutual TLS and in plaintext.
func TestConnector(t *testing.T) {
	plan := mlpPlan(t)
	certs := t.TempDir()
	require.NoError(t, pki.Write(certs, []string{"127.0.0.1", "127.0.0.1"}))
	for _, creds := range []Credentials{{Dir: certs}, {Insecure: true}} {
		var addrs, listen []string
		for range 2 {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			f, err := l.(*net.TCPListener).File()
			require.NoError(t, err)
			addrs, listen = append(addrs, l.Addr().String()), append(listen, inherited(t, f))
			require.NoError(t, f.Close())
			require.NoError(t, l.Close())
		}
		eps := make([]transport.Endpoint, 3)
		errs := make([]error, 3)
		var wg sync.WaitGroup
		for i := -1; i < 2; i++ {
			pl := Place{Addrs: addrs, Stage: i}
			if i >= 0 {
				pl.Listen = listen[i]
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				eps[i+1], errs[i+1] = pl.Connector(creds, 30*time.Second)(context.Background(), plan)
			}()
		}
		wg.Wait()
		for i, err := range errs {
			require.NoError(t, err, "%+v: peer %d", creds, i-1)
			require.Equal(t, transport.Peer(i-1), eps[i].Self())
		}
		for _, ep := range eps {
			wg.Add(1)
			go func() {
				defer wg.Done()
				require.NoError(t, ep.Close())
			}()
		}
		wg.Wait()
	}
}

// TestConnectorFails: a driver whose stages never come fails after the
// connect timeout with transport.ErrConnectTimeout, and credentials that
// cannot be had fail before anything is dialed; the endpoint is nil.
func TestConnectorFails(t *testing.T) {
	plan := mlpPlan(t)
	addrs := freeAddrs(t, 2)
	driver := Place{Addrs: addrs, Stage: -1}
	ep, err := driver.Connector(Credentials{Insecure: true}, 200*time.Millisecond)(context.Background(), plan)
	require.ErrorIs(t, err, transport.ErrConnectTimeout)
	require.Nil(t, ep)

	ep, err = driver.Connector(Credentials{Dir: t.TempDir()}, time.Second)(context.Background(), plan)
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.Nil(t, ep)

	ep, err = Place{Addrs: addrs, Stage: 0, Listen: "fd:x"}.Connector(Credentials{Insecure: true}, time.Second)(context.Background(), plan)
	require.EqualError(t, err, "fd:x: a file descriptor of 3 or more")
	require.Nil(t, ep)
}

// freeAddrs are n loopback addresses where nobody serves: each was a
// listener, closed.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var addrs []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addrs = append(addrs, l.Addr().String())
		require.NoError(t, l.Close())
	}
	return addrs
}
