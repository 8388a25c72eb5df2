package webgpu

import (
	"fmt"
	"math"
	"slices"

	"tinygpt/backend"
	"tinygpt/backend/webgpu/internal/gpu"
)

// This file records the kernels (the matrix products' are in matmul.go): it picks the WGSL
// entry point, packs the parameter block in the order of the shader's Params struct, binds
// the tensors in binding order and sizes the grid. The math is in the .wgsl files.

// f32 returns the bit pattern of v, for a parameter word.
func f32(v float32) uint32 { return math.Float32bits(v) }

// elementwise records an elementwise kernel writing x from y and z (nil where the kernel does
// not read them). WebGPU forbids two overlapping writable bindings in a dispatch (a real
// driver may then read stale or garbage data; lavapipe happens not to care), and the shaders
// declare every binding read_write: so an input that overlaps the output or the other input is
// first copied to scratch, and unused bindings get scratch of their own.
func (be *Backend) elementwise(entry string, params []uint32, x, y, z *tensor, n int) {
	if n == 0 {
		return
	}
	if y == nil {
		y = be.unused(2)
	} else if overlaps(y, x) {
		y = be.copyToScratch("elementwise y", y, n)
	}
	if z == nil {
		z = be.unused(3)
	} else if overlaps(z, x) || overlaps(z, y) {
		z = be.copyToScratch("elementwise z", z, n)
	}
	be.run(be.kernel("elementwise", entry, 3, 0), params, []*tensor{x, y, z}, be.elemGroups(n), 1)
}

// unused returns a small scratch tensor of its own for binding slot i of a kernel that does not
// read it: binding a tensor that is also bound elsewhere would alias two writable bindings.
func (be *Backend) unused(i int) *tensor {
	return be.scratchTensor(fmt.Sprintf("unused binding %d", i), 64)
}

// copyToScratch copies the first n elements of t to the scratch tensor called name.
func (be *Backend) copyToScratch(name string, t *tensor, n int) *tensor {
	n = min(n, t.n)
	s := be.scratchTensor(name, n)
	be.Copy(s, t, n)
	return s
}

// Encoder implements backend.Backend.
func (be *Backend) Encoder(out, tok, wte, wpe backend.Tensor, B, T, pos0, C int) {
	N := B * T
	be.run(be.kernel("encoder", "forward", 4, 0), []uint32{uint32(N), uint32(C), uint32(T), uint32(pos0), 0},
		[]*tensor{ten(out), ten(tok), ten(wte), ten(wpe)}, be.elemGroups(N*C), 1)
}

// EncoderBackward implements backend.Backend.
func (be *Backend) EncoderBackward(dwte, dwpe, dout, tok backend.Tensor, B, T, C int) {
	N := B * T
	V := ten(dwte).n / C
	x, y := be.grid(V * ((C + 63) / 64))
	be.run(be.kernel("encoder", "backward_wte", 4, 0), []uint32{uint32(N), uint32(C), uint32(T), 0, uint32(V)},
		[]*tensor{ten(dwte), ten(tok), ten(dout), be.unused(4)}, x, y)
	for b0 := 0; b0 < B; b0 += wpeSeqs { // see encoder.wgsl's backward_wpe
		end := min(B, b0+wpeSeqs)
		be.run(be.kernel("encoder", "backward_wpe", 4, 0), []uint32{uint32(end * T), uint32(C), uint32(T), uint32(b0), uint32(T)},
			[]*tensor{ten(dwpe), ten(tok), ten(dout), be.unused(4)}, be.elemGroups(T*C), 1)
	}
}

// wpeSeqs is the most sequences one dispatch of backward_wpe sums: each of its threads then
// loops at most this many times (per element it covers), well under lavapipe's limit.
var wpeSeqs = 16384

// LayerNorm implements backend.Backend.
// Right after a residual add into in (see Add) both run as one dispatch.
func (be *Backend) LayerNorm(out, mean, rstd, in, g, b backend.Tensor, N, C int) {
	x, y := be.grid(N)
	ts := []*tensor{ten(out), ten(mean), ten(rstd), ten(in), ten(g), ten(b)}
	if s := be.sum; s != nil && same(s.out, ts[3]) && s.n == N*C && !overlapsAny(s.a, ts) && !overlapsAny(s.b, ts) {
		be.sum = nil
		be.run(be.kernel("layernorm", "forward_add", 8, 0), []uint32{uint32(N), uint32(C)}, append(ts, s.a, s.b), x, y)
		return
	}
	be.run(be.kernel("layernorm", "forward", 6, 0), []uint32{uint32(N), uint32(C)}, ts, x, y)
}

// overlapsAny reports whether t overlaps any of ts.
func overlapsAny(t *tensor, ts []*tensor) bool {
	for _, u := range ts {
		if overlaps(t, u) {
			return true
		}
	}
	return false
}

// LayerNormBackward implements backend.Backend: the input and the parameter gradients in one
// dispatch (layernorm_backward.wgsl).
func (be *Backend) LayerNormBackward(din, dg, db, dout, in, g, mean, rstd backend.Tensor, N, C int) {
	x, y := be.grid((C+7)/8 + (N+3)/4) // layernorm_backward.wgsl's PC columns per workgroup
	be.run(be.kernel("layernorm_backward", "backward", 8, 0), []uint32{uint32(N), uint32(C)},
		[]*tensor{ten(din), ten(mean), ten(rstd), ten(in), ten(g), ten(dout), ten(dg), ten(db)}, x, y)
}

// AddBias implements backend.Backend. Right after a product into out it is fused into it.
func (be *Backend) AddBias(out, bias backend.Tensor, N, C int) {
	o := ten(out)
	if mm := be.mm; mm != nil && be.mm2 == nil && !mm.accumulate && mm.bias == nil && mm.epilogue == epNone && same(mm.c, o) && mm.M == N && mm.N == C {
		be.mm = nil
		mm.bias = ten(bias)
		be.recordMatmul(mm)
		return
	}
	be.elementwise("add_bias", []uint32{uint32(N * C), uint32(C)}, ten(out), ten(bias), nil, N*C)
}

// LinearBackward implements backend.Backend as the kernels it stands for: the two products
// run as one dispatch, the bias gradient joins the second (see pairs and BiasBackward) and
// the multiplication by dgelu the first (see Mul).
func (be *Backend) LinearBackward(din, dw, dbias, dout, in, w, dgelu backend.Tensor, N, IC, OC int, accumulate bool) {
	be.MatMul(din, dout, w, N, IC, OC, backend.NT, accumulate)
	be.MatMul(dw, in, dout, IC, OC, N, backend.TN, true)
	be.BiasBackward(dbias, dout, N, OC)
	if dgelu != nil {
		be.Mul(din, din, dgelu, N*IC)
	}
}

// LinearLayerNormBackward implements backend.Backend as the two kernels it stands for.
func (be *Backend) LinearLayerNormBackward(din, dw, dbias, dout, in, w, dx, dg, db, x, g, mean, rstd backend.Tensor, N, IC, OC int) {
	be.LinearBackward(din, dw, dbias, dout, in, w, nil, N, IC, OC, false)
	be.LayerNormBackward(dx, dg, db, din, x, g, mean, rstd, N, IC)
}

// BiasBackward implements backend.Backend.
// Right after the weight gradient of the same layer (a TN product adding into dW from the same
// dout, held alone or as the second of a pair) it is fused into that product, as a row of
// ones in op(A) (where that row starts a tile row of its own, main64 computes only its column
// sums).
func (be *Backend) BiasBackward(dbias, dout backend.Tensor, N, C int) {
	d, db := ten(dout), ten(dbias)
	mm, other := be.mm, (*matmulCall)(nil)
	if be.mm2 != nil {
		mm, other = be.mm2, be.mm
	}
	if mm != nil && mm.accumulate && mm.l == backend.TN && same(mm.b, d) && mm.dbias == nil &&
		mm.K == N && mm.N == C && !overlapsAny(db, []*tensor{mm.c, mm.a, mm.b}) &&
		(other == nil || !overlapsAny(db, []*tensor{other.c, other.a, other.b})) {
		mm.dbias = db.view(0, C)
		if other == nil {
			be.mm = nil
			be.recordMatmul(mm)
		}
		return
	}
	be.run(be.kernel("layernorm_backward", "bias_backward", 6, 0), []uint32{uint32(N), uint32(C)},
		[]*tensor{ten(dbias), be.unused(2), be.unused(3), be.unused(4), be.unused(5), d}, (C+15)/16, 1)
}

// Linear implements backend.Backend: the product, the bias and the GELU run as one dispatch.
func (be *Backend) Linear(out, act, in, w, bias backend.Tensor, N, IC, OC int) {
	be.settle()
	mm := &matmulCall{c: ten(out), a: ten(in), b: ten(w), M: N, N: OC, K: IC, l: backend.NN, bias: ten(bias)}
	switch {
	case act == nil:
	case act == out:
		mm.epilogue = epGELU
	default:
		mm.epilogue, mm.ep = epGELUBoth, ten(act)
	}
	be.recordMatmul(mm)
}

// same reports whether a and b start at the same element of the same buffer.
func same(a, b *tensor) bool { return a.buf == b.buf && a.off == b.off }

// Mul implements backend.Backend. Right after a product into out that it multiplies in place it
// is fused into that product (see MatMul). In place (out is a or b) it binds out once, instead
// of copying the input it aliases to scratch.
func (be *Backend) Mul(out, a, b backend.Tensor, n int) {
	o, x, y := ten(out), ten(a), ten(b)
	if same(y, o) {
		x, y = y, x
	}
	if mm := be.mm; mm != nil && !mm.accumulate && mm.bias == nil && mm.epilogue == epNone &&
		same(x, o) && same(mm.c, o) && n == mm.M*mm.N &&
		!overlapsAny(y, []*tensor{mm.c, mm.a, mm.b}) &&
		(be.mm2 == nil || !overlaps(y, be.mm2.c) && (be.mm2.dbias == nil || !overlaps(y, be.mm2.dbias))) {
		mm.epilogue, mm.ep = epMul, y
		if be.mm2 == nil {
			be.mm = nil
			be.recordMatmul(mm)
		}
		return
	}
	if same(x, o) && !overlaps(y, o) {
		be.elementwise("mul_into", []uint32{uint32(n)}, o, y, nil, n)
		return
	}
	be.elementwise("mul", []uint32{uint32(n)}, o, x, y, n)
}

// GELU implements backend.Backend.
func (be *Backend) GELU(out, in backend.Tensor, n int) {
	be.elementwise("gelu", []uint32{uint32(n)}, ten(out), ten(in), nil, n)
}

// GELUBackward implements backend.Backend.
func (be *Backend) GELUBackward(din, in, dout backend.Tensor, n int) {
	be.elementwise("gelu_backward", []uint32{uint32(n)}, ten(din), ten(in), ten(dout), n)
}

// Add implements backend.Backend.
// It is held back one call: a layer norm of its result that comes next runs in the same
// dispatch (see LayerNorm and settle).
func (be *Backend) Add(out, a, b backend.Tensor, n int) {
	be.settle()
	be.sum = &addCall{out: ten(out), a: ten(a), b: ten(b), n: n}
}

// AddLayerNorm implements backend.Backend as Add and LayerNorm, which run as one dispatch
// (see LayerNorm).
func (be *Backend) AddLayerNorm(sum, out, mean, rstd, a, b, g, bias backend.Tensor, N, C int) {
	be.Add(sum, a, b, N*C)
	be.LayerNorm(out, mean, rstd, sum, g, bias, N, C)
}

// addCall is a residual add waiting to be recorded.
type addCall struct {
	out, a, b *tensor
	n         int
}

// Dropout implements backend.Backend. The seed is read from seeds on the device, so that the
// kernel's parameters are the same at every step (see backend.PutSeed). In place it is one
// kernel, dropout_into.
func (be *Backend) Dropout(out, in backend.Tensor, n int, p float32, seeds backend.Tensor, site int) {
	o, i := ten(out), ten(in)
	if p == 0 {
		if !same(o, i) {
			be.Copy(out, in, n)
		}
		return
	}
	if n == 0 {
		return
	}
	entry := "dropout"
	switch {
	case same(o, i):
		entry, i = "dropout_into", be.unused(2)
	case overlaps(o, i):
		i = be.copyToScratch("dropout input", i, n)
	}
	be.run(be.kernel("elementwise", entry, 4, 0), []uint32{uint32(n), 0, 0, 0, f32(p), uint32(site)},
		[]*tensor{o, i, be.unused(3), ten(seeds)}, be.elemGroups(n), 1)
}

// DropoutBackward implements backend.Backend: the same mask applied to the gradient.
func (be *Backend) DropoutBackward(din, dout backend.Tensor, n int, p float32, seeds backend.Tensor, site int) {
	be.Dropout(din, dout, n, p, seeds, site)
}

// attnParams packs attention.wgsl's Params.
func attnParams(B, NQ, TK, C, NH, P0 int, saveLSE bool) []uint32 {
	hs := C / NH
	s := uint32(0)
	if saveLSE {
		s = 1
	}
	return []uint32{uint32(B), uint32(NQ), uint32(TK), uint32(C), uint32(NH), uint32(hs), uint32(P0),
		f32(float32(1 / math.Sqrt(float64(hs)))), s, 1}
}

// MaxHeadSize is the largest attention head (d_model / heads) the attention kernels take.
const MaxHeadSize = 256

// attnKernel returns the attention entry for head size C/NH: compiled for that size when it is
// at most 64 (see attention.wgsl), otherwise the kernel for any size up to 256.
func (be *Backend) attnKernel(entry string, C, NH int) *gpu.Kernel {
	hs := C / NH
	switch {
	case hs <= 64:
		return be.kernel("attention", entry, 8, uint32(hs))
	case hs <= MaxHeadSize:
		return be.kernel("attention", entry, 8, 0)
	}
	be.fail(fmt.Errorf("attention head size %d exceeds the supported %d", hs, MaxHeadSize))
	return nil
}

// attnLanes is the number of threads per row of the attention kernel entry for head size hs
// (0: the kernel for any size), see attention.wgsl: two in the forward pass for heads of up to
// 32 (every preset's but behemoth's), one otherwise. Wider heads' per-thread arrays leave no
// registers for more threads, and the backward pass was no faster with two lanes. On an H100
// (2026-11-27, docs/performance.md) two lanes, with the tiles' loads in flight together, made
// the forward pass 30% faster at xl's shape, 14% at huge's and 30% for one sequence (as when
// sampling); four lanes of 32 rows were slower at large's and huge's batches.
func attnLanes(entry string, hs int) int {
	if entry == "forward" && hs > 0 && hs <= 32 {
		return 2
	}
	return 1
}

// attnGroups sizes a grid of workgroups, one per block of 64 rows (fewer in a
// sequence's last block) of each of seqs (slice, sequence, head) triples of rows rows.
func (be *Backend) attnGroups(seqs, rows int) (int, int) { return be.grid(seqs * ((rows + 63) / 64)) }

// LinearAddLayerNorm implements backend.Backend: Linear and Dropout into a scratch tensor, then
// AddLayerNorm. Without dropout, where the product splits its inner dimension and the bias,
// gains and shifts lie in one buffer (the model's parameters do), the LayerNorm's kernel adds
// up the slices and the bias itself (see addSlicesLayerNorm).
func (be *Backend) LinearAddLayerNorm(sum, out, mean, rstd, in, w, bias, x, g, b backend.Tensor, N, IC, OC int, p float32, seeds backend.Tensor, site int) {
	if p == 0 && be.addSlicesLayerNorm(ten(sum), ten(out), ten(mean), ten(rstd), ten(in), ten(w), ten(bias), ten(x), ten(g), ten(b), N, IC, OC) {
		return
	}
	y := be.scratchTensor("branch output", N*OC)
	be.Linear(y, nil, in, w, bias, N, IC, OC)
	be.Dropout(y, y, N*OC, p, seeds, site)
	be.AddLayerNorm(sum, out, mean, rstd, x, y, g, b, N, OC)
}

// addSlicesLayerNorm records LinearAddLayerNorm without dropout as two dispatches where the
// product splits K (see foldSplit): its slices' partial sums into scratch (no bias), then
// layernorm.wgsl's forward_slices, which adds them up with the bias and the residual and
// normalises the sum, instead of a reduce between the two. That kernel binds the bias, gains
// and shifts as one window of their buffer (a kernel has at most eight storage bindings), so
// they must share one. One row (a decoded token) keeps the other path, whose product is
// matmul.wgsl's gemv. It reports whether it recorded the call (false: nothing was recorded).
// On an H200, against the product (and its reduce) and forward_add, with foldSplit's slices:
// large 1.5%, xl 3%, huge 0.7% faster a step (docs/performance.md, forty-third session).
func (be *Backend) addSlicesLayerNorm(sum, out, mean, rstd, in, w, bias, x, g, b *tensor, N, IC, OC int) bool {
	be.settle()
	if N == 1 || overlapsAny(x, []*tensor{sum, out, mean, rstd}) {
		return false // gemv; or the residual overlaps an output, which forward_add cannot take
	}
	mm := &matmulCall{a: in, b: w, M: N, N: OC, K: IC, l: backend.NN}
	tm, tn, _ := tileGrid(mm)
	l := be.plan(mm, foldSlices(tm*tn, IC, N*OC))
	if l.slices <= 1 || !be.ok() {
		return false
	}
	lo, hi := g.off, g.off // the window of g, b and bias
	for _, t := range []*tensor{g, b, bias} {
		if !bindable(t) || t.buf != g.buf || t.n < OC {
			return false
		}
		lo, hi = min(lo, t.off), max(hi, t.off+t.n)
	}
	win := &tensor{buf: g.buf, off: lo, n: hi - lo}
	if overlapsAny(win, []*tensor{sum, out, mean, rstd, x}) {
		return false
	}
	part := be.scratchTensor("branch slices", l.slices*l.elems())
	be.run(be.kernel("matmul", "main64", 5, 0), l.prob, []*tensor{part, in, w, be.unused(4), be.unused(5)}, l.tilesN, l.tilesM*l.slices)
	gx, gy := be.grid(N)
	be.run(be.kernel("layernorm", "forward_slices", 8, 0),
		[]uint32{uint32(N), uint32(OC), uint32(l.slices), 1, uint32(g.off - lo), uint32(b.off - lo), uint32(bias.off - lo)},
		[]*tensor{out, mean, rstd, sum, win, be.unused(6), x, part}, gx, gy)
	return true
}

// foldSplit returns the slices of K for a product of the given tiles whose slices the
// LayerNorm adds up (addSlicesLayerNorm). With no reduce pass to pay for, K is split where the
// tiles are few even when it is short (K 192 and 256, the output projections of large and xl,
// in two), but the LayerNorm reads every slice, so they are about foldSlice long: longer than
// splitK's. On an H200, against splitK's slices: large 0.6%, xl 1.4% faster a step, the other
// presets within noise (slices of about 192 gained less; docs/performance.md, forty-third
// session).
func foldSplit(tiles, K, elems int) int {
	if tiles < 1 || tiles >= 256 || K < 2*foldMinSlice {
		return 1
	}
	return max(1, min((512+tiles-1)/tiles, max(2, K/foldSlice), (16<<20)/max(elems, 1)))
}

// foldSlices is foldSplit; tests replace it.
var foldSlices = foldSplit

// foldSlice is the length of K a slice of foldSplit's has about, foldMinSlice the least.
const (
	foldSlice    = 256
	foldMinSlice = 96
)

// LinearAttentionBackward implements backend.Backend as the kernels of its two calls, the
// attention output's gradient in a scratch tensor.
func (be *Backend) LinearAttentionBackward(dqkv, dw, dbias, dout, out, w, qkv, lse backend.Tensor, B, T, C, NH int) {
	datt := be.scratchTensor("attention output gradient", B*T*C)
	be.LinearBackward(datt, dw, dbias, dout, out, w, nil, B*T, C, C, false)
	be.AttentionBackward(dqkv, datt, qkv, out, lse, B, T, C, NH)
}

// MLPAddLayerNorm implements backend.Backend as the kernels of its two calls.
func (be *Backend) MLPAddLayerNorm(sum, out, mean, rstd, grad, act, in, w1, b1, w2, b2, x, g, b backend.Tensor, N, C, F int, p float32, seeds backend.Tensor, site int) {
	be.Linear(grad, act, in, w1, b1, N, C, F)
	be.LinearAddLayerNorm(sum, out, mean, rstd, act, w2, b2, x, g, b, N, F, C, p, seeds, site)
}

// QKVAttention implements backend.Backend: the projection and the attention are two kernels
// of their own, as Linear and Attention.
func (be *Backend) QKVAttention(qkv, out, lse, in, w, bias backend.Tensor, B, T, C, NH int) {
	be.Linear(qkv, nil, in, w, bias, B*T, C, 3*C)
	be.Attention(out, lse, qkv, B, T, C, NH)
}

// Attention implements backend.Backend.
// When rows are few, each query's keys are split into slices (see attnSlices), whose partial
// results forward_merge combines.
func (be *Backend) Attention(out, lse, qkv backend.Tensor, B, T, C, NH int) {
	prm := attnParams(B, T, T, C, NH, 0, true)
	S := attnSlices(B*NH*T, T)
	o, l := ten(out), ten(lse)
	if S > 1 {
		o, l = be.scratchTensor("attention out slices", S*B*T*C), be.scratchTensor("attention m, l slices", 2*S*B*NH*T)
		prm[len(prm)-1] = uint32(S)
	}
	x, y := be.attnGroups(B*NH*S, T)
	be.run(be.attnKernel("forward", C, NH), prm,
		[]*tensor{o, l, ten(qkv), be.unused(4), be.unused(5), be.unused(6), be.unused(7), be.unused(8)}, x, y)
	if S > 1 {
		x, y := be.grid((B*T*C + 63) / 64)
		be.run(be.kernel("attention", "forward_merge", 8, 0), prm,
			[]*tensor{ten(out), ten(lse), o, l, be.unused(5), be.unused(6), be.unused(7), be.unused(8)}, x, y)
	}
}

// AttentionBackward implements backend.Backend. D_i = dout_i·out_i is computed first, then
// one dispatch computes dk and dv (each key's sum over its queries) and dq (each query's sum
// over its keys) side by side: attention_blocked.wgsl's for heads of up to 32, in blocks of
// rows against tiles of partners, attention.wgsl's one thread a row for wider heads. Each sum
// runs in slices when a pass has few rows (see attnSlices); the slices' partial sums (each
// slice a whole [B·T, 3C]) are then added in order.
func (be *Backend) AttentionBackward(dqkv, dout, qkv, out, lse backend.Tensor, B, T, C, NH int) {
	D := be.scratchTensor("attnD", B*NH*T)
	prm := attnParams(B, T, T, C, NH, 0, false)
	S := attnSlices(B*NH*T, T)
	d := ten(dqkv)
	if S > 1 {
		d = be.scratchTensor("attention dqkv slices", S*B*T*3*C)
		prm[len(prm)-1] = uint32(S)
	}
	x, y := be.grid((B*NH*T + dRows - 1) / dRows)
	be.run(be.kernel("attention", "backward_d", 8, 0), prm,
		[]*tensor{be.unused(1), D, ten(dout), be.unused(4), be.unused(5), be.unused(6), ten(out), be.unused(8)}, x, y)
	bufs := []*tensor{d, D, ten(dout), ten(qkv), be.unused(5), be.unused(6), be.unused(7), ten(lse)}
	if hs := C / NH; hs <= blockedMaxHS {
		x, y = be.grid(2 * B * NH * S * ((T + blockedRows - 1) / blockedRows))
		be.run(be.kernel("attention_blocked", "backward", 8, uint32(hs)), prm, bufs, x, y)
	} else {
		x, y = be.attnGroups(3*B*NH*S, T) // the dv pass's workgroups, the dq pass's, the dk pass's
		be.run(be.attnKernel("backward", C, NH), prm, bufs, x, y)
	}
	if S > 1 {
		be.reduceSlices(ten(dqkv), d, S, 1, B*T*3*C)
	}
}

// dRows is the number of rows whose D attention.wgsl's backward_d computes per workgroup (64
// threads, DL = 8 a row).
const dRows = 8

// Heads of up to blockedMaxHS run the backward pass of attention_blocked.wgsl, in blocks of
// blockedRows rows (keys or queries) a workgroup; wider ones attention.wgsl's. Both are the
// kernel's own (its BT, and its threads' parts of a block and a tile, are written for 32).
const (
	blockedMaxHS = 32
	blockedRows  = 32
)

// forceSlices, when not 0, sets the number of attention slices, for tests.
var forceSlices int

// attnSlices is the number of slices each row's partner rows are split into: up to about 32K
// threads when rows are fewer, with at least 256 partners per slice. Each slice costs its
// partial results' writes and a merge or reduce pass over them: on an H200, huge (256
// partners, 16K rows) is 10% faster unsplit than in four slices, mega (512 partners, 12K rows)
// 4% faster in two than in five; slices of 32 partners or fewer made large to mega 10-30%
// slower.
func attnSlices(rows, T int) int {
	if forceSlices != 0 {
		return forceSlices
	}
	return max(1, min(32768/max(rows, 1), T/256, 16))
}

// AttentionDecode implements backend.Backend: the new row is copied into the cache, and the
// forward kernel attends its query (row pos of the cache) over rows 0..pos.
func (be *Backend) AttentionDecode(out, qkv, cache backend.Tensor, pos, C, NH int) {
	c := ten(cache)
	be.Copy(c.view(pos*3*C, 3*C), qkv, 3*C)
	x, y := be.attnGroups(NH, 1)
	be.run(be.attnKernel("forward", C, NH), attnParams(1, 1, c.n/(3*C), C, NH, pos, false),
		[]*tensor{ten(out), be.unused(2), c, be.unused(4), be.unused(5), be.unused(6), be.unused(7), be.unused(8)}, x, y)
}

// CrossEntropy implements backend.Backend.
func (be *Backend) CrossEntropy(losses, dlogits, logits, targets backend.Tensor, N, V int, scale float32) {
	grad, d, l := uint32(0), be.unused(2), ten(logits)
	if dlogits != nil {
		grad, d = 1, ten(dlogits)
		switch {
		case same(d, l): // in place: the kernel reads the logits from dlogits
			grad, l = 2, be.unused(3)
		case overlaps(d, l):
			l = be.copyToScratch("crossentropy logits", l, N*V)
		}
	}
	x, y := be.grid(N)
	be.run(be.kernel("crossentropy", "main", 4, 0), []uint32{uint32(N), uint32(V), grad, f32(scale)},
		[]*tensor{ten(losses), d, l, ten(targets)}, x, y)
}

// sumsqChunk is optim.wgsl's CHUNK: elements per partial sum.
const sumsqChunk = 4096

// SumSquares implements backend.Backend.
func (be *Backend) SumSquares(acc, x backend.Tensor, n int) {
	chunks := (n + sumsqChunk - 1) / sumsqChunk
	if chunks == 0 {
		return
	}
	part := be.scratchTensor("sumsq", chunks)
	// Piece by piece of a split tensor and window by window (see Backend.window); each
	// window's chunks write their partial sums at their chunk index in x, so the result does
	// not depend on the window size or on where x is split.
	for _, p := range ten(x).pieces(0, n) {
		if p.at%windowAlign != 0 {
			be.fail(fmt.Errorf("SumSquares of a view whose pieces start %d elements in (not a multiple of %d)", p.at, windowAlign))
			return
		}
		for o := 0; o < p.t.n; o += be.window {
			w := min(be.window, p.t.n-o)
			xs := p.t.view(o, w)
			c := (w + sumsqChunk - 1) / sumsqChunk
			pw := part.view((p.at+o)/sumsqChunk, c)
			gx, gy := be.grid(c)
			be.run(be.kernel("optim", "sumsq_partial", 5, 0), []uint32{uint32(w)}, []*tensor{pw, xs, be.unused(3), be.unused(4), be.unused(5)}, gx, gy)
		}
	}
	part = part.view(0, chunks)
	be.run(be.kernel("optim", "sumsq_final", 5, 0), []uint32{uint32(chunks)}, []*tensor{ten(acc), part, be.unused(3), be.unused(4), be.unused(5)}, 1, 1)
}

// AdamW implements backend.Backend. Calls are gathered: consecutive updates of views of the
// same four buffers with the same settings (weight decay aside), as the optimizer makes one per
// parameter, run as one dispatch of adamw_multi when the next other kernel, transfer or release
// comes (see settle). The arithmetic per element is the same as one call's.
// Tensors split in pieces (see SegmentLen) are updated piece by piece; the four must be split
// at the same elements, as views of tensors of one layout are.
func (be *Backend) AdamW(p, g, m, v, state backend.Tensor, n int, h backend.AdamParams) {
	if n == 0 {
		return
	}
	for _, pp := range ten(p).pieces(0, n) {
		views := [3]*tensor{}
		for i, t := range []backend.Tensor{g, m, v} {
			ps := ten(t).pieces(pp.at, pp.t.n)
			if len(ps) != 1 {
				be.fail(fmt.Errorf("AdamW: the gradients or moments are split in device buffers at other elements than the weights"))
				return
			}
			views[i] = ps[0].t
		}
		be.adamW(pp.t, views[0], views[1], views[2], ten(state), pp.t.n, h)
	}
}

// adamW gathers one AdamW call on tensors that lie in one buffer each.
func (be *Backend) adamW(p, g, m, v, state *tensor, n int, h backend.AdamParams) {
	u := adamUpdate{p: p, g: g, m: m, v: v, state: state, n: n, h: h}
	if len(be.adam) == 0 || !be.adam[0].joins(u) {
		be.settle() // whatever is held back, and a gathering this update does not join
	}
	be.adam = append(be.adam, u)
}

// adamUpdate is one gathered AdamW call.
type adamUpdate struct {
	p, g, m, v, state *tensor
	n                 int
	h                 backend.AdamParams
}

// joins reports whether u can run in one dispatch with a (the same buffers and settings).
func (a adamUpdate) joins(u adamUpdate) bool {
	ha, hu := a.h, u.h
	ha.WeightDecay, hu.WeightDecay = 0, 0
	return ha == hu && a.p.buf == u.p.buf && a.g.buf == u.g.buf && a.m.buf == u.m.buf && a.v.buf == u.v.buf &&
		same(a.state, u.state)
}

// adamParams is the parameter block of adamw and adamw_multi: the same at every step (the
// step's learning rate and bias corrections are read from the state tensor), so that a
// training step's blocks are all found among those written before.
func adamParams(h backend.AdamParams, n int, wd uint32) []uint32 {
	return []uint32{uint32(n), f32(h.Beta1), f32(h.Beta2), f32(h.Eps), wd, f32(h.Clip)}
}

// settleAll records everything held back, the held reduces included (see holdReduces): before
// the host reads, writes or releases a tensor.
func (be *Backend) settleAll() {
	be.settle()
	be.flushReduces()
}

// settle records the held-back add or product(s) and the gathered AdamW calls. Every other
// operation calls it first, so they keep their place in the stream.
func (be *Backend) settle() {
	if s := be.sum; s != nil {
		be.sum = nil
		be.elementwise("add", []uint32{uint32(s.n)}, s.out, s.a, s.b, s.n)
	}
	if mm, mm2 := be.mm, be.mm2; mm != nil {
		be.mm, be.mm2 = nil, nil
		if mm2 != nil {
			be.recordDual(mm, mm2)
		} else {
			be.recordMatmul(mm)
		}
	}
	us := be.adam
	if len(us) == 0 {
		return
	}
	be.adam = be.adam[:0]
	whole := func(t *tensor) *tensor { return &tensor{buf: t.buf, n: int(t.buf.Size() / 4)} }
	u0 := us[0]
	lim := be.dev.Limits().MaxBindingSize
	fits := u0.p.buf != nil && u0.g.buf != nil && u0.m.buf != nil && u0.v.buf != nil
	for _, t := range []*tensor{u0.p, u0.g, u0.m, u0.v} {
		fits = fits && t.buf.Size() <= lim
	}
	if len(us) == 1 || !fits {
		for _, u := range us {
			be.run(be.kernel("optim", "adamw", 5, 0), adamParams(u.h, u.n, f32(u.h.WeightDecay)),
				[]*tensor{u.p, u.g, u.m, u.v, u.state}, be.elemGroups(u.n), 1)
		}
		return
	}
	segs := make([]int32, 0, 8*len(us))
	total := 0
	for _, u := range us {
		segs = append(segs, int32(u.p.off), int32(u.g.off), int32(u.m.off), int32(u.v.off), int32(total), int32(u.n),
			int32(math.Float32bits(u.h.WeightDecay)), 0)
		total += u.n
	}
	// The table is the same at every step: it is written again only when it changes, as a
	// write would wait for the GPU (gpu.Device.Flush).
	table := be.scratchTensor("adamSegments", len(segs))
	if table != be.adamTable || !slices.Equal(segs, be.adamSegs) {
		be.UploadInt(table, segs)
		be.adamTable, be.adamSegs = table, append(be.adamSegs[:0], segs...)
	}
	be.run(be.kernel("optim", "adamw_multi", 6, 0), adamParams(u0.h, total, uint32(len(us))),
		[]*tensor{whole(u0.p), whole(u0.g), whole(u0.m), whole(u0.v), u0.state, table}, be.elemGroups(total), 1)
}

// scratchTensor returns the backend's scratch tensor name with room for n elements.
func (be *Backend) scratchTensor(name string, n int) *tensor {
	t := be.scratch[name]
	if t == nil || t.n < n {
		if t != nil {
			be.Release(t)
		}
		t = be.alloc(max(n, 64), false)
		be.scratch[name] = t
	}
	return t
}
