package schedule

// OneFOneB is 1F1B with a flush every step (PipeDream-Flush): after P−1−i
// forwards, stage i alternates one forward and one backward, which bounds
// the microbatches in flight at stage i by P−i. Same bubble as GPipe, less
// activation memory.
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
func OneFOneB() Schedule {
	return Schedule{Name: "1f1b", Actions: oneFOneB, Formula: func(p, n, _ int) (Measure, bool) {
		return Measure{Bubble: fill(p-1, n), Activations: float64(min(n, p)), Weights: 1}, true
	}}
}

func oneFOneB(p, n, steps int) [][]Action {
	out := make([][]Action, p)
	for i := range out {
		w := min(p-1-i, n)
		for k := 0; k < steps; k++ {
			base := k * n
			for j := 0; j < w; j++ {
				out[i] = append(out[i], Forward(base+j))
			}
			for j := 0; j < n; j++ {
				if j+w < n {
					out[i] = append(out[i], Forward(base+j+w))
				}
				out[i] = append(out[i], Backward(base+j))
			}
			out[i] = append(out[i], Update(k), Flush(k))
		}
	}
	return out
}
