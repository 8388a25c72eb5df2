//go:build !amd64 && !arm64

package cpu

// kernels lists the matrix micro-kernels this CPU can run: on architectures without assembly
// kernels (wasm among them), only the portable Go kernel.
func kernels() []microKernel { return []microKernel{goKernel} }
