package asyncvm

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/jsonkeys"
	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"github.com/pipemare/pipemare/schedule"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// TestReportMemoryByCategory checks the memory report against what the
// schedule implies: parameters and gradients are the learnables' bytes,
// Momentum keeps one buffer per learnable, a stage stashes the inputs of as
// many microbatches as its action list holds in flight, and PipeDream
// stashes between 1 and τ_i+1 weight copies.
func TestReportMemoryByCategory(t *testing.T) {
	const n, steps = 2, 10
	for _, s := range []schedule.Schedule{schedule.PipeMare(), schedule.PipeDream(), schedule.GPipe()} {
		m, err := testmodels.ResNet(tensor.Float64, 2, 1)
		require.NoError(t, err)
		d := makeData(m, n*steps, 1)
		_, vm := pipelineTraining(t, m, d, n, steps, []graphsplit.Option{graphsplit.FineGrained()}, WithSchedule(s), WithSolver(momentum(0.01)))
		rep := vm.Report()
		require.NoError(t, vm.Close())
		require.Equal(t, s.Name, rep.Schedule)
		require.Equal(t, steps, rep.Minibatches)
		require.Equal(t, steps*n*2, rep.Samples)
		lists := s.Actions(rep.Stages, n, steps)
		var total Memory
		for i, st := range vm.Plan().Stages {
			sr := rep.PerStage[i]
			require.Equal(t, st.Cost.ParamBytes, sr.Memory.Parameters)
			require.Equal(t, st.Cost.ParamBytes, sr.Memory.Gradients)
			require.Equal(t, st.Cost.ParamBytes, sr.Memory.OptimizerState, "Momentum keeps one velocity per weight")
			var inBytes int64
			for _, in := range st.Inputs {
				inBytes += in.Bytes()
			}
			require.Equal(t, int64(schedule.InFlight(lists[i]))*inBytes, sr.Memory.StashedActivation, "stage %d", i)
			if s.StashWeights {
				require.Positive(t, sr.Memory.StashedWeights)
				require.LessOrEqual(t, sr.Memory.StashedWeights, int64(schedule.Delay(rep.Stages, n, i)+1)*st.Cost.ParamBytes)
			} else {
				require.Zero(t, sr.Memory.StashedWeights)
			}
			require.Equal(t, steps*n, sr.Forwards)
			require.Equal(t, steps*n, sr.Backwards)
			require.Equal(t, steps, sr.Updates)
			require.GreaterOrEqual(t, sr.Utilization, 0.0)
			require.LessOrEqual(t, sr.Utilization, 1.0)
			total.add(sr.Memory)
		}
		require.Equal(t, total, rep.Memory)
		require.InDelta(t, 1, rep.Utilization+rep.Bubble, 1e-12)
		require.Positive(t, rep.SamplesPerSec)
		require.Positive(t, rep.HeapInUse)
	}
}

// TestReportJSON: the report and the replay serialise with snake_case keys
// only, and fields that do not apply are left out rather than shown as 0:
// formula_delay for synchronous schedules, peak_weight_versions without
// weight stashing, discrepancy without WithDiscrepancy.
func TestReportJSON(t *testing.T) {
	const n, steps = 2, 4
	for _, c := range []struct {
		s                       schedule.Schedule
		opts                    []Option
		formula, versions, disc bool
	}{
		{schedule.GPipe(), nil, false, false, false},
		{schedule.PipeDream(), nil, true, true, false},
		{schedule.PipeMare(), nil, true, false, false},
		{schedule.PipeMare(), []Option{WithDiscrepancy()}, true, false, true},
	} {
		m, err := testmodels.MLP(tensor.Float64, 2, 1)
		require.NoError(t, err)
		opts := append([]Option{WithSchedule(c.s)}, c.opts...)
		_, vm := pipelineTraining(t, m, makeData(m, n*steps, 1), n, steps, []graphsplit.Option{graphsplit.Stages(3)}, opts...)
		b, err := json.Marshal(struct {
			R Report           `json:"report"`
			V schedule.Virtual `json:"virtual"`
		}{vm.Report(), vm.Replay()})
		require.NoError(t, err)
		require.NoError(t, vm.Close())
		var doc map[string]any
		require.NoError(t, json.Unmarshal(b, &doc))
		require.Empty(t, jsonkeys.NotSnakeCase(doc), "keys that are not snake_case")
		stage0 := doc["report"].(map[string]any)["stages_detail"].([]any)[0].(map[string]any)
		_, ok := stage0["formula_delay"]
		require.Equal(t, c.formula, ok, "%s formula_delay", c.s.Name)
		_, ok = stage0["peak_weight_versions"]
		require.Equal(t, c.versions, ok, "%s peak_weight_versions", c.s.Name)
		_, ok = stage0["discrepancy"]
		require.Equal(t, c.disc, ok, "%s discrepancy", c.s.Name)
		require.Contains(t, doc["virtual"], "makespan_ns")
	}
}

// TestReportLeavesOutTheTimeBetweenCalls: a caller that pauses between
// Steps (to evaluate, say) does not count against the stages' busy
// fractions: Training is Wall less at least every pause, each stage's
// BusyFraction is its action time over Training, and the replay on
// virtual devices, which waits for nothing but inputs, keeps every stage
// at least as busy; a stage's busy and idle time add up to its span.
func TestReportLeavesOutTheTimeBetweenCalls(t *testing.T) {
	const n, steps, pause = 2, 6, 30 * time.Millisecond
	m, vm := fineMLP(t, n, WithSchedule(schedule.PipeMare()))
	d := makeData(m, n*steps, 2)
	for k := 0; k < steps; k++ {
		if k > 0 {
			time.Sleep(pause)
		}
		_, err := vm.Step(context.Background(), d.minibatch(t, m.Inputs, k, n))
		require.NoError(t, err)
	}
	time.Sleep(pause)
	require.NoError(t, vm.Flush(context.Background()))
	rep := vm.Report()
	require.Positive(t, rep.Training)
	require.LessOrEqual(t, rep.Training, rep.Wall-steps*pause, "every pause between calls is left out")
	events := vm.Events()
	start := events[0][0].Start
	for _, evs := range events {
		start = min(start, evs[0].Start)
	}
	for i, sr := range rep.PerStage {
		busy := time.Duration(0)
		for _, e := range events[i] {
			busy += e.End - e.Start
		}
		end := events[i][len(events[i])-1].End
		waited := sr.Idle.Dependency + sr.Idle.Latency + sr.Idle.Barrier
		require.Equal(t, end-start-vm.paused(start, end), busy+waited, "stage %d: busy and idle add up to its span less the pauses", i)
		require.InDelta(t, float64(busy)/float64(rep.Training), sr.BusyFraction, 1e-12, "stage %d", i)
		require.LessOrEqual(t, sr.BusyFraction, 1.0)
		require.Positive(t, sr.VirtualBusyFraction, "stage %d", i)
		require.Equal(t, vm.Replay().PerStage[i], sr.VirtualBusyFraction)
	}
}
