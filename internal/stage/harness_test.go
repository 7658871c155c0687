package stage

import (
	"context"
	"math"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/tensorutil"
	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/transport"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// This file is the tests' driver: stages of a plan served on an in-process
// transport, and the test speaking to them as asyncvm's driver does —
// Data, then Work, Evaluate, Pull, Save, Restore, Stop — or playing a
// stage itself, and plain Gorgonia to compare what they compute with.

// answerTimeout bounds every wait for a message: a stage that never answers
// fails the test instead of hanging it.
const answerTimeout = 30 * time.Second

// lr is the learning rate of the tests' default solver, vanilla SGD.
const lr = 0.1

// setup says what start serves.
type setup struct {
	build  testmodels.Builder // the model; the test MLP when nil
	stages int                // the plan's stages (graphsplit.Stages); 1 when 0
	n      int                // microbatches per step; 1 when 0
	// config is stage i's Config; Microbatches is set to n, and Solver to
	// vanilla SGD with learning rate lr when it is nil.
	config func(i int) Config
	// played are the stages the test plays itself: they have an endpoint
	// but no runtime.
	played []int
	// wrap, when set, is the endpoint stage i serves on, given its own.
	wrap func(i int, ep transport.Endpoint) transport.Endpoint
}

// pipeline is a plan of a fresh model (float64, microbatches of 4 rows,
// seed 1) whose stages are served, each by its own Runtime, on an
// in-process transport whose driver is the test.
type pipeline struct {
	t      *testing.T
	model  *testmodels.Model
	plan   *graphsplit.Plan
	n      int
	net    *transport.Local
	driver transport.Endpoint
	rts    []*Runtime // nil for a stage the test plays
	exits  []chan error
	exited map[int]error
	cancel context.CancelFunc // ends the stages' context
}

// start builds the pipeline s describes and serves its stages until the
// test ends: then it cancels their context, closes the transport, waits for
// every Serve to return and closes the runtimes.
func start(t *testing.T, s setup) *pipeline {
	t.Helper()
	if s.build == nil {
		s.build = testmodels.MLP
	}
	s.stages, s.n = max(s.stages, 1), max(s.n, 1)
	m, err := s.build(tensor.Float64, 4, 1)
	require.NoError(t, err)
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.Stages(s.stages))
	require.NoError(t, err)
	require.Len(t, plan.Stages, s.stages)
	p := &pipeline{t: t, model: m, plan: plan, n: s.n, net: transport.NewLocal(s.stages), exits: make([]chan error, s.stages), exited: map[int]error{}}
	p.driver = p.net.Endpoint(transport.Driver)
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.rts = make([]*Runtime, s.stages)
	for i := range plan.Stages {
		if slices.Contains(s.played, i) {
			continue
		}
		var cfg Config
		if s.config != nil {
			cfg = s.config(i)
		}
		cfg.Microbatches = s.n
		if cfg.Solver == nil {
			cfg.Solver = gorgonia.NewVanillaSolver(gorgonia.WithLearnRate(lr))
		}
		rt, err := New(plan, i, cfg)
		require.NoError(t, err)
		p.rts[i] = rt
	}
	for i, rt := range p.rts {
		if rt == nil {
			continue
		}
		ep := p.net.Endpoint(transport.Peer(i))
		if s.wrap != nil {
			ep = s.wrap(i, ep)
		}
		p.exits[i] = make(chan error, 1)
		go func() { p.exits[i] <- rt.Serve(ctx, ep) }()
	}
	t.Cleanup(func() {
		cancel()
		p.net.Close()
		for i, rt := range p.rts {
			if rt == nil {
				continue
			}
			if _, ok := p.exited[i]; !ok {
				select {
				case err := <-p.exits[i]:
					p.exited[i] = err
				case <-time.After(answerTimeout):
					t.Errorf("stage %d: Serve did not return after its transport closed", i)
					continue
				}
			}
			rt.Close()
		}
	})
	return p
}

// exit is what stage i's Serve returned, waiting for it.
func (p *pipeline) exit(i int) error {
	p.t.Helper()
	if err, ok := p.exited[i]; ok {
		return err
	}
	select {
	case err := <-p.exits[i]:
		p.exited[i] = err
		return err
	case <-time.After(answerTimeout):
		p.t.Fatalf("stage %d: Serve did not return", i)
		return nil
	}
}

// send sends stage i an order.
func (p *pipeline) send(i int, body any, vals ...gorgonia.Value) {
	p.t.Helper()
	msg := transport.Message{Kind: transport.Control, To: transport.Peer(i), Values: vals, Body: body}
	if d, ok := body.(Data); ok {
		msg.Micro = d.Micro
	}
	require.NoError(p.t, p.driver.Send(context.Background(), msg))
}

// answer is stage i's next answer.
func (p *pipeline) answer(i int) transport.Message {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), answerTimeout)
	defer cancel()
	m, err := p.driver.Recv(ctx, transport.Peer(i), transport.Reply)
	require.NoError(p.t, err, "stage %d's answer", i)
	require.Equal(p.t, transport.Peer(i), m.From)
	require.Equal(p.t, transport.Driver, m.To)
	return m
}

// ask sends stage i an order and returns its answer.
func (p *pipeline) ask(i int, body any, vals ...gorgonia.Value) transport.Message {
	p.t.Helper()
	p.send(i, body, vals...)
	return p.answer(i)
}

// parked is stage i's next answer, which must be Parked.
func (p *pipeline) parked(i int) Progress {
	p.t.Helper()
	m := p.answer(i)
	pk, ok := m.Body.(Parked)
	require.True(p.t, ok, "stage %d answered %T %+v, want Parked", i, m.Body, m.Body)
	require.Equal(p.t, pk.Report.Stats.Version, m.Version, "the answer carries the stage's version")
	return pk.Report
}

// work orders stage i to run acts in segment seg and returns its Parked
// report.
func (p *pipeline) work(i int, seg Segment, acts ...schedule.Action) Progress {
	p.t.Helper()
	p.send(i, Work{Segment: seg, Actions: acts})
	return p.parked(i)
}

// pull returns copies of stage i's learnables (Stage.Learnables order)
// and, after them, its BatchNorm statistics.
func (p *pipeline) pull(i int) []gorgonia.Value {
	p.t.Helper()
	m := p.ask(i, Pull{})
	require.IsType(p.t, Pulled{}, m.Body)
	require.Len(p.t, m.Values, len(p.plan.Stages[i].Learnables)+2*len(p.rts[i].bns))
	return m.Values
}

// weights are the learnables of every stage, pulled, in Plan.Learnables
// order (the owner's value of a shared one).
func (p *pipeline) weights() []gorgonia.Value {
	p.t.Helper()
	out := make([]gorgonia.Value, len(p.plan.Learnables))
	for i, st := range p.plan.Stages {
		vals := p.pull(i)
		for j, at := range st.LearnableIndex {
			if !st.Replica(j) {
				out[at] = vals[j]
			}
		}
	}
	return out
}

// stop sends stage i Stop, checks that it answers Stopped and that Serve
// returns nil, and returns the last report.
func (p *pipeline) stop(i int) Progress {
	p.t.Helper()
	m := p.ask(i, Stop{})
	s, ok := m.Body.(Stopped)
	require.True(p.t, ok, "stage %d answered %T %+v to Stop", i, m.Body, m.Body)
	require.NoError(p.t, p.exit(i))
	return s.Report
}

// peer is the endpoint of stage i, which the test plays.
func (p *pipeline) peer(i int) transport.Endpoint { return p.net.Endpoint(transport.Peer(i)) }

// micros returns count deterministic microbatches drawn from seed, each
// in Plan.Feeds order.
func (p *pipeline) micros(seed int64, count int) [][]gorgonia.Value {
	rng := rand.New(rand.NewSource(seed))
	out := make([][]gorgonia.Value, count)
	for k := range out {
		batch := p.model.Batch(rng)
		out[k] = make([]gorgonia.Value, len(p.plan.Feeds))
		for fi, f := range p.plan.Feeds {
			for j, in := range p.model.Inputs {
				if in == f.Node {
					out[k][fi] = batch[j]
				}
			}
			require.NotNil(p.t, out[k][fi], "feed %s", f.Name)
		}
	}
	return out
}

// feed sends every served stage that reads data its share of microbatch
// m's values (in Plan.Feeds order), as the driver does.
func (p *pipeline) feed(m int, vals []gorgonia.Value, eval bool) {
	p.t.Helper()
	for i := range p.plan.Stages {
		idx := DataInputs(p.plan, i)
		if len(idx) == 0 || p.rts[i] == nil {
			continue
		}
		mine := make([]gorgonia.Value, len(idx))
		for q, fi := range idx {
			mine[q] = vals[fi]
		}
		p.send(i, Data{Micro: m, Eval: eval}, mine...)
	}
}

// steps feeds the microbatches of steps [from, to) and runs them on every
// stage with schedule s's action lists (absolute microbatch and step
// numbers; for a stage that replicates learnables, the owners' versions
// each forward reads), in one Work per stage, and returns the Parked
// reports.
func (p *pipeline) steps(s schedule.Schedule, data [][]gorgonia.Value, from, to int) []Progress {
	p.t.Helper()
	for m := from * p.n; m < to*p.n; m++ {
		p.feed(m, data[m], false)
	}
	lists := s.Actions(len(p.plan.Stages), p.n, to-from)
	seg := Segment{Schedule: s.Name, Stale: s.Async, StashWeights: s.StashWeights, ForwardDelay: s.ForwardDelay}
	for i, list := range lists {
		acts := make([]schedule.Action, len(list))
		var shared [][]int
		owners := p.plan.Owners(i)
		for j, a := range list {
			if len(owners) > 0 { // the owners' versions its forwards read
				var versions []int
				if a.Op == schedule.OpForward {
					for _, o := range owners {
						versions = append(versions, from+updatesBefore(lists[o], a.Micro))
					}
				}
				shared = append(shared, versions)
			}
			a.Micro += from * p.n
			a.Step += from
			acts[j] = a
		}
		p.send(i, Work{Segment: seg, Actions: acts, Shared: shared})
	}
	out := make([]Progress, len(lists))
	for i := range lists {
		out[i] = p.parked(i)
	}
	return out
}

// updatesBefore is how many updates list runs before its forward of
// microbatch m.
func updatesBefore(list []schedule.Action, m int) int {
	u := 0
	for _, a := range list {
		switch {
		case a.Op == schedule.OpUpdate:
			u++
		case a.Op == schedule.OpForward && a.Micro == m:
			return u
		}
	}
	return u
}

// losses are the losses of reports, by microbatch.
func losses(reports ...Progress) map[int]float64 {
	out := map[int]float64{}
	for _, r := range reports {
		for _, l := range r.Losses {
			out[l.Micro] = l.Value
		}
	}
	return out
}

// actions are the actions of a report's events, in order.
func actions(r Progress) []schedule.Action {
	var out []schedule.Action
	for _, e := range r.Events {
		out = append(out, e.Action)
	}
	return out
}

// reference is plain Gorgonia on a fresh copy of a pipeline's model (same
// builder, seed and so initial weights): the whole graph on a tape
// machine, with the gradients of the cost with respect to the learnables,
// and the values of the nodes it was asked to read.
type reference struct {
	t      *testing.T
	m      *testmodels.Model
	feeds  []*gorgonia.Node // parallel to Plan.Feeds
	vm     gorgonia.VM
	cost   gorgonia.Value
	grads  []gorgonia.Value // the learnables'
	nodes  []gorgonia.Value
	model  []gorgonia.ValueGrad
	acc    []*tensor.Dense
	solver gorgonia.Solver
}

// reference builds p's model again and plain Gorgonia's training of it,
// reading the nodes of p's graph with the given keys. It steps with
// vanilla SGD at rate lr.
func (p *pipeline) reference(build testmodels.Builder, keys ...int64) *reference {
	p.t.Helper()
	t := p.t
	if build == nil {
		build = testmodels.MLP
	}
	m, err := build(tensor.Float64, 4, 1)
	require.NoError(t, err)
	r := &reference{t: t, m: m, solver: gorgonia.NewVanillaSolver(gorgonia.WithLearnRate(lr))}
	for _, f := range p.plan.Feeds {
		for _, in := range m.Inputs {
			if in.Name() == f.Name {
				r.feeds = append(r.feeds, in)
			}
		}
	}
	require.Len(t, r.feeds, len(p.plan.Feeds))
	r.nodes = make([]gorgonia.Value, len(keys))
	for i, k := range keys {
		var found *gorgonia.Node
		for _, n := range m.Graph.AllNodes() {
			if n.ID() == k {
				found = n
			}
		}
		orig, _ := p.plan.Locate(k)
		require.NotNil(t, found, "node %d", k)
		require.Equal(t, orig.Name(), found.Name(), "the copy's node %d is the original's", k)
		gorgonia.Read(found, &r.nodes[i])
	}
	grads, err := gorgonia.Grad(m.Cost, m.Learnables...)
	require.NoError(t, err)
	r.grads = make([]gorgonia.Value, len(grads))
	for i, g := range grads {
		gorgonia.Read(g, &r.grads[i])
	}
	gorgonia.Read(m.Cost, &r.cost)
	r.vm = gorgonia.NewTapeMachine(m.Graph)
	t.Cleanup(func() { r.vm.Close() })
	for _, l := range m.Learnables {
		a := tensorutil.Zeros(l.Dtype(), l.Shape())
		r.acc = append(r.acc, a)
		r.model = append(r.model, &valueGrad{name: l.Name(), value: l.Value(), grad: a}) // the stage's own type
	}
	return r
}

// run runs the graph on one microbatch (in Plan.Feeds order) and returns
// the loss, the learnables' gradients and the nodes' values, all copies.
func (r *reference) run(micro []gorgonia.Value) (float64, []gorgonia.Value, []gorgonia.Value) {
	r.t.Helper()
	for i, in := range r.feeds {
		v, err := tensorutil.Clone(micro[i])
		require.NoError(r.t, err)
		require.NoError(r.t, gorgonia.Let(in, v))
	}
	r.vm.Reset()
	require.NoError(r.t, r.vm.RunAll())
	loss, err := tensorutil.Scalar(r.cost)
	require.NoError(r.t, err)
	return loss, clones(r.t, r.grads), clones(r.t, r.nodes)
}

// step trains on the microbatches of one step as the pipeline does — the
// mean gradient, one solver step — and returns their losses.
func (r *reference) step(micros [][]gorgonia.Value) []float64 {
	r.t.Helper()
	var out []float64
	for _, mb := range micros {
		loss, grads, _ := r.run(mb)
		out = append(out, loss)
		for i, a := range r.acc {
			require.NoError(r.t, tensorutil.AddInto(a, grads[i]))
		}
	}
	for _, a := range r.acc {
		d := a.Data().([]float64)
		for i := range d {
			d[i] /= float64(len(micros))
		}
	}
	require.NoError(r.t, r.solver.Step(r.model))
	for _, a := range r.acc {
		a.Zero()
	}
	return out
}

// weights are copies of the reference's learnables.
func (r *reference) weights() []gorgonia.Value {
	vals := make([]gorgonia.Value, len(r.m.Learnables))
	for i, l := range r.m.Learnables {
		vals[i] = l.Value()
	}
	return clones(r.t, vals)
}

func clones(t *testing.T, vals []gorgonia.Value) []gorgonia.Value {
	out := make([]gorgonia.Value, len(vals))
	for i, v := range vals {
		if v == nil {
			continue
		}
		c, err := tensorutil.Clone(v)
		require.NoError(t, err)
		out[i] = c
	}
	return out
}

// floats are v's elements as float64s.
func floats(t *testing.T, v gorgonia.Value) []float64 {
	switch d := v.Data().(type) {
	case []float64:
		return d
	case float64:
		return []float64{d}
	}
	t.Fatalf("unsupported %T", v.Data())
	return nil
}

// requireClose checks that got and want hold the same numbers, within tol
// of the largest magnitude of want's, tensor by tensor.
func requireClose(t *testing.T, want, got []gorgonia.Value, tol float64, what string) {
	t.Helper()
	require.Len(t, got, len(want), what)
	for i := range want {
		w, g := floats(t, want[i]), floats(t, got[i])
		require.Equal(t, want[i].Shape().TotalSize(), got[i].Shape().TotalSize(), "%s %d", what, i)
		scale := 1e-30
		for _, x := range w {
			scale = math.Max(scale, math.Abs(x))
		}
		for j := range w {
			require.LessOrEqual(t, math.Abs(w[j]-g[j])/scale, tol, "%s %d, element %d: %v, want %v", what, i, j, g[j], w[j])
		}
	}
}

// requireBits checks that got and want are equal bit for bit.
func requireBits(t *testing.T, want, got []gorgonia.Value, what string) {
	t.Helper()
	require.Len(t, got, len(want), what)
	for i := range want {
		w, g := floats(t, want[i]), floats(t, got[i])
		require.Len(t, g, len(w), "%s %d", what, i)
		for j := range w {
			require.Equal(t, math.Float64bits(w[j]), math.Float64bits(g[j]), "%s %d, element %d: %v, want %v", what, i, j, g[j], w[j])
		}
	}
}
