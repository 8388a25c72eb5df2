//go:build !amd64

package cpu

// bestKernel picks the fastest matrix micro-kernel this CPU supports. Only amd64 has an
// assembly kernel so far; elsewhere (arm64, wasm) the plain-Go kernel runs.
func bestKernel() microKernel {
	return goKernel
}

// dot returns Σ a[i]·b[i] over len(a) elements (b must be at least as long).
func dot(a, b []float32) float32 { return dotGo(a, b) }

// axpy adds a·x to y over len(y) elements (x must be at least as long).
func axpy(y []float32, a float32, x []float32) { axpyGo(y, a, x) }
