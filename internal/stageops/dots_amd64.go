//go:build !openblas

package stageops

// sdot8 adds alpha·DotUnitary(row r of A, row j of B) into C[r][j] as
// gonum's sgemmSerialNotTrans adds it, for rows ≤ 8 rows r of A and n
// rows j of B, each product k long (dot8_amd64.s). Row r is packed at a
// (element l of the 8 rows at a[8·l : 8·l+8]); row j of B starts at b
// plus j·ldb bytes, and C[r][j] is at c plus r·rs + j·cs bytes (a
// row-major C: rs = 4·ldc, cs = 4; column by column, rs = 4). out is
// scratch of 8·n floats.
//
//go:noescape
func sdot8(a, b *float32, ldb uintptr, n, k int, alpha float32, c *float32, rs, cs uintptr, rows int, out *float32)

// pack8 packs the first n&^7 columns of 8 rows of A, row r at src plus
// r·lda bytes, for sdot8: dst[8·l+r] = A[r][l] (dot8_amd64.s).
//
//go:noescape
func pack8(dst, src *float32, lda uintptr, n int)

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
		d.group(&pack, &out, i0, min(8, d.m-i0), i0*d.ldc, d.ldc, 1)
	}
}

// group computes the valid ≤ 8 rows of C from row i0 on: for each piece of
// k, the rows of A are packed (packRows) and multiplied by the rows of B,
// up to 64 at a time (sdot8). C[i0+r][j] is d.c[at + r·rs + j·cs].
func (d dots) group(pack, out *[8 * gemmBlock]float32, i0, valid, at, rs, cs int) {
	for l0 := 0; l0 < d.k; l0 += d.piece {
		n := min(d.piece, d.k-l0)
		packRows(pack, d.a, i0*d.lda+l0, d.lda, valid, n)
		for j0 := 0; j0 < d.n; j0 += gemmBlock {
			cols := min(gemmBlock, d.n-j0)
			sdot8(&pack[0], &d.b[j0*d.ldb+l0], uintptr(4*d.ldb), cols, n, d.alpha, &d.c[at+j0*cs], uintptr(4*rs), uintptr(4*cs), valid, &out[0])
		}
	}
}

// packRows packs n columns of the valid ≤ 8 rows of a that start at
// a[at], a[at+lda], …, for sdot8: pack[8·l+r] is row r's column l, and 0
// for the rows past valid. A whole group's columns go 8 at a time
// (pack8).
func packRows(pack *[8 * gemmBlock]float32, a []float32, at, lda, valid, n int) {
	l0 := 0
	if valid == 8 && n >= 8 {
		_ = a[at+7*lda+n-1] // the last element pack8 reads is a's
		l0 = n &^ 7
		pack8(&pack[0], &a[at], uintptr(4*lda), l0)
	}
	for r := range 8 {
		if r >= valid {
			for l := range n {
				pack[8*l+r] = 0
			}
			continue
		}
		row := a[at+r*lda+l0 : at+r*lda+n]
		for l, v := range row {
			pack[8*(l0+l)+r] = v
		}
	}
}

// convOutDots computes a convolution's output from its patches p (imgs·hw
// rows of k) and filter f (cout rows of k) as sgemmDots computes P·Fᵀ —
// each element the same sums, bit for bit — but stores it as NCHW, out[img,
// c, pixel], where convKernel's gonum call writes NHWC and copies each
// image's block transposed: a group of 8 pixels of one image is one
// column of 8 consecutive floats in each channel's plane, which sdot8 adds
// to out and stores at once. Groups are taken image by image (the last of
// an image may have fewer than 8 pixels); k is cut into the pieces gonum
// cuts the whole product into. It reports false, computing nothing, when
// a slice is too short for the shapes.
func convOutDots(imgs, hw, cout, k int, p, f, out []float32) bool {
	m := imgs * hw
	if len(p) < m*k || len(f) < cout*k || len(out) < imgs*cout*hw {
		return false
	}
	d := convDots{dots: dots{m: m, n: cout, k: k, piece: k, alpha: 1, a: p, lda: k, b: f, ldb: k, c: out}, hw: hw, groups: (hw + 7) / 8}
	if blockedGemm(m, cout, k, false) {
		d.piece = gemmBlock
	}
	clear(out[:imgs*cout*hw]) // gonum's C ← 0·C, which the sums are added to
	total := imgs * d.groups
	if workers() <= 1 {
		d.rows(0, total) // no closure: a product allocates nothing
	} else {
		parallel(total, 8*cout*k, d.rows)
	}
	return true
}

// convDots is one convolution's output product of convOutDots.
type convDots struct {
	dots
	hw, groups int // pixels of an image, and its groups of 8
}

// rows computes groups [lo, hi), group g being pixels 8·(g mod groups) on
// of image g / groups.
func (d convDots) rows(lo, hi int) {
	var pack [8 * gemmBlock]float32
	var out [8 * gemmBlock]float32
	for g := lo; g < hi; g++ {
		img, p0 := g/d.groups, 8*(g%d.groups)
		d.group(&pack, &out, img*d.hw+p0, min(8, d.hw-p0), img*d.n*d.hw+p0, 1, d.hw)
	}
}
