//go:build !openblas

#include "textflag.h"
#include "tile_amd64.h"

// SCALE reads a(r, l) at A and leaves alpha·a(r, l) (alpha in Y14) in
// every lane of Y10, and in Y11 a mask set where it is not zero (Y15
// holds zeros).
#define SCALE(A) \
	VBROADCASTSS A, Y10           \
	VMULPS       Y14, Y10, Y10    \
	VCMPPS       $4, Y15, Y10, Y11

// ADD8 adds the products of alpha·a(r, l) (Y10, SCALE) and 8 columns of
// B's row l (B), each rounded, into the row's accumulator C, unless the
// mask Y11 says alpha·a(r, l) is zero (the blend keeps the old sums). Y12
// is scratch.
#define ADD8(B, C) \
	VMULPS    Y10, B, Y12      \
	VADDPS    C, Y12, Y12      \
	VBLENDVPS Y11, Y12, C, C

// ROW16 adds one l's products into a row of a 4×16 tile: a(r, l), read at
// A, times B's row l (Y8, Y9) into the row's accumulators C0 and C1.
#define ROW16(A, C0, C1) \
	SCALE(A)     \
	ADD8(Y8, C0) \
	ADD8(Y9, C1)

// ROW8 is ROW16 for a row of a 4×8 tile: B's row l in Y8.
#define ROW8(A, C0) \
	SCALE(A) \
	ADD8(Y8, C0)

// ROW32 is ROW16 for a row of a 4×32 tile in AVX-512 (alpha in Z14, zeros
// in Z15, B's row in Z8, Z9): the mask register K, set where alpha·a(r, l)
// is not zero, merges the sums into C0 and C1. Z10, Z12 and Z13 are
// scratch.
#define ROW32(A, C0, C1, K) \
	VBROADCASTSS A, Z10         \
	VMULPS       Z14, Z10, Z10  \
	VCMPPS       $4, Z15, Z10, K \
	VMULPS       Z10, Z8, Z12   \
	VMULPS       Z10, Z9, Z13   \
	VADDPS       C0, Z12, K, C0 \
	VADDPS       C1, Z13, K, C1

// ROW32K is ROW32 with the mask in K1, for STEP4.
#define ROW32K(A, C0, C1) ROW32(A, C0, C1, K1)

// TILE(ALPHA, ZEROS, INIT, LOADB, ROW, STOREC, S0, …, S7, STORE, LOOP)
// is the body of a tile kernel: alpha in every lane of ALPHA, zeros in
// ZEROS, INIT puts the tile's starting sums in S0–S7 (C's, or zeros),
// then every l adds its products (LOADB, ROW: STEP4), then STOREC stores
// the sums; STORE and LOOP name its labels.
#define TILE(ALPHA, ZEROS, INIT, LOADB, ROW, STOREC, S0, S1, S2, S3, S4, S5, S6, S7, STORE, LOOP) \
	TILE_ARGS                                           \
	VBROADCASTSS alpha+8(FP), ALPHA                     \
	VXORPS       ZEROS, ZEROS, ZEROS                    \
	INIT                                                \
	TESTQ        CX, CX                                 \
	JEQ          STORE                                  \
LOOP:                                                   \
	STEP4(LOADB, ROW, S0, S1, S2, S3, S4, S5, S6, S7)   \
	JNE          LOOP                                   \
STORE:                                                  \
	ROWS4(STOREC, S0, S1, S2, S3, S4, S5, S6, S7)       \
	VZEROUPPER                                          \
	RET

// TILE16 and TILE32 are TILE for a 4×16 tile in AVX (sums in Y0–Y7) and
// a 4×32 tile in AVX-512 (sums in Z0–Z7).
#define TILE16(INIT, STORE, LOOP) TILE(Y14, Y15, INIT, LOADB16, ROW16, STORE16, Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, STORE, LOOP)
#define TILE32(INIT, STORE, LOOP) TILE(Z14, Z15, INIT, LOADB32, ROW32K, STORE32, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, STORE, LOOP)

// ZERO8Z zeroes eight AVX-512 registers (AVX512F's VPXORD).
#define ZERO8Z(R0, R1, R2, R3, R4, R5, R6, R7) \
	VPXORD R0, R0, R0 \
	VPXORD R1, R1, R1 \
	VPXORD R2, R2, R2 \
	VPXORD R3, R3, R3 \
	VPXORD R4, R4, R4 \
	VPXORD R5, R5, R5 \
	VPXORD R6, R6, R6 \
	VPXORD R7, R7, R7

// func sgemmTile4x16(k int, alpha float32, a *float32, aRow, aStep uintptr, b *float32, ldb uintptr, c *float32, ldc uintptr)
//
// C[r][0:16] += (alpha·a(r, l))·B[l][0:16] for l = 0 … k−1 in turn and
// r = 0 … 3, where a(r, l) is at a + r·aRow + l·aStep bytes, row l of B
// at b + l·ldb bytes and row r of C at c + r·ldc bytes; a product whose
// alpha·a(r, l) is zero is not added (gonum's sgemm skips it). Each
// product and each sum is rounded as gonum's AxpyUnitary rounds it
// (VMULPS, then VADDPS with the product as the first operand: no FMA).
TEXT ·sgemmTile4x16(SB), NOSPLIT, $0-72
	TILE16(ROWS4(LOAD16, Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7), store, loop)

// func sgemmTile4x16z(k int, alpha float32, a *float32, aRow, aStep uintptr, b *float32, ldb uintptr, c *float32, ldc uintptr)
//
// sgemmTile4x16 on a tile of C that starts at zero (gonum's beta 0): the
// sums start from +0 in registers, as they would from a cleared C, and C
// is only written.
TEXT ·sgemmTile4x16z(SB), NOSPLIT, $0-72
	TILE16(ZERO8(Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7), storez, loopz)

// func sgemmTile4x8(k int, alpha float32, a *float32, aRow, aStep uintptr, b *float32, ldb uintptr, c *float32, ldc uintptr, cols *[8]int32)
//
// sgemmTile4x16's sums over a tile of 4 rows × 8 columns, of which only
// the lanes cols sets (all ones) are read from B and C and written to C:
// the last columns of a product, up to 8. The other lanes add zeros and
// are dropped.
TEXT ·sgemmTile4x8(SB), NOSPLIT, $0-80
	TILE_ARGS
	VBROADCASTSS alpha+8(FP), Y14
	MOVQ         cols+72(FP), R12
	VMOVDQU      (R12), Y13
	VXORPS       Y15, Y15, Y15

	MOVQ       DX, R12
	VMASKMOVPS (R12), Y13, Y0
	ADDQ       R11, R12
	VMASKMOVPS (R12), Y13, Y1
	ADDQ       R11, R12
	VMASKMOVPS (R12), Y13, Y2
	ADDQ       R11, R12
	VMASKMOVPS (R12), Y13, Y3

	TESTQ CX, CX
	JEQ   store8

loop8:
	VMASKMOVPS (DI), Y13, Y8

	ROW8((SI), Y0)
	ROW8((SI)(R8*1), Y1)
	ROW8((SI)(R8*2), Y2)
	ROW8((SI)(R13*1), Y3)

	ADDQ R9, SI
	ADDQ R10, DI
	DECQ CX
	JNE  loop8

store8:
	MOVQ       DX, R12
	VMASKMOVPS Y0, Y13, (R12)
	ADDQ       R11, R12
	VMASKMOVPS Y1, Y13, (R12)
	ADDQ       R11, R12
	VMASKMOVPS Y2, Y13, (R12)
	ADDQ       R11, R12
	VMASKMOVPS Y3, Y13, (R12)
	VZEROUPPER
	RET

// func sgemmTile4x32(k int, alpha float32, a *float32, aRow, aStep uintptr, b *float32, ldb uintptr, c *float32, ldc uintptr)
//
// sgemmTile4x16's sums over a tile of 4 rows × 32 columns, in AVX-512:
// the same products and sums, in the same order, each rounded apart; a
// zero alpha·a(r, l) masks its row's additions (merge-masking keeps C's
// lanes as they were, which is skipping them).
TEXT ·sgemmTile4x32(SB), NOSPLIT, $0-72
	TILE32(ROWS4(LOAD32, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7), store512, loop512)

// func sgemmTile4x32z(k int, alpha float32, a *float32, aRow, aStep uintptr, b *float32, ldb uintptr, c *float32, ldc uintptr)
//
// sgemmTile4x32 on a tile of C that starts at zero, as sgemmTile4x16z.
TEXT ·sgemmTile4x32z(SB), NOSPLIT, $0-72
	TILE32(ZERO8Z(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7), store512z, loop512z)
