package asyncvm

import (
	"time"

	"github.com/pipemare/pipemare/schedule"
)

// Event is one action a stage ran, timed from the VM's start.
type Event struct {
	Stage  int
	Action schedule.Action
	// Schedule is the schedule the action ran under (a warm-up shows as
	// its synchronous schedule, then the switch).
	Schedule   string
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

func (s *stageStats) record(stage int, sched string, a schedule.Action, start, end time.Duration) {
	s.events = append(s.events, Event{Stage: stage, Action: a, Schedule: sched, Start: start, End: end})
}
