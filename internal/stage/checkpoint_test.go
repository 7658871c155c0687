package stage

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/pipemare/pipemare/checkpoint"
	"github.com/pipemare/pipemare/schedule"
	"github.com/pipemare/pipemare/solvers"
	"github.com/pipemare/pipemare/transport"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
)

// The tests of this file save a stage's state (Save: a Snapshot in the
// answer, or a shard of a checkpoint directory) and restore it (Restore)
// into a fresh runtime of the same stage, which must then train on bit for
// bit as the saved one does; and they check what a stage refuses.

// withMomentum gives every stage a Momentum solver, whose velocity is
// state a restored stage must get back.
func withMomentum(t *testing.T) func(int) Config {
	return func(int) Config {
		s, err := solvers.NewMomentum(solvers.WithLearnRate(0.05), solvers.WithMomentum(0.9))
		require.NoError(t, err)
		return Config{Solver: s}
	}
}

// TestSaveRestoreContinuesBitIdentically: two stages train two steps and
// answer Save with Saved holding their Snapshot — their stage, version,
// segment, weights (what Pull says) and Momentum's state — then train two
// more. A fresh pipeline that Restores the snapshots answers Restored and
// trains those two steps with the same losses, weights and statistics, bit
// for bit. A third one, restored with a fresh solver's state instead,
// does not: the comparison sees the velocity.
func TestSaveRestoreContinuesBitIdentically(t *testing.T) {
	const n, first, more = 2, 2, 2
	s := setup{stages: 2, n: n, config: withMomentum(t)}
	a := start(t, s)
	data := a.micros(21, n*(first+more))
	a.steps(schedule.OneFOneB(), data, 0, first)
	snaps := make([]Snapshot, 2)
	for i := range snaps {
		m := a.ask(i, Save{})
		saved, ok := m.Body.(Saved)
		require.True(t, ok, "stage %d answered %T %+v", i, m.Body, m.Body)
		require.Empty(t, saved.File.Name, "no directory, no file")
		snap := saved.Snapshot
		require.Equal(t, i, snap.Stage)
		require.Equal(t, first, snap.Version)
		require.Equal(t, first, snap.Stats.Version)
		require.True(t, snap.Told)
		require.Equal(t, "1f1b", snap.Segment.Schedule)
		requireBits(t, a.pull(i), tensors(snap.Weights), fmt.Sprintf("stage %d: snapshot weight", i))
		require.Len(t, snap.Solver, 1)
		require.Equal(t, "solvers.Momentum", snap.Solver[0].Kind)
		require.Equal(t, int64(first), snap.Solver[0].Ints["steps"])
		require.Len(t, snap.Solver[0].Tensors, len(a.plan.Stages[i].Learnables), "a velocity per learnable")
		snaps[i] = snap
	}
	wantReports := a.steps(schedule.OneFOneB(), data, first, first+more)
	want := a.weights()

	b := start(t, s)
	for i, snap := range snaps {
		require.IsType(t, Restored{}, b.ask(i, Restore{Snapshot: snap}).Body)
		requireBits(t, tensors(snap.Weights), b.pull(i), fmt.Sprintf("stage %d: restored weight", i))
	}
	reports := b.steps(schedule.OneFOneB(), data, first, first+more)
	require.Equal(t, losses(wantReports[1]), losses(reports[1]), "the losses, bit for bit")
	requireBits(t, want, b.weights(), "weight")
	for i := range reports {
		require.Equal(t, wantReports[i].Stats, reports[i].Stats, "stage %d's statistics", i)
	}

	fresh := start(t, s)
	c := start(t, s)
	for i, snap := range snaps {
		m := fresh.ask(i, Save{})
		snap.Solver = m.Body.(Saved).Snapshot.Solver // an unbound Momentum: no velocity
		require.IsType(t, Restored{}, c.ask(i, Restore{Snapshot: snap}).Body)
	}
	c.steps(schedule.OneFOneB(), data, first, first+more)
	require.NotEqual(t, floats(t, want[0]), floats(t, c.weights()[0]), "without its velocity the solver steps elsewhere")
}

// TestCheckpointShardsRoundTrip: Save with a checkpoint directory makes
// each stage write its shard there and answer Saved with the file's
// description; Restore with the directory and that description loads it
// into a fresh stage, which trains on bit-identically. A damaged shard, or
// another stage's, is Refused, and the stage, unchanged, still takes the
// right one.
func TestCheckpointShardsRoundTrip(t *testing.T) {
	const n = 2
	s := setup{stages: 2, n: n, config: withMomentum(t)}
	a := start(t, s)
	data := a.micros(23, 2*n)
	a.steps(schedule.GPipe(), data, 0, 1)
	dir, err := checkpoint.Begin(t.TempDir(), 1)
	require.NoError(t, err)
	files := make([]checkpoint.FileInfo, 2)
	for i := range files {
		m := a.ask(i, Save{Dir: dir})
		saved, ok := m.Body.(Saved)
		require.True(t, ok, "stage %d answered %T %+v", i, m.Body, m.Body)
		fi := saved.File
		require.Equal(t, fmt.Sprintf("stage-%03d.safetensors", i), fi.Name)
		require.Len(t, fi.SHA256, 64)
		st, err := os.Stat(filepath.Join(dir, fi.Name))
		require.NoError(t, err, "the shard is written")
		require.Equal(t, st.Size(), fi.Size)
		require.Empty(t, saved.Snapshot.Weights, "the answer describes the file instead")
		files[i] = fi
	}
	bad := t.TempDir()
	for _, fi := range files {
		b, err := os.ReadFile(filepath.Join(dir, fi.Name))
		require.NoError(t, err)
		b[len(b)-1] ^= 0xff
		require.NoError(t, os.WriteFile(filepath.Join(bad, fi.Name), b, 0o644))
	}
	wantReports := a.steps(schedule.GPipe(), data, 1, 2)
	want := a.weights()

	b := start(t, s)
	initial := b.weights()
	for i, fi := range files {
		m := b.ask(i, Restore{Dir: bad, File: fi})
		refused, ok := m.Body.(Refused)
		require.True(t, ok, "stage %d answered %T to a damaged shard", i, m.Body)
		require.Contains(t, refused.Message, fmt.Sprintf("stage %d", i))
		m = b.ask(i, Restore{Dir: dir, File: files[1-i]})
		require.IsType(t, Refused{}, m.Body, "stage %d: another stage's shard", i)
	}
	requireBits(t, initial, b.weights(), "after the refusals, weight")
	for i, fi := range files {
		require.IsType(t, Restored{}, b.ask(i, Restore{Dir: dir, File: fi}).Body)
	}
	reports := b.steps(schedule.GPipe(), data, 1, 2)
	require.Equal(t, losses(wantReports[1]), losses(reports[1]), "the losses, bit for bit")
	requireBits(t, want, b.weights(), "weight")
	for i := range reports {
		// Every statistic comes back, ParamBytes too (the stage's own, which
		// a shard does not carry).
		require.Positive(t, wantReports[i].Stats.ParamBytes)
		require.Equal(t, wantReports[i].Stats, reports[i].Stats, "stage %d's statistics", i)
	}
}

// TestSaveAndRestoreRefusals: a Save the stage cannot carry out — its
// solver hides its state, a microbatch is in flight (forwarded, or its
// data given, and not yet backward) — and a Restore it must not — another
// stage's snapshot, a snapshot of another shape, a stage that has trained
// — are answered Refused with the reason; the stage changed nothing and
// goes on serving.
func TestSaveAndRestoreRefusals(t *testing.T) {
	t.Run("gorgonia's solver", func(t *testing.T) {
		p := start(t, setup{}) // gorgonia's VanillaSolver
		m := p.ask(0, Save{})
		require.IsType(t, Refused{}, m.Body)
		require.Contains(t, m.Body.(Refused).Message, "cannot save its state")
		requireBits(t, p.reference(nil).weights(), p.pull(0), "weight")
		p.stop(0)
	})

	t.Run("in flight", func(t *testing.T) {
		p := start(t, setup{config: withMomentum(t)})
		data := p.micros(1, 2)
		seg := Segment{Schedule: "sequential"}
		p.feed(0, data[0], false)
		requireRefused(t, p.ask(0, Save{}), "stage 0: 1 microbatches in flight") // its data came
		p.work(0, seg, schedule.Forward(0))
		requireRefused(t, p.ask(0, Save{}), "stage 0: 1 microbatches in flight") // forwarded
		p.feed(1, data[1], false)
		p.work(0, seg, schedule.Backward(0), schedule.Update(0))
		requireRefused(t, p.ask(0, Save{}), "stage 0: 1 microbatches in flight") // microbatch 1's data
		p.work(0, seg, schedule.Forward(1), schedule.Backward(1), schedule.Update(1))
		m := p.ask(0, Save{})
		require.IsType(t, Saved{}, m.Body, "%+v", m.Body)
		require.Equal(t, 2, m.Body.(Saved).Snapshot.Version)
		p.stop(0)
	})

	t.Run("restore", func(t *testing.T) {
		trained := start(t, setup{config: withMomentum(t)})
		data := trained.micros(1, 1)
		trained.feed(0, data[0], false)
		trained.work(0, Segment{Schedule: "sequential"}, schedule.Forward(0), schedule.Backward(0), schedule.Update(0))
		snap := trained.ask(0, Save{}).Body.(Saved).Snapshot
		requireRefused(t, trained.ask(0, Restore{Snapshot: snap}), "stage 0: it has trained already")

		p := start(t, setup{config: withMomentum(t)})
		initial := p.pull(0)
		other := snap
		other.Stage = 1
		requireRefused(t, p.ask(0, Restore{Snapshot: other}), "stage 0: the snapshot is of stage 1")
		short := snap
		short.Weights = snap.Weights[:1]
		requireRefused(t, p.ask(0, Restore{Snapshot: short}), "stage 0: the snapshot has 1 learnables, the stage 6")
		requireBits(t, initial, p.pull(0), "after the refusals, weight")
		require.IsType(t, Restored{}, p.ask(0, Restore{Snapshot: snap}).Body)
		requireBits(t, trained.pull(0), p.pull(0), "restored weight")
		p.stop(0)
		trained.stop(0)
	})
}

// requireRefused checks that m is a Refused answer that says want.
func requireRefused(t *testing.T, m transport.Message, want string) {
	t.Helper()
	r, ok := m.Body.(Refused)
	require.True(t, ok, "answered %T %+v, want Refused", m.Body, m.Body)
	require.Contains(t, r.Message, want)
}

func tensors[T gorgonia.Value](ts []T) []gorgonia.Value {
	out := make([]gorgonia.Value, len(ts))
	for i, x := range ts {
		out[i] = x
	}
	return out
}
