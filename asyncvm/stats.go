package asyncvm

import "time"

// Event is one action a stage ran, timed from the VM's start.
type Event struct {
	Stage      int
	Action     Action
	Start, End time.Duration
}

// stageStats is what a worker measures; the VM reads it between rounds.
type stageStats struct {
	events []Event
	// delays counts, per update, how many versions old the weights each of
	// its forwards read were; bwdLag the same for the weights backwards read.
	delays, bwdLag map[int]int
	peakActs       int64 // bytes of stashed stage inputs
	peakWeights    int64 // bytes of stashed weight versions
	peakVersions   int
	// discSum/discN accumulate ‖u_bkwd − u_fwd‖/‖u_fwd‖ (WithDiscrepancy).
	discSum float64
	discN   int
	// delayLog[m] is microbatch m's delay (WithDelayLog).
	delayLog []int
}

func (s *stageStats) record(a Action, start, end time.Duration) {
	s.events = append(s.events, Event{Action: a, Start: start, End: end})
}
