package grpcnet

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/pipemare/pipemare/transport"
)

// childEnv names the role a child process of the test binary plays; the
// other PIPEMARE_GRPCNET_* variables are its arguments.
const childEnv = "PIPEMARE_GRPCNET_CHILD"

// runChild plays a role in a child process and returns its exit code.
func runChild(role string) int {
	var err error
	switch role {
	case "streamer":
		err = streamer()
	case "netns":
		err = netnsPeer()
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

// streamer is stage 1 of a two-stage pipeline whose stage 0 is at
// $PIPEMARE_GRPCNET_ADDR0: it listens, prints its address, opens, and
// then streams 4 MiB gradients to stage 0 and replies to the driver until
// it is killed.
func streamer() error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println(l.Addr())
	n := Network{Addrs: []string{os.Getenv("PIPEMARE_GRPCNET_ADDR0"), l.Addr().String()}, Links: chain(2), Identity: transport.Identity{Plan: "fp"}}
	e, err := Open(context.Background(), 1, n, WithInsecure(), WithListener(l), WithConnectTimeout(20*time.Second))
	if err != nil {
		return err
	}
	defer e.Close()
	ctx := context.Background()
	g := tensor.New(tensor.WithShape(1024, 1024), tensor.WithBacking(f32s(1024*1024)))
	for m := 0; ; m++ {
		if err := e.Send(ctx, transport.Message{Kind: transport.Gradient, To: 0, Micro: m, Values: []gorgonia.Value{g}}); err != nil {
			return err
		}
		if err := e.Send(ctx, transport.Message{Kind: transport.Reply, To: transport.Driver, Micro: m}); err != nil {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// startChild runs the test binary as a child in role, with env, and
// returns it and its standard output's first line.
func startChild(t *testing.T, role string, env ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childEnv+"="+role), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "the child said nothing")
	return cmd, strings.TrimSpace(line)
}
