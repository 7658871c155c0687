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
