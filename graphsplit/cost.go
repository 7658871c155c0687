package graphsplit

import (
	"github.com/pipemare/pipemare/internal/reach"
	"math"

	"gorgonia.org/gorgonia"
)

// CostModel prices one op node of the original graph for balancing.
//
// Split calls OpCost once for every op node the cost depends on, from one
// goroutine, before it builds any stage; the node and its children must not
// be modified. Costs are in any unit, as long as they add up.
type CostModel interface {
	OpCost(n *gorgonia.Node) float64
}

// CostFunc adapts a function to CostModel.
type CostFunc func(n *gorgonia.Node) float64

// OpCost calls f.
func (f CostFunc) OpCost(n *gorgonia.Node) float64 { return f(n) }

// EstimatedCost is the default cost model: an op costs its estimated
// floating-point operations plus the bytes it reads and writes, a rough
// roofline for a CPU where one byte moved costs about as much as one flop.
type EstimatedCost struct{}

// OpCost returns EstimateFLOPs(n) + EstimateBytes(n).
func (EstimatedCost) OpCost(n *gorgonia.Node) float64 {
	return float64(EstimateFLOPs(n) + EstimateBytes(n))
}

// StageCost summarises what a stage computes and moves.
type StageCost struct {
	// FLOPs is the estimated floating-point operations of one forward pass.
	FLOPs int64
	// Bytes is the estimated memory traffic of one forward pass.
	Bytes int64
	// BackwardFLOPs is the estimated floating-point operations of one
	// backward pass: for each op, its forward FLOPs once per input that
	// needs a gradient (an input that depends on a learnable). A matrix
	// product of an activation and a weight counts twice, that of data
	// and a weight once (the data's gradient is never computed).
	BackwardFLOPs int64
	// Model is the stage's cost under the cost model used to balance.
	Model float64
	// InBytes and OutBytes are the sizes of the activations the stage
	// receives from earlier stages and sends to later ones (data inputs
	// excluded).
	InBytes, OutBytes int64
	// ParamBytes is the size of the learnables the stage reads, replicas
	// included.
	ParamBytes int64
}

// EstimateBytes is the size of n's inputs and output, in bytes.
func EstimateBytes(n *gorgonia.Node) int64 {
	size := int64(n.Dtype().Size())
	b := int64(n.Shape().TotalSize()) * size
	it := n.Graph().From(n.ID())
	for it != nil && it.Next() {
		c := it.Node().(*gorgonia.Node)
		b += int64(c.Shape().TotalSize()) * int64(c.Dtype().Size())
	}
	return b
}

// EstimateFLOPs estimates the floating-point operations of one execution of
// n's op: 2·m·n·k for matrix products, a few per element for normalisation
// and softmax, one per element read or written otherwise.
func EstimateFLOPs(n *gorgonia.Node) int64 {
	var kids gorgonia.Nodes
	it := n.Graph().From(n.ID())
	for it != nil && it.Next() {
		kids = append(kids, it.Node().(*gorgonia.Node))
	}
	out := int64(n.Shape().TotalSize())
	in := int64(0)
	for _, c := range kids {
		if s := int64(c.Shape().TotalSize()); s > in {
			in = s
		}
	}
	name := reach.TypeString(n.Op())
	switch name {
	case "gorgonia.linAlgBinOp":
		if len(kids) == 2 && out > 0 {
			a := float64(kids[0].Shape().TotalSize())
			b := float64(kids[1].Shape().TotalSize())
			batch := 1.0
			if n.Shape().Dims() == 3 { // batched: (b, m, n)
				batch = float64(n.Shape()[0])
			}
			k := math.Sqrt(a * b / (float64(out) * batch))
			return int64(2 * float64(out) * k)
		}
	case "gorgonia.tensordotOp":
		if len(kids) == 2 && out > 0 {
			k := math.Sqrt(float64(kids[0].Shape().TotalSize()) * float64(kids[1].Shape().TotalSize()) / float64(out))
			return int64(2 * float64(out) * k)
		}
	case "*gorgonia.BatchNormOp", "*gorgonia.GroupNormOp":
		return 8 * out
	case "*gorgonia.softmaxOp", "*gorgonia.sparsemaxOp":
		return 5 * out
	case "*gorgonia.maxPoolOp", "*gorgonia.avgPoolOp":
		return in
	}
	if in > out {
		return in
	}
	return out
}

// Costs are the stages' estimated costs in stage order, each its
// StageCost's FLOPs, BackwardFLOPs and Bytes (one training pass: forward
// and backward, in integers): what a placement of the stages on processes balances
// (schedule.Balanced). They depend on the graph and the cut alone, never
// on a measurement nor on the cost model Split balanced by, so every
// process of a run, on any host, computes the same.
func (p *Plan) Costs() []float64 {
	out := make([]float64, len(p.Stages))
	for i, s := range p.Stages {
		out[i] = float64(s.Cost.FLOPs + s.Cost.BackwardFLOPs + s.Cost.Bytes)
	}
	return out
}
