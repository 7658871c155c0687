package asyncvm

import (
	"context"
	"sync"

	"github.com/pipemare/pipemare/schedule"
)

// In one process, a schedule that places several stages on a worker
// (schedule.Turns: Interleaved, ZBV) runs each worker's stages one action
// at a time, in the worker's order: every stage keeps its goroutines, and
// an action waits for its turn (turns.wait) before it runs and passes the
// turn on when it ends. What is trained does not change — it depends only
// on each stage's list — but a worker's stages no longer compete for the
// cores: the worker is the unit that runs, as a device of the schedule's
// replay. A stage process hosting whole workers takes turns the same way
// (ServeStages); one hosting part of a worker takes none.

// turns are the workers' gates for the schedule named name.
type turns struct {
	name  string
	order *schedule.Turns
	gates []*gate
}

// gate is one worker's turn: the position of the action that may run.
type gate struct {
	mu      sync.Mutex
	started bool
	next    int
	changed chan struct{} // closed and replaced when next moves
}

// newTurns returns the gates of schedule s on p stages with n microbatches
// a step, or nil when s has one stage per worker (or does not repeat its
// worker order every step).
func newTurns(s schedule.Schedule, p, n int) *turns {
	order, ok := schedule.NewTurns(s, p, n)
	if !ok {
		return nil
	}
	t := &turns{name: s.Name, order: order}
	for range order.Workers() {
		t.gates = append(t.gates, &gate{changed: make(chan struct{})})
	}
	return t
}

// wait blocks until action a of stage i, run under the schedule named
// sched, has its worker's turn, and returns what passes the turn on. An
// action of another schedule, or a flush, takes no turn.
func (t *turns) wait(ctx context.Context, i int, a schedule.Action, sched string) (func(), error) {
	if sched != t.name {
		return func() {}, nil
	}
	w, pos, ok := t.order.Of(i, a)
	if !ok {
		return func() {}, nil
	}
	g := t.gates[w]
	for {
		g.mu.Lock()
		if !g.started { // the worker's first action: the first of its step goes first
			g.started, g.next = true, pos-pos%t.order.Len(w)
		}
		if g.next == pos {
			g.mu.Unlock()
			return func() { g.pass() }, nil
		}
		ch := g.changed
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// pass gives the turn to the worker's next action.
func (g *gate) pass() {
	g.mu.Lock()
	g.next++
	close(g.changed)
	g.changed = make(chan struct{})
	g.mu.Unlock()
}
