package asyncvm

import (
	"time"

	"github.com/pipemare/pipemare/schedule"
)

// Idle is where a stage's time between its actions went, from the run's
// first action (of any stage) to the stage's last; with the stage's busy
// time it adds up to that span, less the time between the caller's calls
// (Report.Training).
//
// A stage that waits before an action waits for one of three things. The
// dependencies: a forward's activations from its producers (and the
// weights of a learnable it reads a replica of), a backward's gradients
// from its consumers, an update's replicas' gradients — Dependency is the
// time until the last of those was computed. Once they were computed, the
// time until the action started — the tensors in flight, the receiver's
// goroutine waiting for a core, the driver handing out the work or the
// data — is Latency. After a flush, the time until the stage's next action
// is Barrier: every stage reaching the flush, and the driver's round trip.
// A replay on one virtual device per stage has Dependency only.
type Idle struct {
	Dependency time.Duration `json:"dependency_ns"`
	Latency    time.Duration `json:"latency_ns"`
	Barrier    time.Duration `json:"barrier_ns"`
}

// idle splits every stage's waiting between its actions by what it waited
// for, from events (per stage, in order, under topo), leaving out the
// pauses between calls.
func idle(events [][]Event, topo schedule.Topology, pauses func(from, to time.Duration) time.Duration) []Idle {
	type key struct {
		op   schedule.Op
		unit int // microbatch, or step for updates
	}
	ended := make([]map[key]time.Duration, len(events))
	for i, evs := range events {
		ended[i] = make(map[key]time.Duration, len(evs))
		for _, e := range evs {
			k := key{e.Action.Op, e.Action.Micro}
			if e.Action.Op == schedule.OpUpdate {
				k.unit = e.Action.Step
			}
			ended[i][k] = e.End
		}
	}
	at := func(lists [][]int, i int) []int {
		if lists == nil {
			return nil
		}
		return lists[i]
	}
	start := time.Duration(-1) // the run's first action: every stage waits from there
	for _, evs := range events {
		if len(evs) > 0 && (start < 0 || evs[0].Start < start) {
			start = evs[0].Start
		}
	}
	out := make([]Idle, len(events))
	for i, evs := range events {
		for q := range evs {
			prev, e := Event{End: start}, evs[q]
			if q > 0 {
				prev = evs[q-1]
			}
			gap := e.Start - prev.End - pauses(prev.End, e.Start)
			if gap <= 0 {
				continue
			}
			if prev.Action.Op == schedule.OpFlush {
				out[i].Barrier += gap
				continue
			}
			ready := prev.End
			dep := func(stages []int, k key) {
				for _, j := range stages {
					if t, ok := ended[j][k]; ok && t > ready {
						ready = t
					}
				}
			}
			switch a := e.Action; a.Op {
			case schedule.OpForward:
				dep(topo.Producers[i], key{schedule.OpForward, a.Micro})
				dep(at(topo.Owners, i), key{schedule.OpForward, a.Micro})
			case schedule.OpBackward, schedule.OpInput:
				dep(topo.Consumers[i], key{schedule.OpBackward, a.Micro})
				dep(topo.Consumers[i], key{schedule.OpInput, a.Micro})
			case schedule.OpUpdate:
				dep(at(topo.Replicas, i), key{schedule.OpUpdate, a.Step})
			}
			wait := min(max(ready-prev.End-pauses(prev.End, ready), 0), gap)
			out[i].Dependency += wait
			out[i].Latency += gap - wait
		}
	}
	return out
}
