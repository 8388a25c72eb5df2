// Package cpu is the CPU backend: every kernel of package backend in Go, run on all cores
// through a persistent worker pool.
//
// Each kernel is a plain loop over rows (or (batch, head) pairs, or output tiles) that the pool
// splits into chunks. Chunks never share an output element, and every reduction runs in a fixed
// order, so results are bit-for-bit reproducible on a machine whatever the thread count.
// Nothing is allocated inside a kernel: the loop bodies and their scratch live in the Backend.
package cpu

import (
	"fmt"
	"runtime"

	"tinygpt/backend"
)

// tensor is the cpu backend's Tensor: a slice of float32 or of int32.
type tensor struct {
	f []float32
	i []int32
}

func (t *tensor) Len() int {
	if t.i != nil {
		return len(t.i)
	}
	return len(t.f)
}

func f32(t backend.Tensor) []float32 { return t.(*tensor).f }
func i32(t backend.Tensor) []int32   { return t.(*tensor).i }

// Backend is the CPU implementation of backend.Backend.
type Backend struct {
	pool    *pool
	kern    microKernel
	scratch []mmScratch // per worker
	bpack   []float32   // op(B) of the product in flight, when it must be copied
	bpack2  []float32   // op(B) of mm2, when it must be copied

	// Loop bodies, reused by every call (see task).
	mm          matmulTask
	mm2         matmulTask // a weight gradient beside other work (see addGradLoops), or MLPAddLayerNorm's second product
	group       taskGroup
	pb          packBTask
	pb2         packBTask // the packing of the second product's B (MLPAddLayerNorm)
	chain       chainTask
	cp          copyTask
	split       splitTask
	split2      splitTask // mm2's
	splitBuf    []float32 // the slices of a product split along K
	splitBuf2   []float32 // the same for mm2
	gv          gemvTask
	gvPartial   []float32              // a gemv's partial rows (see gemvTask)
	gvPicks     map[[2]int]*streamPick // how a gemv reads each shape of large B (see streamPick)
	enc         encoderTask
	encFirst    []int32 // EncoderBackward: where each token's rows start in encOrder
	encOrder    []int32 // EncoderBackward: the rows of dout sorted by token
	ln          layerNormTask
	bias        biasTask
	elem        elemTask
	ce          crossEntropyTask
	attn        attentionTask
	sumsq       sumsqTask
	adam        adamTask
	partial     []float64 // per-chunk partial sums for SumSquares
	reduce      reduceTask
	partialCols []float32 // per-row-block column sums (see sumRows)
	lnPartial   []float32 // the same for the LayerNorm of a LinearLayerNormBackward
	reduce2     reduceTask
}

// New returns a CPU backend that uses every core (GOMAXPROCS goroutines).
func New() *Backend {
	be := &Backend{pool: defaultPool(), kern: bestKernel()}
	be.scratch = make([]mmScratch, be.pool.workers)
	for w := range be.scratch {
		be.scratch[w] = newMMScratch(be.kern)
	}
	return be
}

// Name implements backend.Backend.
func (be *Backend) Name() string { return "cpu" }

// Describe implements backend.Backend.
func (be *Backend) Describe() string {
	threads := fmt.Sprintf("%d threads", be.pool.workers)
	if be.pool.workers == 1 {
		threads = "1 thread"
	}
	return fmt.Sprintf("cpu: %s, %s/%s, matmul kernel %s", threads, runtime.GOOS, runtime.GOARCH, be.kern.name)
}

// Threads reports how many goroutines run the kernels.
func (be *Backend) Threads() int { return be.pool.workers }

// Alloc implements backend.Backend.
func (be *Backend) Alloc(n int) backend.Tensor { return &tensor{f: make([]float32, n)} }

// AllocInt implements backend.Backend.
func (be *Backend) AllocInt(n int) backend.Tensor { return &tensor{i: make([]int32, n)} }

// SegmentLen implements backend.Backend: CPU tensors are never split.
func (be *Backend) SegmentLen() int { return 0 }

// Slice implements backend.Backend.
func (be *Backend) Slice(t backend.Tensor, off, n int) backend.Tensor {
	if off%backend.SliceAlign != 0 {
		panic(fmt.Sprintf("cpu: Slice offset %d is not a multiple of %d", off, backend.SliceAlign))
	}
	return &tensor{f: f32(t)[off : off+n : off+n]}
}

// Upload implements backend.Backend.
func (be *Backend) Upload(t backend.Tensor, src []float32) { copy(f32(t), src) }

// UploadInt implements backend.Backend.
func (be *Backend) UploadInt(t backend.Tensor, src []int32) { copy(i32(t), src) }

// Download implements backend.Backend.
func (be *Backend) Download(dst []float32, t backend.Tensor, off int) { copy(dst, f32(t)[off:]) }

// DownloadLater implements backend.Backend: kernels have run when they return, so it copies
// at once.
func (be *Backend) DownloadLater(dst []float32, t backend.Tensor, off int) { copy(dst, f32(t)[off:]) }

// Await implements backend.Backend; DownloadLater has nothing left to do.
func (be *Backend) Await(keep int) {}

// Zero implements backend.Backend.
func (be *Backend) Zero(t backend.Tensor, n int) {
	if t.(*tensor).i != nil {
		clear(i32(t)[:n])
		return
	}
	be.cp = copyTask{dst: f32(t)[:n]}
	be.pool.Run(&be.cp, tiles(n, copyChunk), 1, copyChunk/8)
}

// Copy implements backend.Backend.
func (be *Backend) Copy(dst, src backend.Tensor, n int) {
	be.cp = copyTask{dst: f32(dst)[:n], src: f32(src)[:n]}
	be.pool.Run(&be.cp, tiles(n, copyChunk), 1, copyChunk/8)
}

// copyTask clears dst, or copies src into it, in chunks of copyChunk floats: the gradients of a
// large model are tens of megabytes, cleared every step.
type copyTask struct{ dst, src []float32 }

const copyChunk = 1 << 16

func (t *copyTask) run(_, lo, hi int) {
	a, b := lo*copyChunk, min(hi*copyChunk, len(t.dst))
	if t.src == nil {
		clear(t.dst[a:b])
		return
	}
	copy(t.dst[a:b], t.src[a:b])
}

// Release implements backend.Backend. Memory returns to the Go heap when unreferenced.
func (be *Backend) Release(t backend.Tensor) {
	tt := t.(*tensor)
	tt.f, tt.i = nil, nil
}

var _ backend.Backend = (*Backend)(nil)
