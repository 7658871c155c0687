//go:build !openblas

#include "textflag.h"

// ARGSTEP makes lane by lane the value V at index I the best (Y6) and its
// index (Y7) where V > best (ordered: never a NaN), as higher does. Y8 is
// scratch.
#define ARGSTEP(V, I) \
	VCMPPS    $0x1e, Y6, V, Y8 \
	VBLENDVPS Y8, V, Y6, Y6    \
	VBLENDVPS Y8, I, Y7, Y7

// SPLIT splits the 16 floats in Y0 and Y1 into their even (E) and odd
// (O) ones, in order.
#define SPLIT(E, O) \
	VSHUFPS $0x88, Y1, Y0, E \
	VPERMPD $0xd8, E, E      \
	VSHUFPS $0xdd, Y1, Y0, O \
	VPERMPD $0xd8, O, O

// PAIRS splits the 16 floats at R into their even (E) and odd (O) ones.
#define PAIRS(R, E, O) \
	VMOVUPS (R), Y0  \
	VMOVUPS 32(R), Y1 \
	SPLIT(E, O)

// MPAIRS is PAIRS reading only the floats whose lanes are set in the
// masks at R8 and 32(R8) (the others read as 0). Y13 is scratch.
#define MPAIRS(R, E, O) \
	VMOVUPS    (R8), Y13       \
	VMASKMOVPS (R), Y13, Y0    \
	VMOVUPS    32(R8), Y13     \
	VMASKMOVPS 32(R), Y13, Y1  \
	SPLIT(E, O)

// WINDOWS computes into Y7 the indices of eight windows whose values are
// in Y2, Y3 (top row) and Y4, Y5 (bottom row) and whose top left indices
// are Y14.
#define WINDOWS \
	VMOVAPS Y10, Y6       \
	VMOVAPS Y9, Y7        \
	ARGSTEP(Y2, Y14)      \
	VADDPS  Y11, Y14, Y15 \
	ARGSTEP(Y3, Y15)      \
	VADDPS  Y12, Y14, Y15 \
	ARGSTEP(Y4, Y15)      \
	VADDPS  Y11, Y15, Y15 \
	ARGSTEP(Y5, Y15)

// func argmax2x2x8(out, r0, r1 *float32, n int, k *[12]float32, tail *[24]int32)
//
// For i < n: out[i] is the index in the plane of the first largest (>,
// from k[2], the lowest value) of r0[2i], r0[2i+1], r1[2i], r1[2i+1], in
// that order, whose indices are k[0] + 2i, +1, +k[1] (the image's width),
// +k[1]+1; −1 if none is larger. k[3] is 1, k[4:12] are 0, 2, …, 14.
// argmax2x2's comparisons, eight windows at a time; the last n mod 8
// windows read and write only the lanes set in tail: the 16 floats of the
// two rows' last pairs (tail[0:16]) and the windows (tail[16:24]).
TEXT ·argmax2x2x8(SB), NOSPLIT, $0-48
	MOVQ         out+0(FP), DI
	MOVQ         r0+8(FP), SI
	MOVQ         r1+16(FP), DX
	MOVQ         n+24(FP), CX
	MOVQ         k+32(FP), AX
	MOVQ         tail+40(FP), R8
	VBROADCASTSS 0(AX), Y14
	VADDPS       16(AX), Y14, Y14 // the first 8 windows' top left indices
	VBROADCASTSS 4(AX), Y12       // w
	VBROADCASTSS 8(AX), Y10       // lowest
	VBROADCASTSS 12(AX), Y11      // 1
	VXORPS       Y9, Y9, Y9
	VSUBPS       Y11, Y9, Y9      // −1
	MOVQ         CX, BX
	ANDQ         $7, BX           // windows past the last 8
	SHRQ         $3, CX           // groups of 8
	JEQ          atail

	VADDPS       Y11, Y11, Y13
	VADDPS       Y13, Y13, Y13
	VADDPS       Y13, Y13, Y13
	VADDPS       Y13, Y13, Y13    // 16

aloop:
	PAIRS(SI, Y2, Y3)
	PAIRS(DX, Y4, Y5)
	WINDOWS
	VMOVUPS Y7, (DI)
	VADDPS  Y13, Y14, Y14
	ADDQ    $64, SI
	ADDQ    $64, DX
	ADDQ    $32, DI
	DECQ    CX
	JNZ     aloop

atail:
	TESTQ      BX, BX
	JEQ        adone
	MPAIRS(SI, Y2, Y3)
	MPAIRS(DX, Y4, Y5)
	WINDOWS
	VMOVUPS    64(R8), Y13
	VMASKMOVPS Y7, Y13, (DI)

adone:
	VZEROUPPER
	RET
