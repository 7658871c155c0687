//go:build !openblas

package stageops

import "golang.org/x/sys/cpu"

// bnReLU8 is bnChannel.forward with scale, bias and Rectify for the first
// n floats of x, n a positive multiple of 8, eight at a time in AVX
// (bnrelu_amd64.s): each element the same operations in the same order,
// the same bits. k is α, β, scale, bias, 1.
//
//go:noescape
func bnReLU8(y, x *float32, n int, k *[5]float32)

// bnReLUDy8 writes, for the first n floats, n a positive multiple of 8,
// dy through the Rectify mask of t = (x·α + β)·scale + bias, then (then
// 1) times scale — bnChannel.upstream's Rectify case — or (then 2) times
// x̂: with then 0 or 2 the terms of bnChannel.rowSum (elem's values);
// eight at a time in AVX, the same bits.
//
//go:noescape
func bnReLUDy8(out, x, dy *float32, n int, k *[5]float32, then int)

// wideBN says whether this CPU runs bnReLU8.
var wideBN = cpu.X86.HasAVX

// bnReLUWide computes forward's Rectify case for the longest prefix of x
// whose length is a multiple of 8, where the CPU can, and returns how many
// it computed.
func bnReLUWide(y, x []float32, alpha, beta, scale, bias float32) int {
	n := len(x) &^ 7
	if !wideBN || n == 0 {
		return 0
	}
	k := [5]float32{alpha, beta, scale, bias, 1}
	bnReLU8(&y[:n][0], &x[0], n, &k)
	return n
}

// bnReLUGradWide computes upstream's Rectify case for the longest prefix
// of x whose length is a multiple of 8, where the CPU can, and returns how
// many it computed.
func bnReLUGradWide(g, x, dy []float32, alpha, beta, scale, bias float32) int {
	return bnReLUDyWide(g, x, dy, [5]float32{alpha, beta, scale, bias, 1}, 1)
}

// bnReLUTermsWide computes elem's Rectify case into out for the longest
// prefix of x whose length is a multiple of 8, where the CPU can, and
// returns how many it computed.
func bnReLUTermsWide(out, x, dy []float32, alpha, beta, scale, bias float32, timesXhat bool) int {
	then := 0
	if timesXhat {
		then = 2
	}
	return bnReLUDyWide(out, x, dy, [5]float32{alpha, beta, scale, bias, 1}, then)
}

// bnReLUDyWide runs bnReLUDy8 on the longest prefix of x whose length is a
// multiple of 8, where the CPU can, and returns its length.
func bnReLUDyWide(out, x, dy []float32, k [5]float32, then int) int {
	n := len(x) &^ 7
	if !wideBN || n == 0 {
		return 0
	}
	bnReLUDy8(&out[:n][0], &x[0], &dy[:n][0], n, &k, then)
	return n
}

// bnGradSums8 adds, for 8 channels side by side, the first n elements of
// each one's plane (n a positive multiple of 8) into bnGradKernel's two
// sums, in the scalar loop's order and rounding (bnrelu_amd64.s): sum in
// acc[r], the dot product in acc[8+r]. Channel r's planes of g and x start
// r·ld bytes after g and x. cols is scratch.
//
//go:noescape
func bnGradSums8(gp, x *float32, ld uintptr, n int, mean *[8]float32, acc *[16]float32, cols *[64]float32)

// gradSumsWide adds into acc the two sums of bnGradKernel for the 8
// channels whose planes in image b start at at (g's and x's), over the
// longest prefix of a plane of s elements whose length is a multiple of 8,
// where the CPU can, and returns that length.
func gradSumsWide(g, x []float32, at, s int, mean *[8]float32, acc *[16]float32) int {
	n := s &^ 7
	if !wideBN || n == 0 {
		return 0
	}
	_ = g[at+7*s+n-1] // the last elements the kernel reads
	_ = x[at+7*s+n-1]
	var cols [64]float32
	bnGradSums8(&g[at], &x[at], uintptr(4*s), n, mean, acc, &cols)
	return n
}

// bnGradFinish8 is finishGradX's training case over the first n elements
// of a plane (n a positive multiple of 8), eight at a time in AVX, the
// same bits (bnrelu_amd64.s). k is gradMean, mean, kx, invstd.
//
//go:noescape
func bnGradFinish8(gp, x *float32, n int, k *[4]float32)

// gradFinishWide runs bnGradFinish8 on the longest prefix of g whose
// length is a multiple of 8, where the CPU can, and returns its length.
func gradFinishWide(g, x []float32, gradMean, mean, kx, invstd float32) int {
	n := len(g) &^ 7
	if !wideBN || n == 0 {
		return 0
	}
	k := [4]float32{gradMean, mean, kx, invstd}
	bnGradFinish8(&g[0], &x[:n][0], n, &k)
	return n
}
