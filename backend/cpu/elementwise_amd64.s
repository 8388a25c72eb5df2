#include "textflag.h"

// Vectorised exp, GELU and GELU' over 8 float32 lanes (AVX2 + FMA). The constants below are
// each stored 8 times so that they can be used directly as 256-bit memory operands.
//
// exp(x): 0 below −87.3, x is clamped to at most 88.3 (NaN passes through), x = n·ln2 + r with n = round(x·log2 e)
// and |r| <= ln2/2 (ln2 split in two for an exact reduction), e^r by its Taylor series to degree 7
// (error < 6e-9), and 2^n built in the exponent bits.
//
// GELU(x) = x·Φ(x) with Φ(x) = erfc(−x/√2)/2. For a = |x|/√2 (clamped to 7.5, where erfc is
// 3e-26), erfc(a)/2 = t·R(u)·exp(−a²), t = 1/(1 + a/2), u = (t − tc)/th mapping t to [−1, 1],
// R a degree-8 polynomial fitted to erfc(a)·exp(a²)/(2t) (gen_elementwise_asm.py; relative
// error 7e-8 with its float32 coefficients, about 2e-7 as evaluated here). Φ is erfc(a)/2 for
// x < 0 and 1 − erfc(a)/2 otherwise; GELU' = Φ + x·φ with φ(x) = exp(−a²)/√(2π), the same
// exponential. Its argument is never below −56.25, so it needs no clamping.

#define EXP_HI 0
#define EXP_LO 32
#define LOG2E 64
#define LN2_HI 96
#define LN2_LO 128
#define ONE 160
#define HALF 192
#define C2 224
#define C3 256
#define C4 288
#define C5 320
#define C6 352
#define C7 384
#define RSQRT2 416
#define ABSMASK 448
#define ZMAX 480
#define TC 512
#define RTH 544
#define RSQRT2PI 576
#define NEGINF 608
#define RC0 640
#define RC1 672
#define RC2 704
#define RC3 736
#define RC4 768
#define RC5 800
#define RC6 832
#define RC7 864
#define RC8 896

DATA elemconst<>+0(SB)/4, $0x42b0999a
DATA elemconst<>+4(SB)/4, $0x42b0999a
DATA elemconst<>+8(SB)/4, $0x42b0999a
DATA elemconst<>+12(SB)/4, $0x42b0999a
DATA elemconst<>+16(SB)/4, $0x42b0999a
DATA elemconst<>+20(SB)/4, $0x42b0999a
DATA elemconst<>+24(SB)/4, $0x42b0999a
DATA elemconst<>+28(SB)/4, $0x42b0999a
DATA elemconst<>+32(SB)/4, $0xc2ae999a
DATA elemconst<>+36(SB)/4, $0xc2ae999a
DATA elemconst<>+40(SB)/4, $0xc2ae999a
DATA elemconst<>+44(SB)/4, $0xc2ae999a
DATA elemconst<>+48(SB)/4, $0xc2ae999a
DATA elemconst<>+52(SB)/4, $0xc2ae999a
DATA elemconst<>+56(SB)/4, $0xc2ae999a
DATA elemconst<>+60(SB)/4, $0xc2ae999a
DATA elemconst<>+64(SB)/4, $0x3fb8aa3b
DATA elemconst<>+68(SB)/4, $0x3fb8aa3b
DATA elemconst<>+72(SB)/4, $0x3fb8aa3b
DATA elemconst<>+76(SB)/4, $0x3fb8aa3b
DATA elemconst<>+80(SB)/4, $0x3fb8aa3b
DATA elemconst<>+84(SB)/4, $0x3fb8aa3b
DATA elemconst<>+88(SB)/4, $0x3fb8aa3b
DATA elemconst<>+92(SB)/4, $0x3fb8aa3b
DATA elemconst<>+96(SB)/4, $0x3f317200
DATA elemconst<>+100(SB)/4, $0x3f317200
DATA elemconst<>+104(SB)/4, $0x3f317200
DATA elemconst<>+108(SB)/4, $0x3f317200
DATA elemconst<>+112(SB)/4, $0x3f317200
DATA elemconst<>+116(SB)/4, $0x3f317200
DATA elemconst<>+120(SB)/4, $0x3f317200
DATA elemconst<>+124(SB)/4, $0x3f317200
DATA elemconst<>+128(SB)/4, $0x35bfbe8e
DATA elemconst<>+132(SB)/4, $0x35bfbe8e
DATA elemconst<>+136(SB)/4, $0x35bfbe8e
DATA elemconst<>+140(SB)/4, $0x35bfbe8e
DATA elemconst<>+144(SB)/4, $0x35bfbe8e
DATA elemconst<>+148(SB)/4, $0x35bfbe8e
DATA elemconst<>+152(SB)/4, $0x35bfbe8e
DATA elemconst<>+156(SB)/4, $0x35bfbe8e
DATA elemconst<>+160(SB)/4, $0x3f800000
DATA elemconst<>+164(SB)/4, $0x3f800000
DATA elemconst<>+168(SB)/4, $0x3f800000
DATA elemconst<>+172(SB)/4, $0x3f800000
DATA elemconst<>+176(SB)/4, $0x3f800000
DATA elemconst<>+180(SB)/4, $0x3f800000
DATA elemconst<>+184(SB)/4, $0x3f800000
DATA elemconst<>+188(SB)/4, $0x3f800000
DATA elemconst<>+192(SB)/4, $0x3f000000
DATA elemconst<>+196(SB)/4, $0x3f000000
DATA elemconst<>+200(SB)/4, $0x3f000000
DATA elemconst<>+204(SB)/4, $0x3f000000
DATA elemconst<>+208(SB)/4, $0x3f000000
DATA elemconst<>+212(SB)/4, $0x3f000000
DATA elemconst<>+216(SB)/4, $0x3f000000
DATA elemconst<>+220(SB)/4, $0x3f000000
DATA elemconst<>+224(SB)/4, $0x3f000000
DATA elemconst<>+228(SB)/4, $0x3f000000
DATA elemconst<>+232(SB)/4, $0x3f000000
DATA elemconst<>+236(SB)/4, $0x3f000000
DATA elemconst<>+240(SB)/4, $0x3f000000
DATA elemconst<>+244(SB)/4, $0x3f000000
DATA elemconst<>+248(SB)/4, $0x3f000000
DATA elemconst<>+252(SB)/4, $0x3f000000
DATA elemconst<>+256(SB)/4, $0x3e2aaaab
DATA elemconst<>+260(SB)/4, $0x3e2aaaab
DATA elemconst<>+264(SB)/4, $0x3e2aaaab
DATA elemconst<>+268(SB)/4, $0x3e2aaaab
DATA elemconst<>+272(SB)/4, $0x3e2aaaab
DATA elemconst<>+276(SB)/4, $0x3e2aaaab
DATA elemconst<>+280(SB)/4, $0x3e2aaaab
DATA elemconst<>+284(SB)/4, $0x3e2aaaab
DATA elemconst<>+288(SB)/4, $0x3d2aaaab
DATA elemconst<>+292(SB)/4, $0x3d2aaaab
DATA elemconst<>+296(SB)/4, $0x3d2aaaab
DATA elemconst<>+300(SB)/4, $0x3d2aaaab
DATA elemconst<>+304(SB)/4, $0x3d2aaaab
DATA elemconst<>+308(SB)/4, $0x3d2aaaab
DATA elemconst<>+312(SB)/4, $0x3d2aaaab
DATA elemconst<>+316(SB)/4, $0x3d2aaaab
DATA elemconst<>+320(SB)/4, $0x3c088889
DATA elemconst<>+324(SB)/4, $0x3c088889
DATA elemconst<>+328(SB)/4, $0x3c088889
DATA elemconst<>+332(SB)/4, $0x3c088889
DATA elemconst<>+336(SB)/4, $0x3c088889
DATA elemconst<>+340(SB)/4, $0x3c088889
DATA elemconst<>+344(SB)/4, $0x3c088889
DATA elemconst<>+348(SB)/4, $0x3c088889
DATA elemconst<>+352(SB)/4, $0x3ab60b61
DATA elemconst<>+356(SB)/4, $0x3ab60b61
DATA elemconst<>+360(SB)/4, $0x3ab60b61
DATA elemconst<>+364(SB)/4, $0x3ab60b61
DATA elemconst<>+368(SB)/4, $0x3ab60b61
DATA elemconst<>+372(SB)/4, $0x3ab60b61
DATA elemconst<>+376(SB)/4, $0x3ab60b61
DATA elemconst<>+380(SB)/4, $0x3ab60b61
DATA elemconst<>+384(SB)/4, $0x39500d01
DATA elemconst<>+388(SB)/4, $0x39500d01
DATA elemconst<>+392(SB)/4, $0x39500d01
DATA elemconst<>+396(SB)/4, $0x39500d01
DATA elemconst<>+400(SB)/4, $0x39500d01
DATA elemconst<>+404(SB)/4, $0x39500d01
DATA elemconst<>+408(SB)/4, $0x39500d01
DATA elemconst<>+412(SB)/4, $0x39500d01
DATA elemconst<>+416(SB)/4, $0x3f3504f3
DATA elemconst<>+420(SB)/4, $0x3f3504f3
DATA elemconst<>+424(SB)/4, $0x3f3504f3
DATA elemconst<>+428(SB)/4, $0x3f3504f3
DATA elemconst<>+432(SB)/4, $0x3f3504f3
DATA elemconst<>+436(SB)/4, $0x3f3504f3
DATA elemconst<>+440(SB)/4, $0x3f3504f3
DATA elemconst<>+444(SB)/4, $0x3f3504f3
DATA elemconst<>+448(SB)/4, $0x7fffffff
DATA elemconst<>+452(SB)/4, $0x7fffffff
DATA elemconst<>+456(SB)/4, $0x7fffffff
DATA elemconst<>+460(SB)/4, $0x7fffffff
DATA elemconst<>+464(SB)/4, $0x7fffffff
DATA elemconst<>+468(SB)/4, $0x7fffffff
DATA elemconst<>+472(SB)/4, $0x7fffffff
DATA elemconst<>+476(SB)/4, $0x7fffffff
DATA elemconst<>+480(SB)/4, $0x40f00000
DATA elemconst<>+484(SB)/4, $0x40f00000
DATA elemconst<>+488(SB)/4, $0x40f00000
DATA elemconst<>+492(SB)/4, $0x40f00000
DATA elemconst<>+496(SB)/4, $0x40f00000
DATA elemconst<>+500(SB)/4, $0x40f00000
DATA elemconst<>+504(SB)/4, $0x40f00000
DATA elemconst<>+508(SB)/4, $0x40f00000
DATA elemconst<>+512(SB)/4, $0x3f1af287
DATA elemconst<>+516(SB)/4, $0x3f1af287
DATA elemconst<>+520(SB)/4, $0x3f1af287
DATA elemconst<>+524(SB)/4, $0x3f1af287
DATA elemconst<>+528(SB)/4, $0x3f1af287
DATA elemconst<>+532(SB)/4, $0x3f1af287
DATA elemconst<>+536(SB)/4, $0x3f1af287
DATA elemconst<>+540(SB)/4, $0x3f1af287
DATA elemconst<>+544(SB)/4, $0x40222222
DATA elemconst<>+548(SB)/4, $0x40222222
DATA elemconst<>+552(SB)/4, $0x40222222
DATA elemconst<>+556(SB)/4, $0x40222222
DATA elemconst<>+560(SB)/4, $0x40222222
DATA elemconst<>+564(SB)/4, $0x40222222
DATA elemconst<>+568(SB)/4, $0x40222222
DATA elemconst<>+572(SB)/4, $0x40222222
DATA elemconst<>+576(SB)/4, $0x3ecc422a
DATA elemconst<>+580(SB)/4, $0x3ecc422a
DATA elemconst<>+584(SB)/4, $0x3ecc422a
DATA elemconst<>+588(SB)/4, $0x3ecc422a
DATA elemconst<>+592(SB)/4, $0x3ecc422a
DATA elemconst<>+596(SB)/4, $0x3ecc422a
DATA elemconst<>+600(SB)/4, $0x3ecc422a
DATA elemconst<>+604(SB)/4, $0x3ecc422a
DATA elemconst<>+608(SB)/4, $0xff800000
DATA elemconst<>+612(SB)/4, $0xff800000
DATA elemconst<>+616(SB)/4, $0xff800000
DATA elemconst<>+620(SB)/4, $0xff800000
DATA elemconst<>+624(SB)/4, $0xff800000
DATA elemconst<>+628(SB)/4, $0xff800000
DATA elemconst<>+632(SB)/4, $0xff800000
DATA elemconst<>+636(SB)/4, $0xff800000
DATA elemconst<>+640(SB)/4, $0x3e96e72e
DATA elemconst<>+644(SB)/4, $0x3e96e72e
DATA elemconst<>+648(SB)/4, $0x3e96e72e
DATA elemconst<>+652(SB)/4, $0x3e96e72e
DATA elemconst<>+656(SB)/4, $0x3e96e72e
DATA elemconst<>+660(SB)/4, $0x3e96e72e
DATA elemconst<>+664(SB)/4, $0x3e96e72e
DATA elemconst<>+668(SB)/4, $0x3e96e72e
DATA elemconst<>+672(SB)/4, $0x3e23777a
DATA elemconst<>+676(SB)/4, $0x3e23777a
DATA elemconst<>+680(SB)/4, $0x3e23777a
DATA elemconst<>+684(SB)/4, $0x3e23777a
DATA elemconst<>+688(SB)/4, $0x3e23777a
DATA elemconst<>+692(SB)/4, $0x3e23777a
DATA elemconst<>+696(SB)/4, $0x3e23777a
DATA elemconst<>+700(SB)/4, $0x3e23777a
DATA elemconst<>+704(SB)/4, $0x3d3d14c2
DATA elemconst<>+708(SB)/4, $0x3d3d14c2
DATA elemconst<>+712(SB)/4, $0x3d3d14c2
DATA elemconst<>+716(SB)/4, $0x3d3d14c2
DATA elemconst<>+720(SB)/4, $0x3d3d14c2
DATA elemconst<>+724(SB)/4, $0x3d3d14c2
DATA elemconst<>+728(SB)/4, $0x3d3d14c2
DATA elemconst<>+732(SB)/4, $0x3d3d14c2
DATA elemconst<>+736(SB)/4, $0x3b01b289
DATA elemconst<>+740(SB)/4, $0x3b01b289
DATA elemconst<>+744(SB)/4, $0x3b01b289
DATA elemconst<>+748(SB)/4, $0x3b01b289
DATA elemconst<>+752(SB)/4, $0x3b01b289
DATA elemconst<>+756(SB)/4, $0x3b01b289
DATA elemconst<>+760(SB)/4, $0x3b01b289
DATA elemconst<>+764(SB)/4, $0x3b01b289
DATA elemconst<>+768(SB)/4, $0xbb260a00
DATA elemconst<>+772(SB)/4, $0xbb260a00
DATA elemconst<>+776(SB)/4, $0xbb260a00
DATA elemconst<>+780(SB)/4, $0xbb260a00
DATA elemconst<>+784(SB)/4, $0xbb260a00
DATA elemconst<>+788(SB)/4, $0xbb260a00
DATA elemconst<>+792(SB)/4, $0xbb260a00
DATA elemconst<>+796(SB)/4, $0xbb260a00
DATA elemconst<>+800(SB)/4, $0xb931e615
DATA elemconst<>+804(SB)/4, $0xb931e615
DATA elemconst<>+808(SB)/4, $0xb931e615
DATA elemconst<>+812(SB)/4, $0xb931e615
DATA elemconst<>+816(SB)/4, $0xb931e615
DATA elemconst<>+820(SB)/4, $0xb931e615
DATA elemconst<>+824(SB)/4, $0xb931e615
DATA elemconst<>+828(SB)/4, $0xb931e615
DATA elemconst<>+832(SB)/4, $0x395de399
DATA elemconst<>+836(SB)/4, $0x395de399
DATA elemconst<>+840(SB)/4, $0x395de399
DATA elemconst<>+844(SB)/4, $0x395de399
DATA elemconst<>+848(SB)/4, $0x395de399
DATA elemconst<>+852(SB)/4, $0x395de399
DATA elemconst<>+856(SB)/4, $0x395de399
DATA elemconst<>+860(SB)/4, $0x395de399
DATA elemconst<>+864(SB)/4, $0xb593984e
DATA elemconst<>+868(SB)/4, $0xb593984e
DATA elemconst<>+872(SB)/4, $0xb593984e
DATA elemconst<>+876(SB)/4, $0xb593984e
DATA elemconst<>+880(SB)/4, $0xb593984e
DATA elemconst<>+884(SB)/4, $0xb593984e
DATA elemconst<>+888(SB)/4, $0xb593984e
DATA elemconst<>+892(SB)/4, $0xb593984e
DATA elemconst<>+896(SB)/4, $0xb78c044c
DATA elemconst<>+900(SB)/4, $0xb78c044c
DATA elemconst<>+904(SB)/4, $0xb78c044c
DATA elemconst<>+908(SB)/4, $0xb78c044c
DATA elemconst<>+912(SB)/4, $0xb78c044c
DATA elemconst<>+916(SB)/4, $0xb78c044c
DATA elemconst<>+920(SB)/4, $0xb78c044c
DATA elemconst<>+924(SB)/4, $0xb78c044c
GLOBL elemconst<>(SB), RODATA|NOPTR, $928

// func expShift8(x *float32, n int, shift float32) float32
//
// x[i] = exp(x[i] − shift) for i < n, n a positive multiple of 8; returns Σ x[i] (summed in 8
// lanes, then across them).
TEXT ·expShift8(SB), NOSPLIT, $0-28
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS shift+16(FP), Y5
	VXORPS Y4, Y4, Y4
exploop:
	VMOVUPS (SI), Y0
	VSUBPS Y5, Y0, Y0
	VCMPPS $1, elemconst<>+EXP_LO(SB), Y0, Y7 // x < −87.3: e^x is flushed to 0
	VMOVUPS elemconst<>+EXP_HI(SB), Y2
	VMINPS Y0, Y2, Y0
	VMOVUPS elemconst<>+EXP_LO(SB), Y2
	VMAXPS Y0, Y2, Y0
	VMULPS elemconst<>+LOG2E(SB), Y0, Y1
	VROUNDPS $0, Y1, Y1
	VFNMADD231PS elemconst<>+LN2_HI(SB), Y1, Y0
	VFNMADD231PS elemconst<>+LN2_LO(SB), Y1, Y0
	VMOVUPS elemconst<>+C7(SB), Y2
	VFMADD213PS elemconst<>+C6(SB), Y0, Y2
	VFMADD213PS elemconst<>+C5(SB), Y0, Y2
	VFMADD213PS elemconst<>+C4(SB), Y0, Y2
	VFMADD213PS elemconst<>+C3(SB), Y0, Y2
	VFMADD213PS elemconst<>+C2(SB), Y0, Y2
	VFMADD213PS elemconst<>+ONE(SB), Y0, Y2
	VFMADD213PS elemconst<>+ONE(SB), Y0, Y2
	VCVTPS2DQ Y1, Y1
	VPSLLD $23, Y1, Y1
	VPADDD elemconst<>+ONE(SB), Y1, Y1
	VMULPS Y1, Y2, Y0
	VANDNPS Y0, Y7, Y0
	VMOVUPS Y0, (SI)
	VADDPS Y0, Y4, Y4
	ADDQ $32, SI
	SUBQ $8, CX
	JNZ exploop
	VEXTRACTF128 $1, Y4, X1
	VADDPS X1, X4, X4
	VHADDPS X4, X4, X4
	VHADDPS X4, X4, X4
	VZEROUPPER
	MOVSS X4, ret+24(FP)
	RET

// func gelu8(out, x *float32, n int)
//
// out[i] = GELU(x[i]) for i < n, n a positive multiple of 8. out may be x.
TEXT ·gelu8(SB), NOSPLIT, $0-24
	MOVQ out+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
geluloop:
	VMOVUPS (SI), Y0 // x
	VMULPS elemconst<>+RSQRT2(SB), Y0, Y3
	VANDPS elemconst<>+ABSMASK(SB), Y3, Y3
	VMOVUPS elemconst<>+ZMAX(SB), Y6
	VMINPS Y3, Y6, Y3 // NaN passes through
	VMOVUPS elemconst<>+HALF(SB), Y2
	VFMADD213PS elemconst<>+ONE(SB), Y3, Y2 // 1 + a/2
	VMOVUPS elemconst<>+ONE(SB), Y6
	VDIVPS Y2, Y6, Y2 // t
	VSUBPS elemconst<>+TC(SB), Y2, Y1
	VMULPS elemconst<>+RTH(SB), Y1, Y1 // u
	VMOVUPS elemconst<>+RC8(SB), Y4
	VFMADD213PS elemconst<>+RC7(SB), Y1, Y4
	VFMADD213PS elemconst<>+RC6(SB), Y1, Y4
	VFMADD213PS elemconst<>+RC5(SB), Y1, Y4
	VFMADD213PS elemconst<>+RC4(SB), Y1, Y4
	VFMADD213PS elemconst<>+RC3(SB), Y1, Y4
	VFMADD213PS elemconst<>+RC2(SB), Y1, Y4
	VFMADD213PS elemconst<>+RC1(SB), Y1, Y4
	VFMADD213PS elemconst<>+RC0(SB), Y1, Y4
	VMULPS Y2, Y4, Y1 // t·R(u)
	VXORPS Y6, Y6, Y6
	VFNMADD213PS Y6, Y3, Y3 // −a²
	VMULPS elemconst<>+LOG2E(SB), Y3, Y5
	VROUNDPS $0, Y5, Y5
	VFNMADD231PS elemconst<>+LN2_HI(SB), Y5, Y3
	VFNMADD231PS elemconst<>+LN2_LO(SB), Y5, Y3
	VMOVUPS elemconst<>+C7(SB), Y6
	VFMADD213PS elemconst<>+C6(SB), Y3, Y6
	VFMADD213PS elemconst<>+C5(SB), Y3, Y6
	VFMADD213PS elemconst<>+C4(SB), Y3, Y6
	VFMADD213PS elemconst<>+C3(SB), Y3, Y6
	VFMADD213PS elemconst<>+C2(SB), Y3, Y6
	VFMADD213PS elemconst<>+ONE(SB), Y3, Y6
	VFMADD213PS elemconst<>+ONE(SB), Y3, Y6
	VCVTPS2DQ Y5, Y5
	VPSLLD $23, Y5, Y5
	VPADDD elemconst<>+ONE(SB), Y5, Y5
	VMULPS Y5, Y6, Y3
	VMULPS Y3, Y1, Y1 // erfc(a)/2
	VMOVUPS elemconst<>+ONE(SB), Y6
	VSUBPS Y1, Y6, Y6 // 1 − q
	VBLENDVPS Y0, Y1, Y6, Y1 // Φ: q where x < 0, else 1 − q
	VMULPS Y1, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JNZ geluloop
	VZEROUPPER
	RET

// func geluGrad8(out, x, dout *float32, n int)
//
// out[i] = dout[i]·GELU'(x[i]) = dout[i]·(Φ(x) + x·φ(x)) for i < n, n a positive multiple of 8.
// out may be dout.
TEXT ·geluGrad8(SB), NOSPLIT, $0-32
	MOVQ out+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ dout+16(FP), DX
	MOVQ n+24(FP), CX
gradloop:
	VMOVUPS (SI), Y0 // x
	VMULPS elemconst<>+RSQRT2(SB), Y0, Y3
	VANDPS elemconst<>+ABSMASK(SB), Y3, Y3
	VMOVUPS elemconst<>+ZMAX(SB), Y6
	VMINPS Y3, Y6, Y3 // NaN passes through
	VMOVUPS elemconst<>+HALF(SB), Y2
	VFMADD213PS elemconst<>+ONE(SB), Y3, Y2 // 1 + a/2
	VMOVUPS elemconst<>+ONE(SB), Y6
	VDIVPS Y2, Y6, Y2 // t
	VSUBPS elemconst<>+TC(SB), Y2, Y1
	VMULPS elemconst<>+RTH(SB), Y1, Y1 // u
	VMOVUPS elemconst<>+RC8(SB), Y4
	VFMADD213PS elemconst<>+RC7(SB), Y1, Y4
	VFMADD213PS elemconst<>+RC6(SB), Y1, Y4
	VFMADD213PS elemconst<>+RC5(SB), Y1, Y4
	VFMADD213PS elemconst<>+RC4(SB), Y1, Y4
	VFMADD213PS elemconst<>+RC3(SB), Y1, Y4
	VFMADD213PS elemconst<>+RC2(SB), Y1, Y4
	VFMADD213PS elemconst<>+RC1(SB), Y1, Y4
	VFMADD213PS elemconst<>+RC0(SB), Y1, Y4
	VMULPS Y2, Y4, Y1 // t·R(u)
	VXORPS Y6, Y6, Y6
	VFNMADD213PS Y6, Y3, Y3 // −a²
	VMULPS elemconst<>+LOG2E(SB), Y3, Y5
	VROUNDPS $0, Y5, Y5
	VFNMADD231PS elemconst<>+LN2_HI(SB), Y5, Y3
	VFNMADD231PS elemconst<>+LN2_LO(SB), Y5, Y3
	VMOVUPS elemconst<>+C7(SB), Y6
	VFMADD213PS elemconst<>+C6(SB), Y3, Y6
	VFMADD213PS elemconst<>+C5(SB), Y3, Y6
	VFMADD213PS elemconst<>+C4(SB), Y3, Y6
	VFMADD213PS elemconst<>+C3(SB), Y3, Y6
	VFMADD213PS elemconst<>+C2(SB), Y3, Y6
	VFMADD213PS elemconst<>+ONE(SB), Y3, Y6
	VFMADD213PS elemconst<>+ONE(SB), Y3, Y6
	VCVTPS2DQ Y5, Y5
	VPSLLD $23, Y5, Y5
	VPADDD elemconst<>+ONE(SB), Y5, Y5
	VMULPS Y5, Y6, Y3
	VMULPS Y3, Y1, Y1 // erfc(a)/2
	VMOVUPS elemconst<>+ONE(SB), Y6
	VSUBPS Y1, Y6, Y6 // 1 − q
	VBLENDVPS Y0, Y1, Y6, Y1 // Φ: q where x < 0, else 1 − q
	VMULPS elemconst<>+RSQRT2PI(SB), Y3, Y3 // φ
	VFMADD231PS Y3, Y0, Y1 // Φ + x·φ
	VMULPS (DX), Y1, Y1
	VMOVUPS Y1, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	SUBQ $8, CX
	JNZ gradloop
	VZEROUPPER
	RET

// func geluBoth8(act, grad, x *float32, n int)
//
// act[i] = GELU(x[i]) and grad[i] = GELU'(x[i]) for i < n, n a positive multiple of 8, computed
// as in gelu8 and geluGrad8. grad may be x.
TEXT ·geluBoth8(SB), NOSPLIT, $0-32
	MOVQ act+0(FP), DI
	MOVQ grad+8(FP), DX
	MOVQ x+16(FP), SI
	MOVQ n+24(FP), CX
bothloop:
	VMOVUPS (SI), Y0 // x
	VMULPS elemconst<>+RSQRT2(SB), Y0, Y3
	VANDPS elemconst<>+ABSMASK(SB), Y3, Y3
	VMOVUPS elemconst<>+ZMAX(SB), Y6
	VMINPS Y3, Y6, Y3 // NaN passes through
	VMOVUPS elemconst<>+HALF(SB), Y2
	VFMADD213PS elemconst<>+ONE(SB), Y3, Y2 // 1 + a/2
	VMOVUPS elemconst<>+ONE(SB), Y6
	VDIVPS Y2, Y6, Y2 // t
	VSUBPS elemconst<>+TC(SB), Y2, Y1
	VMULPS elemconst<>+RTH(SB), Y1, Y1 // u
	VMOVUPS elemconst<>+RC8(SB), Y4
	VFMADD213PS elemconst<>+RC7(SB), Y1, Y4
	VFMADD213PS elemconst<>+RC6(SB), Y1, Y4
	VFMADD213PS elemconst<>+RC5(SB), Y1, Y4
	VFMADD213PS elemconst<>+RC4(SB), Y1, Y4
	VFMADD213PS elemconst<>+RC3(SB), Y1, Y4
	VFMADD213PS elemconst<>+RC2(SB), Y1, Y4
	VFMADD213PS elemconst<>+RC1(SB), Y1, Y4
	VFMADD213PS elemconst<>+RC0(SB), Y1, Y4
	VMULPS Y2, Y4, Y1 // t·R(u)
	VXORPS Y6, Y6, Y6
	VFNMADD213PS Y6, Y3, Y3 // −a²
	VMULPS elemconst<>+LOG2E(SB), Y3, Y5
	VROUNDPS $0, Y5, Y5
	VFNMADD231PS elemconst<>+LN2_HI(SB), Y5, Y3
	VFNMADD231PS elemconst<>+LN2_LO(SB), Y5, Y3
	VMOVUPS elemconst<>+C7(SB), Y6
	VFMADD213PS elemconst<>+C6(SB), Y3, Y6
	VFMADD213PS elemconst<>+C5(SB), Y3, Y6
	VFMADD213PS elemconst<>+C4(SB), Y3, Y6
	VFMADD213PS elemconst<>+C3(SB), Y3, Y6
	VFMADD213PS elemconst<>+C2(SB), Y3, Y6
	VFMADD213PS elemconst<>+ONE(SB), Y3, Y6
	VFMADD213PS elemconst<>+ONE(SB), Y3, Y6
	VCVTPS2DQ Y5, Y5
	VPSLLD $23, Y5, Y5
	VPADDD elemconst<>+ONE(SB), Y5, Y5
	VMULPS Y5, Y6, Y3
	VMULPS Y3, Y1, Y1 // erfc(a)/2
	VMOVUPS elemconst<>+ONE(SB), Y6
	VSUBPS Y1, Y6, Y6 // 1 − q
	VBLENDVPS Y0, Y1, Y6, Y1 // Φ: q where x < 0, else 1 − q
	VMULPS Y1, Y0, Y6 // GELU = x·Φ
	VMOVUPS Y6, (DI)
	VMULPS elemconst<>+RSQRT2PI(SB), Y3, Y3 // φ
	VFMADD231PS Y3, Y0, Y1 // Φ + x·φ
	VMOVUPS Y1, (DX)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	SUBQ $8, CX
	JNZ bothloop
	VZEROUPPER
	RET

// func geluBoth16(act, grad, x *float32, n int)
//
// geluBoth8 over 16 lanes (AVX-512F), n a positive multiple of 16. grad may be x.
TEXT ·geluBoth16(SB), NOSPLIT, $0-32
	MOVQ act+0(FP), DI
	MOVQ grad+8(FP), DX
	MOVQ x+16(FP), SI
	MOVQ n+24(FP), CX
	VPXORD Z31, Z31, Z31
both16loop:
	VMOVUPS (SI), Z0 // x
	VMULPS.BCST elemconst<>+RSQRT2(SB), Z0, Z3
	VPANDD.BCST elemconst<>+ABSMASK(SB), Z3, Z3
	VBROADCASTSS elemconst<>+ZMAX(SB), Z6
	VMINPS Z3, Z6, Z3 // a, NaN passes through
	VBROADCASTSS elemconst<>+HALF(SB), Z2
	VFMADD213PS.BCST elemconst<>+ONE(SB), Z3, Z2 // 1 + a/2
	VBROADCASTSS elemconst<>+ONE(SB), Z6
	VDIVPS Z2, Z6, Z2 // t
	VSUBPS.BCST elemconst<>+TC(SB), Z2, Z1
	VMULPS.BCST elemconst<>+RTH(SB), Z1, Z1 // u
	VBROADCASTSS elemconst<>+RC8(SB), Z4
	VFMADD213PS.BCST elemconst<>+RC7(SB), Z1, Z4
	VFMADD213PS.BCST elemconst<>+RC6(SB), Z1, Z4
	VFMADD213PS.BCST elemconst<>+RC5(SB), Z1, Z4
	VFMADD213PS.BCST elemconst<>+RC4(SB), Z1, Z4
	VFMADD213PS.BCST elemconst<>+RC3(SB), Z1, Z4
	VFMADD213PS.BCST elemconst<>+RC2(SB), Z1, Z4
	VFMADD213PS.BCST elemconst<>+RC1(SB), Z1, Z4
	VFMADD213PS.BCST elemconst<>+RC0(SB), Z1, Z4
	VMULPS Z2, Z4, Z1 // t·R(u)
	VFNMADD213PS Z31, Z3, Z3 // −a²
	VMULPS.BCST elemconst<>+LOG2E(SB), Z3, Z5
	VRNDSCALEPS $0, Z5, Z5
	VFNMADD231PS.BCST elemconst<>+LN2_HI(SB), Z5, Z3
	VFNMADD231PS.BCST elemconst<>+LN2_LO(SB), Z5, Z3
	VBROADCASTSS elemconst<>+C7(SB), Z6
	VFMADD213PS.BCST elemconst<>+C6(SB), Z3, Z6
	VFMADD213PS.BCST elemconst<>+C5(SB), Z3, Z6
	VFMADD213PS.BCST elemconst<>+C4(SB), Z3, Z6
	VFMADD213PS.BCST elemconst<>+C3(SB), Z3, Z6
	VFMADD213PS.BCST elemconst<>+C2(SB), Z3, Z6
	VFMADD213PS.BCST elemconst<>+ONE(SB), Z3, Z6
	VFMADD213PS.BCST elemconst<>+ONE(SB), Z3, Z6
	VCVTPS2DQ Z5, Z5
	VPSLLD $23, Z5, Z5
	VPADDD.BCST elemconst<>+ONE(SB), Z5, Z5
	VMULPS Z5, Z6, Z3
	VMULPS Z3, Z1, Z1 // q = erfc(a)/2
	VBROADCASTSS elemconst<>+ONE(SB), Z6
	VSUBPS Z1, Z6, Z6 // 1 − q
	VCMPPS $1, Z31, Z0, K2 // x < 0
	VBLENDMPS Z1, Z6, K2, Z1 // Φ: q where x < 0, else 1 − q
	VMULPS Z1, Z0, Z6 // GELU = x·Φ
	VMOVUPS Z6, (DI)
	VMULPS.BCST elemconst<>+RSQRT2PI(SB), Z3, Z3 // φ
	VFMADD231PS Z3, Z0, Z1 // Φ + x·φ
	VMOVUPS Z1, (DX)
	ADDQ $64, SI
	ADDQ $64, DX
	ADDQ $64, DI
	SUBQ $16, CX
	JNZ both16loop
	VZEROUPPER
	RET
// x[i] *= s for i < n, n a positive multiple of 8; returns the largest x[i] after scaling.
TEXT ·scaleMax8(SB), NOSPLIT, $0-28
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS s+16(FP), Y1
	VMOVUPS elemconst<>+NEGINF(SB), Y2
scalemaxloop:
	VMULPS (SI), Y1, Y0
	VMOVUPS Y0, (SI)
	VMAXPS Y0, Y2, Y2
	ADDQ $32, SI
	SUBQ $8, CX
	JNZ scalemaxloop
	VEXTRACTF128 $1, Y2, X3
	VMAXPS X3, X2, X2
	VPERMILPS $0x4e, X2, X3
	VMAXPS X3, X2, X2
	VPERMILPS $0xb1, X2, X3
	VMAXPS X3, X2, X2
	VZEROUPPER
	MOVSS X2, ret+24(FP)
	RET

// func expShift16(x *float32, n int, shift float32) float32
//
// expShift8 for any n ≥ 1, 16 lanes at a time (AVX-512F), the last n mod 16 under a mask:
// x[i] = exp(x[i] − shift) for i < n; returns Σ x[i] (summed in 16 lanes, then across them).
// The exp is expShift8's, operation for operation, so each element is the same.
TEXT ·expShift16(SB), NOSPLIT, $0-28
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), DX
	VBROADCASTSS shift+16(FP), Z5
	VPXORD Z4, Z4, Z4
	VPXORD Z31, Z31, Z31
	MOVQ DX, CX
	SHRQ $4, CX
	JZ exp16tail
exp16loop:
	VMOVUPS (SI), Z0
	VSUBPS Z5, Z0, Z0
	VCMPPS.BCST $1, elemconst<>+EXP_LO(SB), Z0, K1 // x < −87.3: e^x is flushed to 0
	VBROADCASTSS elemconst<>+EXP_HI(SB), Z2
	VMINPS Z0, Z2, Z0
	VBROADCASTSS elemconst<>+EXP_LO(SB), Z2
	VMAXPS Z0, Z2, Z0
	VMULPS.BCST elemconst<>+LOG2E(SB), Z0, Z1
	VRNDSCALEPS $0, Z1, Z1
	VFNMADD231PS.BCST elemconst<>+LN2_HI(SB), Z1, Z0
	VFNMADD231PS.BCST elemconst<>+LN2_LO(SB), Z1, Z0
	VBROADCASTSS elemconst<>+C7(SB), Z2
	VFMADD213PS.BCST elemconst<>+C6(SB), Z0, Z2
	VFMADD213PS.BCST elemconst<>+C5(SB), Z0, Z2
	VFMADD213PS.BCST elemconst<>+C4(SB), Z0, Z2
	VFMADD213PS.BCST elemconst<>+C3(SB), Z0, Z2
	VFMADD213PS.BCST elemconst<>+C2(SB), Z0, Z2
	VFMADD213PS.BCST elemconst<>+ONE(SB), Z0, Z2
	VFMADD213PS.BCST elemconst<>+ONE(SB), Z0, Z2
	VCVTPS2DQ Z1, Z1
	VPSLLD $23, Z1, Z1
	VPADDD.BCST elemconst<>+ONE(SB), Z1, Z1
	VMULPS Z1, Z2, Z0
	VMOVAPS Z31, K1, Z0
	VMOVUPS Z0, (SI)
	VADDPS Z0, Z4, Z4
	ADDQ $64, SI
	DECQ CX
	JNZ exp16loop
exp16tail:
	ANDQ $15, DX
	JZ exp16sum
	MOVQ DX, CX
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K2
	VMOVUPS.Z (SI), K2, Z0
	VSUBPS Z5, Z0, Z0
	VCMPPS.BCST $1, elemconst<>+EXP_LO(SB), Z0, K1 // x < −87.3: e^x is flushed to 0
	VBROADCASTSS elemconst<>+EXP_HI(SB), Z2
	VMINPS Z0, Z2, Z0
	VBROADCASTSS elemconst<>+EXP_LO(SB), Z2
	VMAXPS Z0, Z2, Z0
	VMULPS.BCST elemconst<>+LOG2E(SB), Z0, Z1
	VRNDSCALEPS $0, Z1, Z1
	VFNMADD231PS.BCST elemconst<>+LN2_HI(SB), Z1, Z0
	VFNMADD231PS.BCST elemconst<>+LN2_LO(SB), Z1, Z0
	VBROADCASTSS elemconst<>+C7(SB), Z2
	VFMADD213PS.BCST elemconst<>+C6(SB), Z0, Z2
	VFMADD213PS.BCST elemconst<>+C5(SB), Z0, Z2
	VFMADD213PS.BCST elemconst<>+C4(SB), Z0, Z2
	VFMADD213PS.BCST elemconst<>+C3(SB), Z0, Z2
	VFMADD213PS.BCST elemconst<>+C2(SB), Z0, Z2
	VFMADD213PS.BCST elemconst<>+ONE(SB), Z0, Z2
	VFMADD213PS.BCST elemconst<>+ONE(SB), Z0, Z2
	VCVTPS2DQ Z1, Z1
	VPSLLD $23, Z1, Z1
	VPADDD.BCST elemconst<>+ONE(SB), Z1, Z1
	VMULPS Z1, Z2, Z0
	VMOVAPS Z31, K1, Z0
	VMOVUPS Z0, K2, (SI)
	VADDPS Z0, Z4, K2, Z4
exp16sum:
	VEXTRACTF64X4 $1, Z4, Y1
	VADDPS Y1, Y4, Y4
	VEXTRACTF128 $1, Y4, X1
	VADDPS X1, X4, X4
	VHADDPS X4, X4, X4
	VHADDPS X4, X4, X4
	VZEROUPPER
	MOVSS X4, ret+24(FP)
	RET

// func scaleMax16(x *float32, n int, s float32) float32
//
// scaleMax8 for any n ≥ 1, 16 lanes at a time (AVX-512F), the last n mod 16 under a mask:
// x[i] *= s for i < n; returns the largest x[i] after scaling.
TEXT ·scaleMax16(SB), NOSPLIT, $0-28
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), DX
	VBROADCASTSS s+16(FP), Z1
	VBROADCASTSS elemconst<>+NEGINF(SB), Z2
	MOVQ DX, CX
	SHRQ $4, CX
	JZ smax16tail
smax16loop:
	VMULPS (SI), Z1, Z0
	VMOVUPS Z0, (SI)
	VMAXPS Z0, Z2, Z2
	ADDQ $64, SI
	DECQ CX
	JNZ smax16loop
smax16tail:
	ANDQ $15, DX
	JZ smax16reduce
	MOVQ DX, CX
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K2
	VMOVUPS.Z (SI), K2, Z0
	VMULPS Z0, Z1, Z0
	VMOVUPS Z0, K2, (SI)
	VMAXPS Z0, Z2, K2, Z2
smax16reduce:
	VEXTRACTF64X4 $1, Z2, Y3
	VMAXPS Y3, Y2, Y2
	VEXTRACTF128 $1, Y2, X3
	VMAXPS X3, X2, X2
	VPERMILPS $0x4e, X2, X3
	VMAXPS X3, X2, X2
	VPERMILPS $0xb1, X2, X3
	VMAXPS X3, X2, X2
	VZEROUPPER
	MOVSS X2, ret+24(FP)
	RET

// func scaleMaxRows8(x *float32, ld, rows, w int, s float32, mx *float32)
//
// Multiplies the first w floats of each of rows rows of x (ld floats apart) by s, and sets
// mx[r] to the largest of row r; w is a positive multiple of 8 (rows ≥ 1). Each row as
// scaleMax8 would do it.
TEXT ·scaleMaxRows8(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), SI
	MOVQ ld+8(FP), R8
	SHLQ $2, R8
	MOVQ rows+16(FP), R9
	MOVQ w+24(FP), R10
	SHRQ $3, R10 // vectors per row
	VBROADCASTSS s+32(FP), Y1
	MOVQ mx+40(FP), DI
scaleMaxRows8row:
	VMOVUPS elemconst<>+NEGINF(SB), Y2
	MOVQ SI, AX
	MOVQ R10, CX
scaleMaxRows8vec:
	VMULPS (AX), Y1, Y0
	VMOVUPS Y0, (AX)
	VMAXPS Y0, Y2, Y2
	ADDQ $32, AX
	DECQ CX
	JNZ scaleMaxRows8vec
	VEXTRACTF128 $1, Y2, X3
	VMAXPS X3, X2, X2
	VPERMILPS $0x4e, X2, X3
	VMAXPS X3, X2, X2
	VPERMILPS $0xb1, X2, X3
	VMAXPS X3, X2, X2
	MOVSS X2, (DI)
	ADDQ $4, DI
	ADDQ R8, SI
	DECQ R9
	JNZ scaleMaxRows8row
	VZEROUPPER
	RET

// func expRows8(x *float32, ld, rows, w int, shift, sums *float32)
//
// Replaces the first w floats of each of rows rows of x (ld floats apart) by e^(x − shift[r])
// and sets sums[r] to their sum; w is a positive multiple of 8 (rows ≥ 1). Each row as
// expShift8 would do it, so a row padded with −Inf (whose exponentials are 0) gets the
// elements and the sum of its unpadded part.
TEXT ·expRows8(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), SI
	MOVQ ld+8(FP), R8
	SHLQ $2, R8
	MOVQ rows+16(FP), R9
	MOVQ w+24(FP), R10
	SHRQ $3, R10 // vectors per row
	MOVQ shift+32(FP), DX
	MOVQ sums+40(FP), DI
expRows8row:
	VBROADCASTSS (DX), Y5
	VXORPS Y4, Y4, Y4
	MOVQ SI, AX
	MOVQ R10, CX
expRows8vec:
	VMOVUPS (AX), Y0
	VSUBPS Y5, Y0, Y0
	VCMPPS $1, elemconst<>+EXP_LO(SB), Y0, Y7 // x < −87.3: e^x is flushed to 0
	VMOVUPS elemconst<>+EXP_HI(SB), Y2
	VMINPS Y0, Y2, Y0
	VMOVUPS elemconst<>+EXP_LO(SB), Y2
	VMAXPS Y0, Y2, Y0
	VMULPS elemconst<>+LOG2E(SB), Y0, Y1
	VROUNDPS $0, Y1, Y1
	VFNMADD231PS elemconst<>+LN2_HI(SB), Y1, Y0
	VFNMADD231PS elemconst<>+LN2_LO(SB), Y1, Y0
	VMOVUPS elemconst<>+C7(SB), Y2
	VFMADD213PS elemconst<>+C6(SB), Y0, Y2
	VFMADD213PS elemconst<>+C5(SB), Y0, Y2
	VFMADD213PS elemconst<>+C4(SB), Y0, Y2
	VFMADD213PS elemconst<>+C3(SB), Y0, Y2
	VFMADD213PS elemconst<>+C2(SB), Y0, Y2
	VFMADD213PS elemconst<>+ONE(SB), Y0, Y2
	VFMADD213PS elemconst<>+ONE(SB), Y0, Y2
	VCVTPS2DQ Y1, Y1
	VPSLLD $23, Y1, Y1
	VPADDD elemconst<>+ONE(SB), Y1, Y1
	VMULPS Y1, Y2, Y0
	VANDNPS Y0, Y7, Y0
	VMOVUPS Y0, (AX)
	VADDPS Y0, Y4, Y4
	ADDQ $32, AX
	DECQ CX
	JNZ expRows8vec
	VEXTRACTF128 $1, Y4, X1
	VADDPS X1, X4, X4
	VHADDPS X4, X4, X4
	VHADDPS X4, X4, X4
	MOVSS X4, (DI)
	ADDQ $4, DX
	ADDQ $4, DI
	ADDQ R8, SI
	DECQ R9
	JNZ expRows8row
	VZEROUPPER
	RET

// func scaleMaxRows16(x *float32, ld, rows, w int, s float32, mx *float32)
//
// Multiplies the first w floats of each of rows rows of x (ld floats apart) by s, and sets
// mx[r] to the largest of row r; w is a positive multiple of 16 (rows ≥ 1). Each row as
// scaleMax16 would do it.
TEXT ·scaleMaxRows16(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), SI
	MOVQ ld+8(FP), R8
	SHLQ $2, R8
	MOVQ rows+16(FP), R9
	MOVQ w+24(FP), R10
	SHRQ $4, R10 // vectors per row
	VBROADCASTSS s+32(FP), Z1
	MOVQ mx+40(FP), DI
scaleMaxRows16row:
	VBROADCASTSS elemconst<>+NEGINF(SB), Z2
	MOVQ SI, AX
	MOVQ R10, CX
scaleMaxRows16vec:
	VMULPS (AX), Z1, Z0
	VMOVUPS Z0, (AX)
	VMAXPS Z0, Z2, Z2
	ADDQ $64, AX
	DECQ CX
	JNZ scaleMaxRows16vec
	VEXTRACTF64X4 $1, Z2, Y3
	VMAXPS Y3, Y2, Y2
	VEXTRACTF128 $1, Y2, X3
	VMAXPS X3, X2, X2
	VPERMILPS $0x4e, X2, X3
	VMAXPS X3, X2, X2
	VPERMILPS $0xb1, X2, X3
	VMAXPS X3, X2, X2
	MOVSS X2, (DI)
	ADDQ $4, DI
	ADDQ R8, SI
	DECQ R9
	JNZ scaleMaxRows16row
	VZEROUPPER
	RET

// func expRows16(x *float32, ld, rows, w int, shift, sums *float32)
//
// Replaces the first w floats of each of rows rows of x (ld floats apart) by e^(x − shift[r])
// and sets sums[r] to their sum; w is a positive multiple of 16 (rows ≥ 1). Each row as
// expShift16 would do it, so a row padded with −Inf (whose exponentials are 0) gets the
// elements and the sum of its unpadded part.
TEXT ·expRows16(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), SI
	MOVQ ld+8(FP), R8
	SHLQ $2, R8
	MOVQ rows+16(FP), R9
	MOVQ w+24(FP), R10
	SHRQ $4, R10 // vectors per row
	MOVQ shift+32(FP), DX
	MOVQ sums+40(FP), DI
	VPXORD Z31, Z31, Z31
expRows16row:
	VBROADCASTSS (DX), Z5
	VPXORD Z4, Z4, Z4
	MOVQ SI, AX
	MOVQ R10, CX
expRows16vec:
	VMOVUPS (AX), Z0
	VSUBPS Z5, Z0, Z0
	VCMPPS.BCST $1, elemconst<>+EXP_LO(SB), Z0, K1 // x < −87.3: e^x is flushed to 0
	VBROADCASTSS elemconst<>+EXP_HI(SB), Z2
	VMINPS Z0, Z2, Z0
	VBROADCASTSS elemconst<>+EXP_LO(SB), Z2
	VMAXPS Z0, Z2, Z0
	VMULPS.BCST elemconst<>+LOG2E(SB), Z0, Z1
	VRNDSCALEPS $0, Z1, Z1
	VFNMADD231PS.BCST elemconst<>+LN2_HI(SB), Z1, Z0
	VFNMADD231PS.BCST elemconst<>+LN2_LO(SB), Z1, Z0
	VBROADCASTSS elemconst<>+C7(SB), Z2
	VFMADD213PS.BCST elemconst<>+C6(SB), Z0, Z2
	VFMADD213PS.BCST elemconst<>+C5(SB), Z0, Z2
	VFMADD213PS.BCST elemconst<>+C4(SB), Z0, Z2
	VFMADD213PS.BCST elemconst<>+C3(SB), Z0, Z2
	VFMADD213PS.BCST elemconst<>+C2(SB), Z0, Z2
	VFMADD213PS.BCST elemconst<>+ONE(SB), Z0, Z2
	VFMADD213PS.BCST elemconst<>+ONE(SB), Z0, Z2
	VCVTPS2DQ Z1, Z1
	VPSLLD $23, Z1, Z1
	VPADDD.BCST elemconst<>+ONE(SB), Z1, Z1
	VMULPS Z1, Z2, Z0
	VMOVAPS Z31, K1, Z0
	VMOVUPS Z0, (AX)
	VADDPS Z0, Z4, Z4
	ADDQ $64, AX
	DECQ CX
	JNZ expRows16vec
	VEXTRACTF64X4 $1, Z4, Y1
	VADDPS Y1, Y4, Y4
	VEXTRACTF128 $1, Y4, X1
	VADDPS X1, X4, X4
	VHADDPS X4, X4, X4
	VHADDPS X4, X4, X4
	MOVSS X4, (DI)
	ADDQ $4, DX
	ADDQ $4, DI
	ADDQ R8, SI
	DECQ R9
	JNZ expRows16row
	VZEROUPPER
	RET
