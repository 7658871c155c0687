package asyncvm

import "github.com/pipemare/pipemare/schedule"

// Replay replays what the VM ran so far on virtual devices: each action
// takes its measured duration, in the order of the VM's action lists.
func (vm *VM) Replay() schedule.Virtual {
	events := vm.Events()
	lists := make([][]schedule.Action, vm.p)
	dur := make([]map[schedule.Action]float64, vm.p)
	for i, evs := range events {
		dur[i] = make(map[schedule.Action]float64, len(evs))
		for _, e := range evs {
			lists[i] = append(lists[i], e.Action)
			dur[i][e.Action] = float64(e.End - e.Start)
		}
	}
	v := schedule.Replay(lists, vm.topo, func(i int, a schedule.Action) float64 { return dur[i][a] })
	if v.Makespan > 0 {
		samples := 0
		for _, e := range events[vm.p-1] {
			if e.Action.Op == schedule.OpForward {
				samples += vm.plan.Feeds[0].Shape[0]
			}
		}
		v.SamplesPerSec = float64(samples) / v.Makespan.Seconds()
	}
	return v
}
