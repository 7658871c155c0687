package stage

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/bnstate"
	"github.com/pipemare/pipemare/internal/tensorutil"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/solvers"
	"github.com/pipemare/pipemare/transport"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Runtime owns one stage of a plan: its compiled programs, solver,
// gradient accumulators, weight versions, kept activations and statistics.
// It knows nothing of the driver: everything reaches it as a message on its
// transport endpoint (Serve), and it answers with messages.
//
// A Runtime is used by one goroutine at a time: New builds it, Serve runs
// it, Close releases it after Serve has returned.
type Runtime struct {
	cfg   Config
	st    *graphsplit.Stage
	plan  *graphsplit.Plan
	index int
	last  bool

	fwd, bwd *graphsplit.Program // F runs fwd; B runs bwd (Train, or the keeping backward)
	keeping  bool                // fwd/bwd are the keeping programs
	// inputGrad and weightGrad are the keeping backward split in two
	// (graphsplit.SplitBackward), which I and W run; nil without split
	// backwards (split.go). saving is the keeping forward a recomputing
	// stage's I runs before inputGrad; nil for a keeping stage.
	inputGrad, weightGrad, saving *graphsplit.Program

	params []gorgonia.Value     // the user's learnable tensors
	acc    []*tensor.Dense      // gradient accumulators
	model  []gorgonia.ValueGrad // what the solver steps
	bns    []*gorgonia.BatchNormOp

	producers, consumers []link
	inputs               []input // per Stage.Inputs entry
	outIndex             map[int64]int
	costGrad             gorgonia.Value

	version int
	seg     Segment // the segment whose delay the solver was told
	told    bool
	data    map[int]held // microbatch → its data inputs, owned when their message was (transport.Message.Own)
	kept    map[int]held // microbatch → what its backward reads
	grads   map[int]held // microbatch → the output gradients its backward holds, until it releases them
	// deferred holds, for a microbatch whose I ran and whose W has not,
	// what its W reads (split.go).
	deferred      map[int]deferredWeight
	deferredBytes int64
	w             weights
	shared        shared
	eval          evaluation
	fuse          bool   // the forward about to run is followed by its backward (canFuse)
	fuseInput     bool   // … by its I, and the stage's split programs recompute (fused.go)
	early         *early // the backward the last forward prepared or ran
	stats         Stats
	log           progressLog // what the driver has not heard yet
}

// input says where one of the stage's inputs comes from: a data input
// (its position among the stage's data inputs) or a producer's output.
type input struct {
	data   int // −1 for an activation
	key    int64
	shared bool // a data input other stages read too (sharedData)
}

// New builds the runtime of stage index of plan: it compiles the stage's
// programs and sets up its accumulators. The plan's BatchNorm statistics
// are left as they were (compiling a tape machine zeroes them).
func New(plan *graphsplit.Plan, index int, cfg Config) (*Runtime, error) {
	if plan == nil || index < 0 || index >= len(plan.Stages) {
		return nil, errors.Errorf("stage: no stage %d in the plan", index)
	}
	if cfg.Microbatches < 1 {
		return nil, errors.Errorf("stage %d: %d microbatches per step; need at least one", index, cfg.Microbatches)
	}
	if cfg.Solver == nil {
		return nil, errors.Errorf("stage %d: no solver", index)
	}
	st := plan.Stages[index]
	r := &Runtime{
		cfg: cfg, st: st, plan: plan, index: index, last: st.Last(),
		outIndex: make(map[int64]int),
		data:     make(map[int]held),
		kept:     make(map[int]held),
		grads:    make(map[int]held),
		deferred: make(map[int]deferredWeight),
		eval:     evaluation{data: map[int]held{}, probes: map[string]*graphsplit.Program{}},
	}
	r.stats.Delays, r.stats.BackwardLag, r.stats.SharedDelays = map[int]int{}, map[int]int{}, map[int]int{}
	for i, l := range st.Learnables {
		t, ok := l.Value().(tensor.Tensor)
		if !ok {
			return nil, errors.Errorf("stage %d: learnable %q holds %T, want a tensor", index, l.Name(), l.Value())
		}
		acc := tensorutil.Zeros(t.Dtype(), t.Shape().Clone())
		if st.Replica(i) { // its own copy: the owner updates the user's tensor
			c, err := tensorutil.Clone(t)
			if err != nil {
				return nil, errors.Wrapf(err, "stage %d", index)
			}
			t = c
		} else { // the solver steps only what the stage owns
			r.model = append(r.model, &valueGrad{name: l.Name(), value: t, grad: acc})
		}
		r.params = append(r.params, t)
		r.acc = append(r.acc, acc)
		r.stats.ParamBytes += tensorutil.Bytes(t)
	}
	var err error
	if r.shared, err = newShared(r); err != nil {
		return nil, err
	}
	r.bns = bnstate.Of(st.Stateful)
	for i, o := range st.Outputs {
		r.outIndex[o.Key] = i
	}
	d := 0
	shared := sharedData(plan, index)
	for k, in := range st.Inputs {
		if in.Kind == graphsplit.Data {
			r.inputs = append(r.inputs, input{data: d, key: in.Key, shared: shared[k]})
			d++
		} else {
			r.inputs = append(r.inputs, input{data: -1, key: in.Key})
		}
	}
	r.producers, r.consumers = links(plan, index)
	if r.last {
		g, err := tensorutil.ScalarOf(plan.Dtype, 1/float64(cfg.Microbatches))
		if err != nil {
			return nil, errors.Wrapf(err, "stage %d", index)
		}
		r.costGrad = g
	}
	r.w = newWeights(r)
	restore := bnstate.Save(r.bns).Restore
	defer restore()
	if err := r.programs(); err != nil {
		return nil, err
	}
	for _, p := range []*graphsplit.Program{r.fwd, r.bwd, r.inputGrad, r.weightGrad, r.saving} {
		if p == nil {
			continue
		}
		if err := p.Compile(); err != nil {
			r.Close()
			return nil, err
		}
		if err := r.bind(p, nil); err != nil {
			r.Close()
			return nil, err
		}
	}
	return r, nil
}

// bind makes p read vals (parallel to Stage.Learnables), or the stage's
// own weights for nil: the user's tensors, and the replicas' copies.
func (r *Runtime) bind(p *graphsplit.Program, vals []gorgonia.Value) error {
	if vals == nil {
		if len(r.shared.replicas) == 0 {
			return p.BindLearnables(nil)
		}
		vals = r.params
	}
	return p.BindLearnables(vals)
}

// expand turns values parallel to the solver's model (the learnables the
// stage owns) into values parallel to Stage.Learnables, the replicas' own
// copies filled in; nil stays nil.
func (r *Runtime) expand(vals []gorgonia.Value) []gorgonia.Value {
	if vals == nil || len(r.shared.replicas) == 0 {
		return vals
	}
	out := make([]gorgonia.Value, len(r.params))
	k := 0
	for i := range out {
		if r.shared.isReplica(i) {
			out[i] = r.params[i]
			continue
		}
		out[i] = vals[k]
		k++
	}
	return out
}

// Close releases the programs the runtime compiled. Call it after Serve
// has returned.
func (r *Runtime) Close() {
	for _, p := range []*graphsplit.Program{r.fwd, r.bwd, r.inputGrad, r.weightGrad, r.saving, r.st.Forward, r.st.Train} {
		if p != nil {
			p.Close()
		}
	}
	for _, p := range r.eval.probes {
		p.Close()
	}
}

// valueGrad is what a stage's solver steps: the user's tensor and the
// stage's accumulated gradient (the mean over the step's microbatches).
type valueGrad struct {
	name        string
	value, grad gorgonia.Value
}

func (v *valueGrad) Value() gorgonia.Value         { return v.value }
func (v *valueGrad) Grad() (gorgonia.Value, error) { return v.grad, nil }
func (v *valueGrad) Name() string                  { return v.name }

// Serve runs the stage until the driver sends Stop, ctx ends or the stage
// fails. It takes the driver's orders in order — Data, Work, Evaluate — and
// answers each Work with Parked and each Evaluate with Evaluated. On a
// failure of its own it answers Failed and returns the error; otherwise its
// last message is Stopped. It returns nil only when the driver stopped it:
// a link to the driver that broke, no first order within the
// Config.FirstOrderTimeout, or ctx ending, is an error naming the stage (a
// stage process exits non-zero when its driver vanished).
func (r *Runtime) Serve(parent context.Context, ep transport.Endpoint) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	// The driver's orders are read as they come, so that a Stop ends the
	// stage even while an action waits for a peer.
	orders := transport.NewMailbox()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer cancel()
		first, stopFirst := r.firstOrder(ctx)
		defer stopFirst()
		for {
			m, err := ep.Recv(first, transport.Driver, transport.Control)
			if context.Cause(first) == errNoFirstOrder && ctx.Err() == nil {
				orders.Fail(errors.Errorf("the driver connected but sent no order within %v: is it stalled?", r.cfg.FirstOrderTimeout))
				return
			}
			if errors.Is(err, transport.ErrTimeout) {
				continue // an idle driver: the link is up
			}
			if err != nil {
				orders.Fail(err)
				return
			}
			first = ctx // the driver is there: later orders may take their time
			if _, stop := m.Body.(Stop); stop {
				orders.Fail(transport.ErrClosed)
				return
			}
			if orders.Put(m) != nil {
				return
			}
		}
	}()
	defer func() { cancel(); <-done }()
	defer r.releaseInFlight()
	for {
		m, err := orders.Take(ctx, transport.Driver, transport.Control)
		if err != nil {
			r.reply(ep, Stopped{Report: r.progress()})
			return r.ended(parent, orders)
		}
		switch b := m.Body.(type) {
		case Data:
			if b.Eval {
				r.eval.data[b.Micro] = received(m)
			} else {
				r.data[b.Micro] = received(m)
			}
		case Work:
			if err := r.work(ctx, ep, b); err != nil {
				return r.failed(ctx, ep, err, r.ended(parent, orders))
			}
			r.reply(ep, Parked{Report: r.progress()})
		case Evaluate:
			out, vals, err := r.evaluate(ctx, ep, b)
			if err != nil {
				return r.failed(ctx, ep, err, r.ended(parent, orders))
			}
			r.replyValues(ep, out, vals)
		case Pull:
			vals := make([]gorgonia.Value, 0, len(r.params)+2*len(r.bns))
			for _, p := range r.params {
				vals = append(vals, p.(tensor.Tensor).Clone().(tensor.Tensor))
			}
			for _, t := range bnstate.Save(r.bns).Tensors() {
				vals = append(vals, t)
			}
			r.replyValues(ep, Pulled{}, vals)
		case Save:
			if saved, err := r.save(ctx, ep, b.Dir); err != nil {
				r.reply(ep, Refused{Message: err.Error()})
			} else {
				r.reply(ep, saved)
			}
		case Restore:
			if err := r.load(b); err != nil {
				r.reply(ep, Refused{Message: err.Error()})
			} else {
				r.reply(ep, Restored{})
			}
		default:
			return r.failed(ctx, ep, errors.Errorf("stage %d: unknown order %T from the driver", r.index, m.Body), nil)
		}
	}
}

// errNoFirstOrder is the cause of the context of Serve's wait for the
// first order once its timeout has passed.
var errNoFirstOrder = errors.New("no first order")

// firstOrder is the context the wait for the driver's first order runs
// in: ctx, ending after Config.FirstOrderTimeout if it is set.
func (r *Runtime) firstOrder(ctx context.Context) (context.Context, context.CancelFunc) {
	if r.cfg.FirstOrderTimeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeoutCause(ctx, r.cfg.FirstOrderTimeout, errNoFirstOrder)
}

// failed answers Failed for an error of the stage's own, or Stopped when
// the error only says that the stage was stopped (ctx ended), returning
// then why it was stopped, stopped.
func (r *Runtime) failed(ctx context.Context, ep transport.Endpoint, err, stopped error) error {
	if ctx.Err() != nil {
		r.reply(ep, Stopped{Report: r.progress()})
		return stopped
	}
	f := Failed{Message: err.Error(), Report: r.progress(), Peer: -1}
	var le *transport.LinkError
	if errors.As(err, &le) {
		if other := le.From; other != transport.Peer(r.index) {
			f.Peer = int(other)
		} else {
			f.Peer = int(le.To)
		}
	}
	var ae *actionError
	if errors.As(err, &ae) {
		f.InAction, f.Action, f.Step, f.Message = true, ae.action, ae.step, ae.err.Error()
	}
	r.reply(ep, f)
	return err
}

// ended is why the driver's orders stopped coming: nil for a Stop, else
// the broken link to the driver or the end of the caller's context.
func (r *Runtime) ended(parent context.Context, orders *transport.Mailbox) error {
	switch err := orders.Err(); {
	case errors.Is(err, transport.ErrClosed):
		return nil
	case parent.Err() != nil: // the caller stopped the stage: the orders' end is its doing
		return errors.Wrapf(parent.Err(), "stage %d", r.index)
	case err != nil:
		return errors.Wrapf(err, "stage %d: lost the driver", r.index)
	}
	return nil
}

func (r *Runtime) reply(ep transport.Endpoint, body any) { r.replyValues(ep, body, nil) }

// replyValues sends body to the driver. A stopped stage still tells the
// driver what it did, so the send does not depend on the stage's context;
// it fails only when the driver is gone.
func (r *Runtime) replyValues(ep transport.Endpoint, body any, vals []gorgonia.Value) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = ep.Send(ctx, transport.Message{Kind: transport.Reply, To: transport.Driver, Version: r.version, Values: vals, Body: body})
}

// actionError is a failure of one action.
type actionError struct {
	action schedule.Action
	step   int
	err    error
}

func (e *actionError) Error() string { return fmt.Sprintf("%v: %v", e.action, e.err) }
func (e *actionError) Unwrap() error { return e.err }

// work runs a Work's actions in order.
func (r *Runtime) work(ctx context.Context, ep transport.Endpoint, w Work) error {
	if !r.told || w.Segment.Schedule != r.seg.Schedule || w.Segment.Delay != r.seg.Delay {
		solvers.SetDelay(r.cfg.Solver, w.Segment.Delay, false)
	}
	r.seg, r.told = w.Segment, true
	for j, a := range w.Actions {
		var versions []int
		if j < len(w.Shared) {
			versions = w.Shared[j]
		}
		r.fuse = j+1 < len(w.Actions) && r.canFuse(a, w.Actions[j+1])
		r.fuseInput = r.fuse && w.Actions[j+1].Op == schedule.OpInput && r.saving != nil
		if err := r.do(ctx, ep, a, versions); err != nil {
			return err
		}
	}
	return nil
}

// do runs one action, turning errors and panics into an actionError.
func (r *Runtime) do(ctx context.Context, ep transport.Endpoint, a schedule.Action, versions []int) (err error) {
	step := a.Step
	if a.PerMicro() {
		step = a.Micro / r.cfg.Microbatches
	}
	defer func() {
		if p := recover(); p != nil {
			err = &actionError{a, step, errors.Errorf("panic: %v\n%s", p, debug.Stack())}
		}
	}()
	began := time.Time{}
	if r.cfg.Turn != nil {
		done, err := r.cfg.Turn(ctx, a, r.seg.Schedule)
		if err != nil {
			return &actionError{a, step, err}
		}
		defer done()
	}
	if r.cfg.Hook != nil {
		if err := r.cfg.Hook(a); err != nil {
			return &actionError{a, step, err}
		}
	}
	switch a.Op {
	case schedule.OpForward:
		began, err = r.forward(ctx, ep, a.Micro, versions)
	case schedule.OpBackward, schedule.OpInput:
		began, err = r.backward(ctx, ep, a.Micro, a.Op == schedule.OpInput)
	case schedule.OpWeight:
		began = time.Now()
		err = r.weight(a.Micro)
	case schedule.OpUpdate:
		began = time.Now()
		err = r.update(ctx, ep, a.Step)
	}
	if err != nil {
		return &actionError{a, step, err}
	}
	end := time.Now()
	if began.IsZero() { // a flush waits for nothing: the driver ends rounds there
		began = end
	}
	r.log.events = append(r.log.events, Event{Action: a, Schedule: r.seg.Schedule, Start: began, End: end})
	return nil
}
