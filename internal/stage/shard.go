package stage

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/pipemare/pipemare/checkpoint"
	"github.com/pipemare/pipemare/transport"
	"github.com/pkg/errors"
	"gorgonia.org/tensor"
)

// Shard is s as a checkpoint shard: what the stage writes to disk.
//
//	weights/<i>             Stage.Learnables[i] (a replica: its copy)
//	batchnorm/<j>           mean and variance of each BatchNorm op, in turn
//	ring/<slot>/<i>         delay injection's past versions; ints ring_version/<slot>
//	prev/<i>                PipeDream-2BW's weights before the last update
//	solver …                every solver layer's state (putSolverStates)
//	ints                    version, prev_version, told, stale, stash_weights,
//	                        forward_delay, and the statistics (stats/…)
//	floats, strings         the announced delay; the segment's schedule
func (s Snapshot) Shard() checkpoint.Shard {
	sh := checkpoint.Shard{Tensors: map[string]tensor.Tensor{}, Ints: map[string]int64{}, Floats: map[string]float64{}, Strings: map[string]string{}}
	for i, w := range s.Weights {
		sh.Tensors[fmt.Sprintf("weights/%d", i)] = w
	}
	for j, t := range s.BatchNorm {
		sh.Tensors[fmt.Sprintf("batchnorm/%d", j)] = t
	}
	for slot, ts := range s.Ring {
		sh.Ints[fmt.Sprintf("ring_version/%d", slot)] = int64(s.RingVersions[slot])
		for i, t := range ts {
			sh.Tensors[fmt.Sprintf("ring/%d/%d", slot, i)] = t
		}
	}
	for i, t := range s.Prev {
		sh.Tensors[fmt.Sprintf("prev/%d", i)] = t
	}
	putSolverStates(&sh, "solver", s.Solver)
	sh.Ints["stage"] = int64(s.Stage)
	sh.Ints["version"] = int64(s.Version)
	sh.Ints["prev_version"] = int64(s.PrevVersion)
	sh.Ints["told"] = b2i(s.Told)
	sh.Ints["stale"] = b2i(s.Segment.Stale)
	sh.Ints["stash_weights"] = b2i(s.Segment.StashWeights)
	sh.Ints["forward_delay"] = int64(s.Segment.ForwardDelay)
	sh.Floats["delay"] = s.Segment.Delay
	sh.Strings["schedule"] = s.Segment.Schedule
	st := s.Stats
	for name, h := range map[string]map[int]int{"delays": st.Delays, "backward_lag": st.BackwardLag, "shared_delays": st.SharedDelays} {
		for d, c := range h {
			sh.Ints[fmt.Sprintf("stats/%s/%d", name, d)] = int64(c)
		}
	}
	sh.Ints["stats/peak_weight_versions"] = int64(st.PeakWeightVersions)
	sh.Ints["stats/peak_weight_bytes"] = st.PeakWeightBytes
	sh.Ints["stats/peak_activation_bytes"] = st.PeakActivationBytes
	sh.Ints["stats/peak_deferred_bytes"] = st.PeakDeferredBytes
	sh.Ints["stats/discrepancy_count"] = int64(st.DiscrepancyCount)
	sh.Floats["stats/discrepancy_sum"] = st.DiscrepancySum
	return sh
}

// SnapshotOf reads a Snapshot back from a shard Shard wrote. It checks
// that the shard is complete; Restore checks it against the stage.
func SnapshotOf(sh checkpoint.Shard) (Snapshot, error) {
	need := func(name string) (int64, error) {
		v, ok := sh.Ints[name]
		if !ok {
			return 0, errors.Errorf("stage: the shard has no %q", name)
		}
		return v, nil
	}
	var s Snapshot
	var err error
	var v int64
	for _, f := range []struct {
		name string
		to   *int
	}{{"stage", &s.Stage}, {"version", &s.Version}, {"prev_version", &s.PrevVersion}, {"forward_delay", &s.Segment.ForwardDelay}} {
		if v, err = need(f.name); err != nil {
			return s, err
		}
		*f.to = int(v)
	}
	for _, f := range []struct {
		name string
		to   *bool
	}{{"told", &s.Told}, {"stale", &s.Segment.Stale}, {"stash_weights", &s.Segment.StashWeights}} {
		if v, err = need(f.name); err != nil {
			return s, err
		}
		*f.to = v != 0
	}
	s.Segment.Delay, s.Segment.Schedule = sh.Floats["delay"], sh.Strings["schedule"]
	if s.Weights, err = list(sh.Tensors, "weights/"); err != nil {
		return s, err
	}
	if s.BatchNorm, err = list(sh.Tensors, "batchnorm/"); err != nil {
		return s, err
	}
	if s.Prev, err = list(sh.Tensors, "prev/"); err != nil {
		return s, err
	}
	for slot := 0; ; slot++ {
		v, ok := sh.Ints[fmt.Sprintf("ring_version/%d", slot)]
		if !ok {
			break
		}
		ts, err := list(sh.Tensors, fmt.Sprintf("ring/%d/", slot))
		if err != nil {
			return s, err
		}
		s.Ring, s.RingVersions = append(s.Ring, ts), append(s.RingVersions, int(v))
	}
	if s.Solver, err = solverStates(sh, "solver"); err != nil {
		return s, errors.Wrap(err, "stage: the shard's solver state")
	}
	st := &s.Stats
	st.Delays, st.BackwardLag, st.SharedDelays = map[int]int{}, map[int]int{}, map[int]int{}
	for key, c := range sh.Ints {
		for name, h := range map[string]map[int]int{"delays": st.Delays, "backward_lag": st.BackwardLag, "shared_delays": st.SharedDelays} {
			if d, ok := strings.CutPrefix(key, "stats/"+name+"/"); ok {
				if n, err := strconv.Atoi(d); err == nil {
					h[n] = int(c)
				}
			}
		}
	}
	st.Version = s.Version
	st.PeakWeightVersions = int(sh.Ints["stats/peak_weight_versions"])
	st.PeakWeightBytes = sh.Ints["stats/peak_weight_bytes"]
	st.PeakActivationBytes = sh.Ints["stats/peak_activation_bytes"]
	st.PeakDeferredBytes = sh.Ints["stats/peak_deferred_bytes"]
	st.DiscrepancyCount = int(sh.Ints["stats/discrepancy_count"])
	st.DiscrepancySum = sh.Floats["stats/discrepancy_sum"]
	return s, nil
}

// save takes the stage's snapshot, and with dir writes it as its shard.
// What it saved must restore: it checks the snapshot — with dir, the shard
// read back from disk as load reads it — against the stage (check), so that
// a state no fresh stage could restore is an error now, not at resume.
func (r *Runtime) save(ctx context.Context, ep transport.Endpoint, dir string) (Saved, error) {
	s, err := r.snapshot(ctx, ep)
	if err != nil {
		return Saved{}, err
	}
	if dir == "" {
		if err := r.check(s); err != nil {
			return Saved{}, errors.Wrap(err, "the snapshot it took would not restore")
		}
		return Saved{Snapshot: s}, nil
	}
	fi, err := checkpoint.WriteShard(dir, r.index, s.Shard())
	if err != nil {
		return Saved{}, errors.Wrapf(err, "stage %d", r.index)
	}
	back, err := r.readShard(dir, fi)
	if err == nil {
		err = r.check(back)
	}
	if err != nil {
		return Saved{}, errors.Wrapf(err, "stage %d: the shard it wrote, %s, would not resume", r.index, filepath.Join(dir, fi.Name))
	}
	return Saved{File: fi}, nil
}

// load restores the snapshot of a Restore order, reading it from its shard
// when it names a directory.
func (r *Runtime) load(o Restore) error {
	if o.Dir == "" {
		return r.restore(o.Snapshot)
	}
	s, err := r.readShard(o.Dir, o.File)
	if err != nil {
		return err
	}
	return r.restore(s)
}

// readShard reads the snapshot in the stage's shard fi of dir.
func (r *Runtime) readShard(dir string, fi checkpoint.FileInfo) (Snapshot, error) {
	sh, err := checkpoint.ReadShard(dir, r.index, fi)
	if err != nil {
		return Snapshot{}, errors.Wrapf(err, "stage %d", r.index)
	}
	s, err := SnapshotOf(sh)
	if err != nil {
		return Snapshot{}, errors.Wrapf(err, "stage %d: %s", r.index, fi.Name)
	}
	return s, nil
}

// list returns the tensors prefix0, prefix1, … in order, failing on a gap.
func list(ts map[string]tensor.Tensor, prefix string) ([]tensor.Tensor, error) {
	var idx []int
	for key := range ts {
		rest, ok := strings.CutPrefix(key, prefix)
		if !ok || strings.Contains(rest, "/") {
			continue
		}
		i, err := strconv.Atoi(rest)
		if err != nil {
			return nil, errors.Errorf("stage: the shard holds tensor %q, which is not a %s<n>", key, prefix)
		}
		idx = append(idx, i)
	}
	sort.Ints(idx)
	out := make([]tensor.Tensor, len(idx))
	for k, i := range idx {
		if i != k {
			return nil, errors.Errorf("stage: the shard has no tensor %s%d", prefix, k)
		}
		out[k] = ts[prefix+strconv.Itoa(i)]
	}
	return out, nil
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
