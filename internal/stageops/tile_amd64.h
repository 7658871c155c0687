// Macros the kernels' assembly shares (sgemm_amd64.s, fma_amd64.s,
// dot8_amd64.s, bnrelu_amd64.s).

// TILE_ARGS loads a tile kernel's arguments but alpha: k in CX, a in SI,
// aRow in R8, aStep in R9, b in DI, ldb in R10, c in DX, ldc in R11, and
// 3·aRow in R13 (the fourth row's a).
#define TILE_ARGS \
	MOVQ k+0(FP), CX       \
	MOVQ a+16(FP), SI      \
	MOVQ aRow+24(FP), R8   \
	MOVQ aStep+32(FP), R9  \
	MOVQ b+40(FP), DI      \
	MOVQ ldb+48(FP), R10   \
	MOVQ c+56(FP), DX      \
	MOVQ ldc+64(FP), R11   \
	LEAQ (R8)(R8*2), R13

// ZERO8 zeroes eight vector registers (accumulators).
#define ZERO8(R0, R1, R2, R3, R4, R5, R6, R7) \
	VXORPS R0, R0, R0 \
	VXORPS R1, R1, R1 \
	VXORPS R2, R2, R2 \
	VXORPS R3, R3, R3 \
	VXORPS R4, R4, R4 \
	VXORPS R5, R5, R5 \
	VXORPS R6, R6, R6 \
	VXORPS R7, R7, R7

// ROWS4(OP, S0, …, S7) applies OP(S0, S1) to the first row of a tile of C
// (at DX), OP(S2, S3) to the second and so on, R12 pointing at the row
// (ldc in R11 apart).
#define ROWS4(OP, S0, S1, S2, S3, S4, S5, S6, S7) \
	MOVQ DX, R12  \
	OP(S0, S1)    \
	ADDQ R11, R12 \
	OP(S2, S3)    \
	ADDQ R11, R12 \
	OP(S4, S5)    \
	ADDQ R11, R12 \
	OP(S6, S7)

// STEP4(LOADB, ROW, S0, …, S7) is one l of a tile of 4 rows: LOADB loads
// B's row l, ROW(a(r, l), Sr0, Sr1) adds row r's products into its sums,
// then a and b move on to l + 1 and CX counts down (its flags for JNE).
#define STEP4(LOADB, ROW, S0, S1, S2, S3, S4, S5, S6, S7) \
	LOADB                    \
	ROW((SI), S0, S1)        \
	ROW((SI)(R8*1), S2, S3)  \
	ROW((SI)(R8*2), S4, S5)  \
	ROW((SI)(R13*1), S6, S7) \
	ADDQ R9, SI              \
	ADDQ R10, DI             \
	DECQ CX

// LOADB16 and LOADB32 load 16 floats of B's row (at DI) into Y8, Y9, and
// 32 into Z8, Z9.
#define LOADB16 \
	VMOVUPS (DI), Y8   \
	VMOVUPS 32(DI), Y9

#define LOADB32 \
	VMOVUPS (DI), Z8   \
	VMOVUPS 64(DI), Z9

// LOAD16, STORE16, LOAD32 and STORE32 move 16 (32) floats of a row of C
// (at R12) to and from two Y (Z) registers.
#define LOAD16(S0, S1) \
	VMOVUPS (R12), S0   \
	VMOVUPS 32(R12), S1

#define STORE16(S0, S1) \
	VMOVUPS S0, (R12)   \
	VMOVUPS S1, 32(R12)

#define LOAD32(S0, S1) \
	VMOVUPS (R12), S0   \
	VMOVUPS 64(R12), S1

#define STORE32(S0, S1) \
	VMOVUPS S0, (R12)   \
	VMOVUPS S1, 64(R12)

// TRANSPOSE8 loads 8 rows of 8 floats, row r at SI + r·DX bytes (R8 =
// 3·DX, R9 = SI + 4·DX), and leaves column t — element t of every row,
// row r in lane r — in Y(t), using Y0–Y11 only.
#define TRANSPOSE8 \
	VMOVUPS    (SI), Y0           \
	VMOVUPS    (SI)(DX*1), Y1     \
	VMOVUPS    (SI)(DX*2), Y2     \
	VMOVUPS    (SI)(R8*1), Y3     \
	VMOVUPS    (R9), Y4           \
	VMOVUPS    (R9)(DX*1), Y5     \
	VMOVUPS    (R9)(DX*2), Y6     \
	VMOVUPS    (R9)(R8*1), Y7     \
	VUNPCKLPS  Y1, Y0, Y8         \
	VUNPCKHPS  Y1, Y0, Y9         \
	VUNPCKLPS  Y3, Y2, Y10        \
	VUNPCKHPS  Y3, Y2, Y11        \
	VUNPCKLPS  Y5, Y4, Y0         \
	VUNPCKHPS  Y5, Y4, Y1         \
	VUNPCKLPS  Y7, Y6, Y2         \
	VUNPCKHPS  Y7, Y6, Y3         \
	VSHUFPS    $0x44, Y10, Y8, Y4 \
	VSHUFPS    $0xEE, Y10, Y8, Y5 \
	VSHUFPS    $0x44, Y11, Y9, Y6 \
	VSHUFPS    $0xEE, Y11, Y9, Y7 \
	VSHUFPS    $0x44, Y2, Y0, Y8  \
	VSHUFPS    $0xEE, Y2, Y0, Y9  \
	VSHUFPS    $0x44, Y3, Y1, Y10 \
	VSHUFPS    $0xEE, Y3, Y1, Y11 \
	VPERM2F128 $0x20, Y8, Y4, Y0  \
	VPERM2F128 $0x20, Y9, Y5, Y1  \
	VPERM2F128 $0x20, Y10, Y6, Y2 \
	VPERM2F128 $0x20, Y11, Y7, Y3 \
	VPERM2F128 $0x31, Y8, Y4, Y4  \
	VPERM2F128 $0x31, Y9, Y5, Y5  \
	VPERM2F128 $0x31, Y10, Y6, Y6 \
	VPERM2F128 $0x31, Y11, Y7, Y7
