package tape

import (
	"fmt"
	"reflect"
	"slices"
	"unsafe"

	"github.com/pipemare/pipemare/internal/reach"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Program is a graph compiled once and run many times on the caller's
// goroutine, each op's output written into a buffer the program owns and
// reuses from run to run (see the package documentation for what runs how).
// A Program is used by one goroutine at a time.
type Program struct {
	m     *Machine // the tape machine compiled for the graph
	steps []step   // nil: the tape machine runs the program (why says why)
	reads []readStep
	vals  []gorgonia.Value // this run's value of every step
	why   error
}

// readStep is a gorgonia.Read: its target receives a step's value.
type readStep struct {
	into *gorgonia.Value
	slot int
}

// step is one arg or op instruction of the tape program.
type step struct {
	node  *gorgonia.Node
	arg   bool        // a bound value (loadArg), not an op
	dead  bool        // an op no read value depends on, and without effects: not run
	op    gorgonia.Op // as compiled: maybe a wrapper (Unwrap)
	inner gorgonia.Op // the op itself
	in    []int       // the slots of the op's arguments
	args  []gorgonia.Value
	how   how
	why   string        // why the op runs through Do (howDo) or howView
	buf   tensor.Tensor // the output buffer the program owns
	// static is the output the compiler allocates for the op (an extern
	// call): the tape machine calls UsePreallocDo with a zeroed value of the
	// node's static shape, and so does the program, reusing it.
	static bool
	shape  tensor.Shape // the node's static shape
	zero   bool         // static: the op's result depends on its buffer; zero it
	k      int          // howCopy: the argument copied into buf
	seen   uintptr      // howProbe: the memory of the first run's result
}

// how a step runs.
type how int

const (
	howProbe    how = iota // Do, until its output's kind is known
	howPrealloc            // UsePreallocDo into buf
	howCopy                // argument k copied into buf, UnsafeDo on it
	howView                // Do: the result is a view or the op's own memory
	howDo                  // Do, allocating: the tape's path
)

func (h how) String() string {
	return [...]string{"probing", "prealloc", "copy+unsafe", "view", "do"}[h]
}

// Compile compiles g as gorgonia.NewTapeMachine(g) does (with
// gorgonia.EvalMode() when eval is set: TrainModeOps are told so), and
// panics where that panics. The program runs on the executor when the
// compiled tape is one it can run, and otherwise on the tape machine
// (Direct reports why not).
func Compile(g *gorgonia.ExprGraph, eval bool) *Program {
	p := &Program{m: New(g, eval)}
	if p.m.tape == nil {
		p.why = errors.New("the tape machine is not one the executor knows (another gorgonia release, a batched BLAS or CUDA)")
		return p
	}
	code, err := reach.Program(p.m.VM)
	if err == nil {
		err = p.build(g, code)
	}
	if err != nil {
		p.steps, p.reads, p.why = nil, nil, err
	}
	return p
}

// build makes the steps of the tape program code.
func (p *Program) build(g *gorgonia.ExprGraph, code []reach.Instr) error {
	regs := make(map[int]int) // register → the slot holding its value
	slotOf := func(r int) (int, error) {
		s, ok := regs[r]
		if !ok {
			return 0, errors.Errorf("register %d is read before it is written", r)
		}
		return s, nil
	}
	for _, in := range code {
		switch in.Kind {
		case reach.InstrArg, reach.InstrExec:
			n, ok := g.Node(in.Node).(*gorgonia.Node)
			if !ok || n == nil {
				return errors.Errorf("no node %d in the graph", in.Node)
			}
			s := step{node: n, arg: in.Kind == reach.InstrArg, shape: n.Shape()}
			if !s.arg {
				s.op, s.inner = in.Op, unwrap(in.Op)
				_, pd := s.op.(gorgonia.UsePreallocDoer)
				// The tape machine calls UsePreallocDo where the compiler
				// allocated the output, Do where the op has no such variant.
				s.static = in.Prealloc && pd && preallocDoer(s.inner)
				s.in = make([]int, len(in.Reads))
				for i, r := range in.Reads {
					var err error
					if s.in[i], err = slotOf(r); err != nil {
						return errors.Wrapf(err, "node %q", n.Name())
					}
				}
				s.args = make([]gorgonia.Value, len(s.in))
				switch {
				case stateful(s.inner):
					s.how, s.why = howDo, "keeps state between runs"
				case s.static:
					s.how = howPrealloc
				}
			}
			regs[in.Write] = len(p.steps)
			p.steps = append(p.steps, s)
		case reach.InstrRead:
			s, err := slotOf(in.Reads[0])
			if err != nil {
				return errors.Wrap(err, "a Read")
			}
			p.reads = append(p.reads, readStep{into: in.Into, slot: s})
		}
	}
	p.vals = make([]gorgonia.Value, len(p.steps))
	p.prune()
	return nil
}

// prune marks the ops that no gorgonia.Read target depends on, and that
// have no effect beyond their result (Effectful), as dead: Run leaves them
// out. Gorgonia's symbolic backward differentiates every operand of an op,
// so a program computes gradients nothing reads (the gradient of a data
// input, of a patch matrix of data); the values that are read come from the
// same ops on the same inputs either way, so their bits do not change.
func (p *Program) prune() {
	live := make([]bool, len(p.steps))
	for _, r := range p.reads {
		live[r.slot] = true
	}
	for i := len(p.steps) - 1; i >= 0; i-- {
		s := &p.steps[i]
		if s.arg {
			continue
		}
		if !live[i] && !effectful(s.inner) {
			s.dead = true
			continue
		}
		for _, in := range s.in {
			live[in] = true
		}
	}
}

// Effectful is an op whose run does more than compute its result — it
// updates state another run or op reads (a BatchNorm's running
// statistics) — so the executor runs it even when no read value depends on
// its result.
type Effectful interface {
	gorgonia.Op
	HasEffects()
}

// effectful reports whether op must run even when nothing reads its
// result: an Effectful op, or one of gorgonia's ops that keep state
// between runs or draw random numbers.
func effectful(op gorgonia.Op) bool {
	if _, ok := op.(Effectful); ok {
		return true
	}
	return stateful(op)
}

// Run executes the program once and delivers the values gorgonia.Read
// asked for into their targets. Those values are borrowed: they belong to
// the program and are overwritten by its next Run; copy what must outlive
// it. Bound inputs are read, never written. On the tape machine (the
// fallback) Run resets and runs it, and the targets receive fresh clones.
// An op's panic reaches the caller.
func (p *Program) Run() error {
	if p.steps == nil {
		return p.RunTape()
	}
	for i := range p.steps {
		s := &p.steps[i]
		if s.dead {
			continue
		}
		if s.arg {
			v := s.node.Value()
			if v == nil {
				return errors.Errorf("no value bound to node %q", s.node.Name())
			}
			p.vals[i] = v
			continue
		}
		for j, in := range s.in {
			s.args[j] = p.vals[in]
		}
		v, err := s.run()
		clear(s.args)
		if err != nil {
			return errors.Wrapf(err, "node %q (op %v)", s.node.Name(), s.inner)
		}
		if t, ok := v.(tensor.Tensor); ok {
			standard(t) // the engine the tape machine gives every result
		}
		p.vals[i] = v
	}
	for _, r := range p.reads {
		*r.into = p.vals[r.slot]
	}
	return nil
}

// RunTape runs the program on the tape machine it was compiled from, as
// gorgonia's RunAll would (the targets of gorgonia.Read receive fresh
// clones): the reference the executor computes the bits of. Bound inputs
// may be overwritten, as the tape machine may overwrite them.
func (p *Program) RunTape() error {
	p.m.Reset()
	return p.m.RunAll()
}

var standard = tensor.WithEngine(gorgonia.StandardEngine{})

// run executes the step's op on s.args.
func (s *step) run() (gorgonia.Value, error) {
	switch s.how {
	case howPrealloc:
		return s.prealloc()
	case howCopy:
		x, ok := s.args[s.k].(tensor.Tensor)
		if !ok || !slices.Equal(x.Shape(), s.buf.Shape()) || x.Dtype() != s.buf.Dtype() {
			s.demote("its input changed shape")
			return s.op.Do(s.args...)
		}
		if err := tensor.Copy(s.buf, x); err != nil {
			return nil, err
		}
		s.args[s.k] = s.buf
		v, err := s.op.(gorgonia.UnsafeDoer).UnsafeDo(s.args...)
		if err == nil && !sameMemory(v, s.buf) {
			s.demote("UnsafeDo did not write into its input")
		}
		return v, err
	case howDo:
		if s.static { // the tape machine's path: a new zeroed output
			pre, err := zeroed(s.node)
			if err != nil {
				return nil, err
			}
			return s.op.(gorgonia.UsePreallocDoer).UsePreallocDo(pre, s.args...)
		}
	}
	v, err := s.op.Do(s.args...)
	if err == nil && s.how == howProbe {
		s.classify(v)
	}
	return v, err
}

// prealloc runs the op's UsePreallocDo into the step's buffer. The output
// the compiler allocates (static) is the node's static shape at every run,
// zeroed at the first, as the tape machine's is, and at every run for an op
// whose result depends on what its buffer held (an increment into it); an
// output the program adopted (classify) keeps the shape the op gave it.
func (s *step) prealloc() (gorgonia.Value, error) {
	if s.buf != nil && s.static && !slices.Equal(s.buf.Shape(), s.shape) {
		if s.buf.Shape().TotalSize() != s.shape.TotalSize() || s.buf.Reshape(s.shape...) != nil {
			s.buf = nil
		}
	}
	first := s.buf == nil
	if first {
		v, err := zeroed(s.node)
		if err != nil {
			return nil, err
		}
		t, ok := v.(tensor.Tensor)
		if !ok {
			s.how, s.why = howDo, fmt.Sprintf("its output is a %T", v)
			return s.op.(gorgonia.UsePreallocDoer).UsePreallocDo(v, s.args...)
		}
		s.buf = t
	} else if s.zero {
		s.buf.Zero()
	}
	pd := s.op.(gorgonia.UsePreallocDoer)
	v, err := pd.UsePreallocDo(s.buf, s.args...)
	switch {
	case err != nil && s.static: // the tape machine fails here too
		return nil, err
	case err != nil:
		s.demote(fmt.Sprintf("UsePreallocDo failed (%v)", err))
		return s.op.Do(s.args...)
	case !sameMemory(v, s.buf):
		s.demote("UsePreallocDo did not write into its buffer")
	case first && s.static && !fullWriter(s.inner):
		// Does the result depend on what the buffer held?
		junk := poisoned(s.buf)
		w, err := pd.UsePreallocDo(junk, s.args...)
		s.zero = err != nil || !sameBits(w, v)
	}
	return v, nil
}

// demote makes an op that stopped honouring its buffer run through Do.
func (s *step) demote(why string) {
	s.how, s.why, s.buf = howDo, why, nil
}

// classify decides, from its results of the first two runs, how an op that
// ran through Do runs from then on: as a view when its result shares an
// input's memory or is the same memory at both runs (a constant), into the
// program's buffer when the op can write into one, else through Do.
func (s *step) classify(v gorgonia.Value) {
	for _, a := range s.args {
		if overlaps(v, a) {
			s.how, s.why = howView, "its result is a view of an input"
			return
		}
	}
	addr := v.Uintptr()
	if s.seen == 0 {
		s.seen = addr // decided at the second run
		return
	}
	if addr == s.seen {
		s.how, s.why = howView, "its result is the op's own memory"
		return
	}
	next, why := s.reusable(v)
	if next == howDo {
		s.how, s.why = howDo, why
		return
	}
	if _, ok := s.inner.(FullWriter); ok && next == howPrealloc {
		s.how, s.buf, s.k = next, v.(tensor.Tensor), -1
		return
	}
	buf, ok := s.trial(next, v)
	if !ok {
		s.how, s.why = howDo, "writing into a buffer does not give Do's bits"
		return
	}
	s.how, s.buf, s.k = next, buf, s.inner.OverwritesInput()
}

// trial runs the op the way next says into a new buffer full of junk, and
// returns the buffer if the result is there and has the bits of v, Do's:
// the op then writes every element of its result whatever the buffer held.
func (s *step) trial(next how, v gorgonia.Value) (tensor.Tensor, bool) {
	args := slices.Clone(s.args)
	var w gorgonia.Value
	var buf tensor.Tensor
	var err error
	switch next {
	case howPrealloc:
		buf = poisoned(v.(tensor.Tensor))
		w, err = s.op.(gorgonia.UsePreallocDoer).UsePreallocDo(buf, args...)
	case howCopy:
		k := s.inner.OverwritesInput()
		buf = poisoned(v.(tensor.Tensor))
		if err = tensor.Copy(buf, args[k].(tensor.Tensor)); err != nil {
			return nil, false
		}
		args[k] = buf
		w, err = s.op.(gorgonia.UnsafeDoer).UnsafeDo(args...)
	}
	return buf, err == nil && sameMemory(w, buf) && sameBits(w, v)
}

// reusable says how the op could write its result v into a buffer of the
// program's, or why it cannot.
func (s *step) reusable(v gorgonia.Value) (how, string) {
	t, ok := v.(*tensor.Dense)
	switch {
	case !ok:
		return howDo, fmt.Sprintf("its result is a %T", v)
	case t.IsView() || t.RequiresIterator():
		return howDo, "its result is a view"
	}
	_, pd := s.op.(gorgonia.UsePreallocDoer)
	if pd && preallocDoer(s.inner) {
		return howPrealloc, ""
	}
	_, ud := s.op.(gorgonia.UnsafeDoer)
	if k := s.inner.OverwritesInput(); ud && unsafeDoer(s.inner) && k >= 0 && k < len(s.args) {
		if x, ok := s.args[k].(tensor.Tensor); ok && x.Dtype() == t.Dtype() && slices.Equal(x.Shape(), t.Shape()) {
			return howCopy, ""
		}
	}
	return howDo, "it has no variant that writes into a given buffer"
}

// Close releases the tape machine.
func (p *Program) Close() {
	if p.m != nil {
		p.m.Close()
	}
}

// Executor reports whether the program runs on the executor, and if not,
// why not.
func (p *Program) Executor() (bool, error) { return p.steps != nil, p.why }

// Op says how one op of a program runs.
type Op struct {
	Node *gorgonia.Node
	Op   gorgonia.Op // the op itself (unwrapped)
	How  string      // "prealloc", "copy+unsafe", "view", "do", "probing" or "pruned"
	Why  string      // for "view", "do" and "pruned"
}

// Ops says how each op of the program runs, in program order, leaving out
// those Run does not run (Pruned). An op's way is known after its first two
// runs ("probing" before).
func (p *Program) Ops() []Op {
	var out []Op
	for _, s := range p.steps {
		if !s.arg && !s.dead {
			out = append(out, Op{Node: s.node, Op: s.inner, How: s.how.String(), Why: s.why})
		}
	}
	return out
}

// Pruned are the ops Run leaves out, in program order: no value the
// program reads (gorgonia.Read) depends on them, and they have no other
// effect (Effectful). The tape machine (RunTape) still runs them.
func (p *Program) Pruned() []Op {
	var out []Op
	for _, s := range p.steps {
		if s.dead {
			out = append(out, Op{Node: s.node, Op: s.inner, How: "pruned", Why: "no value the program reads depends on it"})
		}
	}
	return out
}

// Fallbacks are the ops that allocate their output at every run: those
// that run through Do (the tape's path) and are not views.
func (p *Program) Fallbacks() []Op {
	var out []Op
	for _, o := range p.Ops() {
		if o.How == "do" {
			out = append(out, o)
		}
	}
	return out
}

// FullWriter is an op whose UsePreallocDo writes its whole result into the
// buffer it is given, whatever the buffer held, with Do's bits. The
// executor then writes its output into a buffer of its own from the third
// run on without trying it first; an op with side effects (one that updates
// a BatchNorm's running statistics) must be one, as a trial would run it
// twice. Other ops' buffers are adopted only after a trial run into a
// buffer full of junk gave Do's bits.
type FullWriter interface {
	gorgonia.UsePreallocDoer
	WritesAll()
}

func fullWriter(op gorgonia.Op) bool {
	_, ok := op.(FullWriter)
	return ok
}

// Poison fills every buffer the program owns with junk (every byte 0xFF,
// NaN for floats): the next run must not read what a buffer held. Tests
// call it between runs.
func (p *Program) Poison() {
	for _, s := range p.steps {
		if s.buf != nil && (s.how == howPrealloc || s.how == howCopy) {
			b := raw(s.buf)
			for i := range b {
				b[i] = 0xFF
			}
		}
	}
}

// Unwrapper is an op that wraps another (graphsplit's guard): the executor
// calls the wrapper and decides by the op it wraps.
type Unwrapper interface {
	Unwrap() gorgonia.Op
}

func unwrap(op gorgonia.Op) gorgonia.Op {
	for {
		w, ok := op.(Unwrapper)
		if !ok {
			return op
		}
		op = w.Unwrap()
	}
}

func preallocDoer(op gorgonia.Op) bool {
	_, ok := op.(gorgonia.UsePreallocDoer)
	return ok
}

func unsafeDoer(op gorgonia.Op) bool {
	_, ok := op.(gorgonia.UnsafeDoer)
	return ok
}

// stateful reports whether op is one of gorgonia's ops that keep state in
// the op object between runs or draw random numbers: they run exactly as
// the tape machine runs them.
func stateful(op gorgonia.Op) bool {
	if !reach.FromGorgonia(op) {
		return false
	}
	switch reach.TypeName(op) {
	case "BatchNormOp", "batchnormDiffOp", "batchNormDiffOp", "GroupNormOp", "groupNormDiffOp",
		"maxPoolOp", "maxPoolDiffOp", "avgPoolOp", "avgPoolDiffOp",
		"dropoutOp", "dropoutDiffOp", "randomOp":
		return true
	}
	return false
}

// sameMemory reports whether v is (a tensor over) buf's memory.
func sameMemory(v gorgonia.Value, buf gorgonia.Value) bool {
	t, ok := v.(tensor.Tensor)
	b, ok2 := buf.(tensor.Tensor)
	return ok && ok2 && t.Uintptr() == b.Uintptr()
}

// overlaps reports whether tensors a and b share memory.
func overlaps(a, b gorgonia.Value) bool {
	x, ok := a.(tensor.Tensor)
	y, ok2 := b.(tensor.Tensor)
	if !ok || !ok2 || x.MemSize() == 0 || y.MemSize() == 0 {
		return false
	}
	x0, y0 := x.Uintptr(), y.Uintptr()
	return x0 < y0+y.MemSize() && y0 < x0+x.MemSize()
}

// zeroed is what the tape machine's alloc instruction makes for n: a zero
// value of n's dtype and static shape, on the standard engine.
func zeroed(n *gorgonia.Node) (gorgonia.Value, error) {
	dt := n.Dtype()
	if n.Shape().IsScalar() {
		switch dt {
		case tensor.Float64:
			return gorgonia.NewF64(0), nil
		case tensor.Float32:
			return gorgonia.NewF32(0), nil
		case tensor.Int:
			return gorgonia.NewI(0), nil
		case tensor.Int64:
			return gorgonia.NewI64(0), nil
		case tensor.Int32:
			return gorgonia.NewI32(0), nil
		case tensor.Byte:
			return gorgonia.NewU8(0), nil
		case tensor.Bool:
			return gorgonia.NewB(false), nil
		}
	}
	if _, ok := n.Type().(gorgonia.TensorType); !ok {
		return nil, errors.Errorf("cannot allocate a %v for node %q", n.Type(), n.Name())
	}
	t := tensor.New(tensor.Of(dt), tensor.WithShape(n.Shape().Clone()...))
	standard(t)
	return t, nil
}

// poisoned returns a new tensor of t's dtype and shape whose every byte is
// 0xFF (NaN for floats).
func poisoned(t tensor.Tensor) tensor.Tensor {
	p := tensor.New(tensor.Of(t.Dtype()), tensor.WithShape(t.Shape().Clone()...))
	standard(p)
	b := raw(p)
	for i := range b {
		b[i] = 0xFF
	}
	return p
}

// sameBits reports whether a and b are tensors of one dtype and shape whose
// elements have the same bits.
func sameBits(a, b gorgonia.Value) bool {
	x, ok := a.(tensor.Tensor)
	y, ok2 := b.(tensor.Tensor)
	if !ok || !ok2 || x.Dtype() != y.Dtype() || !slices.Equal(x.Shape(), y.Shape()) {
		return false
	}
	rx, ry := raw(x), raw(y)
	return rx != nil && ry != nil && string(rx) == string(ry)
}

// raw is the memory of a dense tensor's elements as bytes (nil when its
// data is not a slice).
func raw(t tensor.Tensor) []byte {
	d := reflect.ValueOf(t.Data())
	if d.Kind() != reflect.Slice || d.Len() == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(d.UnsafePointer()), d.Len()*int(d.Type().Elem().Size()))
}
