//go:build linux

package shmnet

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
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

var names atomic.Int64

// testNetwork is a network of p chained stages with a name no other test
// uses.
func testNetwork(p int) Network {
	return Network{Name: fmt.Sprintf("pipemare-test-%d-%d", os.Getpid(), names.Add(1)), Stages: p, Links: chain(p),
		Identity: transport.Identity{Plan: "fp", Settings: []transport.Setting{{Name: "method", Value: "pipemare"}}}}
}

// chain links neighbours of p stages.
func chain(p int) []transport.Link {
	var ls []transport.Link
	for i := 0; i+1 < p; i++ {
		ls = append(ls, transport.Link{A: transport.Peer(i), B: transport.Peer(i + 1)})
	}
	return ls
}

// pipeline is a driver and its stages in this process.
type pipeline struct {
	driver *Endpoint
	stages []*Endpoint
}

// openAll opens the driver and n.Stages stages concurrently with the same
// options, returning each one's error (driver first); the endpoints are
// closed at the test's end.
func openAll(t testing.TB, n Network, opts ...Option) (*pipeline, []error) {
	t.Helper()
	p := &pipeline{stages: make([]*Endpoint, n.Stages)}
	errs := make([]error, n.Stages+1)
	var wg sync.WaitGroup
	for i := -1; i < n.Stages; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := Open(context.Background(), transport.Peer(i), n, opts...)
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
	return p, errs
}

// open is openAll that requires every Open to succeed.
func open(t testing.TB, n Network, opts ...Option) *pipeline {
	t.Helper()
	p, errs := openAll(t, n, opts...)
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

// quick is the options of a test: short timeouts.
func quick(recv time.Duration) []Option {
	return []Option{WithRecvTimeout(recv), WithConnectTimeout(5 * time.Second), WithRingSize(minRingSize)}
}

// openFDs counts this process's open file descriptors, and its mappings of
// a ring's shared memory.
func openFDs(t testing.TB) (fds, rings int) {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	maps, err := os.ReadFile("/proc/self/maps")
	require.NoError(t, err)
	return len(ents), strings.Count(string(maps), "memfd:pipemare-ring")
}
