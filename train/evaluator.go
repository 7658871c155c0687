package train

import (
	"context"

	"github.com/pipemare/pipemare/asyncvm"
	"github.com/pipemare/pipemare/internal/bnstate"
	"github.com/pipemare/pipemare/internal/tape"
	"github.com/pipemare/pipemare/zoo"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Evaluator measures a model's accuracy with its own graph and current
// weights (the learnables a pipeline trains in place), BatchNorm in
// inference mode. Build it once, before or after training; use it between
// training calls, never while a pipeline runs.
type Evaluator struct {
	m      *zoo.Model
	prog   *tape.Program
	logits gorgonia.Value
	// vm, when set, evaluates instead on the pipeline's stages (Train's
	// evaluator): their forward programs, in chunks of chunk microbatches
	// (pipelineChunk), and prog is nil.
	vm    *asyncvm.VM
	ctx   context.Context
	chunk int
}

// pipelineChunk is how many microbatches a pipeline's evaluator hands the
// stages in one VM.EvaluateNodes: the test set in few calls, its data and
// logits held at once for no more than that many.
const pipelineChunk = 64

// pipelineEvaluator evaluates m, which vm trains, on vm's stages
// (VM.EvaluateNodes): forward programs only, with the stage ops, the
// stages of a pipeline at once, without compiling m's graph again. The
// logits are the same bits as NewEvaluator's (the stage ops are
// gorgonia's ops, bit for bit), so the accuracy is the same.
func pipelineEvaluator(ctx context.Context, m *zoo.Model, vm *asyncvm.VM) *Evaluator {
	return &Evaluator{m: m, vm: vm, ctx: ctx, chunk: pipelineChunk}
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

// each runs the model over d in chunks of its batch size (of e.chunk
// batches on a pipeline) and calls fn for every target, in
// order.
func (e *Evaluator) each(d zoo.Data, fn func(Prediction)) error {
	m := e.m
	chunk, logitsOf := m.Batch, e.run
	if e.vm != nil {
		chunk, logitsOf = e.chunk*m.Batch, e.onStages
	} else {
		restore, err := bnstate.Infer(m.BatchNorms)
		if err != nil {
			return errors.Wrap(err, "train: evaluation")
		}
		defer restore()
	}
	total := 0
	for start := 0; start < d.Len(); start += chunk {
		size := min(chunk, d.Len()-start)
		size = (size + m.Batch - 1) / m.Batch * m.Batch // whole batches
		idx := make([]int, size)
		for i := range idx {
			idx[i] = min(start+i, d.Len()-1)
		}
		x, y := d.Batch(m, idx)
		logits, err := logitsOf(x, y)
		if err != nil {
			return errors.Wrap(err, "train: evaluation")
		}
		labels := y.Data().([]float32)
		classes := y.Shape()[len(y.Shape())-1]
		rowsPer := y.Shape().TotalSize() / classes / size
		valid := min(size, d.Len()-start) * rowsPer
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

// run is the logits of one batch, x and y, on the evaluator's own program.
func (e *Evaluator) run(x, y *tensor.Dense) ([]float32, error) {
	if err := gorgonia.Let(e.m.X, x); err != nil {
		return nil, err
	}
	if err := gorgonia.Let(e.m.Y, y); err != nil {
		return nil, err
	}
	e.logits = nil
	if err := e.prog.Run(); err != nil {
		return nil, err
	}
	return e.logits.Data().([]float32), nil
}

// onStages is the logits of whole batches x and y, computed by the
// pipeline's stages.
func (e *Evaluator) onStages(x, y *tensor.Dense) ([]float32, error) {
	_, vals, err := e.vm.EvaluateNodes(e.ctx, map[*gorgonia.Node]gorgonia.Value{e.m.X: x, e.m.Y: y}, e.m.Logits)
	if err != nil {
		return nil, err
	}
	return vals[0].Data().([]float32), nil
}

// Close releases the evaluator's machine.
func (e *Evaluator) Close() {
	if e.prog != nil {
		e.prog.Close()
	}
}
