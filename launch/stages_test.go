package launch

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/runspec"
	"github.com/pipemare/pipemare/schedule"
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

// TestLayout: each process's k-th stage is at port+k of its address,
// the processes hosting the stages the run's placement gives them (zb-v:
// a V, 0 and 3 beside each other; contiguous: blocks, the first larger
// when the processes do not divide the stages; pipemare by default:
// blocks split by the plan's costs); a link between two stages of one
// process is not on the network. More processes than
// stages, processes that do not divide them under any other placement,
// and a placement the schedule refuses are errors naming the settings.
func TestLayout(t *testing.T) {
	plan := chainPlan(t)
	zbv := runspec.Spec{Model: "mlp", Schedule: "zb-v"}
	pipemare := runspec.Spec{Model: "mlp", Schedule: "pipemare"}
	contiguous := runspec.Spec{Model: "mlp", Schedule: "pipemare", Placement: "contiguous"}
	for _, c := range []struct {
		spec        runspec.Spec
		addrs, want []string
		links       []transport.Link
	}{
		{zbv, []string{"h0:7000", "h1:7000"}, []string{"h0:7000", "h1:7000", "h1:7001", "h0:7001"}, []transport.Link{{A: 0, B: 1}, {A: 2, B: 3}}},
		{contiguous, []string{"h0:7000", "h1:7000"}, []string{"h0:7000", "h0:7001", "h1:7000", "h1:7001"}, []transport.Link{{A: 1, B: 2}}},
		{contiguous, []string{"a:1", "b:1", "c:1"}, []string{"a:1", "a:2", "b:1", "c:1"}, []transport.Link{{A: 1, B: 2}, {A: 2, B: 3}}},
		{zbv, []string{"a:1", "b:1", "c:1", "d:http"}, []string{"a:1", "b:1", "c:1", "d:http"}, []transport.Link{{A: 0, B: 1}, {A: 1, B: 2}, {A: 2, B: 3}}},
	} {
		addrs, links, err := Place{Addrs: c.addrs, Stage: -1, Spec: c.spec}.Layout(plan)
		require.NoError(t, err)
		require.Equal(t, c.want, addrs, "%s on %v", c.spec.Schedule, c.addrs)
		require.Equal(t, c.links, links, "%s on %v", c.spec.Schedule, c.addrs)
	}
	// Balanced: the plan's costs split the stages, which on 3 processes
	// is not by count; each process's stages at its port, port+1, ….
	addrs3 := []string{"a:1", "b:1", "c:1"}
	hosts := schedule.Balance(plan.Costs(), 3)
	require.NotEqual(t, schedule.Contiguous.Assign(plan.Costs(), 3), hosts, "the MLP's stages cost unlike")
	addrs, links, err := Place{Addrs: addrs3, Stage: -1, Spec: pipemare}.Layout(plan)
	require.NoError(t, err)
	var want []string
	var wantLinks []transport.Link
	for i, j := range hosts {
		want = append(want, addrs3[j][:2]+strconv.Itoa(1+i-slices.Index(hosts, j)))
		if i > 0 && hosts[i-1] != j {
			wantLinks = append(wantLinks, transport.Link{A: transport.Peer(i - 1), B: transport.Peer(i)})
		}
	}
	require.Equal(t, want, addrs)
	require.Equal(t, wantLinks, links)
	for _, c := range []struct {
		spec  runspec.Spec
		addrs []string
		err   string
	}{
		{zbv, []string{"a:1", "b:1", "c:1"}, "stage_addrs 3: placed v, every process hosts as many of the plan's 4 stages: give stages a multiple of 3, or processes that divide 4"},
		{pipemare, []string{"a:1", "b:1", "c:1", "d:1", "e:1"}, "stage_addrs 5: 5 processes for the plan's 4 stages: give at most 4"},
		{runspec.Spec{Model: "mlp", Schedule: "zb-v", Placement: "contiguous"}, []string{"a:1", "b:1"}, "placement contiguous: schedule zb-v places its stages v"},
		{pipemare, []string{"a:1", "b:http"}, "stage_addrs b:http: host:port with a port number"},
	} {
		_, _, err := Place{Addrs: c.addrs, Stage: -1, Spec: c.spec}.Layout(plan)
		require.ErrorContains(t, err, c.err)
	}
}

// TestStagesConnector: a driver and two processes of two stages each,
// placed in a V (zb-v), connect over loopback; a message between the two
// stages of one process arrives in-process, one between processes over
// the network. Stages that are not one process's under the placement are
// refused, naming them and the processes the placement makes.
func TestStagesConnector(t *testing.T) {
	plan := chainPlan(t)
	ls, err := consecutive(4)
	require.NoError(t, err)
	for _, l := range ls {
		require.NoError(t, l.Close())
	}
	port := ls[0].Addr().(*net.TCPAddr).Port
	addrs := []string{"127.0.0.1:" + strconv.Itoa(port), "127.0.0.1:" + strconv.Itoa(port+2)} // each process at its port and the next
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
				ep, errs[j] = n.Connector(Place{Addrs: addrs, Stage: -1, Spec: spec})(context.Background(), plan)
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

	_, err = n.StagesConnector([]Place{{Addrs: addrs, Stage: 0, Spec: spec}, {Addrs: addrs, Stage: 1, Spec: spec}})(ctx, plan)
	require.EqualError(t, err, "stage 0,1: placed v, the 4 stages on 2 processes make processes of stages 0,3 or 1,2: give one of those")
}

func typeName(v any) string { return fmt.Sprintf("%T", v) }

// TestCheckHostedFollowsTheBalancedPlacement: a process given the stages
// the balanced placement puts together (by the plan's costs) passes; one
// given others — the contiguous blocks by count among them — is refused,
// the error naming the placement and the lists it makes.
func TestCheckHostedFollowsTheBalancedPlacement(t *testing.T) {
	plan := chainPlan(t)
	costs := plan.Costs()
	places := func(spec runspec.Spec, stages []int) []Place {
		var pls []Place
		for _, i := range stages {
			pls = append(pls, Place{Addrs: []string{"a:1", "b:1", "c:1"}, Stage: i, Spec: spec})
		}
		return pls
	}
	pipemare := runspec.Spec{Model: "mlp", Schedule: "pipemare"}
	hosts := schedule.Balanced.Hosts(costs, 3)
	for _, h := range hosts {
		require.NoError(t, CheckHosted(places(pipemare, h), costs), "%v", h)
	}
	var lists []string
	for _, h := range hosts {
		lists = append(lists, StageList(h))
	}
	for _, h := range schedule.Contiguous.Hosts(costs, 3) {
		if slices.ContainsFunc(hosts, func(b []int) bool { return slices.Equal(b, h) }) {
			continue
		}
		err := CheckHosted(places(pipemare, h), costs)
		require.EqualError(t, err, "stage "+StageList(h)+": placed balanced, the 4 stages on 3 processes make processes of stages "+strings.Join(lists, " or ")+": give one of those")
		require.NoError(t, CheckHosted(places(runspec.Spec{Model: "mlp", Schedule: "pipemare", Placement: "contiguous"}, h), costs), "placed contiguous, %v is a process's", h)
	}
}

// TestLayoutStride: under torchrun, whose processes share their node's
// ports, a process's k-th stage is at port+k·WORLD_SIZE, so that no two
// stages of the node take one port; a stride that runs past port 65535
// is an error naming the first port that fits.
func TestLayoutStride(t *testing.T) {
	plan := chainPlan(t)
	zbv := runspec.Spec{Model: "mlp", Schedule: "zb-v"}
	addrs, links, err := Place{Addrs: []string{"n:29501", "n:29502"}, Stride: 2, Stage: -1, Spec: zbv}.Layout(plan)
	require.NoError(t, err)
	require.Equal(t, []string{"n:29501", "n:29502", "n:29504", "n:29503"}, addrs)
	require.Equal(t, []transport.Link{{A: 0, B: 1}, {A: 2, B: 3}}, links)
	_, _, err = Place{Addrs: []string{"n:65534", "n:65535"}, Stride: 2, Stage: -1, Spec: zbv}.Layout(plan)
	require.EqualError(t, err, "stage_addrs n:65534: its 2 stages would listen up to port 65536: give a first port of at most 65533")
}

// TestLaunched: under a launcher, the process of each rank hosts the
// stages the run's placement gives it, its k-th listening at its first
// one's port+k·Stride (or at its own address when it listens there);
// stages a command line lists must be those, or the error names the
// rank's.
func TestLaunched(t *testing.T) {
	plan := chainPlan(t)
	zbv := runspec.Spec{Model: "mlp", Schedule: "zb-v"}
	torch := Config{Launcher: "torchrun", Rank: 1, Procs: 2, Stride: 2, Addrs: []string{"n:29501", "n:29502"}, Listen: "n:29502"}
	pl := Place{Addrs: torch.Addrs, Stride: 2, Stage: 1, Listen: ":29502", Launcher: "torchrun", Spec: zbv}
	pls, err := Launched(pl, nil, plan.Costs())
	require.NoError(t, err)
	require.Len(t, pls, 2)
	for k, want := range []struct {
		stage  int
		listen string
	}{{1, ":29502"}, {2, ":29504"}} {
		require.Equal(t, want.stage, pls[k].Stage)
		require.Equal(t, want.listen, pls[k].Listen)
		require.Equal(t, pl.Addrs, pls[k].Addrs)
	}
	pl.Listen = ""
	pls, err = Launched(pl, []int{1, 2}, plan.Costs())
	require.NoError(t, err)
	require.Equal(t, []string{"", ""}, []string{pls[0].Listen, pls[1].Listen}, "each at its own address in Layout")
	require.NoError(t, CheckHosted(pls, plan.Costs()))

	_, err = Launched(pl, []int{1}, plan.Costs())
	require.EqualError(t, err, "stage 1: the torchrun environment makes this process rank 1 of 2, which hosts stages 1,2 of 4 placed v")
	pl.Stage = 0 // rank 0
	pls, err = Launched(pl, nil, plan.Costs())
	require.NoError(t, err)
	require.Equal(t, []int{0, 3}, []int{pls[0].Stage, pls[1].Stage}, "rank 0 hosts stage 0, beside the driver")
	three := pl
	three.Addrs = []string{"n:1", "n:2", "n:3"}
	_, err = Launched(three, nil, plan.Costs())
	require.EqualError(t, err, "stages: the torchrun environment starts 3 processes: placed v, every process hosts as many of the plan's 4 stages: give stages a multiple of 3, or processes that divide 4", "the processes are the launcher's, not -stage-addrs'")
	pl.Listen = "fd:3"
	_, err = Launched(pl, nil, plan.Costs())
	require.EqualError(t, err, "listen fd:3: an inherited socket serves one stage, and this process hosts stages 0,3: give :port (its k-th stage listens at port+k·2)")
}
