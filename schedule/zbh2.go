package schedule

// ZBH2 is Qi et al.'s ZB-H2 (ICLR 2024): every backward split into I and
// W, stage i running up to 2(P−1−i)+1 forwards ahead of its I's —
// PipeMare's Ahead — and holding at most 2P−1 microbatches between their
// forward and their W — about twice 1F1B's memory — so that forwards and
// deferred W's fill what is 1F1B's bubble. It has no flush:
// stage i starts step k+1's forwards right after its own update k, so
// every forward still reads the weights of the step before (exactly
// synchronous, as Qi et al.'s post-update validation makes it) and the
// steps overlap. The order is the greedy one with equal F, I and W times:
// each clock a stage runs its next I if its gradient is there, else its
// next forward if allowed, else its oldest pending W; its update follows
// its step's last W. With N ≥ 2P the bubble is the pipeline's fill and
// drain, once per run: (P−1)/(3·N·K+P−1) over K steps; with fewer
// microbatches it cannot defer enough W's and is ZB-H1's.
//
//	clock  stage0   stage1        (P=2, N=4, two steps)
//	    0  F0
//	    1  F1       F0
//	    2  F2       I0
//	    3  I0       F1
//	    4  W0       I1
//	    5  I1       F2
//	    6  F3       I2
//	    7  I2       W0
//	    8  W1       F3
//	    9  W2       I3
//	   10  I3       W1
//	   11  W3 U0    W2
//	   12  F4       W3 U0        step 1 starts before stage 1 updates
//	   13  F5       F4
//	   14  F6       I4
//	    …
func ZBH2() Schedule {
	return Schedule{Name: "zb-h2", Split: true, Actions: zbh2, Formula: func(p, n, steps int) (Measure, bool) {
		return Measure{Bubble: fill(p-1, 3*n*steps), Activations: float64(2*p - 1), Weights: 1}, n >= 2*p
	}}
}

// zbh2 builds ZBH2's lists by running the greedy rule on a unit clock.
func zbh2(p, n, steps int) [][]Action {
	total := n * steps
	type state struct {
		nextF, nextI, updates int
		pending               []int // microbatches whose W is due, oldest first
		wDone                 []int // W's done per step
		wTotal                int   // W's done
		fEnd, iEnd            []int // clock F(m), I(m) ended; -1: not yet
	}
	st := make([]*state, p)
	for i := range st {
		s := &state{wDone: make([]int, steps), fEnd: make([]int, total), iEnd: make([]int, total)}
		for m := range s.fEnd {
			s.fEnd[m], s.iEnd[m] = -1, -1
		}
		st[i] = s
	}
	out := make([][]Action, p)
	done := 0
	for clock := 0; done < p; clock++ {
		done = 0
		for i, s := range st {
			ended := func(t int) bool { return t >= 0 && t <= clock }
			switch {
			case s.nextI < s.nextF && (i == p-1 || ended(st[i+1].iEnd[s.nextI])):
				m := s.nextI
				s.iEnd[m] = clock + 1
				s.nextI++
				s.pending = append(s.pending, m)
				out[i] = append(out[i], Input(m))
			case s.nextF < total && s.nextF/n == s.updates && s.nextF-s.nextI < Ahead(p, i) && s.nextF-s.wTotal < 2*p-1 &&
				(i == 0 || ended(st[i-1].fEnd[s.nextF])):
				m := s.nextF
				s.fEnd[m] = clock + 1
				s.nextF++
				out[i] = append(out[i], Forward(m))
			case len(s.pending) > 0:
				m := s.pending[0]
				s.pending = s.pending[1:]
				out[i] = append(out[i], Weight(m))
				s.wTotal++
				k := m / n
				if s.wDone[k]++; s.wDone[k] == n {
					out[i] = append(out[i], Update(k))
					s.updates++
				}
			}
			if s.updates == steps {
				done++
			}
		}
	}
	return out
}
