//go:build !openblas

#include "textflag.h"
#include "tile_amd64.h"

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

// DOT(T, G) adds column T's x_t·g_t − mean·g_t into the dot products
// (Y13), g_t at G: each product, the difference and the sum rounded
// apart, each operation's first source the scalar code's.
#define DOT(T, G) \
	VMULPS G, T, Y8    \
	VMULPS G, Y14, Y9  \
	VSUBPS Y9, Y8, Y8  \
	VADDPS Y8, Y13, Y13

// func bnGradSums8(gp, x *float32, ld uintptr, n int, mean *[8]float32, acc *[16]float32, cols *[64]float32)
//
// For 8 channels, channel r's plane of g at g + r·ld bytes and of x at
// x + r·ld, adds its first n elements (n a positive multiple of 8), in
// order, into acc[r] (sum += g[i]) and acc[8+r] (dotp += x[i]·g[i] −
// mean[r]·g[i]): bnGradKernel's two sums of eight channels side by side,
// one channel a lane, each lane's additions in the scalar loop's order.
// cols is scratch for a block of g transposed.
TEXT ·bnGradSums8(SB), NOSPLIT, $0-56
	MOVQ    gp+0(FP), R10
	MOVQ    x+8(FP), R11
	MOVQ    ld+16(FP), DX
	MOVQ    n+24(FP), CX
	MOVQ    mean+32(FP), AX
	VMOVUPS (AX), Y14
	MOVQ    acc+40(FP), AX
	VMOVUPS (AX), Y12
	VMOVUPS 32(AX), Y13
	MOVQ    cols+48(FP), BX
	LEAQ    (DX)(DX*2), R8
	SHRQ    $3, CX
	JEQ     sums8

block8:
	MOVQ R10, SI
	LEAQ (R10)(DX*4), R9
	TRANSPOSE8
	VMOVUPS Y0, (BX)
	VMOVUPS Y1, 32(BX)
	VMOVUPS Y2, 64(BX)
	VMOVUPS Y3, 96(BX)
	VMOVUPS Y4, 128(BX)
	VMOVUPS Y5, 160(BX)
	VMOVUPS Y6, 192(BX)
	VMOVUPS Y7, 224(BX)
	VADDPS  Y0, Y12, Y12 // sum += g_t, t in order
	VADDPS  Y1, Y12, Y12
	VADDPS  Y2, Y12, Y12
	VADDPS  Y3, Y12, Y12
	VADDPS  Y4, Y12, Y12
	VADDPS  Y5, Y12, Y12
	VADDPS  Y6, Y12, Y12
	VADDPS  Y7, Y12, Y12
	MOVQ    R11, SI
	LEAQ    (R11)(DX*4), R9
	TRANSPOSE8
	DOT(Y0, (BX))
	DOT(Y1, 32(BX))
	DOT(Y2, 64(BX))
	DOT(Y3, 96(BX))
	DOT(Y4, 128(BX))
	DOT(Y5, 160(BX))
	DOT(Y6, 192(BX))
	DOT(Y7, 224(BX))
	ADDQ    $32, R10
	ADDQ    $32, R11
	DECQ    CX
	JNE     block8

sums8:
	MOVQ    acc+40(FP), AX
	VMOVUPS Y12, (AX)
	VMOVUPS Y13, 32(AX)
	VZEROUPPER
	RET

// func bnGradFinish8(gp, x *float32, n int, k *[4]float32)
//
// g[i] = (g[i] − gradMean − (x[i] − mean)·kx)·invstd for i < n, n a
// positive multiple of 8, k = gradMean, mean, kx, invstd: bnGradKernel's
// gradient of x in training mode, eight at a time, each operation rounded
// apart with the scalar code's first source.
TEXT ·bnGradFinish8(SB), NOSPLIT, $0-32
	MOVQ         gp+0(FP), SI
	MOVQ         x+8(FP), DI
	MOVQ         n+16(FP), CX
	MOVQ         k+24(FP), AX
	VBROADCASTSS 0(AX), Y4
	VBROADCASTSS 4(AX), Y5
	VBROADCASTSS 8(AX), Y6
	VBROADCASTSS 12(AX), Y7
	SHRQ         $3, CX
	JEQ          finished

finish8:
	VMOVUPS (SI), Y0
	VSUBPS  Y4, Y0, Y0 // g − gradMean
	VMOVUPS (DI), Y1
	VSUBPS  Y5, Y1, Y1 // x − mean
	VMULPS  Y6, Y1, Y1 // (x − mean)·kx
	VSUBPS  Y1, Y0, Y0
	VMULPS  Y7, Y0, Y0 // ·invstd
	VMOVUPS Y0, (SI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	DECQ    CX
	JNE     finish8

finished:
	VZEROUPPER
	RET
