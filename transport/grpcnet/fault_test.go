package grpcnet

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/pipemare/pipemare/transport"
)

// TestPeerKilledMidStream: stage 1 runs in a child process that streams
// gradients to stage 0 and replies to the driver; killed mid-stream, it
// makes the pending and later calls of both on that link fail with a
// LinkError naming the link from stage 1, well within the receive timeout,
// while the link between stage 0 and the driver goes on working.
func TestPeerKilledMidStream(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	const timeout = 5 * time.Second
	ls, addrs := listeners(t, 1)
	child, addr1 := startChild(t, "streamer", "PIPEMARE_GRPCNET_ADDR0="+addrs[0])
	n := Network{Addrs: []string{addrs[0], addr1}, Links: chain(2), Identity: transport.Identity{Plan: "fp"}}
	var driver, stage0 *Endpoint
	var wg sync.WaitGroup
	var derr, serr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		driver, derr = Open(context.Background(), transport.Driver, n, quick(timeout)...)
	}()
	go func() {
		defer wg.Done()
		stage0, serr = Open(context.Background(), 0, n, append(quick(timeout), WithListener(ls[0]))...)
	}()
	wg.Wait()
	require.NoError(t, derr)
	require.NoError(t, serr)
	defer driver.Close()
	defer stage0.Close()
	ctx := context.Background()
	for m := 0; m < 5; m++ { // the stream is flowing
		g, err := stage0.Recv(ctx, 1, transport.Gradient)
		require.NoError(t, err)
		require.Equal(t, m, g.Micro)
	}
	require.NoError(t, child.Process.Signal(os.Kill))
	start := time.Now()
	for _, c := range []struct {
		e    *Endpoint
		kind transport.Kind
	}{{stage0, transport.Gradient}, {driver, transport.Reply}} {
		var err error
		for err == nil { // drain what arrived before the kill
			_, err = c.e.Recv(ctx, 1, c.kind)
		}
		var le *transport.LinkError
		require.ErrorAs(t, err, &le)
		require.Equal(t, transport.Peer(1), le.From, "%v", err)
		require.Equal(t, c.e.Self(), le.To)
		require.Contains(t, err.Error(), "the stream to stage 1 at "+addr1+" broke")
		require.Contains(t, err.Error(), "restart the pipeline")
		// Later calls on that link fail with it; other links go on.
		err = c.e.Send(ctx, transport.Message{Kind: transport.Control, To: 1})
		require.ErrorAs(t, err, &le)
		require.Equal(t, transport.Peer(1), le.From)
	}
	require.NoError(t, stage0.Send(ctx, transport.Message{Kind: transport.Reply, To: transport.Driver, Body: "still here"}))
	m, err := driver.Recv(ctx, 0, transport.Reply)
	require.NoError(t, err, "a broken link fails only the calls that involve it")
	require.Equal(t, "still here", m.Body)
	_, err = driver.Recv(ctx, transport.AnyPeer, transport.Reply)
	var le *transport.LinkError
	require.ErrorAs(t, err, &le, "a Recv from any peer, with nothing queued, reports the broken link")
	require.Equal(t, transport.Peer(1), le.From)
	require.Less(t, time.Since(start), timeout, "a dead peer is noticed by its broken stream, before the timeout")
}

// TestStalledLinkGivesADeadlineError: a link that stops carrying bytes
// makes the receiver's Recv fail after the receive timeout with an error
// naming the link, and Close does not hang on it.
func TestStalledLinkGivesADeadlineError(t *testing.T) {
	const timeout = time.Second
	ls, addrs := listeners(t, 2)
	proxy := newFaultProxy(t, addrs[1])
	n := Network{Addrs: []string{addrs[0], proxy.addr()}, Links: chain(2), Identity: transport.Identity{Plan: "fp"}}
	p := open(t, n, ls, quick(timeout)...)
	ctx := context.Background()
	require.NoError(t, p.stages[0].Send(ctx, transport.Message{Kind: transport.Activation, To: 1, Micro: 0}))
	_, err := p.stages[1].Recv(ctx, 0, transport.Activation)
	require.NoError(t, err)

	proxy.stalled.Store(true)
	require.NoError(t, p.stages[0].Send(ctx, transport.Message{Kind: transport.Activation, To: 1, Micro: 1}))
	start := time.Now()
	_, err = p.stages[1].Recv(ctx, 0, transport.Activation)
	took := time.Since(start)
	var le *transport.LinkError
	require.ErrorAs(t, err, &le)
	require.Equal(t, "transport: link stage 0 → stage 1 (activation): nothing received within 1s: the peer is stalled, too slow or unreachable; "+
		"if its work between two messages takes longer, raise the receive timeout (grpcnet.WithRecvTimeout): receive timeout", err.Error())
	require.ErrorIs(t, err, transport.ErrTimeout, "a timeout is told apart from a broken link")
	require.InDelta(t, timeout.Seconds(), took.Seconds(), 0.5)

	start = time.Now()
	err = p.stages[0].Close()
	require.ErrorContains(t, err, "close: link stage 0 → stage 1: stage 1 did not confirm within 1s that it read everything sent to it")
	require.Less(t, time.Since(start), 3*timeout, "Close gives up on a stalled link")
}

// TestCloseOfAFailingPipelineDoesNotWaitForAStalledPeer: once a link
// broke, Close gives a stalled peer only the connect timeout, not the
// receive timeout, to confirm what it was sent.
func TestCloseOfAFailingPipelineDoesNotWaitForAStalledPeer(t *testing.T) {
	ls, addrs := listeners(t, 2)
	gone, stalled := newFaultProxy(t, addrs[0]), newFaultProxy(t, addrs[1])
	n := Network{Addrs: []string{gone.addr(), stalled.addr()}, Identity: transport.Identity{Plan: "fp"}}
	p := open(t, n, ls, append(quick(time.Minute), WithConnectTimeout(time.Second))...)
	stalled.stalled.Store(true)
	gone.close() // the driver's link to stage 0 breaks
	_, err := p.driver.Recv(context.Background(), 0, transport.Reply)
	var le *transport.LinkError
	require.ErrorAs(t, err, &le)
	start := time.Now()
	err = p.driver.Close()
	require.ErrorContains(t, err, "close: link driver → stage 1: stage 1 did not confirm within 1s that it read everything sent to it")
	require.Less(t, time.Since(start), 10*time.Second, "not the receive timeout of a minute")
	stalled.close() // stage 1's link to the driver ends: it closes at once
}

// TestSlowLinkGivesADeadlineErrorThenDelivers: a link too slow for the
// receive timeout fails that Recv, naming the link, without breaking it:
// the message arrives once the link speeds up.
func TestSlowLinkGivesADeadlineErrorThenDelivers(t *testing.T) {
	const timeout = 500 * time.Millisecond
	ls, addrs := listeners(t, 2)
	proxy := newFaultProxy(t, addrs[1])
	n := Network{Addrs: []string{addrs[0], proxy.addr()}, Links: chain(2), Identity: transport.Identity{Plan: "fp"}}
	p := open(t, n, ls, quick(timeout)...)
	ctx := context.Background()
	proxy.rate.Store(1 << 20) // 1 MiB/s for a 4 MiB tensor
	big := tensor.New(tensor.WithShape(1024, 1024), tensor.WithBacking(f32s(1024*1024)))
	require.NoError(t, p.stages[0].Send(ctx, transport.Message{Kind: transport.Activation, To: 1, Micro: 7, Values: []gorgonia.Value{big}}))
	_, err := p.stages[1].Recv(ctx, 0, transport.Activation)
	require.ErrorContains(t, err, "transport: link stage 0 → stage 1 (activation): nothing received within 500ms")
	proxy.rate.Store(0)
	var m transport.Message
	require.Eventually(t, func() bool {
		m, err = p.stages[1].Recv(ctx, 0, transport.Activation)
		return err == nil
	}, 30*time.Second, time.Millisecond)
	require.Equal(t, 7, m.Micro)
	require.Equal(t, rawBits(t, big), rawBits(t, m.Values[0]))
}

// TestCloseDeliversWhatWasSent: what a peer sent before Close arrives;
// then a Recv from it says it closed, and calls on the closed endpoint
// return ErrClosed, also a Recv pending at Close.
func TestCloseDeliversWhatWasSent(t *testing.T) {
	ls, addrs := listeners(t, 2)
	p := open(t, Network{Addrs: addrs, Links: chain(2)}, ls, quick(10*time.Second)...)
	ctx := context.Background()
	big := tensor.New(tensor.WithShape(512, 1024), tensor.WithBacking(f32s(512*1024)))
	const msgs = 20
	for m := 0; m < msgs; m++ {
		require.NoError(t, p.stages[0].Send(ctx, transport.Message{Kind: transport.Activation, To: 1, Micro: m, Values: []gorgonia.Value{big}}))
	}
	pending := make(chan error, 1)
	go func() {
		_, err := p.stages[0].Recv(ctx, 1, transport.Gradient)
		pending <- err
	}()
	require.NoError(t, p.stages[0].Close(), "every message was read")
	require.ErrorIs(t, <-pending, transport.ErrClosed)
	for m := 0; m < msgs; m++ {
		got, err := p.stages[1].Recv(ctx, 0, transport.Activation)
		require.NoError(t, err)
		require.Equal(t, m, got.Micro)
	}
	_, err := p.stages[1].Recv(ctx, 0, transport.Activation)
	require.ErrorContains(t, err, "link stage 0 → stage 1 (activation): stage 0 closed its endpoint: nothing more will come")
	err = p.stages[1].Send(ctx, transport.Message{Kind: transport.Gradient, To: 0})
	require.ErrorContains(t, err, "link stage 1 → stage 0 (gradient): stage 0 closed its endpoint")
	require.ErrorIs(t, p.stages[0].Send(ctx, transport.Message{Kind: transport.Gradient, To: 1}), transport.ErrClosed)
	_, err = p.stages[0].Recv(ctx, 1, transport.Gradient)
	require.ErrorIs(t, err, transport.ErrClosed)
	require.NoError(t, p.stages[0].Close(), "twice is fine")
	// The others still talk.
	require.NoError(t, p.driver.Send(ctx, transport.Message{Kind: transport.Control, To: 1, Body: "on"}))
	got, err := p.stages[1].Recv(ctx, transport.Driver, transport.Control)
	require.NoError(t, err)
	require.Equal(t, "on", got.Body)
}

// TestStalledPeerNamedWithinTheStallTimeout: a peer that answers nothing,
// not even the keepalive (a stopped process: here a link that holds every
// byte), makes the calls on its link fail within the stall timeout, long
// before the receive timeout, with an error that names the peer, its
// address, says it is stopped or stalled and what to do.
func TestStalledPeerNamedWithinTheStallTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the stall timeout")
	}
	ls, addrs := listeners(t, 2)
	proxy := newFaultProxy(t, addrs[1])
	n := Network{Addrs: []string{addrs[0], proxy.addr()}, Links: chain(2), Identity: transport.Identity{Plan: "fp"}}
	p := open(t, n, ls, append(quick(time.Minute), WithStallTimeout(MinStallTimeout))...)
	ctx := context.Background()
	require.NoError(t, p.stages[1].Send(ctx, transport.Message{Kind: transport.Gradient, To: 0, Micro: 0}))
	_, err := p.stages[0].Recv(ctx, 1, transport.Gradient)
	require.NoError(t, err)

	proxy.stalled.Store(true)
	start := time.Now()
	_, err = p.stages[0].Recv(ctx, 1, transport.Gradient)
	took := time.Since(start)
	var le *transport.LinkError
	require.ErrorAs(t, err, &le)
	require.Equal(t, transport.Peer(1), le.From)
	require.NotErrorIs(t, err, transport.ErrTimeout, "a broken link, not the receive timeout")
	require.Contains(t, err.Error(), "stage 1 at "+proxy.addr()+" answered nothing, not even the keepalive, within 11s (the stall timeout): its process is stopped or stalled")
	require.Contains(t, err.Error(), "restart the pipeline, from the last checkpoint")
	require.Contains(t, err.Error(), "give a longer stall timeout")
	require.Less(t, took, MinStallTimeout+3*time.Second, "within the stall timeout (and a margin), not the receive timeout of a minute")
}

// TestStallTimeoutRefused: a stall timeout below the keepalive's least
// interval is refused, naming the least.
func TestStallTimeoutRefused(t *testing.T) {
	_, err := Open(context.Background(), transport.Driver, Network{Addrs: []string{"127.0.0.1:1"}}, WithInsecure(), WithStallTimeout(5*time.Second))
	require.EqualError(t, err, "driver: stall timeout 5s: it must be at least 11s (gRPC pings a peer at most every 10s)")
}
