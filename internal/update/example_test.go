package update_test

import (
	"fmt"

	"github.com/pipemare/pipemare/internal/update"
)

// A momentum step of rate 0.5 and β 0.9 from a zero velocity, then T2's
// velocity estimate of the change (γ 0.5) and the weights one step back
// along it.
func Example() {
	w := []float32{1, 2, 3, 4, 5, 6, 7, 8, 9}
	old := append([]float32(nil), w...)
	g := []float32{1, 1, 1, 1, 1, 1, 1, 1, 2}
	v := make([]float32, len(w))
	update.Momentum(w, g, v, 0.9, -0.5)
	d := make([]float32, len(w))
	update.Velocity(d, w, old, 0.5)
	back := make([]float32, len(w))
	update.Shift(back, w, d, 1)
	fmt.Println(w)
	fmt.Println(d)
	fmt.Println(back)
	// Output:
	// [0.5 1.5 2.5 3.5 4.5 5.5 6.5 7.5 8]
	// [-0.25 -0.25 -0.25 -0.25 -0.25 -0.25 -0.25 -0.25 -0.5]
	// [0.75 1.75 2.75 3.75 4.75 5.75 6.75 7.75 8.5]
}
