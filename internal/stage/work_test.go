package stage

import (
	"fmt"
	"testing"

	"github.com/pipemare/pipemare/internal/tensorutil"
	"github.com/pipemare/pipemare/schedule"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// The tests of this file drive one stage — the whole model — with Data
// and Work orders and read what it answers (Parked) and its weights
// (Pull), against plain Gorgonia.

// TestWorkTrainsLikePlainGorgonia: the driver sends the data of three
// steps of two microbatches ahead, then one Work per step (F F B B U |).
// Each answer is Parked with the step's events in order, the losses of
// its microbatches — what a plain forward of the same model computes — and
// the version count; after each step the weights (Pull) have moved, to
// where plain Gorgonia's step with the mean gradient takes them. With
// KeepActivations too.
func TestWorkTrainsLikePlainGorgonia(t *testing.T) {
	const n, steps = 2, 3
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("keep=%v", keep), func(t *testing.T) {
			p := start(t, setup{n: n, config: func(int) Config { return Config{KeepActivations: keep} }})
			require.Equal(t, keep, p.rts[0].keeping)
			ref := p.reference(nil)
			data := p.micros(7, n*steps)
			for m, d := range data {
				p.feed(m, d, false)
			}
			before := p.pull(0)
			requireBits(t, ref.weights(), before, "initial weights")
			for k := 0; k < steps; k++ {
				acts := []schedule.Action{schedule.Forward(2 * k), schedule.Forward(2*k + 1), schedule.Backward(2 * k), schedule.Backward(2*k + 1), schedule.Update(k), schedule.Flush(k)}
				r := p.work(0, Segment{Schedule: "gpipe"}, acts...)
				want := ref.step(data[n*k : n*k+n])

				require.Equal(t, acts, actions(r), "step %d: the events are the actions, in order", k)
				for _, e := range r.Events {
					require.Equal(t, "gpipe", e.Schedule)
					require.False(t, e.End.Before(e.Start), "%v ends after it starts", e.Action)
				}
				require.Len(t, r.Losses, n)
				for j, l := range r.Losses {
					require.Equal(t, n*k+j, l.Micro)
					require.InDelta(t, want[j], l.Value, 1e-12, "step %d: the loss of microbatch %d", k, l.Micro)
				}
				require.Equal(t, k+1, r.Stats.Version)
				require.Equal(t, map[int]int{0: n * (k + 1)}, r.Stats.Delays, "synchronous: every forward read the weights its gradient was applied to")
				require.Equal(t, map[int]int{0: n * (k + 1)}, r.Stats.BackwardLag)
				require.Empty(t, r.Delays, "no delay log unless asked")

				after := p.pull(0)
				requireClose(t, ref.weights(), after, 1e-12, fmt.Sprintf("step %d: weight", k))
				for i := range after {
					require.NotEqual(t, floats(t, before[i]), floats(t, after[i]), "step %d: learnable %d moved", k, i)
				}
				before = after
			}
			var bytes int64
			for _, l := range p.model.Learnables {
				bytes += tensorutil.Bytes(l.Value())
			}
			final := p.stop(0)
			require.Equal(t, bytes, final.Stats.ParamBytes)
			require.Positive(t, final.Stats.PeakActivationBytes)
			require.Empty(t, final.Events, "nothing ran since the last Parked")
		})
	}
}

// TestWorkAnswersEveryOrder: a step handed out in several Works — as the
// driver does when only part of it can run — is answered once per Work,
// each Parked reporting only what ran since the previous answer; the
// result is the step of one Work.
func TestWorkAnswersEveryOrder(t *testing.T) {
	p := start(t, setup{n: 2})
	ref := p.reference(nil)
	data := p.micros(3, 2)
	p.feed(0, data[0], false)
	p.feed(1, data[1], false)
	want := ref.step(data)
	seg := Segment{Schedule: "1f1b"}

	r := p.work(0, seg, schedule.Forward(0))
	require.Equal(t, []schedule.Action{schedule.Forward(0)}, actions(r))
	require.Equal(t, []int{0}, micros(r.Losses))
	require.InDelta(t, want[0], r.Losses[0].Value, 1e-12)
	require.Equal(t, 0, r.Stats.Version)
	require.Positive(t, r.Stats.PeakActivationBytes, "the forward keeps what its backward reads")

	r = p.work(0, seg, schedule.Backward(0), schedule.Forward(1))
	require.Equal(t, []schedule.Action{schedule.Backward(0), schedule.Forward(1)}, actions(r))
	require.Equal(t, []int{1}, micros(r.Losses), "only the losses since the previous answer")
	require.InDelta(t, want[1], r.Losses[0].Value, 1e-12)

	r = p.work(0, seg, schedule.Backward(1))
	require.Empty(t, r.Losses)
	require.Equal(t, 0, r.Stats.Version, "no update yet")

	r = p.work(0, seg, schedule.Update(0), schedule.Flush(0))
	require.Equal(t, []schedule.Action{schedule.Update(0), schedule.Flush(0)}, actions(r))
	require.Equal(t, 1, r.Stats.Version)
	require.Equal(t, map[int]int{0: 2}, r.Stats.Delays)
	requireClose(t, ref.weights(), p.pull(0), 1e-12, "weight")

	r = p.work(0, seg) // an empty Work is answered too
	require.Empty(t, r.Events)
	require.Equal(t, 1, r.Stats.Version)
}

// TestWorkCountsDelays: in a stale segment (the schedule PipeDream gives a
// one-stage pipeline: the forwards of step 1 before the update of step 0)
// the forwards of step 1 read version 0 — their losses are those of the
// initial weights — and the stage counts, and with DelayLog reports, the
// delay each forward saw, and each backward's lag. Its backwards recompute
// the forward on the current weights, so the weights are plain
// Gorgonia's.
func TestWorkCountsDelays(t *testing.T) {
	p := start(t, setup{n: 2, config: func(int) Config { return Config{DelayLog: true} }})
	ref := p.reference(nil)
	data := p.micros(5, 4)
	for m, d := range data {
		p.feed(m, d, false)
	}
	var initial []float64 // the losses of every microbatch at the initial weights
	for _, d := range data {
		l, _, _ := ref.run(d)
		initial = append(initial, l)
	}
	seg := Segment{Schedule: "pipedream", Stale: true, Delay: 1}
	r := p.work(0, seg, schedule.Forward(0), schedule.Forward(1), schedule.Forward(2), schedule.Forward(3), schedule.Backward(0), schedule.Backward(1), schedule.Update(0))
	require.Equal(t, []Delay{{Micro: 0, Delay: 0}, {Micro: 1, Delay: 0}}, r.Delays)
	require.Len(t, r.Losses, 4)
	for _, l := range r.Losses {
		require.InDelta(t, initial[l.Micro], l.Value, 1e-12, "microbatch %d's forward read version 0", l.Micro)
	}
	r = p.work(0, seg, schedule.Backward(2), schedule.Backward(3), schedule.Update(1))
	require.Equal(t, []Delay{{Micro: 2, Delay: 1}, {Micro: 3, Delay: 1}}, r.Delays, "their gradients were applied to version 1")
	require.Equal(t, map[int]int{0: 2, 1: 2}, r.Stats.Delays)
	require.Equal(t, map[int]int{0: 2, 1: 2}, r.Stats.BackwardLag)
	require.Equal(t, 2, r.Stats.Version)

	ref.step(data[:2])
	for _, m := range []int{2, 3} {
		l, _, _ := ref.run(data[m])
		require.Greater(t, abs(l-initial[m]), 1e-6, "the test tells version 0 from version 1 apart")
	}
	ref.step(data[2:])
	requireClose(t, ref.weights(), p.pull(0), 1e-12, "weight")
}

func abs(x float64) float64 { return max(x, -x) }

// TestWorkStashesWeights: the same actions in a segment with StashWeights
// (PipeDream's weight stashing): the backwards of step 1 read the weights
// their forwards read, version 0, so step 1 applies the gradient of the
// initial weights to version 1 — not plain Gorgonia's step — and the stage
// reports the copy it kept.
func TestWorkStashesWeights(t *testing.T) {
	p := start(t, setup{n: 2})
	ref := p.reference(nil)
	data := p.micros(5, 4)
	for m, d := range data {
		p.feed(m, d, false)
	}
	var stale []gorgonia.Value // the mean gradient of microbatches 2 and 3 at the initial weights
	for _, d := range data[2:] {
		_, g, _ := ref.run(d)
		if stale == nil {
			stale = g
			continue
		}
		for i := range g {
			require.NoError(t, tensorutil.AddInto(stale[i].(*tensor.Dense), g[i]))
		}
	}
	ref.step(data[:2])
	want := ref.weights()
	for i := range want {
		w, g := floats(t, want[i]), floats(t, stale[i])
		for j := range w {
			w[j] -= lr * (g[j] / 2)
		}
	}
	ref.step(data[2:]) // plain Gorgonia: the gradient at version 1
	diff := 0.0
	for i, w := range ref.weights() {
		for j, x := range floats(t, w) {
			diff = max(diff, abs(x-floats(t, want[i])[j]))
		}
	}
	require.Greater(t, diff, 1e-6, "the test tells stashed weights from current ones apart")

	seg := Segment{Schedule: "pipedream", Stale: true, StashWeights: true, Delay: 1}
	p.work(0, seg, schedule.Forward(0), schedule.Forward(1), schedule.Forward(2), schedule.Forward(3), schedule.Backward(0), schedule.Backward(1), schedule.Update(0))
	r := p.work(0, seg, schedule.Backward(2), schedule.Backward(3), schedule.Update(1))
	require.Equal(t, map[int]int{0: 4}, r.Stats.BackwardLag, "every backward read its forward's weights")
	require.Equal(t, map[int]int{0: 2, 1: 2}, r.Stats.Delays)
	require.GreaterOrEqual(t, r.Stats.PeakWeightVersions, 1)
	require.Positive(t, r.Stats.PeakWeightBytes)
	requireClose(t, want, p.pull(0), 1e-12, "weight")
}

// TestPullReturnsCopies: Pull answers Pulled with copies of the weights:
// writing them changes nothing in the stage.
func TestPullReturnsCopies(t *testing.T) {
	p := start(t, setup{})
	first := p.pull(0)
	want := clones(t, first)
	for _, v := range first {
		d := floats(t, v)
		for j := range d {
			d[j] = 42
		}
	}
	requireBits(t, want, p.pull(0), "weight")
	requireBits(t, want, p.reference(nil).weights(), "weight")
}

func micros(ls []Loss) []int {
	var out []int
	for _, l := range ls {
		out = append(out, l.Micro)
	}
	return out
}
