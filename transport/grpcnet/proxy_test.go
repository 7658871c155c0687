package grpcnet

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// faultProxy forwards TCP connections to an upstream address and can stall
// them (hold every byte) or slow them to a rate: a link that hangs or
// crawls, injected in the test process. (Shopify's toxiproxy does this as
// a server with metrics and a REST API; its library would bring a dozen
// modules into the build for these two faults.)
type faultProxy struct {
	l        net.Listener
	upstream string
	stalled  atomic.Bool
	rate     atomic.Int64 // bytes per second; 0: as fast as it goes
	mu       sync.Mutex
	closed   bool
	conns    []net.Conn
	wg       sync.WaitGroup
}

func newFaultProxy(t testing.TB, upstream string) *faultProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &faultProxy{l: l, upstream: upstream}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *faultProxy) addr() string { return p.l.Addr().String() }

func (p *faultProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.upstream)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_, _ = c.Close(), u.Close()
			return
		}
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(u, c)
		go p.pipe(c, u)
	}
}

// pipe copies src to dst, holding the bytes while stalled and pacing them
// to the rate.
func (p *faultProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer func() { _ = dst.Close() }()
	buf := make([]byte, 16<<10)
	for {
		n, err := src.Read(buf)
		for n > 0 && p.stalled.Load() {
			time.Sleep(5 * time.Millisecond)
			if p.isClosed() {
				return
			}
		}
		if r := p.rate.Load(); r > 0 && n > 0 {
			time.Sleep(time.Duration(int64(n) * int64(time.Second) / r))
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil { // EOF or closed: close the other way too
			return
		}
	}
}

func (p *faultProxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

func (p *faultProxy) close() {
	_ = p.l.Close()
	p.mu.Lock()
	p.closed = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
