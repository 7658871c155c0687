//go:build !openblas

package stageops

import (
	"sync"

	"golang.org/x/sys/cpu"
)

// fmaTile4x16 sets C[r][0:16] ← alpha·Σ_l a(r, l)·B[l][0:16] + C[r][0:16]
// for the 4 rows r of a tile, the sum one fused multiply-add after another
// in increasing l from 0 (fma_amd64.s). a(r, l) is at a + r·aRow + l·aStep
// bytes, row l of B at b + l·ldb bytes, row r of C at c + r·ldc bytes.
//
//go:noescape
func fmaTile4x16(k int, alpha float32, a *float32, aRow, aStep uintptr, b *float32, ldb uintptr, c *float32, ldc uintptr)

// fmaTile4x8 is fmaTile4x16 over the columns of 8 whose lanes in cols are
// set (all ones; the first 1 to 8): the lanes past the last column are not
// touched (fma_amd64.s).
//
//go:noescape
func fmaTile4x8(k int, alpha float32, a *float32, aRow, aStep uintptr, b *float32, ldb uintptr, c *float32, ldc uintptr, cols *[8]int32)

// fmaTile4x32 is fmaTile4x16 over 32 columns, in AVX-512 (fma_amd64.s).
//
//go:noescape
func fmaTile4x32(k int, alpha float32, a *float32, aRow, aStep uintptr, b *float32, ldb uintptr, c *float32, ldc uintptr)

// fmaGemm says whether this CPU runs the fast mode's tiles (AVX2 and FMA3).
var fmaGemm = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// fastKernels reports whether this build and CPU run the fast mode.
func fastKernels() bool { return fmaGemm }

// sgemmFast adds alpha·op(A)·op(B) into C in the fast mode's one order:
// every element of C gets s = Σ_l op(A)(i, l)·op(B)(l, j), one fused
// multiply-add after another in increasing l from 0, then C(i, j) ←
// alpha·s + C(i, j) in one more. Nothing else decides an element's bits:
// not the number of workers (column tiles are shared out, each element is
// computed by one tile), not the tile (4×32, 4×16 and the masked 4×8 do
// the same per lane), not where a tile starts in memory, not the shape of
// the rest of the product. A row past the last tile of 4 runs in a tile
// whose four rows are that one row (aRow 0), on a copy of its C. op(B) =
// Bᵀ is first copied transposed, or the product computed transposed
// (sgemmFastTransposed), whichever copies less. The caller checked
// the arguments (gonum's Sgemm with alpha 0 and beta 1) and scaled C by
// beta; alpha is not 0 and m, n, k are positive.
func sgemmFast(aT, bT bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	if bT && n*k > m*(k+2*n) { // copying op(A) and C costs less than copying B
		sgemmFastTransposed(aT, m, n, k, alpha, a, lda, b, ldb, c, ldc)
		return
	}
	if bT {
		bt := transposed(b, n, k, ldb)
		defer transposePool.Put(bt)
		b, ldb = *bt, n
	}
	f := fmaTiling{aT: aT, m: m, k: k, alpha: alpha, a: a, lda: lda, b: b, ldb: ldb, c: c, ldc: ldc}
	blocks := (n + 15) / 16
	if workers() <= 1 {
		f.blocks(0, blocks, n) // no closure: a product allocates nothing but Bᵀ
		return
	}
	parallel(blocks, m*k*16, func(lo, hi int) { f.blocks(lo, hi, n) })
}

// sgemmFastTransposed is sgemmFast of op(A)·Bᵀ computed as its transpose
// B·op(A)ᵀ, into a transposed copy of C then copied back: for an op(A)
// of fewer rows than B (a dense layer's input gradient, where B is the
// weights), transposing op(A) and C costs less than transposing B. Each
// element gets the same fused multiply-adds in the same order (a·b and
// b·a are the same product), so the same bits.
func sgemmFastTransposed(aT bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	at, ldat := a, lda // op(A)ᵀ, k×m: A itself when op(A) = Aᵀ
	if !aT {
		t := transposed(a, m, k, lda)
		defer transposePool.Put(t)
		at, ldat = *t, m
	}
	ct := transposed(c, m, n, ldc)
	defer transposePool.Put(ct)
	sgemmFast(false, false, n, m, k, alpha, b, ldb, at, ldat, *ct, m)
	for i := range m {
		row := c[i*ldc : i*ldc+n]
		for j := range row {
			row[j] = (*ct)[j*m+i]
		}
	}
}

// transposed is the rows×cols matrix s (ld apart) transposed, cols×rows,
// in a buffer of transposePool that the caller puts back.
func transposed(s []float32, rows, cols, ld int) *[]float32 {
	buf := transposePool.Get().(*[]float32)
	if cap(*buf) < rows*cols {
		*buf = make([]float32, rows*cols)
	}
	*buf = (*buf)[:rows*cols]
	t := *buf
	for r0 := 0; r0 < rows; r0 += 16 { // 16 rows at a time: each row of the transpose written 16 floats at once
		r1 := min(r0+16, rows)
		for c := range cols {
			out := t[c*rows+r0 : c*rows+r1]
			for r := range out {
				out[r] = s[(r0+r)*ld+c]
			}
		}
	}
	return buf
}

// transposePool holds sgemmFast's transposed copies.
var transposePool = sync.Pool{New: func() any { return new([]float32) }}

// fmaTiling is one product of sgemmFast.
type fmaTiling struct {
	aT            bool
	m, k          int
	alpha         float32
	a, b, c       []float32
	lda, ldb, ldc int
}

// blocks computes the column blocks [lo, hi) of 16 columns (the last one
// ends at column n), every row: two blocks at a time in the 4×32 tile
// where the CPU has AVX-512, a block of fewer than 16 in masked tiles of 8.
func (f fmaTiling) blocks(lo, hi, n int) {
	const w = 4 // bytes of a float32
	aRow, aStep, rowStride := uintptr(f.lda*w), uintptr(w), f.lda
	if f.aT {
		aRow, aStep, rowStride = w, uintptr(f.lda*w), 1
	}
	for j := lo; j < hi; {
		col := 16 * j
		width := min(16, n-col)
		if wideTiles && j+1 < hi && n-col >= 32 {
			width = 32
		}
		var lanes [2][8]int32
		if width < 16 {
			for c := range width {
				lanes[c/8][c%8] = -1
			}
		}
		for i := 0; i < f.m; i += 4 {
			if i+4 <= f.m {
				f.tile(width, &f.a[i*rowStride], aRow, aStep, col, f.c[i*f.ldc+col:], uintptr(f.ldc*w), &lanes)
				continue
			}
			for r := i; r < f.m; r++ { // a row past the tiles of 4
				var rows [4 * 32]float32
				row := f.c[r*f.ldc+col : r*f.ldc+col+width]
				copy(rows[:], row)
				f.tile(width, &f.a[r*rowStride], 0, aStep, col, rows[:], 32*w, &lanes)
				copy(row, rows[:width])
			}
		}
		j += (width + 15) / 16
	}
}

// tile runs the tile of width columns (32, 16, or 1 to 15 in masked
// tiles of 8 whose lanes are set in lanes) from column col, four rows
// from a (aRow bytes apart; 0: one row four times) into C from c[0] (ldc
// bytes between its rows).
func (f fmaTiling) tile(width int, a *float32, aRow, aStep uintptr, col int, c []float32, ldc uintptr, lanes *[2][8]int32) {
	ldb := uintptr(f.ldb * 4)
	switch {
	case width == 32:
		fmaTile4x32(f.k, f.alpha, a, aRow, aStep, &f.b[col], ldb, &c[0], ldc)
	case width == 16:
		fmaTile4x16(f.k, f.alpha, a, aRow, aStep, &f.b[col], ldb, &c[0], ldc)
	default:
		fmaTile4x8(f.k, f.alpha, a, aRow, aStep, &f.b[col], ldb, &c[0], ldc, &lanes[0])
		if width > 8 {
			fmaTile4x8(f.k, f.alpha, a, aRow, aStep, &f.b[col+8], ldb, &c[8], ldc, &lanes[1])
		}
	}
}
