//go:build !openblas

#include "textflag.h"

// func bnReLU8(y, x *float32, n int, k *[5]float32)
//
// y[i] = t·mask(t), t = (x[i]·α + β)·scale + bias, for i < n, n a positive
// multiple of 8; k holds α, β, scale, bias and 1. Each product and sum is
// rounded alone (no fused multiply-add), with the operands in the order
// of bnChannel.forward's compiled scalar code (the first source is the
// running value: NaN payloads propagate the same); the mask is 1 where
// t ≥ 0 (ordered: 0 for NaN), else 0, as mask's.
TEXT ·bnReLU8(SB), NOSPLIT, $0-32
	MOVQ         y+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         n+16(FP), CX
	MOVQ         k+24(FP), AX
	VBROADCASTSS 0(AX), Y1
	VBROADCASTSS 4(AX), Y2
	VBROADCASTSS 8(AX), Y3
	VBROADCASTSS 12(AX), Y4
	VBROADCASTSS 16(AX), Y6
	VXORPS       Y5, Y5, Y5

loop:
	VMOVUPS (SI), Y0
	VMULPS  Y1, Y0, Y0     // x·α
	VADDPS  Y2, Y0, Y0     // + β: x̂
	VMULPS  Y3, Y0, Y0     // x̂·scale
	VADDPS  Y4, Y0, Y0     // + bias: t
	VCMPPS  $0x1d, Y5, Y0, Y7 // t ≥ 0, ordered
	VANDPS  Y6, Y7, Y7     // mask: 1 or 0
	VMULPS  Y7, Y0, Y0     // t·mask
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     loop
	VZEROUPPER
	RET
