#include "textflag.h"

// func adamw8(p, grad, m, v *float32, n int, c *adamConsts)
//
// The AdamW update of adamTask.run over n elements (a positive multiple of 8), 8 lanes at a
// time, with the same operations in the same order and no fused multiply-adds, so that it
// gives the same bits as the Go loop. c points to gscale, β1, 1−β1, β2, 1−β2, sqrt(1−β2^t), ε,
// lr/(1−β1^t), 1−lr·wd.
TEXT ·adamw8(SB), NOSPLIT, $0-48
	MOVQ p+0(FP), DI
	MOVQ grad+8(FP), SI
	MOVQ m+16(FP), R8
	MOVQ v+24(FP), R9
	MOVQ n+32(FP), CX
	MOVQ c+40(FP), AX
	VBROADCASTSS 0(AX), Y8  // gscale
	VBROADCASTSS 4(AX), Y9  // β1
	VBROADCASTSS 8(AX), Y10 // 1−β1
	VBROADCASTSS 12(AX), Y11 // β2
	VBROADCASTSS 16(AX), Y12 // 1−β2
	VBROADCASTSS 20(AX), Y13 // sqrt(1−β2^t)
	VBROADCASTSS 24(AX), Y14 // ε
	VBROADCASTSS 28(AX), Y15 // step size
	VBROADCASTSS 32(AX), Y7  // decay
adamloop:
	VMULPS (SI), Y8, Y0   // gi
	VMULPS (R8), Y9, Y1   // β1·m
	VMULPS Y0, Y10, Y2    // (1−β1)·gi
	VADDPS Y2, Y1, Y1     // m
	VMOVUPS Y1, (R8)
	VMULPS (R9), Y11, Y3  // β2·v
	VMULPS Y0, Y12, Y4    // (1−β2)·gi
	VMULPS Y0, Y4, Y4     // ·gi
	VADDPS Y4, Y3, Y3     // v
	VMOVUPS Y3, (R9)
	VSQRTPS Y3, Y3
	VDIVPS Y13, Y3, Y3
	VADDPS Y14, Y3, Y3    // denom
	VMULPS Y15, Y1, Y1    // step·m
	VDIVPS Y3, Y1, Y1     // /denom
	VMULPS (DI), Y7, Y5   // p·decay
	VSUBPS Y1, Y5, Y5
	VMOVUPS Y5, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	ADDQ $32, R8
	ADDQ $32, R9
	SUBQ $8, CX
	JNZ adamloop
	VZEROUPPER
	RET
