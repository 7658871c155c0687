package asyncvm

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
	// SamplesPerSec is the throughput the virtual devices would reach.
	SamplesPerSec float64 `json:"samples_per_sec"`
}

// Replay replays what the VM ran so far on virtual devices: each action
// takes its measured duration, in the order of the VM's action lists.
func (vm *VM) Replay() Virtual {
	events := vm.Events()
	lists := make([][]Action, vm.p)
	dur := make([]map[Action]float64, vm.p)
	for i, evs := range events {
		dur[i] = make(map[Action]float64, len(evs))
		for _, e := range evs {
			lists[i] = append(lists[i], e.Action)
			dur[i][e.Action] = float64(e.End - e.Start)
		}
	}
	v := ReplayLists(lists, vm.topo, func(i int, a Action) float64 { return dur[i][a] })
	if v.Makespan > 0 {
		samples := 0
		for _, e := range events[vm.p-1] {
			if e.Action.Op == Forward {
				samples += vm.plan.Feeds[0].Shape[0]
			}
		}
		v.SamplesPerSec = float64(samples) / v.Makespan.Seconds()
	}
	return v
}

// ReplayLists replays action lists on virtual devices with the given
// durations (in nanoseconds).
func ReplayLists(lists [][]Action, topo Topology, dur func(stage int, a Action) float64) Virtual {
	tl := Simulate(lists, topo, -1, dur)
	makespan := tl.Makespan() // once: it reads every action
	v := Virtual{Makespan: time.Duration(makespan)}
	if makespan == 0 {
		return v
	}
	for i := range lists {
		busy := 0.0
		for t := 0; t < tl.Done[i]; t++ {
			busy += tl.End[i][t] - tl.Start[i][t]
		}
		u := busy / makespan
		v.PerStage = append(v.PerStage, u)
		v.Utilization += u / float64(len(lists))
	}
	return v
}
