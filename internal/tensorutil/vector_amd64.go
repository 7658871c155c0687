// The vector loops of the float32 passes the engine makes over every
// learnable each step: the finite check and the gradients' accumulation.

package tensorutil

import "golang.org/x/sys/cpu"

// wideFinite says whether orExponents32 can run (AVX2).
var wideFinite = cpu.X86.HasAVX2

// orExponents32 is finite32's loop over d, whose length is a multiple of
// 8, in AVX2 (vector_amd64.s).
//
//go:noescape
func orExponents32(d []float32) uint32

// wideAdd says whether addF32 can run (AVX).
var wideAdd = cpu.X86.HasAVX

// addF32 is add's loop over the first len(d) &^ 7 elements of d and x
// (len(x) ≥ len(d)), in AVX (vector_amd64.s).
//
//go:noescape
func addF32(d, x []float32)
