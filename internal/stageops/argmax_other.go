//go:build openblas || !amd64

package stageops

// argmax2x2Wide: no vector kernel on this architecture or in the openblas
// build; argmax2x2 computes every window.
func argmax2x2Wide(out, r0, r1 []float32, top, w int, lowest float32) bool { return false }

// wideArgmax: no vector kernel here.
var wideArgmax = false
