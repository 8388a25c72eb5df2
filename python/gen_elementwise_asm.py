"""Generates backend/cpu/elementwise_amd64.s: the vector exp, GELU and GELU' kernels (AVX2+FMA,
and AVX-512 versions of some).

    python3 python/gen_elementwise_asm.py          # rewrite the assembly file
    python3 python/gen_elementwise_asm.py --fit    # refit the erfc polynomial (needs mpmath)

erfc(a) for a in [0, 7.5] is written as 2·t·R(u)·exp(-a^2) with t = 1/(1 + a/2) and
u = (t - tc)/th mapping t's range to [-1, 1]; R is a degree-8 polynomial fitted to
erfc(a)·exp(a^2)/(2t), a smooth function of u, by mpmath's Chebyshev fit (the coefficients
below, rounded to float32; --fit recomputes them and prints the worst relative error with the
rounded coefficients, evaluated in float64). exp(-a^2) is also the normal density's factor, so
GELU and its derivative take one exponential between them.
"""
import math
import struct
import sys


def bits(f):
    return struct.unpack('<I', struct.pack('<f', f))[0]


def f32(f):
    return struct.unpack('<f', struct.pack('<f', float(f)))[0]


ZMAX = 7.5
tmin = 1 / (1 + ZMAX / 2)
tc, th = (1 + tmin) / 2, (1 - tmin) / 2


def fit(deg=8):
    import mpmath as mp
    mp.mp.dps = 30

    def r(u):
        t = tc + th * u
        a = 2 / t - 2
        return mp.erfc(a) * mp.exp(a * a) / (2 * t)

    c = [f32(v) for v in reversed(mp.chebyfit(r, [-1, 1], deg + 1))]
    worst = 0
    for i in range(20001):
        u = -1 + i / 10000
        v = 0.0
        for k in reversed(c):
            v = v * u + k
        worst = max(worst, abs(v / float(r(u)) - 1))
    print("coefficients (float32, lowest degree first):", c)
    print("worst relative error: %.2g" % worst)


if "--fit" in sys.argv:
    fit()
    sys.exit()

R = [0.2947325110435486, 0.15963545441627502, 0.04616237431764603, 0.0019790253136307,
     -0.002533555030822754, -0.00016965747636277229, 0.00021160989126656204,
     -1.0996679975505685e-06, -1.6691301425453275e-05]
consts = [
 ('EXP_HI', bits(88.3)), ('EXP_LO', bits(-87.3)), ('LOG2E', bits(1/math.log(2))),
 ('LN2_HI', bits(0.693145751953125)), ('LN2_LO', bits(math.log(2)-0.693145751953125)),
 ('ONE', bits(1.0)), ('HALF', bits(0.5)),
 ('C2', bits(1/2)), ('C3', bits(1/6)), ('C4', bits(1/24)), ('C5', bits(1/120)), ('C6', bits(1/720)), ('C7', bits(1/5040)),
 ('RSQRT2', bits(1/math.sqrt(2))), ('ABSMASK', 0x7fffffff), ('ZMAX', bits(7.5)),
 ('TC', bits(tc)), ('RTH', bits(1/th)), ('RSQRT2PI', bits(1/math.sqrt(2*math.pi))), ('NEGINF', 0xff800000),
] + [('RC%d' % i, bits(c)) for i, c in enumerate(R)]
out=[]
L=out.append
L('#include "textflag.h"')
L('')
L('// Vectorised exp, GELU and GELU\' over 8 float32 lanes (AVX2 + FMA). The constants below are')
L('// each stored 8 times so that they can be used directly as 256-bit memory operands.')
L('//')
L('// exp(x): 0 below −87.3, x is clamped to at most 88.3 (NaN passes through), x = n·ln2 + r with n = round(x·log2 e)')
L('// and |r| <= ln2/2 (ln2 split in two for an exact reduction), e^r by its Taylor series to degree 7')
L('// (error < 6e-9), and 2^n built in the exponent bits.')
L('//')
L('// GELU(x) = x·Φ(x) with Φ(x) = erfc(−x/√2)/2. For a = |x|/√2 (clamped to 7.5, where erfc is')
L('// 3e-26), erfc(a)/2 = t·R(u)·exp(−a²), t = 1/(1 + a/2), u = (t − tc)/th mapping t to [−1, 1],')
L('// R a degree-8 polynomial fitted to erfc(a)·exp(a²)/(2t) (gen_elementwise_asm.py; relative')
L('// error 7e-8 with its float32 coefficients, about 2e-7 as evaluated here). Φ is erfc(a)/2 for')
L('// x < 0 and 1 − erfc(a)/2 otherwise; GELU\' = Φ + x·φ with φ(x) = exp(−a²)/√(2π), the same')
L('// exponential. Its argument is never below −56.25, so it needs no clamping.')
L('')
for i,(name,b) in enumerate(consts):
    L(f'#define {name} {i*32}')
L('')
for i,(name,b) in enumerate(consts):
    for k in range(8):
        L(f'DATA elemconst<>+{i*32+k*4}(SB)/4, $0x{b:08x}')
L(f'GLOBL elemconst<>(SB), RODATA|NOPTR, ${len(consts)*32}')
L('')
C = lambda n: f'elemconst<>+{n}(SB)'
def exp_block(x, n, t, m='Y7'):
    """x := exp(x); clobbers n, t, m"""
    return [
      f'	VMINPS {x}, {x}, {n} // keep NaN',
      f'	VCMPPS $1, {C("EXP_LO")}, {x}, {m} // x < −87.3: e^x is flushed to 0',
      f'	VMOVUPS {C("EXP_HI")}, {t}',
      f'	VMINPS {x}, {t}, {x}',
      f'	VMOVUPS {C("EXP_LO")}, {t}',
      f'	VMAXPS {x}, {t}, {x}',
      f'	VMULPS {C("LOG2E")}, {x}, {n}',
      f'	VROUNDPS $0, {n}, {n}',
      f'	VFNMADD231PS {C("LN2_HI")}, {n}, {x}',
      f'	VFNMADD231PS {C("LN2_LO")}, {n}, {x}',
      f'	VMOVUPS {C("C7")}, {t}',
      f'	VFMADD213PS {C("C6")}, {x}, {t}',
      f'	VFMADD213PS {C("C5")}, {x}, {t}',
      f'	VFMADD213PS {C("C4")}, {x}, {t}',
      f'	VFMADD213PS {C("C3")}, {x}, {t}',
      f'	VFMADD213PS {C("C2")}, {x}, {t}',
      f'	VFMADD213PS {C("ONE")}, {x}, {t}',
      f'	VFMADD213PS {C("ONE")}, {x}, {t}',
      f'	VCVTPS2DQ {n}, {n}',
      f'	VPSLLD $23, {n}, {n}',
      f'	VPADDD {C("ONE")}, {n}, {n}',
      f'	VMULPS {n}, {t}, {x}',
      f'	VANDNPS {x}, {m}, {x}',
    ]
def expb(x,n,t): return exp_block(x,n,t)[1:]

def ret_sum_y4():
    """Lines that store the sum of Y4's 8 lanes as the float32 result and return (clobber Y1)."""
    return ['	VEXTRACTF128 $1, Y4, X1', '	VADDPS X1, X4, X4', '	VHADDPS X4, X4, X4',
            '	VHADDPS X4, X4, X4', '	VZEROUPPER', '	MOVSS X4, ret+24(FP)', '	RET']

def ret_max_y2():
    """Lines that store the largest of Y2's 8 lanes as the float32 result and return (clobber Y3)."""
    return ['	VEXTRACTF128 $1, Y2, X3', '	VMAXPS X3, X2, X2', '	VPERMILPS $0x4e, X2, X3',
            '	VMAXPS X3, X2, X2', '	VPERMILPS $0xb1, X2, X3', '	VMAXPS X3, X2, X2',
            '	VZEROUPPER', '	MOVSS X2, ret+24(FP)', '	RET']

L('// func expShift8(x *float32, n int, shift float32) float32')
L('//')
L('// x[i] = exp(x[i] − shift) for i < n, n a positive multiple of 8; returns Σ x[i] (summed in 8')
L('// lanes, then across them).')
L('TEXT ·expShift8(SB), NOSPLIT, $0-28')
L('	MOVQ x+0(FP), SI')
L('	MOVQ n+8(FP), CX')
L('	VBROADCASTSS shift+16(FP), Y5')
L('	VXORPS Y4, Y4, Y4')
L('exploop:')
L('	VMOVUPS (SI), Y0')
L('	VSUBPS Y5, Y0, Y0')
out.extend(expb('Y0','Y1','Y2'))
L('	VMOVUPS Y0, (SI)')
L('	VADDPS Y0, Y4, Y4')
L('	ADDQ $32, SI')
L('	SUBQ $8, CX')
L('	JNZ exploop')
out.extend(ret_sum_y4())
L('')

def exp_core(x, n, t):
    """x := exp(x) for x in [−87.3, 88.3] or NaN (no clamping); clobbers n, t."""
    return exp_block(x, n, t)[6:-1]


def erfc_half(x, q, t, a, r, n, tmp):
    """From x (kept): q = erfc(a)/2 and a = exp(−a²) for a = |x|/√2 clamped to ZMAX; clobbers
    t, r, n, tmp."""
    s = [
      f'	VMULPS {C("RSQRT2")}, {x}, {a}',
      f'	VANDPS {C("ABSMASK")}, {a}, {a}',
      f'	VMOVUPS {C("ZMAX")}, {tmp}',
      f'	VMINPS {a}, {tmp}, {a} // NaN passes through',
      f'	VMOVUPS {C("HALF")}, {t}',
      f'	VFMADD213PS {C("ONE")}, {a}, {t} // 1 + a/2',
      f'	VMOVUPS {C("ONE")}, {tmp}',
      f'	VDIVPS {t}, {tmp}, {t} // t',
      f'	VSUBPS {C("TC")}, {t}, {q}',
      f'	VMULPS {C("RTH")}, {q}, {q} // u',
      f'	VMOVUPS {C("RC%d" % (len(R) - 1))}, {r}',
    ]
    for i in range(len(R) - 2, -1, -1):
        s.append(f'	VFMADD213PS {C("RC%d" % i)}, {q}, {r}')
    s += [f'	VMULPS {t}, {r}, {q} // t·R(u)',
          f'	VXORPS {tmp}, {tmp}, {tmp}',
          f'	VFNMADD213PS {tmp}, {a}, {a} // −a²']
    s += exp_core(a, n, tmp)
    s += [f'	VMULPS {a}, {q}, {q} // erfc(a)/2']
    return s


# The loops keep x in Y0; erfc_half leaves q = erfc(a)/2 in Y1 and exp(−a²) in Y3.
ERFC = erfc_half('Y0', 'Y1', 'Y2', 'Y3', 'Y4', 'Y5', 'Y6')
PHI = ['	VMOVUPS ' + C('ONE') + ', Y6',
       '	VSUBPS Y1, Y6, Y6 // 1 − q',
       '	VBLENDVPS Y0, Y1, Y6, Y1 // Φ: q where x < 0, else 1 − q']
DPHI = ['	VMULPS ' + C('RSQRT2PI') + ', Y3, Y3 // φ',
        '	VFMADD231PS Y3, Y0, Y1 // Φ + x·φ']

L('// func gelu8(out, x *float32, n int)')
L('//')
L('// out[i] = GELU(x[i]) for i < n, n a positive multiple of 8. out may be x.')
L('TEXT ·gelu8(SB), NOSPLIT, $0-24')
L('	MOVQ out+0(FP), DI')
L('	MOVQ x+8(FP), SI')
L('	MOVQ n+16(FP), CX')
L('geluloop:')
L('	VMOVUPS (SI), Y0 // x')
out.extend(ERFC)
out.extend(PHI)
L('	VMULPS Y1, Y0, Y0')
L('	VMOVUPS Y0, (DI)')
L('	ADDQ $32, SI')
L('	ADDQ $32, DI')
L('	SUBQ $8, CX')
L('	JNZ geluloop')
L('	VZEROUPPER')
L('	RET')
L('')
# grad
L('// func geluGrad8(out, x, dout *float32, n int)')
L('//')
L('// out[i] = dout[i]·GELU\'(x[i]) = dout[i]·(Φ(x) + x·φ(x)) for i < n, n a positive multiple of 8.')
L('// out may be dout.')
L('TEXT ·geluGrad8(SB), NOSPLIT, $0-32')
L('	MOVQ out+0(FP), DI')
L('	MOVQ x+8(FP), SI')
L('	MOVQ dout+16(FP), DX')
L('	MOVQ n+24(FP), CX')
L('gradloop:')
L('	VMOVUPS (SI), Y0 // x')
out.extend(ERFC)
out.extend(PHI)
out.extend(DPHI)
L('	VMULPS (DX), Y1, Y1')
L('	VMOVUPS Y1, (DI)')
L('	ADDQ $32, SI')
L('	ADDQ $32, DX')
L('	ADDQ $32, DI')
L('	SUBQ $8, CX')
L('	JNZ gradloop')
L('	VZEROUPPER')
L('	RET')

# geluBoth8: act = GELU(x), grad = GELU'(x), sharing the work (the forward pass of a training
# step keeps the derivative for the backward pass).
L('')
L('// func geluBoth8(act, grad, x *float32, n int)')
L('//')
L("// act[i] = GELU(x[i]) and grad[i] = GELU'(x[i]) for i < n, n a positive multiple of 8, computed")
L("// as in gelu8 and geluGrad8. grad may be x.")
L('TEXT ·geluBoth8(SB), NOSPLIT, $0-32')
L('	MOVQ act+0(FP), DI')
L('	MOVQ grad+8(FP), DX')
L('	MOVQ x+16(FP), SI')
L('	MOVQ n+24(FP), CX')
L('bothloop:')
L('	VMOVUPS (SI), Y0 // x')
out.extend(ERFC)
out.extend(PHI)
L('	VMULPS Y1, Y0, Y6 // GELU = x·Φ')
L('	VMOVUPS Y6, (DI)')
out.extend(DPHI)
L('	VMOVUPS Y1, (DX)')
L('	ADDQ $32, SI')
L('	ADDQ $32, DX')
L('	ADDQ $32, DI')
L('	SUBQ $8, CX')
L('	JNZ bothloop')
L('	VZEROUPPER')
L('	RET')

# geluBoth16: the AVX-512 version of geluBoth8 (16 lanes, constants by embedded broadcast,
# masks in K registers).
def CB(n):
    return C(n)


def exp16(x, n, t, k, hi='Z7'):
    """x := exp(x) in ZMM; clobbers n, t, hi and mask register k."""
    return [
      f'	VCMPPS.BCST $1, {CB("EXP_LO")}, {x}, {k} // x < −87.3: e^x is flushed to 0',
      f'	VBROADCASTSS {CB("EXP_HI")}, {hi}',
      f'	VMINPS {x}, {hi}, {x}',
      f'	VBROADCASTSS {CB("EXP_LO")}, {hi}',
      f'	VMAXPS {x}, {hi}, {x}',
      f'	VMULPS.BCST {CB("LOG2E")}, {x}, {n}',
      f'	VRNDSCALEPS $0, {n}, {n}',
      f'	VFNMADD231PS.BCST {CB("LN2_HI")}, {n}, {x}',
      f'	VFNMADD231PS.BCST {CB("LN2_LO")}, {n}, {x}',
      f'	VBROADCASTSS {CB("C7")}, {t}',
      f'	VFMADD213PS.BCST {CB("C6")}, {x}, {t}',
      f'	VFMADD213PS.BCST {CB("C5")}, {x}, {t}',
      f'	VFMADD213PS.BCST {CB("C4")}, {x}, {t}',
      f'	VFMADD213PS.BCST {CB("C3")}, {x}, {t}',
      f'	VFMADD213PS.BCST {CB("C2")}, {x}, {t}',
      f'	VFMADD213PS.BCST {CB("ONE")}, {x}, {t}',
      f'	VFMADD213PS.BCST {CB("ONE")}, {x}, {t}',
      f'	VCVTPS2DQ {n}, {n}',
      f'	VPSLLD $23, {n}, {n}',
      f'	VPADDD.BCST {CB("ONE")}, {n}, {n}',
      f'	VMULPS {n}, {t}, {x}',
      f'	VMOVAPS Z31, {k}, {x}',
    ]


L('')
L('// func geluBoth16(act, grad, x *float32, n int)')
L('//')
L("// geluBoth8 over 16 lanes (AVX-512F), n a positive multiple of 16. grad may be x.")
L('TEXT ·geluBoth16(SB), NOSPLIT, $0-32')
L('	MOVQ act+0(FP), DI')
L('	MOVQ grad+8(FP), DX')
L('	MOVQ x+16(FP), SI')
L('	MOVQ n+24(FP), CX')
L('	VPXORD Z31, Z31, Z31')
L('both16loop:')
L('	VMOVUPS (SI), Z0 // x')
L(f'	VMULPS.BCST {CB("RSQRT2")}, Z0, Z3')
L(f'	VPANDD.BCST {CB("ABSMASK")}, Z3, Z3')
L(f'	VBROADCASTSS {CB("ZMAX")}, Z6')
L('	VMINPS Z3, Z6, Z3 // a, NaN passes through')
L(f'	VBROADCASTSS {CB("HALF")}, Z2')
L(f'	VFMADD213PS.BCST {CB("ONE")}, Z3, Z2 // 1 + a/2')
L(f'	VBROADCASTSS {CB("ONE")}, Z6')
L('	VDIVPS Z2, Z6, Z2 // t')
L(f'	VSUBPS.BCST {CB("TC")}, Z2, Z1')
L(f'	VMULPS.BCST {CB("RTH")}, Z1, Z1 // u')
L(f'	VBROADCASTSS {CB("RC%d" % (len(R) - 1))}, Z4')
for i in range(len(R) - 2, -1, -1):
    L(f'	VFMADD213PS.BCST {CB("RC%d" % i)}, Z1, Z4')
L('	VMULPS Z2, Z4, Z1 // t·R(u)')
L('	VFNMADD213PS Z31, Z3, Z3 // −a²')
out.extend(exp16('Z3', 'Z5', 'Z6', 'K1')[5:-1])  # no clamping (see exp_core)
L('	VMULPS Z3, Z1, Z1 // q = erfc(a)/2')
L(f'	VBROADCASTSS {CB("ONE")}, Z6')
L('	VSUBPS Z1, Z6, Z6 // 1 − q')
L('	VCMPPS $1, Z31, Z0, K2 // x < 0')
L('	VBLENDMPS Z1, Z6, K2, Z1 // Φ: q where x < 0, else 1 − q')
L('	VMULPS Z1, Z0, Z6 // GELU = x·Φ')
L('	VMOVUPS Z6, (DI)')
L(f'	VMULPS.BCST {CB("RSQRT2PI")}, Z3, Z3 // φ')
L('	VFMADD231PS Z3, Z0, Z1 // Φ + x·φ')
L('	VMOVUPS Z1, (DX)')
L('	ADDQ $64, SI')
L('	ADDQ $64, DX')
L('	ADDQ $64, DI')
L('	SUBQ $16, CX')
L('	JNZ both16loop')
L('	VZEROUPPER')
L('	RET')
SCALEMAX = '''// x[i] *= s for i < n, n a positive multiple of 8; returns the largest x[i] after scaling.
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
'''
out.append(SCALEMAX.rstrip('\n'))
out.extend(ret_max_y2())


def masked_tail(label):
    """If n mod 16 (DX) is 0 jumps to label, else sets K2 to its low n mod 16 bits."""
    return ['	ANDQ $15, DX',
            f'	JZ {label}',
            '	MOVQ DX, CX',
            '	MOVL $1, AX',
            '	SHLL CX, AX',
            '	DECL AX',
            '	KMOVW AX, K2']


# expShift16 and scaleMax16: expShift8 and scaleMax8 over 16 lanes for any n >= 1, the last
# n mod 16 elements under a mask (attention's rows, whose lengths are arbitrary).
L('')
L('// func expShift16(x *float32, n int, shift float32) float32')
L('//')
L('// expShift8 for any n ≥ 1, 16 lanes at a time (AVX-512F), the last n mod 16 under a mask:')
L('// x[i] = exp(x[i] − shift) for i < n; returns Σ x[i] (summed in 16 lanes, then across them).')
L('// The exp is expShift8\'s, operation for operation, so each element is the same.')
L('TEXT ·expShift16(SB), NOSPLIT, $0-28')
L('	MOVQ x+0(FP), SI')
L('	MOVQ n+8(FP), DX')
L('	VBROADCASTSS shift+16(FP), Z5')
L('	VPXORD Z4, Z4, Z4')
L('	VPXORD Z31, Z31, Z31')
L('	MOVQ DX, CX')
L('	SHRQ $4, CX')
L('	JZ exp16tail')
L('exp16loop:')
L('	VMOVUPS (SI), Z0')
L('	VSUBPS Z5, Z0, Z0')
out.extend(exp16('Z0', 'Z1', 'Z2', 'K1', hi='Z2'))
L('	VMOVUPS Z0, (SI)')
L('	VADDPS Z0, Z4, Z4')
L('	ADDQ $64, SI')
L('	DECQ CX')
L('	JNZ exp16loop')
L('exp16tail:')
out.extend(masked_tail('exp16sum'))
L('	VMOVUPS.Z (SI), K2, Z0')
L('	VSUBPS Z5, Z0, Z0')
out.extend(exp16('Z0', 'Z1', 'Z2', 'K1', hi='Z2'))
L('	VMOVUPS Z0, K2, (SI)')
L('	VADDPS Z0, Z4, K2, Z4')
L('exp16sum:')
L('	VEXTRACTF64X4 $1, Z4, Y1')
L('	VADDPS Y1, Y4, Y4')
out.extend(ret_sum_y4())
L('')
L('// func scaleMax16(x *float32, n int, s float32) float32')
L('//')
L('// scaleMax8 for any n ≥ 1, 16 lanes at a time (AVX-512F), the last n mod 16 under a mask:')
L('// x[i] *= s for i < n; returns the largest x[i] after scaling.')
L('TEXT ·scaleMax16(SB), NOSPLIT, $0-28')
L('	MOVQ x+0(FP), SI')
L('	MOVQ n+8(FP), DX')
L('	VBROADCASTSS s+16(FP), Z1')
L(f'	VBROADCASTSS {C("NEGINF")}, Z2')
L('	MOVQ DX, CX')
L('	SHRQ $4, CX')
L('	JZ smax16tail')
L('smax16loop:')
L('	VMULPS (SI), Z1, Z0')
L('	VMOVUPS Z0, (SI)')
L('	VMAXPS Z0, Z2, Z2')
L('	ADDQ $64, SI')
L('	DECQ CX')
L('	JNZ smax16loop')
L('smax16tail:')
out.extend(masked_tail('smax16reduce'))
L('	VMOVUPS.Z (SI), K2, Z0')
L('	VMULPS Z0, Z1, Z0')
L('	VMOVUPS Z0, K2, (SI)')
L('	VMAXPS Z0, Z2, K2, Z2')
L('smax16reduce:')
L('	VEXTRACTF64X4 $1, Z2, Y3')
L('	VMAXPS Y3, Y2, Y2')
out.extend(ret_max_y2())


# Row kernels for attention's score blocks: the same per-row work as scaleMax and expShift, for
# rows rows of x (ld floats apart), each w floats wide (a multiple of the vector width), in one
# call, so that the rows' short dependency chains overlap instead of each waiting for its call's
# branches and horizontal reduction. Each row's result is the one-row kernel's, bit for bit.
def row_kernel(name, lanes, args, setup, body, finish, doc):
    reg = 'Z' if lanes == 16 else 'Y'
    shift = 6 if lanes == 16 else 5
    L('')
    L(f'// func {name}({args})')
    L('//')
    for line in doc:
        L('// ' + line)
    L(f'TEXT ·{name}(SB), NOSPLIT, $0-48')
    L('	MOVQ x+0(FP), SI')
    L('	MOVQ ld+8(FP), R8')
    L('	SHLQ $2, R8')
    L('	MOVQ rows+16(FP), R9')
    L('	MOVQ w+24(FP), R10')
    L(f'	SHRQ ${shift - 2}, R10 // vectors per row')
    out.extend(setup)
    L(f'{name}row:')
    out.extend(body[0])
    L('	MOVQ SI, AX')
    L('	MOVQ R10, CX')
    L(f'{name}vec:')
    out.extend(body[1])
    L(f'	ADDQ ${lanes * 4}, AX')
    L('	DECQ CX')
    L(f'	JNZ {name}vec')
    out.extend(finish)
    L('	ADDQ R8, SI')
    L('	DECQ R9')
    L(f'	JNZ {name}row')
    L('	VZEROUPPER')
    L('	RET')


MAX_DOC = ['Multiplies the first w floats of each of rows rows of x (ld floats apart) by s, and sets',
           'mx[r] to the largest of row r; w is a positive multiple of {} (rows ≥ 1). Each row as',
           'scaleMax{} would do it.']
EXP_DOC = ['Replaces the first w floats of each of rows rows of x (ld floats apart) by e^(x − shift[r])',
           'and sets sums[r] to their sum; w is a positive multiple of {} (rows ≥ 1). Each row as',
           'expShift{} would do it, so a row padded with −Inf (whose exponentials are 0) gets the',
           'elements and the sum of its unpadded part.']
ARGS_MAX = 'x *float32, ld, rows, w int, s float32, mx *float32'
ARGS_EXP = 'x *float32, ld, rows, w int, shift, sums *float32'

row_kernel('scaleMaxRows8', 8, ARGS_MAX,
           ['	VBROADCASTSS s+32(FP), Y1', '	MOVQ mx+40(FP), DI'],
           ([f'	VMOVUPS {C("NEGINF")}, Y2'],
            ['	VMULPS (AX), Y1, Y0', '	VMOVUPS Y0, (AX)', '	VMAXPS Y0, Y2, Y2']),
           ret_max_y2()[:6] + ['	MOVSS X2, (DI)', '	ADDQ $4, DI'],
           [l.format(8, 8) for l in MAX_DOC])
row_kernel('expRows8', 8, ARGS_EXP,
           ['	MOVQ shift+32(FP), DX', '	MOVQ sums+40(FP), DI'],
           (['	VBROADCASTSS (DX), Y5', '	VXORPS Y4, Y4, Y4'],
            ['	VMOVUPS (AX), Y0', '	VSUBPS Y5, Y0, Y0'] + expb('Y0', 'Y1', 'Y2') +
            ['	VMOVUPS Y0, (AX)', '	VADDPS Y0, Y4, Y4']),
           ret_sum_y4()[:4] + ['	MOVSS X4, (DI)', '	ADDQ $4, DX', '	ADDQ $4, DI'],
           [l.format(8, 8) for l in EXP_DOC])
row_kernel('scaleMaxRows16', 16, ARGS_MAX,
           ['	VBROADCASTSS s+32(FP), Z1', '	MOVQ mx+40(FP), DI'],
           ([f'	VBROADCASTSS {C("NEGINF")}, Z2'],
            ['	VMULPS (AX), Z1, Z0', '	VMOVUPS Z0, (AX)', '	VMAXPS Z0, Z2, Z2']),
           ['	VEXTRACTF64X4 $1, Z2, Y3', '	VMAXPS Y3, Y2, Y2'] + ret_max_y2()[:6] +
           ['	MOVSS X2, (DI)', '	ADDQ $4, DI'],
           [l.format(16, 16) for l in MAX_DOC])
row_kernel('expRows16', 16, ARGS_EXP,
           ['	MOVQ shift+32(FP), DX', '	MOVQ sums+40(FP), DI', '	VPXORD Z31, Z31, Z31'],
           (['	VBROADCASTSS (DX), Z5', '	VPXORD Z4, Z4, Z4'],
            ['	VMOVUPS (AX), Z0', '	VSUBPS Z5, Z0, Z0'] + exp16('Z0', 'Z1', 'Z2', 'K1', hi='Z2') +
            ['	VMOVUPS Z0, (AX)', '	VADDPS Z0, Z4, Z4']),
           ['	VEXTRACTF64X4 $1, Z4, Y1', '	VADDPS Y1, Y4, Y4'] + ret_sum_y4()[:4] +
           ['	MOVSS X4, (DI)', '	ADDQ $4, DX', '	ADDQ $4, DI'],
           [l.format(16, 16) for l in EXP_DOC])
import os
here = os.path.dirname(os.path.abspath(__file__))
open(os.path.join(here, '..', 'backend', 'cpu', 'elementwise_amd64.s'), 'w').write('\n'.join(out)+'\n')
