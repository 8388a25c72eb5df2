package cpu

// gemm12x8NEON is the Advanced SIMD (NEON) micro-kernel in kernel_arm64.s (see microKernel
// for the arguments; accumulate is 0 or 1, bias may be nil). Every arm64 CPU has Advanced
// SIMD, so it needs no feature check.
//
//go:noescape
func gemm12x8NEON(kc int, a *float32, rs, ks int, b *float32, bs int, c *float32, ldc int, accumulate int, bias *float32)

// neonKernel wraps the assembly kernel with the bounds checks that keep it memory-safe.
var neonKernel = microKernel{name: "neon 12x8", mr: 12, nr: 8, fn: func(kc int, a []float32, rs, ks int, b []float32, bs int, c []float32, ldc int, accumulate bool, bias []float32) {
	checkBlock(kc, 12, 8, a, rs, ks, b, bs, c, ldc, bias)
	gemm12x8NEON(kc, &a[0], rs, ks, &b[0], bs, &c[0], ldc, flag(accumulate), first(bias))
}}

// kernels lists the matrix micro-kernels this CPU can run, fastest first; the last is the
// portable Go kernel. TINYGPT_NOASM=1 leaves only the Go kernel.
func kernels() []microKernel {
	if noAsm {
		return []microKernel{goKernel}
	}
	return []microKernel{neonKernel, goKernel}
}
