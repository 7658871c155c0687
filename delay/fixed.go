package delay

import "github.com/pipemare/pipemare/schedule"

// Fixed gives stage i the delay f[i] for every microbatch.
type Fixed []int

// Delay returns f[stage].
func (f Fixed) Delay(stage, _ int) int { return f[stage] }

// Mean returns f[stage].
func (f Fixed) Mean(stage int) float64 { return float64(f[stage]) }

// Max returns f[stage].
func (f Fixed) Max(stage int) int { return f[stage] }

// PipeMare is the delays of a PipeMare pipeline with p stages and n
// microbatches per step: τ_i = ceil((2(p−1−i)+1)/n) for every forward.
func PipeMare(p, n int) Fixed {
	out := make(Fixed, p)
	for i := range out {
		out[i] = schedule.Delay(p, n, i)
	}
	return out
}
