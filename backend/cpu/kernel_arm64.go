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

// dotRows4NEON and axpy4NEON are vector kernels in kernel_arm64.s; n must be a positive
// multiple of 4.
//
//go:noescape
func dotRows4NEON(out, q, k *float32, ld, rows, n int)

//go:noescape
func axpy4NEON(y, x *float32, a float32, n int)

// dot returns Σ a[i]·b[i] over len(a) elements (b must be at least as long).
func dot(a, b []float32) float32 {
	n4 := len(a) &^ 3
	var s float32
	if !noAsm && n4 > 0 {
		_ = b[len(a)-1]
		dotRows4NEON(&s, &a[0], &b[0], 0, 1, n4)
	} else {
		n4 = 0
	}
	return s + dotGo(a[n4:], b[n4:len(a)])
}

// dotRows sets out[r] = dot(q, k[r·ld:]) for r in [0, len(out)), the same sums as dot's
// (which is dotRows4NEON on one row).
func dotRows(out, q, k []float32, ld int) {
	if noAsm || len(q)%4 != 0 || len(q) == 0 || len(out) == 0 {
		dotRowsGo(out, q, k, ld)
		return
	}
	_ = k[(len(out)-1)*ld+len(q)-1]
	_ = k[min(ld, 0)] // below 0 for a negative stride, which the check of the last row misses
	dotRows4NEON(&out[0], &q[0], &k[0], ld, len(out), len(q))
}

// axpy adds a·x to y over len(y) elements (x must be at least as long).
func axpy(y []float32, a float32, x []float32) {
	n4 := len(y) &^ 3
	if !noAsm && n4 > 0 {
		_ = x[len(y)-1]
		axpy4NEON(&y[0], &x[0], a, n4)
	} else {
		n4 = 0
	}
	axpyGo(y[n4:], a, x[n4:len(y)])
}
