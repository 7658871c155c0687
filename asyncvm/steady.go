package asyncvm

import "time"

// SteadyState is the window of a run in which its pipeline ran full, the
// one steady state the engine's measurements and the figures use: from the
// moment every stage had started an action under the run's own schedule
// sched (Report.Schedule; a synchronous warm-up's actions, recorded under
// its schedule, are the run's start, not its steady state) to the moment
// the first stage ran out of work (its last action of the run ended). The
// window holds whatever happened inside it — drains for checkpoints, pauses
// for evaluation — which is what a figure of a few minibatches skips; the
// report's utilization leaves out of it the pauses between the caller's
// calls (Report.Utilization), not the drains.
//
// events are per stage in order, as VM.Events returns them. ok is false,
// and the window empty, when a stage ran no action under sched or the last
// stage to start started after the first to finish ended.
func SteadyState(events [][]Event, sched string) (from, to time.Duration, ok bool) {
	to = -1
	for _, evs := range events {
		first := -1
		for k, e := range evs {
			if e.Schedule == sched {
				first = k
				break
			}
		}
		if first < 0 {
			return 0, 0, false
		}
		from = max(from, evs[first].Start)
		if end := evs[len(evs)-1].End; to < 0 || end < to {
			to = end
		}
	}
	if len(events) == 0 || to <= from {
		return 0, 0, false
	}
	return from, to, true
}
