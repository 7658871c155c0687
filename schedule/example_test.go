package schedule_test

import (
	"fmt"

	"github.com/pipemare/pipemare/schedule"
)

// Print PipeMare's clock grid for 2 stages and 2 microbatches a step, and
// the delay every stage's forwards see.
func ExampleGrid() {
	fmt.Print(schedule.Grid(schedule.PipeMare(), 2, 2, 2))
	fmt.Println("τ:", schedule.Delay(2, 2, 0), schedule.Delay(2, 2, 1))
	// Output:
	// clock  stage0   stage1
	//     0  F0
	//     1  F1       F0
	//     2  F2       F1
	//     3  F3       B0
	//     4  B0       F2
	//     5           B1 U0
	//     6  B1 U0    F3
	//     7           B2
	//     8  B2       B3 U1
	//     9  B3 U1
	// τ: 2 1
}

// Replay GPipe on 4 virtual devices with equal action times: its
// utilization is N/(N+P−1).
func ExampleReplay() {
	v := schedule.Replay(schedule.GPipe().Actions(4, 8, 1), schedule.Chain(4), nil)
	fmt.Printf("%.4f = 8/11\n", v.Utilization)
	// Output: 0.7273 = 8/11
}
