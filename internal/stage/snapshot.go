package stage

import (
	"context"

	"github.com/pipemare/pipemare/internal/bnstate"
	"github.com/pipemare/pipemare/internal/tensorutil"
	"github.com/pipemare/pipemare/solvers"
	"github.com/pipemare/pipemare/transport"
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
func (r *Runtime) snapshot(ctx context.Context, ep transport.Endpoint) (Snapshot, error) {
	if len(r.kept) > 0 || len(r.w.fwdVersion) > 0 || len(r.data) > 0 || len(r.deferred) > 0 {
		return Snapshot{}, errors.Errorf("stage %d: %d microbatches in flight; a snapshot needs a drained pipeline (Flush)", r.index, max(len(r.kept), len(r.w.fwdVersion), len(r.data), len(r.deferred)))
	}
	for j := range r.shared.replicas { // drained: the owner's version is the stage's
		rp := &r.shared.replicas[j]
		w, err := r.replicaVersion(ctx, ep, rp, r.version)
		if err != nil {
			return Snapshot{}, err
		}
		if err := tensorutil.CopyInto(r.params[rp.i].(tensor.Tensor), w); err != nil {
			return Snapshot{}, err
		}
	}
	s := Snapshot{Stage: r.index, Version: r.version, Segment: r.seg, Told: r.told, Stats: r.statsNow(), PrevVersion: r.w.prevVersion}
	for _, p := range r.w.prev {
		s.Prev = append(s.Prev, p.(tensor.Tensor).Clone().(tensor.Tensor))
	}
	for _, p := range r.params {
		s.Weights = append(s.Weights, p.(tensor.Tensor).Clone().(tensor.Tensor))
	}
	var err error
	if s.Solver, err = solvers.Save(r.cfg.Solver); err != nil {
		return Snapshot{}, errors.Wrapf(err, "stage %d", r.index)
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

// restore loads s into the runtime, which must be fresh (no work run
// yet). It checks everything before it changes anything.
func (r *Runtime) restore(s Snapshot) error {
	if r.told || r.version > 0 {
		return errors.Errorf("stage %d: it has trained already; restore into a fresh pipeline", r.index)
	}
	if err := r.check(s); err != nil {
		return err
	}
	// The solver's layers are bound to the learnables, then loaded last:
	// the state's delay wins over any announced one. Load checks every
	// layer and changes nothing when one refuses.
	if err := solvers.Bind(r.cfg.Solver, r.model); err != nil {
		return errors.Wrapf(err, "stage %d", r.index)
	}
	if err := solvers.Load(r.cfg.Solver, s.Solver); err != nil {
		return errors.Wrapf(err, "stage %d", r.index)
	}
	stats := bnstate.Save(r.bns).Tensors()
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
	r.w.prev, r.w.prevVersion = nil, s.PrevVersion
	for _, p := range s.Prev {
		r.w.prev = append(r.w.prev, p.Clone().(tensor.Tensor))
	}
	for j := range r.shared.replicas {
		rp := &r.shared.replicas[j]
		rp.versions = map[int]*tensor.Dense{s.Version: r.params[rp.i].(tensor.Tensor).Clone().(*tensor.Dense)}
		rp.readAt, rp.last = map[int]int{}, s.Version
	}
	r.version, r.seg, r.told = s.Version, s.Segment, s.Told
	params := r.stats.ParamBytes // the stage's own: a shard does not carry it
	r.stats = s.Stats.Clone()
	r.stats.ParamBytes = params
	return nil
}

// check returns the error restore would return for s in a fresh runtime
// of this stage, and changes nothing: s is of this stage, its learnables,
// BatchNorm statistics and weight versions have the stage's shapes, and
// its solver states load into the stage's solver (solvers.Check). It is
// how a stage verifies the shard it wrote.
func (r *Runtime) check(s Snapshot) error {
	if s.Stage != r.index {
		return errors.Errorf("stage %d: the snapshot is of stage %d", r.index, s.Stage)
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
	if len(s.RingVersions) != len(s.Ring) {
		return errors.Errorf("stage %d: the snapshot has %d past weight versions but %d version numbers", r.index, len(s.Ring), len(s.RingVersions))
	}
	return errors.Wrapf(solvers.Check(r.cfg.Solver, s.Solver), "stage %d", r.index)
}
