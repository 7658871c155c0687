package zoo

import (
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Evaluator measures a model's accuracy with its own graph and current
// weights (the learnables a pipeline trains in place), BatchNorm in
// inference mode. Build it once, before or after training; use it between
// training calls, never while a pipeline runs.
type Evaluator struct {
	m      *Model
	vm     gorgonia.VM
	logits gorgonia.Value
}

// NewEvaluator compiles m's graph for evaluation. Compiling a gorgonia tape
// machine switches BatchNorm ops between modes, which would reset their
// running statistics: they are saved and put back.
func NewEvaluator(m *Model) (*Evaluator, error) {
	e := &Evaluator{m: m}
	gorgonia.Read(m.Logits, &e.logits)
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = errors.Errorf("zoo: compiling %s for evaluation: %v", m.Name, r)
			}
		}()
		restore := trainingMode(m)
		e.vm = gorgonia.NewTapeMachine(m.Graph, gorgonia.EvalMode())
		restore()
	}()
	return e, err
}

// trainingMode saves the BatchNorm statistics and returns a function that
// puts the ops back in training mode with those statistics.
func trainingMode(m *Model) func() {
	type saved struct {
		op   *gorgonia.BatchNormOp
		m, v tensor.Tensor
	}
	var s []saved
	for _, bn := range m.BatchNorms {
		mean, vari := bn.Stats()
		s = append(s, saved{bn, mean.Clone().(tensor.Tensor), vari.Clone().(tensor.Tensor)})
	}
	return func() {
		for _, x := range s {
			_ = x.op.SetTraining(true)  // zeroes the statistics…
			_ = x.op.SetStats(x.m, x.v) // …so put them back
		}
	}
}

// Accuracy is the fraction of d the model classifies right, in chunks of
// the model's batch size (the last chunk padded with repeats).
func (e *Evaluator) Accuracy(d *Dataset) (float64, error) {
	m := e.m
	restore := trainingMode(m)
	defer restore()
	for _, bn := range m.BatchNorms {
		if err := bn.SetTraining(false); err != nil {
			return 0, err
		}
	}
	right := 0
	for start := 0; start < d.Len(); start += m.Batch {
		idx := make([]int, m.Batch)
		for i := range idx {
			idx[i] = min(start+i, d.Len()-1)
		}
		x, y := d.tensors(m, idx)
		if err := gorgonia.Let(m.X, x); err != nil {
			return 0, errors.Wrap(err, "zoo: evaluation")
		}
		if err := gorgonia.Let(m.Y, y); err != nil {
			return 0, errors.Wrap(err, "zoo: evaluation")
		}
		e.logits = nil
		e.vm.Reset()
		if err := e.vm.RunAll(); err != nil {
			return 0, errors.Wrap(err, "zoo: evaluation")
		}
		logits := e.logits.Data().([]float32)
		for i := 0; i < m.Batch && start+i < d.Len(); i++ {
			row := logits[i*d.Classes : (i+1)*d.Classes]
			best := 0
			for c := range row {
				if row[c] > row[best] {
					best = c
				}
			}
			if best == d.Labels[start+i] {
				right++
			}
		}
	}
	return float64(right) / float64(d.Len()), nil
}

// Close releases the evaluator's machine.
func (e *Evaluator) Close() { e.vm.Close() }
