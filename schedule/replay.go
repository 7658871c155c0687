package schedule

import "time"

// Virtual is a run replayed on P virtual devices, one per stage: the same
// action lists, each action taking the time it took in the real run, every
// stage free to run as soon as its inputs are ready (Simulate). It is the
// setting of the PipeMare paper, one accelerator per stage, whatever the
// host's cores.
type Virtual struct {
	// Makespan is the replay's time from the first to the last action.
	Makespan time.Duration `json:"makespan_ns"`
	// Utilization is the mean over stages of busy time over the makespan;
	// PerStage the same per stage, in stage order.
	Utilization float64   `json:"utilization"`
	PerStage    []float64 `json:"per_stage_utilization"`
	// SamplesPerSec is the throughput the virtual devices would reach (0
	// when the caller does not know the samples).
	SamplesPerSec float64 `json:"samples_per_sec"`
}

// Replay replays action lists on virtual devices with the given durations
// (in nanoseconds; nil: one nanosecond per action on a microbatch).
func Replay(lists [][]Action, topo Topology, dur func(stage int, a Action) float64) Virtual {
	return replayed(Simulate(lists, topo, -1, dur), len(lists))
}

// ReplayWorkers is Replay of worker lists, one virtual device per worker
// (worker(i) hosts stage i); PerStage is per worker.
func ReplayWorkers(lists [][]Slot, topo Topology, worker func(stage int) int, dur func(stage int, a Action) float64) Virtual {
	return replayed(SimulateWorkers(lists, topo, worker, -1, dur), len(lists))
}

// replayed is the utilization of a timeline on d devices.
func replayed(tl Timeline, d int) Virtual {
	makespan := tl.Makespan() // once: it reads every action
	v := Virtual{Makespan: time.Duration(makespan)}
	if makespan == 0 {
		return v
	}
	for i := 0; i < d; i++ {
		busy := 0.0
		for t := 0; t < tl.Done[i]; t++ {
			busy += tl.End[i][t] - tl.Start[i][t]
		}
		u := busy / makespan
		v.PerStage = append(v.PerStage, u)
		v.Utilization += u / float64(d)
	}
	return v
}
