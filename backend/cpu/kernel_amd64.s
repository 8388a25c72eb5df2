#include "textflag.h"

// func gemm6x16FMA(kc int, a *float32, rs, ks int, b *float32, bs int, c *float32, ldc int, accumulate int, bias *float32)
//
// One 6×16 block of C = A·B (+ C when accumulate != 0) (+ bias when bias != nil), held in
// twelve YMM accumulators, two per row. Element (r, k) of A is at a + 4·(r·rs + k·ks), element
// (k, j) of B at b + 4·(k·bs + j), element (r, j) of C at c + 4·(r·ldc + j); strides are in
// floats. Each step loads 16 floats of B, broadcasts one float of each of the 6 rows of A and
// issues 12 fused multiply-adds; the sum over k runs in ascending order.
TEXT ·gemm6x16FMA(SB), NOSPLIT, $0-80
	MOVQ kc+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ rs+16(FP), R8
	SHLQ $2, R8
	MOVQ ks+24(FP), R10
	SHLQ $2, R10
	MOVQ b+32(FP), DI
	MOVQ bs+40(FP), R11
	SHLQ $2, R11
	LEAQ (SI)(R8*2), R9
	ADDQ R8, R9 // R9 = row 3
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	TESTQ CX, CX
	JE store

loop:
	VMOVUPS (DI), Y12
	VMOVUPS 32(DI), Y13
	VBROADCASTSS (SI), Y14
	VFMADD231PS Y12, Y14, Y0
	VFMADD231PS Y13, Y14, Y1
	VBROADCASTSS (SI)(R8*1), Y15
	VFMADD231PS Y12, Y15, Y2
	VFMADD231PS Y13, Y15, Y3
	VBROADCASTSS (SI)(R8*2), Y14
	VFMADD231PS Y12, Y14, Y4
	VFMADD231PS Y13, Y14, Y5
	VBROADCASTSS (R9), Y15
	VFMADD231PS Y12, Y15, Y6
	VFMADD231PS Y13, Y15, Y7
	VBROADCASTSS (R9)(R8*1), Y14
	VFMADD231PS Y12, Y14, Y8
	VFMADD231PS Y13, Y14, Y9
	VBROADCASTSS (R9)(R8*2), Y15
	VFMADD231PS Y12, Y15, Y10
	VFMADD231PS Y13, Y15, Y11
	ADDQ R10, SI
	ADDQ R10, R9
	ADDQ R11, DI
	DECQ CX
	JNZ loop

store:
	MOVQ c+48(FP), DX
	MOVQ ldc+56(FP), R12
	SHLQ $2, R12
	LEAQ (DX)(R12*2), R13
	ADDQ R12, R13 // R13 = row 3 of C
	MOVQ accumulate+64(FP), AX
	TESTQ AX, AX
	JE nocacc
	VADDPS (DX), Y0, Y0
	VADDPS 32(DX), Y1, Y1
	VADDPS (DX)(R12*1), Y2, Y2
	VADDPS 32(DX)(R12*1), Y3, Y3
	VADDPS (DX)(R12*2), Y4, Y4
	VADDPS 32(DX)(R12*2), Y5, Y5
	VADDPS (R13), Y6, Y6
	VADDPS 32(R13), Y7, Y7
	VADDPS (R13)(R12*1), Y8, Y8
	VADDPS 32(R13)(R12*1), Y9, Y9
	VADDPS (R13)(R12*2), Y10, Y10
	VADDPS 32(R13)(R12*2), Y11, Y11

nocacc:
	MOVQ bias+72(FP), BX
	TESTQ BX, BX
	JE nobias
	VMOVUPS (BX), Y12
	VMOVUPS 32(BX), Y13
	VADDPS Y12, Y0, Y0
	VADDPS Y13, Y1, Y1
	VADDPS Y12, Y2, Y2
	VADDPS Y13, Y3, Y3
	VADDPS Y12, Y4, Y4
	VADDPS Y13, Y5, Y5
	VADDPS Y12, Y6, Y6
	VADDPS Y13, Y7, Y7
	VADDPS Y12, Y8, Y8
	VADDPS Y13, Y9, Y9
	VADDPS Y12, Y10, Y10
	VADDPS Y13, Y11, Y11

nobias:
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, (DX)(R12*1)
	VMOVUPS Y3, 32(DX)(R12*1)
	VMOVUPS Y4, (DX)(R12*2)
	VMOVUPS Y5, 32(DX)(R12*2)
	VMOVUPS Y6, (R13)
	VMOVUPS Y7, 32(R13)
	VMOVUPS Y8, (R13)(R12*1)
	VMOVUPS Y9, 32(R13)(R12*1)
	VMOVUPS Y10, (R13)(R12*2)
	VMOVUPS Y11, 32(R13)(R12*2)
	VZEROUPPER
	RET

// func axpy8FMA(y, x *float32, a float32, n int)
//
// y[i] += a·x[i] for n a positive multiple of 8.
TEXT ·axpy8FMA(SB), NOSPLIT, $0-32
	MOVQ y+0(FP), DI
	MOVQ x+8(FP), SI
	VBROADCASTSS a+16(FP), Y0
	MOVQ n+24(FP), CX
axpy32:
	CMPQ CX, $32
	JLT axpy8
	VMOVUPS (DI), Y1
	VMOVUPS 32(DI), Y2
	VMOVUPS 64(DI), Y3
	VMOVUPS 96(DI), Y4
	VFMADD231PS (SI), Y0, Y1
	VFMADD231PS 32(SI), Y0, Y2
	VFMADD231PS 64(SI), Y0, Y3
	VFMADD231PS 96(SI), Y0, Y4
	VMOVUPS Y1, (DI)
	VMOVUPS Y2, 32(DI)
	VMOVUPS Y3, 64(DI)
	VMOVUPS Y4, 96(DI)
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JMP axpy32
axpy8:
	CMPQ CX, $8
	JLT axpydone
	VMOVUPS (DI), Y1
	VFMADD231PS (SI), Y0, Y1
	VMOVUPS Y1, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP axpy8
axpydone:
	VZEROUPPER
	RET

// func gemv64FMA(y, a, b *float32, k, bs int)
//
// y[0:64] += Σ_i a[i]·b[i·bs : i·bs+64] for i < k (k ≥ 1), the 64 sums kept in eight YMM
// registers across all k and accumulated by fused multiply-adds in ascending i: one row of a
// matrix product (decoding one token) without a call per row of B.
TEXT ·gemv64FMA(SB), NOSPLIT, $0-40
	MOVQ y+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ k+24(FP), CX
	MOVQ bs+32(FP), R8
	SHLQ $2, R8
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	VMOVUPS 128(DI), Y4
	VMOVUPS 160(DI), Y5
	VMOVUPS 192(DI), Y6
	VMOVUPS 224(DI), Y7
gemvloop:
	VBROADCASTSS (SI), Y8
	VFMADD231PS (DX), Y8, Y0
	VFMADD231PS 32(DX), Y8, Y1
	VFMADD231PS 64(DX), Y8, Y2
	VFMADD231PS 96(DX), Y8, Y3
	VFMADD231PS 128(DX), Y8, Y4
	VFMADD231PS 160(DX), Y8, Y5
	VFMADD231PS 192(DX), Y8, Y6
	VFMADD231PS 224(DX), Y8, Y7
	ADDQ $4, SI
	ADDQ R8, DX
	DECQ CX
	JNZ gemvloop
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	VMOVUPS Y4, 128(DI)
	VMOVUPS Y5, 160(DI)
	VMOVUPS Y6, 192(DI)
	VMOVUPS Y7, 224(DI)
	VZEROUPPER
	RET

// func pause()
//
// The PAUSE instruction, for spin-waiting.
TEXT ·pause(SB), NOSPLIT, $0-0
	PAUSE
	RET

// func copyRows16(dst, src *float32, bs, rows, n16 int)
//
// For r in [0, rows): copies the 16·n16 floats at src + r·bs to dst + r·16·n16, 16 at a time:
// a panel of B packed for the micro-kernel.
TEXT ·copyRows16(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ bs+16(FP), R8
	SHLQ $2, R8
	MOVQ rows+24(FP), CX
	MOVQ n16+32(FP), R9
	TESTQ CX, CX
	JE copydone

copyrow:
	MOVQ SI, DX
	MOVQ R9, BX

copy16:
	VMOVUPS (DX), Y0
	VMOVUPS 32(DX), Y1
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	ADDQ $64, DX
	ADDQ $64, DI
	DECQ BX
	JNZ copy16
	ADDQ R8, SI
	DECQ CX
	JNZ copyrow

copydone:
	VZEROUPPER
	RET

// func transpose8(dst *float32, ldd int, src *float32, lds int, blocks int)
//
// For b in [0, blocks): writes the transpose of the 8×8 block of src at rows 0..7, columns
// 8b..8b+7 (row stride lds) to dst rows 8b..8b+7, columns 0..7 (row stride ldd): the
// unpack / shuffle / lane-permute transpose of eight 8-float rows.
TEXT ·transpose8(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ ldd+8(FP), R8
	SHLQ $2, R8
	MOVQ src+16(FP), SI
	MOVQ lds+24(FP), R9
	SHLQ $2, R9
	MOVQ blocks+32(FP), CX
	LEAQ (R9)(R9*2), R10 // 3 source rows
	LEAQ (R8)(R8*2), R11 // 3 destination rows
	TESTQ CX, CX
	JE tdone

tloop:
	LEAQ (SI)(R9*4), BX
	VMOVUPS (SI), Y0
	VMOVUPS (SI)(R9*1), Y1
	VMOVUPS (SI)(R9*2), Y2
	VMOVUPS (SI)(R10*1), Y3
	VMOVUPS (BX), Y4
	VMOVUPS (BX)(R9*1), Y5
	VMOVUPS (BX)(R9*2), Y6
	VMOVUPS (BX)(R10*1), Y7
	VUNPCKLPS Y1, Y0, Y8
	VUNPCKHPS Y1, Y0, Y9
	VUNPCKLPS Y3, Y2, Y10
	VUNPCKHPS Y3, Y2, Y11
	VUNPCKLPS Y5, Y4, Y12
	VUNPCKHPS Y5, Y4, Y13
	VUNPCKLPS Y7, Y6, Y14
	VUNPCKHPS Y7, Y6, Y15
	VSHUFPS $0x44, Y10, Y8, Y0
	VSHUFPS $0xEE, Y10, Y8, Y1
	VSHUFPS $0x44, Y11, Y9, Y2
	VSHUFPS $0xEE, Y11, Y9, Y3
	VSHUFPS $0x44, Y14, Y12, Y4
	VSHUFPS $0xEE, Y14, Y12, Y5
	VSHUFPS $0x44, Y15, Y13, Y6
	VSHUFPS $0xEE, Y15, Y13, Y7
	VPERM2F128 $0x20, Y4, Y0, Y8
	VPERM2F128 $0x20, Y5, Y1, Y9
	VPERM2F128 $0x20, Y6, Y2, Y10
	VPERM2F128 $0x20, Y7, Y3, Y11
	VPERM2F128 $0x31, Y4, Y0, Y12
	VPERM2F128 $0x31, Y5, Y1, Y13
	VPERM2F128 $0x31, Y6, Y2, Y14
	VPERM2F128 $0x31, Y7, Y3, Y15
	LEAQ (DI)(R8*4), DX
	VMOVUPS Y8, (DI)
	VMOVUPS Y9, (DI)(R8*1)
	VMOVUPS Y10, (DI)(R8*2)
	VMOVUPS Y11, (DI)(R11*1)
	VMOVUPS Y12, (DX)
	VMOVUPS Y13, (DX)(R8*1)
	VMOVUPS Y14, (DX)(R8*2)
	VMOVUPS Y15, (DX)(R11*1)
	ADDQ $32, SI
	LEAQ (DI)(R8*8), DI
	DECQ CX
	JNZ tloop

tdone:
	VZEROUPPER
	RET

// func softmaxBack8(ds, p *float32, d, s float32, n int)
//
// ds[i] = p[i]·(ds[i] − d)·s for i < n, n a positive multiple of 8, 32 floats a loop where n
// allows (the subtraction, then the two products, rounded as the Go loop rounds them).
TEXT ·softmaxBack8(SB), NOSPLIT, $0-32
	MOVQ ds+0(FP), DI
	MOVQ p+8(FP), SI
	VBROADCASTSS d+16(FP), Y4
	VBROADCASTSS s+20(FP), Y5
	MOVQ n+24(FP), CX

sb32:
	CMPQ CX, $32
	JLT sb8
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	VSUBPS Y4, Y0, Y0
	VSUBPS Y4, Y1, Y1
	VSUBPS Y4, Y2, Y2
	VSUBPS Y4, Y3, Y3
	VMULPS (SI), Y0, Y0
	VMULPS 32(SI), Y1, Y1
	VMULPS 64(SI), Y2, Y2
	VMULPS 96(SI), Y3, Y3
	VMULPS Y5, Y0, Y0
	VMULPS Y5, Y1, Y1
	VMULPS Y5, Y2, Y2
	VMULPS Y5, Y3, Y3
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JMP sb32

sb8:
	TESTQ CX, CX
	JE sbdone
	VMOVUPS (DI), Y0
	VSUBPS Y4, Y0, Y0
	VMULPS (SI), Y0, Y0
	VMULPS Y5, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP sb8

sbdone:
	VZEROUPPER
	RET

// func addMul8(out, a, b *float32, n int, mul bool)
//
// out[i] = a[i]·b[i] (mul) or a[i] + b[i] for i < n, n a positive multiple of 8, 32 floats a
// loop where n allows; out may be a or b. One loop for both: only the arithmetic differs.
TEXT ·addMul8(SB), NOSPLIT, $0-33
	MOVQ out+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
	MOVBLZX mul+32(FP), AX

am32:
	CMPQ CX, $32
	JLT am8
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	TESTQ AX, AX
	JNZ am32mul
	VADDPS (DX), Y0, Y0
	VADDPS 32(DX), Y1, Y1
	VADDPS 64(DX), Y2, Y2
	VADDPS 96(DX), Y3, Y3
	JMP am32store
am32mul:
	VMULPS (DX), Y0, Y0
	VMULPS 32(DX), Y1, Y1
	VMULPS 64(DX), Y2, Y2
	VMULPS 96(DX), Y3, Y3
am32store:
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ $128, SI
	ADDQ $128, DX
	ADDQ $128, DI
	SUBQ $32, CX
	JMP am32

am8:
	TESTQ CX, CX
	JE amdone
	VMOVUPS (SI), Y0
	TESTQ AX, AX
	JNZ am8mul
	VADDPS (DX), Y0, Y0
	JMP am8store
am8mul:
	VMULPS (DX), Y0, Y0
am8store:
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	SUBQ $8, CX
	JMP am8

amdone:
	VZEROUPPER
	RET

// func dotRows8FMA(out, q, k *float32, ld, rows, n int)
//
// out[r] = Σ_i q[i]·k[r·ld+i] for r in [0, rows) and n a positive multiple of 8, each sum in
// four interleaved 8-wide accumulators (32 terms per iteration while n allows) added up at
// the end. Rows may be far apart (a KV cache's rows), so each is prefetched 8 rows ahead:
// the hardware's prefetchers do not follow strides that cross pages.
TEXT ·dotRows8FMA(SB), NOSPLIT, $0-48
	MOVQ out+0(FP), R8
	MOVQ q+8(FP), R9
	MOVQ k+16(FP), R10
	MOVQ ld+24(FP), R11
	SHLQ $2, R11
	MOVQ rows+32(FP), R12
	MOVQ n+40(FP), R13
	MOVQ R11, R14
	SHLQ $3, R14
drow:
	TESTQ R12, R12
	JEQ ddone
	LEAQ (R10)(R14*1), BX
	MOVQ R13, DX
	SHLQ $2, DX
dpf:
	PREFETCHT0 (BX)
	ADDQ $64, BX
	SUBQ $64, DX
	JGE dpf
	MOVQ R9, SI
	MOVQ R10, DI
	MOVQ R13, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
d32:
	CMPQ CX, $32
	JLT d8
	VMOVUPS (SI), Y4
	VMOVUPS 32(SI), Y5
	VMOVUPS 64(SI), Y6
	VMOVUPS 96(SI), Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JMP d32
d8:
	CMPQ CX, $8
	JLT dsum
	VMOVUPS (SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP d8
dsum:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0
	MOVSS X0, (R8)
	ADDQ $4, R8
	ADDQ R11, R10
	DECQ R12
	JMP drow
ddone:
	VZEROUPPER
	RET

// func axpyRowsFMA(y, a, b *float32, k, n, bs int)
//
// y[0:n] += a[i]·b[i·bs : i·bs+n] for i < k in turn (k ≥ 1, n a positive multiple of 8): each
// row of b read whole, front to back, 64 columns at a time then 8, y loaded and stored again
// for every row. Each y[j] gets the same fused multiply-adds in the same order as from
// gemv64FMA.
TEXT ·axpyRowsFMA(SB), NOSPLIT, $0-48
	MOVQ y+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ k+24(FP), CX
	MOVQ n+32(FP), R9
	MOVQ bs+40(FP), R8
	SHLQ $2, R8
seqrow:
	VBROADCASTSS (SI), Y8
	MOVQ DI, R10
	MOVQ DX, R11
	MOVQ R9, R12
seq64:
	CMPQ R12, $64
	JLT seq8
	VMOVUPS (R10), Y0
	VMOVUPS 32(R10), Y1
	VMOVUPS 64(R10), Y2
	VMOVUPS 96(R10), Y3
	VMOVUPS 128(R10), Y4
	VMOVUPS 160(R10), Y5
	VMOVUPS 192(R10), Y6
	VMOVUPS 224(R10), Y7
	VFMADD231PS (R11), Y8, Y0
	VFMADD231PS 32(R11), Y8, Y1
	VFMADD231PS 64(R11), Y8, Y2
	VFMADD231PS 96(R11), Y8, Y3
	VFMADD231PS 128(R11), Y8, Y4
	VFMADD231PS 160(R11), Y8, Y5
	VFMADD231PS 192(R11), Y8, Y6
	VFMADD231PS 224(R11), Y8, Y7
	VMOVUPS Y0, (R10)
	VMOVUPS Y1, 32(R10)
	VMOVUPS Y2, 64(R10)
	VMOVUPS Y3, 96(R10)
	VMOVUPS Y4, 128(R10)
	VMOVUPS Y5, 160(R10)
	VMOVUPS Y6, 192(R10)
	VMOVUPS Y7, 224(R10)
	ADDQ $256, R10
	ADDQ $256, R11
	SUBQ $64, R12
	JMP seq64
seq8:
	CMPQ R12, $8
	JLT seqnext
	VMOVUPS (R10), Y0
	VFMADD231PS (R11), Y8, Y0
	VMOVUPS Y0, (R10)
	ADDQ $32, R10
	ADDQ $32, R11
	SUBQ $8, R12
	JMP seq8
seqnext:
	ADDQ $4, SI
	ADDQ R8, DX
	DECQ CX
	JNZ seqrow
	VZEROUPPER
	RET
