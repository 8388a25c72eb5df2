package cpu

import (
	"math"

	"tinygpt/backend"
)

// Causal self-attention. The forward pass keeps only each query's log-sum-exp of scores (never
// the T×T probability matrix), and the backward pass recomputes the probabilities from it. Work
// is split over (sequence, head) pairs, which own disjoint column blocks of the outputs, so no
// two workers write the same element. Within a pair the work is a handful of small matrix
// products run by the matmul micro-kernel on one core, in blocks of query rows so that the
// causal mask skips the blocks above the diagonal; each worker's scores live in its own
// scratch and are reused by the next pair.

type attnMode int

const (
	attnForward attnMode = iota
	attnBackward
	attnDecode
)

type attentionTask struct {
	be                *Backend
	mode              attnMode
	out, lse, q, k, v []float32
	in, w, bias       []float32 // QKVAttention's projection (in [B·T, C], w [C, 3C], bias [3C]), else nil
	dq, dk, dv, dout  []float32
	dproj             []float32 // LinearAttentionBackward's dout [B·T, C] (with w [C, C]): dout is then nil
	T, C, NH, hs      int
	ld                int // row stride of q, k, v and of dq, dk, dv: 3C (one [rows, 3C] tensor)
	ldS, ldH          int // row strides of the score and the head-copy buffers
	unit              int // columns the micro-kernel reads of B at a time (NR, or NR/2)
	scale             float32
	negInf            []float32     // [ldS] −Inf, to mask the scores past the diagonal
	scratch           []attnScratch // per worker
}

// attnScratch is one worker's space for one (sequence, head) pair.
type attnScratch struct {
	s, ds          []float32 // [T, ldS] scores → probabilities, and their gradient
	kt, vt         []float32 // [hs, ldS] the head's keys and values transposed
	qh, kh, vh, dh []float32 // [T, ldH] copies of the head's q, k, v, dout (see head)
	inv            []float32 // [T] forward: 1/Σ of each row's exponentials
	mx             []float32 // [rowBlock] the largest score of each row of a block
	d              []float32 // [rowBlock] backward: D_i = dO_i·O_i of each row of a block
	wpack          []float32 // the head's columns of w (one of q, k and v in the forward pass), packed
}

func (be *Backend) attention(mode attnMode, B, T, C, NH int) *attentionTask {
	t := &be.attn
	nr := be.kern.nr
	t.be, t.mode, t.T, t.C, t.NH, t.hs, t.ld = be, mode, T, C, NH, C/NH, 3*C
	t.unit = nr // the micro-kernel's width: B operands are read this many columns at a time
	if be.kern.half != nil {
		t.unit = nr / 2
	}
	t.ldS, t.ldH = roundUp(T, max(nr, rowVector)), roundUp(C/NH, t.unit) // nr, rowVector: powers of two
	t.scale = float32(1 / math.Sqrt(float64(C/NH)))
	if len(t.scratch) != be.pool.workers {
		t.scratch = make([]attnScratch, be.pool.workers)
	}
	if len(t.negInf) < t.ldS {
		t.negInf = make([]float32, t.ldS)
		for i := range t.negInf {
			t.negInf[i] = float32(math.Inf(-1))
		}
	}
	if mode == attnDecode {
		for w := range t.scratch {
			grow(&t.scratch[w].s, T)
		}
		return t
	}
	for w := range t.scratch {
		a := &t.scratch[w]
		grow(&a.s, T*t.ldS)
		grow(&a.inv, T)
		grow(&a.mx, t.rowBlock())
		grow(&a.kt, t.hs*t.ldS)
		copies := t.hs%t.unit != 0 // see head
		if copies {
			grow(&a.qh, T*t.ldH)
		}
		if mode == attnForward && copies {
			grow(&a.vh, T*t.ldH)
		}
		grow(&a.wpack, roundUp(t.hs, nr)*C)
		if mode == attnBackward {
			grow(&a.d, t.rowBlock())
			grow(&a.ds, T*t.ldS)
			grow(&a.vt, t.hs*t.ldS)
			grow(&a.dh, T*t.ldH)
			if copies {
				grow(&a.kh, T*t.ldH)
			}
		}
	}
	return t
}

// grow makes *buf at least n long, reallocating only when it is too short.
func grow[E any](buf *[]E, n int) {
	if len(*buf) < n {
		*buf = make([]E, n)
	}
}

// Attention implements backend.Backend. q, k and v are read in place, as the column blocks of
// qkv.
func (be *Backend) Attention(out, lse, qkv backend.Tensor, B, T, C, NH int) {
	be.attentionForward(out, lse, qkv, nil, nil, nil, B, T, C, NH)
}

// QKVAttention implements backend.Backend. Each (sequence, head) pair first computes its own
// q, k and v columns (three products of T×hs with inner dimension C, the same sums as Linear's)
// and then attends over them on the same core, where they still are in the cache: computed by
// a shared product, they were spread over every core's cache and had to be fetched from there.
func (be *Backend) QKVAttention(qkv, out, lse, in, w, bias backend.Tensor, B, T, C, NH int) {
	be.attentionForward(out, lse, qkv, f32(in)[:B*T*C], f32(w)[:C*3*C], f32(bias)[:3*C], B, T, C, NH)
}

// attentionForward runs Attention, preceded in each pair by its q, k and v columns of the
// product in·w + bias when in is not nil (QKVAttention).
func (be *Backend) attentionForward(out, lse, qkv backend.Tensor, in, w, bias []float32, B, T, C, NH int) {
	t := be.attention(attnForward, B, T, C, NH)
	x := f32(qkv)
	t.out, t.lse, t.q, t.k, t.v = f32(out), f32(lse), x, x[C:], x[2*C:]
	t.in, t.w, t.bias, t.dproj = in, w, bias, nil
	cost := 2 * T * T * C / NH / 32
	if in != nil {
		cost += 2 * T * C * 3 * C / NH / 32
	}
	be.pool.Run(t, B*NH, 1, cost)
}

// AttentionBackward implements backend.Backend.
func (be *Backend) AttentionBackward(dqkv, dout, qkv, out, lse backend.Tensor, B, T, C, NH int) {
	t, cost := be.attentionBackward(dqkv, qkv, out, lse, B, T, C, NH)
	t.dout = f32(dout)
	be.pool.Run(t, B*NH, 1, cost)
}

// LinearAttentionBackward implements backend.Backend. Each (sequence, head) pair first computes
// its own columns of the attention output's gradient, dout·wᵀ for the head's rows of w (packed
// into the worker's panels), and then runs the attention's backward pass over them on the same
// core: computed by a shared product, they were spread over every core's cache and had to be
// fetched from there. The weight and bias gradients of the projection are computed in the same
// loop, side by side with the pairs, as in LinearBackward. The same bits as the two calls.
func (be *Backend) LinearAttentionBackward(dqkv, dw, dbias, dout, out, w, qkv, lse backend.Tensor, B, T, C, NH int) {
	N := B * T
	t, cost := be.attentionBackward(dqkv, qkv, out, lse, B, T, C, NH)
	t.dproj, t.w = f32(dout)[:N*C], f32(w)[:C*C]
	g := &be.group
	g.reset()
	g.add(t, B*NH, 1, cost+T*C*C/NH/32)
	be.addGradLoops(g, dw, dbias, t.dproj, t.out[:N*C], N, C, C, max(be.pool.workers/2, 1))
	be.pool.Run(g, g.n, 1, g.cost())
	g.reset()
	be.addGradFinish(g, C, C)
	be.pool.Run(g, g.n, 1, g.cost())
}

// attentionBackward sets up the attention task for a backward pass, all but its output
// gradient, and returns it with the cost of one pair.
func (be *Backend) attentionBackward(dqkv, qkv, out, lse backend.Tensor, B, T, C, NH int) (*attentionTask, int) {
	t := be.attention(attnBackward, B, T, C, NH)
	x, dx := f32(qkv), f32(dqkv)
	t.dq, t.dk, t.dv, t.dout, t.dproj = dx, dx[C:], dx[2*C:], nil, nil
	t.q, t.k, t.v, t.out, t.lse = x, x[C:], x[2*C:], f32(out), f32(lse)
	return t, 5 * T * T * C / NH / 32
}

// AttentionDecode implements backend.Backend.
func (be *Backend) AttentionDecode(out, qkv, cache backend.Tensor, pos, C, NH int) {
	c := f32(cache)
	copy(c[pos*3*C:(pos+1)*3*C], f32(qkv)[:3*C])
	t := be.attention(attnDecode, 1, pos+1, C, NH)
	t.out, t.q, t.k, t.v = f32(out), c[pos*3*C:], c[C:], c[2*C:]
	be.pool.Run(t, NH, 1, 4*(pos+1)*C/NH/32)
}

func (t *attentionTask) run(w, lo, hi int) {
	for pair := lo; pair < hi; pair++ {
		b, h := pair/t.NH, pair%t.NH
		switch t.mode {
		case attnForward:
			t.forward(w, b, h)
		case attnBackward:
			t.backward(w, b, h)
		case attnDecode:
			t.decode(w, h)
		}
	}
}

// row returns the head-h slice of row r (a flat [B·T, ·] row index) of x, whose rows are ld
// floats apart.
func (t *attentionTask) row(x []float32, ld, r, h int) []float32 {
	return x[r*ld+h*t.hs:][:t.hs]
}

// head returns the head-h columns of rows [base, base+T) of x (rows ld floats apart) as a
// matrix and its row stride: x itself when the head width is a whole number of the
// micro-kernel's units, else a copy in buf [T, ldH] whose padding columns are zero (the
// micro-kernel reads B a whole panel wide).
func (t *attentionTask) head(buf, x []float32, ld, base, h int) ([]float32, int) {
	if t.hs%t.unit == 0 {
		return x[base*ld+h*t.hs:], ld
	}
	for i := range t.T {
		d := buf[i*t.ldH : (i+1)*t.ldH]
		copy(d, t.row(x, ld, base+i, h))
		clear(d[t.hs:])
	}
	return buf, t.ldH
}

// transposeHead writes the transpose of the head-h columns of rows [base, base+T) of x (rows ld
// floats apart) into dst [hs, ldS], with zero padding columns.
func (t *attentionTask) transposeHead(dst, x []float32, ld, base, h int) {
	transposeRows(dst, t.ldS, x[base*ld+h*t.hs:], ld, t.T, t.hs)
	for c := range t.hs {
		clear(dst[c*t.ldS+t.T : (c+1)*t.ldS])
	}
}

// direct returns the row-major matrix b with rows of ld floats as a gemm operand read in place.
func (t *attentionTask) direct(b []float32, ld int) bMat {
	return bMat{b: b, bs: ld, ps: t.be.kern.nr}
}

// rowBlock is the number of query rows handled together: the causal mask is applied at this
// granularity, so only blocks on or below the diagonal are computed.
func (t *attentionTask) rowBlock() int { return roundUp(48, t.be.kern.mr) }

// probs computes, for query rows [i0, i1), the scaled scores (q, with row stride ldq) against
// keys [0, i1) into a.s and turns row i into exponentials over keys 0..i, zero after i. With
// lse (the backward pass) they are exp(score − lse), the probabilities of the forward pass.
// Without (the forward pass) they are exp(score − max), left unnormalised: the row's
// log-sum-exp goes to lseOut[i] and 1/sum to inv[i].
//
// The block's rows go through the row kernels in one call each, w columns wide (i1 rounded up
// to the kernels' vector width): the scores past the diagonal are set to −Inf first, whose
// exponentials are 0. One call per row instead spent most of its time waiting on each short
// row's chain of dependent operations (forward attention at tiny: a quarter of the time in
// the exponentials).
func (t *attentionTask) probs(a *attnScratch, ms *mmScratch, q []float32, ldq, i0, i1 int, lse, lseOut, inv []float32) {
	kern, ldS := t.be.kern, t.ldS
	kern.gemm(ms, i1-i0, roundUp(i1, kern.nr), t.hs, q[i0*ldq:], ldq, 1, t.direct(a.kt, ldS), a.s[i0*ldS:], ldS, false, nil)
	w := roundUp(i1, rowVector) // at most ldS, a multiple of rowVector
	for i := i0; i < i1; i++ {
		copy(a.s[i*ldS+i+1:i*ldS+w], t.negInf)
	}
	rows, x, mx := i1-i0, a.s[i0*ldS:], a.mx[:i1-i0]
	scaleMaxRows(x, ldS, rows, w, t.scale, mx)
	if lse != nil {
		expRows(x, ldS, rows, w, lse[i0:i1], a.inv[i0:i1]) // the sums are not needed
		return
	}
	expRows(x, ldS, rows, w, mx, inv[i0:i1])
	// The logarithms in a loop of their own: each is a long chain of dependent operations,
	// and independent iterations let the core overlap them (forward attention at small was
	// 19% log32 with the log taken row by row).
	for i := i0; i < i1; i++ {
		sum := inv[i]
		lseOut[i] = mx[i-i0] + log32(sum)
		inv[i] = 1 / sum
	}
}

// softmaxRow replaces the raw scores x in row by softmax(x·scale) and returns the log-sum-exp
// of the scaled scores.
func softmaxRow(row []float32, scale float32) float32 {
	mx := scaleMax(row, scale)
	sum := expShift(row, mx)
	inv := 1 / sum
	for j := range row {
		row[j] *= inv
	}
	return mx + log32(sum)
}

// project computes the q, k and v columns of head h for the rows of sequence b, the part of
// qkv = in·w + bias that this pair attends over: for each of the three, the head's columns of
// w are packed into the worker's panels and multiplied by the sequence's rows of in.
func (t *attentionTask) project(w, b, h int) {
	a, ms, kern := &t.scratch[w], &t.be.scratch[w], t.be.kern
	C, nr, base := t.C, kern.nr, b*t.T
	for s := range 3 {
		col := s*C + h*t.hs
		pack, wp := packing(a.wpack, t.w[col:], t.hs, C, t.ld, nr, false)
		pack.run(w, 0, pack.chunks())
		kern.gemm(ms, t.T, t.hs, C, t.in[base*C:], C, 1, wp, t.q[base*t.ld+col:], t.ld, false, t.bias[col:])
	}
}

// outputGrad computes the head-h columns of the attention output's gradient for the rows of
// sequence b, dproj·wᵀ (the input gradient of the output projection w, for its rows of the
// head), into the worker's a.dh and returns them and their row stride.
func (t *attentionTask) outputGrad(w, b, h int) ([]float32, int) {
	a, ms, kern := &t.scratch[w], &t.be.scratch[w], t.be.kern
	C := t.C
	pack, wp := packing(a.wpack, t.w[h*t.hs*C:], t.hs, C, C, kern.nr, true)
	pack.run(w, 0, pack.chunks())
	kern.gemm(ms, t.T, t.hs, C, t.dproj[b*t.T*C:], C, 1, wp, a.dh, t.ldH, false, nil)
	return a.dh, t.ldH
}

func (t *attentionTask) forward(w, b, h int) {
	if t.in != nil {
		t.project(w, b, h)
	}
	a, ms, kern := &t.scratch[w], &t.be.scratch[w], t.be.kern
	T, base, rb := t.T, b*t.T, t.rowBlock()
	q, ldq := t.head(a.qh, t.q, t.ld, base, h)
	v, ldv := t.head(a.vh, t.v, t.ld, base, h)
	t.transposeHead(a.kt, t.k, t.ld, base, h)
	lse := t.lse[(b*t.NH+h)*T:][:T]
	inv := a.inv[:T]
	for i0 := 0; i0 < T; i0 += rb {
		i1 := min(i0+rb, T)
		t.probs(a, ms, q, ldq, i0, i1, nil, lse, inv)
		// out[i0:i1] = P[i0:i1, 0:i1]·V[0:i1], then each row divided by its sum.
		out := t.out[(base+i0)*t.C+h*t.hs:]
		kern.gemm(ms, i1-i0, t.hs, i1, a.s[i0*t.ldS:], t.ldS, 1, t.direct(v, ldv), out, t.C, false, nil)
		for i := i0; i < i1; i++ {
			scaleMax(t.row(t.out, t.C, base+i, h), inv[i])
		}
	}
}

func (t *attentionTask) backward(w, b, h int) {
	a, ms, kern := &t.scratch[w], &t.be.scratch[w], t.be.kern
	T, base, rb, ldS := t.T, b*t.T, t.rowBlock(), t.ldS
	q, ldq := t.head(a.qh, t.q, t.ld, base, h)
	k, ldk := t.head(a.kh, t.k, t.ld, base, h)
	var do []float32
	var ldo int
	if t.dproj != nil {
		do, ldo = t.outputGrad(w, b, h)
	} else {
		do, ldo = t.head(a.dh, t.dout, t.C, base, h)
	}
	t.transposeHead(a.kt, t.k, t.ld, base, h)
	t.transposeHead(a.vt, t.v, t.ld, base, h)
	lse := t.lse[(b*t.NH+h)*T:][:T]
	for i0 := 0; i0 < T; i0 += rb {
		i1 := min(i0+rb, T)
		t.probs(a, ms, q, ldq, i0, i1, lse, nil, nil)
		// dP[i0:i1, 0:i1] = dO[i0:i1]·Vᵀ, then dS = P∘(dP − D)·scale with D_i = dO_i·O_i.
		kern.gemm(ms, i1-i0, roundUp(i1, kern.nr), t.hs, do[i0*ldo:], ldo, 1, t.direct(a.vt, ldS), a.ds[i0*ldS:], ldS, false, nil)
		// The block's D first, in a loop of their own: each reads its row of out from memory,
		// and independent iterations let the core wait for those rows together.
		d := a.d[:i1-i0]
		for i := i0; i < i1; i++ {
			d[i-i0] = dot(do[i*ldo:][:t.hs], t.row(t.out, t.C, base+i, h))
		}
		for i := i0; i < i1; i++ {
			ds := a.ds[i*ldS:][:i1]
			softmaxBack(ds[:i+1], a.s[i*ldS:], d[i-i0], t.scale)
			clear(ds[i+1:])
		}
		// dQ[i0:i1] = dS[i0:i1, 0:i1]·K[0:i1]
		kern.gemm(ms, i1-i0, t.hs, i1, a.ds[i0*ldS:], ldS, 1, t.direct(k, ldk), t.dq[(base+i0)*t.ld+h*t.hs:], t.ld, false, nil)
	}
	// dK[j0:j1] = dSᵀ[j0:j1, j0:T]·Q[j0:T] and dV[j0:j1] = Pᵀ[j0:j1, j0:T]·dO[j0:T]: rows
	// i < j0 of dS and P are zero in these columns.
	for j0 := 0; j0 < T; j0 += rb {
		j1 := min(j0+rb, T)
		kern.gemm(ms, j1-j0, t.hs, T-j0, a.ds[j0*ldS+j0:], 1, ldS, t.direct(q[j0*ldq:], ldq), t.dk[(base+j0)*t.ld+h*t.hs:], t.ld, false, nil)
		kern.gemm(ms, j1-j0, t.hs, T-j0, a.s[j0*ldS+j0:], 1, ldS, t.direct(do[j0*ldo:], ldo), t.dv[(base+j0)*t.ld+h*t.hs:], t.ld, false, nil)
	}
}

func dotGo(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func dotRowsGo(out, q, k []float32, ld int) {
	for r := range out {
		out[r] = dot(q, k[r*ld:])
	}
}

func axpyGo(y []float32, a float32, x []float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += a * x[i]
	}
}

// decode attends the single query q [C] (the newest position, t.T−1) over the cached keys and
// values of rows [0, t.T) straight from the cache: a matrix product of one row would waste
// most of the micro-kernel. The scores are dot products with the cached keys and the output
// a sum of the cached values, each over all rows in one kernel call: the head's slice of a
// row is a few cache lines 3C floats from the last, so one call per row (a dot or an axpy)
// spent most of its time waiting for each row in turn (huge's decode on 16 threads: 983 →
// 1,478 tokens/s; docs/performance.md, twenty-second session). The result equals row t.T−1
// of a full pass up to float32 rounding (the sums run in another order).
func (t *attentionTask) decode(w, h int) {
	s := t.scratch[w].s[:t.T]
	qt := t.q[h*t.hs:][:t.hs]
	dotRows(s, qt, t.k[h*t.hs:], t.ld)
	softmaxRow(s, t.scale)
	o := t.out[h*t.hs:][:t.hs]
	clear(o)
	gemvRows(o, s, t.v[h*t.hs:], t.ld) // o = Σ_j s[j]·v_j
}
