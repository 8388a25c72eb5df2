package cpu

import "golang.org/x/sys/cpu"

// kernel6x16FMA is the AVX2+FMA micro-kernel in kernel_amd64.s.
//
//go:noescape
func kernel6x16FMA(kc int, a, b, acc *float32)

// fmaKernel wraps the assembly kernel with the bounds checks that keep it memory-safe.
var fmaKernel = microKernel{name: "avx2-fma 6x16", mr: 6, nr: 16, fn: func(kc int, a, b, acc []float32) {
	if kc <= 0 {
		clear(acc[:96])
		return
	}
	_, _, _ = a[kc*6-1], b[kc*16-1], acc[95]
	kernel6x16FMA(kc, &a[0], &b[0], &acc[0])
}}

// bestKernel picks the fastest matrix micro-kernel this CPU supports.
func bestKernel() microKernel {
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA && !noAsm {
		return fmaKernel
	}
	return goKernel
}
