//go:build linux

package shmnet

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/pipemare/pipemare/internal/testkit/testutil"
	"github.com/pipemare/pipemare/transport"
)

// childEnv names the role a child process of the test binary plays;
// childNetEnv is its Network, as JSON.
const (
	childEnv    = "PIPEMARE_SHMNET_CHILD"
	childNetEnv = "PIPEMARE_SHMNET_NET"
)

// runChild plays a role in a child process and returns its exit code.
func runChild(role string) int {
	var err error
	switch role {
	case "streamer":
		err = streamer()
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

// streamer is stage 1 of the network in $PIPEMARE_SHMNET_NET: it opens,
// says "open", then streams 1 MiB gradients to stage 0 and replies to the
// driver until it is killed or stopped.
func streamer() error {
	var n Network
	if err := json.Unmarshal([]byte(os.Getenv(childNetEnv)), &n); err != nil {
		return err
	}
	e, err := Open(context.Background(), 1, n, WithConnectTimeout(20*time.Second), WithStallTimeout(childStall))
	if err != nil {
		return err
	}
	defer e.Close()
	fmt.Println("open")
	ctx := context.Background()
	g := tensor.New(tensor.WithShape(512, 512), tensor.WithBacking(f32s(512*512)))
	for m := 0; ; m++ {
		if err := e.Send(ctx, transport.Message{Kind: transport.Gradient, To: 0, Micro: m, Values: []gorgonia.Value{g}}); err != nil {
			return err
		}
		if err := e.Send(ctx, transport.Message{Kind: transport.Reply, To: transport.Driver, Micro: m}); err != nil {
			return err
		}
		time.Sleep(time.Millisecond)
	}
}

// childStall is the stall timeout of the child tests: short, yet long
// enough that the test process's own links, starved of CPU under -race on
// a loaded machine, still beat in time.
var childStall = func() time.Duration {
	if testutil.RaceEnabled {
		return 3 * time.Second
	}
	return time.Second
}()

// startStreamer starts stage 1 of n as a child process; it is killed at
// the test's end.
func startStreamer(t *testing.T, n Network) *exec.Cmd {
	t.Helper()
	b, err := json.Marshal(n)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=streamer", childNetEnv+"="+string(b))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	go func() { // "open", once connected
		s := bufio.NewScanner(out)
		for s.Scan() {
		}
	}()
	return cmd
}

// TestPeerKilledOrStopped: stage 1 runs in a child process that streams
// gradients to stage 0 and replies to the driver; killed (SIGKILL) or
// stopped (SIGSTOP) mid-stream, it makes the calls of both on its links
// fail with a LinkError that names it, its pid and what happened, within
// the stall timeout, while the link between stage 0 and the driver goes
// on; once closed, nothing of the links is left open or mapped.
func TestPeerKilledOrStopped(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	for _, c := range []struct {
		sig  syscall.Signal
		says string
	}{
		{syscall.SIGKILL, "its process ended"},
		{syscall.SIGSTOP, "beat no more for " + childStall.String() + " (the stall timeout): its process is stopped or stalled"},
	} {
		t.Run(c.sig.String(), func(t *testing.T) {
			before, beforeRings := openFDs(t)
			n := testNetwork(2)
			child := startStreamer(t, n)
			opts := []Option{WithRecvTimeout(time.Minute), WithConnectTimeout(20 * time.Second), WithStallTimeout(childStall)}
			p := &pipeline{stages: make([]*Endpoint, 1)}
			errs := make(chan error, 2)
			go func() {
				var err error
				p.driver, err = Open(context.Background(), transport.Driver, n, opts...)
				errs <- err
			}()
			var err error
			p.stages[0], err = Open(context.Background(), 0, n, opts...)
			require.NoError(t, err)
			require.NoError(t, <-errs)
			ctx := context.Background()
			for m := range 5 { // the stream flows
				g, err := p.stages[0].Recv(ctx, 1, transport.Gradient)
				require.NoError(t, err)
				require.Equal(t, m, g.Micro)
				putValues(g) // the receiver returns them, as a stage does
			}
			require.NoError(t, child.Process.Signal(c.sig))
			start := time.Now()
			who := fmt.Sprintf("stage 1 (pid %d)", child.Process.Pid)
			for _, e := range []struct {
				e    *Endpoint
				kind transport.Kind
			}{{p.stages[0], transport.Gradient}, {p.driver, transport.Reply}} {
				var err error
				for err == nil { // drain what arrived before
					var m transport.Message
					m, err = e.e.Recv(ctx, 1, e.kind)
					putValues(m)
				}
				var le *transport.LinkError
				require.ErrorAs(t, err, &le)
				require.Equal(t, transport.Peer(1), le.From, "%v", err)
				require.Contains(t, err.Error(), who)
				require.Contains(t, err.Error(), c.says)
				require.Contains(t, err.Error(), "restart the pipeline")
				err = e.e.Send(ctx, transport.Message{Kind: transport.Control, To: 1})
				require.ErrorAs(t, err, &le, "later sends on the link fail too")
			}
			require.Less(t, time.Since(start), childStall+2*time.Second, "named within the stall timeout")
			require.NoError(t, p.stages[0].Send(ctx, transport.Message{Kind: transport.Reply, To: transport.Driver, Micro: 7}))
			m, err := p.driver.Recv(ctx, 0, transport.Reply)
			require.NoError(t, err, "a broken link fails only the calls that involve it")
			require.Equal(t, 7, m.Micro)
			_, err = p.driver.Recv(ctx, transport.AnyPeer, transport.Reply)
			require.ErrorContains(t, err, who, "a Recv from any peer, with nothing queued, reports the broken link")
			p.close()
			_ = child.Process.Kill()
			_ = child.Wait() // closes its pipe
			after, afterRings := openFDs(t)
			require.Equal(t, before, after, "fds")
			require.Equal(t, beforeRings, afterRings, "rings")
		})
	}
}
