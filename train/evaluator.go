package train

import (
	"github.com/pipemare/pipemare/internal/bnstate"
	"github.com/pipemare/pipemare/internal/tape"
	"github.com/pipemare/pipemare/zoo"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
)

// Evaluator measures a model's accuracy with its own graph and current
// weights (the learnables a pipeline trains in place), BatchNorm in
// inference mode. Build it once, before or after training; use it between
// training calls, never while a pipeline runs.
type Evaluator struct {
	m      *zoo.Model
	prog   *tape.Program
	logits gorgonia.Value
}

// NewEvaluator compiles m's graph for evaluation. Compiling a gorgonia tape
// machine switches BatchNorm ops between modes, which would reset their
// running statistics: they are saved and put back.
func NewEvaluator(m *zoo.Model) (*Evaluator, error) {
	e := &Evaluator{m: m}
	gorgonia.Read(m.Logits, &e.logits)
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = errors.Errorf("train: compiling %s for evaluation: %v", m.Name, r)
			}
		}()
		restore := bnstate.Training(m.BatchNorms)
		e.prog = tape.Compile(m.Graph, true)
		restore()
	}()
	return e, err
}

// Accuracy is the fraction of d's targets (the rows of its one-hot labels
// that hold a 1) whose class has the model's largest logit, in chunks of the
// model's batch size (the last chunk padded with repeats, which are not
// counted). For images that is classification accuracy; for sequences,
// per-token accuracy.
func (e *Evaluator) Accuracy(d zoo.Data) (float64, error) {
	right, total := 0, 0
	err := e.each(d, func(p Prediction) {
		total++
		if p.Predicted == p.Target {
			right++
		}
	})
	if err != nil {
		return 0, err
	}
	return float64(right) / float64(total), nil
}

// Prediction is the model's answer for one target of a data set: example
// Example's Position-th target row (0 for an image; a token's position for
// a sequence), the class it should have (Target) and the class with the
// largest logit (Predicted).
type Prediction struct {
	Example   int `json:"example"`
	Position  int `json:"position"`
	Target    int `json:"target"`
	Predicted int `json:"predicted"`
}

// Predictions are the model's answers for every target of d, in order:
// the ones Accuracy counts.
func (e *Evaluator) Predictions(d zoo.Data) ([]Prediction, error) {
	var out []Prediction
	err := e.each(d, func(p Prediction) { out = append(out, p) })
	return out, err
}

// each runs the model over d in chunks of its batch size and calls fn for
// every target, in order.
func (e *Evaluator) each(d zoo.Data, fn func(Prediction)) error {
	m := e.m
	restore, err := bnstate.Infer(m.BatchNorms)
	if err != nil {
		return errors.Wrap(err, "train: evaluation")
	}
	defer restore()
	total := 0
	for start := 0; start < d.Len(); start += m.Batch {
		idx := make([]int, m.Batch)
		for i := range idx {
			idx[i] = min(start+i, d.Len()-1)
		}
		x, y := d.Batch(m, idx)
		if err := gorgonia.Let(m.X, x); err != nil {
			return errors.Wrap(err, "train: evaluation")
		}
		if err := gorgonia.Let(m.Y, y); err != nil {
			return errors.Wrap(err, "train: evaluation")
		}
		e.logits = nil
		if err := e.prog.Run(); err != nil {
			return errors.Wrap(err, "train: evaluation")
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
			fn(Prediction{Example: start + r/rowsPer, Position: r % rowsPer, Target: target, Predicted: best})
		}
	}
	if total == 0 {
		return errors.New("train: no targets to evaluate")
	}
	return nil
}

// Close releases the evaluator's machine.
func (e *Evaluator) Close() { e.prog.Close() }
