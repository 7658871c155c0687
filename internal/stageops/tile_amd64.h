// Macros the GEMM kernels' assembly shares (sgemm_amd64.s, fma_amd64.s,
// dot8_amd64.s).

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
