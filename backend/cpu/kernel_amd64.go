package cpu

import "golang.org/x/sys/cpu"

// gemm6x16FMA is the AVX2+FMA micro-kernel in kernel_amd64.s (see microKernel for the
// arguments; accumulate is 0 or 1, bias may be nil).
//
//go:noescape
func gemm6x16FMA(kc int, a *float32, rs, ks int, b *float32, bs int, c *float32, ldc int, accumulate int, bias *float32)

// dot8FMA and axpy8FMA are the vector kernels of attention in kernel_amd64.s; n must be a
// positive multiple of 8.
//
//go:noescape
func dot8FMA(a, b *float32, n int) float32

//go:noescape
func axpy8FMA(y, x *float32, a float32, n int)

var useFMA = cpu.X86.HasAVX2 && cpu.X86.HasFMA && !noAsm

// dot returns Σ a[i]·b[i] over len(a) elements (b must be at least as long).
func dot(a, b []float32) float32 {
	n8 := len(a) &^ 7
	var s float32
	if useFMA && n8 > 0 {
		_ = b[len(a)-1]
		s = dot8FMA(&a[0], &b[0], n8)
	} else {
		n8 = 0
	}
	return s + dotGo(a[n8:], b[n8:len(a)])
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

// fmaKernel wraps the assembly kernel with the bounds checks that keep it memory-safe.
var fmaKernel = microKernel{name: "avx2-fma 6x16", mr: 6, nr: 16, fn: func(kc int, a []float32, rs, ks int, b []float32, bs int, c []float32, ldc int, accumulate bool, bias []float32) {
	checkBlock(kc, 6, 16, a, rs, ks, b, bs, c, ldc, bias)
	var pb *float32
	if bias != nil {
		pb = &bias[0]
	}
	acc := 0
	if accumulate {
		acc = 1
	}
	gemm6x16FMA(kc, &a[0], rs, ks, &b[0], bs, &c[0], ldc, acc, pb)
}}

// bestKernel picks the fastest matrix micro-kernel this CPU supports.
func bestKernel() microKernel {
	if useFMA {
		return fmaKernel
	}
	return goKernel
}
