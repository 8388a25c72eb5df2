#include "textflag.h"

// Row kernels of LayerNorm (AVX2 + FMA, 8 lanes); n is a positive multiple of 8. Sums are kept
// in 8 lanes and added across at the end.

// func lnStats8(x *float32, n int) (sum, sumsq float32)
//
// Σ x[i] and Σ (x[i] − mean)² with mean = sum/n, in two passes.
TEXT ·lnStats8(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ SI, DI
	MOVQ CX, DX
	VXORPS Y0, Y0, Y0
sumloop:
	VADDPS (SI), Y0, Y0
	ADDQ $32, SI
	SUBQ $8, CX
	JNZ sumloop
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0
	MOVSS X0, sum+16(FP)
	// mean = sum / n
	VCVTSI2SSQ DX, X2, X2
	VDIVSS X2, X0, X0
	VBROADCASTSS X0, Y3
	VXORPS Y4, Y4, Y4
devloop:
	VMOVUPS (DI), Y5
	VSUBPS Y3, Y5, Y5
	VFMADD231PS Y5, Y5, Y4
	ADDQ $32, DI
	SUBQ $8, DX
	JNZ devloop
	VEXTRACTF128 $1, Y4, X1
	VADDPS X1, X4, X4
	VHADDPS X4, X4, X4
	VHADDPS X4, X4, X4
	VZEROUPPER
	MOVSS X4, sumsq+20(FP)
	RET

// func lnApply8(out, x, gamma, beta *float32, n int, mean, rstd float32)
//
// out[i] = (x[i] − mean)·rstd·gamma[i] + beta[i].
TEXT ·lnApply8(SB), NOSPLIT, $0-48
	MOVQ out+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ gamma+16(FP), R8
	MOVQ beta+24(FP), R9
	MOVQ n+32(FP), CX
	VBROADCASTSS mean+40(FP), Y1
	VBROADCASTSS rstd+44(FP), Y2
applyloop:
	VMOVUPS (SI), Y0
	VSUBPS Y1, Y0, Y0
	VMULPS Y2, Y0, Y0
	VMOVUPS (R9), Y3
	VFMADD231PS (R8), Y0, Y3
	VMOVUPS Y3, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	ADDQ $32, R8
	ADDQ $32, R9
	SUBQ $8, CX
	JNZ applyloop
	VZEROUPPER
	RET

// func lnBackSums8(x, dy, gamma, pg, pb *float32, n int, mean, rstd float32) (sdnorm, sdnormnorm float32)
//
// With norm = (x − mean)·rstd and dnorm = dy·gamma: returns Σ dnorm and Σ dnorm·norm, and adds
// dy·norm into pg and dy into pb.
TEXT ·lnBackSums8(SB), NOSPLIT, $0-64
	MOVQ x+0(FP), SI
	MOVQ dy+8(FP), DX
	MOVQ gamma+16(FP), R8
	MOVQ pg+24(FP), R9
	MOVQ pb+32(FP), R10
	MOVQ n+40(FP), CX
	VBROADCASTSS mean+48(FP), Y1
	VBROADCASTSS rstd+52(FP), Y2
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
backsumloop:
	VMOVUPS (SI), Y0
	VSUBPS Y1, Y0, Y0
	VMULPS Y2, Y0, Y0 // norm
	VMOVUPS (DX), Y3 // dy
	VMULPS (R8), Y3, Y4 // dnorm
	VADDPS Y4, Y6, Y6
	VFMADD231PS Y4, Y0, Y7
	VMOVUPS (R9), Y5
	VFMADD231PS Y3, Y0, Y5
	VMOVUPS Y5, (R9)
	VADDPS (R10), Y3, Y5
	VMOVUPS Y5, (R10)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, R8
	ADDQ $32, R9
	ADDQ $32, R10
	SUBQ $8, CX
	JNZ backsumloop
	VEXTRACTF128 $1, Y6, X1
	VADDPS X1, X6, X6
	VHADDPS X6, X6, X6
	VHADDPS X6, X6, X6
	VEXTRACTF128 $1, Y7, X1
	VADDPS X1, X7, X7
	VHADDPS X7, X7, X7
	VHADDPS X7, X7, X7
	VZEROUPPER
	MOVSS X6, sdnorm+56(FP)
	MOVSS X7, sdnormnorm+60(FP)
	RET

// func lnBackDx8(dx, x, dy, gamma *float32, n int, mean, rstd, aa, bb float32)
//
// dx[i] += (dy[i]·gamma[i] − aa − norm·bb)·rstd with norm = (x[i] − mean)·rstd.
TEXT ·lnBackDx8(SB), NOSPLIT, $0-56
	MOVQ dx+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ dy+16(FP), DX
	MOVQ gamma+24(FP), R8
	MOVQ n+32(FP), CX
	VBROADCASTSS mean+40(FP), Y1
	VBROADCASTSS rstd+44(FP), Y2
	VBROADCASTSS aa+48(FP), Y3
	VBROADCASTSS bb+52(FP), Y4
dxloop:
	VMOVUPS (SI), Y0
	VSUBPS Y1, Y0, Y0
	VMULPS Y2, Y0, Y0 // norm
	VMOVUPS (DX), Y5
	VMULPS (R8), Y5, Y5 // dnorm
	VSUBPS Y3, Y5, Y5 // dnorm − a
	VFNMADD231PS Y4, Y0, Y5 // − norm·b
	VMOVUPS (DI), Y6
	VFMADD231PS Y2, Y5, Y6 // dx += (…)·rstd
	VMOVUPS Y6, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, R8
	ADDQ $32, DI
	SUBQ $8, CX
	JNZ dxloop
	VZEROUPPER
	RET
