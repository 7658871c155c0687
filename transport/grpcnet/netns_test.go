package grpcnet

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/pkg/errors"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/pipemare/pipemare/transport"
	"github.com/pipemare/pipemare/transport/pki"
)

// The two namespaces' addresses: RFC 2544's benchmarking range, which no
// real network routes; the traffic never leaves the two namespaces.
const nsStageIP, nsDriverIP = "198.18.0.2", "198.18.0.1"

// TestStreamAcrossNetworkNamespaces: a driver and a stage in two network
// namespaces joined by a veth pair, each a process of its own, exchange a
// chunked tensor over mutual TLS and get it back bit for bit.
func TestStreamAcrossNetworkNamespaces(t *testing.T) {
	if testing.Short() {
		t.Skip("creates network namespaces")
	}
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip command (iproute2)")
	}
	id := os.Getpid() % 100000
	nsA, nsB := fmt.Sprintf("pmdrv%d", id), fmt.Sprintf("pmstg%d", id)
	vA, vB := fmt.Sprintf("pmva%d", id), fmt.Sprintf("pmvb%d", id)
	ip := func(args ...string) error {
		out, err := exec.Command("ip", args...).CombinedOutput()
		return errors.Wrapf(err, "ip %s: %s", strings.Join(args, " "), out)
	}
	if err := ip("netns", "add", nsA); err != nil {
		t.Skipf("cannot create a network namespace here: %v", err)
	}
	t.Cleanup(func() { _ = ip("netns", "del", nsA) })
	require.NoError(t, ip("netns", "add", nsB))
	t.Cleanup(func() { _ = ip("netns", "del", nsB) })
	for _, args := range [][]string{
		{"link", "add", vA, "type", "veth", "peer", "name", vB},
		{"link", "set", vA, "netns", nsA}, {"link", "set", vB, "netns", nsB},
		{"-n", nsA, "addr", "add", nsDriverIP + "/30", "dev", vA}, {"-n", nsB, "addr", "add", nsStageIP + "/30", "dev", vB},
		{"-n", nsA, "link", "set", vA, "up"}, {"-n", nsB, "link", "set", vB, "up"},
		{"-n", nsA, "link", "set", "lo", "up"}, {"-n", nsB, "link", "set", "lo", "up"},
	} {
		require.NoError(t, ip(args...))
	}
	dir := t.TempDir()
	require.NoError(t, pki.Write(dir, []string{nsStageIP}))
	addr := nsStageIP + ":7100"

	run := func(ns string, peer transport.Peer) *exec.Cmd {
		cmd := exec.Command("ip", "netns", "exec", ns, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=netns", fmt.Sprintf("PIPEMARE_GRPCNET_PEER=%d", peer),
			"PIPEMARE_GRPCNET_CERTS="+dir, "PIPEMARE_GRPCNET_ADDR0="+addr)
		return cmd
	}
	stage, driver := run(nsB, 0), run(nsA, transport.Driver)
	var stageOut strings.Builder
	stage.Stdout, stage.Stderr = &stageOut, &stageOut
	require.NoError(t, stage.Start())
	t.Cleanup(func() { _ = stage.Process.Kill() })
	out, err := driver.CombinedOutput()
	require.NoError(t, err, "driver: %s", out)
	require.NoError(t, stage.Wait(), "stage: %s", stageOut.String())
	require.Contains(t, string(out), "echoed bit for bit over "+addr)
}

// netnsPeer is one side of TestStreamAcrossNetworkNamespaces.
func netnsPeer() error {
	var peer transport.Peer
	if _, err := fmt.Sscan(os.Getenv("PIPEMARE_GRPCNET_PEER"), &peer); err != nil {
		return err
	}
	roots, cert, err := pki.Load(os.Getenv("PIPEMARE_GRPCNET_CERTS"), peer)
	if err != nil {
		return err
	}
	addr := os.Getenv("PIPEMARE_GRPCNET_ADDR0")
	ctx := context.Background()
	e, err := Open(ctx, peer, Network{Addrs: []string{addr}, Identity: transport.Identity{Plan: "netns"}},
		WithTLS(roots, cert), WithConnectTimeout(time.Minute), WithRecvTimeout(2*time.Minute))
	if err != nil {
		return err
	}
	defer e.Close()
	if peer == 0 { // echo the driver's order
		m, err := e.Recv(ctx, transport.Driver, transport.Control)
		if err != nil {
			return err
		}
		if err := e.Send(ctx, transport.Message{Kind: transport.Reply, To: transport.Driver, Micro: m.Micro, Values: m.Values, Body: m.Body}); err != nil {
			return err
		}
		_, err = e.Recv(ctx, transport.Driver, transport.Control) // until the driver leaves
		if !strings.Contains(fmt.Sprint(err), "driver closed its endpoint") {
			return errors.Errorf("want the driver gone, got %v", err)
		}
		return nil
	}
	sent := tensor.New(tensor.WithShape(3, 1024, 1024), tensor.WithBacking(f32s(3*1024*1024)))
	if err := e.Send(ctx, transport.Message{Kind: transport.Control, To: 0, Micro: 11, Body: "echo", Values: []gorgonia.Value{sent}}); err != nil {
		return err
	}
	m, err := e.Recv(ctx, 0, transport.Reply)
	if err != nil {
		return err
	}
	a, _, _ := leBytes(sent.Data(), true)
	b, _, _ := leBytes(m.Values[0].Data(), true)
	if m.Micro != 11 || m.Body != "echo" || string(a) != string(b) || !m.Values[0].Shape().Eq(sent.Shape()) {
		return errors.Errorf("the echo differs: %v", m)
	}
	fmt.Println("echoed bit for bit over", addr)
	return nil
}
