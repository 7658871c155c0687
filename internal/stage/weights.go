package stage

import (
	"math"

	"github.com/pipemare/pipemare/internal/tensorutil"
	"github.com/pipemare/pipemare/solvers"
	"github.com/pkg/errors"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// weights is the stage's one policy for which weights its passes read:
//
//	forward   the current weights; under delay injection the version of
//	          Delay(stage, m) updates ago, from a ring; with ForwardDelay 1
//	          (PipeDream-2BW) the version after update k−1 for step k;
//	          under a stale segment what a ForwardWeighter solver predicts
//	backward  the current weights in synchronous segments; under weight
//	          stashing (PipeDream, PipeDream-2BW) what its forward read;
//	          under a stale segment what a BackwardWeighter solver supplies
//	          (T2), or the current weights
//
// and for the report, the version each forward read, and a copy of what it
// read when the discrepancy is measured.
type weights struct {
	r          *Runtime
	fwdVersion map[int]int // microbatch → version its forward read

	stash      map[int][]gorgonia.Value // weight stashing: version → copy
	refs       map[int]int              // version → forwards in flight that read it
	stashBytes int64

	ring     [][]gorgonia.Value // delay injection: ring[v % len] holds version ringHeld[…]
	ringHeld []int

	prev        []gorgonia.Value // ForwardDelay: the weights before the last update
	prevVersion int              // their version (−1: none)

	read map[int][]gorgonia.Value // discrepancy: microbatch → what its forward read
}

func newWeights(r *Runtime) weights {
	w := weights{r: r, fwdVersion: map[int]int{}, stash: map[int][]gorgonia.Value{}, refs: map[int]int{}, read: map[int][]gorgonia.Value{}, prevVersion: -1}
	if src := r.cfg.ForwardDelays; src != nil {
		n := max(src.Max(r.index), 0) + 1
		w.ring = make([][]gorgonia.Value, n)
		w.ringHeld = make([]int, n)
		for i := range w.ringHeld {
			w.ringHeld[i] = -1
		}
	}
	return w
}

// forward returns the weights microbatch m's forward reads (nil: the
// current ones) and records the version it reads.
func (w *weights) forward(m int) ([]gorgonia.Value, error) {
	r := w.r
	v, vals := r.version, []gorgonia.Value(nil)
	switch {
	case r.seg.ForwardDelay > 0:
		var err error
		if v, vals, err = w.delayedVersion(m); err != nil {
			return nil, err
		}
	case r.cfg.ForwardDelays != nil:
		src := r.cfg.ForwardDelays
		d := src.Delay(r.index, m)
		if d < 0 || d > src.Max(r.index) {
			return nil, errors.Errorf("injected delay %d outside [0, %d]", d, src.Max(r.index))
		}
		if len(w.ring) > 1 {
			if err := w.remember(); err != nil {
				return nil, err
			}
		}
		d = min(d, r.version) // nothing older than the start
		if d > 0 {
			v = r.version - d
			vals = w.ring[v%len(w.ring)]
		}
	case r.seg.Stale:
		var err error
		if vals, err = solvers.ForwardWeights(r.cfg.Solver, int(r.seg.Delay)); err != nil {
			return nil, err
		}
		vals = r.expand(vals)
	}
	w.fwdVersion[m] = v
	if r.seg.StashWeights && r.seg.ForwardDelay == 0 {
		if err := w.keep(v); err != nil {
			return nil, err
		}
	}
	if r.cfg.Discrepancy && r.seg.Stale {
		src := vals
		if src == nil {
			src = r.params
		}
		c, err := cloneAll(src)
		if err != nil {
			return nil, err
		}
		w.read[m] = c
	}
	return vals, nil
}

// backward returns the weights microbatch m's backward reads (nil: the
// current ones).
func (w *weights) backward(m int) ([]gorgonia.Value, error) {
	r := w.r
	fv := w.fwdVersion[m]
	switch {
	case r.seg.ForwardDelay > 0:
		r.stats.BackwardLag[0]++
		if fv == r.version {
			return nil, nil
		}
		if fv != w.prevVersion {
			return nil, errors.Errorf("internal: the backward of microbatch %d needs weight version %d; the stage keeps %d and %d", m, fv, r.version, w.prevVersion)
		}
		return w.prev, nil
	case r.seg.StashWeights:
		r.stats.BackwardLag[0]++ // the forward's own version, by construction
		if fv == r.version {
			return nil, nil
		}
		return w.stash[fv], nil
	case r.seg.Stale:
		r.stats.BackwardLag[r.version-fv]++
		vals, err := solvers.BackwardWeights(r.cfg.Solver, r.version-fv)
		if err != nil {
			return nil, err
		}
		vals = r.expand(vals)
		if fwd, ok := w.read[m]; ok {
			read := vals
			if read == nil {
				read = r.params
			}
			r.stats.DiscrepancySum += relDistance(read, fwd)
			r.stats.DiscrepancyCount++
			delete(w.read, m)
		}
		return vals, nil
	}
	r.stats.BackwardLag[r.version-fv]++
	return nil, nil
}

// done forgets what microbatch m's passes read, once its backward ran.
func (w *weights) done(m int) {
	if w.r.seg.StashWeights && w.r.seg.ForwardDelay == 0 {
		w.release(w.fwdVersion[m])
	}
}

// delayedVersion is the version the forward of microbatch m reads with
// ForwardDelay 1 — the weights after update k−1 for step k, or the initial
// ones in step 0 — and those weights (nil: the current ones).
func (w *weights) delayedVersion(m int) (int, []gorgonia.Value, error) {
	r := w.r
	want := max(0, m/r.cfg.Microbatches-r.seg.ForwardDelay)
	switch want {
	case r.version:
		return want, nil, nil
	case w.prevVersion:
		return want, w.prev, nil
	}
	return 0, nil, errors.Errorf("microbatch %d of step %d reads weight version %d, but the stage holds versions %d and %d: the schedule needs more microbatches per step", m, m/r.cfg.Microbatches, want, r.version, w.prevVersion)
}

// beforeUpdate keeps the weights about to be replaced when forwards read
// them one update late (ForwardDelay).
func (w *weights) beforeUpdate() error {
	r := w.r
	if r.seg.ForwardDelay == 0 {
		return nil
	}
	if w.prev == nil {
		c, err := cloneAll(r.params)
		if err != nil {
			return err
		}
		w.prev = c
		r.stats.PeakWeightBytes = max(r.stats.PeakWeightBytes, valuesBytes(c))
		r.stats.PeakWeightVersions = max(r.stats.PeakWeightVersions, 1)
	} else {
		for i, p := range r.params {
			if err := tensorutil.CopyInto(w.prev[i].(tensor.Tensor), p); err != nil {
				return err
			}
		}
	}
	w.prevVersion = r.version
	return nil
}

// keep holds a copy of the weights of version v while forwards that read it
// wait for their backward. The current version is the user's tensors
// themselves until the next update replaces them, so the copy is taken at
// the forward.
func (w *weights) keep(v int) error {
	if _, ok := w.stash[v]; !ok {
		c, err := cloneAll(w.r.params)
		if err != nil {
			return err
		}
		w.stash[v] = c
		w.stashBytes += valuesBytes(c)
		w.r.stats.PeakWeightBytes = max(w.r.stats.PeakWeightBytes, w.stashBytes)
		w.r.stats.PeakWeightVersions = max(w.r.stats.PeakWeightVersions, len(w.stash))
	}
	w.refs[v]++
	return nil
}

func (w *weights) release(v int) {
	w.refs[v]--
	if w.refs[v] == 0 {
		w.stashBytes -= valuesBytes(w.stash[v])
		delete(w.stash, v)
		delete(w.refs, v)
	}
}

// remember copies the current weights into the injection ring, once per
// version.
func (w *weights) remember() error {
	v := w.r.version
	slot := v % len(w.ring)
	if w.ringHeld[slot] == v {
		return nil
	}
	if w.ring[slot] == nil {
		c, err := cloneAll(w.r.params)
		if err != nil {
			return err
		}
		w.ring[slot] = c
	} else {
		for i, p := range w.r.params {
			if err := tensorutil.CopyInto(w.ring[slot][i].(tensor.Tensor), p); err != nil {
				return err
			}
		}
	}
	w.ringHeld[slot] = v
	return nil
}

func cloneAll(vs []gorgonia.Value) ([]gorgonia.Value, error) {
	out := make([]gorgonia.Value, len(vs))
	for i, v := range vs {
		c, err := tensorutil.Clone(v)
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}

func valuesBytes(vs []gorgonia.Value) int64 {
	var b int64
	for _, v := range vs {
		b += tensorutil.Bytes(v)
	}
	return b
}

// relDistance is ‖a − b‖ / ‖b‖ over all the tensors.
func relDistance(a, b []gorgonia.Value) float64 {
	num, den := 0.0, 0.0
	for i := range a {
		switch x := a[i].Data().(type) {
		case []float64:
			y := b[i].Data().([]float64)
			for j := range x {
				d := x[j] - y[j]
				num += d * d
				den += y[j] * y[j]
			}
		case []float32:
			y := b[i].Data().([]float32)
			for j := range x {
				d := float64(x[j]) - float64(y[j])
				num += d * d
				den += float64(y[j]) * float64(y[j])
			}
		}
	}
	if den == 0 {
		return 0
	}
	return math.Sqrt(num / den)
}
