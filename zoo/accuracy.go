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

// Accuracy is the fraction of d's targets (the rows of its one-hot labels
// that hold a 1) whose class has the model's largest logit, in chunks of the
// model's batch size (the last chunk padded with repeats, which are not
// counted). For images that is classification accuracy; for sequences,
// per-token accuracy.
func (e *Evaluator) Accuracy(d Data) (float64, error) {
	m := e.m
	restore := trainingMode(m)
	defer restore()
	for _, bn := range m.BatchNorms {
		if err := bn.SetTraining(false); err != nil {
			return 0, err
		}
	}
	right, total := 0, 0
	for start := 0; start < d.Len(); start += m.Batch {
		idx := make([]int, m.Batch)
		for i := range idx {
			idx[i] = min(start+i, d.Len()-1)
		}
		x, y := d.Batch(m, idx)
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
		labels := y.Data().([]float32)
		classes := y.Shape()[len(y.Shape())-1]
		rowsPer := y.Shape().TotalSize() / classes / m.Batch
		valid := min(m.Batch, d.Len()-start) * rowsPer
		for r := 0; r < valid; r++ {
			row, want := logits[r*classes:(r+1)*classes], labels[r*classes:(r+1)*classes]
			target := -1
			for c, v := range want {
				if v == 1 {
					target = c
				}
			}
			if target < 0 {
				continue
			}
			best := 0
			for c := range row {
				if row[c] > row[best] {
					best = c
				}
			}
			total++
			if best == target {
				right++
			}
		}
	}
	if total == 0 {
		return 0, errors.New("zoo: no targets to evaluate")
	}
	return float64(right) / float64(total), nil
}

// Close releases the evaluator's machine.
func (e *Evaluator) Close() { e.vm.Close() }
