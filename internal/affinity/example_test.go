package affinity_test

import (
	"fmt"

	"github.com/pipemare/pipemare/internal/affinity"
)

// A CPU list as taskset takes it, and back.
func ExampleParse() {
	cpus, err := affinity.Parse("0-2,5")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cpus, affinity.Format(cpus))
	// Output: [0 1 2 5] 0-2,5
}
