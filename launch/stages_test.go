package launch

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/transport"
)

// chainPlan is a plan of 4 stages in a chain.
func chainPlan(t *testing.T) *graphsplit.Plan {
	t.Helper()
	m, err := testmodels.MLP(tensor.Float64, 4, 1)
	require.NoError(t, err)
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.Stages(4))
	require.NoError(t, err)
	t.Cleanup(func() { plan.Close() })
	require.Len(t, plan.Stages, 4)
	return plan
}

// TestLayout: with one address per process, each process's k-th stage is
// at port+k of its address, the processes hosting the stages the
// schedule's placement gives them (zb-v: a V, 0 and 3 beside each other);
// a link between two stages of one process is not on the network; with
// one address per stage and Workers, the addresses are the stages'.
func TestLayout(t *testing.T) {
	plan := chainPlan(t)
	zbv := runspec.Spec{Model: "mlp", Schedule: "zb-v"}
	addrs, links, err := Place{Addrs: []string{"h0:7000", "h1:7000"}, Stage: -1, Spec: zbv}.Layout(plan)
	require.NoError(t, err)
	require.Equal(t, []string{"h0:7000", "h1:7000", "h1:7001", "h0:7001"}, addrs)
	require.Equal(t, []transport.Link{{A: 0, B: 1}, {A: 2, B: 3}}, links, "1-2 is in process 1")

	four := []string{"a:1", "b:1", "c:1", "d:1"}
	addrs, links, err = Place{Addrs: four, Workers: 2, Stage: -1, Spec: runspec.Spec{Model: "mlp", Schedule: "pipemare"}}.Layout(plan)
	require.NoError(t, err)
	require.Equal(t, four, addrs)
	require.Equal(t, []transport.Link{{A: 1, B: 2}}, links, "contiguous: 0-1 and 2-3 in process")

	addrs, links, err = Place{Addrs: four, Stage: -1}.Layout(plan)
	require.NoError(t, err)
	require.Equal(t, four, addrs)
	require.Len(t, links, 3, "a process per stage: every link on the network")

	_, _, err = Place{Addrs: four[:3], Stage: -1}.Layout(plan)
	require.EqualError(t, err, "stage_addrs 3: the plan has 4 stages, and each of 3 processes must host as many: give stages a multiple of 3")
	_, _, err = Place{Addrs: four, Workers: 2, Stage: -1, Spec: runspec.Spec{Model: "mlp", Schedule: "zb-v", Placement: "contiguous"}}.Layout(plan)
	require.ErrorContains(t, err, "placement contiguous: schedule zb-v places its stages v")
}

// TestStagesConnector: a driver and two processes of two stages each,
// placed in a V (zb-v), connect over loopback; a message between the two
// stages of one process arrives in-process, one between processes over
// the network. Stages that are not one process's under the placement are
// refused, naming them and the processes the placement makes.
func TestStagesConnector(t *testing.T) {
	plan := chainPlan(t)
	addrs := freeAddrs(t, 4)
	spec := runspec.Spec{Model: "mlp", Schedule: "zb-v", Placement: "v"}
	n := Net{Credentials: Credentials{Insecure: true}, ConnectTimeout: 30 * time.Second}
	var wg sync.WaitGroup
	var eps [][]transport.Endpoint
	errs := make([]error, 3)
	eps = make([][]transport.Endpoint, 3)
	for j, stages := range [][]int{nil, {0, 3}, {1, 2}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if stages == nil {
				var ep transport.Endpoint
				ep, errs[j] = n.Connector(Place{Addrs: addrs, Workers: 2, Stage: -1, Spec: spec})(context.Background(), plan)
				eps[j] = []transport.Endpoint{ep}
				return
			}
			var pls []Place
			for _, i := range stages {
				pls = append(pls, Place{Addrs: addrs, Stage: i, Spec: spec})
			}
			eps[j], errs[j] = n.StagesConnector(pls)(context.Background(), plan)
		}()
	}
	wg.Wait()
	for j, err := range errs {
		require.NoError(t, err, "process %d", j)
	}
	defer func() {
		for _, list := range eps {
			for _, ep := range list {
				wg.Add(1)
				go func() { defer wg.Done(); ep.Close() }()
			}
		}
		wg.Wait()
	}()
	ctx := context.Background()
	s0, s3, s1, s2 := eps[1][0], eps[1][1], eps[2][0], eps[2][1]
	require.Equal(t, []transport.Peer{0, 3, 1, 2}, []transport.Peer{s0.Self(), s3.Self(), s1.Self(), s2.Self()})
	require.NotContains(t, []string{typeName(s0), typeName(s1)}, "*grpcnet.Endpoint", "joined by Colocated")
	require.NoError(t, s1.Send(ctx, transport.Message{Kind: transport.Activation, To: 2, Micro: 1}))
	require.NoError(t, s0.Send(ctx, transport.Message{Kind: transport.Activation, To: 1, Micro: 2}))
	require.NoError(t, s2.Send(ctx, transport.Message{Kind: transport.Activation, To: 3, Micro: 3}))
	for _, c := range []struct {
		ep   transport.Endpoint
		from transport.Peer
		m    int
	}{{s2, 1, 1}, {s1, 0, 2}, {s3, 2, 3}} {
		got, err := c.ep.Recv(ctx, c.from, transport.Activation)
		require.NoError(t, err)
		require.Equal(t, c.m, got.Micro)
	}

	_, err := n.StagesConnector([]Place{{Addrs: addrs, Stage: 0, Spec: spec}, {Addrs: addrs, Stage: 1, Spec: spec}})(ctx, plan)
	require.EqualError(t, err, "stage 0,1: placed v, the 4 stages make 2 processes of stages 0,3 or 1,2: give one of those")
}

func typeName(v any) string { return fmt.Sprintf("%T", v) }
