#include "textflag.h"

// func orExponents32(d []float32) uint32
//
// The OR over d (a multiple of 8 long) of each element's exponent field
// plus the exponent's lowest bit, as finite32 computes it, 8 lanes at a
// time (AVX2).
TEXT ·orExponents32(SB), NOSPLIT, $0-28
	MOVQ d_base+0(FP), SI
	MOVQ d_len+8(FP), CX
	MOVL $0x7f800000, AX
	VMOVD AX, X1
	VPBROADCASTD X1, Y1
	MOVL $0x00800000, AX
	VMOVD AX, X2
	VPBROADCASTD X2, Y2
	VPXOR Y0, Y0, Y0
	VPXOR Y4, Y4, Y4
	SHRQ $3, CX
	JZ reduce

loop:
	VPAND (SI), Y1, Y3
	VPADDD Y2, Y3, Y3
	VPOR Y3, Y0, Y0
	ADDQ $32, SI
	DECQ CX
	JNZ loop

reduce:
	VEXTRACTI128 $1, Y0, X3
	VPOR X3, X0, X0
	VPSHUFD $0x4e, X0, X3
	VPOR X3, X0, X0
	VPSHUFD $0xb1, X0, X3
	VPOR X3, X0, X0
	VMOVD X0, AX
	VZEROUPPER
	MOVL AX, ret+24(FP)
	RET

// func addF32(d, x []float32)
//
// d[i] += x[i] for the first len(d) &^ 7 elements, 8 lanes at a time
// (AVX): each sum rounded alone, as Go's scalar loop rounds it, with d the
// first operand.
TEXT ·addF32(SB), NOSPLIT, $0-48
	MOVQ d_base+0(FP), DI
	MOVQ d_len+8(FP), CX
	MOVQ x_base+24(FP), SI
	SHRQ $3, CX
	JZ addDone

addLoop:
	VMOVUPS (DI), Y0
	VADDPS (SI), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	DECQ CX
	JNZ addLoop

addDone:
	VZEROUPPER
	RET
