package asyncvm

import (
	"fmt"
	"math"
	"runtime/debug"
	"time"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/tensorutil"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// work is a slice of a stage's action list for one round, with the offsets
// of the segment it belongs to.
type work struct {
	actions             []Action
	microBase, stepBase int
	sched               Schedule
}

// worker owns one stage: its programs, solver, accumulators, stashes and
// counters. Only its goroutine touches them while a round runs; the VM reads
// them between rounds.
type worker struct {
	vm     *VM
	idx    int
	st     *graphsplit.Stage
	solver gorgonia.Solver
	// fwd and bwd are the programs F and B run: the stage's Forward and
	// Train (recompute), or its Stash programs.
	fwd, bwd *graphsplit.Program
	work     chan work

	params []gorgonia.Value     // the user's learnable tensors
	acc    []*tensor.Dense      // gradient accumulators
	model  []gorgonia.ValueGrad // what the solver steps, fixed order
	bns    []*gorgonia.BatchNormOp

	inLinks, outLinks   []*link // activations from producers, to consumers
	gradIn, gradOut     []*link // gradients from consumers, to producers
	inFeed              []int   // per stage input: index in plan.Feeds, or −1
	inKey               []int64
	outIndex            map[int64]int // output key → index in Stage.Outputs
	costGrad            gorgonia.Value
	version, nextF      int
	began               time.Duration            // when the running action had its inputs
	sched               Schedule                 // of the segment being run (whose delay the solver knows)
	fwdVersion          map[int]int              // microbatch → version its forward read
	stash               map[int][]gorgonia.Value // microbatch → stage inputs
	wstash              map[int][]gorgonia.Value // version → weight copy (PipeDream)
	wrefs               map[int]int
	losses              map[int]float64 // last stage: microbatch → loss
	stats               stageStats
	stashBytes, wsBytes int64
}

func newWorker(vm *VM, st *graphsplit.Stage) (*worker, error) {
	w := &worker{
		vm: vm, idx: st.Index, st: st, work: make(chan work),
		outIndex:   make(map[int64]int),
		fwdVersion: make(map[int]int), stash: make(map[int][]gorgonia.Value),
		wstash: make(map[int][]gorgonia.Value), wrefs: make(map[int]int),
		losses: make(map[int]float64),
	}
	w.stats.delays = make(map[int]int)
	w.stats.bwdLag = make(map[int]int)
	w.solver = vm.cfg.solver(st.Index)
	if w.solver == nil {
		return nil, errors.New("the solver factory returned nil")
	}
	for _, l := range st.Learnables {
		v := l.Value()
		t, ok := v.(tensor.Tensor)
		if !ok {
			return nil, errors.Errorf("learnable %q holds %T, want a tensor", l.Name(), v)
		}
		acc := tensorutil.Zeros(t.Dtype(), t.Shape().Clone())
		w.params = append(w.params, v)
		w.acc = append(w.acc, acc)
		w.model = append(w.model, &valueGrad{name: l.Name(), value: v, grad: acc})
	}
	w.bns = batchNorms(st)
	for i, o := range st.Outputs {
		w.outIndex[o.Key] = i
	}
	for _, in := range st.Inputs {
		w.inKey = append(w.inKey, in.Key)
		if in.Kind == graphsplit.Data {
			w.inFeed = append(w.inFeed, feedIndex(vm.plan, in.Node))
		} else {
			w.inFeed = append(w.inFeed, -1)
		}
	}
	for _, l := range vm.links {
		isAct := l.from < l.to
		switch {
		case isAct && l.to == w.idx:
			w.inLinks = append(w.inLinks, l)
		case isAct && l.from == w.idx:
			w.outLinks = append(w.outLinks, l)
		case !isAct && l.to == w.idx:
			w.gradIn = append(w.gradIn, l)
		case !isAct && l.from == w.idx:
			w.gradOut = append(w.gradOut, l)
		}
	}
	if st.Last() {
		g, err := tensorutil.ScalarOf(vm.plan.Dtype, 1/float64(vm.n))
		if err != nil {
			return nil, err
		}
		w.costGrad = g
	}
	w.fwd, w.bwd = st.Forward, st.Train
	if vm.cfg.acts == Stash && vm.plan.CanStash(st.Index) {
		sh, err := vm.plan.NewStash(st.Index)
		if err != nil {
			return nil, err
		}
		w.fwd, w.bwd = sh.Forward, sh.Backward
	}
	if err := w.fwd.Compile(); err != nil {
		return nil, err
	}
	if err := w.bwd.Compile(); err != nil {
		return nil, err
	}
	first := vm.cfg.sched
	if vm.cfg.warmup > 0 {
		first = vm.cfg.warmSch
	}
	w.sched = first
	w.announceDelay(first)
	return w, nil
}

// announceDelay tells a DelayAware solver the delay schedule s gives the
// stage: τ_i for an asynchronous schedule, 1 for a synchronous one. Called
// before the first step and at every switch of schedule (after a warm-up).
func (w *worker) announceDelay(s Schedule) {
	if da, ok := w.solver.(DelayAware); ok {
		tau := 1.0
		if s.Async {
			tau = float64(max(1, Delay(w.vm.p, w.vm.n, w.idx)))
		}
		da.SetDelay(tau, false)
	}
}

// valueGrad is what a stage's solver steps: the user's tensor and the
// stage's accumulated gradient (the mean over the minibatch's microbatches).
type valueGrad struct {
	name        string
	value, grad gorgonia.Value
}

func (v *valueGrad) Value() gorgonia.Value         { return v.value }
func (v *valueGrad) Grad() (gorgonia.Value, error) { return v.grad, nil }
func (v *valueGrad) Name() string                  { return v.name }

// run is the worker goroutine: it runs each round's actions in order and
// parks until the next round.
func (w *worker) run() {
	defer w.vm.wg.Done()
	for {
		select {
		case <-w.vm.ctx.Done():
			return
		case r := <-w.work:
			if r.sched.Name != w.sched.Name || r.sched.Async != w.sched.Async {
				w.announceDelay(r.sched)
			}
			w.sched = r.sched
			for _, a := range r.actions {
				a.Micro += r.microBase
				a.Step += r.stepBase
				if err := w.do(a); err != nil {
					w.vm.fail(err)
					return
				}
			}
			select {
			case w.vm.parked <- w.idx:
			case <-w.vm.ctx.Done():
				return
			}
		}
	}
}

// do runs one action, turning errors and panics into a StageError.
func (w *worker) do(a Action) (err error) {
	step := a.Step
	if a.Op == Forward || a.Op == Backward {
		step = a.Micro / w.vm.n
	}
	defer func() {
		if r := recover(); r != nil {
			err = &StageError{Stage: w.idx, Action: a, Minibatch: step, Err: fmt.Errorf("panic: %v\n%s", r, debug.Stack())}
		}
	}()
	w.began = -1
	if inject := w.vm.cfg.inject; inject != nil {
		if err := inject(w.idx, a); err != nil {
			return &StageError{Stage: w.idx, Action: a, Minibatch: step, Err: err}
		}
	}
	switch a.Op {
	case Forward:
		err = w.forward(a.Micro)
	case Backward:
		err = w.backward(a.Micro)
	case Update:
		err = w.update(a.Step)
	case Flush:
		err = w.vm.barrier.wait(w.vm.ctx, a.Step)
	}
	if err != nil {
		var se *StageError
		if errors.As(err, &se) {
			return err
		}
		return &StageError{Stage: w.idx, Action: a, Minibatch: step, Err: err}
	}
	end := time.Since(w.vm.start)
	if w.began < 0 { // updates and flushes wait for nothing
		w.began = end
	}
	w.stats.record(w.idx, w.sched.Name, a, w.began, end)
	return nil
}

// receive takes the next message of l for microbatch m.
func (w *worker) receive(l *link, m int) (message, error) {
	select {
	case msg := <-l.ch:
		if msg.micro != m {
			return msg, errors.Errorf("internal: link %d→%d delivered microbatch %d, want %d", l.from, l.to, msg.micro, m)
		}
		return msg, nil
	case <-w.vm.ctx.Done():
		return message{}, errors.New("stopped")
	}
}

func (w *worker) send(l *link, msg message) error {
	select {
	case l.ch <- msg:
		return nil
	case <-w.vm.ctx.Done():
		return errors.New("stopped")
	}
}

func (w *worker) forward(m int) error {
	in := make([]gorgonia.Value, len(w.st.Inputs))
	byKey := make(map[int64]gorgonia.Value)
	for _, l := range w.inLinks {
		msg, err := w.receive(l, m)
		if err != nil {
			return err
		}
		for j, k := range l.keys {
			byKey[k] = msg.vals[j]
		}
	}
	w.began = time.Since(w.vm.start)
	for i := range in {
		if fi := w.inFeed[i]; fi >= 0 {
			feeds, ok := w.vm.feeds[m]
			if !ok {
				return errors.Errorf("internal: no data for microbatch %d", m)
			}
			in[i] = feeds[fi]
		} else {
			in[i] = byKey[w.inKey[i]]
		}
	}
	v := w.version
	w.fwdVersion[m] = v
	if w.keepsVersions() {
		if err := w.stashWeights(v); err != nil {
			return err
		}
	}
	res, err := w.fwd.Run(in, nil)
	if err != nil {
		return err
	}
	keep := in
	if w.fwd != w.st.Forward {
		keep = res.Saved
	}
	w.stash[m] = keep
	w.stashBytes += valuesBytes(keep)
	w.stats.peakActs = max(w.stats.peakActs, w.stashBytes)
	w.nextF = m + 1
	if w.st.Last() {
		loss, err := tensorutil.Scalar(res.Outputs[0])
		if err != nil {
			return err
		}
		if !tensorutil.Finite(res.Outputs[0]) {
			return errors.Errorf("the loss is %v; lower the learning rate, or check the data", loss)
		}
		w.losses[m] = loss
	}
	for _, l := range w.outLinks {
		vals := make([]gorgonia.Value, len(l.keys))
		for j, k := range l.keys {
			vals[j] = res.Outputs[w.outIndex[k]]
		}
		if err := w.send(l, message{micro: m, vals: vals}); err != nil {
			return err
		}
	}
	return nil
}

func (w *worker) backward(m int) error {
	in, ok := w.stash[m]
	if !ok {
		return errors.Errorf("internal: no stashed inputs for microbatch %d", m)
	}
	outGrads := make([]gorgonia.Value, len(w.st.Outputs))
	if w.st.Last() {
		outGrads[0] = w.costGrad
	}
	for _, l := range w.gradIn {
		msg, err := w.receive(l, m)
		if err != nil {
			return err
		}
		for j, k := range l.keys {
			g := msg.vals[j]
			i := w.outIndex[k]
			if g == nil || w.bwd.OutputGrads[i] == nil {
				continue
			}
			sum, err := sumGradient(outGrads[i], g)
			if err != nil {
				return errors.Wrapf(err, "summing gradients of output %d", i)
			}
			outGrads[i] = sum
		}
	}
	w.began = time.Since(w.vm.start)
	for i, gph := range w.bwd.OutputGrads {
		if gph != nil && outGrads[i] == nil { // no consumer has a gradient for it
			outGrads[i] = tensorutil.Zeros(gph.Dtype(), gph.Shape())
		}
	}
	var swapped bool
	if err := w.bindBackwardWeights(m, &swapped); err != nil {
		return err
	}
	saved := saveStats(w.bns)
	res, err := w.bwd.Run(in, outGrads)
	restoreStats(saved)
	if swapped {
		if err2 := w.bwd.BindLearnables(nil); err == nil {
			err = err2
		}
	}
	if err != nil {
		return err
	}
	for i, g := range res.LearnableGrads {
		if !tensorutil.Finite(g) {
			return errors.Errorf("gradient of learnable %q is not finite; lower the learning rate, or check the data", w.st.Learnables[i].Name())
		}
		if err := tensorutil.AddInto(w.acc[i], g); err != nil {
			return errors.Wrapf(err, "accumulating the gradient of %q", w.st.Learnables[i].Name())
		}
	}
	for _, l := range w.gradOut {
		vals := make([]gorgonia.Value, len(l.keys))
		for j, k := range l.keys {
			for i, ik := range w.inKey {
				if ik == k {
					vals[j] = res.InputGrads[i]
				}
			}
		}
		if err := w.send(l, message{micro: m, vals: vals}); err != nil {
			return err
		}
	}
	w.stashBytes -= valuesBytes(in)
	delete(w.stash, m)
	if w.keepsVersions() {
		w.releaseWeights(w.fwdVersion[m])
	}
	return nil
}

// keepsVersions reports whether forwards keep a copy of their weights:
// PipeDream needs them, WithDiscrepancy measures against them.
func (w *worker) keepsVersions() bool {
	return w.sched.Stash || (w.vm.cfg.disc && w.sched.Async)
}

// bindBackwardWeights makes the backward of m read the weights its schedule
// says: the forward's stashed copy (PipeDream), a correction's estimate
// (PipeMare with a BackwardWeighter solver), or the current weights.
func (w *worker) bindBackwardWeights(m int, swapped *bool) error {
	fv := w.fwdVersion[m]
	switch {
	case w.sched.Stash:
		w.stats.bwdLag[0]++ // the forward's own version, by construction
		if fv == w.version {
			return nil
		}
		*swapped = true
		return w.bwd.BindLearnables(w.wstash[fv])
	case w.sched.Async:
		w.stats.bwdLag[w.version-fv]++
		var vals []gorgonia.Value
		if bw, ok := w.solver.(BackwardWeighter); ok {
			var err error
			if vals, err = bw.BackwardWeights(w.version - fv); err != nil {
				return err
			}
		}
		if w.vm.cfg.disc {
			read := vals
			if read == nil {
				read = w.params
			}
			w.stats.discSum += relDistance(read, w.wstash[fv])
			w.stats.discN++
		}
		if vals == nil {
			return nil
		}
		*swapped = true
		return w.bwd.BindLearnables(vals)
	}
	w.stats.bwdLag[w.version-fv]++
	return nil
}

func (w *worker) update(k int) error {
	w.began = time.Since(w.vm.start)
	if err := w.solver.Step(w.model); err != nil {
		return errors.Wrap(err, "solver")
	}
	for i, p := range w.params {
		if !tensorutil.Finite(p) {
			return errors.Errorf("learnable %q is not finite after the update; lower the learning rate", w.st.Learnables[i].Name())
		}
	}
	for _, a := range w.acc { // gorgonia's solvers zero the gradient; make sure
		a.Zero()
	}
	sum, cnt := 0, 0
	for j := 0; j < w.vm.n; j++ {
		m := k*w.vm.n + j
		fv, ok := w.fwdVersion[m]
		if !ok {
			continue
		}
		d := w.version - fv
		w.stats.delays[d]++
		if w.vm.cfg.logDel {
			for len(w.stats.delayLog) <= m {
				w.stats.delayLog = append(w.stats.delayLog, -1)
			}
			w.stats.delayLog[m] = d
		}
		sum += d
		cnt++
		delete(w.fwdVersion, m)
	}
	w.version++
	if da, ok := w.solver.(DelayAware); ok && cnt > 0 && w.sched.Async {
		da.SetDelay(max(1, float64(sum)/float64(cnt)), true)
	}
	return nil
}

// stashWeights keeps a copy of the weights of version v while forwards that
// read it wait for their backward (PipeDream). The current version is the
// user's tensors themselves until the next update replaces them, so the copy
// is taken at the forward.
func (w *worker) stashWeights(v int) error {
	if _, ok := w.wstash[v]; !ok {
		cp := make([]gorgonia.Value, len(w.params))
		for i, p := range w.params {
			c, err := tensorutil.Clone(p)
			if err != nil {
				return err
			}
			cp[i] = c
		}
		w.wstash[v] = cp
		if w.sched.Stash { // measurement copies are not part of the method
			w.wsBytes += valuesBytes(cp)
			w.stats.peakWeights = max(w.stats.peakWeights, w.wsBytes)
			w.stats.peakVersions = max(w.stats.peakVersions, len(w.wstash))
		}
	}
	w.wrefs[v]++
	return nil
}

func (w *worker) releaseWeights(v int) {
	w.wrefs[v]--
	if w.wrefs[v] == 0 {
		if w.sched.Stash {
			w.wsBytes -= valuesBytes(w.wstash[v])
		}
		delete(w.wstash, v)
		delete(w.wrefs, v)
	}
}

func valuesBytes(vs []gorgonia.Value) int64 {
	var b int64
	for _, v := range vs {
		b += tensorutil.Bytes(v)
	}
	return b
}

// relDistance is ‖a − b‖ / ‖b‖ over all the tensors.
func relDistance(a, b []gorgonia.Value) float64 {
	num, den := 0.0, 0.0
	for i := range a {
		switch x := a[i].Data().(type) {
		case []float64:
			y := b[i].Data().([]float64)
			for j := range x {
				d := x[j] - y[j]
				num += d * d
				den += y[j] * y[j]
			}
		case []float32:
			y := b[i].Data().([]float32)
			for j := range x {
				d := float64(x[j]) - float64(y[j])
				num += d * d
				den += float64(y[j]) * float64(y[j])
			}
		}
	}
	if den == 0 {
		return 0
	}
	return math.Sqrt(num / den)
}
