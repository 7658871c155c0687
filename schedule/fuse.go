package schedule

// Fusable reports whether a stage that runs f and then, at once, next can
// run both as one program: f is a forward and next its microbatch's
// backward or input gradient, whose program (recomputing) computes the
// forward again. A runtime fuses such a pair on a last stage that
// recomputes (internal/stage).
func Fusable(f, next Action) bool {
	return f.Op == OpForward && (next.Op == OpBackward || next.Op == OpInput) && next.Micro == f.Micro
}

// FusesLast reports whether s, on p stages with n microbatches a step,
// follows every forward of its last stage at once, in that stage's list,
// with a Fusable action: Sequential, 1F1B and the zero-bubble schedules
// do; PipeMare, whose last stage runs the next forward first, and GPipe do
// not. A runtime that recomputes activations then runs each such pair as
// one program (one forward, not two); a plan is timed that way for it
// (graphsplit.Profiled). It is false for a schedule that has no lists for
// p and n.
func FusesLast(s Schedule, p, n int) bool {
	lists := s.Actions(p, n, 1)
	if len(lists) < p || p < 1 {
		return false
	}
	last := lists[p-1]
	forwards := 0
	for t, a := range last {
		if a.Op != OpForward {
			continue
		}
		forwards++
		if t+1 == len(last) || !Fusable(a, last[t+1]) {
			return false
		}
	}
	return forwards > 0
}
