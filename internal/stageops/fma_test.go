//go:build !openblas

package stageops

import (
	"fmt"
	"math"
	"math/rand"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/blas"
)

// fma32 is float32's fused multiply-add x·y + z, rounded once (to nearest,
// ties to even). x·y is exact in float64; the float64 sum is made to round
// to odd (an inexact sum moved to its neighbour with an odd last bit, which
// lies beyond the exact sum's side: Boldo and Melquiond's rule), whose
// rounding to float32 is then the exact sum's, 53 bits being more than
// float32's 24 + 2.
func fma32(x, y, z float32) float32 {
	p, w := float64(x)*float64(y), float64(z)
	s := p + w
	v := s - p
	e := (p - (s - v)) + (w - v) // s + e = p + w exactly (TwoSum)
	if e != 0 && math.Float64bits(s)&1 == 0 {
		s = math.Nextafter(s, math.Copysign(math.Inf(1), e))
	}
	return float32(s)
}

// fastReference is the fast mode's order, written out: for every element,
// s from 0 by fused multiply-adds in increasing l, then alpha·s + beta·c.
func fastReference(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	for i := range m {
		for j := range n {
			var s float32
			for l := range k {
				ai, bi := i*lda+l, l*ldb+j
				if tA {
					ai = l*lda + i
				}
				if tB {
					bi = j*ldb + l
				}
				x, y := a[ai], b[bi]
				s = fma32(x, y, s)
			}
			cij := &c[i*ldc+j]
			if beta == 0 {
				*cij = 0
			} else {
				*cij *= beta
			}
			*cij = fma32(alpha, s, *cij)
		}
	}
}

// TestFastGemmIsItsOrder: in the fast mode every element of every product
// has the bits of fastReference — the one order the mode promises —
// whatever computes it: one worker or four, the 4×32 tiles of AVX-512 or
// the 4×16 ones, the data starting at another address, for A and B
// transposed or not, shapes with rows past the tiles of 4 (and fewer than
// 4 rows), columns past the tiles of 16 (1 to 15), and leading dimensions
// wider than the matrices. That is what makes a fast run give the same
// bits on any number of cores, processes and hosts with AVX2 and FMA3.
func TestFastGemmIsItsOrder(t *testing.T) {
	if !fastKernels() {
		t.Skip("no AVX2 and FMA3 on this CPU: the fast mode is refused here")
	}
	release, err := HoldKernels(Fast)
	require.NoError(t, err)
	defer release()
	defer SetWorkers(0)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	defer func(w bool) { wideTiles = w }(wideTiles)
	widths := []bool{false}
	if wideTiles {
		widths = append(widths, true)
	}
	rng := rand.New(rand.NewSource(3))
	for _, sz := range [][3]int{{4, 16, 1}, {7, 33, 5}, {1, 5, 3}, {3, 40, 9}, {32, 40, 64}, {9, 47, 17}, {13, 70, 20}, {16, 10, 64}, {8, 300, 40}} {
		m, n, k := sz[0], sz[1], sz[2]
		for _, tA := range []bool{false, true} {
			for _, tB := range []bool{false, true} {
				for _, ab := range [][2]float32{{1, 0}, {0.5, 2}} {
					name := fmt.Sprintf("%dx%dx%d/tA=%v/tB=%v/alpha=%g,beta=%g", m, n, k, tA, tB, ab[0], ab[1])
					ra, ca, rb, cb := m, k, k, n
					if tA {
						ra, ca = k, m
					}
					if tB {
						rb, cb = n, k
					}
					lda, ldb, ldc := ca+3, cb+1, n+5
					a, b := randomFloats(rng, ra*lda+1, 0.1, 0), randomFloats(rng, rb*ldb+1, 0.1, 0)
					c := randomFloats(rng, m*ldc+1, 0.1, 0)
					want := append([]float32(nil), c...)
					fastReference(tA, tB, m, n, k, ab[0], a, lda, b, ldb, ab[1], want, ldc)
					for _, workers := range []int{1, 4} {
						for _, wide := range widths {
							for _, shift := range []int{0, 1} { // the data one float later in memory
								wideTiles = wide
								SetWorkers(workers)
								as, bs := append(make([]float32, shift), a...), append(make([]float32, shift), b...)
								got := append(make([]float32, shift), c...)
								gonumBLAS{}.Sgemm(trans(tA), trans(tB), m, n, k, ab[0], as[shift:], lda, bs[shift:], ldb, ab[1], got[shift:], ldc)
								require.Equal(t, bits32(want), bits32(got[shift:]), "%s: workers %d, AVX-512 %v, shifted %d", name, workers, wide, shift)
							}
						}
					}
				}
			}
		}
	}
}

func trans(t bool) blas.Transpose {
	if t {
		return blas.Trans
	}
	return blas.NoTrans
}

// TestFastGemmIsCloseToExact: the fast and the exact products of the same
// operands both lie within the classic bound of a k-term dot product
// summed in any order in float32 (Higham, Accuracy and Stability of
// Numerical Algorithms, §3.1): |computed − true| ≤ γ(k+2)·(|alpha|·Σ|a||b| +
// |beta·c|), γ(n) = n·u/(1 − n·u), u = 2⁻²⁴ — k products summed, then the
// scaling by alpha and the addition of beta·c, each one more rounding (a
// fused multiply-add rounds once where the exact mode rounds twice, so the
// bound holds for both). The true value is computed in float64, whose own
// error is 2²⁹ times smaller. So the two modes differ by no more than
// twice the bound: the fast mode changes rounding, not what is computed.
func TestFastGemmIsCloseToExact(t *testing.T) {
	if !fastKernels() {
		t.Skip("no AVX2 and FMA3 on this CPU")
	}
	const u = 1.0 / (1 << 24)
	gamma := func(n int) float64 { return float64(n) * u / (1 - float64(n)*u) }
	rng := rand.New(rand.NewSource(4))
	for _, sz := range [][3]int{{8, 100, 784}, {16, 72, 196}, {16, 200, 100}, {5, 10, 3000}} {
		m, n, k := sz[0], sz[1], sz[2]
		for _, tB := range []bool{false, true} {
			a, b, c := randomFloats(rng, m*k, 0, 0), randomFloats(rng, k*n, 0, 0), randomFloats(rng, m*n, 0, 0)
			ldb := n
			if tB {
				ldb = k
			}
			const alpha, beta = 0.5, 2
			out := map[Kernels][]float32{}
			for _, mode := range []Kernels{Exact, Fast} {
				release, err := HoldKernels(mode)
				require.NoError(t, err)
				got := append([]float32(nil), c...)
				gonumBLAS{}.Sgemm(blas.NoTrans, trans(tB), m, n, k, alpha, a, k, b, ldb, beta, got, n)
				release()
				out[mode] = got
			}
			differ := 0
			for i := range m {
				for j := range n {
					var exact, abs float64
					for l := range k {
						bi := l*ldb + j
						if tB {
							bi = j*ldb + l
						}
						p := float64(a[i*k+l]) * float64(b[bi])
						exact += p
						abs += math.Abs(p)
					}
					bound := gamma(k+2) * (alpha*abs + math.Abs(beta*float64(c[i*n+j])))
					exact = alpha*exact + beta*float64(c[i*n+j])
					for mode, got := range out {
						require.LessOrEqual(t, math.Abs(float64(got[i*n+j])-exact), bound, "%v %dx%dx%d tB=%v (%d, %d)", mode, m, n, k, tB, i, j)
					}
					if out[Exact][i*n+j] != out[Fast][i*n+j] {
						differ++
					}
				}
			}
			require.Positive(t, differ, "%dx%dx%d: the fast mode computes in another order than the exact one", m, n, k)
		}
	}
}

// TestHoldKernels: one mode at a time in a process; the fast mode
// refused on a CPU without it; an unknown mode refused by name.
func TestHoldKernels(t *testing.T) {
	release, err := HoldKernels(Exact)
	require.NoError(t, err)
	again, err := HoldKernels(Exact)
	require.NoError(t, err, "two runs in the same mode share the BLAS")
	if fastKernels() {
		_, err = HoldKernels(Fast)
		require.ErrorContains(t, err, "kernels fast wanted while a run of this process computes with kernels exact")
	}
	release()
	release() // twice changes nothing
	require.False(t, fastNow.Load())
	_, err = HoldKernels(Fast)
	if fastKernels() {
		require.ErrorContains(t, err, "kernels fast wanted while", "the second exact holder still holds")
	}
	again()
	_, err = HoldKernels("quick")
	require.ErrorContains(t, err, `kernels "quick": not a kernel mode (exact or fast)`)
	if !fastKernels() {
		return
	}
	fast, err := HoldKernels(Fast)
	require.NoError(t, err)
	require.True(t, fastNow.Load())
	fast()
	require.False(t, fastNow.Load(), "with no holder the products are exact")
}
