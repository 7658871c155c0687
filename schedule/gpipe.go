package schedule

// GPipe runs all forwards of a step, then all its backwards, then updates
// every stage and flushes (Huang et al., 2019). Its bubble is
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
func GPipe() Schedule {
	return Schedule{Name: "gpipe", Actions: gpipe, Formula: func(p, n, _ int) (Measure, bool) {
		return Measure{Bubble: fill(p-1, n), Activations: float64(n), Weights: 1}, true
	}}
}

// fill is the bubble fraction b/(work+b) of b idle units against work.
func fill(b, work int) float64 { return float64(b) / float64(work+b) }

func gpipe(p, n, steps int) [][]Action {
	out := make([][]Action, p)
	for i := range out {
		for k := 0; k < steps; k++ {
			for j := 0; j < n; j++ {
				out[i] = append(out[i], Forward(k*n+j))
			}
			for j := 0; j < n; j++ {
				out[i] = append(out[i], Backward(k*n+j))
			}
			out[i] = append(out[i], Update(k), Flush(k))
		}
	}
	return out
}
