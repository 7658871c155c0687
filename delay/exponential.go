package delay

import (
	"math"
	"math/rand"
)

// Exponential draws, per stage and step, one delay for all the forwards of
// that step: round(X) with X exponential of mean MeanDelay, redrawn while
// above Limit (a truncated exponential, as in the PipeMare paper's
// Hogwild-style experiment). Draws depend only on Seed, the stage and the
// step.
type Exponential struct {
	MeanDelay float64
	Limit     int
	Seed      int64
	// N is the microbatches per step (a step's forwards share a draw).
	N int
}

// Delay draws the delay of micro's step at stage.
func (e Exponential) Delay(stage, micro int) int {
	n := max(e.N, 1)
	rng := rand.New(rand.NewSource(e.Seed*1_000_003 + int64(stage)*7_919 + int64(micro/n)))
	if e.MeanDelay <= 0 {
		return 0
	}
	for {
		x := rng.ExpFloat64() * e.MeanDelay
		if d := int(math.Round(x)); d <= e.Limit {
			return d
		}
	}
}

// Mean is MeanDelay.
func (e Exponential) Mean(int) float64 { return e.MeanDelay }

// Max is Limit, the truncation.
func (e Exponential) Max(int) int { return e.Limit }
