package asyncvm

import (
	"time"

	"github.com/pipemare/pipemare/internal/stage"
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

// stageHeard is what a stage's answers told the driver so far.
type stageHeard struct {
	stats    stage.Stats
	events   []Event
	delayLog []int // microbatch → delay, −1 where none yet
}

// hear records a stage's answer.
func (vm *VM) hear(i int, p stage.Progress) {
	h := &vm.heard[i]
	h.stats = p.Stats
	for _, e := range p.Events {
		h.events = append(h.events, Event{Stage: i, Action: e.Action, Schedule: e.Schedule, Start: e.Start.Sub(vm.start), End: e.End.Sub(vm.start)})
	}
	for _, d := range p.Delays {
		for len(h.delayLog) <= d.Micro {
			h.delayLog = append(h.delayLog, -1)
		}
		h.delayLog[d.Micro] = d.Delay
	}
	for _, l := range p.Losses {
		vm.losses[l.Micro] = l.Value
	}
}
