//go:build linux

package shmnet

import (
	"context"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/internal/faultpoint"
	"github.com/pipemare/pipemare/transport"
)

// TestStalledInTheHandshake: a stage that read the driver's hello and
// never answers it (stalled there: the hook holds it) makes the driver's
// Open fail at the connect timeout, naming it as stalled in the
// handshake; Open never returns without a link to it. The socket's
// deadline and Open's own pass at the same instant, in either order: the
// rounds cover both.
func TestStalledInTheHandshake(t *testing.T) {
	var held atomic.Pointer[chan struct{}]
	faultpoint.Set(func(p faultpoint.Point) {
		if p.Name == faultpoint.HelloReceived && p.Stage == int(transport.Driver) {
			<-*held.Load()
		}
	})
	defer faultpoint.Set(nil)
	const timeout = 20 * time.Millisecond
	for round := range 30 {
		release := make(chan struct{})
		held.Store(&release)
		n := testNetwork(1)
		stage := make(chan error, 1)
		go func() {
			e, err := Open(context.Background(), 0, n, WithConnectTimeout(10*timeout))
			if e != nil {
				e.Close()
			}
			stage <- err
		}()
		waitListening(t, n.socket(0))
		d, err := Open(context.Background(), transport.Driver, n, WithConnectTimeout(timeout))
		if d != nil {
			d.Close()
		}
		close(release) // the stage goes on and finds the driver gone
		require.Error(t, <-stage, "round %d", round)
		require.Error(t, err, "round %d: the driver's Open returned with no link to the stalled stage", round)
		require.ErrorIs(t, err, transport.ErrConnectTimeout, "round %d", round)
		require.Regexp(t, `stage 0 \(pid \d+\) at `+regexp.QuoteMeta(n.socket(0))+` took the connection but did not answer the handshake \(is it stalled`, err.Error(), "round %d", round)
	}
}

// waitListening returns once a process listens on the abstract socket
// addr ("@name").
func waitListening(t *testing.T, addr string) {
	t.Helper()
	for start := time.Now(); time.Since(start) < 5*time.Second; time.Sleep(time.Millisecond) {
		b, err := os.ReadFile("/proc/net/unix")
		require.NoError(t, err)
		if strings.Contains(string(b), " "+addr+"\n") {
			return
		}
	}
	t.Fatalf("no one listens on %s", addr)
}
