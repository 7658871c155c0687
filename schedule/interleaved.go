package schedule

import "fmt"

// Interleaved is interleaved 1F1B with a flush every step (Narayanan et
// al., SC 2021, Megatron-LM): W = P/v workers host v stages each, round
// robin (worker j hosts j, j+W, …), and run 1F1B over them in rounds of R
// microbatches (R = W when N is a multiple of W): forwards go through the
// worker's stages round after round, backwards the other way. Worker j
// runs (v−1)·R + 2(W−1−j) forwards before its first backward. The bubble
// is (W−1)/(v·N) of the work, v times less than 1F1B's on W workers, for
// (1 + (W−1)/(v·W)) times 1F1B's activation memory; N must be below W or
// a multiple of N/W rounded down, so that every round has R microbatches.
//
// F0@2 is the forward of microbatch 0 at stage 2:
//
//	clock  worker0  worker1        (P=4 stages, v=2, N=2: worker 0 hosts
//	    0  F0@0                     stages 0 and 2, worker 1 stages 1 and 3)
//	    1  F1@0     F0@1
//	    2  F0@2     F1@1
//	    3  F1@2     F0@3
//	    4           B0@3
//	    5  B0@2     F1@3
//	    6           B1@3
//	    7  B1@2     B0@1
//	    8  B0@0     B1@1 U0@3 U0@1
//	    9  B1@0 U0@2 U0@0
func Interleaved(v int) Schedule {
	v = max(v, 1)
	name := "interleaved"
	if v != 2 {
		name = fmt.Sprintf("interleaved-%d", v)
	}
	return checked(Schedule{
		Name: name, PerWorker: v, Place: RoundRobin,
		fits: roundsFit(v),
		Formula: func(p, n, _ int) (Measure, bool) {
			w := p / v
			return Measure{Bubble: fill(w-1, v*n), Activations: float64(w) + float64(w-1)/float64(v), Weights: 1}, n >= 2*w && n%w == 0
		},
	}, func(p, n, steps int) [][]Slot { return rounds(p, v, n, steps, false) })
}

// ZBH1 is Qi et al.'s ZB-H1 (ICLR 2024) with a flush every step: 1F1B
// with every backward split into its input gradient I, on the critical
// path, and its weight gradient W, which stage i defers by i microbatches
// (stage 0 runs W(m) right after I(m)) and whose last ones fill the
// bubble before the flush. It keeps 1F1B's activation memory, P
// microbatches at most, and with equal F, I and W times and N ≥ P its
// bubble is (P−1)/(3N+P−1), about a third of 1F1B's.
//
//	clock  stage0   stage1   stage2        (P=3, N=3)
//	    0  F0
//	    1  F1       F0
//	    2  F2       F1       F0
//	    3                    I0
//	    4           I0       F1
//	    5  I0       F2       I1
//	    6  W0       I1       F2
//	    7  I1       W0       I2
//	    8  W1       I2       W0
//	    9  I2       W1       W1
//	   10  W2 U0    W2 U0    W2 U0
func ZBH1() Schedule {
	return checked(Schedule{
		Name: "zb-h1", Split: true,
		Formula: func(p, n, _ int) (Measure, bool) {
			return Measure{Bubble: fill(p-1, 3*n), Activations: float64(min(n, p)), Weights: 1}, n >= p
		},
	}, func(p, n, steps int) [][]Slot { return rounds(p, 1, n, steps, true) })
}

// roundsFit is Interleaved's condition on N: rounds of equal size.
func roundsFit(v int) func(p, n int) string {
	return func(p, n int) string {
		if w := p / v; v > 1 && n > w && n%(n/w) != 0 {
			return fmt.Sprintf("interleaving runs rounds of equal size: N must be below %d or a multiple of N/%d rounded down (%d)", w, w, n/w)
		}
		return ""
	}
}

// rounds builds interleaved 1F1B's worker lists (split: ZB-H1's, or its
// interleaved form), one step after another. Worker j of W = p/v, in a
// step of n microbatches split into rounds of R: op k < warm is the
// forward of local stage (k/R) mod v, op k ≥ warm also the backward of
// local stage v−1−((k−warm)/R) mod v, each of the next microbatch of that
// stage. Split, every I after the first j is followed by the oldest
// pending W, and the rest end the step.
func rounds(p, v, n, steps int, split bool) [][]Slot {
	w := p / v
	r := n
	if n >= w {
		r = n / (n / w)
	}
	out := make([][]Slot, w)
	for j := range out {
		warm := (v-1)*r + 2*(w-1-j)
		if split {
			warm = (v-1)*r + (w - 1 - j)
		}
		warm = min(warm, n*v)
		for k := 0; k < steps; k++ {
			base := k * n
			nextF, nextB := make([]int, v), make([]int, v)
			var pending []Slot
			back := func(b int) {
				l := v - 1 - (b/r)%v
				s := Slot{Stage: l*w + j, Action: Backward(base + nextB[l])}
				nextB[l]++
				if !split {
					out[j] = append(out[j], s)
					return
				}
				s.Op = OpInput
				out[j] = append(out[j], s)
				pending = append(pending, Slot{Stage: s.Stage, Action: Weight(s.Micro)})
				if b >= j {
					out[j] = append(out[j], pending[0])
					pending = pending[1:]
				}
			}
			for op := 0; op < n*v+warm; op++ {
				if op < n*v {
					l := (op / r) % v
					out[j] = append(out[j], Slot{Stage: l*w + j, Action: Forward(base + nextF[l])})
					nextF[l]++
				}
				if op >= warm {
					back(op - warm)
				}
			}
			out[j] = append(out[j], pending...)
			for l := v - 1; l >= 0; l-- {
				out[j] = append(out[j], Slot{Stage: l*w + j, Action: Update(k)})
			}
			out[j] = append(out[j], Slot{Stage: j, Action: Flush(k)})
		}
	}
	return out
}
