package rescheduler_test

import (
	"fmt"
	"log"

	"github.com/pipemare/pipemare/rescheduler"
	"gorgonia.org/gorgonia"
)

// Wrap a stage's Momentum solver: a cosine schedule from 0.1, with T1 over
// the first 100 steps. The pipeline engine sets τ_i (here fixed at 4).
func Example() {
	s, err := rescheduler.New(gorgonia.NewMomentum(),
		rescheduler.WithBase(rescheduler.Cosine(0.1, 0.001, 1000)),
		rescheduler.WithPhase(100),
		rescheduler.WithDelay(4))
	if err != nil {
		log.Fatal(err)
	}
	for _, k := range []int{0, 50, 100} {
		base := rescheduler.Cosine(0.1, 0.001, 1000).Rate(k)
		fmt.Printf("step %3d: base %.4f, stage rate %.4f\n", k, base, base*rescheduler.Power{}.Factor(s.Delay(), k, 100))
	}
	// Output:
	// step   0: base 0.1000, stage rate 0.0250
	// step  50: base 0.0994, stage rate 0.0497
	// step 100: base 0.0976, stage rate 0.0976
}
