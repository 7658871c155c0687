//go:build !openblas

#include "textflag.h"
#include "tile_amd64.h"

// The fast mode's tiles (fma_amd64.go): each element of a tile of C gets
// s = a(r, 0)·b(0, j) + … + a(r, k−1)·b(k−1, j), one fused multiply-add
// after another in increasing l starting from 0, then C ← alpha·s + C in
// one more fused multiply-add. Every lane computes alone, so the result
// does not depend on the tile (AVX2 or AVX-512), on where the tile
// starts, or on which goroutine runs it.

// FROW16 adds a(r, l) (read at A) times B's row l (Y8, Y9) into the
// row's sums S0 and S1. Y10 is scratch.
#define FROW16(A, S0, S1) \
	VBROADCASTSS A, Y10           \
	VFMADD231PS  Y10, Y8, S0      \
	VFMADD231PS  Y10, Y9, S1

// FOUT16 adds alpha (Y14) times the sums S0, S1 into the 16 floats of C
// at R12. Y10 and Y11 are scratch.
#define FOUT16(S0, S1) \
	VMOVUPS     (R12), Y10      \
	VMOVUPS     32(R12), Y11    \
	VFMADD231PS Y14, S0, Y10    \
	VFMADD231PS Y14, S1, Y11    \
	VMOVUPS     Y10, (R12)      \
	VMOVUPS     Y11, 32(R12)

// func fmaTile4x16(k int, alpha float32, a *float32, aRow, aStep uintptr, b *float32, ldb uintptr, c *float32, ldc uintptr)
//
// C[r][0:16] ← alpha·Σ_l a(r, l)·B[l][0:16] + C[r][0:16] for r = 0 … 3,
// in the order above, where a(r, l) is at a + r·aRow + l·aStep bytes, row
// l of B at b + l·ldb bytes and row r of C at c + r·ldc bytes.
TEXT ·fmaTile4x16(SB), NOSPLIT, $0-72
	TILE_ARGS
	VBROADCASTSS alpha+8(FP), Y14
	ZERO8(Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7)

	TESTQ CX, CX
	JEQ   fstore16

floop16:
	STEP4(LOADB16, FROW16, Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7)
	JNE floop16

fstore16:
	ROWS4(FOUT16, Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7)
	VZEROUPPER
	RET

// FROW8 is FROW16 for a row of a 4×8 tile: B's row l in Y8.
#define FROW8(A, S0) \
	VBROADCASTSS A, Y10      \
	VFMADD231PS  Y10, Y8, S0

// FOUT8 is FOUT16 for the lanes of 8 that Y13 sets.
#define FOUT8(S0) \
	VMASKMOVPS  (R12), Y13, Y10 \
	VFMADD231PS Y14, S0, Y10    \
	VMASKMOVPS  Y10, Y13, (R12)

// func fmaTile4x8(k int, alpha float32, a *float32, aRow, aStep uintptr, b *float32, ldb uintptr, c *float32, ldc uintptr, cols *[8]int32)
//
// fmaTile4x16's sums over a tile of 4 rows × 8 columns, of which only the
// lanes cols sets (all ones) are read from B and C and written to C: the
// last columns of a product, up to 8. The other lanes sum zeros and are
// dropped.
TEXT ·fmaTile4x8(SB), NOSPLIT, $0-80
	TILE_ARGS
	VBROADCASTSS alpha+8(FP), Y14
	MOVQ         cols+72(FP), R12
	VMOVDQU      (R12), Y13
	VXORPS       Y0, Y0, Y0
	VXORPS       Y1, Y1, Y1
	VXORPS       Y2, Y2, Y2
	VXORPS       Y3, Y3, Y3

	TESTQ CX, CX
	JEQ   fstore8

floop8:
	VMASKMOVPS (DI), Y13, Y8
	FROW8((SI), Y0)
	FROW8((SI)(R8*1), Y1)
	FROW8((SI)(R8*2), Y2)
	FROW8((SI)(R13*1), Y3)
	ADDQ R9, SI
	ADDQ R10, DI
	DECQ CX
	JNE  floop8

fstore8:
	MOVQ DX, R12
	FOUT8(Y0)
	ADDQ R11, R12
	FOUT8(Y1)
	ADDQ R11, R12
	FOUT8(Y2)
	ADDQ R11, R12
	FOUT8(Y3)
	VZEROUPPER
	RET

// FROW32 is FROW16 for a row of a 4×32 tile in AVX-512: B's row l in Z8,
// Z9.
#define FROW32(A, S0, S1) \
	VBROADCASTSS A, Z10      \
	VFMADD231PS  Z10, Z8, S0 \
	VFMADD231PS  Z10, Z9, S1

// FOUT32 is FOUT16 for 32 floats (alpha in Z14).
#define FOUT32(S0, S1) \
	VMOVUPS     (R12), Z10   \
	VMOVUPS     64(R12), Z11 \
	VFMADD231PS Z14, S0, Z10 \
	VFMADD231PS Z14, S1, Z11 \
	VMOVUPS     Z10, (R12)   \
	VMOVUPS     Z11, 64(R12)

// func fmaTile4x32(k int, alpha float32, a *float32, aRow, aStep uintptr, b *float32, ldb uintptr, c *float32, ldc uintptr)
//
// fmaTile4x16's sums over 32 columns, in AVX-512: the same fused
// multiply-adds in the same order, lane by lane.
TEXT ·fmaTile4x32(SB), NOSPLIT, $0-72
	TILE_ARGS
	VBROADCASTSS alpha+8(FP), Z14
	ZERO8(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)

	TESTQ CX, CX
	JEQ   fstore32

floop32:
	STEP4(LOADB32, FROW32, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)
	JNE floop32

fstore32:
	ROWS4(FOUT32, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)
	VZEROUPPER
	RET
