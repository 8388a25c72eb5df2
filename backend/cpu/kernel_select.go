//go:build !amd64

package cpu

// bestKernel picks the fastest matrix micro-kernel this CPU supports. Only amd64 has an
// assembly kernel so far; elsewhere (arm64, wasm) the plain-Go kernel runs.
func bestKernel() microKernel {
	return goKernel
}
