//go:build !openblas

package stageops

import "golang.org/x/sys/cpu"

// argmax2x2x8 is argmax2x2's loop for the n windows of one output row,
// eight at a time in AVX2 (argmax_amd64.s), the last n mod 8 with masked
// loads and stores (tail): the same comparisons in the same order, the
// same indices. k is the row's top left index, the image's width, the
// lowest value, 1, then 0, 2, …, 14.
//
//go:noescape
func argmax2x2x8(out, r0, r1 *float32, n int, k *[12]float32, tail *[24]int32)

// wideArgmax says whether this CPU runs argmax2x2x8.
var wideArgmax = cpu.X86.HasAVX2

// argmax2x2Wide computes argmax2x2's windows of one output row where the
// CPU can, and reports whether it did. top is the row's first index in the
// plane, w the image's width; r0 and r1 are the row's two image rows.
func argmax2x2Wide(out, r0, r1 []float32, top, w int, lowest float32) bool {
	n := len(out)
	if !wideArgmax || n == 0 || top+2*w > 1<<24 { // indices exact in float32
		return false
	}
	var tail [24]int32
	for i := range 2 * (n % 8) {
		tail[i] = -1
	}
	for i := range n % 8 {
		tail[16+i] = -1
	}
	k := [12]float32{float32(top), float32(w), lowest, 1, 0, 2, 4, 6, 8, 10, 12, 14}
	argmax2x2x8(&out[0], &r0[:2*n][0], &r1[:2*n][0], n, &k, &tail)
	return true
}
