package grpcnet

import (
	"context"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/pipemare/pipemare/transport"
)

func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		os.Exit(runChild(role))
	}
	goleak.VerifyTestMain(m)
}

// listeners returns n loopback listeners and their addresses.
func listeners(t testing.TB, n int) ([]net.Listener, []string) {
	t.Helper()
	ls := make([]net.Listener, n)
	addrs := make([]string, n)
	for i := range ls {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		ls[i], addrs[i] = l, l.Addr().String()
		// Closed at the end of the test, and referenced until then: a
		// listener a test only gives the address of would otherwise be
		// collected, its socket closed, and a silent peer refuse.
		t.Cleanup(func() { _ = l.Close() })
	}
	return ls, addrs
}

// pipeline is a driver and its stages in this process.
type pipeline struct {
	driver *Endpoint
	stages []*Endpoint
}

// open opens a driver and len(ls) stages concurrently, stage i serving on
// ls[i]; the same options go to every peer. It closes them at the test's
// end.
func open(t testing.TB, n Network, ls []net.Listener, opts ...Option) *pipeline {
	t.Helper()
	p := &pipeline{stages: make([]*Endpoint, len(ls))}
	errs := make([]error, len(ls)+1)
	var wg sync.WaitGroup
	for i := -1; i < len(ls); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := opts
			if i >= 0 {
				o = append(append([]Option{}, opts...), WithListener(ls[i]))
			}
			e, err := Open(context.Background(), transport.Peer(i), n, o...)
			errs[i+1] = err
			if i < 0 {
				p.driver = e
			} else {
				p.stages[i] = e
			}
		}()
	}
	wg.Wait()
	t.Cleanup(p.close)
	for _, err := range errs {
		require.NoError(t, err)
	}
	return p
}

func (p *pipeline) close() {
	var wg sync.WaitGroup
	for _, e := range append([]*Endpoint{p.driver}, p.stages...) {
		if e != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = e.Close()
			}()
		}
	}
	wg.Wait()
}

// quick is the options of a test over loopback: plaintext, short timeouts.
func quick(recv time.Duration) []Option {
	return []Option{WithInsecure(), WithRecvTimeout(recv), WithConnectTimeout(10 * time.Second)}
}

// chain links neighbours of p stages.
func chain(p int) []transport.Link {
	var ls []transport.Link
	for i := 0; i+1 < p; i++ {
		ls = append(ls, transport.Link{A: transport.Peer(i), B: transport.Peer(i + 1)})
	}
	return ls
}
