package cpu

import (
	"math"

	"tinygpt/backend"
)

// This file holds every kernel except matrix products and attention, each forward next to its
// backward. Each parallel kernel is a small task type whose run method is the loop body over a
// range of rows, columns or elements; Backend keeps one value of each so starting a loop
// allocates nothing.

// elemChunk is the number of elements per chunk of an elementwise loop.
const elemChunk = 4096

// ---------------------------------------------------------------- embeddings

type encoderTask struct {
	out, wte, wpe, dwte, dwpe, dout []float32
	tok                             []int32
	T, pos0, C                      int
	backward                        bool
	// Backward: the rows of dout sorted by token (first holds where each token's rows start
	// in byToken), and how many chunks cover the rows of dwte (the rest cover those of dwpe).
	byToken, first []int32
	B, tokChunks   int
}

// encRows is how many rows of dwte or dwpe one chunk of EncoderBackward sums.
const encRows = 4

// Encoder implements backend.Backend.
func (be *Backend) Encoder(out, tok, wte, wpe backend.Tensor, B, T, pos0, C int) {
	t := &be.enc
	*t = encoderTask{out: f32(out), tok: i32(tok)[:B*T], wte: f32(wte), wpe: f32(wpe), T: T, pos0: pos0, C: C}
	be.pool.Run(t, B*T, 16, 2*C)
}

// EncoderBackward implements backend.Backend. Each row of dwte and of dwpe is summed by one
// worker, in token order, so no two workers write the same row and the sums do not depend on
// the number of workers. The rows of dout are first sorted by token (a counting sort, which
// keeps token order within a token), so that the worker of a row of dwte reads whole rows of
// dout, only those of its token. (Workers used to split the columns instead, each reading a
// 128-byte piece of every row of dout: on 16 cores that took longer than on one.)
func (be *Backend) EncoderBackward(dwte, dwpe, dout, tok backend.Tensor, B, T, C int) {
	t := &be.enc
	toks := i32(tok)[:B*T]
	V := len(f32(dwte)) / C
	grow(&be.encFirst, V+1)
	grow(&be.encOrder, B*T)
	first, order := be.encFirst[:V+1], be.encOrder[:B*T]
	clear(first)
	for _, v := range toks { // first[v+1] counts token v
		first[v+1]++
	}
	for v := range V {
		first[v+1] += first[v]
	}
	for r, v := range toks { // first[v] moves along token v's rows, ending at first[v+1]
		order[first[v]] = int32(r)
		first[v]++
	}
	copy(first[1:], first[:V]) // shift back: first[v] is again where token v's rows start
	first[0] = 0
	*t = encoderTask{dwte: f32(dwte), dwpe: f32(dwpe), dout: f32(dout), T: T, C: C, backward: true,
		byToken: order, first: first, B: B, tokChunks: tiles(V, encRows)}
	n := t.tokChunks + tiles(T, encRows)
	be.pool.Run(t, n, 1, 2*B*T*C/8/n)
}

func (t *encoderTask) run(_, lo, hi int) {
	C := t.C
	if !t.backward {
		for r := lo; r < hi; r++ {
			o := t.out[r*C : r*C+C]
			e := t.wte[int(t.tok[r])*C:][:C]
			addSlice(o, e, t.wpe[(t.pos0+r%t.T)*C:][:C])
		}
		return
	}
	for i := lo; i < hi; i++ {
		if i < t.tokChunks {
			for v := i * encRows; v < min((i+1)*encRows, len(t.first)-1); v++ {
				e := t.dwte[v*C : v*C+C]
				for _, r := range t.byToken[t.first[v]:t.first[v+1]] {
					addSlice(e, e, t.dout[int(r)*C:][:C])
				}
			}
			continue
		}
		p0 := (i - t.tokChunks) * encRows
		for p := p0; p < min(p0+encRows, t.T); p++ {
			e := t.dwpe[p*C : p*C+C]
			for b := range t.B {
				addSlice(e, e, t.dout[(b*t.T+p)*C:][:C])
			}
		}
	}
}

// ---------------------------------------------------------------- layer norm

const lnEps = 1e-5

type layerNormTask struct {
	out, mean, rstd, in, g, b []float32
	addA, addB                []float32 // AddLayerNorm: in = addA + addB first
	p                         float32   // LinearAddLayerNorm: Dropout(addB) (in place) before the add
	seed                      uint64
	din, dg, db, dout         []float32
	partial                   []float32 // backward: [row blocks, 2C], dg then db sums
	N, C                      int
	backward                  bool
}

// LayerNorm implements backend.Backend.
func (be *Backend) LayerNorm(out, mean, rstd, in, g, b backend.Tensor, N, C int) {
	t := &be.ln
	*t = layerNormTask{out: f32(out), mean: f32(mean), rstd: f32(rstd), in: f32(in), g: f32(g), b: f32(b), C: C}
	be.pool.Run(t, N, 8, 8*C)
}

// AddLayerNorm implements backend.Backend: each chunk of rows is added up and then normalised
// while it is still in the core's cache.
func (be *Backend) AddLayerNorm(sum, out, mean, rstd, a, b, g, bias backend.Tensor, N, C int) {
	t := be.addLayerNorm(f32(sum), f32(b), out, mean, rstd, a, g, bias, N, C, 0, 0)
	be.pool.Run(t, N, 8, 9*C)
}

// LinearAddLayerNorm implements backend.Backend: the product is computed into sum, in tiles
// of whole rows, and each tile goes through the dropout, the residual add and the LayerNorm
// (see layerNormTask) as soon as it is complete, on the core that computed it. The same bits
// as Linear, Dropout and AddLayerNorm one after the other.
func (be *Backend) LinearAddLayerNorm(sum, out, mean, rstd, in, w, bias, x, g, b backend.Tensor, N, IC, OC int, p float32, seeds backend.Tensor, site int) {
	s := f32(sum)[:N*OC]
	ln := be.addLayerNorm(s, s, out, mean, rstd, x, g, b, N, OC, p, seedAt(seeds, site, p))
	be.matmul(s, f32(in)[:N*IC], f32(w)[:IC*OC], epilogue{bias: f32(bias)[:OC], ln: ln}, N, OC, IC, backend.NN, false)
}

// addLayerNorm sets be.ln up for a residual connection and the LayerNorm after it, over N rows
// of C: dropout (p, seed) of branch in place, sum = x + branch, then the LayerNorm of sum into
// out, mean and rstd. As the epilogue of a product computed into sum, branch is sum itself.
func (be *Backend) addLayerNorm(sum, branch []float32, out, mean, rstd, x, g, b backend.Tensor, N, C int, p float32, seed uint64) *layerNormTask {
	t := &be.ln
	*t = layerNormTask{out: f32(out), mean: f32(mean), rstd: f32(rstd), in: sum, g: f32(g), b: f32(b), N: N, C: C,
		addA: f32(x), addB: branch, p: p, seed: seed}
	return t
}

// MLPAddLayerNorm implements backend.Backend. The branch runs by blocks of chainRows rows: each
// block goes through the first product and its GELU, then straight on through the second
// product and its dropout, residual add and LayerNorm (see LinearAddLayerNorm), on the core
// that computed its GELU, while the block is still in its cache. Both weights are packed once,
// in one loop, before. Weights too large to stay in a core's cache together run as the two
// calls (see chainMaxFloats). The same bits as the two calls.
func (be *Backend) MLPAddLayerNorm(sum, out, mean, rstd, grad, act, in, w1, b1, w2, b2, x, g, b backend.Tensor, N, C, F int, p float32, seeds backend.Tensor, site int) {
	if be.pool.workers == 1 || N < 2 || 2*C*F > chainMaxFloats {
		be.Linear(grad, act, in, w1, b1, N, C, F)
		be.LinearAddLayerNorm(sum, out, mean, rstd, act, w2, b2, x, g, b, N, F, C, p, seeds, site)
		return
	}
	nr := be.kern.nr
	grow(&be.bpack, roundUp(F, nr)*C)
	grow(&be.bpack2, roundUp(C, nr)*F)
	var panels1, panels2 bMat
	be.pb, panels1 = packing(be.bpack, f32(w1)[:C*F], F, C, F, nr, false)
	be.pb2, panels2 = packing(be.bpack2, f32(w2)[:F*C], C, F, C, nr, false)
	grp := &be.group
	grp.reset()
	grp.add(&be.pb, be.pb.chunks(), 1, packRows*nr/4)
	grp.add(&be.pb2, be.pb2.chunks(), 1, packRows*nr/4)
	be.pool.Run(grp, grp.n, 1, grp.cost())

	s, a := f32(sum)[:N*C], f32(act)[:N*F]
	ln := be.addLayerNorm(s, s, out, mean, rstd, x, g, b, N, C, p, seedAt(seeds, site, p))
	first, second := &be.mm, &be.mm2
	*first = matmulTask{be: be, c: f32(grad)[:N*F], a: f32(in)[:N*C], b: panels1, M: N, N: F, K: C, rs: C, ks: 1,
		epilogue: epilogue{bias: f32(b1)[:F], act: a}}
	*second = matmulTask{be: be, c: s, a: a, b: panels2, M: N, N: C, K: F, rs: F, ks: 1,
		epilogue: epilogue{bias: f32(b2)[:C], ln: ln}}
	rows := roundUp(chainRows, be.kern.mr)
	be.chain = chainTask{first: first, second: second, rows: rows}
	be.pool.Run(&be.chain, tiles(N, rows), 1, 4*rows*C*F/64)
}

// chainRows is the number of rows in a block of MLPAddLayerNorm (rounded up to a multiple of
// the micro-kernel's MR). Smaller blocks balance the cores better; each block reads all of both
// packed weights, which stay in the core's L2 cache. At large's shapes on the 16-core machine,
// in a step: 12 rows 4.7–4.9 ms for the six calls, 24 rows 5.1–5.3, 48 rows 6.4–7.1
// (docs/performance.md, twenty-fifth session).
const chainRows = 12

// chainMaxFloats bounds the two packed weights of MLPAddLayerNorm run by blocks of rows (1.5
// MB, of the 2 MB L2 cache per core): larger, they no longer stay in the cache from one block
// to the next. At xl's shapes (2 MB of weights), on the 16-core machine, alone: 1.11–1.22 ms by
// blocks against 0.92–0.96 as the two calls.
const chainMaxFloats = 3 << 17

// chainTask runs two products by blocks of rows, the second's A being the first's output (or
// its GELU): each block of rows of the first product, all its columns, and then the same rows
// of the second.
type chainTask struct {
	first, second *matmulTask
	rows          int
}

func (t *chainTask) run(w, lo, hi int) {
	s := &t.first.be.scratch[w]
	for i := lo; i < hi; i++ {
		i0 := i * t.rows
		rows := min(t.rows, t.first.M-i0)
		t.first.tile(s, i0, 0, rows, t.first.N)
		t.second.tile(s, i0, 0, rows, t.second.N)
	}
}

// LayerNormBackward implements backend.Backend. One pass over blocks of rows writes the input
// gradient and each block's sums of the parameter gradients; a second pass adds those up.
func (be *Backend) LayerNormBackward(din, dg, db, dout, in, g, mean, rstd backend.Tensor, N, C int) {
	t := be.layerNormBackward(&be.partialCols, din, dg, db, dout, in, g, mean, rstd, N, C)
	be.pool.Run(t, tiles(N, sumRows), 1, 14*sumRows*C)
	be.reduceColumns(t.partial, t.dg, t.db)
}

// layerNormBackward sets be.ln up for LayerNormBackward's arguments, its block sums in buf.
func (be *Backend) layerNormBackward(buf *[]float32, din, dg, db, dout, in, g, mean, rstd backend.Tensor, N, C int) *layerNormTask {
	t := &be.ln
	*t = layerNormTask{din: f32(din), dg: f32(dg)[:C], db: f32(db)[:C], dout: f32(dout), in: f32(in), g: f32(g),
		mean: f32(mean), rstd: f32(rstd), N: N, C: C, backward: true}
	t.partial = partials(buf, N, 2*C)
	return t
}

// rows runs the task on rows [i0, i1) of a product's output, the LayerNorm epilogue of
// LinearAddLayerNorm and LinearLayerNormBackward (see epilogue): the forward pass by rows, the
// backward pass by its blocks of sumRows rows (i0 a multiple of sumRows, and i1 too unless it
// is N).
func (t *layerNormTask) rows(i0, i1 int) {
	if !t.backward {
		t.run(0, i0, i1)
		return
	}
	if i0%sumRows != 0 || i1%sumRows != 0 && i1 != t.N {
		panic("cpu: a LayerNorm backward epilogue on rows that are not whole blocks")
	}
	t.run(0, i0/sumRows, tiles(i1, sumRows))
}

func (t *layerNormTask) run(_, lo, hi int) {
	C := t.C
	if t.p > 0 {
		dropoutSlice(t.addB[lo*C:hi*C], t.addB[lo*C:hi*C], lo*C, t.p, t.seed)
	}
	if t.addA != nil {
		addSlice(t.in[lo*C:hi*C], t.addA[lo*C:hi*C], t.addB[lo*C:hi*C])
	}
	switch {
	case !t.backward && lnVector(C):
		// Three passes over the chunk's rows (statistics, then 1/σ, then the output), so
		// that the rows' reductions and square roots, each a chain of dependent operations,
		// overlap instead of running one row after the other (a fifth to a quarter faster at
		// widths 48 and 128).
		for r := lo; r < hi; r++ {
			sum, vs := lnStats(t.in[r*C : r*C+C])
			t.mean[r], t.rstd[r] = sum/float32(C), vs
		}
		for r := lo; r < hi; r++ {
			t.rstd[r] = float32(1 / math.Sqrt(float64(t.rstd[r]/float32(C)+lnEps)))
		}
		for r := lo; r < hi; r++ {
			lnApply(t.out[r*C:r*C+C], t.in[r*C:r*C+C], t.g[:C], t.b[:C], t.mean[r], t.rstd[r])
		}
	case !t.backward:
		for r := lo; r < hi; r++ {
			x := t.in[r*C : r*C+C]
			o := t.out[r*C : r*C+C]
			g, b := t.g[:C], t.b[:C]
			var sum, vs float32
			for _, v := range x {
				sum += v
			}
			m := sum / float32(C)
			for _, v := range x {
				d := v - m
				vs += d * d
			}
			s := float32(1 / math.Sqrt(float64(vs/float32(C)+lnEps)))
			for i, v := range x {
				o[i] = (v-m)*s*g[i] + b[i]
			}
			t.mean[r], t.rstd[r] = m, s
		}
	default:
		for blk := lo; blk < hi; blk++ {
			pg := t.partial[blk*2*C : blk*2*C+C]
			pb := t.partial[blk*2*C+C : blk*2*C+2*C]
			clear(pg)
			clear(pb)
			for r := blk * sumRows; r < min((blk+1)*sumRows, t.N); r++ {
				t.backwardRow(r, pg, pb)
			}
		}
	}
}

// backwardRow adds row r's input gradient into din and its parameter gradients into pg, pb.
func (t *layerNormTask) backwardRow(r int, pg, pb []float32) {
	C := t.C
	x := t.in[r*C : r*C+C]
	dy := t.dout[r*C : r*C+C]
	dx := t.din[r*C : r*C+C]
	g := t.g[:C]
	m, s := t.mean[r], t.rstd[r]
	if lnVector(C) {
		sd, sdn := lnBackSums(x, dy, g, pg, pb, m, s)
		lnBackDx(dx, x, dy, g, m, s, sd/float32(C), sdn/float32(C))
		return
	}
	var dnormMean, dnormNormMean float32
	for i, v := range x {
		norm := (v - m) * s
		dnorm := dy[i] * g[i]
		dnormMean += dnorm
		dnormNormMean += dnorm * norm
		pg[i] += dy[i] * norm
		pb[i] += dy[i]
	}
	dnormMean /= float32(C)
	dnormNormMean /= float32(C)
	for i, v := range x {
		norm := (v - m) * s
		dnorm := dy[i] * g[i]
		dx[i] += (dnorm - dnormMean - norm*dnormNormMean) * s
	}
}

// ---------------------------------------------------------------- bias

type biasTask struct {
	out, bias, dout []float32
	partial         []float32 // backward: [row blocks, C] column sums
	N, C            int
	backward        bool
}

// AddBias implements backend.Backend.
func (be *Backend) AddBias(out, bias backend.Tensor, N, C int) {
	t := &be.bias
	*t = biasTask{out: f32(out), bias: f32(bias), N: N, C: C}
	be.pool.Run(t, N, 16, C)
}

// BiasBackward implements backend.Backend: column sums of dout by row blocks, then reduced.
func (be *Backend) BiasBackward(dbias, dout backend.Tensor, N, C int) {
	t := &be.bias
	*t = biasTask{bias: f32(dbias), dout: f32(dout), N: N, C: C, backward: true}
	t.partial = partials(&be.partialCols, N, C)
	be.pool.Run(t, tiles(N, sumRows), 1, sumRows*C)
	be.reduceColumns(t.partial, t.bias[:C], nil)
}

func (t *biasTask) run(_, lo, hi int) {
	C := t.C
	if !t.backward {
		b := t.bias[:C]
		for r := lo; r < hi; r++ {
			o := t.out[r*C : r*C+C]
			for i := range o {
				o[i] += b[i]
			}
		}
		return
	}
	for blk := lo; blk < hi; blk++ {
		db := t.partial[blk*C : blk*C+C]
		clear(db)
		r0 := blk * sumRows
		colSums(db, t.dout[r0*C:], min(sumRows, t.N-r0), C)
	}
}

// sumRows is the number of rows whose column sums one chunk of a reduction over rows forms (a
// bias or LayerNorm parameter gradient). It is fixed, not derived from the worker count, and the
// blocks' sums are then added in block order, so results are the same on every machine. It is
// a multiple of every micro-kernel's MR, so that a product's tiles can be whole blocks (see
// epilogue).
const sumRows = 24

// partials returns scratch from buf for the per-block column sums of an [N, width] matrix,
// [tiles(N, sumRows), width].
func partials(buf *[]float32, N, width int) []float32 {
	n := tiles(N, sumRows) * width
	grow(buf, n)
	return (*buf)[:n]
}

// reduceTask adds the column sums of partial [blocks, len(dst1)+len(dst2)], taken in block
// order, into dst1 (the first columns) and dst2 (the rest).
type reduceTask struct {
	partial, dst1, dst2 []float32
}

// reduceCols is the number of columns per chunk of reduceColumns: the width gemvRows holds in
// registers.
const reduceCols = 64

// reduceColumns adds Σ_blocks partial[block, :] into dst1 followed by dst2 (which may be nil).
func (be *Backend) reduceColumns(partial, dst1, dst2 []float32) {
	t := &be.reduce
	t.partial, t.dst1, t.dst2 = partial, dst1, dst2
	W := len(dst1) + len(dst2)
	be.pool.Run(t, tiles(W, reduceCols), 1, len(partial)/W*reduceCols/8)
}

func (t *reduceTask) run(_, lo, hi int) {
	n1 := len(t.dst1)
	W := n1 + len(t.dst2)
	for c0 := lo * reduceCols; c0 < min(hi*reduceCols, W); c0 += reduceCols {
		var sum [reduceCols]float32
		s := sum[:min(reduceCols, W-c0)]
		colSums(s, t.partial[c0:], len(t.partial)/W, W)
		for j, v := range s {
			if c := c0 + j; c < n1 {
				t.dst1[c] += v
			} else {
				t.dst2[c-n1] += v
			}
		}
	}
}

// colSums adds rows [0, rows) of m (row stride ld), one after the other, into y: each column's
// additions run in row order, as a loop over rows would (y + 1·v is y + v rounded once).
func colSums(y, m []float32, rows, ld int) {
	for r0 := 0; r0 < rows; r0 += len(ones) {
		n := min(len(ones), rows-r0)
		gemvRows(y, ones[:n], m[r0*ld:], ld)
	}
}

// ones is a row of ones, the weights of a column sum done as a gemvRows.
var ones = func() []float32 {
	v := make([]float32, 256)
	for i := range v {
		v[i] = 1
	}
	return v
}()

// ---------------------------------------------------------------- elementwise: GELU, add, dropout

type elemOp int

const (
	opGELU elemOp = iota
	opGELUBackward
	opAdd
	opMul
	opDropout
)

type elemTask struct {
	op        elemOp
	out, a, b []float32
	p         float32
	seed      uint64
}

func (be *Backend) elementwise(op elemOp, out, a, b []float32, n int, cost int) {
	t := &be.elem
	*t = elemTask{op: op, out: out[:n], a: a[:n]}
	if b != nil {
		t.b = b[:n]
	}
	be.pool.Run(t, n, elemChunk, cost)
}

// GELU implements backend.Backend.
func (be *Backend) GELU(out, in backend.Tensor, n int) {
	be.elementwise(opGELU, f32(out), f32(in), nil, n, 1)
}

// GELUBackward implements backend.Backend.
func (be *Backend) GELUBackward(din, in, dout backend.Tensor, n int) {
	be.elementwise(opGELUBackward, f32(din), f32(in), f32(dout), n, 2)
}

// Mul implements backend.Backend.
func (be *Backend) Mul(out, a, b backend.Tensor, n int) {
	be.elementwise(opMul, f32(out), f32(a), f32(b), n, 1)
}

// Add implements backend.Backend.
func (be *Backend) Add(out, a, b backend.Tensor, n int) {
	be.elementwise(opAdd, f32(out), f32(a), f32(b), n, 1)
}

// Dropout implements backend.Backend.
func (be *Backend) Dropout(out, in backend.Tensor, n int, p float32, seeds backend.Tensor, site int) {
	if p == 0 {
		copy(f32(out)[:n], f32(in)[:n])
		return
	}
	t := &be.elem
	*t = elemTask{op: opDropout, out: f32(out)[:n], a: f32(in)[:n], p: p, seed: seedAt(seeds, site, p)}
	be.pool.Run(t, n, elemChunk, 4)
}

// DropoutBackward implements backend.Backend. The mask is the same function of (seed, i) as in
// Dropout, so the backward pass is the forward pass applied to the gradient.
func (be *Backend) DropoutBackward(din, dout backend.Tensor, n int, p float32, seeds backend.Tensor, site int) {
	be.Dropout(din, dout, n, p, seeds, site)
}

// seedAt returns the dropout seed of site in seeds, or 0 when p is 0 (no dropout: seeds is
// not read and may be nil).
func seedAt(seeds backend.Tensor, site int, p float32) uint64 {
	if p == 0 {
		return 0
	}
	return backend.Seed(i32(seeds), site)
}

func (t *elemTask) run(_, lo, hi int) {
	out, a := t.out[lo:hi], t.a[lo:hi]
	switch t.op {
	case opGELU:
		geluSlice(out, a)
	case opGELUBackward:
		geluGradSlice(out, a, t.b[lo:hi])
	case opAdd:
		addSlice(out, a, t.b[lo:hi])
	case opMul:
		mulSlice(out, a, t.b[lo:hi])
	case opDropout:
		dropoutSlice(out, a, lo, t.p, t.seed)
	}
}

// dropoutSlice sets out[i] = x[i]·keep/(1−p) for the elements x[i], i < len(out), of a tensor
// whose first one is element off (the mask is a function of the element's index in the
// tensor). out may be x.
func dropoutSlice(out, x []float32, off int, p float32, seed uint64) {
	scale := 1 / (1 - p)
	for i, v := range x[:len(out)] {
		if DropoutKeep(seed, uint64(off+i), p) {
			out[i] = v * scale
		} else {
			out[i] = 0
		}
	}
}

// GELU is x·Φ(x) with the exact normal CDF Φ(x) = (1 + erf(x/√2))/2.
func GELU(x float32) float32 { return float32(geluTable.eval(x, 0, float64(x))) }

// GELUGrad is the derivative of GELU: Φ(x) + x·φ(x).
func GELUGrad(x float32) float32 { return float32(geluTable.eval(x, 1, 1)) }

// geluTable holds GELU and its first two derivatives, computed with math.Erf, on a grid of
// spacing 1/64 over [−geluRange, geluRange]; between grid points a cubic Hermite interpolant
// (values and slopes at both ends) is accurate to about 1e-10, far below float32 rounding, at a
// fraction of the cost of evaluating erf. Outside the range GELU is x or 0 to within 1e-22.
var geluTable = newHermiteTable()

const (
	geluRange = 10
	geluSteps = 64 // grid points per unit
)

type hermiteTable struct {
	// f[k][i] is the k-th derivative of GELU at grid point i, for k = 0, 1, 2.
	f [3][2*geluRange*geluSteps + 2]float64
}

func newHermiteTable() *hermiteTable {
	t := new(hermiteTable)
	for i := range t.f[0] {
		x := float64(i)/geluSteps - geluRange
		cdf := 0.5 * (1 + math.Erf(x/math.Sqrt2))
		pdf := math.Exp(-x*x/2) / math.Sqrt(2*math.Pi)
		t.f[0][i] = x * cdf
		t.f[1][i] = cdf + x*pdf
		t.f[2][i] = pdf * (2 - x*x)
	}
	return t
}

// eval interpolates derivative k of GELU at x; above the range it is hi (x for GELU, 1 for its
// derivative), below it 0.
func (t *hermiteTable) eval(x float32, k int, hi float64) float64 {
	xf := float64(x)
	switch {
	case xf != xf:
		return xf
	case xf >= geluRange:
		return hi
	case xf <= -geluRange:
		return 0
	}
	u := (xf + geluRange) * geluSteps
	i := int(u)
	s := u - float64(i)
	f, d := &t.f[k], &t.f[k+1]
	const h = 1.0 / geluSteps
	s2 := s * s
	s3 := s2 * s
	return (2*s3-3*s2+1)*f[i] + (s3-2*s2+s)*h*d[i] + (3*s2-2*s3)*f[i+1] + (s3-s2)*h*d[i+1]
}

// geluGo, geluGradGo, geluBothGo, scaleMaxGo, expShiftGo, scaleMaxRowsGo and expRowsGo are the
// portable loops behind geluSlice, geluGradSlice, geluBothSlice, scaleMax, expShift,
// scaleMaxRows and expRows, which run the vector kernels where the CPU has them and these on the
// remainder.
func geluGo(out, x []float32) {
	for i, v := range x[:len(out)] {
		out[i] = GELU(v)
	}
}

func geluGradGo(out, x, dout []float32) {
	for i, v := range x[:len(out)] {
		out[i] = dout[i] * GELUGrad(v)
	}
}

func geluBothGo(act, grad, x []float32) {
	for i, v := range x[:len(act)] {
		act[i], grad[i] = GELU(v), GELUGrad(v)
	}
}

func scaleMaxGo(x []float32, s float32) float32 {
	mx := float32(math.Inf(-1))
	for i := range x {
		x[i] *= s
		mx = max(mx, x[i])
	}
	return mx
}

// addMulGo is the portable loop behind addSlice and mulSlice.
func addMulGo(out, a, b []float32, mul bool) {
	a, b = a[:len(out)], b[:len(out)]
	if mul {
		for i := range out {
			out[i] = a[i] * b[i]
		}
		return
	}
	for i := range out {
		out[i] = a[i] + b[i]
	}
}

// softmaxBackGo sets ds[i] = p[i]·(ds[i] − d)·s over len(ds) elements: a row of the softmax's
// backward pass (ds holds the probabilities' gradient dP on entry, the scores' on return).
func softmaxBackGo(ds, p []float32, d, s float32) {
	p = p[:len(ds)]
	for i := range ds {
		ds[i] = p[i] * (ds[i] - d) * s
	}
}

func scaleMaxRowsGo(x []float32, ld, rows, w int, s float32, mx []float32) {
	for r := range rows {
		mx[r] = scaleMaxGo(x[r*ld:r*ld+w], s)
	}
}

func expRowsGo(x []float32, ld, rows, w int, shift, sums []float32) {
	for r := range rows {
		sums[r] = expShiftGo(x[r*ld:r*ld+w], shift[r])
	}
}

func expShiftGo(x []float32, shift float32) float32 {
	var s float32
	for i, v := range x {
		x[i] = exp32(v - shift)
		s += x[i]
	}
	return s
}

// exp32 is e^x to float32 accuracy (relative error below 1e-7), several times faster than
// math.Exp: x·log2(e) = n + f with n an integer and |f| ≤ 1/2, so e^x = 2^n · e^(f·ln 2), the
// second factor by its Taylor series to degree 7 (error < 6e-9), the first by building the
// float64 exponent bits directly.
func exp32(x float32) float32 {
	switch {
	case x < -104: // below the smallest float32 subnormal
		return 0
	case x > 88.8: // above the largest float32
		return float32(math.Inf(1))
	case x != x:
		return x
	}
	y := float64(x) * math.Log2E
	n := int64(y+1024.5) - 1024 // round to nearest; y > −1024 here
	g := (y - float64(n)) * math.Ln2
	// Estrin's scheme: the same polynomial with a shorter chain of dependent operations.
	g2 := g * g
	g4 := g2 * g2
	p := (1 + g + g2*(1.0/2+g*(1.0/6))) + g4*((1.0/24+g*(1.0/120))+g2*(1.0/720+g*(1.0/5040)))
	return float32(p * math.Float64frombits(uint64(n+1023)<<52))
}

// log32 is ln x to float32 accuracy, several times faster than math.Log: x = m·2^e with m in
// [√½, √2), and ln m = 2·atanh(s) with s = (m−1)/(m+1), |s| < 0.172, by its series to s¹¹
// (error < 2e-11). Zero, negative, infinite and NaN x go to math.Log.
func log32(x float32) float32 {
	if !(x > 0) || x > math.MaxFloat32 {
		return float32(math.Log(float64(x)))
	}
	b := math.Float64bits(float64(x)) // float32 subnormals are normal float64s
	e := int(b>>52&0x7ff) - 1023
	m := math.Float64frombits(b&^(0x7ff<<52) | 1023<<52)
	if m > math.Sqrt2 {
		m /= 2
		e++
	}
	s := (m - 1) / (m + 1)
	s2 := s * s
	p := s * (2 + s2*(2.0/3+s2*(2.0/5+s2*(2.0/7+s2*(2.0/9+s2*(2.0/11))))))
	return float32(float64(e)*math.Ln2 + p)
}

// DropoutKeep reports whether element i survives dropout with probability p under seed. It is a
// counter-based hash (SplitMix64's finaliser) of seed and i, so any backend can recompute it.
func DropoutKeep(seed, i uint64, p float32) bool {
	x := seed ^ (i * 0x9E3779B97F4A7C15)
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
	x = (x ^ (x >> 27)) * 0x94D049BB133111EB
	x ^= x >> 31
	return float32(x>>40)*(1.0/(1<<24)) >= p
}

// ---------------------------------------------------------------- softmax cross-entropy

type crossEntropyTask struct {
	rows                    [][]float32 // per worker: the exponentials of a row when no gradient is wanted
	losses, dlogits, logits []float32
	targets                 []int32
	V                       int
	scale                   float32
}

// CrossEntropy implements backend.Backend.
func (be *Backend) CrossEntropy(losses, dlogits, logits, targets backend.Tensor, N, V int, scale float32) {
	t := &be.ce
	rows := t.rows
	*t = crossEntropyTask{losses: f32(losses), logits: f32(logits), targets: i32(targets), V: V, scale: scale, rows: rows}
	if dlogits != nil {
		t.dlogits = f32(dlogits)
	} else {
		if len(t.rows) != be.pool.workers {
			t.rows = make([][]float32, be.pool.workers)
		}
		for w := range t.rows {
			grow(&t.rows[w], V)
		}
	}
	be.pool.Run(t, N, 8, 4*V)
}

func (t *crossEntropyTask) run(w, lo, hi int) {
	V := t.V
	for r := lo; r < hi; r++ {
		x := t.logits[r*V : r*V+V]
		mx := scaleMax(x, 1) // the maximum (x·1 = x exactly)
		tgt := int(t.targets[r])
		xt := x[tgt] // read before an in-place gradient overwrites it
		// The exponentials go to the gradient row (then scaled by 1/sum), or to scratch.
		var e []float32
		if t.dlogits != nil {
			e = t.dlogits[r*V : r*V+V]
		} else {
			e = t.rows[w][:V]
		}
		copy(e, x)
		sum := float64(expShift(e, mx))
		if t.dlogits != nil {
			scaleMax(e, float32(float64(t.scale)/sum))
			e[tgt] -= t.scale
		}
		t.losses[r] = float32(float64(mx) + math.Log(sum) - float64(xt))
	}
}

// ---------------------------------------------------------------- gradient norm and AdamW

type sumsqTask struct {
	x       []float32
	partial []float64
}

// SumSquares implements backend.Backend. Partial sums over fixed chunks are added in chunk
// order, so the result does not depend on the number of workers.
func (be *Backend) SumSquares(acc, x backend.Tensor, n int) {
	t := &be.sumsq
	chunks := tiles(n, elemChunk)
	if cap(be.partial) < chunks {
		be.partial = make([]float64, chunks)
	}
	t.x, t.partial = f32(x)[:n], be.partial[:chunks]
	be.pool.Run(t, chunks, 1, 2*elemChunk)
	var s float64
	for _, p := range t.partial {
		s += p
	}
	f32(acc)[0] += float32(s)
}

func (t *sumsqTask) run(_, lo, hi int) {
	for c := lo; c < hi; c++ {
		t.partial[c] = sumSquares(t.x[c*elemChunk : min((c+1)*elemChunk, len(t.x))])
	}
}

// sumSquares returns Σ x[i]² in float64: element i goes to sum i mod 4 (the last len(x) mod 4
// to sum 0), and the four are added as (s0 + s1) + (s2 + s3). Four independent chains of
// additions instead of one, which waited on each addition's latency: 2.7× faster on one core
// (large on the 2-core machine: 1.2 → 0.6 ms a step). On sixteen threads the pass is bound by
// reading gradients that other cores wrote, and hardly moved (docs/performance.md, 2026-11-27).
func sumSquares(x []float32) float64 {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		y := x[i : i+4 : i+4]
		s0 += float64(y[0]) * float64(y[0])
		s1 += float64(y[1]) * float64(y[1])
		s2 += float64(y[2]) * float64(y[2])
		s3 += float64(y[3]) * float64(y[3])
	}
	for ; i < len(x); i++ {
		s0 += float64(x[i]) * float64(x[i])
	}
	return (s0 + s1) + (s2 + s3)
}

type adamTask struct {
	p, g, m, v       []float32
	h                backend.AdamParams
	gscale           float32
	lr, bc1, bc2sqrt float32
}

// AdamW implements backend.Backend. The update, per element, in this order (as PyTorch's AdamW):
//
//	g ← g·clipScale
//	m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²
//	p ← p − lr·wd·p
//	p ← p − lr · (m/(1−β1^t)) / (sqrt(v)/sqrt(1−β2^t) + ε)
//
// with lr, 1−β1^t and sqrt(1−β2^t) from state (backend.AdamState).
func (be *Backend) AdamW(p, g, m, v, state backend.Tensor, n int, h backend.AdamParams) {
	st := f32(state)[:backend.AdamStateLen]
	ss := st[0]
	if math.IsNaN(float64(ss)) || math.IsInf(float64(ss), 0) {
		return
	}
	t := &be.adam
	t.p, t.g, t.m, t.v, t.h = f32(p)[:n], f32(g)[:n], f32(m)[:n], f32(v)[:n], h
	t.gscale = 1
	if h.Clip > 0 {
		norm := float32(math.Sqrt(float64(ss)))
		if norm > h.Clip {
			t.gscale = h.Clip / (norm + 1e-6)
		}
	}
	t.lr, t.bc1, t.bc2sqrt = st[1], st[2], st[3]
	be.pool.Run(t, n, elemChunk, 12)
}

// adamConsts are the per-step constants of the AdamW update, laid out for the vector kernel.
type adamConsts struct {
	gscale, b1, omb1, b2, omb2, bc2sqrt, eps, stepSize, decay float32
}

func (t *adamTask) run(_, lo, hi int) {
	h := t.h
	p, g, m, v := t.p[lo:hi], t.g[lo:hi], t.m[lo:hi], t.v[lo:hi]
	stepSize := t.lr / t.bc1
	decay := 1 - t.lr*h.WeightDecay
	c := adamConsts{t.gscale, h.Beta1, 1 - h.Beta1, h.Beta2, 1 - h.Beta2, t.bc2sqrt, h.Eps, stepSize, decay}
	n := adamVector(&c, p, g, m, v)
	p, g, m, v = p[n:], g[n:], m[n:], v[n:]
	for i := range p {
		gi := g[i] * t.gscale
		// The explicit conversions keep the compiler from fusing these into multiply-adds
		// (it may, from GOAMD64=v3), so that the result is that of the vector kernel.
		mi := float32(h.Beta1*m[i]) + float32((1-h.Beta1)*gi)
		vi := float32(h.Beta2*v[i]) + float32(float32((1-h.Beta2)*gi)*gi)
		m[i], v[i] = mi, vi
		denom := float32(math.Sqrt(float64(vi)))/t.bc2sqrt + h.Eps
		p[i] = float32(p[i]*decay) - stepSize*mi/denom
	}
}
