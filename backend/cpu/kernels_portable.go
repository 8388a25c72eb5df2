//go:build !amd64 && !arm64

package cpu

// kernels lists the matrix micro-kernels this CPU can run: on architectures without assembly
// kernels (wasm among them), only the portable Go kernel.
func kernels() []microKernel { return []microKernel{goKernel} }

// dot returns Σ a[i]·b[i] over len(a) elements (b must be at least as long).
func dot(a, b []float32) float32 { return dotGo(a, b) }

// axpy adds a·x to y over len(y) elements (x must be at least as long).
func axpy(y []float32, a float32, x []float32) { axpyGo(y, a, x) }

// dotRows sets out[r] = dot(q, k[r·ld:]) for r in [0, len(out)).
func dotRows(out, q, k []float32, ld int) { dotRowsGo(out, q, k, ld) }
