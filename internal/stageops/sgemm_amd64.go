//go:build !openblas

package stageops

import (
	"golang.org/x/sys/cpu"
	"gonum.org/v1/gonum/blas/gonum"
)

// sgemmTile4x16 adds a 4×16 tile of alpha·op(A)·B into C, in gonum's
// order and rounding (sgemm_amd64.s).
//
//go:noescape
func sgemmTile4x16(k int, alpha float32, a *float32, aRow, aStep uintptr, b *float32, ldb uintptr, c *float32, ldc uintptr)

// sgemmTile4x8 is sgemmTile4x16 over the columns of 8 whose lanes in
// cols are set (all ones; the first 1 to 8), in AVX's masked loads and
// stores: the lanes past a product's last column are not touched
// (sgemm_amd64.s).
//
//go:noescape
func sgemmTile4x8(k int, alpha float32, a *float32, aRow, aStep uintptr, b *float32, ldb uintptr, c *float32, ldc uintptr, cols *[8]int32)

// sgemmTile4x32 is sgemmTile4x16 over 32 columns, in AVX-512
// (sgemm_amd64.s).
//
//go:noescape
func sgemmTile4x32(k int, alpha float32, a *float32, aRow, aStep uintptr, b *float32, ldb uintptr, c *float32, ldc uintptr)

// sgemmTile4x16z and sgemmTile4x32z are sgemmTile4x16 and sgemmTile4x32
// on a tile of C that starts at zero (beta 0): they do not read C, and
// write what the others write into a cleared C (sgemm_amd64.s).
//
//go:noescape
func sgemmTile4x16z(k int, alpha float32, a *float32, aRow, aStep uintptr, b *float32, ldb uintptr, c *float32, ldc uintptr)

//go:noescape
func sgemmTile4x32z(k int, alpha float32, a *float32, aRow, aStep uintptr, b *float32, ldb uintptr, c *float32, ldc uintptr)

// tiledGemm says whether this CPU runs sgemmTile4x16 (AVX); wideTiles
// whether it runs sgemmTile4x32 (AVX-512) too. Tests switch them off to
// compare the paths.
var (
	tiledGemm = cpu.X86.HasAVX
	wideTiles = cpu.X86.HasAVX512F
)

// sgemmTiled adds alpha·op(A)·B into C for B not transposed (op(A) = A,
// or Aᵀ with aT): every element of C gets its products in increasing l,
// each alpha·a(i,l) rounded, a zero one skipped, each product rounded and
// added as gonum's sgemmSerialNotNot and sgemmSerialTransNot add them —
// the same bits as gonum, whatever the blocking (gonum cuts C into 64×64
// blocks and k into pieces of 64, which does not change any element's
// order). Tiles of 4 rows × 32 columns (AVX-512) or 16 run in
// sgemmTile4x32 and sgemmTile4x16, a whole k each, keeping the tile of C
// in registers; the columns left over run in sgemmTile4x8, 8 at a time
// and then the last 1 to 7, and the rows past a multiple of 4 in gonum's
// axpy.
// The caller checked the arguments (gonum's Sgemm with alpha 0 and beta
// 1) and scaled C by beta, or, with fresh, left C as it was for a beta of
// 0: the full tiles then start their sums from zero without reading C
// (the same bits as from a cleared C, one pass over C fewer), and the
// columns and rows past them are cleared here. alpha is not 0. Column
// tiles of 16 are shared out among the kernels' workers (SetWorkers).
func sgemmTiled(aT, fresh bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	rows, tiles := m&^3, n/16
	t := tiling{aT: aT, fresh: fresh, rows: rows, k: k, alpha: alpha, a: a, lda: lda, b: b, ldb: ldb, c: c, ldc: ldc}
	if fresh {
		for i := 0; i < m; i++ {
			from := 16 * tiles
			if i >= rows {
				from = 0
			}
			clear(c[i*ldc+from : i*ldc+n])
		}
	}
	switch {
	case rows == 0 || tiles == 0:
	case workers() <= 1:
		t.columns(0, tiles) // no closure: a product allocates nothing
	default:
		parallel(tiles, rows*k*16, t.columns)
	}
	for j := 16 * tiles; rows > 0 && j < n; j += 8 {
		t.narrow(j, min(8, n-j))
	}
	for i := rows; i < m; i++ {
		t.edge(i, n)
	}
}

// tiling is one product of sgemmTiled.
type tiling struct {
	aT, fresh     bool
	rows, k       int
	alpha         float32
	a, b, c       []float32
	lda, ldb, ldc int
}

// steps says where a tile kernel finds op(A)'s elements: a(r, l) of a
// tile is aRow·r + aStep·l bytes past its a(0, 0), and tile rows start
// rowStride elements apart in A.
func (t tiling) steps() (aRow, aStep uintptr, rowStride int) {
	const f = 4 // bytes of a float32
	if t.aT {
		return f, uintptr(t.lda * f), 1
	}
	return uintptr(t.lda * f), f, t.lda
}

// columns runs the tiles of the column tiles [lo, hi) of 16 columns,
// every row tile: two column tiles at a time where the CPU has AVX-512.
func (t tiling) columns(lo, hi int) {
	aRow, aStep, rowStride := t.steps()
	for j := lo; j < hi; {
		tile, width := sgemmTile4x16, 1
		switch wide := wideTiles && j+1 < hi; {
		case wide && t.fresh:
			tile, width = sgemmTile4x32z, 2
		case wide:
			tile, width = sgemmTile4x32, 2
		case t.fresh:
			tile = sgemmTile4x16z
		}
		for i := 0; i < t.rows; i += 4 {
			tile(t.k, t.alpha, &t.a[i*rowStride], aRow, aStep, &t.b[16*j], uintptr(t.ldb*4), &t.c[i*t.ldc+16*j], uintptr(t.ldc*4))
		}
		j += width
	}
}

// narrow runs the tiles of the cols (1 to 8) columns from j, every row
// tile.
func (t tiling) narrow(j, cols int) {
	var lanes [8]int32
	for c := range cols {
		lanes[c] = -1
	}
	aRow, aStep, rowStride := t.steps()
	for i := 0; i < t.rows; i += 4 {
		sgemmTile4x8(t.k, t.alpha, &t.a[i*rowStride], aRow, aStep, &t.b[j], uintptr(t.ldb*4), &t.c[i*t.ldc+j], uintptr(t.ldc*4), &lanes)
	}
}

// edge adds row i's products into all its n columns, l after l, with
// gonum's axpy, or the same arithmetic in Go for fewer than 16 columns:
// a row past the last tile of 4.
func (t tiling) edge(i, n int) {
	for l := 0; l < t.k; l++ {
		var v float32
		if t.aT {
			v = t.a[l*t.lda+i]
		} else {
			v = t.a[i*t.lda+l]
		}
		tmp := t.alpha * v
		if tmp == 0 {
			continue
		}
		b, c := t.b[l*t.ldb:l*t.ldb+n], t.c[i*t.ldc:i*t.ldc+n]
		if n >= 16 {
			gonum.Implementation{}.Saxpy(n, tmp, b, 1, c, 1)
			continue
		}
		for j := range c { // a few columns: a call of axpy each costs more
			c[j] = float32(tmp*b[j]) + c[j] // rounded apart, as axpy does: no fused multiply-add
		}
	}
}
