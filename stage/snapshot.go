package stage

import (
	"fmt"

	"github.com/pipemare/pipemare/internal/bnstate"
	"github.com/pipemare/pipemare/internal/tensorutil"
	"github.com/pipemare/pipemare/solvers"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Snapshot is a stage's whole state at a drained point — no microbatch in
// flight — which is what a checkpoint saves: restored into a fresh runtime
// of the same stage, training continues bit for bit as it would have.
type Snapshot struct {
	Stage int
	// Version is the number of updates the stage applied.
	Version int
	// Weights are copies of the stage's learnables, in Stage.Learnables
	// order.
	Weights []tensor.Tensor
	// Solver is the state of every layer of the stage's solver chain,
	// outermost first (a layer with no state has an empty State).
	Solver []solvers.State
	// BatchNorm holds the running mean and variance of each BatchNorm op,
	// in the stage's order.
	BatchNorm []tensor.Tensor
	// Ring holds, under delay injection, the past weight versions the
	// stage's forwards may still read, with the version of each (−1: none).
	Ring         [][]tensor.Tensor
	RingVersions []int
	// Prev holds, under PipeDream-2BW, the weights before the last update
	// (version PrevVersion, −1: none), which the next step's forwards read.
	Prev        []tensor.Tensor
	PrevVersion int
	// Segment is the segment whose delay the solver was last told.
	Segment Segment
	Told    bool
	// Stats are the stage's measurements so far.
	Stats Stats
}

// snapshot returns the stage's state. It fails when a microbatch is in
// flight, or when a solver layer keeps state it cannot save.
func (r *Runtime) snapshot() (Snapshot, error) {
	if len(r.kept) > 0 || len(r.w.fwdVersion) > 0 || len(r.data) > 0 {
		return Snapshot{}, errors.Errorf("stage %d: %d microbatches in flight; a snapshot needs a drained pipeline (Flush)", r.index, max(len(r.kept), len(r.w.fwdVersion), len(r.data)))
	}
	s := Snapshot{Stage: r.index, Version: r.version, Segment: r.seg, Told: r.told, Stats: r.statsNow(), PrevVersion: r.w.prevVersion}
	for _, p := range r.w.prev {
		s.Prev = append(s.Prev, p.(tensor.Tensor).Clone().(tensor.Tensor))
	}
	for _, p := range r.params {
		s.Weights = append(s.Weights, p.(tensor.Tensor).Clone().(tensor.Tensor))
	}
	for _, layer := range solvers.Chain(r.cfg.Solver) {
		st, err := layerState(layer)
		if err != nil {
			return Snapshot{}, errors.Wrapf(err, "stage %d", r.index)
		}
		s.Solver = append(s.Solver, st)
	}
	s.BatchNorm = bnstate.Save(r.bns).Tensors()
	for i, vals := range r.w.ring {
		var ts []tensor.Tensor
		for _, v := range vals {
			ts = append(ts, v.(tensor.Tensor).Clone().(tensor.Tensor))
		}
		s.Ring = append(s.Ring, ts)
		s.RingVersions = append(s.RingVersions, r.w.ringHeld[i])
	}
	return s, nil
}

// layerState saves one layer of a solver chain: its State if it is
// Stateful; nothing for the solvers that keep none; an error for a solver
// that keeps state it does not expose (gorgonia's Momentum, Adam, …).
func layerState(layer gorgonia.Solver) (solvers.State, error) {
	switch l := layer.(type) {
	case solvers.Stateful:
		return l.SaveState()
	case *gorgonia.VanillaSolver:
		return solvers.State{}, nil
	}
	return solvers.State{}, errors.Errorf("solver %T keeps state it does not expose, so it cannot be saved: use package solvers' SGD, Momentum or Adam", layer)
}

// restore loads s into the runtime, which must be fresh (no work run
// yet). It checks everything before it changes anything.
func (r *Runtime) restore(s Snapshot) error {
	if s.Stage != r.index {
		return errors.Errorf("stage %d: the snapshot is of stage %d", r.index, s.Stage)
	}
	if r.told || r.version > 0 {
		return errors.Errorf("stage %d: it has trained already; restore into a fresh pipeline", r.index)
	}
	if len(s.Weights) != len(r.params) {
		return errors.Errorf("stage %d: the snapshot has %d learnables, the stage %d", r.index, len(s.Weights), len(r.params))
	}
	for i, w := range s.Weights {
		p := r.params[i].(tensor.Tensor)
		if w.Dtype() != p.Dtype() || !w.Shape().Eq(p.Shape()) {
			return errors.Errorf("stage %d: learnable %q is %v %v, the snapshot's %v %v", r.index, r.st.Learnables[i].Name(), p.Shape(), p.Dtype(), w.Shape(), w.Dtype())
		}
	}
	chain := solvers.Chain(r.cfg.Solver)
	if len(s.Solver) != len(chain) {
		return errors.Errorf("stage %d: the snapshot's solver has %d layers, this stage's %d (%s)", r.index, len(s.Solver), len(chain), describeChain(chain))
	}
	stats := bnstate.Save(r.bns).Tensors()
	if len(s.BatchNorm) != len(stats) {
		return errors.Errorf("stage %d: the snapshot has %d BatchNorm statistics, the stage %d", r.index, len(s.BatchNorm), len(stats))
	}
	for i, t := range s.BatchNorm {
		if t.Dtype() != stats[i].Dtype() || t.Shape().TotalSize() != stats[i].Shape().TotalSize() {
			return errors.Errorf("stage %d: BatchNorm statistic %d is %v %v, the snapshot's %v %v", r.index, i, stats[i].Shape(), stats[i].Dtype(), t.Shape(), t.Dtype())
		}
	}
	if len(s.Prev) != 0 && len(s.Prev) != len(r.params) {
		return errors.Errorf("stage %d: the snapshot keeps %d previous weights, the stage has %d learnables", r.index, len(s.Prev), len(r.params))
	}
	if len(s.Ring) != len(r.w.ring) {
		return errors.Errorf("stage %d: the snapshot keeps %d past weight versions, the stage %d (another delay source?)", r.index, len(s.Ring), len(r.w.ring))
	}
	// A layer refuses a State that is not its own without changing; the
	// layers loaded before it are put back.
	var backup []solvers.State
	for _, layer := range chain {
		st, err := layerState(layer)
		if err != nil {
			return errors.Wrapf(err, "stage %d", r.index)
		}
		backup = append(backup, st)
	}
	for i, layer := range chain {
		if err := loadLayer(layer, s.Solver[i]); err != nil {
			for j := 0; j < i; j++ {
				_ = loadLayer(chain[j], backup[j])
			}
			return errors.Wrapf(err, "stage %d: solver layer %d (%T)", r.index, i, layer)
		}
	}
	for i, w := range s.Weights {
		if err := tensorutil.CopyInto(r.params[i].(tensor.Tensor), w); err != nil {
			return errors.Wrapf(err, "stage %d: learnable %q", r.index, r.st.Learnables[i].Name())
		}
	}
	for i, t := range s.BatchNorm {
		if err := tensorutil.CopyInto(stats[i], t); err != nil {
			return err
		}
	}
	for i := 0; i < len(r.bns); i++ {
		if err := r.bns[i].SetStats(stats[2*i], stats[2*i+1]); err != nil {
			return errors.Wrapf(err, "stage %d: BatchNorm %d", r.index, i)
		}
	}
	for i, ts := range s.Ring {
		r.w.ringHeld[i] = s.RingVersions[i]
		if len(ts) == 0 {
			r.w.ring[i] = nil
			continue
		}
		vals := make([]gorgonia.Value, len(ts))
		for j, t := range ts {
			vals[j] = t.Clone().(tensor.Tensor)
		}
		r.w.ring[i] = vals
	}
	if err := solvers.Bind(r.cfg.Solver, r.model); err != nil {
		return errors.Wrapf(err, "stage %d", r.index)
	}
	r.w.prev, r.w.prevVersion = nil, s.PrevVersion
	for _, p := range s.Prev {
		r.w.prev = append(r.w.prev, p.Clone().(tensor.Tensor))
	}
	r.version, r.seg, r.told = s.Version, s.Segment, s.Told
	r.stats = s.Stats
	r.stats.Delays, r.stats.BackwardLag = copyHist(s.Stats.Delays), copyHist(s.Stats.BackwardLag)
	return nil
}

func loadLayer(layer gorgonia.Solver, st solvers.State) error {
	if l, ok := layer.(solvers.Stateful); ok {
		return l.LoadState(st)
	}
	if len(st.Tensors)+len(st.Ints)+len(st.Floats) > 0 {
		return errors.New("the snapshot holds state for a solver that keeps none")
	}
	if _, ok := layer.(*gorgonia.VanillaSolver); !ok {
		return errors.New("this solver keeps state it cannot load: use package solvers' SGD, Momentum or Adam")
	}
	return nil
}

func describeChain(chain []gorgonia.Solver) string {
	s := ""
	for i, l := range chain {
		if i > 0 {
			s += " → "
		}
		s += fmt.Sprintf("%T", l)
	}
	return s
}
