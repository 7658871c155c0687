package asyncvm

// Schedule says in which order each stage runs its forwards, backwards and
// updates, and which weights those passes read. All schedules run in the same
// engine; they differ only in their action lists and weight policy.
type Schedule struct {
	// Name is how the schedule is printed and looked up.
	Name string
	// Actions returns each stage's ordered action list for steps minibatches
	// of n microbatches on p stages. It is a pure function of its arguments.
	Actions func(p, n, steps int) [][]Action
	// Async schedules never flush: forwards of the next minibatch start
	// before the previous minibatch's backwards are done, so a forward may
	// read weights several updates older than the backward.
	Async bool
	// Stash makes a backward read exactly the weights its forward read
	// (PipeDream's weight stashing); otherwise the backward reads the
	// stage's current weights, or the weights a correction supplies.
	Stash bool
}

// Sequential runs one microbatch at a time through all stages, forward then
// backward, and updates after each minibatch: no pipelining at all. It is the
// reference every other schedule is measured against.
//
//	clock  stage0   stage1   stage2        (P=3, N=2)
//	    0  F0
//	    1           F0
//	    2                    F0
//	    3                    B0
//	    4           B0
//	    5  B0
//	    6  F1
//	    …
var Sequential = Schedule{Name: "sequential", Actions: sequential}

// GPipe runs all forwards of a minibatch, then all its backwards, then
// updates every stage and flushes (Huang et al., 2019). Its bubble is
// (P−1)/(N+P−1) of the time.
//
//	clock  stage0   stage1   stage2        (P=3, N=3)
//	    0  F0
//	    1  F1       F0
//	    2  F2       F1       F0
//	    3           F2       F1
//	    4                    F2
//	    5                    B0
//	    6           B0       B1
//	    7  B0       B1       B2 U0
//	    8  B1       B2 U0
//	    9  B2 U0
var GPipe = Schedule{Name: "gpipe", Actions: gpipe}

// OneFOneB is 1F1B with a flush every minibatch (PipeDream-Flush): after a
// warm-up of P−1−i forwards, stage i alternates one forward and one
// backward, which bounds the microbatches in flight at stage i by P−i. Same
// bubble as GPipe, less activation memory.
//
//	clock  stage0   stage1   stage2        (P=3, N=3)
//	    0  F0
//	    1  F1       F0
//	    2  F2       F1       F0
//	    3                    B0
//	    4           B0       F1
//	    5  B0       F2       B1
//	    6           B1       F2
//	    7  B1                B2 U0
//	    8           B2 U0
//	    9  B2 U0
var OneFOneB = Schedule{Name: "1f1b", Actions: oneFOneB}

// PipeDream is the asynchronous 1F1B pipeline of PipeMare's action lists
// with weight stashing: every backward reads the weights its forward read,
// so a stage keeps up to τ_i+1 copies of its weights.
var PipeDream = Schedule{Name: "pipedream", Actions: async, Async: true, Stash: true}

// PipeMare is the asynchronous pipeline without flushes and without weight
// stashing (Yang et al., 2021): stage i runs a warm-up of 2(P−1−i)+1
// forwards, then alternates F(m+w_i) and B(m), and updates after the last
// backward of each minibatch. Forwards read the weights the stage has at that
// moment, which are
//
//	τ_i = ceil((2(P−1−i)+1) / N)
//
// updates older than the weights the gradient is applied to (some
// microbatches see one less); the backward reads the current weights, or
// the ones a correction supplies (see BackwardWeighter). There is no bubble
// in the steady state.
//
//	clock  stage0   stage1   stage2        (P=3, N=2)
//	    0  F0
//	    1  F1       F0
//	    2  F2       F1       F0
//	    3  F3       F2       F1
//	    4  F4       F3       B0
//	    5  F5       B0       F2
//	    6  B0       F4       B1 U0
//	    7  F6       B1 U0    F3
//	    8  B1 U0    F5       B2
//	    9  F7       B2       F4
//	   10  B2       F6       B3 U1
//	   11  F8       B3 U1    F5
//	    …                              every stage busy every clock
var PipeMare = Schedule{Name: "pipemare", Actions: async, Async: true}

// Schedules lists every schedule, synchronous ones first.
func Schedules() []Schedule {
	return []Schedule{Sequential, GPipe, OneFOneB, PipeDream, PipeMare}
}

// ScheduleByName returns the schedule with that name.
func ScheduleByName(name string) (Schedule, bool) {
	for _, s := range Schedules() {
		if s.Name == name {
			return s, true
		}
	}
	return Schedule{}, false
}

// Warmup is the number of forwards stage i of p runs before its first
// backward in the asynchronous schedules: 2(p−1−i)+1, the number of
// microbatches that enter the pipeline while one travels from stage i to the
// last stage and back.
func Warmup(p, i int) int { return 2*(p-1-i) + 1 }

// Delay is the PipeMare delay of stage i: τ_i = ceil((2(p−1−i)+1)/n)
// optimizer steps between the weights a forward reads and the weights its
// gradient is applied to.
func Delay(p, n, i int) int { return (Warmup(p, i) + n - 1) / n }

func sequential(p, n, steps int) [][]Action {
	out := make([][]Action, p)
	for i := range out {
		for k := 0; k < steps; k++ {
			for j := 0; j < n; j++ {
				out[i] = append(out[i], F(k*n+j), B(k*n+j))
			}
			out[i] = append(out[i], U(k), Bar(k))
		}
	}
	return out
}

func gpipe(p, n, steps int) [][]Action {
	out := make([][]Action, p)
	for i := range out {
		for k := 0; k < steps; k++ {
			for j := 0; j < n; j++ {
				out[i] = append(out[i], F(k*n+j))
			}
			for j := 0; j < n; j++ {
				out[i] = append(out[i], B(k*n+j))
			}
			out[i] = append(out[i], U(k), Bar(k))
		}
	}
	return out
}

func oneFOneB(p, n, steps int) [][]Action {
	out := make([][]Action, p)
	for i := range out {
		w := min(p-1-i, n)
		for k := 0; k < steps; k++ {
			base := k * n
			for j := 0; j < w; j++ {
				out[i] = append(out[i], F(base+j))
			}
			for j := 0; j < n; j++ {
				if j+w < n {
					out[i] = append(out[i], F(base+j+w))
				}
				out[i] = append(out[i], B(base+j))
			}
			out[i] = append(out[i], U(k), Bar(k))
		}
	}
	return out
}

func async(p, n, steps int) [][]Action {
	out := make([][]Action, p)
	total := steps * n
	for i := range out {
		w := min(Warmup(p, i), total)
		for m := 0; m < w; m++ {
			out[i] = append(out[i], F(m))
		}
		for m := 0; m < total; m++ {
			if m+w < total {
				out[i] = append(out[i], F(m+w))
			}
			out[i] = append(out[i], B(m))
			if (m+1)%n == 0 {
				out[i] = append(out[i], U(m/n))
			}
		}
	}
	return out
}
