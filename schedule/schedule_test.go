package schedule

import (
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/grids")

// TestScheduleInvariants checks every schedule, without a model, on a grid
// of P and N: each microbatch's F and B run exactly once per stage with F
// first, updates come after every N backwards in order, F flows down the
// stages and B flows up, and a simulated run finishes (no deadlock) with
// unit and with random action times.
func TestScheduleInvariants(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, s := range All() {
		for p := 1; p <= 6; p++ {
			for n := 1; n <= 5; n++ {
				if Check(s, p, n) != nil {
					continue
				}
				for steps := 1; steps <= 3; steps++ {
					name := fmt.Sprintf("%s/P%d/N%d/K%d", s.Name, p, n, steps)
					lists := s.Actions(p, n, steps)
					require.Len(t, lists, p, name)
					for i, list := range lists {
						checkList(t, name, i, list, n, steps, s.Async)
					}
					for _, dur := range []func(int, Action) float64{nil, randomDurations(rng)} {
						tl := Simulate(lists, Chain(p), -1, dur)
						for i := range lists {
							require.Equal(t, len(lists[i]), tl.Done[i], "%s: stage %d deadlocks", name, i)
						}
						checkFlow(t, name, lists, tl)
						workers := WorkerLists(s, p, n, steps)
						wtl := SimulateWorkers(workers, Chain(p), s.WorkerOf(p), -1, dur)
						for j := range workers {
							require.Equal(t, len(workers[j]), wtl.Done[j], "%s: worker %d deadlocks", name, j)
						}
					}
					checkWorkers(t, name, s, p, n, steps, lists)
				}
			}
		}
	}
}

func randomDurations(rng *rand.Rand) func(int, Action) float64 {
	cache := map[[3]int]float64{}
	return func(i int, a Action) float64 {
		key := [3]int{i, int(a.Op), a.Micro}
		if d, ok := cache[key]; ok {
			return d
		}
		d := 0.0
		if a.PerMicro() {
			d = 0.1 + rng.Float64()*3
		}
		cache[key] = d
		return d
	}
}

func checkList(t *testing.T, name string, stage int, list []Action, n, steps int, async bool) {
	t.Helper()
	fwd := map[int]int{}
	bwd := map[int]int{}
	input := map[int]int{}
	sinceUpdate, nextUpdate, nextFlush := 0, 0, 0
	for pos, a := range list {
		switch a.Op {
		case OpForward:
			_, dup := fwd[a.Micro]
			require.False(t, dup, "%s stage %d: F%d twice", name, stage, a.Micro)
			fwd[a.Micro] = pos
		case OpBackward:
			f, ok := fwd[a.Micro]
			require.True(t, ok && f < pos, "%s stage %d: B%d before its F", name, stage, a.Micro)
			_, dup := bwd[a.Micro]
			require.False(t, dup, "%s stage %d: B%d twice", name, stage, a.Micro)
			require.Equal(t, nextUpdate, a.Micro/n, "%s stage %d: B%d after the update of its minibatch", name, stage, a.Micro)
			bwd[a.Micro] = pos
			sinceUpdate++
		case OpInput:
			f, ok := fwd[a.Micro]
			require.True(t, ok && f < pos, "%s stage %d: I%d before its F", name, stage, a.Micro)
			_, dup := input[a.Micro]
			require.False(t, dup, "%s stage %d: I%d twice", name, stage, a.Micro)
			input[a.Micro] = pos
		case OpWeight:
			i, ok := input[a.Micro]
			require.True(t, ok && i < pos, "%s stage %d: W%d before its I", name, stage, a.Micro)
			_, dup := bwd[a.Micro]
			require.False(t, dup, "%s stage %d: W%d twice", name, stage, a.Micro)
			require.Equal(t, nextUpdate, a.Micro/n, "%s stage %d: W%d after the update of its minibatch", name, stage, a.Micro)
			bwd[a.Micro] = pos
			sinceUpdate++
		case OpUpdate:
			require.Equal(t, nextUpdate, a.Step, "%s stage %d: updates out of order", name, stage)
			require.Equal(t, n, sinceUpdate, "%s stage %d: U%d after %d backwards", name, stage, a.Step, sinceUpdate)
			nextUpdate++
			sinceUpdate = 0
		case OpFlush:
			require.False(t, async, "%s: an async schedule flushes", name)
			require.Equal(t, nextFlush, a.Step)
			require.Equal(t, nextUpdate, a.Step+1, "%s stage %d: flush %d before its update", name, stage, a.Step)
			nextFlush++
		}
	}
	require.Len(t, fwd, n*steps, "%s stage %d", name, stage)
	require.Len(t, bwd, n*steps, "%s stage %d", name, stage)
	require.Equal(t, steps, nextUpdate, "%s stage %d", name, stage)
	if !async && nextFlush > 0 {
		require.Equal(t, steps, nextFlush, "%s stage %d", name, stage)
	}
}

// checkFlow checks that in a simulated run each F(m) starts after F(m) ended
// on the stage above, and each B(m) after B(m) ended on the stage below.
func checkFlow(t *testing.T, name string, lists [][]Action, tl Timeline) {
	t.Helper()
	fEnd := make([]map[int]float64, len(lists))
	bEnd := make([]map[int]float64, len(lists))
	for i, list := range lists {
		fEnd[i], bEnd[i] = map[int]float64{}, map[int]float64{}
		for pos, a := range list {
			switch a.Op {
			case OpForward:
				fEnd[i][a.Micro] = tl.End[i][pos]
			case OpBackward, OpInput:
				bEnd[i][a.Micro] = tl.End[i][pos]
			}
		}
	}
	for i, list := range lists {
		for pos, a := range list {
			switch {
			case a.Op == OpForward && i > 0:
				require.GreaterOrEqual(t, tl.Start[i][pos], fEnd[i-1][a.Micro], "%s: F%d on stage %d before stage %d", name, a.Micro, i, i-1)
			case (a.Op == OpBackward || a.Op == OpInput) && i+1 < len(lists):
				require.GreaterOrEqual(t, tl.Start[i][pos], bEnd[i+1][a.Micro], "%s: B%d on stage %d before stage %d", name, a.Micro, i, i+1)
			}
		}
	}
}

// TestScheduleDelays checks, from the action lists alone, the weight delay
// each forward sees in the asynchronous schedules: τ_i = ceil((2(P−1−i)+1)/N)
// or one less, and exactly τ_i for some microbatch once the pipeline is full;
// synchronous schedules see none.
func TestScheduleDelays(t *testing.T) {
	for _, s := range All() {
		for p := 1; p <= 6; p++ {
			for n := 1; n <= 5; n++ {
				steps := 2*p + 2
				if Check(s, p, n) != nil {
					continue
				}
				for i, list := range s.Actions(p, n, steps) {
					updates, seenMax := 0, false
					for _, a := range list {
						switch a.Op {
						case OpUpdate:
							updates++
						case OpForward:
							delay := a.Micro/n - updates
							if !s.Async {
								require.Zero(t, delay, "%s P%d N%d stage %d F%d", s.Name, p, n, i, a.Micro)
								continue
							}
							want := Delay(p, n, i)
							if a.Micro >= Ahead(p, i) {
								require.Contains(t, []int{want - 1, want}, delay, "%s P%d N%d stage %d F%d", s.Name, p, n, i, a.Micro)
								seenMax = seenMax || delay == want
							}
						}
					}
					if s.Async {
						require.True(t, seenMax, "%s P%d N%d stage %d never sees τ=%d", s.Name, p, n, i, Delay(p, n, i))
					}
				}
			}
		}
	}
}

// TestInFlightBoundsLinks checks the bound the engine sizes its channels
// with: under random action times, no link ever holds more messages than
// its producer's InFlight.
func TestInFlightBoundsLinks(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for _, s := range All() {
		for p := 2; p <= 5; p++ {
			for n := 1; n <= 4; n++ {
				if Check(s, p, n) != nil {
					continue
				}
				lists := s.Actions(p, n, 3)
				for trial := 0; trial < 5; trial++ {
					tl := Simulate(lists, Chain(p), -1, randomDurations(rng))
					for i := 0; i+1 < p; i++ {
						bound := InFlight(lists[i])
						require.LessOrEqual(t, maxQueued(lists, tl, i, i+1, OpForward), bound, "%s P%d N%d activations %d→%d", s.Name, p, n, i, i+1)
						grad := OpBackward
						if s.Split {
							grad = OpInput
						}
						require.LessOrEqual(t, maxQueued(lists, tl, i+1, i, grad), bound, "%s P%d N%d gradients %d→%d", s.Name, p, n, i+1, i)
					}
				}
			}
		}
	}
}

// maxQueued is the most messages sent by from's op and not yet taken by to's
// op at any moment of the timeline.
func maxQueued(lists [][]Action, tl Timeline, from, to int, op Op) int {
	type ev struct {
		t     float64
		delta int
	}
	var evs []ev
	for pos, a := range lists[from] {
		if a.Op == op {
			evs = append(evs, ev{tl.End[from][pos], +1})
		}
	}
	for pos, a := range lists[to] {
		if a.Op == op {
			evs = append(evs, ev{tl.Start[to][pos], -1})
		}
	}
	// Takes happen at or after sends; process sends first at equal times.
	sortEvents := func(a, b ev) bool { return a.t < b.t || (a.t == b.t && a.delta > b.delta) }
	for i := 1; i < len(evs); i++ {
		for j := i; j > 0 && sortEvents(evs[j], evs[j-1]); j-- {
			evs[j], evs[j-1] = evs[j-1], evs[j]
		}
	}
	cur, peak := 0, 0
	for _, e := range evs {
		cur += e.delta
		peak = max(peak, cur)
	}
	return peak
}

// TestGoldenGrids compares the printed clock grids of every schedule for
// small P and N with testdata/grids (go test -update rewrites them).
func TestGoldenGrids(t *testing.T) {
	for _, s := range All() {
		for _, pn := range [][2]int{{2, 2}, {3, 3}, {4, 2}, {4, 4}} {
			if Check(s, pn[0], pn[1]) != nil || pn[0] == 4 && pn[1] == 4 && s.Virtual() == 1 {
				continue
			}
			got := Grid(s, pn[0], pn[1], 2)
			path := filepath.Join("testdata", "grids", fmt.Sprintf("%s_P%d_N%d.txt", s.Name, pn[0], pn[1]))
			if *update {
				require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
				require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Equal(t, string(want), got, path)
		}
	}
}

func TestGPipeUtilizationIsNOverNPlusPMinus1(t *testing.T) {
	for p := 1; p <= 6; p++ {
		for n := 1; n <= 8; n++ {
			lists := GPipe().Actions(p, n, 1)
			tl := Simulate(lists, Chain(p), -1, nil)
			busy := 2.0 * float64(n) // per stage: N forwards and N backwards of one clock
			got := busy / tl.Makespan()
			want := float64(n) / float64(n+p-1)
			require.InDelta(t, want, got, 1e-12, "P%d N%d", p, n)
		}
	}
}

// TestVirtualDevicesWithEqualTimes: with every forward and backward taking
// the same time, GPipe's replayed utilization is exactly N/(N+P−1) and
// PipeMare's tends to 1 as the run grows.
func TestVirtualDevicesWithEqualTimes(t *testing.T) {
	for p := 2; p <= 8; p++ {
		for _, n := range []int{1, 4, 8} {
			g := Replay(GPipe().Actions(p, n, 1), Chain(p), nil)
			require.InDelta(t, float64(n)/float64(n+p-1), g.Utilization, 1e-12, "GPipe P%d N%d", p, n)
			prev := 0.0
			for _, steps := range []int{4, 16, 64} {
				u := Replay(PipeMare().Actions(p, n, steps), Chain(p), nil).Utilization
				require.Greater(t, u, prev, "PipeMare P%d N%d grows with the run", p, n)
				prev = u
			}
			require.Greater(t, prev, 0.9, "PipeMare P%d N%d after 64 steps", p, n)
		}
	}
}

// TestMicrobatchesRunInOrder: every stage runs its forwards, and its
// backwards, in increasing microbatch order from 0 — what Frontier relies
// on.
func TestMicrobatchesRunInOrder(t *testing.T) {
	for _, s := range All() {
		for p := 1; p <= 6; p++ {
			for n := 1; n <= 5; n++ {
				if Check(s, p, n) != nil {
					continue
				}
				for i, list := range s.Actions(p, n, 3) {
					nextF, nextB := 0, 0
					for _, a := range list {
						switch a.Op {
						case OpForward:
							require.Equal(t, nextF, a.Micro, "%s P%d N%d stage %d", s.Name, p, n, i)
							nextF++
						case OpBackward, OpInput:
							require.Equal(t, nextB, a.Micro, "%s P%d N%d stage %d", s.Name, p, n, i)
							nextB++
						}
					}
				}
			}
		}
	}
}

// TestFrontierIsIncremental: advancing step by step with the data limit
// growing, on lists generated longer than needed, reaches the same
// positions as one advance over the exact lists, and never passes the
// limit.
func TestFrontierIsIncremental(t *testing.T) {
	for _, s := range All() {
		for _, pn := range [][2]int{{1, 1}, {3, 2}, {5, 4}, {4, 4}} {
			p, n := pn[0], pn[1]
			if Check(s, p, n) != nil {
				continue
			}
			const steps = 6
			long := s.Actions(p, n, steps+4)
			f := NewFrontier(Chain(p), nil)
			for k := 1; k <= steps; k++ {
				pos := f.Advance(long, k*n)
				for i := range long {
					for _, a := range long[i][:pos[i]] {
						if a.Op == OpForward {
							require.Less(t, a.Micro, k*n, "%s P%d N%d: stage %d ran past the data", s.Name, p, n, i)
						}
					}
				}
			}
			exact := s.Actions(p, n, steps)
			done := NewFrontier(Chain(p), nil).Advance(exact, -1)
			final := f.Advance(long, -1)
			for i := range exact {
				require.Equal(t, len(exact[i]), done[i], "%s P%d N%d stage %d: the exact lists run to the end", s.Name, p, n, i)
				require.GreaterOrEqual(t, final[i], done[i])
			}
		}
	}
}

// checkWorkers checks a schedule's worker lists against its stage lists:
// each worker hosts the stages its placement says, and each stage's
// actions on it are the stage's list (flushes once per worker).
func checkWorkers(t *testing.T, name string, s Schedule, p, n, steps int, lists [][]Action) {
	t.Helper()
	workers := WorkerLists(s, p, n, steps)
	require.Len(t, workers, p/s.Virtual(), name)
	worker := s.WorkerOf(p)
	for j, list := range workers {
		for _, sl := range list {
			if sl.Op != OpFlush {
				require.Equal(t, j, worker(sl.Stage), "%s: %v on worker %d", name, sl, j)
			}
		}
	}
	require.Equal(t, lists, ByStage(workers, p, worker), name)
}

// TestListsForMoreStepsExtendFewer: every synchronous schedule's lists for
// more steps begin with its lists for fewer (ZB-H2's too, built by a
// greedy run that has no flush to end a step at). The asynchronous ones
// differ only after the forwards a limit on the microbatches holds back
// (TestFrontierIsIncremental).
func TestListsForMoreStepsExtendFewer(t *testing.T) {
	for _, s := range All() {
		if s.Async {
			continue
		}
		for p := 1; p <= 6; p++ {
			for n := 1; n <= 5; n++ {
				if Check(s, p, n) != nil {
					continue
				}
				long := s.Actions(p, n, 4)
				for steps := 1; steps < 4; steps++ {
					for i, list := range s.Actions(p, n, steps) {
						require.Equal(t, list, long[i][:len(list)], "%s P%d N%d K%d stage %d", s.Name, p, n, steps, i)
					}
				}
			}
		}
	}
}

// TestFusesLast: the schedules whose last stage runs each forward's
// backward (or input gradient) right after it fuse, at any P; PipeMare's
// last stage runs the next forward first, GPipe every forward first.
func TestFusesLast(t *testing.T) {
	for _, c := range []struct {
		s     Schedule
		p     int
		fuses bool
	}{
		{Sequential(), 1, true}, {Sequential(), 3, true}, {OneFOneB(), 2, true}, {OneFOneB(), 4, true},
		{ZBH1(), 2, true}, {ZBH2(), 4, true}, {ZBV(), 4, true},
		{PipeMare(), 1, false}, {PipeMare(), 2, false}, {PipeMare(), 4, false}, {GPipe(), 2, false},
	} {
		require.Equal(t, c.fuses, FusesLast(c.s, c.p, 8), "%s at P = %d", c.s.Name, c.p)
	}
}
