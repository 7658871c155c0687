package graphsplit

import (
	"fmt"

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
	vm       gorgonia.VM
}

// Result is what one Run returns. Every tensor in it is freshly allocated and
// owned by the caller; the program never touches it again.
type Result struct {
	// Outputs are parallel to Stage.Outputs.
	Outputs []gorgonia.Value
	// InputGrads are parallel to Stage.Inputs, nil where
	// Program.InputGrads is nil (and always nil for Forward).
	InputGrads []gorgonia.Value
	// LearnableGrads are parallel to Stage.Learnables (nil for Forward).
	LearnableGrads []gorgonia.Value
}

// HasBackward reports whether the program computes gradients.
func (p *Program) HasBackward() bool { return p.kind == "train" }

// Compile builds the program's tape machine if it is not built yet. Run
// compiles on first use; a runtime calls Compile ahead to do that work before
// training starts. As with any new gorgonia tape machine, compiling does not
// change the learnables.
func (p *Program) Compile() (err error) {
	if p.vm != nil {
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = errors.Errorf("graphsplit: stage %d %s program: compiling the tape machine panicked: %v", p.Stage, p.kind, r)
		}
	}()
	p.vm = gorgonia.NewTapeMachine(p.Graph)
	return nil
}

// Close releases the tape machine. The program can be compiled again.
func (p *Program) Close() {
	if p.vm != nil {
		p.vm.Close()
		p.vm = nil
	}
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
// modify inputs, outputGrads or the learnables; it returns fresh tensors.
func (p *Program) Run(inputs, outputGrads []gorgonia.Value) (res Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errors.Errorf("graphsplit: stage %d %s program panicked: %v", p.Stage, p.kind, r)
		}
	}()
	if len(inputs) != len(p.Inputs) {
		return res, errors.Errorf("graphsplit: stage %d %s program takes %d inputs, got %d", p.Stage, p.kind, len(p.Inputs), len(inputs))
	}
	for i, v := range inputs {
		if err := checkValue(p.Inputs[i], v); err != nil {
			return res, errors.Wrapf(err, "graphsplit: stage %d input %d (%s)", p.Stage, i, p.Inputs[i].Name())
		}
		if err := gorgonia.Let(p.Inputs[i], v); err != nil {
			return res, errors.Wrapf(err, "graphsplit: stage %d input %d", p.Stage, i)
		}
	}
	if p.HasBackward() {
		if len(outputGrads) != len(p.Outputs) {
			return res, errors.Errorf("graphsplit: stage %d train program takes %d output gradients, got %d", p.Stage, len(p.Outputs), len(outputGrads))
		}
		for i, gph := range p.OutputGrads {
			if gph == nil {
				continue
			}
			if err := checkValue(gph, outputGrads[i]); err != nil {
				return res, errors.Wrapf(err, "graphsplit: stage %d gradient of output %d", p.Stage, i)
			}
			if err := gorgonia.Let(gph, outputGrads[i]); err != nil {
				return res, errors.Wrapf(err, "graphsplit: stage %d gradient of output %d", p.Stage, i)
			}
		}
	}
	if err := p.Compile(); err != nil {
		return res, err
	}
	clear(p.outSlot)
	clear(p.inGSlot)
	clear(p.parGSlot)
	p.vm.Reset()
	if err := p.vm.RunAll(); err != nil {
		return res, errors.Wrapf(err, "graphsplit: stage %d %s program", p.Stage, p.kind)
	}
	res.Outputs = append([]gorgonia.Value(nil), p.outSlot...)
	if p.HasBackward() {
		res.InputGrads = append([]gorgonia.Value(nil), p.inGSlot...)
		res.LearnableGrads = append([]gorgonia.Value(nil), p.parGSlot...)
	}
	return res, nil
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

// scalarOne returns 1 of dt, the gradient to feed for a cost.
func scalarOne(dt tensor.Dtype) (gorgonia.Value, error) {
	switch dt {
	case tensor.Float64:
		return gorgonia.NewF64(1), nil
	case tensor.Float32:
		return gorgonia.NewF32(1), nil
	}
	return nil, fmt.Errorf("graphsplit: cost dtype %v is not a float", dt)
}
