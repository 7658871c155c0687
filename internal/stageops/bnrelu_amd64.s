//go:build !openblas

#include "textflag.h"

// CONSTANTS broadcasts k (at AX) — α, β, scale, bias, 1 — into Y1, Y2,
// Y3, Y4 and Y6, and 0 into Y5.
#define CONSTANTS \
	VBROADCASTSS 0(AX), Y1  \
	VBROADCASTSS 4(AX), Y2  \
	VBROADCASTSS 8(AX), Y3  \
	VBROADCASTSS 12(AX), Y4 \
	VBROADCASTSS 16(AX), Y6 \
	VXORPS       Y5, Y5, Y5

// MASK8 computes, for the 8 floats x at SI, x̂ = x·α + β into Y0, t =
// x̂·scale + bias into Y8 and mask(t) into Y7: 1 where t ≥ 0 (ordered: 0
// for NaN), else 0. Each operation's first source is the running value, as
// in the compiled scalar code.
#define MASK8 \
	VMOVUPS (SI), Y0          \
	VMULPS  Y1, Y0, Y0        \
	VADDPS  Y2, Y0, Y0        \
	VMULPS  Y3, Y0, Y8        \
	VADDPS  Y4, Y8, Y8        \
	VCMPPS  $0x1d, Y5, Y8, Y7 \
	VANDPS  Y6, Y7, Y7

// func bnReLU8(y, x *float32, n int, k *[5]float32)
//
// y[i] = t·mask(t), t = (x[i]·α + β)·scale + bias, for i < n, n a positive
// multiple of 8; k holds α, β, scale, bias and 1. Each product and sum is
// rounded alone (no fused multiply-add), with the operands in the order
// of bnChannel.forward's compiled scalar code (the first source is the
// running value: NaN payloads propagate the same); the mask is 1 where
// t ≥ 0 (ordered: 0 for NaN), else 0, as mask's.
TEXT ·bnReLU8(SB), NOSPLIT, $0-32
	MOVQ y+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ k+24(FP), AX
	CONSTANTS

loop:
	MASK8
	VMULPS  Y7, Y8, Y8 // t·mask
	VMOVUPS Y8, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     loop
	VZEROUPPER
	RET

// func bnReLUDy8(out, x, dy *float32, n int, k *[5]float32, then int)
//
// out[i] = mask(t)·dy[i], t as in bnReLU8, then (then 1) times scale or
// (then 2) times x̂ = x·α + β, for i < n, n a positive multiple of 8:
// bnChannel.upstream's Rectify case (then 1) and the terms that
// bnChannel.rowSum adds up (0: the bias's, 2: the scale's), in the scalar
// code's operand order.
TEXT ·bnReLUDy8(SB), NOSPLIT, $0-48
	MOVQ out+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ dy+16(FP), DX
	MOVQ n+24(FP), CX
	MOVQ k+32(FP), AX
	MOVQ then+40(FP), BX
	CONSTANTS

dloop:
	MASK8
	VMULPS  (DX), Y7, Y7      // mask·dy
	CMPQ    BX, $1
	JLT     dstore
	JGT     dxhat
	VMULPS  Y3, Y7, Y7        // ·scale
	JMP     dstore

dxhat:
	VMULPS Y0, Y7, Y7 // ·x̂

dstore:
	VMOVUPS Y7, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     dloop
	VZEROUPPER
	RET
