package graphsplit_test

import (
	"fmt"
	"log"

	"github.com/pipemare/pipemare/graphsplit"
	"github.com/pipemare/pipemare/schedule"
)

// Cut the convolutional net into four stages for ZB-V, whose two workers
// host stages 0 and 3, and 1 and 2: balanced as four stages, or as the V's
// two workers, by the cost estimate. Each worker's share of the estimated
// cost follows the cut.
func ExampleOnWorkers() {
	for _, opts := range [][]graphsplit.Option{
		{graphsplit.Stages(4)},
		{graphsplit.Stages(4), graphsplit.OnWorkers(schedule.VShape, 2)},
	} {
		g, cost, learnables := convNet()
		plan, err := graphsplit.Split(g, cost, learnables, opts...)
		if err != nil {
			log.Fatal(err)
		}
		c := plan.Costs()
		total := c[0] + c[1] + c[2] + c[3]
		fmt.Printf("cut %v: worker 0 (stages 0, 3) %.0f%%, worker 1 (stages 1, 2) %.0f%%\n", plan.Cuts(), 100*(c[0]+c[3])/total, 100*(c[1]+c[2])/total)
		plan.Close()
	}
	// Output:
	// cut [3 6 16]: worker 0 (stages 0, 3) 46%, worker 1 (stages 1, 2) 54%
	// cut [6 19 20]: worker 0 (stages 0, 3) 50%, worker 1 (stages 1, 2) 50%
}
