package runout_test

import (
	"log"
	"os"

	"github.com/pipemare/pipemare/runout"
	"github.com/pipemare/pipemare/schedule"
)

// Show GPipe's grid on 2 stages and 2 microbatches for one minibatch, as
// pipemare schedule does.
func ExampleWriteSchedule() {
	if err := runout.WriteSchedule(os.Stdout, schedule.GPipe(), 2, 2, 1, true); err != nil {
		log.Fatal(err)
	}
	// Output:
	// gpipe, P=2, N=2, 1 minibatches (F forward, B backward, U update):
	// clock  stage0   stage1
	//     0  F0
	//     1  F1       F0
	//     2           F1
	//     3           B0
	//     4  B0       B1 U0
	//     5  B1 U0
	// utilization with equal action times: 0.667
}
