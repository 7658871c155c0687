package asyncvm

import (
	"context"
	"fmt"
	"iter"
	"runtime"
	"sync"
	"time"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/bnstate"
	"github.com/pipemare/pipemare/internal/stage"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/transport"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
)

// VM runs a plan's stages as a pipeline. It is the driver: it owns the
// schedule and the data, and speaks to one stage runtime per stage only
// through messages (package stage, package transport).
//
// The methods of a VM are called from one goroutine. Between calls the
// pipeline is quiescent — every stage has run every action it can with the
// data supplied so far and waits for more — so the user's learnables, which
// the stages update in place, hold the current weights and can be read.
// Within a call (Run, Stream) the pipeline streams: the driver hands out
// work without waiting for the stages to finish what they have.
type VM struct {
	feeder // the plan, N and the options' data settings
	cfg    config
	p      int
	topo   schedule.Topology
	delay  func(stage int, s schedule.Schedule) float64 // the delay a segment announces

	net      *transport.Local   // in-process stages
	remote   bool               // stages elsewhere (WithEndpoint)
	ep       transport.Endpoint // the driver's
	running  []schedule.Action  // per stage, the first action of its last work
	owners   [][]int            // per stage, the owners of the learnables it replicates
	updates  []int              // per stage, the updates it was handed
	final    []bool             // per stage, it sent its last answer
	stopped  bool
	runtimes []*stage.Runtime
	unshare  func()          // gives the kernels back their goroutines
	ctx      context.Context // the stages'; cancelled to stop them
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	start    time.Time

	pauses      []span        // between calls: the pipeline had nothing to do
	returned    time.Duration // when the last call returned (−1: in a call, or none yet)
	supplied    int           // steps supplied so far
	segs        []*segment    // schedule segments; the last is running
	outstanding int           // Works handed out and not yet answered with Parked
	barrier     bool          // a Work ended at a flush: hand out nothing more until every Work is answered
	heard       []stageHeard  // per stage, what its answers said
	losses      map[int]float64

	mu     sync.Mutex
	err    error // first failure
	closed bool
}

// segment is a run of steps under one schedule. A segment ends when the
// pipeline is drained (Flush, or the switch after a warm-up); the next one
// starts a fresh pipeline.
type segment struct {
	sched     schedule.Schedule
	first     int // first step
	steps     int // steps supplied so far
	lists     [][]schedule.Action
	gen       int                // steps the lists were generated for
	before    [][]int            // before[o][m]: updates stage o runs before its F(m) (updatesBefore)
	frontier  *schedule.Frontier // what the stages can run with the data supplied
	done      []int              // actions handed to each stage
	drained   bool
	startedAt time.Duration
}

// New builds the engine for plan: per stage a runtime with its solver,
// accumulators and compiled programs, serving on an in-process transport,
// started before New returns. Close stops them. If New fails it releases
// what it built.
func New(plan *graphsplit.Plan, opts ...Option) (*VM, error) {
	cfg, err := newConfig(plan, opts)
	if err != nil {
		return nil, err
	}
	return start(plan, cfg)
}

func start(plan *graphsplit.Plan, cfg config) (_ *VM, err error) {
	p := len(plan.Stages)
	vm := &VM{cfg: cfg, p: p, topo: plan.Topology(), heard: make([]stageHeard, p), losses: map[int]float64{}, returned: -1,
		running: make([]schedule.Action, p), final: make([]bool, p), owners: make([][]int, p), updates: make([]int, p)}
	for i := range plan.Stages {
		vm.owners[i] = plan.Owners(i)
	}
	vm.feeder = feeder{plan: plan, n: cfg.n, cfg: &vm.cfg, shared: stage.SharedFeeds(plan)}
	vm.delay = cfg.announce
	if vm.delay == nil {
		vm.delay = func(i int, s schedule.Schedule) float64 {
			if s.Async {
				return float64(schedule.Delay(p, cfg.n, i))
			}
			return 0
		}
	}
	vm.ctx, vm.cancel = context.WithCancel(context.Background())
	if cfg.endpoint != nil {
		vm.ep, vm.remote, vm.start = cfg.endpoint, true, time.Now()
		return vm, nil
	}
	vm.unshare = shareKernels(p, cfg.sched)
	vm.net = transport.NewLocal(p)
	vm.ep = vm.net.Endpoint(transport.Driver)
	defer func() {
		if err != nil {
			vm.release()
		}
	}()
	// Compiling a tape machine puts BatchNorm in training mode, which zeroes
	// its running statistics: keep the ones the model has.
	var bns []*gorgonia.BatchNormOp
	for _, st := range plan.Stages {
		bns = append(bns, bnstate.Of(st.Stateful)...)
	}
	defer bnstate.Save(bns).Restore()
	owners := solverOwners{}
	gates := newTurns(cfg.sched, p, cfg.n)
	for i := range plan.Stages {
		sc, err := cfg.stageConfig(i)
		if err != nil {
			return nil, errors.Wrapf(err, "asyncvm: stage %d", i)
		}
		if gates != nil {
			sc.Turn = func(ctx context.Context, a schedule.Action, sched string) (func(), error) {
				return gates.wait(ctx, i, a, sched)
			}
		}
		if err := owners.claim(i, sc.Solver); err != nil {
			return nil, err
		}
		rt, err := stage.New(plan, i, sc)
		if err != nil {
			return nil, errors.Wrapf(err, "asyncvm: stage %d", i)
		}
		vm.runtimes = append(vm.runtimes, rt)
	}
	vm.start = time.Now()
	for i, rt := range vm.runtimes {
		vm.wg.Add(1)
		go func() {
			defer vm.wg.Done()
			_ = rt.Serve(vm.ctx, vm.net.Endpoint(transport.Peer(i)))
		}()
	}
	return vm, nil
}

// Plan returns the plan the VM runs.
func (vm *VM) Plan() *graphsplit.Plan { return vm.plan }

// Step trains on one minibatch and returns its mean loss. feeds gives a value
// for every data input of the plan (Plan.Feeds) with N times the microbatch
// rows along axis 0; Step checks them all before any stage runs. With an
// asynchronous schedule some backwards and the update of this minibatch may
// still be pending when Step returns; they run during later calls or Flush.
func (vm *VM) Step(ctx context.Context, feeds map[*gorgonia.Node]gorgonia.Value) (float64, error) {
	losses, err := vm.Run(ctx, []map[*gorgonia.Node]gorgonia.Value{feeds})
	if err != nil {
		return 0, err
	}
	return losses[0], nil
}

// Run trains on several minibatches in one go and returns their mean losses
// in order. It checks every minibatch's feeds before any stage runs, then
// streams them as Stream does: the pipeline never stalls between them.
func (vm *VM) Run(ctx context.Context, minibatches []map[*gorgonia.Node]gorgonia.Value) ([]float64, error) {
	if err := vm.usable(); err != nil {
		return nil, err
	}
	sliced := make([][][]gorgonia.Value, len(minibatches))
	for k, feeds := range minibatches {
		s, err := vm.sliceFeeds(feeds, vm.supplied+k)
		if err != nil {
			return nil, errors.Wrapf(err, "asyncvm: step %d", vm.supplied+k)
		}
		sliced[k] = s
	}
	losses := make([]float64, 0, len(minibatches))
	next := func() ([][]gorgonia.Value, bool, error) {
		if len(sliced) == 0 {
			return nil, false, nil
		}
		s := sliced[0]
		sliced = sliced[1:]
		return s, true, nil
	}
	err := vm.stream(ctx, next, func(_ int, loss float64) { losses = append(losses, loss) })
	return losses, err
}

// Stream trains on every minibatch src yields, in order, and calls each
// with the step and mean loss of every minibatch, in order, as soon as the
// last stage has computed it. The driver reads src ahead of the pipeline,
// so that no stage waits for the caller between minibatches: the pipeline
// drains only where the schedule flushes, and it is quiescent (as between
// any two calls) when Stream returns. Each minibatch's feeds are checked,
// as Step checks them, when they are read.
//
// When src yields an error, or a minibatch that does not fit the plan,
// Stream reads no further, trains the minibatches read before it (each
// gets their losses) and returns that error, naming the step; the VM stays
// usable. A failure of a stage, a link or ctx fails the VM, as in Run.
func (vm *VM) Stream(ctx context.Context, src iter.Seq2[map[*gorgonia.Node]gorgonia.Value, error], each func(step int, loss float64)) error {
	if err := vm.usable(); err != nil {
		return err
	}
	pull, stop := iter.Pull2(src)
	defer stop()
	next := func() ([][]gorgonia.Value, bool, error) {
		feeds, err, ok := pull()
		if !ok {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, errors.Wrapf(err, "asyncvm: reading step %d", vm.supplied)
		}
		s, err := vm.sliceFeeds(feeds, vm.supplied)
		if err != nil {
			return nil, false, errors.Wrapf(err, "asyncvm: step %d", vm.supplied)
		}
		return s, true, nil
	}
	return vm.stream(ctx, next, each)
}

// stream is Stream on minibatches already cut into microbatches by next.
// It supplies minibatches until readAhead of them wait beyond the last one
// whose loss is known, hands out the actions they enable, and takes the
// stages' answers one at a time, delivering losses as they complete.
func (vm *VM) stream(ctx context.Context, next func() ([][]gorgonia.Value, bool, error), each func(step int, loss float64)) error {
	defer vm.busy()()
	reported := vm.supplied
	ahead := vm.readAhead()
	var srcErr error
	for {
		if err := ctx.Err(); err != nil {
			return vm.failWith(errors.Wrap(err, "asyncvm: stopped by the caller's context"))
		}
		// Keep readAhead minibatches beyond the last loss handed out
		// supplied and their work handed out, so that no stage runs dry
		// while each runs.
		fill := func() error {
			for ahead > 0 && vm.supplied < reported+ahead {
				s, ok, err := next()
				if err != nil || !ok {
					srcErr, ahead = err, 0 // read no further
					break
				}
				if err := vm.supply(ctx, s); err != nil {
					return err
				}
			}
			return vm.advance(ctx, false)
		}
		if err := fill(); err != nil {
			return err
		}
		for reported < vm.supplied && ctx.Err() == nil {
			loss, ok := vm.lossOf(reported)
			if !ok {
				break
			}
			reported++
			if err := fill(); err != nil {
				return err
			}
			each(reported-1, loss)
		}
		if vm.outstanding == 0 {
			if err := ctx.Err(); err != nil {
				return vm.failWith(errors.Wrap(err, "asyncvm: stopped by the caller's context"))
			}
			if reported < vm.supplied {
				return vm.failWith(errors.Errorf("asyncvm: internal: the pipeline is idle without the loss of step %d", reported))
			}
			if ahead == 0 {
				return srcErr
			}
			continue
		}
		if _, err := vm.await(ctx); err != nil {
			return err
		}
	}
}

// readAhead is how many minibatches the driver supplies beyond the last one
// whose loss is known: enough for the first stage, which runs 2(P−1)+1
// forwards ahead of the last one, never to wait for data.
func (vm *VM) readAhead() int { return (2*vm.p+vm.n-1)/vm.n + 1 }

// supply sends the stages one minibatch's microbatches.
func (vm *VM) supply(ctx context.Context, micro [][]gorgonia.Value) error {
	k := vm.supplied
	for j, v := range micro {
		if err := vm.sendData(ctx, k*vm.n+j, v, false); err != nil {
			return err
		}
	}
	vm.supplied++
	vm.segmentFor(k).steps++
	return nil
}

// lossOf is step k's mean loss, once the last stage has sent every one of
// its microbatches' losses (which it then forgets).
func (vm *VM) lossOf(k int) (float64, bool) {
	sum := 0.0
	for j := 0; j < vm.n; j++ {
		l, ok := vm.losses[k*vm.n+j]
		if !ok {
			return 0, false
		}
		sum += l
	}
	for j := 0; j < vm.n; j++ {
		delete(vm.losses, k*vm.n+j)
	}
	return sum / float64(vm.n), true
}

// sendData gives every stage that reads data its share of microbatch m's
// values (in plan.Feeds order), which the VM owns. A message none of whose
// values goes to another stage is marked Own: the stage (in one process)
// or the transport (once it copied them out) returns them to the pools.
func (vm *VM) sendData(ctx context.Context, m int, vals []gorgonia.Value, eval bool) error {
	for i := range vm.plan.Stages {
		idx := stage.DataInputs(vm.plan, i)
		if len(idx) == 0 {
			continue
		}
		mine := make([]gorgonia.Value, len(idx))
		own := true
		for q, fi := range idx {
			mine[q] = vals[fi]
			own = own && !vm.shared[fi]
		}
		msg := transport.Message{Kind: transport.Control, To: transport.Peer(i), Micro: m, Values: mine, Body: stage.Data{Micro: m, Eval: eval}, Own: own}
		if err := vm.ep.Send(ctx, msg); err != nil {
			return vm.failWith(sendFailure(err, i, fmt.Sprintf("sending it the data of microbatch %d", m)))
		}
	}
	return nil
}

// Flush runs every pending backward and update, so the learnables reflect
// every minibatch supplied so far. An asynchronous pipeline restarts (with a
// new warm-up) at the next Step.
func (vm *VM) Flush(ctx context.Context) error {
	if err := vm.usable(); err != nil {
		return err
	}
	done := vm.busy()
	err := vm.settle(ctx, true)
	done()
	if err != nil {
		return err
	}
	return vm.Pull(ctx)
}

// span is an interval of time from the VM's start.
type span struct{ from, to time.Duration }

// busy marks the start of a call that trains and returns the function that
// marks its end: the time between two such calls is a pause (Report.Training).
func (vm *VM) busy() func() {
	if vm.returned >= 0 {
		vm.pauses = append(vm.pauses, span{vm.returned, time.Since(vm.start)})
	}
	vm.returned = -1
	return func() { vm.returned = time.Since(vm.start) }
}

// paused is the time of the pauses within [from, to).
func (vm *VM) paused(from, to time.Duration) time.Duration {
	sum := time.Duration(0)
	for _, p := range vm.pauses {
		if s, e := max(p.from, from), min(p.to, to); e > s {
			sum += e - s
		}
	}
	return sum
}

// segmentFor returns the segment step k belongs to, opening a new one when
// k starts a new schedule (after the warm-up, or after a drain).
func (vm *VM) segmentFor(k int) *segment {
	want := vm.cfg.sched
	if k < vm.cfg.warmup {
		want = vm.cfg.warmSch
	}
	if n := len(vm.segs); n > 0 {
		s := vm.segs[n-1]
		if !s.drained && s.sched.Name == want.Name {
			return s
		}
	}
	s := &segment{sched: want, first: k, frontier: schedule.NewFrontier(vm.topo, nil), done: make([]int, vm.p), startedAt: time.Since(vm.start)}
	vm.segs = append(vm.segs, s)
	return s
}

// settle hands out every action the data supplied allows (drain: every
// action of every segment, the pipeline's end) and waits until the stages
// have run them all: afterwards the pipeline is quiescent.
func (vm *VM) settle(ctx context.Context, drain bool) error {
	for {
		if err := vm.advance(ctx, drain); err != nil {
			return err
		}
		if vm.outstanding == 0 {
			return nil
		}
		if _, err := vm.await(ctx); err != nil {
			return err
		}
	}
}

// advance hands every stage the actions it can run with the data supplied
// (drain: the rest of every segment), without waiting for them. A stage's
// slice ends at a flush, and nothing more is handed out until every stage
// has run its slice through that flush: a flush is a barrier. A segment
// after another starts only once the earlier one is handed out to its end.
func (vm *VM) advance(ctx context.Context, drain bool) error {
	if vm.barrier {
		if vm.outstanding > 0 {
			return nil
		}
		vm.barrier = false
	}
	for si, seg := range vm.segs {
		if seg.drained {
			continue
		}
		final := drain || si < len(vm.segs)-1
		var lists [][]schedule.Action
		limit := seg.steps * vm.n
		if final {
			lists = seg.sched.Actions(vm.p, vm.n, seg.steps)
			limit = -1
		} else {
			need := seg.steps + (2*vm.p+vm.n)/vm.n + 1
			if seg.lists == nil || seg.gen < need {
				seg.gen = max(2*seg.gen, need)
				seg.lists = seg.sched.Actions(vm.p, vm.n, seg.gen)
			}
			lists = seg.lists
		}
		target := seg.frontier.Advance(lists, limit)
		if final {
			for i := range lists {
				if target[i] != len(lists[i]) {
					return vm.failWith(errors.Errorf("asyncvm: internal: segment %s cannot drain: stage %d stops at action %d of %d", seg.sched.Name, i, target[i], len(lists[i])))
				}
			}
		}
		cut := make([]int, vm.p)
		for i := range lists {
			cut[i] = throughFlush(lists[i], seg.done[i], target[i])
			vm.barrier = vm.barrier || cut[i] > seg.done[i] && lists[i][cut[i]-1].Op == schedule.OpFlush
		}
		if err := vm.handOut(ctx, seg, lists, cut); err != nil {
			return err
		}
		complete := true
		for i := range lists {
			complete = complete && seg.done[i] == len(lists[i])
		}
		if final && complete {
			seg.drained = true
			seg.lists = nil
		}
		if vm.barrier || !seg.drained {
			return nil
		}
	}
	return nil
}

// throughFlush is where a stage's slice [from, to) of list ends: after its
// first flush, or at to.
func throughFlush(list []schedule.Action, from, to int) int {
	for t := from; t < to; t++ {
		if list[t].Op == schedule.OpFlush {
			return t + 1
		}
	}
	return to
}

// handOut sends each stage its next slice of actions, [seg.done, cut), as
// one Work; each stage answers it with Parked once it has run it.
func (vm *VM) handOut(ctx context.Context, seg *segment, lists [][]schedule.Action, cut []int) error {
	for i := range lists {
		if cut[i] == seg.done[i] {
			continue
		}
		acts := make([]schedule.Action, 0, cut[i]-seg.done[i])
		var shared [][]int
		for _, a := range lists[i][seg.done[i]:cut[i]] {
			if len(vm.owners[i]) > 0 {
				var versions []int
				if a.Op == schedule.OpForward {
					for _, o := range vm.owners[i] {
						versions = append(versions, seg.first+seg.updatesBefore(lists, o, a.Micro))
					}
				}
				shared = append(shared, versions)
			}
			if a.Op == schedule.OpUpdate {
				vm.updates[i]++
			}
			a.Micro += seg.first * vm.n
			a.Step += seg.first
			acts = append(acts, a)
		}
		seg.done[i] = cut[i]
		vm.running[i] = acts[0]
		w := stage.Work{Segment: vm.segmentInfo(i, seg.sched), Actions: acts, Shared: shared}
		if err := vm.ep.Send(ctx, transport.Message{Kind: transport.Control, To: transport.Peer(i), Body: w}); err != nil {
			return vm.failWith(sendFailure(err, i, "ordering "+vm.work(acts[0])))
		}
		vm.outstanding++
	}
	return nil
}

// updatesBefore is how many updates stage o runs before its forward of
// segment microbatch m in lists (which extend the lists of earlier calls).
func (seg *segment) updatesBefore(lists [][]schedule.Action, o, m int) int {
	if seg.before == nil {
		seg.before = make([][]int, len(lists))
	}
	if m >= len(seg.before[o]) {
		seg.before[o] = seg.before[o][:0]
		u := 0
		for _, a := range lists[o] {
			switch a.Op {
			case schedule.OpUpdate:
				u++
			case schedule.OpForward:
				seg.before[o] = append(seg.before[o], u)
			}
		}
	}
	return seg.before[o][m]
}

// segmentInfo is what stage i needs to know of schedule s.
func (vm *VM) segmentInfo(i int, s schedule.Schedule) stage.Segment {
	return stage.Segment{Schedule: s.Name, Stale: s.Async || vm.cfg.delays != nil, StashWeights: s.StashWeights, ForwardDelay: s.ForwardDelay, Delay: vm.delay(i, s)}
}

// await takes the next answer of any stage: Parked or Evaluated. A Failed
// answer fails the VM.
func (vm *VM) await(ctx context.Context) (transport.Message, error) {
	m, err := vm.ep.Recv(ctx, transport.AnyPeer, transport.Reply)
	if err != nil {
		if ctx.Err() != nil {
			return m, vm.failWith(errors.Wrap(ctx.Err(), "asyncvm: stopped by the caller's context"))
		}
		return m, vm.failWith(vm.linkFailure(err))
	}
	i := int(m.From)
	switch b := m.Body.(type) {
	case stage.Parked:
		vm.hear(i, b.Report)
		vm.outstanding--
	case stage.Evaluated, stage.Saved, stage.Restored, stage.Refused, stage.Pulled:
	case stage.Failed:
		vm.hear(i, b.Report)
		vm.final[i] = true
		err := stageFailure(i, b)
		if b.Peer >= 0 && vm.remote { // a consequence: look for its cause
			if cause := vm.rootCause(); cause != nil {
				err = cause
			}
		}
		return m, vm.failWith(err)
	case stage.Stopped:
		vm.hear(i, b.Report)
		vm.final[i] = true
		return m, vm.failWith(errors.Errorf("asyncvm: stage %d stopped", i))
	default:
		return m, vm.failWith(errors.Errorf("asyncvm: internal: stage %d answered %T", i, m.Body))
	}
	return m, nil
}

func (vm *VM) usable() error {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	if vm.closed {
		return ErrClosed
	}
	return vm.err
}

// failWith records the first failure, stops every stage and returns the
// failure.
func (vm *VM) failWith(err error) error {
	vm.mu.Lock()
	if vm.err == nil {
		vm.err = err
	}
	err = vm.err
	vm.mu.Unlock()
	vm.stop()
	return err
}

// stop ends every stage's Serve and collects their last answers.
func (vm *VM) stop() {
	if vm.stopped {
		return
	}
	vm.stopped = true
	vm.cancel()
	if vm.remote {
		vm.stopRemote()
		return
	}
	vm.wg.Wait()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		m, err := vm.ep.Recv(ctx, transport.AnyPeer, transport.Reply)
		cancel()
		if err != nil {
			return
		}
		switch b := m.Body.(type) {
		case stage.Stopped:
			vm.hear(int(m.From), b.Report)
		case stage.Failed:
			vm.hear(int(m.From), b.Report)
		case stage.Parked:
			vm.hear(int(m.From), b.Report)
		}
	}
}

// Close stops every stage and waits for them, then releases the plan's
// compiled programs. It is safe to call more than once; after Close every
// method returns ErrClosed.
func (vm *VM) Close() error {
	vm.mu.Lock()
	if vm.closed {
		vm.mu.Unlock()
		return nil
	}
	vm.closed = true
	vm.mu.Unlock()
	vm.stop()
	vm.release()
	return nil
}

// release frees what start built.
func (vm *VM) release() {
	vm.cancel()
	vm.wg.Wait()
	for _, rt := range vm.runtimes {
		rt.Close()
	}
	if vm.net != nil {
		vm.net.Close()
	}
	if vm.unshare != nil {
		vm.unshare()
		vm.unshare = nil
	}
	if vm.remote {
		_ = vm.ep.Close()
	}
	runtime.GC()
}
