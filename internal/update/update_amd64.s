#include "textflag.h"

// func momentum8(w, grad, v *float32, n int, beta, negEta float32)
//
// c = v·β + grad·negEta, v = c, w = w + c, 8 lanes at a time (AVX): each
// product and sum rounded alone, as Momentum's scalar loop rounds them.
TEXT ·momentum8(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), DI
	MOVQ grad+8(FP), SI
	MOVQ v+16(FP), DX
	MOVQ n+24(FP), CX
	VBROADCASTSS beta+32(FP), Y0
	VBROADCASTSS negEta+36(FP), Y1
	SHRQ $3, CX

momentumLoop:
	VMULPS (DX), Y0, Y2
	VMULPS (SI), Y1, Y3
	VADDPS Y3, Y2, Y2
	VMOVUPS Y2, (DX)
	VADDPS (DI), Y2, Y4
	VMOVUPS Y4, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	ADDQ $32, DX
	DECQ CX
	JNZ momentumLoop
	VZEROUPPER
	RET

// func velocity8(d, w, old *float32, n int, gamma, rest float32)
//
// d = γ·d + rest·(w − old), 8 lanes at a time (AVX), each operation
// rounded alone as Velocity's scalar loop rounds it.
TEXT ·velocity8(SB), NOSPLIT, $0-40
	MOVQ d+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ old+16(FP), DX
	MOVQ n+24(FP), CX
	VBROADCASTSS gamma+32(FP), Y0
	VBROADCASTSS rest+36(FP), Y1
	SHRQ $3, CX

velocityLoop:
	VMULPS (DI), Y0, Y2
	VMOVUPS (SI), Y3
	VSUBPS (DX), Y3, Y3
	VMULPS Y3, Y1, Y3
	VADDPS Y3, Y2, Y2
	VMOVUPS Y2, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	ADDQ $32, DX
	DECQ CX
	JNZ velocityLoop
	VZEROUPPER
	RET

// func shift8(dst, w, d *float32, n int, k float32)
//
// dst = w − k·d, 8 lanes at a time (AVX), each operation rounded alone as
// Shift's scalar loop rounds it.
TEXT ·shift8(SB), NOSPLIT, $0-36
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ d+16(FP), DX
	MOVQ n+24(FP), CX
	VBROADCASTSS k+32(FP), Y0
	SHRQ $3, CX

shiftLoop:
	VMULPS (DX), Y0, Y1
	VMOVUPS (SI), Y2
	VSUBPS Y1, Y2, Y2
	VMOVUPS Y2, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	ADDQ $32, DX
	DECQ CX
	JNZ shiftLoop
	VZEROUPPER
	RET
