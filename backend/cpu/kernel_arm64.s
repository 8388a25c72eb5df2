#include "textflag.h"

// FADD4S(m, n, d) is FADD Vd.4S, Vn.4S, Vm.4S (d = n + m, four floats), which Go's arm64
// assembler does not spell; the instruction is written out as its encoding.
#define FADD4S(m, n, d) WORD $(0x4E20D400 | ((m)<<16) | ((n)<<5) | (d))

// func gemm12x8NEON(kc int, a *float32, rs, ks int, b *float32, bs int, c *float32, ldc int, accumulate int, bias *float32)
//
// One 12×8 block of C = A·B (+ C when accumulate != 0) (+ bias when bias != nil), held in
// twenty-four 4-float accumulators V0–V23, two per row (row r in V2r and V2r+1). Element
// (r, k) of A is at a + 4·(r·rs + k·ks), element (k, j) of B at b + 4·(k·bs + j), element
// (r, j) of C at c + 4·(r·ldc + j); strides are in floats. Each step loads 8 floats of B
// (V24, V25), broadcasts one float of each of the 12 rows of A (V26–V31 in turn) and issues 24
// fused multiply-adds; the sum over k runs in ascending order, then C and the bias are added.
// Each row of A has its own pointer (R6–R17), advanced by ks as it loads, so that no chain of
// address updates runs through a step.
TEXT ·gemm12x8NEON(SB), NOSPLIT, $0-80
	MOVD kc+0(FP), R0
	MOVD a+8(FP), R1
	MOVD rs+16(FP), R2
	LSL $2, R2, R2
	MOVD ks+24(FP), R3
	LSL $2, R3, R3
	MOVD b+32(FP), R4
	MOVD bs+40(FP), R5
	LSL $2, R5, R5
	MOVD R1, R6
	ADD R2, R6, R7
	ADD R2, R7, R8
	ADD R2, R8, R9
	ADD R2, R9, R10
	ADD R2, R10, R11
	ADD R2, R11, R12
	ADD R2, R12, R13
	ADD R2, R13, R14
	ADD R2, R14, R15
	ADD R2, R15, R16
	ADD R2, R16, R17
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	VEOR V2.B16, V2.B16, V2.B16
	VEOR V3.B16, V3.B16, V3.B16
	VEOR V4.B16, V4.B16, V4.B16
	VEOR V5.B16, V5.B16, V5.B16
	VEOR V6.B16, V6.B16, V6.B16
	VEOR V7.B16, V7.B16, V7.B16
	VEOR V8.B16, V8.B16, V8.B16
	VEOR V9.B16, V9.B16, V9.B16
	VEOR V10.B16, V10.B16, V10.B16
	VEOR V11.B16, V11.B16, V11.B16
	VEOR V12.B16, V12.B16, V12.B16
	VEOR V13.B16, V13.B16, V13.B16
	VEOR V14.B16, V14.B16, V14.B16
	VEOR V15.B16, V15.B16, V15.B16
	VEOR V16.B16, V16.B16, V16.B16
	VEOR V17.B16, V17.B16, V17.B16
	VEOR V18.B16, V18.B16, V18.B16
	VEOR V19.B16, V19.B16, V19.B16
	VEOR V20.B16, V20.B16, V20.B16
	VEOR V21.B16, V21.B16, V21.B16
	VEOR V22.B16, V22.B16, V22.B16
	VEOR V23.B16, V23.B16, V23.B16
	CBZ R0, store

loop:
	VLD1.P (R4)(R5), [V24.S4, V25.S4]
	VLD1R.P (R6)(R3), [V26.S4]
	VFMLA V24.S4, V26.S4, V0.S4
	VFMLA V25.S4, V26.S4, V1.S4
	VLD1R.P (R7)(R3), [V27.S4]
	VFMLA V24.S4, V27.S4, V2.S4
	VFMLA V25.S4, V27.S4, V3.S4
	VLD1R.P (R8)(R3), [V28.S4]
	VFMLA V24.S4, V28.S4, V4.S4
	VFMLA V25.S4, V28.S4, V5.S4
	VLD1R.P (R9)(R3), [V29.S4]
	VFMLA V24.S4, V29.S4, V6.S4
	VFMLA V25.S4, V29.S4, V7.S4
	VLD1R.P (R10)(R3), [V30.S4]
	VFMLA V24.S4, V30.S4, V8.S4
	VFMLA V25.S4, V30.S4, V9.S4
	VLD1R.P (R11)(R3), [V31.S4]
	VFMLA V24.S4, V31.S4, V10.S4
	VFMLA V25.S4, V31.S4, V11.S4
	VLD1R.P (R12)(R3), [V26.S4]
	VFMLA V24.S4, V26.S4, V12.S4
	VFMLA V25.S4, V26.S4, V13.S4
	VLD1R.P (R13)(R3), [V27.S4]
	VFMLA V24.S4, V27.S4, V14.S4
	VFMLA V25.S4, V27.S4, V15.S4
	VLD1R.P (R14)(R3), [V28.S4]
	VFMLA V24.S4, V28.S4, V16.S4
	VFMLA V25.S4, V28.S4, V17.S4
	VLD1R.P (R15)(R3), [V29.S4]
	VFMLA V24.S4, V29.S4, V18.S4
	VFMLA V25.S4, V29.S4, V19.S4
	VLD1R.P (R16)(R3), [V30.S4]
	VFMLA V24.S4, V30.S4, V20.S4
	VFMLA V25.S4, V30.S4, V21.S4
	VLD1R.P (R17)(R3), [V31.S4]
	VFMLA V24.S4, V31.S4, V22.S4
	VFMLA V25.S4, V31.S4, V23.S4
	SUBS $1, R0, R0
	BNE loop

store:
	MOVD c+48(FP), R7
	MOVD ldc+56(FP), R8
	LSL $2, R8, R8
	MOVD accumulate+64(FP), R9
	CBZ R9, nocacc
	MOVD R7, R6
	VLD1.P (R6)(R8), [V24.S4, V25.S4]
	FADD4S(24, 0, 0)
	FADD4S(25, 1, 1)
	VLD1.P (R6)(R8), [V24.S4, V25.S4]
	FADD4S(24, 2, 2)
	FADD4S(25, 3, 3)
	VLD1.P (R6)(R8), [V24.S4, V25.S4]
	FADD4S(24, 4, 4)
	FADD4S(25, 5, 5)
	VLD1.P (R6)(R8), [V24.S4, V25.S4]
	FADD4S(24, 6, 6)
	FADD4S(25, 7, 7)
	VLD1.P (R6)(R8), [V24.S4, V25.S4]
	FADD4S(24, 8, 8)
	FADD4S(25, 9, 9)
	VLD1.P (R6)(R8), [V24.S4, V25.S4]
	FADD4S(24, 10, 10)
	FADD4S(25, 11, 11)
	VLD1.P (R6)(R8), [V24.S4, V25.S4]
	FADD4S(24, 12, 12)
	FADD4S(25, 13, 13)
	VLD1.P (R6)(R8), [V24.S4, V25.S4]
	FADD4S(24, 14, 14)
	FADD4S(25, 15, 15)
	VLD1.P (R6)(R8), [V24.S4, V25.S4]
	FADD4S(24, 16, 16)
	FADD4S(25, 17, 17)
	VLD1.P (R6)(R8), [V24.S4, V25.S4]
	FADD4S(24, 18, 18)
	FADD4S(25, 19, 19)
	VLD1.P (R6)(R8), [V24.S4, V25.S4]
	FADD4S(24, 20, 20)
	FADD4S(25, 21, 21)
	VLD1.P (R6)(R8), [V24.S4, V25.S4]
	FADD4S(24, 22, 22)
	FADD4S(25, 23, 23)

nocacc:
	MOVD bias+72(FP), R10
	CBZ R10, nobias
	VLD1 (R10), [V24.S4, V25.S4]
	FADD4S(24, 0, 0)
	FADD4S(25, 1, 1)
	FADD4S(24, 2, 2)
	FADD4S(25, 3, 3)
	FADD4S(24, 4, 4)
	FADD4S(25, 5, 5)
	FADD4S(24, 6, 6)
	FADD4S(25, 7, 7)
	FADD4S(24, 8, 8)
	FADD4S(25, 9, 9)
	FADD4S(24, 10, 10)
	FADD4S(25, 11, 11)
	FADD4S(24, 12, 12)
	FADD4S(25, 13, 13)
	FADD4S(24, 14, 14)
	FADD4S(25, 15, 15)
	FADD4S(24, 16, 16)
	FADD4S(25, 17, 17)
	FADD4S(24, 18, 18)
	FADD4S(25, 19, 19)
	FADD4S(24, 20, 20)
	FADD4S(25, 21, 21)
	FADD4S(24, 22, 22)
	FADD4S(25, 23, 23)

nobias:
	VST1.P [V0.S4, V1.S4], (R7)(R8)
	VST1.P [V2.S4, V3.S4], (R7)(R8)
	VST1.P [V4.S4, V5.S4], (R7)(R8)
	VST1.P [V6.S4, V7.S4], (R7)(R8)
	VST1.P [V8.S4, V9.S4], (R7)(R8)
	VST1.P [V10.S4, V11.S4], (R7)(R8)
	VST1.P [V12.S4, V13.S4], (R7)(R8)
	VST1.P [V14.S4, V15.S4], (R7)(R8)
	VST1.P [V16.S4, V17.S4], (R7)(R8)
	VST1.P [V18.S4, V19.S4], (R7)(R8)
	VST1.P [V20.S4, V21.S4], (R7)(R8)
	VST1.P [V22.S4, V23.S4], (R7)(R8)
	RET

// FADDP4S(m, n, d) is FADDP Vd.4S, Vn.4S, Vm.4S (pairwise sums: d = n0+n1, n2+n3, m0+m1,
// m2+m3) and FADDP2S(n, d) the scalar FADDP Sd, Vn.2S (d = n0+n1), also written out.
#define FADDP4S(m, n, d) WORD $(0x6E20D400 | ((m)<<16) | ((n)<<5) | (d))
#define FADDP2S(n, d) WORD $(0x7E30D800 | ((n)<<5) | (d))

// func dotRows4NEON(out, q, k *float32, ld, rows, n int)
//
// out[r] = Σ_i q[i]·k[r·ld+i] for r in [0, rows) and n a positive multiple of 4, each sum in
// four interleaved 4-wide accumulators (16 terms per iteration while n allows, then 4 into
// the first) added as (V0+V1)+(V2+V3) and then across lanes.
TEXT ·dotRows4NEON(SB), NOSPLIT, $0-48
	MOVD out+0(FP), R0
	MOVD q+8(FP), R1
	MOVD k+16(FP), R2
	MOVD ld+24(FP), R3
	LSL $2, R3, R3
	MOVD rows+32(FP), R4
	MOVD n+40(FP), R5
drow:
	CBZ R4, ddone
	MOVD R1, R6
	MOVD R2, R7
	MOVD R5, R8
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	VEOR V2.B16, V2.B16, V2.B16
	VEOR V3.B16, V3.B16, V3.B16
d16:
	CMP $16, R8
	BLT d4
	VLD1.P 64(R6), [V4.S4, V5.S4, V6.S4, V7.S4]
	VLD1.P 64(R7), [V16.S4, V17.S4, V18.S4, V19.S4]
	VFMLA V16.S4, V4.S4, V0.S4
	VFMLA V17.S4, V5.S4, V1.S4
	VFMLA V18.S4, V6.S4, V2.S4
	VFMLA V19.S4, V7.S4, V3.S4
	SUB $16, R8, R8
	B d16
d4:
	CBZ R8, dsum
	VLD1.P 16(R6), [V4.S4]
	VLD1.P 16(R7), [V16.S4]
	VFMLA V16.S4, V4.S4, V0.S4
	SUB $4, R8, R8
	B d4
dsum:
	FADD4S(1, 0, 0)
	FADD4S(3, 2, 2)
	FADD4S(2, 0, 0)
	FADDP4S(0, 0, 0)
	FADDP2S(0, 0)
	FMOVS F0, (R0)
	ADD $4, R0, R0
	ADD R3, R2, R2
	SUB $1, R4, R4
	B drow
ddone:
	RET

// func axpy4NEON(y, x *float32, a float32, n int)
//
// y[i] += a·x[i] (one fused multiply-add each) for n a positive multiple of 4.
TEXT ·axpy4NEON(SB), NOSPLIT, $0-32
	MOVD y+0(FP), R0
	MOVD x+8(FP), R1
	FMOVS a+16(FP), F0
	VDUP V0.S[0], V0.S4
	MOVD n+24(FP), R2
a16:
	CMP $16, R2
	BLT a4
	VLD1 (R0), [V4.S4, V5.S4, V6.S4, V7.S4]
	VLD1.P 64(R1), [V16.S4, V17.S4, V18.S4, V19.S4]
	VFMLA V0.S4, V16.S4, V4.S4
	VFMLA V0.S4, V17.S4, V5.S4
	VFMLA V0.S4, V18.S4, V6.S4
	VFMLA V0.S4, V19.S4, V7.S4
	VST1.P [V4.S4, V5.S4, V6.S4, V7.S4], 64(R0)
	SUB $16, R2, R2
	B a16
a4:
	CBZ R2, adone
	VLD1 (R0), [V4.S4]
	VLD1.P 16(R1), [V16.S4]
	VFMLA V0.S4, V16.S4, V4.S4
	VST1.P [V4.S4], 16(R0)
	SUB $4, R2, R2
	B a4
adone:
	RET
