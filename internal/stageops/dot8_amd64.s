//go:build !openblas

#include "textflag.h"
#include "tile_amd64.h"

// MAC adds one l's products into ACC: a(r, l) for 8 rows r, packed at
// OFFA(SI), times b(l) at OFFB(DI), rounded, then added to ACC with ACC
// as the first operand — DotUnitary's MULPS of x by y, then ADDPS into its
// sum. Y8 and Y9 are scratch.
#define MAC(OFFA, OFFB, ACC) \
	VMOVUPS      OFFA(SI), Y8 \
	VBROADCASTSS OFFB(DI), Y9 \
	VMULPS       Y9, Y8, Y8   \
	VADDPS       Y8, ACC, ACC

// func sdot8(a, b *float32, ldb uintptr, n, k int, alpha float32, c *float32, rs, cs uintptr, rows int, out *float32)
//
// C[r][j] += alpha·DotUnitary(x_r, y_j) as gonum's sgemmSerialNotTrans
// adds it, for the first rows of 8 rows r and n rows j of B, where x_r's
// k elements are packed at a (element l of the 8 rows at a + 32·l bytes),
// y_j's start at b + j·ldb bytes and C[r][j] is at c + r·rs + j·cs bytes;
// out holds 8·n scratch floats. For each y_j the kernel cuts the product as
// DotUnitary does: the scalars before y_j is 16-byte aligned (at most k),
// then steps of 16, steps of 4 and scalars. Each lane of Y0–Y3
// (DotUnitary's SUM) and Y4–Y7 (its P_SUM) is one row's register lane:
// the same products, added into the same partial sums in the same order,
// and the partial sums added as its HADDPS adds them. Then, as gonum's
// compiled code does, the dot product times alpha, plus C's element, each
// with the first operand first (which NaN a sum of two keeps). With 8
// rows whose elements of C are consecutive (rs 4: C stored column by
// column, as a convolution's NCHW output is) each column's 8 sums are
// added to C and stored at once, and out is not used.
TEXT ·sdot8(SB), NOSPLIT, $8-88
	MOVQ         a+0(FP), R11
	MOVQ         b+8(FP), R12
	MOVQ         ldb+16(FP), R13
	MOVQ         n+24(FP), R14
	MOVQ         k+32(FP), BX
	VBROADCASTSS alpha+40(FP), Y10
	MOVQ         out+80(FP), R10
	MOVQ         $0, step-8(SP) // 0: the sums go to out, then to C below
	TESTQ        R14, R14
	JEQ          done
	CMPQ         rows+72(FP), $8
	JNE          row
	CMPQ         rs+56(FP), $4
	JNE          row
	MOVQ         c+48(FP), R10  // C column by column: each column's sums straight into C
	MOVQ         cs+64(FP), AX
	MOVQ         AX, step-8(SP)

row: // one row y_j of B
	MOVQ R11, SI
	MOVQ R12, DI

	// The schedule: CX scalars to align y_j, DX steps of 16, R8 of 4, R9 scalars.
	XORQ    CX, CX
	MOVQ    DI, AX
	ANDQ    $15, AX
	JEQ     aligned
	MOVQ    $16, CX
	SUBQ    AX, CX
	SHRQ    $2, CX
	CMPQ    CX, BX
	CMOVQGT BX, CX

aligned:
	MOVQ BX, DX
	SUBQ CX, DX
	MOVQ DX, R8
	MOVQ DX, R9
	SHRQ $4, DX
	ANDQ $15, R8
	SHRQ $2, R8
	ANDQ $3, R9

	ZERO8(Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7)

	TESTQ CX, CX
	JEQ   sixteens

trim: // DotUnitary's scalars before y is aligned: into SUM's lane 0
	MAC(0, 0, Y0)
	ADDQ $32, SI
	ADDQ $4, DI
	DECQ CX
	JNE  trim

sixteens:
	TESTQ DX, DX
	JEQ   fours

loop16: // SUM gets elements 0–3 and 8–11, P_SUM 4–7 and 12–15
	MAC(0, 0, Y0)
	MAC(32, 4, Y1)
	MAC(64, 8, Y2)
	MAC(96, 12, Y3)
	MAC(128, 16, Y4)
	MAC(160, 20, Y5)
	MAC(192, 24, Y6)
	MAC(224, 28, Y7)
	MAC(256, 32, Y0)
	MAC(288, 36, Y1)
	MAC(320, 40, Y2)
	MAC(352, 44, Y3)
	MAC(384, 48, Y4)
	MAC(416, 52, Y5)
	MAC(448, 56, Y6)
	MAC(480, 60, Y7)
	ADDQ $512, SI
	ADDQ $64, DI
	DECQ DX
	JNE  loop16

	VADDPS Y4, Y0, Y0 // SUM += P_SUM
	VADDPS Y5, Y1, Y1
	VADDPS Y6, Y2, Y2
	VADDPS Y7, Y3, Y3

fours:
	TESTQ R8, R8
	JEQ   ones

loop4:
	MAC(0, 0, Y0)
	MAC(32, 4, Y1)
	MAC(64, 8, Y2)
	MAC(96, 12, Y3)
	ADDQ $128, SI
	ADDQ $16, DI
	DECQ R8
	JNE  loop4

ones:
	TESTQ R9, R9
	JEQ   sum

loop1:
	MAC(0, 0, Y0)
	ADDQ $32, SI
	ADDQ $4, DI
	DECQ R9
	JNE  loop1

sum: // HADDPS twice: (SUM[0] + SUM[1]) + (SUM[2] + SUM[3]); times alpha
	VADDPS  Y1, Y0, Y0
	VADDPS  Y3, Y2, Y2
	VADDPS  Y2, Y0, Y0
	VMULPS  Y10, Y0, Y0
	MOVQ    step-8(SP), AX
	TESTQ   AX, AX
	JEQ     toout
	VADDPS  (R10), Y0, Y0 // C[r][j] = sum + C[r][j], 8 rows at once
	VMOVUPS Y0, (R10)
	ADDQ    AX, R10
	JMP     next

toout:
	VMOVUPS Y0, (R10)
	ADDQ    $32, R10

next:
	ADDQ R13, R12
	DECQ R14
	JNE  row

	CMPQ step-8(SP), $0
	JNE  done

	// C[r][j] = out[8·j+r] + C[r][j]
	MOVQ c+48(FP), DI
	MOVQ rs+56(FP), R13
	MOVQ cs+64(FP), BX
	MOVQ rows+72(FP), CX
	MOVQ out+80(FP), SI

crow:
	TESTQ CX, CX
	JEQ   done
	MOVQ  n+24(FP), DX
	MOVQ  SI, R8
	MOVQ  DI, R9

ccol:
	VMOVSS (R8), X0
	VADDSS (R9), X0, X0
	VMOVSS X0, (R9)
	ADDQ   $32, R8
	ADDQ   BX, R9
	DECQ   DX
	JNE    ccol

	ADDQ $4, SI
	ADDQ R13, DI
	DECQ CX
	JMP  crow

done:
	VZEROUPPER
	RET

// func pack8(dst, src *float32, lda uintptr, n int)
//
// dst[8·l + r] = src[r·lda/4 + l] for the 8 rows r and the first n&^7
// columns l: 8 rows of A packed for sdot8, 8 columns at a time by an 8×8
// transpose in registers (TRANSPOSE8).
TEXT ·pack8(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ lda+16(FP), DX
	MOVQ n+24(FP), CX
	SHRQ $3, CX
	JEQ  packed
	LEAQ (DX)(DX*2), R8 // 3·lda
	LEAQ (SI)(DX*4), R9 // row 4

block:
	TRANSPOSE8
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	VMOVUPS Y4, 128(DI)
	VMOVUPS Y5, 160(DI)
	VMOVUPS Y6, 192(DI)
	VMOVUPS Y7, 224(DI)
	ADDQ    $32, SI
	ADDQ    $32, R9
	ADDQ    $256, DI
	DECQ    CX
	JNE     block

packed:
	VZEROUPPER
	RET
