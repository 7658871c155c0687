package schedule

// Sequential runs one microbatch at a time through all stages, forward then
// backward, and updates after each step: no pipelining at all. It is the
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
func Sequential() Schedule {
	return Schedule{Name: "sequential", Actions: sequential, Formula: func(p, _, _ int) (Measure, bool) {
		return Measure{Bubble: fill(p-1, 1), Activations: 1, Weights: 1}, true
	}}
}

func sequential(p, n, steps int) [][]Action {
	out := make([][]Action, p)
	for i := range out {
		for k := 0; k < steps; k++ {
			for j := 0; j < n; j++ {
				out[i] = append(out[i], Forward(k*n+j), Backward(k*n+j))
			}
			out[i] = append(out[i], Update(k), Flush(k))
		}
	}
	return out
}
