//go:build !amd64

// The vector kernels below are the portable Go ones everywhere but amd64 (whose assembly
// versions are in kernel_amd64.go). arm64 has assembly for the matrix micro-kernel, dot,
// dotRows and axpy only (kernel_arm64.go); kernels_portable.go has those for the rest.

package cpu

// addSlice sets out[i] = a[i] + b[i] over len(out) elements; out may be a or b.
func addSlice(out, a, b []float32) { addMulGo(out, a, b, false) }

// mulSlice sets out[i] = a[i]·b[i] over len(out) elements; out may be a or b.
func mulSlice(out, a, b []float32) { addMulGo(out, a, b, true) }

// expShift replaces each x[i] by e^(x[i]−shift) and returns their sum.
func expShift(x []float32, shift float32) float32 { return expShiftGo(x, shift) }

// geluSlice sets out[i] = GELU(x[i]) over len(out) elements; out may be x.
func geluSlice(out, x []float32) { geluGo(out, x) }

// geluGradSlice sets out[i] = dout[i]·GELU'(x[i]) over len(out) elements; out may be dout.
func geluGradSlice(out, x, dout []float32) { geluGradGo(out, x, dout) }

// softmaxBack sets ds[i] = p[i]·(ds[i] − d)·s over len(ds) elements (p at least as long).
func softmaxBack(ds, p []float32, d, s float32) { softmaxBackGo(ds, p, d, s) }

// rowVector is the width that scaleMaxRows and expRows need a multiple of.
const rowVector = 1

// scaleMaxRows multiplies the first w floats of rows [0, rows) of x (rows ld floats apart) by
// s and sets mx[r] to the largest of row r.
func scaleMaxRows(x []float32, ld, rows, w int, s float32, mx []float32) {
	scaleMaxRowsGo(x, ld, rows, w, s, mx)
}

// expRows replaces the first w floats of rows [0, rows) of x (rows ld floats apart) by
// e^(x − shift[r]) and sets sums[r] to the sum of row r.
func expRows(x []float32, ld, rows, w int, shift, sums []float32) {
	expRowsGo(x, ld, rows, w, shift, sums)
}

// scaleMax multiplies each x[i] by s and returns the largest result (−Inf for no elements).
func scaleMax(x []float32, s float32) float32 { return scaleMaxGo(x, s) }

// geluBothSlice sets act[i] = GELU(x[i]) and grad[i] = GELU'(x[i]) over len(act) elements;
// grad may be x.
func geluBothSlice(act, grad, x []float32) { geluBothGo(act, grad, x) }

// lnVector reports whether rows of n floats go through the vector LayerNorm kernels (never
// here; the lnX functions below are not called).
func lnVector(int) bool { return false }

func lnStats([]float32) (float32, float32)       { panic("no vector LayerNorm") }
func lnApply(_, _, _, _ []float32, _, _ float32) { panic("no vector LayerNorm") }
func lnBackSums(_, _, _, _, _ []float32, _, _ float32) (float32, float32) {
	panic("no vector LayerNorm")
}
func lnBackDx(_, _, _, _ []float32, _, _, _, _ float32) { panic("no vector LayerNorm") }

// adamVector runs the AdamW update on a prefix of vectors; there are none here.
func adamVector(*adamConsts, []float32, []float32, []float32, []float32) int { return 0 }

// gemvRows adds Σ_k a[k]·b[k·bs : k·bs+len(y)] into y.
func gemvRows(y, a, b []float32, bs int) {
	for k, ak := range a {
		axpy(y, ak, b[k*bs:k*bs+len(y)])
	}
}

// axpyRows is gemvRows, which here already reads b a whole row at a time.
func axpyRows(y, a, b []float32, bs int) { gemvRows(y, a, b, bs) }

// copyRows copies rows of w floats, row r from src[r·bs:] to dst[r·w:], for r in [0, rows).
func copyRows(dst, src []float32, bs, rows, w int) { copyRowsGo(dst, src, bs, rows, w) }

// transposeRows writes the transpose of src's rows [0, rows) and columns [0, cols) (row
// stride lds) to dst's rows [0, cols) and columns [0, rows) (row stride ldd).
func transposeRows(dst []float32, ldd int, src []float32, lds, rows, cols int) {
	transposeGo(dst, ldd, src, lds, 0, 0, rows, cols)
}

// pause is a spin-wait hint; there is none here.
func pause() {}
