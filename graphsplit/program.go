package graphsplit

import (
	"fmt"
	"slices"

	"github.com/pipemare/pipemare/internal/tape"
	"github.com/pipemare/pipemare/internal/tensorutil"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Program is one executable graph of a stage: its forward pass (Stage.Forward)
// or its forward pass followed by its backward pass (Stage.Train).
//
// A Program belongs to one goroutine at a time. Run is the safe way to execute
// it; the exported nodes are there for inspection and for runtimes that need
// more than Run offers.
type Program struct {
	// Stage is the index of the stage the program belongs to.
	Stage int
	// Graph is the program's own graph.
	Graph *gorgonia.ExprGraph
	// Inputs are placeholders, parallel to Stage.Inputs.
	Inputs gorgonia.Nodes
	// Learnables are the stage's learnables in this graph, parallel to
	// Stage.Learnables, bound to the user's value tensors.
	Learnables gorgonia.Nodes
	// Outputs are parallel to Stage.Outputs.
	Outputs gorgonia.Nodes

	// OutputGrads are placeholders for the gradients of Outputs (Train
	// only). An entry is nil where no learnable or activation input of the
	// stage can influence that output, so its gradient is not needed. For
	// the cost it is a scalar: feed 1 for the plain gradient, or a scale.
	OutputGrads gorgonia.Nodes
	// InputGrads are the gradients of Inputs (Train only); nil for data
	// inputs and for inputs with no differentiable path to an output.
	InputGrads gorgonia.Nodes
	// LearnableGrads are the gradients of Learnables (Train only).
	LearnableGrads gorgonia.Nodes

	kind     string
	params   []gorgonia.Value // the user's tensors, bound by default
	outSlot  []gorgonia.Value // targets of gorgonia.Read nodes
	inGSlot  []gorgonia.Value
	parGSlot []gorgonia.Value
	prog     *tape.Program
	inBuf    []gorgonia.Value // the program's copies of inputs it cannot bind as they are
	gradBuf  []gorgonia.Value // the same for the output gradients

	// Kept are the forward values a Keeping's backward reads (its forward
	// program only); Result.Kept returns them.
	Kept     gorgonia.Nodes
	keptSlot []gorgonia.Value
	// Probes are the nodes a probe program (Plan.NewProbe) reads;
	// Result.Probes returns their values.
	Probes    gorgonia.Nodes
	probeSlot []gorgonia.Value

	local    map[*gorgonia.Node]*gorgonia.Node // original → this graph
	aux      map[*gorgonia.Node]gorgonia.Nodes // original → extra nodes its stage op built
	fwdCount int                               // nodes of the forward pass
	caught   *caught                           // an op's panic in the current Run
}

// Result is what one Run returns. Its tensors are borrowed: they belong to
// the program, which overwrites them at its next Run (they may also be the
// caller's own inputs, or the learnables, where the program passes one
// through). Read them, or copy them (Clone), before running the program
// again, and never modify them.
type Result struct {
	// Outputs are parallel to Stage.Outputs.
	Outputs []gorgonia.Value
	// InputGrads are parallel to Stage.Inputs, nil where
	// Program.InputGrads is nil (and always nil for Forward).
	InputGrads []gorgonia.Value
	// LearnableGrads are parallel to Stage.Learnables (nil for Forward).
	LearnableGrads []gorgonia.Value
	// Kept are the values of Program.Kept (a Keeping's forward only).
	Kept []gorgonia.Value
	// Probes are the values of Program.Probes (a probe program only).
	Probes []gorgonia.Value
}

// HasBackward reports whether the program computes gradients: a Train
// program, a keeping backward, or either half of a split one.
func (p *Program) HasBackward() bool {
	switch p.kind {
	case "train", "backward", "input", "weight":
		return true
	}
	return false
}

// Compile compiles the program (internal/tape) if it is not compiled yet.
// Run compiles on first use; a runtime calls Compile ahead to do that work
// before training starts. As with any new gorgonia tape machine, compiling
// does not change the learnables.
func (p *Program) Compile() (err error) {
	if p.prog != nil {
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = errors.Errorf("graphsplit: stage %d %s program: compiling the tape machine panicked: %v", p.Stage, p.kind, r)
		}
	}()
	p.prog = tape.Compile(p.Graph, false)
	return nil
}

// Close releases the compiled program and its buffers. The program can be
// compiled again.
func (p *Program) Close() {
	if p.prog != nil {
		p.prog.Close()
		p.prog = nil
	}
	p.inBuf, p.gradBuf = nil, nil
}

// Ops says how each op of the compiled program runs (nil before Compile):
// the executor's account, in program order, for tests and profiles.
func (p *Program) Ops() []tape.Op {
	if p.prog == nil {
		return nil
	}
	return p.prog.Ops()
}

// Pruned are the ops of the compiled program that Run leaves out, in
// program order (nil before Compile): gradients and other values that
// nothing the program returns depends on — gorgonia's symbolic backward
// differentiates every operand, the data's too. RunOnTape still computes
// them.
func (p *Program) Pruned() []tape.Op {
	if p.prog == nil {
		return nil
	}
	return p.prog.Pruned()
}

// BindLearnables makes the next runs read vals (parallel to Learnables)
// instead of the user's tensors — a stashed or corrected copy of the weights.
// BindLearnables(nil) goes back to the user's tensors. The values are read,
// never written, by Run.
func (p *Program) BindLearnables(vals []gorgonia.Value) error {
	if vals == nil {
		vals = p.params
	}
	if len(vals) != len(p.Learnables) {
		return errors.Errorf("graphsplit: stage %d %s program has %d learnables, got %d values", p.Stage, p.kind, len(p.Learnables), len(vals))
	}
	for i, v := range vals {
		if err := checkValue(p.Learnables[i], v); err != nil {
			return errors.Wrapf(err, "graphsplit: stage %d learnable %d (%s)", p.Stage, i, p.Learnables[i].Name())
		}
		if err := gorgonia.Let(p.Learnables[i], v); err != nil {
			return errors.Wrapf(err, "graphsplit: stage %d learnable %d", p.Stage, i)
		}
	}
	return nil
}

// Run executes the program once. inputs are parallel to Stage.Inputs.
// outputGrads are parallel to Stage.Outputs and only read by Train programs
// (entries where OutputGrads is nil are ignored and may be nil). Run does not
// modify inputs, outputGrads or the learnables, but reads them while it runs:
// no other goroutine may write them meanwhile (nor run an op on them: some
// of gorgonia's ops transpose an input's header for the time of the op). It
// returns borrowed tensors (Result). An op that panics makes Run return an
// error whose cause is an *OpPanic; the program can be run again.
func (p *Program) Run(inputs, outputGrads []gorgonia.Value) (Result, error) {
	return p.run(inputs, outputGrads, false)
}

// RunOnTape is Run on gorgonia's tape machine, compiled from the same
// graph: every input is copied, every result is a fresh clone the caller
// owns. It is the reference the executor is tested against (bit for bit),
// and slower.
func (p *Program) RunOnTape(inputs, outputGrads []gorgonia.Value) (Result, error) {
	return p.run(inputs, outputGrads, true)
}

func (p *Program) run(inputs, outputGrads []gorgonia.Value, onTape bool) (res Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errors.Errorf("graphsplit: stage %d %s program panicked: %v", p.Stage, p.kind, r)
		}
	}()
	if len(inputs) != len(p.Inputs) {
		return res, errors.Errorf("graphsplit: stage %d %s program takes %d inputs, got %d", p.Stage, p.kind, len(p.Inputs), len(inputs))
	}
	if err := p.Compile(); err != nil {
		return res, err
	}
	if p.inBuf == nil {
		p.inBuf = make([]gorgonia.Value, len(p.Inputs))
		p.gradBuf = make([]gorgonia.Value, len(p.OutputGrads))
	}
	for i, v := range inputs {
		if err := checkValue(p.Inputs[i], v); err != nil {
			return res, errors.Wrapf(err, "graphsplit: stage %d input %d (%s)", p.Stage, i, p.Inputs[i].Name())
		}
		if err := p.bind(p.Inputs[i], &p.inBuf[i], v, onTape); err != nil {
			return res, errors.Wrapf(err, "graphsplit: stage %d input %d (%s)", p.Stage, i, p.Inputs[i].Name())
		}
	}
	if p.HasBackward() {
		if len(outputGrads) != len(p.OutputGrads) {
			return res, errors.Errorf("graphsplit: stage %d %s program takes %d output gradients, got %d", p.Stage, p.kind, len(p.OutputGrads), len(outputGrads))
		}
		for i, gph := range p.OutputGrads {
			if gph == nil {
				continue
			}
			v := outputGrads[i]
			if v == nil || v.Dtype() != gph.Dtype() || v.Shape().TotalSize() != gph.Shape().TotalSize() {
				return res, errors.Errorf("graphsplit: stage %d gradient of output %d (%s): got %v, want %d elements of %v", p.Stage, i, gph.Name(), describe(v), gph.Shape().TotalSize(), gph.Dtype())
			}
			if err := p.bind(gph, &p.gradBuf[i], v, onTape); err != nil {
				return res, errors.Wrapf(err, "graphsplit: stage %d gradient of output %d", p.Stage, i)
			}
		}
	}
	clear(p.outSlot)
	clear(p.inGSlot)
	clear(p.parGSlot)
	clear(p.keptSlot)
	clear(p.probeSlot)
	p.caught.first = nil
	run := p.prog.Run
	if onTape {
		run = p.prog.RunTape
	}
	if err := run(); err != nil {
		if c := p.caught.first; c != nil {
			err = c
		}
		return res, errors.Wrapf(err, "graphsplit: stage %d %s program", p.Stage, p.kind)
	}
	if res.Outputs, err = conform(p.outSlot, p.Outputs); err != nil {
		return res, errors.Wrapf(err, "graphsplit: stage %d %s program output", p.Stage, p.kind)
	}
	if len(p.Kept) > 0 {
		if res.Kept, err = conform(p.keptSlot, p.Kept); err != nil {
			return res, errors.Wrapf(err, "graphsplit: stage %d saved tensor", p.Stage)
		}
	}
	if len(p.Probes) > 0 {
		if res.Probes, err = conform(p.probeSlot, p.Probes); err != nil {
			return res, errors.Wrapf(err, "graphsplit: stage %d probed node", p.Stage)
		}
	}
	if p.HasBackward() {
		if res.InputGrads, err = conform(p.inGSlot, p.InputGrads); err != nil {
			return res, errors.Wrapf(err, "graphsplit: stage %d gradient of input", p.Stage)
		}
		if res.LearnableGrads, err = conform(p.parGSlot, p.Learnables); err != nil {
			return res, errors.Wrapf(err, "graphsplit: stage %d gradient of learnable", p.Stage)
		}
	}
	return res, nil
}

// conform copies the read slots into a new slice, giving each tensor the
// static shape of its node where gorgonia returned an equivalent one (some
// ops drop or add trailing unit dimensions at run time), so that the next
// stage can bind it: a view of the program's tensor, whose own shape is left
// as the program's ops made it.
func conform(slots []gorgonia.Value, like gorgonia.Nodes) ([]gorgonia.Value, error) {
	out := make([]gorgonia.Value, len(slots))
	for i, v := range slots {
		out[i] = v
		t, ok := v.(tensor.Tensor)
		if !ok || like[i] == nil || like[i].IsScalar() || t.Shape().Eq(like[i].Shape()) {
			continue
		}
		if t.Shape().TotalSize() != like[i].Shape().TotalSize() {
			return nil, errors.Errorf("%d (%s): gorgonia computed shape %v, the graph says %v", i, like[i].Name(), t.Shape(), like[i].Shape())
		}
		d, ok := t.(*tensor.Dense)
		if !ok {
			return nil, errors.Errorf("%d (%s): cannot view a %T", i, like[i].Name(), t)
		}
		view := d.ShallowClone()
		if err := view.Reshape(like[i].Shape()...); err != nil {
			return nil, errors.Wrapf(err, "%d (%s)", i, like[i].Name())
		}
		out[i] = view
	}
	return out, nil
}

// Clone returns a copy of r whose tensors are the caller's own.
func (r Result) Clone() (Result, error) {
	var err error
	c := Result{}
	for _, f := range []struct {
		dst *[]gorgonia.Value
		src []gorgonia.Value
	}{{&c.Outputs, r.Outputs}, {&c.InputGrads, r.InputGrads}, {&c.LearnableGrads, r.LearnableGrads}, {&c.Kept, r.Kept}, {&c.Probes, r.Probes}} {
		if f.src == nil {
			continue
		}
		*f.dst = make([]gorgonia.Value, len(f.src))
		for i, v := range f.src {
			if v != nil {
				if (*f.dst)[i], err = gorgonia.CloneValue(v); err != nil {
					return Result{}, errors.Wrapf(err, "graphsplit: cloning a result")
				}
			}
		}
	}
	return c, nil
}

// bind binds v to n. The executor never writes a bound value, so a dense
// tensor of n's shape is bound as it is; anything else (a view, a tensor of
// another shape with as many elements) is copied into the program's own
// buffer for n, as every input is on gorgonia's tape machine (onTape, or
// where the executor cannot run the program), which may overwrite an
// input's tensor in place (a Reshape of an input followed by an in-place
// op). Scalars are immutable and bound as they are.
func (p *Program) bind(n *gorgonia.Node, buf *gorgonia.Value, v gorgonia.Value, onTape bool) error {
	if n.IsScalar() {
		if _, ok := v.(gorgonia.Scalar); ok {
			return gorgonia.Let(n, v)
		}
		x, err := tensorutil.Scalar(v) // a one-element tensor
		if err != nil {
			return err
		}
		s, err := tensorutil.ScalarOf(v.Dtype(), x)
		if err != nil {
			return err
		}
		return gorgonia.Let(n, s)
	}
	if d, ok := v.(*tensor.Dense); ok && !d.IsView() && slices.Equal(d.Shape(), n.Shape()) { // Eq takes (n) for (1, n)
		if onExecutor, _ := p.prog.Executor(); onExecutor && !onTape {
			return gorgonia.Let(n, v)
		}
	}
	if *buf == nil {
		*buf = tensor.New(tensor.WithShape(n.Shape()...), tensor.Of(n.Dtype()))
	}
	if err := tensorutil.CopyInto((*buf).(tensor.Tensor), v); err != nil {
		return err
	}
	return gorgonia.Let(n, *buf)
}

func describe(v gorgonia.Value) string {
	if v == nil {
		return "nil"
	}
	return fmt.Sprintf("%v %v", v.Shape(), v.Dtype())
}

// checkValue tells why v cannot be bound to n.
func checkValue(n *gorgonia.Node, v gorgonia.Value) error {
	if v == nil {
		return errors.Errorf("value is nil, want %v %v", n.Shape(), n.Dtype())
	}
	want, got := n.Shape(), v.Shape()
	if n.IsScalar() {
		if !got.IsScalarEquiv() {
			return errors.Errorf("shape %v, want a scalar", got)
		}
	} else if !want.Eq(got) {
		return errors.Errorf("shape %v, want %v", got, want)
	}
	if v.Dtype() != n.Dtype() {
		return errors.Errorf("dtype %v, want %v", v.Dtype(), n.Dtype())
	}
	return nil
}

// placeholder makes a uniquely named input node in g shaped like like.
func placeholder(g *gorgonia.ExprGraph, like *gorgonia.Node, name string, opts ...gorgonia.NodeConsOpt) *gorgonia.Node {
	o := []gorgonia.NodeConsOpt{gorgonia.WithType(like.Type()), gorgonia.In(g), gorgonia.WithShape(like.Shape()...), gorgonia.WithName(name)}
	return gorgonia.NewUniqueNode(append(o, opts...)...)
}

// newInput makes a uniquely named input node of dtype dt and the given shape.
func newInput(g *gorgonia.ExprGraph, dt tensor.Dtype, shape tensor.Shape, name string) *gorgonia.Node {
	if len(shape) == 0 {
		return gorgonia.NewScalar(g, dt, gorgonia.WithName(name))
	}
	return gorgonia.NewTensor(g, dt, len(shape), gorgonia.WithShape(shape...), gorgonia.WithName(name))
}

// scalarOne returns 1 of dt, the gradient to feed for a cost.
func scalarOne(dt tensor.Dtype) (gorgonia.Value, error) { return tensorutil.ScalarOf(dt, 1) }
