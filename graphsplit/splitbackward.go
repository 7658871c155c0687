package graphsplit

import (
	"fmt"
	"runtime/debug"

	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
)

// SplitBackward is a keeping backward (Keeping.Backward) cut in two
// programs, for the zero-bubble schedules' two actions: Input computes
// the gradients of the stage's inputs, Weight later those of its
// learnables. Each op of the backward is in exactly one of them — Input
// runs every op the input gradients need, Weight the rest — and each
// reads the same values as in the backward, so Input then Weight
// computes the backward's gradients bit for bit. What Weight reads and
// Input does not compute for it — intermediate gradients Input computed,
// saved forward tensors, output gradients — Input returns (Result.Kept),
// and the caller keeps until Weight runs: the split's memory.
//
// Only a keeping backward splits: a Train program recomputes the forward
// in its backward, which both halves would need; a stage for which
// CanKeep is false keeps running its whole backward for an input
// gradient.
type SplitBackward struct {
	// Input reads what Keeping.Backward reads (Inputs parallel to
	// Forward.Kept, Learnables, OutputGrads) and returns InputGrads and
	// Kept, what Weight reads; it has no LearnableGrads.
	Input *Program
	// Weight reads Input's Kept (Inputs parallel to Input.Kept) and the
	// Learnables, and returns LearnableGrads; it takes no output
	// gradients and returns no input gradients.
	Weight *Program
}

// NewSplitKeeping builds the keeping programs of stage s and their
// backward split in two (SplitBackward). It refuses stages for which
// CanKeep is false. The split is nil (and the error too) where the
// learnables' gradients read no value of the microbatch (no intermediate
// gradient, saved tensor nor output gradient): a program without inputs
// does not compile, and the stage runs its whole backward for an input
// gradient.
func (p *Plan) NewSplitKeeping(s int) (k *Keeping, sb *SplitBackward, err error) {
	if s < 0 || s >= len(p.Stages) {
		return nil, nil, errors.Errorf("graphsplit: NewSplitKeeping(%d): the plan has %d stages", s, len(p.Stages))
	}
	if !p.CanKeep(s) {
		return nil, nil, errors.Errorf("graphsplit: stage %d has stateful ops (%s): only recomputation gives exact gradients there", s, statefulKinds(p.Stages[s]))
	}
	defer func() {
		if r := recover(); r != nil {
			k, sb, err = nil, nil, errors.Errorf("graphsplit: stage %d split backward: gorgonia panicked: %v\n%s", s, r, debug.Stack())
		}
	}()
	k, kp, err := p.keeping(s)
	if err != nil {
		return nil, nil, err
	}
	if sb, err = kp.split(); err != nil {
		return nil, nil, err
	}
	return k, sb, nil
}

// split builds the two halves of the keeping backward: the nodes the
// input gradients need go to Input, those only the learnables' gradients
// need to Weight, and what Weight reads of the rest is handed over. It
// returns nil where Weight would read nothing of the microbatch.
func (k *keeper) split() (*SplitBackward, error) {
	inBwd := make(map[*gorgonia.Node]bool, len(k.bwd))
	for _, n := range k.bwd {
		inBwd[n] = true
	}
	inputSide := k.closure(k.train.InputGrads, inBwd, nil)
	weightSide := k.closure(k.train.LearnableGrads, inBwd, inputSide)
	isParam := func(n *gorgonia.Node) bool { _, ok := k.isParam[n]; return ok }
	rebuilt := make(map[*gorgonia.Node]bool, len(k.rebuilt))
	for _, n := range k.rebuilt {
		rebuilt[n] = true
	}
	handed := make(map[*gorgonia.Node]bool)
	hand := func(n *gorgonia.Node) {
		if n != nil && !weightSide[n] && !isParam(n) && !isConstant(n) && !rebuilt[n] {
			handed[n] = true
		}
	}
	for n := range weightSide {
		it := k.train.Graph.From(n.ID())
		for it != nil && it.Next() {
			hand(it.Node().(*gorgonia.Node))
		}
	}
	for _, g := range k.train.LearnableGrads {
		hand(g)
	}
	var handoff, iNodes, wNodes gorgonia.Nodes
	for n := range handed {
		handoff = append(handoff, n)
	}
	for n := range inputSide {
		iNodes = append(iNodes, n)
	}
	for n := range weightSide {
		wNodes = append(wNodes, n)
	}
	if len(handoff) == 0 {
		return nil, nil // Weight would read nothing of the microbatch
	}
	k.byIndex(handoff)
	k.byIndex(iNodes)
	k.byIndex(wNodes)

	in, err := k.program("input", k.backwardInputs, iNodes, func(prog *Program) (err error) {
		prog.InputGrads = make(gorgonia.Nodes, len(k.train.InputGrads))
		for i, gr := range k.train.InputGrads {
			if gr != nil {
				if prog.InputGrads[i], err = k.get(gr); err != nil {
					return err
				}
			}
		}
		for _, n := range handoff {
			l, err := k.get(n)
			if err != nil {
				return err
			}
			prog.Kept = append(prog.Kept, l)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	weight, err := k.program("weight", func(prog *Program) {
		for i, n := range handoff {
			ph := newInput(k.g, n.Dtype(), n.Shape(), fmt.Sprintf("stage%d/handoff%d/%s", k.s, i, n.Name()))
			k.local[n] = ph
			prog.Inputs = append(prog.Inputs, ph)
		}
		k.learnableInputs(prog)
	}, wNodes, func(prog *Program) (err error) {
		prog.LearnableGrads = make(gorgonia.Nodes, len(k.train.LearnableGrads))
		for i, gr := range k.train.LearnableGrads {
			if prog.LearnableGrads[i], err = k.get(gr); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &SplitBackward{Input: in, Weight: weight}, nil
}

// closure is the set of backward nodes (within) that roots need, not
// counting those in stop nor the output gradients' placeholders: the
// walk stops at them, and at forward nodes, learnables and constants.
func (k *keeper) closure(roots gorgonia.Nodes, within, stop map[*gorgonia.Node]bool) map[*gorgonia.Node]bool {
	set := make(map[*gorgonia.Node]bool)
	var walk func(n *gorgonia.Node)
	walk = func(n *gorgonia.Node) {
		if n == nil || set[n] || stop[n] || !within[n] {
			return
		}
		if _, ok := k.isGradIn[n]; ok {
			return
		}
		set[n] = true
		it := k.train.Graph.From(n.ID())
		for it != nil && it.Next() {
			walk(it.Node().(*gorgonia.Node))
		}
	}
	for _, r := range roots {
		walk(r)
	}
	return set
}
