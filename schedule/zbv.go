package schedule

// ZBV is Qi et al.'s ZB-V (ICLR 2024) with a flush every step: W = P/2
// workers host two stages each in a V — worker j hosts stages j and
// P−1−j, so a microbatch goes down the workers and back up — and every
// backward is split into I and W. Worker j warms up with 2(W−j)−1
// forwards of its first stage, then j pairs of forwards of both, then W−j
// forwards of its second stage each followed by its I and W; in the
// steady state it repeats F I W on each of its stages; the cool-down runs
// the remaining I's and fills the gaps with W's. With equal F, I and W
// times its bubble is (W−1)/(6N+W−1) — only the fill before the last
// worker's first forward — at 1F1B's activation memory over W workers
// (min(N, W) microbatches of a worker's layers), for N ≥ 2W (fewer run
// the same lists without the missing microbatches, with bubbles).
//
//	clock  worker0  worker1        (P=4 stages, N=3: worker 0 hosts
//	    0  F0@0                     stages 0 and 3, worker 1 stages 1 and 2)
//	    1  F1@0     F0@1
//	    2  F2@0     F0@2
//	    3  F0@3     F1@1
//	    4  I0@3     F1@2
//	    5  W0@3     I0@2
//	    6  F1@3     W0@2
//	    7  I1@3     F2@1
//	    8  W1@3     I0@1
//	    9  I0@0     W0@1
//	   10  W0@0     F2@2
//	   11  F2@3     I1@2
//	   12  I2@3     W1@2
//	   13  W2@3     I1@1
//	   14  I1@0     I2@2
//	   15  W1@0     I2@1
//	   16  I2@0     W1@1
//	   17  W2@0 U0@3 U0@0  W2@2
//	   18           W2@1 U0@2 U0@1
func ZBV() Schedule {
	return checked(Schedule{
		Name: "zb-v", PerWorker: 2, Place: VShape, Split: true,
		Formula: func(p, n, _ int) (Measure, bool) {
			w := p / 2
			return Measure{Bubble: fill(w-1, 6*n), Activations: float64(min(n, w)), Weights: 1}, n >= 2*w
		},
	}, zbv)
}

func zbv(p, n, steps int) [][]Slot {
	w := p / 2
	nm := max(2*w-1, n) // the lists for fewer microbatches leave the rest out
	out := make([][]Slot, w)
	for j := range out {
		c0, c1 := j, p-1-j
		for k := 0; k < steps; k++ {
			base := k * n
			emit := func(stage int, a Action) {
				if a.Micro < n {
					a.Micro += base
					out[j] = append(out[j], Slot{Stage: stage, Action: a})
				}
			}
			var f0, f1, b0, b1 int
			fwd := func(c int, cnt *int) { emit(c, Forward(*cnt)); *cnt++ }
			inputWeight := func(c int, cnt *int) { emit(c, Input(*cnt)); emit(c, Weight(*cnt)); *cnt++ }
			for range 2*(w-j) - 1 {
				fwd(c0, &f0)
			}
			for range j {
				fwd(c1, &f1)
				fwd(c0, &f0)
			}
			for range w - j {
				fwd(c1, &f1)
				inputWeight(c1, &b1)
			}
			for f1 < f0 || f0 < nm {
				if f0 < nm {
					fwd(c0, &f0)
				}
				inputWeight(c0, &b0)
				fwd(c1, &f1)
				inputWeight(c1, &b1)
			}
			w0, w1 := b0, b1
			for range j {
				emit(c0, Input(b0))
				b0++
				emit(c1, Input(b1))
				b1++
			}
			for range w - j {
				emit(c0, Input(b0))
				b0++
				emit(c0, Weight(w0))
				w0++
			}
			for ; w1 < b1; w1++ {
				emit(c1, Weight(w1))
			}
			for ; w0 < b0; w0++ {
				emit(c0, Weight(w0))
			}
			out[j] = append(out[j], Slot{Stage: c1, Action: Update(k)}, Slot{Stage: c0, Action: Update(k)}, Slot{Stage: c0, Action: Flush(k)})
		}
	}
	return out
}
