package schedule

// PipeMare is the asynchronous pipeline without flushes and without weight
// stashing (Yang et al., 2021): stage i runs Ahead(P, i) = 2(P−1−i)+1
// forwards, then alternates F(m+Ahead) and B(m), and updates after the last
// backward of each step. Forwards read the weights the stage has at that
// moment, which are
//
//	τ_i = ceil((2(P−1−i)+1) / N)
//
// updates older than the weights the gradient is applied to (some
// microbatches see one less); the backward reads the current weights, or
// the ones a correction supplies (T2). There is no bubble in the steady
// state.
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
func PipeMare() Schedule {
	return Schedule{Name: "pipemare", Actions: async, Async: true, Formula: asyncFormula(func(int, int) float64 { return 1 })}
}

// asyncFormula is the Measure of the asynchronous schedules: the fill
// and drain once per run, (P−1)/(N·K+P−1) with a backward twice a
// forward; stage 0 holds min(2P, N·K) microbatches; weights(p, n)
// versions of the weights.
func asyncFormula(weights func(p, n int) float64) func(p, n, steps int) (Measure, bool) {
	return func(p, n, steps int) (Measure, bool) {
		return Measure{Bubble: fill(p-1, n*steps), Activations: float64(min(2*p, n*steps)), Weights: weights(p, n)}, n*steps >= 4*p
	}
}

// PipeDream is PipeMare's action lists with weight stashing (Narayanan et
// al., 2019): every backward reads the weights its forward read, so stage i
// keeps up to τ_i+1 copies of its weights.
func PipeDream() Schedule {
	return Schedule{Name: "pipedream", Actions: async, Async: true, StashWeights: true,
		Formula: asyncFormula(func(p, n int) float64 { return float64(Delay(p, n, 0) + 1) })}
}

// PipeDream2BW is PipeDream-2BW (Narayanan, Phanishayee, Shi, Chen,
// Zaharia, "Memory-Efficient Pipeline-Parallel DNN Training", ICML 2021):
// PipeMare's action lists with double-buffered weights. Every forward of
// step k reads the weights after update k−1 — the stage's current weights
// until it applies update k−1, the one copy it keeps of them after — and
// its backward the same, so every gradient is applied exactly one update
// late (W(k+1) = W(k) − α·∇f(W(k−1))) and a stage holds two weight
// versions, not PipeDream's up to τ_i+1. It needs N ≥ 2P−1 microbatches
// per step (MinN), so that no forward of step k runs before update k−2:
// then τ_i ≤ 1 at every stage, and the forwards that would read newer
// weights read the kept copy instead.
func PipeDream2BW() Schedule {
	return Schedule{Name: "pipedream-2bw", Actions: async, Async: true, StashWeights: true, ForwardDelay: 1,
		Formula: asyncFormula(func(int, int) float64 { return 2 })}
}

// MinN is the fewest microbatches per step schedule s can run on p stages:
// Ahead(p, 0) = 2p−1 for PipeDream-2BW (see there), 1 otherwise.
func MinN(s Schedule, p int) int {
	if s.ForwardDelay > 0 {
		return Ahead(p, 0)
	}
	return 1
}

func async(p, n, steps int) [][]Action {
	out := make([][]Action, p)
	total := steps * n
	for i := range out {
		w := min(Ahead(p, i), total)
		for m := 0; m < w; m++ {
			out[i] = append(out[i], Forward(m))
		}
		for m := 0; m < total; m++ {
			if m+w < total {
				out[i] = append(out[i], Forward(m+w))
			}
			out[i] = append(out[i], Backward(m))
			if (m+1)%n == 0 {
				out[i] = append(out[i], Update(m/n))
			}
		}
	}
	return out
}
