package graphsplit_test

import (
	"fmt"

	"github.com/pipemare/pipemare/graphsplit"
)

// Compute in the fast kernel mode while a run trains, then give it back;
// a run of this process in the other mode is refused meanwhile.
func ExampleHoldKernels() {
	release, err := graphsplit.HoldKernels(graphsplit.FastKernels)
	if err != nil {
		fmt.Println("no fast mode here:", err) // no AVX2 and FMA3, or the openblas build
		return
	}
	defer release()
	// ... train: every float32 matrix product of the process now sums in
	// the fast mode's order.
	_, err = graphsplit.HoldKernels(graphsplit.ExactKernels)
	fmt.Println(err != nil)
}
