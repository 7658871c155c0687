package schedule

// Turns is the order in which each worker runs its stages' actions, for a
// schedule that places several stages on a worker and repeats one worker
// order every step (it flushes every step: Interleaved, ZBV): action a of
// stage i in step k is at position k·Len(w) + its place in step 0's list
// of worker w. A runtime that hosts a worker's stages on goroutines of
// their own lets each action run at its turn only, so that the worker
// runs them one at a time in the schedule's order.
type Turns struct {
	n      int
	worker []int
	length []int
	pos    map[turnKey]int
}

type turnKey struct {
	stage int
	op    Op
	micro int // within the step
}

// NewTurns returns the turns of s on p stages with n microbatches a step,
// and false when s has one stage per worker, does not flush every step or
// cannot run that shape.
func NewTurns(s Schedule, p, n int) (*Turns, bool) {
	if s.Virtual() < 2 || Check(s, p, n) != nil || !flushes(s, p, n) {
		return nil, false
	}
	t := &Turns{n: n, worker: make([]int, p), pos: map[turnKey]int{}}
	for i := range t.worker {
		t.worker[i] = s.WorkerOf(p)(i)
	}
	for _, list := range WorkerLists(s, p, n, 1) {
		k := 0
		for _, sl := range list {
			if sl.Op == OpFlush {
				continue
			}
			t.pos[turnKey{sl.Stage, sl.Op, sl.Micro}] = k
			k++
		}
		t.length = append(t.length, k)
	}
	return t, true
}

// Of is the worker of stage i and the position of its action a (microbatches
// and steps numbered from the first step, 0) in that worker's order; false
// for a flush, which takes no turn.
func (t *Turns) Of(i int, a Action) (worker, pos int, ok bool) {
	if a.Op == OpFlush {
		return 0, 0, false
	}
	k, m := a.Step, 0
	if a.PerMicro() {
		k, m = a.Micro/t.n, a.Micro%t.n
	}
	w := t.worker[i]
	p, ok := t.pos[turnKey{i, a.Op, m}]
	return w, k*t.length[w] + p, ok
}

// Len is how many turns worker w takes a step.
func (t *Turns) Len(w int) int { return t.length[w] }

// Workers is the number of workers.
func (t *Turns) Workers() int { return len(t.length) }
