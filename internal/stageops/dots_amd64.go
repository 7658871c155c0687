//go:build !openblas

package stageops

// sdot8 adds alpha·DotUnitary(row r of A, row j of B) into C[r][j] as
// gonum's sgemmSerialNotTrans adds it, for rows ≤ 8 rows r of A and n
// rows j of B, each product k long (dot8_amd64.s). Row r is packed at a
// (element l of the 8 rows at a[8·l : 8·l+8]); row j of B starts at b
// plus j·ldb bytes, and row r of C at c plus r·ldc bytes. out is scratch
// of 8·n floats.
//
//go:noescape
func sdot8(a, b *float32, ldb uintptr, n, k int, alpha float32, c *float32, ldc uintptr, rows int, out *float32)

// dotsFit reports whether sgemmDots computes an m×n×k product: each dot
// product it packs is at most 64 long, which is k, or the pieces of k
// gonum's blocking cuts (blockedGemm).
func dotsFit(m, n, k int) bool {
	return m >= 8 && (k <= gemmBlock || blockedGemm(m, n, k, false))
}

// sgemmDots adds alpha·A·Bᵀ into C as gonum's sgemmSerialNotTrans adds it:
// each element of C gets alpha·DotUnitary(row i of A, row j of B) for each
// piece of k gonum's blocking cuts, in order, each rounded as gonum
// rounds it; sdot8 computes 8 rows' dot products at once. The caller
// checked the arguments (gonum's Sgemm with alpha 0 and beta 1), scaled C
// by beta and checked dotsFit; alpha is not 0. Groups of 8 rows are
// shared out among the kernels' workers (SetWorkers).
func sgemmDots(m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	d := dots{m: m, n: n, k: k, piece: k, alpha: alpha, a: a, lda: lda, b: b, ldb: ldb, c: c, ldc: ldc}
	if blockedGemm(m, n, k, false) {
		d.piece = gemmBlock
	}
	groups := (m + 7) / 8
	if workers() <= 1 {
		d.rows(0, groups) // no closure: a product allocates nothing
		return
	}
	parallel(groups, 8*n*k, d.rows)
}

// dots is one product of sgemmDots.
type dots struct {
	m, n, k, piece int
	alpha          float32
	a, b, c        []float32
	lda, ldb, ldc  int
}

// rows computes the groups of 8 rows [lo, hi): for each piece of k, the
// group's rows are packed (zeros past the last row) and multiplied by the
// rows of B, up to 64 at a time.
func (d dots) rows(lo, hi int) {
	var pack [8 * gemmBlock]float32
	var out [8 * gemmBlock]float32
	for g := lo; g < hi; g++ {
		i0 := 8 * g
		valid := min(8, d.m-i0)
		for l0 := 0; l0 < d.k; l0 += d.piece {
			n := min(d.piece, d.k-l0)
			for r := range 8 {
				if r >= valid {
					for l := range n {
						pack[8*l+r] = 0
					}
					continue
				}
				at := (i0+r)*d.lda + l0
				for l, v := range d.a[at : at+n] {
					pack[8*l+r] = v
				}
			}
			for j0 := 0; j0 < d.n; j0 += gemmBlock {
				cols := min(gemmBlock, d.n-j0)
				sdot8(&pack[0], &d.b[j0*d.ldb+l0], uintptr(4*d.ldb), cols, n, d.alpha, &d.c[i0*d.ldc+j0], uintptr(4*d.ldc), valid, &out[0])
			}
		}
	}
}
