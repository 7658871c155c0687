package asyncvm

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
)

// VM runs a plan's stages as a pipeline, one worker goroutine per stage.
//
// The methods of a VM are called from one goroutine. Between calls the
// pipeline is quiescent — every worker has run every action it can with the
// data supplied so far and waits for more — so the user's learnables, which
// the stages update in place, hold the current weights and can be read.
type VM struct {
	feeder // the plan, N and the options' data settings
	cfg    config
	p      int
	topo   Topology
	links  []*link

	workers []*worker
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	parked  chan int // a worker finished its round
	barrier *barrier
	start   time.Time

	// Data supplied so far: feeds[m] holds microbatch m's values in the
	// order of plan.Feeds. Written by the caller's goroutine between rounds.
	feeds    map[int][]gorgonia.Value
	supplied int // minibatches

	segs []*segment // schedule segments; the last is running

	mu     sync.Mutex
	err    error // first failure
	closed bool
}

// segment is a run of minibatches under one schedule. A segment ends when
// the pipeline is drained (Flush, or the switch after a warm-up); the next
// one starts a fresh pipeline.
type segment struct {
	sched     Schedule
	first     int        // first minibatch
	steps     int        // minibatches supplied so far
	lists     [][]Action // generated for gen minibatches
	gen       int
	prefix    *prefix
	done      []int // actions handed to each worker
	drained   bool
	startedAt time.Duration
}

// New builds the engine for plan: per stage its solver, gradient
// accumulators, links to the stages it exchanges tensors with, and a worker
// goroutine, compiled and started before New returns. Close stops them.
func New(plan *graphsplit.Plan, opts ...Option) (*VM, error) {
	if plan == nil || len(plan.Stages) == 0 {
		return nil, errors.New("asyncvm: plan has no stages")
	}
	if err := refuseShared(plan); err != nil {
		return nil, err
	}
	cfg := config{sched: PipeMare, n: 1, seed: 1}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.n < 1 {
		return nil, errors.Errorf("asyncvm: WithMicrobatches(%d): need at least one microbatch per minibatch", cfg.n)
	}
	if cfg.sched.Actions == nil {
		return nil, errors.New("asyncvm: WithSchedule: schedule has no action lists")
	}
	if cfg.warmup < 0 || (cfg.warmup > 0 && (cfg.warmSch.Actions == nil || cfg.warmSch.Async)) {
		return nil, errors.New("asyncvm: WithWarmup needs a non-negative number of steps and a synchronous schedule (OneFOneB or GPipe)")
	}
	if cfg.solver == nil {
		cfg.solver = func(int) gorgonia.Solver { return gorgonia.NewVanillaSolver(gorgonia.WithLearnRate(0.01)) }
	}
	for _, m := range cfg.masks {
		if m.keep <= 0 || m.keep > 1 {
			return nil, errors.Errorf("asyncvm: WithDropoutMask(%s, %g): keep must be in (0, 1]", m.node.Name(), m.keep)
		}
		if feedIndex(plan, m.node) < 0 {
			return nil, errors.Errorf("asyncvm: WithDropoutMask(%s): not a data input of the plan", m.node.Name())
		}
	}
	vm := &VM{
		cfg: cfg, p: len(plan.Stages),
		parked: make(chan int, len(plan.Stages)),
		feeds:  make(map[int][]gorgonia.Value),
	}
	vm.feeder = feeder{plan: plan, n: cfg.n, cfg: &vm.cfg}
	vm.ctx, vm.cancel = context.WithCancel(context.Background())
	vm.barrier = newBarrier(vm.p)
	vm.topo, vm.links = buildLinks(plan, vm.inFlightBound())
	// Compiling a tape machine puts BatchNorm in training mode, which zeroes
	// its running statistics: keep the ones the model has.
	restore := keepBatchNormStats(plan)
	defer restore()
	for i, st := range plan.Stages {
		w, err := newWorker(vm, st)
		if err != nil {
			vm.cancel()
			return nil, errors.Wrapf(err, "asyncvm: stage %d", i)
		}
		vm.workers = append(vm.workers, w)
	}
	vm.start = time.Now()
	for _, w := range vm.workers {
		vm.wg.Add(1)
		go w.run()
	}
	return vm, nil
}

// inFlightBound is the most microbatches any stage holds under the
// schedules this VM runs, which bounds every link's queue (see InFlight).
func (vm *VM) inFlightBound() int {
	bound := 1
	for _, s := range []Schedule{vm.cfg.sched, vm.cfg.warmSch} {
		if s.Actions == nil {
			continue
		}
		for _, list := range s.Actions(vm.p, vm.n, 2*vm.p+2) {
			bound = max(bound, InFlight(list))
		}
	}
	return bound
}

// Plan returns the plan the VM runs.
func (vm *VM) Plan() *graphsplit.Plan { return vm.plan }

// Step trains on one minibatch and returns its mean loss. feeds gives a value
// for every data input of the plan (Plan.Feeds) with N times the microbatch
// rows along axis 0; Step checks them all before any worker runs. With an
// asynchronous schedule some backwards and the update of this minibatch may
// still be pending when Step returns; they run during later calls or Flush.
func (vm *VM) Step(ctx context.Context, feeds map[*gorgonia.Node]gorgonia.Value) (float64, error) {
	losses, err := vm.Run(ctx, []map[*gorgonia.Node]gorgonia.Value{feeds})
	if err != nil {
		return 0, err
	}
	return losses[0], nil
}

// Run trains on several minibatches in one go, so the pipeline never stalls
// between them, and returns their mean losses in order.
func (vm *VM) Run(ctx context.Context, minibatches []map[*gorgonia.Node]gorgonia.Value) ([]float64, error) {
	if err := vm.usable(); err != nil {
		return nil, err
	}
	first := vm.supplied
	slices := make([][][]gorgonia.Value, len(minibatches))
	for k, feeds := range minibatches {
		s, err := vm.sliceFeeds(feeds, first+k)
		if err != nil {
			return nil, errors.Wrapf(err, "asyncvm: minibatch %d", first+k)
		}
		slices[k] = s
	}
	for k, s := range slices {
		for j, v := range s {
			vm.feeds[(first+k)*vm.n+j] = v
		}
	}
	for range minibatches {
		vm.supplied++
		vm.segmentFor(vm.supplied-1).steps++
	}
	if err := vm.round(ctx, false); err != nil {
		return nil, err
	}
	last := vm.workers[vm.p-1]
	losses := make([]float64, len(minibatches))
	for k := range losses {
		sum := 0.0
		for j := 0; j < vm.n; j++ {
			m := (first+k)*vm.n + j
			l, ok := last.losses[m]
			if !ok {
				return nil, errors.Errorf("asyncvm: internal: no loss for microbatch %d after the round", m)
			}
			sum += l
			delete(last.losses, m)
		}
		losses[k] = sum / float64(vm.n)
	}
	vm.dropFeeds()
	return losses, nil
}

// Flush runs every pending backward and update, so the learnables reflect
// every minibatch supplied so far. An asynchronous pipeline restarts (with a
// new warm-up) at the next Step.
func (vm *VM) Flush(ctx context.Context) error {
	if err := vm.usable(); err != nil {
		return err
	}
	return vm.round(ctx, true)
}

// segmentFor returns the segment minibatch k belongs to, opening a new one
// when k starts a new schedule (after the warm-up, or after a drain).
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
	s := &segment{sched: want, first: k, prefix: newPrefix(vm.topo), done: make([]int, vm.p), startedAt: time.Since(vm.start)}
	vm.segs = append(vm.segs, s)
	return s
}

// round hands every worker the actions it can run with the data supplied and
// waits until all of them have run them. drain runs the segments to their
// end instead.
func (vm *VM) round(ctx context.Context, drain bool) error {
	for si, seg := range vm.segs {
		if seg.drained {
			continue
		}
		// Earlier segments are always drained before a later one runs.
		final := drain || si < len(vm.segs)-1
		var lists [][]Action
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
		target := seg.prefix.advance(lists, limit)
		if final {
			for i := range lists {
				if target[i] != len(lists[i]) {
					return vm.failf("asyncvm: internal: segment %s cannot drain: stage %d stops at action %d of %d", seg.sched.Name, i, target[i], len(lists[i]))
				}
			}
		}
		if err := vm.dispatch(ctx, seg, lists, target); err != nil {
			return err
		}
		if final {
			seg.drained = true
			seg.lists = nil
		}
	}
	return nil
}

// dispatch sends each worker its next slice of actions and waits for all
// of them to park.
func (vm *VM) dispatch(ctx context.Context, seg *segment, lists [][]Action, target []int) error {
	busy := 0
	for i, w := range vm.workers {
		if target[i] == seg.done[i] {
			continue
		}
		r := work{actions: lists[i][seg.done[i]:target[i]], microBase: seg.first * vm.n, stepBase: seg.first, sched: seg.sched}
		seg.done[i] = target[i]
		busy++
		select {
		case w.work <- r:
		case <-vm.ctx.Done():
			return vm.failure()
		}
	}
	for ; busy > 0; busy-- {
		select {
		case <-vm.parked:
		case <-vm.ctx.Done():
			return vm.failure()
		case <-ctx.Done():
			vm.fail(errors.Wrap(ctx.Err(), "asyncvm: stopped by the caller's context"))
			return vm.failure()
		}
	}
	return nil
}

// dropFeeds forgets the data of microbatches every stage has run forward.
func (vm *VM) dropFeeds() {
	low := -1
	for _, w := range vm.workers {
		if low < 0 || w.nextF < low {
			low = w.nextF
		}
	}
	for m := range vm.feeds {
		if m < low {
			delete(vm.feeds, m)
		}
	}
}

func (vm *VM) usable() error {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	if vm.closed {
		return errors.New("asyncvm: VM is closed")
	}
	return vm.err
}

// fail records the first error and stops every worker.
func (vm *VM) fail(err error) {
	vm.mu.Lock()
	if vm.err == nil {
		vm.err = err
	}
	vm.mu.Unlock()
	vm.cancel()
}

func (vm *VM) failf(format string, args ...interface{}) error {
	vm.fail(errors.Errorf(format, args...))
	return vm.failure()
}

func (vm *VM) failure() error {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	if vm.err == nil {
		return errors.New("asyncvm: stopped")
	}
	return vm.err
}

// Close stops every worker and waits for them, then releases the plan's
// compiled programs. It is safe to call more than once; after Close every
// method returns an error.
func (vm *VM) Close() error {
	vm.mu.Lock()
	if vm.closed {
		vm.mu.Unlock()
		return nil
	}
	vm.closed = true
	vm.mu.Unlock()
	vm.cancel()
	vm.wg.Wait()
	for _, w := range vm.workers {
		w.fwd.Close()
		w.bwd.Close()
	}
	for _, st := range vm.plan.Stages {
		st.Forward.Close()
		st.Train.Close()
	}
	runtime.GC()
	return nil
}

// barrier is the flush: every stage waits for all others at Flush(k).
type barrier struct {
	mu      sync.Mutex
	p       int
	arrived map[int]int
	release map[int]chan struct{}
}

func newBarrier(p int) *barrier {
	return &barrier{p: p, arrived: map[int]int{}, release: map[int]chan struct{}{}}
}

func (b *barrier) wait(ctx context.Context, k int) error {
	b.mu.Lock()
	ch, ok := b.release[k]
	if !ok {
		ch = make(chan struct{})
		b.release[k] = ch
	}
	b.arrived[k]++
	if b.arrived[k] == b.p {
		close(ch)
		delete(b.arrived, k)
		delete(b.release, k)
	}
	b.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// keepBatchNormStats saves the running statistics of every BatchNorm op of
// the plan and returns a function that puts them back.
func keepBatchNormStats(plan *graphsplit.Plan) func() {
	var bns []*gorgonia.BatchNormOp
	for _, st := range plan.Stages {
		bns = append(bns, batchNorms(st)...)
	}
	saved := saveStats(bns)
	return func() { restoreStats(saved) }
}
