// The race step skips this example: it builds and cuts ResNet-50 in one
// goroutine, 20 s under the race detector and nothing for it to check;
// go test ./... runs it.

//go:build !race

package footprint_test

import (
	"fmt"
	"log"

	"github.com/pipemare/pipemare/footprint"
	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/internal/testkit/testmodels"
	"gorgonia.org/tensor"
)

// ResNet-50 at microbatch 1 cut into 107 stages, as in the PipeMare paper,
// with Momentum (one slot of solver state): PipeDream's stash against
// PipeMare's single weight copy and T2's δ, for several N.
func Example() {
	m, err := testmodels.ResNet50(tensor.Float32, 1, 1)
	if err != nil {
		log.Fatal(err)
	}
	plan, err := graphsplit.Split(m.Graph, m.Cost, m.Learnables, graphsplit.Stages(107))
	if err != nil {
		log.Fatal(err)
	}
	for _, n := range []int{1, 4, 8, 32} {
		t, err := footprint.Of(plan, n, 1)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("N = %2d: PipeMare+T2 %.0f MiB, PipeDream %.0f MiB: %.2f×\n", n,
			float64(t.Total.PipeMare())/(1<<20), float64(t.Total.PipeDream())/(1<<20), t.Ratio())
	}
	// Output:
	// N =  1: PipeMare+T2 292 MiB, PipeDream 4662 MiB: 15.94×
	// N =  4: PipeMare+T2 292 MiB, PipeDream 1349 MiB: 4.61×
	// N =  8: PipeMare+T2 292 MiB, PipeDream 796 MiB: 2.72×
	// N = 32: PipeMare+T2 292 MiB, PipeDream 386 MiB: 1.32×
}
