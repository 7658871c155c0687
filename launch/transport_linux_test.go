package launch

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pipemare/pipemare/transport"
	"github.com/pipemare/pipemare/transport/shmnet"
)

// TestNetConnectorShm: with TransportShm the driver's and the stages'
// connectors meet over shared memory, named after the stages' addresses,
// and carry a message; a stage missing is a connect timeout naming the
// connect timeout setting; transports read back from their names.
func TestNetConnectorShm(t *testing.T) {
	plan := mlpPlan(t)
	addrs := freeAddrs(t, 2)
	n := Net{Transport: TransportShm, ConnectTimeout: 10 * time.Second}
	eps := make([]transport.Endpoint, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := -1; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			eps[i+1], errs[i+1] = n.Connector(Place{Addrs: addrs, Stage: i})(context.Background(), plan)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err)
		require.IsType(t, &shmnet.Endpoint{}, eps[i])
		defer eps[i].Close()
	}
	ctx := context.Background()
	require.NoError(t, eps[0].Send(ctx, transport.Message{Kind: transport.Control, To: 1, Micro: 3}))
	m, err := eps[2].Recv(ctx, transport.Driver, transport.Control)
	require.NoError(t, err)
	require.Equal(t, 3, m.Micro)

	n.ConnectTimeout = 200 * time.Millisecond
	_, err = n.Connector(Place{Addrs: freeAddrs(t, 2), Stage: -1})(context.Background(), plan)
	require.ErrorIs(t, err, transport.ErrConnectTimeout)
	require.Regexp(t, `stage 0 at @pipemare-[0-9a-f]+-0 did not answer .*; connect_timeout 200ms: give more if the processes start further apart; this process waited over shared memory \(transport shm\): give every process of the pipeline the same transport and stage_addrs$`, err.Error())

	for _, tr := range []Transport{TransportAuto, TransportGRPC, TransportShm} {
		got, err := ParseTransport(tr.String())
		require.NoError(t, err)
		require.Equal(t, tr, got)
	}
	_, err = ParseTransport("tcp")
	require.EqualError(t, err, `"tcp": auto, grpc or shm`)
	var flagValue Transport // a flag.Value, whose String is what Set reads
	require.NoError(t, flagValue.Set(TransportGRPC.String()))
	require.Equal(t, TransportGRPC, flagValue)
}

// TestTransportResolve: auto is shared memory when every process of the
// pipeline is on loopback — the stage processes this host starts, and any
// addresses all loopback — and gRPC when any address is not, or none is
// known; grpc and shm are as asked.
func TestTransportResolve(t *testing.T) {
	for _, c := range []struct {
		addrs []string
		want  Transport
	}{
		{[]string{"127.0.0.1:7000", "127.0.0.2:7000", "[::1]:7000", "localhost:7000", "LOCALHOST:7001"}, TransportShm},
		{[]string{"127.0.0.1:7000", "10.0.0.1:7000"}, TransportGRPC},
		{[]string{"h0:7000"}, TransportGRPC},
		{[]string{":7000"}, TransportGRPC},
		{[]string{"[::2]:7000"}, TransportGRPC},
		{nil, TransportGRPC},
	} {
		require.Equal(t, c.want, TransportAuto.Resolve(c.addrs), "auto at %v", c.addrs)
		require.Equal(t, TransportGRPC, TransportGRPC.Resolve(c.addrs))
		require.Equal(t, TransportShm, TransportShm.Resolve(c.addrs))
	}
	for _, w := range []Where{InProcess, LocalProcs, Remote, LaunchedFirst, LaunchedStage} {
		want := TransportGRPC
		if w == LocalProcs {
			want = TransportShm
		}
		require.Equal(t, want, TransportAuto.For(w, nil), "auto at %v", w)
		require.Equal(t, TransportShm, TransportAuto.For(w, []string{"127.0.0.1:7000"}), "auto at %v on loopback", w)
		require.Equal(t, TransportGRPC, TransportGRPC.For(w, nil))
	}
}
