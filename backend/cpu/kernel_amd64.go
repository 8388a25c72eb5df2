package cpu

import (
	"math"

	"golang.org/x/sys/cpu"
)

// gemm6x16FMA is the AVX2+FMA micro-kernel in kernel_amd64.s (see microKernel for the
// arguments; accumulate is 0 or 1, bias may be nil).
//
//go:noescape
func gemm6x16FMA(kc int, a *float32, rs, ks int, b *float32, bs int, c *float32, ldc int, accumulate int, bias *float32)

// axpy8FMA (the last columns of gemv's rows) and dotRows8FMA (attention's scores, and dot)
// are vector kernels in kernel_amd64.s; n must be a positive multiple of 8.
//
//go:noescape
func axpy8FMA(y, x *float32, a float32, n int)

//go:noescape
func dotRows8FMA(out, q, k *float32, ld, rows, n int)

var useFMA = cpu.X86.HasAVX2 && cpu.X86.HasFMA && !noAsm

//go:noescape
func copyRows16(dst, src *float32, bs, rows, n16 int)

//go:noescape
func transpose8(dst *float32, ldd int, src *float32, lds int, blocks int)

// transposeRows writes the transpose of src's rows [0, rows) and columns [0, cols) (row
// stride lds) to dst's rows [0, cols) and columns [0, rows) (row stride ldd).
func transposeRows(dst []float32, ldd int, src []float32, lds, rows, cols int) {
	if rows == 0 || cols == 0 {
		return
	}
	_, _ = dst[(cols-1)*ldd+rows-1], src[(rows-1)*lds+cols-1]
	_ = src[min(lds, ldd, 0)] // the check of the far corner covers the rest only for strides ≥ 0
	r8, c8 := 0, 0
	if useFMA {
		r8, c8 = rows&^7, cols&^7
		for r := 0; r < r8; r += 8 {
			transpose8(&dst[r], ldd, &src[r*lds], lds, c8/8)
		}
	}
	transposeGo(dst, ldd, src, lds, r8, c8, rows, cols)
}

// copyRows copies rows of w floats, row r from src[r·bs:] to dst[r·w:], for r in [0, rows).
func copyRows(dst, src []float32, bs, rows, w int) {
	if rows == 0 || w == 0 {
		return
	}
	_, _ = dst[rows*w-1], src[(rows-1)*bs+w-1]
	_ = src[min(bs, 0)] // as in transposeRows
	if useFMA && w%16 == 0 {
		copyRows16(&dst[0], &src[0], bs, rows, w/16)
		return
	}
	copyRowsGo(dst, src, bs, rows, w)
}

// dot returns Σ a[i]·b[i] over len(a) elements (b must be at least as long).
func dot(a, b []float32) float32 {
	n8 := len(a) &^ 7
	var s float32
	if useFMA && n8 > 0 {
		_ = b[len(a)-1]
		dotRows8FMA(&s, &a[0], &b[0], 0, 1, n8)
	} else {
		n8 = 0
	}
	return s + dotGo(a[n8:], b[n8:len(a)])
}

// dotRows sets out[r] = dot(q, k[r·ld:]) for r in [0, len(out)), the same sums as dot's
// (which is dotRows8FMA on one row).
func dotRows(out, q, k []float32, ld int) {
	n8 := len(q) &^ 7
	if !useFMA || n8 != len(q) || len(out) == 0 {
		dotRowsGo(out, q, k, ld)
		return
	}
	_ = k[(len(out)-1)*ld+len(q)-1]
	_ = k[min(ld, 0)] // below 0 for a negative stride, which the check of the last row misses
	dotRows8FMA(&out[0], &q[0], &k[0], ld, len(out), n8)
}

// axpy adds a·x to y over len(y) elements (x must be at least as long).
func axpy(y []float32, a float32, x []float32) {
	n8 := len(y) &^ 7
	if useFMA && n8 > 0 {
		_ = x[len(y)-1]
		axpy8FMA(&y[0], &x[0], a, n8)
	} else {
		n8 = 0
	}
	axpyGo(y[n8:], a, x[n8:len(y)])
}

//go:noescape
func addMul8(out, a, b *float32, n int, mul bool)

// addSlice sets out[i] = a[i] + b[i] over len(out) elements; out may be a or b.
func addSlice(out, a, b []float32) { addMul(out, a, b, false) }

// mulSlice sets out[i] = a[i]·b[i] over len(out) elements; out may be a or b.
func mulSlice(out, a, b []float32) { addMul(out, a, b, true) }

func addMul(out, a, b []float32, mul bool) {
	n8 := len(out) &^ 7
	if useFMA && n8 > 0 {
		_, _ = a[len(out)-1], b[len(out)-1]
		addMul8(&out[0], &a[0], &b[0], n8, mul)
	} else {
		n8 = 0
	}
	addMulGo(out[n8:], a[n8:len(out)], b[n8:len(out)], mul)
}

//go:noescape
func softmaxBack8(ds, p *float32, d, s float32, n int)

// softmaxBack sets ds[i] = p[i]·(ds[i] − d)·s over len(ds) elements (p at least as long): a
// row of the softmax's backward pass, the same operations in the same order as the Go loop.
func softmaxBack(ds, p []float32, d, s float32) {
	n8 := len(ds) &^ 7
	if useFMA && n8 > 0 {
		_ = p[len(ds)-1]
		softmaxBack8(&ds[0], &p[0], d, s, n8)
	} else {
		n8 = 0
	}
	softmaxBackGo(ds[n8:], p[n8:len(ds)], d, s)
}

// fmaKernel wraps the assembly kernel with the bounds checks that keep it memory-safe.
var fmaKernel = microKernel{name: "avx2-fma 6x16", mr: 6, nr: 16, fn: func(kc int, a []float32, rs, ks int, b []float32, bs int, c []float32, ldc int, accumulate bool, bias []float32) {
	checkBlock(kc, 6, 16, a, rs, ks, b, bs, c, ldc, bias)
	gemm6x16FMA(kc, &a[0], rs, ks, &b[0], bs, &c[0], ldc, flag(accumulate), first(bias))
}}

// kernels lists the matrix micro-kernels this CPU can run, fastest first; the last is the
// portable Go kernel. TINYGPT_NOASM=1 leaves only the Go kernel.
func kernels() []microKernel {
	var ks []microKernel
	if useAVX512 {
		ks = append(ks, avx512Kernel)
	}
	if useFMA {
		ks = append(ks, fmaKernel)
	}
	return append(ks, goKernel)
}

// gemm12x32AVX512 is the AVX-512 micro-kernel in kernel512_amd64.s.
//
//go:noescape
func gemm12x32AVX512(kc int, a *float32, rs, ks int, b *float32, bs int, c *float32, ldc int, accumulate int, bias *float32)

//go:noescape
func gemm4x32AVX512(kc int, a *float32, rs, ks int, b *float32, bs int, c *float32, ldc int, accumulate int, bias *float32)

//go:noescape
func gemm12x16AVX512(kc int, a *float32, rs, ks int, b *float32, bs int, c *float32, ldc int, accumulate int, bias *float32)

//go:noescape
func packT12AVX512(dst, a *float32, ks, kc, panels, w int)

var useAVX512 = cpu.X86.HasAVX512F && useFMA

// avx512Kernel wraps the AVX-512 kernel with the bounds checks that keep it memory-safe.
var avx512Kernel = microKernel{name: "avx512 12x32", mr: 12, nr: 32,
	fn: func(kc int, a []float32, rs, ks int, b []float32, bs int, c []float32, ldc int, accumulate bool, bias []float32) {
		checkBlock(kc, 12, 32, a, rs, ks, b, bs, c, ldc, bias)
		gemm12x32AVX512(kc, &a[0], rs, ks, &b[0], bs, &c[0], ldc, flag(accumulate), first(bias))
	},
	half: func(kc int, a []float32, rs, ks int, b []float32, bs int, c []float32, ldc int, accumulate bool, bias []float32) {
		checkBlock(kc, 12, 16, a, rs, ks, b, bs, c, ldc, bias)
		gemm12x16AVX512(kc, &a[0], rs, ks, &b[0], bs, &c[0], ldc, flag(accumulate), first(bias))
	},
	rows4: func(kc int, a []float32, rs, ks int, b []float32, bs int, c []float32, ldc int, accumulate bool, bias []float32) {
		checkBlock(kc, 4, 32, a, rs, ks, b, bs, c, ldc, bias)
		gemm4x32AVX512(kc, &a[0], rs, ks, &b[0], bs, &c[0], ldc, flag(accumulate), first(bias))
	},
	packT: func(dst, a []float32, ks, kc, rows int) {
		_, _ = dst[roundUp(rows, 12)*kc-1], a[(kc-1)*ks+rows-1]
		full := rows / 12
		if full > 0 {
			packT12AVX512(&dst[0], &a[0], ks, kc, full, 12)
		}
		if rows > 12*full {
			packT12AVX512(&dst[12*full*kc], &a[12*full], ks, kc, 1, rows-12*full)
		}
	},
}

// expShift8, gelu8 and geluGrad8 are the vector elementwise kernels of elementwise_amd64.s; n
// must be a positive multiple of 8.
//
//go:noescape
func expShift8(x *float32, n int, shift float32) float32

//go:noescape
func gelu8(out, x *float32, n int)

//go:noescape
func geluGrad8(out, x, dout *float32, n int)

// expShift replaces each x[i] by e^(x[i]−shift) and returns their sum.
func expShift(x []float32, shift float32) float32 {
	if useAVX512 && len(x) > 0 {
		return expShift16(&x[0], len(x), shift)
	}
	n8 := len(x) &^ 7
	var s float32
	if useFMA && n8 > 0 {
		s = expShift8(&x[0], n8, shift)
	} else {
		n8 = 0
	}
	return s + expShiftGo(x[n8:], shift)
}

// geluSlice sets out[i] = GELU(x[i]) over len(out) elements; out may be x.
func geluSlice(out, x []float32) {
	n8 := len(out) &^ 7
	if useFMA && n8 > 0 {
		_ = x[len(out)-1]
		gelu8(&out[0], &x[0], n8)
	} else {
		n8 = 0
	}
	geluGo(out[n8:], x[n8:len(out)])
}

// geluGradSlice sets out[i] = dout[i]·GELU'(x[i]) over len(out) elements; out may be dout.
func geluGradSlice(out, x, dout []float32) {
	n8 := len(out) &^ 7
	if useFMA && n8 > 0 {
		_, _ = x[len(out)-1], dout[len(out)-1]
		geluGrad8(&out[0], &x[0], &dout[0], n8)
	} else {
		n8 = 0
	}
	geluGradGo(out[n8:], x[n8:len(out)], dout[n8:len(out)])
}

// fmaPeak512 runs n·768 flops of independent AVX-512 fused multiply-adds (benchmarks only).
//
//go:noescape
func fmaPeak512(n int)

//go:noescape
func scaleMax8(x *float32, n int, s float32) float32

// scaleMax multiplies each x[i] by s and returns the largest result (−Inf for no elements).
func scaleMax(x []float32, s float32) float32 {
	if useAVX512 && len(x) > 0 {
		return scaleMax16(&x[0], len(x), s)
	}
	n8 := len(x) &^ 7
	mx := float32(math.Inf(-1))
	if useFMA && n8 > 0 {
		mx = scaleMax8(&x[0], n8, s)
	} else {
		n8 = 0
	}
	return max(mx, scaleMaxGo(x[n8:], s))
}

// rowVector is the width that scaleMaxRows and expRows need a multiple of: their vector
// kernels' number of lanes, or 1 for the Go loops.
var rowVector = func() int {
	switch {
	case useAVX512:
		return 16
	case useFMA:
		return 8
	}
	return 1
}()

// scaleMaxRows8, expRows8, scaleMaxRows16 and expRows16 are the row kernels of
// elementwise_amd64.s behind scaleMaxRows and expRows (w a positive multiple of their lanes).
//
//go:noescape
func scaleMaxRows8(x *float32, ld, rows, w int, s float32, mx *float32)

//go:noescape
func expRows8(x *float32, ld, rows, w int, shift, sums *float32)

//go:noescape
func scaleMaxRows16(x *float32, ld, rows, w int, s float32, mx *float32)

//go:noescape
func expRows16(x *float32, ld, rows, w int, shift, sums *float32)

// scaleMaxRows multiplies the first w floats of rows [0, rows) of x (rows ld floats apart) by
// s and sets mx[r] to the largest of row r, each row as scaleMax would; w must be a multiple of
// rowVector.
func scaleMaxRows(x []float32, ld, rows, w int, s float32, mx []float32) {
	if rows == 0 || w == 0 {
		return
	}
	_, _ = x[(rows-1)*ld+w-1], mx[rows-1]
	switch {
	case rowVector == 16:
		scaleMaxRows16(&x[0], ld, rows, w, s, &mx[0])
	case rowVector == 8:
		scaleMaxRows8(&x[0], ld, rows, w, s, &mx[0])
	default:
		scaleMaxRowsGo(x, ld, rows, w, s, mx)
	}
}

// expRows replaces the first w floats of rows [0, rows) of x (rows ld floats apart) by
// e^(x − shift[r]) and sets sums[r] to the sum of row r, each row as expShift would; w must be
// a multiple of rowVector.
func expRows(x []float32, ld, rows, w int, shift, sums []float32) {
	if rows == 0 || w == 0 {
		return
	}
	_, _, _ = x[(rows-1)*ld+w-1], shift[rows-1], sums[rows-1]
	switch {
	case rowVector == 16:
		expRows16(&x[0], ld, rows, w, &shift[0], &sums[0])
	case rowVector == 8:
		expRows8(&x[0], ld, rows, w, &shift[0], &sums[0])
	default:
		expRowsGo(x, ld, rows, w, shift, sums)
	}
}

// expShift16 and scaleMax16 are expShift8 and scaleMax8 for any n ≥ 1, under AVX-512 masks
// for the last n mod 16 elements (elementwise_amd64.s).
//
//go:noescape
func expShift16(x *float32, n int, shift float32) float32

//go:noescape
func scaleMax16(x *float32, n int, s float32) float32

//go:noescape
func geluBoth8(act, grad, x *float32, n int)

//go:noescape
func geluBoth16(act, grad, x *float32, n int)

// geluBothSlice sets act[i] = GELU(x[i]) and grad[i] = GELU'(x[i]) over len(act) elements;
// grad may be x.
func geluBothSlice(act, grad, x []float32) {
	if n16 := len(act) &^ 15; useAVX512 && n16 > 0 {
		_, _ = grad[len(act)-1], x[len(act)-1]
		geluBoth16(&act[0], &grad[0], &x[0], n16)
		act, grad, x = act[n16:], grad[n16:], x[n16:]
	}
	n8 := len(act) &^ 7
	if useFMA && n8 > 0 {
		_, _ = grad[len(act)-1], x[len(act)-1]
		geluBoth8(&act[0], &grad[0], &x[0], n8)
	} else {
		n8 = 0
	}
	geluBothGo(act[n8:], grad[n8:len(act)], x[n8:len(act)])
}

// The LayerNorm row kernels of layernorm_amd64.s; n must be a positive multiple of 8.

//go:noescape
func lnStats8(x *float32, n int) (sum, sumsq float32)

//go:noescape
func lnApply8(out, x, gamma, beta *float32, n int, mean, rstd float32)

//go:noescape
func lnBackSums8(x, dy, gamma, pg, pb *float32, n int, mean, rstd float32) (sdnorm, sdnormnorm float32)

//go:noescape
func lnBackDx8(dx, x, dy, gamma *float32, n int, mean, rstd, aa, bb float32)

// lnVector reports whether rows of n floats go through the vector LayerNorm kernels.
func lnVector(n int) bool { return useFMA && n > 0 && n%8 == 0 }

func lnStats(x []float32) (sum, sumsq float32) { return lnStats8(&x[0], len(x)) }

func lnApply(out, x, g, b []float32, mean, rstd float32) {
	_, _, _ = x[len(out)-1], g[len(out)-1], b[len(out)-1]
	lnApply8(&out[0], &x[0], &g[0], &b[0], len(out), mean, rstd)
}

func lnBackSums(x, dy, g, pg, pb []float32, mean, rstd float32) (float32, float32) {
	n := len(x)
	_, _, _, _ = dy[n-1], g[n-1], pg[n-1], pb[n-1]
	return lnBackSums8(&x[0], &dy[0], &g[0], &pg[0], &pb[0], n, mean, rstd)
}

func lnBackDx(dx, x, dy, g []float32, mean, rstd, a, b float32) {
	n := len(dx)
	_, _, _ = x[n-1], dy[n-1], g[n-1]
	lnBackDx8(&dx[0], &x[0], &dy[0], &g[0], n, mean, rstd, a, b)
}

//go:noescape
func adamw8(p, grad, m, v *float32, n int, c *adamConsts)

// adamVector runs the AdamW update on the longest prefix of whole 8-lane vectors and returns
// its length (the caller does the rest).
func adamVector(c *adamConsts, p, g, m, v []float32) int {
	n := len(p) &^ 7
	if !useFMA || n == 0 {
		return 0
	}
	_, _, _ = g[n-1], m[n-1], v[n-1]
	adamw8(&p[0], &g[0], &m[0], &v[0], n, c)
	return n
}

//go:noescape
func gemv64FMA(y, a, b *float32, k, bs int)

//go:noescape
func axpyRowsFMA(y, a, b *float32, k, n, bs int)

// gemvTail16 is gemv64FMA for the columns whose bit is set in masks, a prefix of its 64 bits
// (kernel512_amd64.s).
//
//go:noescape
func gemvTail16(y, a, b *float32, k, bs int, masks uint64)

// gemvRows adds Σ_k a[k]·b[k·bs : k·bs+len(y)] into y, 64 columns at a time in registers
// where the CPU allows, then the rest by rowsTail; the sums run in ascending k either way.
func gemvRows(y, a, b []float32, bs int) {
	n64 := len(y) &^ 63
	if useFMA && n64 > 0 && len(a) > 0 {
		_ = b[(len(a)-1)*bs+n64-1]
		for j := 0; j < n64; j += 64 {
			gemv64FMA(&y[j], &a[0], &b[j], len(a), bs)
		}
	} else {
		n64 = 0
	}
	rowsTail(y, a, b, bs, n64)
}

// axpyRows is gemvRows (the same sums in the same order) reading b one whole row at a time,
// front to back, with y reloaded for each row: one stream of memory per core, which can be
// faster where b comes from memory (see streamPick).
func axpyRows(y, a, b []float32, bs int) {
	n8 := len(y) &^ 7
	if useFMA && n8 > 0 && len(a) > 0 {
		_ = b[(len(a)-1)*bs+n8-1]
		axpyRowsFMA(&y[0], &a[0], &b[0], len(a), n8, bs)
	} else {
		n8 = 0
	}
	rowsTail(y, a, b, bs, n8)
}

// rowsTail adds Σ_k a[k]·b[k·bs+j] into y[j] for the columns j from j0 (fewer than 64), under
// AVX-512 masks where the CPU allows, else by axpy: gemvRows' and axpyRows' last columns.
func rowsTail(y, a, b []float32, bs, j0 int) {
	n := len(y) - j0
	if n > 0 && useAVX512 && len(a) > 0 {
		_ = b[(len(a)-1)*bs+len(y)-1]
		gemvTail16(&y[j0], &a[0], &b[j0], len(a), bs, uint64(1)<<n-1)
	} else if n > 0 {
		for k, ak := range a {
			axpy(y[j0:], ak, b[k*bs+j0:k*bs+len(y)])
		}
	}
}

// pause executes the PAUSE instruction (a spin-wait hint).
//
//go:noescape
func pause()
