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

// bnReLUGrad8 is bnChannel.upstream with scale, bias and Rectify for the
// first n floats, n a positive multiple of 8, eight at a time in AVX: the
// same bits.
//
//go:noescape
func bnReLUGrad8(out, x, dy *float32, n int, k *[5]float32)

// bnReLUTerms8 writes, for the first n floats, n a positive multiple of 8,
// the terms bnChannel.rowSum adds up with scale, bias and Rectify (elem's
// values), eight at a time in AVX: the same bits.
//
//go:noescape
func bnReLUTerms8(out, x, dy *float32, n int, k *[5]float32, timesXhat bool)

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
	n := len(x) &^ 7
	if !wideBN || n == 0 {
		return 0
	}
	k := [5]float32{alpha, beta, scale, bias, 1}
	bnReLUGrad8(&g[:n][0], &x[0], &dy[:n][0], n, &k)
	return n
}

// bnReLUTermsWide computes elem's Rectify case into out for the longest
// prefix of x whose length is a multiple of 8, where the CPU can, and
// returns how many it computed.
func bnReLUTermsWide(out, x, dy []float32, alpha, beta, scale, bias float32, timesXhat bool) int {
	n := len(x) &^ 7
	if !wideBN || n == 0 {
		return 0
	}
	k := [5]float32{alpha, beta, scale, bias, 1}
	bnReLUTerms8(&out[:n][0], &x[0], &dy[:n][0], n, &k, timesXhat)
	return n
}
