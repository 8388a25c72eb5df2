package cpu

import (
	"time"

	"tinygpt/backend"
)

// Matrix products are computed the way BLAS libraries do it, minus most of the copying: C is
// cut into tiles of up to mcTile×ncTile that workers take independently; for each tile the inner
// dimension is walked in blocks of kcBlock, and a register-blocked micro-kernel computes MR×NR
// blocks of C straight from A and B and writes them straight into C.
//
// The micro-kernel reads A through two strides (one per row, one per k step), so both A and Aᵀ
// can be read in place, and B as rows of NR consecutive floats, so B [K, N] can be read in
// place too. Aᵀ with rows far apart (the weight gradients' activations) is packed by each
// worker, a block at a time, into the kernel's panels (see gemm). Bᵀ (the NT layout), a B whose
// width is not a multiple of NR, and a wide B read by many rows are first copied, once per
// product (or, for one worker's single tile, once per k block), into a [K, N rounded up to
// NR] buffer of panels that every worker then shares (see bMat and packMinRows). The last
// rows of A (when M is not a multiple of MR; unless a 4-row kernel or the block's last MR rows
// can take them, see kblock) and the last columns of C go through small zero-padded buffers, so
// the kernel never reads or writes outside the matrices.
//
// Every element of C is summed in the same order (k ascending within a kc block, blocks
// ascending, each block's sum added to C) whatever the tile sizes or the number of workers,
// so results are reproducible.
const (
	mcTile  = 96  // rows of C per tile (a multiple of every micro-kernel's MR)
	ncTile  = 256 // columns of C per tile (a multiple of every micro-kernel's NR)
	kcBlock = 256 // inner-dimension block; fixed, because it decides the summation order
)

// A microKernel computes one mr×nr block of C:
//
//	C[r, j] = (C[r, j] if accumulate) + Σ_k A[r, k]·B[k, j] (+ bias[j] if bias != nil)
//
// over kc ≥ 1 steps, with A[r, k] at a[r·rs + k·ks], B[k, j] at b[k·bs + j] and C[r, j] at
// c[r·ldc + j]. The sum over k is formed from zero in ascending k and then added to C, and the
// bias is added last.
type microKernel struct {
	name   string
	mr, nr int
	fn     func(kc int, a []float32, rs, ks int, b []float32, bs int, c []float32, ldc int, accumulate bool, bias []float32)
	// half, if not nil, is the same kernel for an mr×(nr/2) block, for the last columns of
	// products whose width is an odd multiple of nr/2.
	half func(kc int, a []float32, rs, ks int, b []float32, bs int, c []float32, ldc int, accumulate bool, bias []float32)
	// rows4, if not nil, is the same kernel for a 4×nr block, for the last rows of a block
	// whose height is a multiple of 4 but not of mr.
	rows4 func(kc int, a []float32, rs, ks int, b []float32, bs int, c []float32, ldc int, accumulate bool, bias []float32)
	// packT, if not nil, packs rows [0, rows) of a transposed A (A[i, k] = a[i + k·ks]), k in
	// [0, kc), into dst as panels of mr rows that fn reads with rs 1 and ks mr: A[i, k] at
	// dst[i/mr·mr·kc + k·mr + i%mr], the rows past rows zero up to a whole panel.
	packT func(dst, a []float32, ks, kc, rows int)
}

// checkBlock panics (with an index error) unless every element a micro-kernel of size mr×nr
// touches lies inside its slices. The assembly kernels rely on it for memory safety. Checking
// the far corner covers the whole block only for kc ≥ 1 and strides ≥ 0, so it checks those
// first (an index below 0 if any is not; a call to report it would keep checkBlock from
// being inlined).
func checkBlock(kc, mr, nr int, a []float32, rs, ks int, b []float32, bs int, c []float32, ldc int, bias []float32) {
	_ = c[min(kc-1, rs, ks, bs, ldc, 0)]
	_ = a[(mr-1)*rs+(kc-1)*ks]
	_ = b[(kc-1)*bs+nr-1]
	_ = c[(mr-1)*ldc+nr-1]
	if bias != nil {
		_ = bias[nr-1]
	}
}

// flag is 1 for true and 0 for false, as the assembly kernels take it.
func flag(b bool) int {
	if b {
		return 1
	}
	return 0
}

// first returns a pointer to v[0], or nil for a nil slice.
func first(v []float32) *float32 {
	if v == nil {
		return nil
	}
	return &v[0]
}

// bestKernel is the fastest micro-kernel this CPU supports, chosen at start-up.
func bestKernel() microKernel { return kernels()[0] }

// goKernel is the portable micro-kernel in plain Go, used where no assembly kernel exists.
var goKernel = microKernel{name: "go 4x4", mr: 4, nr: 4, fn: kernel4x4}

func kernel4x4(kc int, a []float32, rs, ks int, b []float32, bs int, c []float32, ldc int, accumulate bool, bias []float32) {
	checkBlock(kc, 4, 4, a, rs, ks, b, bs, c, ldc, bias)
	// Sixteen scalar accumulators rather than an array, which Go keeps in memory: on
	// machines with 32 float registers (arm64) they stay in registers, and under js/wasm a
	// tiny step is 3–4% faster. (amd64's 16 registers spill them, but amd64 runs this kernel
	// only under TINYGPT_NOASM=1: 5.3 → 4.0 GFLOP/s there.) On arm64 Go compiles c += a·b
	// to a fused multiply-add, on amd64 to a multiply and an add: the results differ by
	// float32 rounding.
	var c00, c01, c02, c03, c10, c11, c12, c13, c20, c21, c22, c23, c30, c31, c32, c33 float32
	for k := 0; k < kc; k++ {
		bk := b[k*bs : k*bs+4 : k*bs+4]
		b0, b1, b2, b3 := bk[0], bk[1], bk[2], bk[3]
		a0, a1, a2, a3 := a[k*ks], a[rs+k*ks], a[2*rs+k*ks], a[3*rs+k*ks]
		c00 += a0 * b0
		c01 += a0 * b1
		c02 += a0 * b2
		c03 += a0 * b3
		c10 += a1 * b0
		c11 += a1 * b1
		c12 += a1 * b2
		c13 += a1 * b3
		c20 += a2 * b0
		c21 += a2 * b1
		c22 += a2 * b2
		c23 += a2 * b3
		c30 += a3 * b0
		c31 += a3 * b1
		c32 += a3 * b2
		c33 += a3 * b3
	}
	acc := [4][4]float32{{c00, c01, c02, c03}, {c10, c11, c12, c13}, {c20, c21, c22, c23}, {c30, c31, c32, c33}}
	for r := range 4 {
		crow := c[r*ldc : r*ldc+4 : r*ldc+4]
		for j := range 4 {
			v := acc[r][j]
			if accumulate {
				v = crow[j] + v
			}
			if bias != nil {
				v += bias[j]
			}
			crow[j] = v
		}
	}
}

// mmScratch is one worker's padding space for the edges of a product.
type mmScratch struct {
	apad  []float32 // the last, partial MR rows of A for one k block: [mr, kcBlock]
	cpad  []float32 // one partial block of C: [mr, nr]
	apack []float32 // mcTile rows of a transposed A for one k block, packed (see gemm)
}

func newMMScratch(k microKernel) mmScratch {
	s := mmScratch{apad: make([]float32, k.mr*kcBlock), cpad: make([]float32, k.mr*k.nr)}
	if k.packT != nil {
		s.apack = make([]float32, mcTile*kcBlock)
	}
	return s
}

// matmulTask is one matrix product in flight; its fields are set by MatMul before each run.
type matmulTask struct {
	be   *Backend
	c, a []float32
	epilogue
	M, N, K    int
	accumulate bool
	rs, ks     int  // strides of op(A): element (i, k) is a[i·rs + k·ks]
	b          bMat // op(B): B itself or a packed copy
	mc, nc     int  // tile size for this product
	tilesN     int
	// With split > 0 the product runs in two loops: the sum over each kcBlock block of K of
	// each tile goes to its own slice of partial (split slices of [M, N]), then the slices are
	// added into C in block order, which is exactly the order of the single loop.
	split   int
	partial []float32
}

// splitTask adds the slices of a split product into C (see matmulTask.split), by rows.
type splitTask struct{ t *matmulTask }

// An epilogue is what a product does to C after its sum: add bias [N] to every row, then
// either write act = GELU(C) and C = GELU'(C) (act not nil; act may be C itself, then only the
// GELU is written), or multiply C elementwise by mul [M, N] (mul not nil). Last, with ln, a
// LayerNorm's pass runs on C's rows: forward, C is the branch that its dropout, residual add
// and normalisation take in (LinearAddLayerNorm); backward, C is the LayerNorm's output
// gradient (LinearLayerNormBackward). It runs on each tile of C as soon as the tile is
// complete, while it is still in the cache; with ln the tiles are whole rows, in whole blocks
// of sumRows.
type epilogue struct {
	bias, act, mul []float32
	ln             *layerNormTask
}

// finish applies the epilogue, less its bias, to cols columns from column j0 of rows
// [i0, i1) of c, whose rows are ldc floats apart.
func (e *epilogue) finish(c []float32, ldc, i0, i1, j0, cols int) {
	for i := i0; e.act != nil && i < i1; i++ {
		geluEpilogue(e.act[i*ldc+j0:][:cols], c[i*ldc+j0:][:cols])
	}
	for i := i0; e.mul != nil && i < i1; i++ {
		row := c[i*ldc+j0:][:cols]
		mulSlice(row, row, e.mul[i*ldc+j0:])
	}
	if e.ln != nil {
		if j0 != 0 || cols != ldc {
			panic("cpu: a LayerNorm epilogue on a tile that is not whole rows")
		}
		e.ln.rows(i0, i1)
	}
}

// MatMul implements backend.Backend.
func (be *Backend) MatMul(c, a, b backend.Tensor, M, N, K int, l backend.Layout, accumulate bool) {
	be.matmul(f32(c)[:M*N], f32(a)[:M*K], f32(b)[:K*N], epilogue{}, M, N, K, l, accumulate)
}

// Linear implements backend.Backend. The GELU and its derivative are computed on each tile of
// the output as soon as it is complete, while it is still in the cache.
func (be *Backend) Linear(out, act, in, w, bias backend.Tensor, N, IC, OC int) {
	var a []float32
	if act != nil {
		a = f32(act)[:N*OC]
	}
	be.matmul(f32(out)[:N*OC], f32(in)[:N*IC], f32(w)[:IC*OC], epilogue{bias: f32(bias)[:OC], act: a}, N, OC, IC, backend.NN, false)
}

// matmul computes c (+)= op(a)·op(b), followed by the epilogue ep.
func (be *Backend) matmul(c, a, b []float32, ep epilogue, M, N, K int, l backend.Layout, accumulate bool) {
	if K == 0 {
		if !accumulate {
			clear(c)
		}
		for i := 0; ep.bias != nil && i < M; i++ {
			for j, v := range ep.bias[:N] {
				c[i*N+j] += v
			}
		}
		ep.finish(c, N, 0, M, 0, N)
		return
	}
	if M == 1 {
		be.gemv(c, a, b, ep.bias, N, K, l == backend.NT, accumulate)
		ep.finish(c, N, 0, 1, 0, N)
		return
	}
	t := &be.mm
	n, packed, trans := be.plan(t, be.pool.workers, c, a, ep, M, N, K, l, accumulate)
	if packed && be.pool.workers == 1 && n == 1 && K > kcBlock {
		be.matmulByBlocks(t, b, trans)
		return
	}
	t.b = bMat{b: b, bs: N, ps: be.kern.nr}
	if packed {
		t.b = be.packB(&be.bpack, b, N, K, 0, K, trans)
	}
	chunks, cost := t.chunks(n, &be.splitBuf)
	be.pool.Run(t, chunks, 1, cost)
	if t.split > 0 {
		be.split.t = t
		be.pool.Run(&be.split, M, t.splitRows(), N*t.split/4)
	}
}

// chunks returns the number of chunks of t's loop, n tiles planned (see plan), and the cost of
// one; when K is split it first gives t its slices in buf.
func (t *matmulTask) chunks(n int, buf *[]float32) (chunks, cost int) {
	if t.split == 0 {
		return n, 2 * t.mc * t.nc * t.K / 64
	}
	grow(buf, t.split*t.M*t.N)
	t.partial = (*buf)[:t.split*t.M*t.N]
	return n * t.split, 2 * t.mc * t.nc * kcBlock / 64
}

// LinearBackward implements backend.Backend. Its three results are independent, so they are
// computed side by side: one loop runs the chunks of the input gradient (dout·Wᵀ), of the
// weight gradient (inᵀ·dout, or its slices when K is split) and of the bias gradient's
// per-block column sums, each product tiled for half the workers; a second loop finishes
// what the first left in slices. Each of the three is summed exactly as MatMul and
// BiasBackward alone would sum it. The GELU' multiplies each tile of the input gradient as soon
// as the tile is complete (see epilogue).
func (be *Backend) LinearBackward(din, dw, db, dout, in, w, dgelu backend.Tensor, N, IC, OC int, accumulate bool) {
	var ep epilogue
	if dgelu != nil {
		ep.mul = f32(dgelu)[:N*IC]
	}
	be.linearBackward(din, dw, db, dout, in, w, ep, N, IC, OC, accumulate)
}

// LinearLayerNormBackward implements backend.Backend: LinearBackward whose input gradient's
// tiles are whole rows, each block of sumRows rows going through the LayerNorm's backward pass
// (see layerNormTask) as soon as it is complete. The parameter gradients' block sums are then
// added up with the bias gradient's. The same bits as the two calls one after the other.
func (be *Backend) LinearLayerNormBackward(din, dw, dbias, dout, in, w, dx, dg, db, x, g, mean, rstd backend.Tensor, N, IC, OC int) {
	ln := be.layerNormBackward(&be.lnPartial, dx, dg, db, din, x, g, mean, rstd, N, IC)
	be.linearBackward(din, dw, dbias, dout, in, w, epilogue{ln: ln}, N, IC, OC, false)
}

// linearBackward is LinearBackward with the input gradient's epilogue ep; with a LayerNorm
// epilogue it also adds up that LayerNorm's parameter gradients.
func (be *Backend) linearBackward(din, dw, db, dout, in, w backend.Tensor, ep epilogue, N, IC, OC int, accumulate bool) {
	do, x, wt := f32(dout)[:N*OC], f32(in)[:N*IC], f32(w)[:IC*OC]
	if be.pool.workers == 1 || N < 2 {
		be.matmul(f32(din)[:N*IC], do, wt, ep, N, IC, OC, backend.NT, accumulate)
		be.MatMul(dw, in, dout, IC, OC, N, backend.TN, true)
		be.BiasBackward(db, dout, N, OC)
		if ln := ep.ln; ln != nil {
			be.reduceColumns(ln.partial, ln.dg, ln.db)
		}
		return
	}
	half := be.pool.workers / 2
	g := &be.group

	t1 := &be.mm // din = dout·Wᵀ: B is Wᵀ, always packed
	n1, _, _ := be.plan(t1, half, f32(din)[:N*IC], do, ep, N, IC, OC, backend.NT, accumulate)
	t1.b = be.packB(&be.bpack, wt, IC, OC, 0, OC, true)
	g.reset()
	chunks, cost := t1.chunks(n1, &be.splitBuf)
	g.add(t1, chunks, 1, cost)
	be.addGradLoops(g, dw, db, do, x, N, IC, OC, half)
	be.pool.Run(g, g.n, 1, g.cost())

	g.reset()
	if t1.split > 0 {
		be.split.t = t1
		g.add(&be.split, N, t1.splitRows(), IC*t1.split/4)
	}
	be.addGradFinish(g, IC, OC)
	ln := ep.ln
	if ln != nil && t1.split == 0 { // the LayerNorm's block sums are complete
		rt2 := &be.reduce2
		rt2.partial, rt2.dst1, rt2.dst2 = ln.partial, ln.dg, ln.db
		g.add(rt2, tiles(2*IC, reduceCols), 1, len(ln.partial)/(2*IC)*reduceCols/8)
	}
	be.pool.Run(g, g.n, 1, g.cost())
	if ln != nil && t1.split > 0 { // the split loop above ran the LayerNorm's blocks
		be.reduceColumns(ln.partial, ln.dg, ln.db)
	}
}

// addGradLoops adds to g, after the loop it already holds, the loops of a linear layer's
// parameter gradients: the bias gradient's per-block column sums of dout [N, OC], then dw +=
// inᵀ·dout (in [N, IC]) tiled for the given number of workers. The bias's short loop thus lies
// between the two products (see taskGroup). addGradFinish completes both.
func (be *Backend) addGradLoops(g *taskGroup, dw, db backend.Tensor, dout, in []float32, N, IC, OC, workers int) {
	t2 := &be.mm2
	n2, packed, _ := be.plan(t2, workers, f32(dw)[:IC*OC], in, epilogue{}, IC, OC, N, backend.TN, true)
	t2.b = bMat{b: dout, bs: OC, ps: be.kern.nr}
	if packed {
		t2.b = be.packB(&be.bpack2, dout, OC, N, 0, N, false)
	}
	tb := &be.bias
	*tb = biasTask{bias: f32(db)[:OC], dout: dout, N: N, C: OC, backward: true}
	tb.partial = partials(&be.partialCols, N, OC)
	g.add(tb, tiles(N, sumRows), 1, sumRows*OC)
	chunks, cost := t2.chunks(n2, &be.splitBuf2)
	g.add(t2, chunks, 1, cost)
}

// addGradFinish adds to g the loops that complete addGradLoops' gradients, for a weight of
// IC×OC: the sum of the weight gradient's slices when its K was split, and of the bias
// gradient's block sums.
func (be *Backend) addGradFinish(g *taskGroup, IC, OC int) {
	if t2 := &be.mm2; t2.split > 0 {
		be.split2.t = t2
		g.add(&be.split2, IC, 4, OC*t2.split/4)
	}
	rt, tb := &be.reduce, &be.bias
	rt.partial, rt.dst1, rt.dst2 = tb.partial, tb.bias, nil
	g.add(rt, tiles(OC, reduceCols), 1, len(tb.partial)/OC*reduceCols/8)
}

// taskGroup runs up to three independent loops as one parallel loop: its chunks
// [start[i], start[i+1]) are loop i's, each covering chunk[i] of its iterations. The pool
// gives each worker a contiguous share of the chunks, so the loops' chunks are laid out in
// turn over the workers: with a short loop between two long ones, as LinearBackward orders
// them, the first workers start on the first product, the last on the second.
type taskGroup struct {
	tasks        [3]task
	start, chunk [3]int
	iters        [3]int
	parts, n     int
	work         int // Σ iterations·cost over the loops
}

func (g *taskGroup) reset() { *g = taskGroup{} }

// add appends a loop of n iterations in chunks of the given size, each iteration of the given
// cost (see pool.Run).
func (g *taskGroup) add(t task, n, chunk, cost int) {
	i := g.parts
	g.tasks[i], g.start[i], g.chunk[i], g.iters[i] = t, g.n, chunk, n
	g.parts++
	g.n += tiles(n, chunk)
	g.work += n * cost
}

// cost returns the mean cost of the group's chunks.
func (g *taskGroup) cost() int { return g.work / max(g.n, 1) }

func (g *taskGroup) run(w, lo, hi int) {
	for i := range g.parts {
		end := g.n
		if i+1 < g.parts {
			end = g.start[i+1]
		}
		if a, b := max(lo, g.start[i]), min(hi, end); a < b {
			c := g.chunk[i]
			g.tasks[i].run(w, (a-g.start[i])*c, min((b-g.start[i])*c, g.iters[i]))
		}
	}
}

// plan sets t up for c (+)= op(a)·op(b) and the epilogue ep computed by the given
// number of workers, all but its B operand, and returns the number of tiles n (the loop has
// n·t.split chunks when t.split > 0, else n) and whether B has to be packed (transposed, with
// trans) before the loop runs.
func (be *Backend) plan(t *matmulTask, workers int, c, a []float32, ep epilogue, M, N, K int, l backend.Layout, accumulate bool) (n int, packed, trans bool) {
	t.be, t.c, t.a, t.epilogue = be, c, a, ep
	t.M, t.N, t.K, t.accumulate = M, N, K, accumulate
	if l == backend.TN { // A is [K, M]
		t.rs, t.ks = 1, M
	} else { // A is [M, K]
		t.rs, t.ks = K, 1
	}
	mr, nr := be.kern.mr, be.kern.nr
	// Products with few tiles and a long K (the weight gradients, whose K is the number of
	// tokens) split K by blocks when the slices fit in maxSplitFloats; then tiles shrink
	// (keeping multiples of the micro-kernel's block) until every worker gets two chunks, and
	// on to chunksPerWorker while a chunk keeps at least minChunkFlops of work. The cores of a
	// shared machine run at different speeds (on the 16-core machine, 86 to 176 GFLOP/s each
	// with all sixteen busy), and a worker done with its share can only take over chunks that
	// a slower one has not started yet, so two large chunks each left the fast cores waiting.
	// A single worker has no one to balance against and nothing to split K for: its tiles stay
	// whole, each panel of B reused by all mcTile rows (smaller tiles read B again for every
	// tile row). And when K spans several k blocks and C is small (a k block of A and of B
	// fit in L2 together with all of C), the whole product is its one tile: gemm then walks
	// the k blocks outermost, so each block of A and B comes into L2 once and serves every
	// row and column of C, where tiles of mcTile rows each brought all of B in again.
	// The same holds for a product whose A gemm packs (a transposed A, see packMinStride),
	// whatever its size: gemm packs mcTile rows of A at a time per k block, so what has to stay
	// in L2 is a k block of B, up to packedTileCols columns wide, and one packed block of A.
	// Tiles halve down to at least minMC×minNC. A LayerNorm epilogue needs whole rows, in whole
	// blocks of sumRows (a multiple of mr).
	minMC, minNC := mr, nr
	t.mc, t.nc = mcTile, min(ncTile, roundUp(N, nr))
	switch {
	case workers == 1 && be.kern.packsA(t.rs, t.ks, N):
		t.mc, t.nc = M, min(roundUp(N, nr), packedTileCols)
	case workers == 1 && K > kcBlock && (M+N)*kcBlock+M*N <= oneTileFloats:
		t.mc, t.nc = M, roundUp(N, nr)
	}
	if ep.ln != nil {
		t.nc = roundUp(N, nr)
		minMC, minNC = sumRows, t.nc
	}
	t.split = 0
	if blocks := tiles(K, kcBlock); workers > 1 && blocks > 1 && tiles(M, t.mc)*tiles(N, t.nc) < 2*workers && blocks*M*N <= maxSplitFloats {
		t.split = blocks
	}
	kc := min(K, kcBlock)
	if t.split == 0 {
		kc = K
	}
	for workers > 1 {
		chunks := tiles(M, t.mc) * tiles(N, t.nc) * max(t.split, 1)
		if chunks >= chunksPerWorker*workers || t.mc <= minMC && t.nc <= minNC ||
			chunks >= 2*workers && t.mc*t.nc*kc < minChunkFlops { // 2·(mc/2)·nc·kc flops once halved
			break
		}
		if t.mc >= t.nc && t.mc > minMC || t.nc <= minNC {
			t.mc = roundUp(t.mc/2, minMC)
		} else {
			t.nc = roundUp(t.nc/2, nr)
		}
	}
	t.tilesN = tiles(N, t.nc)
	n = tiles(M, t.mc) * t.tilesN
	return n, l == backend.NT || N%nr != 0 || M >= packMinRows && N > packMinCols, l == backend.NT
}

// matmulByBlocks computes a single worker's product of one tile whose B is packed (see bMat)
// a k block at a time: B's block is packed just before it is used, so it is read back from
// L2, where a whole packed B (8 MB for huge's 256×1024×2048 TN) went out to L3 and came back.
// Each block's sum is added to C in block order, the epilogue after the last, as
// gemm would have.
func (be *Backend) matmulByBlocks(t *matmulTask, b []float32, trans bool) {
	a, K, accumulate, ep := t.a, t.K, t.accumulate, t.epilogue
	for k0 := 0; k0 < K; k0 += kcBlock {
		kc := min(kcBlock, K-k0)
		t.b = be.packB(&be.bpack, b, t.N, K, k0, kc, trans)
		t.a, t.K, t.accumulate, t.epilogue = a[k0*t.ks:], kc, accumulate || k0 > 0, epilogue{}
		if k0+kc == K {
			t.epilogue = ep
		}
		be.pool.Run(t, 1, 1, 2*t.mc*t.nc*kc/64)
	}
}

// oneTileFloats bounds (M+N)·kcBlock + M·N for a single worker's product to be one tile:
// 1.5 MB, of the 2 MB L2 cache per core of the machines measured. The weight gradients of
// huge's attention (256×256, K 2048 tokens) and of large's MLP (192×768, K 1536) went from
// 70–75% to 79–82% of one core's FMA peak on the 16-core machine (docs/performance.md,
// eighteenth session).
const oneTileFloats = 3 << 17

// packedTileCols bounds the width of a single worker's tile when A is packed: a k block of B
// 1024 wide is 1 MB, half the L2 cache. Measured up to 1024 (256×1024×2048 TN: 57–65% of
// the peak in tiles of 96×256, 76–79% as one tile, 79–85% with B also packed a k block at a
// time; nineteenth session).
const packedTileCols = 1024

// maxSplitFloats bounds the scratch of a product split along K (16 MB).
const maxSplitFloats = 1 << 22

// A product is cut into up to chunksPerWorker chunks per worker, none under minChunkFlops
// (about 15 µs of one core) unless that leaves a worker fewer than two.
const (
	chunksPerWorker = 8
	minChunkFlops   = 2 << 20
)

func tiles(n, size int) int { return (n + size - 1) / size }

func roundUp(n, m int) int { return (n + m - 1) / m * m }

func (t *matmulTask) run(w, lo, hi int) {
	tilesMN := tiles(t.M, t.mc) * t.tilesN
	for i := lo; i < hi; i++ {
		tile, blk := i, 0
		if t.split > 0 { // block-major: a worker's share of chunks is a range of K (tokens)
			tile, blk = i%tilesMN, i/tilesMN
		}
		i0 := tile / t.tilesN * t.mc
		j0 := tile % t.tilesN * t.nc
		mc, nc := min(t.mc, t.M-i0), min(t.nc, t.N-j0)
		if t.split > 0 {
			t.blockOfTile(&t.be.scratch[w], blk, i0, j0, mc, nc)
			continue
		}
		t.tile(&t.be.scratch[w], i0, j0, mc, nc)
	}
}

// blockOfTile computes the sum over K block blk of C[i0:i0+mc, j0:j0+nc] into slice blk of
// t.partial.
func (t *matmulTask) blockOfTile(s *mmScratch, blk, i0, j0, mc, nc int) {
	k0 := blk * kcBlock
	b := t.b
	b.b = b.b[j0/t.be.kern.nr*b.ps+k0*b.bs:]
	c := t.partial[blk*t.M*t.N:]
	t.be.kern.gemm(s, mc, nc, min(kcBlock, t.K-k0), t.a[i0*t.rs+k0*t.ks:], t.rs, t.ks, b, c[i0*t.N+j0:], t.N, false, nil)
}

// run adds the slices into rows [lo, hi) of C, then the epilogue, as tile would.
func (st *splitTask) run(_, lo, hi int) {
	t := st.t
	N := t.N
	for i := lo; i < hi; i++ {
		row := t.c[i*N : (i+1)*N]
		addSlices(row, t.partial[i*N:], t.M*N, t.split, t.accumulate)
		if t.bias != nil {
			addSlice(row, row, t.bias[:N])
		}
	}
	t.finish(t.c, N, lo, hi, 0, N)
}

// splitRows returns the number of rows per chunk of a splitTask over t: whole blocks of sumRows
// for a LayerNorm epilogue.
func (t *matmulTask) splitRows() int {
	if t.ln != nil {
		return sumRows
	}
	return 4
}

// addSlices adds n partial sums into dst in order, slice s being partial[s·stride:][:len(dst)]:
// dst is the first slice plus the others (or, with accumulate, dst plus all of them), each
// addition rounded once.
func addSlices(dst, partial []float32, stride, n int, accumulate bool) {
	for s := range n {
		p := partial[s*stride:][:len(dst)]
		if s == 0 && !accumulate {
			copy(dst, p)
			continue
		}
		addSlice(dst, dst, p)
	}
}

// tile computes C[i0:i0+mc, j0:j0+nc].
func (t *matmulTask) tile(s *mmScratch, i0, j0, mc, nc int) {
	var bias []float32
	if t.bias != nil {
		bias = t.bias[j0:]
	}
	b := t.b
	b.b = b.b[j0/t.be.kern.nr*b.ps:]
	t.be.kern.gemm(s, mc, nc, t.K, t.a[i0*t.rs:], t.rs, t.ks, b, t.c[i0*t.N+j0:], t.N, t.accumulate, bias)
	t.finish(t.c, t.N, i0, i0+mc, j0, nc)
}

// A bMat is the B operand of gemm, read by the micro-kernel in panels of NR columns: B[k, j] is
// b[(j/NR)·ps + k·bs + j%NR]. A row-major [K, ld] matrix read in place is {b, ld, NR}; a packed
// copy, each panel K×NR contiguous, is {b, NR, K·NR}.
type bMat struct {
	b      []float32
	bs, ps int
}

// B is packed even when it could be read in place when C has at least packMinRows rows and B
// more than packMinCols columns: packing costs a read and a write of all of B, and pays once
// many row blocks reuse each panel from the L1 cache instead of gathering it from rows so far
// apart (over 1 KB) that they compete for the same cache sets. Each packed element serves
// 2·M flops, so for the weight gradients (M the layer's width, K the tokens) the copy cost
// more than the conflicts it avoids: 96×384×1024 TN ran at 64–75% of one core's FMA peak
// packed and 84–89% in place (16-core machine; docs/performance.md, fourteenth session).
const (
	packMinRows = 256
	packMinCols = 256
)

// gemm computes C (+)= A·B (+ bias) on the calling goroutine for an M×N block C with K ≥ 1,
// where A[i, k] = a[i·rs + k·ks] and C[i, j] = c[i·ldc + j]. B must be readable (any finite
// values) up to column N rounded up to NR; only C[0:M, 0:N] is written.
// It walks K in blocks of kcBlock (see kblock for one block). A transposed A whose rows are at
// least packMinStride floats apart (the weight gradients' activations) is first packed, for
// each k block, mcTile rows at a time, into the micro-kernel's panels (see packsA and
// microKernel.packT): read in place, each k step of a panel is a row of A 768 bytes or more
// after the last, so a panel's 256 steps fall in a few of the L1 cache's sets and come from L2
// again for every panel of B.
func (kern microKernel) gemm(s *mmScratch, M, N, K int, a []float32, rs, ks int, b bMat, c []float32, ldc int, accumulate bool, bias []float32) {
	mr := kern.mr
	packed := kern.packsA(rs, ks, N)
	last := -1 // with M%MR != 0: the first row of the overlapping last block, or −1 (see kblock)
	if !packed && M%mr != 0 && M >= mr && !accumulate && K <= kcBlock {
		last = M - mr
	}
	for k0 := 0; k0 < K; k0 += kcBlock {
		kc := min(kcBlock, K-k0)
		acc := accumulate || k0 > 0
		var bb []float32
		if k0+kc == K {
			bb = bias
		}
		bk := bMat{b: b.b[k0*b.bs:], bs: b.bs, ps: b.ps}
		if !packed {
			x := aBlock{a: a[k0*ks:], rs: rs, ks: ks, ps: mr * rs}
			kern.kblock(s, M, N, kc, x, bk, c, ldc, acc, bb, last)
			continue
		}
		for i0 := 0; i0 < M; i0 += mcTile {
			rows := min(mcTile, M-i0)
			kern.packT(s.apack, a[i0+k0*ks:], ks, kc, rows)
			x := aBlock{a: s.apack, rs: 1, ks: mr, ps: mr * kc, padded: true}
			kern.kblock(s, rows, N, kc, x, bk, c[i0*ldc:], ldc, acc, bb, -1)
		}
	}
}

// packsA reports whether gemm packs an A with these strides for a product N columns wide: a
// transposed A with rows packMinStride or more apart, when each packed panel serves more than
// one panel of B (attention's dSᵀ and Pᵀ, one head wide, are read once each).
func (kern microKernel) packsA(rs, ks, N int) bool {
	return kern.packT != nil && rs == 1 && ks >= packMinStride && N > kern.nr
}

// packMinStride is the distance between the rows of a transposed A (in floats) from which gemm
// packs it. On one core of the 16-core machine, with A packed: the MLP's weight gradients
// (A 768 or 1024 floats wide) went from 57–72% of the FMA peak to 76–83%, large's
// 192×768×1536 TN (A 192 wide) from 71–80% to 81–85%; 256×256×2048 was at 80–84% either way,
// and at 96 floats (96×384×1024 TN) packing was slower (docs/performance.md, nineteenth and
// fifteenth sessions).
const packMinStride = 192

// An aBlock is the A operand of one k block: row i of A starts at a[i/MR·ps + i%MR·rs] and
// its k steps are ks apart. A read in place has ps = MR·rs; packed panels have rs 1, ks MR and
// ps MR·kc, and with padded the rows past the last up to a whole panel read as zeros.
type aBlock struct {
	a          []float32
	rs, ks, ps int
	padded     bool
}

// at returns A from row i on (packed, i a panel's first row or a row inside one whose
// later rows are read through rs).
func (x aBlock) at(i, mr int) []float32 { return x.a[i/mr*x.ps+i%mr*x.rs:] }

// kblock computes C (+)= A·B (+ bias) for one k block (kc ≤ kcBlock steps), B's panels already
// at the block's first row, walking C in MR×NR blocks and passing the last partial columns
// through the zero-padded buffer of s. The last partial rows, where they are a multiple of 4
// and the kernel has a 4-row variant, are computed by it straight from A into C (in the whole
// panels of NR columns). Otherwise, with last ≥ 0 (C only stored, one k block, M ≥ MR), they
// are the block's last MR rows, starting at row last: the rows they share with the block
// before get the same values again. Otherwise they go through zero-padded rows: A's own when
// x is padded, else a copy in s.apad.
func (kern microKernel) kblock(s *mmScratch, M, N, kc int, x aBlock, b bMat, c []float32, ldc int, acc bool, bias []float32, last int) {
	bs := b.bs
	mr, nr := kern.mr, kern.nr
	full := M / mr * mr                                     // rows in whole MR blocks
	by4 := full < M && (M-full)%4 == 0 && kern.rows4 != nil // the partial rows by rows4
	if by4 {
		last = -1
	}
	pad, prs, pks := s.apad, kc, 1 // the partial rows, zero-padded to MR
	if x.padded {
		pad, prs, pks = x.at(full, mr), x.rs, x.ks
	} else if full < M && last < 0 && (!by4 || N%nr != 0) { // copy the partial rows
		padA(s.apad[:mr*kc], x.at(full, mr), x.rs, x.ks, M-full, kc)
	}
	for jp := 0; jp < N; jp += nr {
		bp := b.b[jp/nr*b.ps:]
		var bj []float32
		if bias != nil {
			bj = bias[jp:]
		}
		if cols := N - jp; cols < nr { // partial columns
			fn := kern.fn
			if kern.half != nil && cols <= nr/2 {
				fn = kern.half
			}
			for ip := 0; ip < M; ip += mr {
				ap, ars, aks := x.at(ip, mr), x.rs, x.ks
				cp := s.cpad // the block's first row in cpad
				if ip >= full && last >= 0 {
					ap, cp = x.at(last, mr), s.cpad[(ip-last)*nr:]
				} else if ip >= full {
					ap, ars, aks = pad, prs, pks
				}
				if cols == nr/2 && ip < full && kern.half != nil { // straight into C
					fn(kc, ap, ars, aks, bp, bs, c[ip*ldc+jp:], ldc, acc, bj)
					continue
				}
				fn(kc, ap, ars, aks, bp, bs, s.cpad, nr, false, nil)
				addBlock(c[ip*ldc+jp:], ldc, cp, nr, min(mr, M-ip), cols, acc, bj)
			}
			continue
		}
		for ip := 0; ip < full; ip += mr {
			kern.fn(kc, x.at(ip, mr), x.rs, x.ks, bp, bs, c[ip*ldc+jp:], ldc, acc, bj)
		}
		if by4 {
			for ip := full; ip < M; ip += 4 {
				kern.rows4(kc, x.at(ip, mr), x.rs, x.ks, bp, bs, c[ip*ldc+jp:], ldc, acc, bj)
			}
		} else if last >= 0 {
			kern.fn(kc, x.at(last, mr), x.rs, x.ks, bp, bs, c[last*ldc+jp:], ldc, false, bj)
		} else if full < M {
			kern.fn(kc, pad, prs, pks, bp, bs, s.cpad, nr, false, nil)
			addBlock(c[full*ldc+jp:], ldc, s.cpad, nr, M-full, nr, acc, bj)
		}
	}
}

// padA copies rows [0, rows) of A (A[i, k] = a[i·rs + k·ks]), k in [0, kc), into apad as a
// row-major block of len(apad)/kc rows, the rows past rows zero. A transposed A (rs 1, as
// attention's dSᵀ and Pᵀ) is read a row of its memory at a time.
func padA(apad, a []float32, rs, ks, rows, kc int) {
	if rs == 1 && ks != 1 {
		clear(apad[rows*kc:])
		transposeRows(apad, kc, a, ks, kc, rows) // A's memory rows are its columns k
		return
	}
	for r := range len(apad) / kc {
		dst := apad[r*kc : r*kc+kc]
		if r >= rows {
			clear(dst)
			continue
		}
		if ks == 1 {
			copy(dst, a[r*rs:])
			continue
		}
		for k := range dst {
			dst[k] = a[r*rs+k*ks]
		}
	}
}

// addBlock stores (or, with acc, adds) the rows×cols corner of a micro-kernel block computed
// into cpad (row stride nr) to c (row stride ldc), then adds the bias, in the order the
// micro-kernel would have.
func addBlock(c []float32, ldc int, cpad []float32, nr, rows, cols int, acc bool, bias []float32) {
	for r := range rows {
		crow, v := c[r*ldc:][:cols], cpad[r*nr:][:cols]
		if acc {
			addSlice(crow, crow, v)
		} else {
			copy(crow, v)
		}
		if bias != nil {
			addSlice(crow, crow, bias[:cols])
		}
	}
}

func copyRowsGo(dst, src []float32, bs, rows, w int) {
	for r := range rows {
		copy(dst[r*w:(r+1)*w], src[r*bs:r*bs+w])
	}
}

// transposeGo writes the transpose of src's rows [0, rows) and columns [0, cols) to dst
// (see transposeRows), except the block of rows [0, r8) and columns [0, c8), already done.
func transposeGo(dst []float32, ldd int, src []float32, lds, r8, c8, rows, cols int) {
	for r := range rows {
		c0 := 0
		if r < r8 {
			c0 = c8
		}
		for c, v := range src[r*lds+c0 : r*lds+cols] {
			dst[(c0+c)*ldd+r] = v
		}
	}
}

// geluEpilogue finishes a Linear with a GELU on x (a piece of its output): act = GELU(x) and
// x = GELU'(x), or only x = GELU(x) when act is x.
func geluEpilogue(act, x []float32) {
	if &act[0] == &x[0] {
		geluSlice(x, x)
		return
	}
	geluBothSlice(act, x, x)
}

// gemvTask is a product with a single row of C, as in generating one token at a time, where
// the micro-kernel's MR rows would be mostly padding and the time goes to reading B once. With
// Bᵀ each element of C is a dot product of a with a row of B, in chunks of gemvCols columns.
// Without, B is read in blocks of gemvBlock whole rows, each one piece of memory: chunk i adds
// a[k]·B[k, :] over the rows k of block i into its own partial row, and a second loop adds the
// partial rows into C in block order, so the sums do not depend on the number of workers.
// (Chunks of columns instead, each reading all K rows, read B in short strided pieces and ran
// huge's decode 25% slower on two cores; docs/performance.md.) Within a block, B is read by
// gemvRows, which keeps 64 columns of the partial row in registers while it walks down the
// block's rows (64 streams of memory at once), or, for a B of gemvStream floats or more, by
// whichever of gemvRows and axpyRows (one row after the other, front to back, reloading the
// partial row for each) streamPick found faster. The two give the same sums in the same order.
type gemvTask struct {
	c, a, b, bias []float32
	N, K          int
	trans         bool // b is Bᵀ, [N, K]
	accumulate    bool
	partial       []float32 // without Bᵀ: [tiles(K, gemvBlock), N] partial rows
	reduce        bool      // the second loop: add the partial rows into c
	byRow         bool      // the blocks are read by axpyRows, not gemvRows
}

const (
	gemvCols   = 128       // columns per chunk of dot products, and of the adding loop
	gemvBlock  = 64        // rows of B per chunk without Bᵀ
	gemvStream = 128 << 10 // floats of B (512 KB) from which streamPick chooses how to read it
)

// streamPick chooses how one-row products read a B of gemvStream floats or more: with
// gemvRows (64 rows side by side) or axpyRows (a row at a time). Which is faster depends on the
// processor and on where B comes from, and no rule seen beforehand tells: huge's decode, its
// weights read from memory, ran 40–55% faster on two cores of an AMD EPYC with axpyRows (the
// partial row stays in L1; one stream per core: 32–35 GB/s against 17–21), while on a
// 16-core Xeon, whose 300 MB cache holds the weights, axpyRows made it 20–25% slower (gemvRows
// read 75–80 GB/s, axpyRows 48–54), and in a 2-core L2 cache axpyRows is 20% slower. Both give
// the same bits, so the backend measures them on the products it is asked for, each shape of
// B (a model's weights of one kind, as every layer's MLP input weights) on its own: the first
// 2·pickTrial products of a shape alternate between the two kernels, the kernel whose fastest
// product was faster is used for the next pickEvery, and then the trial is run again (a
// machine's load may have changed). The fastest of a few products is what each kernel can do
// there, where a sum would count a product that another program's thread delayed. (One choice
// for all shapes, from a trial that alternated between them, was biased: a model with two
// large products a layer had the one always timed with gemvRows, the other with axpyRows.)
type streamPick struct {
	i     int              // products since the cycle began (a trial, then pickEvery)
	best  [2]time.Duration // the trial's fastest product with gemvRows, with axpyRows
	byRow bool             // the choice between trials
}

const (
	pickTrial = 8   // timed products of each kernel per trial
	pickEvery = 256 // products between trials
	maxPicks  = 64  // shapes with a streamPick at once (more: all start again)
)

// next returns whether the next product reads B by rows, and whether it is timed.
func (p *streamPick) next() (byRow, timed bool) {
	if p.i == 2*pickTrial+pickEvery {
		p.i = 0
	}
	p.i++
	if p.i <= 2*pickTrial {
		return p.i&1 == 0, true
	}
	return p.byRow, false
}

// record adds a timed product's time d to the trial, and at the trial's end picks the kernel
// whose fastest product was faster.
func (p *streamPick) record(byRow bool, d time.Duration) {
	k := 0
	if byRow {
		k = 1
	}
	if p.i <= 2 || d < p.best[k] {
		p.best[k] = d
	}
	if p.i == 2*pickTrial {
		p.byRow = p.best[1] < p.best[0]
	}
}

// pickFor returns the streamPick of products with a B of K rows and N columns.
func (be *Backend) pickFor(K, N int) *streamPick {
	key := [2]int{K, N}
	p := be.gvPicks[key]
	if p == nil {
		if be.gvPicks == nil || len(be.gvPicks) == maxPicks {
			be.gvPicks = make(map[[2]int]*streamPick)
		}
		p = new(streamPick)
		be.gvPicks[key] = p
	}
	return p
}

// gemv computes c (+)= a·op(b) (+ bias) for one row a [K] (in both layouts of A the row is
// contiguous when M is 1).
func (be *Backend) gemv(c, a, b, bias []float32, N, K int, trans, accumulate bool) {
	t := &be.gv
	*t = gemvTask{c: c[:N], a: a[:K], b: b[:K*N], bias: bias, N: N, K: K, trans: trans, accumulate: accumulate}
	if trans {
		be.pool.Run(t, tiles(N, gemvCols), 1, K*gemvCols/8)
		return
	}
	blocks := tiles(K, gemvBlock)
	grow(&be.gvPartial, blocks*N)
	t.partial = be.gvPartial[:blocks*N]
	// Reading B dominates: about 4 floats per ns from memory.
	var pick *streamPick
	var timed bool
	var start time.Time
	if K*N >= gemvStream {
		pick = be.pickFor(K, N)
		if t.byRow, timed = pick.next(); timed {
			start = time.Now()
		}
	}
	be.pool.Run(t, blocks, 1, gemvBlock*N/4)
	if timed {
		pick.record(t.byRow, time.Since(start))
	}
	t.reduce = true
	be.pool.Run(t, tiles(N, gemvCols), 1, blocks*gemvCols/8)
}

func (t *gemvTask) run(_, lo, hi int) {
	if !t.trans && !t.reduce {
		for blk := lo; blk < hi; blk++ {
			p := t.partial[blk*t.N : (blk+1)*t.N]
			clear(p)
			k0, k1 := blk*gemvBlock, min((blk+1)*gemvBlock, t.K)
			if t.byRow {
				axpyRows(p, t.a[k0:k1], t.b[k0*t.N:], t.N)
			} else {
				gemvRows(p, t.a[k0:k1], t.b[k0*t.N:], t.N)
			}
		}
		return
	}
	j0, j1 := lo*gemvCols, min(hi*gemvCols, t.N)
	y := t.c[j0:j1]
	if t.trans {
		for j := range y {
			v := dot(t.a, t.b[(j0+j)*t.K:(j0+j+1)*t.K])
			if t.accumulate {
				v = y[j] + v
			}
			y[j] = v
		}
	} else {
		addSlices(y, t.partial[j0:], t.N, tiles(t.K, gemvBlock), t.accumulate)
	}
	if t.bias != nil {
		addSlice(y, y, t.bias[j0:j1])
	}
}

// packBTask copies op(B) into panels of NR columns (see bMat), zero-padded to a whole panel.
// Its chunks are (panel, block of packRows rows) pairs, so that even a narrow B spreads over
// the workers.
type packBTask struct {
	dst, src []float32
	N, K, nr int
	ld       int // the row stride of src: N, or with trans the length of Bᵀ's rows (at least K)
	kBlocks  int
	trans    bool // src is Bᵀ, [N, ld]
}

const packRows = 64

// packB returns rows [k0, k0+kc) of op(B), K×N (b is Bᵀ [N, K] with trans), packed in
// panels, in *buf, a buffer of the Backend that grows to the largest block seen (so
// steady-state steps allocate nothing).
func (be *Backend) packB(buf *[]float32, b []float32, N, K, k0, kc int, trans bool) bMat {
	src, ld := b[k0*N:], N
	if trans { // the block is columns k0… of Bᵀ's rows
		src, ld = b[k0:], K
	}
	nr := be.kern.nr
	grow(buf, roundUp(N, nr)*kc)
	t := &be.pb
	var panels bMat
	*t, panels = packing(*buf, src, N, kc, ld, nr, trans)
	be.pool.Run(t, t.chunks(), 1, packRows*nr/4)
	return panels
}

// packing returns the task that packs the K×N matrix op(B) (src with rows ld floats apart; with
// trans, src is Bᵀ, N rows ld floats apart) into dst as panels of nr columns, and those panels
// as gemm reads them. dst must hold N rounded up to nr times K floats.
func packing(dst, src []float32, N, K, ld, nr int, trans bool) (packBTask, bMat) {
	t := packBTask{dst: dst[:roundUp(N, nr)*K], src: src, N: N, K: K, ld: ld, nr: nr, kBlocks: tiles(K, packRows), trans: trans}
	return t, bMat{b: t.dst, bs: nr, ps: K * nr}
}

// chunks returns the number of chunks of t's loop: (panel, block of packRows rows) pairs.
func (t *packBTask) chunks() int { return tiles(t.N, t.nr) * t.kBlocks }

// run packs chunks [lo, hi). For Bᵀ each source row (a column of op(B)) is read in order and
// scattered over the panel's rows, which stay in the L1 cache.
func (t *packBTask) run(_, lo, hi int) {
	nr := t.nr
	for i := lo; i < hi; i++ {
		p, kb := i/t.kBlocks, i%t.kBlocks
		k0, k1 := kb*packRows, min((kb+1)*packRows, t.K)
		panel := t.dst[p*t.K*nr : (p+1)*t.K*nr]
		j0 := p * nr
		cols := min(nr, t.N-j0)
		if t.trans {
			if cols < nr {
				clear(panel[k0*nr : k1*nr])
			}
			transposeRows(panel[k0*nr:], nr, t.src[j0*t.ld+k0:], t.ld, cols, k1-k0)
			continue
		}
		if cols == nr {
			copyRows(panel[k0*nr:k1*nr], t.src[k0*t.ld+j0:], t.ld, k1-k0, nr)
			continue
		}
		for k := k0; k < k1; k++ {
			dst := panel[k*nr : (k+1)*nr]
			copy(dst, t.src[k*t.ld+j0:k*t.ld+j0+cols])
			clear(dst[cols:])
		}
	}
}
