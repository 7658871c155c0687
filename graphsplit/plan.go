package graphsplit

import (
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Plan is a model cut into pipeline stages. It is returned by Split and is
// read-only afterwards, except for the Programs, which each belong to the
// goroutine that runs them.
type Plan struct {
	// Stages in pipeline order: stage 0 reads the data, the last stage
	// computes the cost.
	Stages []*Stage
	// Feeds are the model's data inputs (the graph's inputs that are not
	// learnables), in graph order. A feed is given to every stage that
	// reads it.
	Feeds []Port
	// Learnables are the user's learnables in the order given to Split.
	Learnables gorgonia.Nodes
	// Shared are the learnables that ops of more than one stage read, in
	// the order of Learnables; empty when each learnable is read by one
	// stage.
	Shared []*Shared
	// Cost is the user's cost node.
	Cost *gorgonia.Node
	// Dtype is the cost's dtype.
	Dtype tensor.Dtype
	// Balance is how evenly the stages share the work as measured by
	// Profiled; nil for a plan cut without measuring.
	Balance *Balance

	a *analysis // kept to build keeping programs on demand
}

// Stage is one piece of the cut graph.
type Stage struct {
	// Index is the stage's position in the pipeline, from 0.
	Index int
	// Nodes are the original graph's op nodes computed in this stage, in
	// topological order.
	Nodes gorgonia.Nodes
	// Inputs are the tensors this stage reads: activations from earlier
	// stages (Kind Activation) and data inputs (Kind Data). Program.Inputs
	// is parallel to it.
	Inputs []Port
	// Outputs are the activations that later stages read, and the cost in
	// the last stage. Program.Outputs is parallel to it.
	Outputs []Port
	// Learnables are the original learnables this stage's ops read, in the
	// order of Plan.Learnables. Program.Learnables is parallel to it. A
	// learnable that several stages read is in each of them (Shared).
	Learnables gorgonia.Nodes
	// LearnableIndex[i] is the position of Learnables[i] in Plan.Learnables.
	LearnableIndex []int
	// Shared[i] describes Learnables[i] when other stages read it too, and
	// is nil when only this stage does. Shared is parallel to Learnables.
	Shared []*Shared
	// Stateful are the original nodes of this stage whose op keeps state
	// between its forward and its backward (BatchNorm, MaxPool, GroupNorm,
	// AvgPool). The stage computes BatchNorm and MaxPool with stage ops that
	// keep none (WithoutOpSubstitution); with any other stateful op its
	// gradients are exact only when its backward recomputes its forward
	// (Train does), and Plan.CanKeep is false.
	Stateful gorgonia.Nodes
	// Cost is the stage's estimated work and traffic.
	Cost StageCost

	// Forward computes Outputs from Inputs and Learnables.
	Forward *Program
	// Train recomputes the forward pass and runs the backward pass: it
	// reads Inputs, Learnables and the gradients of Outputs, and returns
	// Outputs, the gradients of the activation Inputs and of Learnables.
	Train *Program
}

// Shared is a learnable that ops of more than one stage read: a tied
// embedding, weights reused at every step of a recurrence, a weight penalty
// in the cost. Every reading stage has it among its Learnables, as its own
// placeholder in its programs — a replica, except in the owner — and its
// Train program returns that stage's contribution to the gradient; the
// learnable's gradient is the sum of the contributions of all its Readers.
//
// Like every learnable, each replica is bound to the user's tensor by
// default, which is right for running the stages one after the other. A
// runtime that updates stages concurrently binds each replica to a tensor of
// its own (Program.BindLearnables) and keeps it equal to the owner's: see the
// package documentation.
type Shared struct {
	// Index is the learnable's position in Plan.Learnables; Node is the
	// user's learnable.
	Index int
	Node  *gorgonia.Node
	// Owner is the first stage that reads it. In a pipeline its backward of
	// a microbatch runs after every other reader's, so it is the first to
	// have the whole gradient.
	Owner int
	// Readers are the stages that read it, ascending; Readers[0] is Owner.
	Readers []int
}

// Replicas are the readers other than the owner.
func (s *Shared) Replicas() []int { return s.Readers[1:] }

// Replica reports whether the stage holds Learnables[i] as a replica of a
// learnable another stage owns.
func (s *Stage) Replica(i int) bool { return s.Shared[i] != nil && s.Shared[i].Owner != s.Index }

// PortKind says where a port's tensor comes from.
type PortKind int

const (
	// Activation is a tensor computed by an earlier stage.
	Activation PortKind = iota
	// Data is one of the model's data inputs, fed by the caller.
	Data
	// CostPort is the scalar cost, the last stage's only output.
	CostPort
)

func (k PortKind) String() string {
	switch k {
	case Activation:
		return "activation"
	case Data:
		return "data"
	case CostPort:
		return "cost"
	}
	return "unknown"
}

// Port is a tensor that crosses a stage boundary.
type Port struct {
	// Key identifies the tensor across stages: the ID of the original node.
	// A runtime routes a stage's output to every stage whose Inputs have the
	// same Key, and sums the gradients those stages return for it.
	Key int64
	// Name is the original node's name.
	Name string
	// Kind says whether it is an activation, a data input or the cost.
	Kind PortKind
	// Shape and Dtype of the tensor.
	Shape tensor.Shape
	Dtype tensor.Dtype
	// Producer is the stage that computes it, or -1 for data.
	Producer int
	// Consumers are the later stages that read it, in order (empty for the
	// cost; for data, every stage that reads it).
	Consumers []int
	// Node is the original graph's node.
	Node *gorgonia.Node
}

// Bytes is the size of the tensor in bytes.
func (p Port) Bytes() int64 { return int64(p.Shape.TotalSize()) * int64(p.Dtype.Size()) }

// NumParams is the number of scalar parameters the stage's ops read,
// replicas included.
func (s *Stage) NumParams() int {
	n := 0
	for _, l := range s.Learnables {
		n += l.Shape().TotalSize()
	}
	return n
}

// Last reports whether s is the stage that computes the cost.
func (s *Stage) Last() bool { return len(s.Outputs) == 1 && s.Outputs[0].Kind == CostPort }

// Close releases the tape machines of every stage's programs. It is safe to
// call more than once.
func (p *Plan) Close() error {
	for _, s := range p.Stages {
		s.Forward.Close()
		s.Train.Close()
	}
	return nil
}
