package webgpu

import (
	"fmt"
	"slices"

	"tinygpt/backend"
	"tinygpt/backend/webgpu/internal/gpu"
)

// This file records matrix products: held back one call to fuse with what follows (a bias, a
// GELU, a multiplication, a bias gradient, the weight gradient of the same layer), laid out as
// tiles of matmul.wgsl's main64 or dual64 with K split where the tiles are few, and the
// split products' reduces held back to run together (reduce.wgsl).

// MatMul implements backend.Backend. A product that overwrites C, or adds a weight gradient
// (TN) to it, is held back one call: if the next call adds a bias to C (a linear layer),
// multiplies C elementwise by another tensor (the gradient through a GELU) or adds the bias
// gradient from the same output gradient (a linear layer's backward pass), both run as one
// dispatch (see AddBias, Mul, BiasBackward and settle). The arithmetic is that of the two
// kernels in turn, but for the order in which a bias gradient's terms are added. A weight
// gradient that follows its layer's input gradient (same output gradient, nothing shared that
// either writes) is held with it, and the two run side by side in one dispatch (dual64).
func (be *Backend) MatMul(c, a, b backend.Tensor, M, N, K int, l backend.Layout, accumulate bool) {
	mm := &matmulCall{c: ten(c), a: ten(a), b: ten(b), M: M, N: N, K: K, l: l, accumulate: accumulate}
	if be.mm != nil && be.mm2 == nil && pairs(be.mm, mm) {
		be.mm2 = mm
		return
	}
	be.settle()
	if accumulate && l != backend.TN {
		be.recordMatmul(mm)
		return
	}
	be.mm = mm
}

// matmulCall is a matrix product waiting to be recorded.
type matmulCall struct {
	c, a, b    *tensor
	M, N, K    int
	l          backend.Layout
	accumulate bool
	bias       *tensor // a bias [N] to add to every row of C, or nil
	dbias      *tensor // a bias gradient to add 1ᵀ·op(B) to, in the same dispatch
	epilogue   uint32  // matmul.wgsl's: 0 none, 1 GELU keeping GELU', 2 GELU, 3 times ep
	ep         *tensor // the GELU's output (1) or the factor (3)
}

// The epilogues of matmul.wgsl.
const (
	epNone uint32 = iota
	epGELUBoth
	epGELU
	epMul
)

// pairs reports whether p2 can run in one dispatch with the held product p1 (dual64): p2 is a
// weight gradient whose second operand is p1's first (a linear layer's output gradient), and
// neither writes what the other reads or writes.
func pairs(p1, p2 *matmulCall) bool {
	if p2.l != backend.TN || !p2.accumulate || p1.l == backend.TN || !same(p2.b, p1.a) ||
		p1.bias != nil || p1.dbias != nil || p1.epilogue != epNone {
		return false
	}
	return !overlapping([]*tensor{p1.c, p1.a, p1.b, p2.c, p2.a})
}

// launch is how a product runs: its grid of tiles, where its sums go and its parameter words
// (matmul.wgsl's Prob).
type launch struct {
	tilesM, tilesN, slices int
	out                    *tensor // C, or the partial sums when K is split
	bias, ep               *tensor // bound as bias and ep (nil: not used)
	prob                   []uint32
}

// plan lays out mm's launch, K split into the given number of slices (0: as splitK decides).
// Where K is split, out is left for the caller to place (see placePartials).
func (be *Backend) plan(mm *matmulCall, slices int) launch {
	acc, hasBias := uint32(0), uint32(0)
	if mm.accumulate {
		acc = 1
	}
	if mm.bias != nil {
		hasBias = 1
	}
	// A bias gradient is one more row of C, from a row of ones in op(A) (matmul.wgsl).
	biasGrad, bias := uint32(0), mm.bias
	if mm.dbias != nil {
		biasGrad, bias = 1, mm.dbias
	}
	tilesM, tilesN, rows := tileGrid(mm)
	if slices == 0 {
		slices = splitK(tilesM*tilesN, mm.K, rows*mm.N)
	}
	// Unsplit, the product kernel writes C itself (with accumulate and bias); split, it writes
	// each slice's partial sums (ignoring both) and a reduce kernel finishes C.
	out, kSlice, split := mm.c, mm.K, uint32(0)
	if slices > 1 {
		kSlice = (mm.K + slices - 1) / slices
		kSlice = (kSlice + 15) / 16 * 16 // whole blocks of the inner loop
		slices = (mm.K + kSlice - 1) / kSlice
		out, split = nil, 1
	}
	return launch{tilesM: tilesM, tilesN: tilesN, slices: slices, out: out, bias: bias, ep: mm.ep,
		prob: []uint32{uint32(mm.M), uint32(mm.N), uint32(mm.K), acc, hasBias, uint32(kSlice), uint32(tilesM), split,
			uint32(mm.l), biasGrad, mm.epilogue, uint32(tilesN)}}
}

// elems is the number of elements of one slice of the product's sums (its bias-gradient row
// included).
func (l launch) elems() int { return int(l.prob[0]+l.prob[9]) * int(l.prob[1]) }

// reduceProb returns the Prob words with which reduce finishes l's product (slices 0: nothing
// to do).
func (l launch) reduceProb(slices int) []uint32 {
	p := append([]uint32(nil), l.prob...)
	p[2], p[5], p[6], p[7], p[8] = 0, uint32(slices), 0, 0, 0
	return p
}

// or returns t, or the unused binding i if t is nil.
func (be *Backend) or(t *tensor, i int) *tensor {
	if t == nil {
		return be.unused(i)
	}
	return t
}

// recordMatmul records mm: a product of one row without a bias gradient as one dispatch of
// gemv, any other as tiles of main64 (and a reduce where K is split, held back if it can be:
// see holdReduces).
func (be *Backend) recordMatmul(mm *matmulCall) {
	gemv := mm.M == 1 && mm.dbias == nil
	slices := 0
	if gemv {
		slices = 1 // gemv does not split K
	}
	l := be.plan(mm, slices)
	bias, ep := be.or(l.bias, 4), be.or(l.ep, 5)
	if gemv {
		x, y := be.grid((mm.N + gemvCols - 1) / gemvCols)
		be.run(be.kernel("matmul", "gemv", 5, 0), l.prob, []*tensor{mm.c, mm.a, mm.b, bias, ep}, x, y)
		return
	}
	held := be.placePartials([]*matmulCall{mm}, []*launch{&l}, []*tensor{mm.c, mm.a, mm.b, bias, ep})
	be.run(be.kernel("matmul", "main64", 5, 0), l.prob, []*tensor{l.out, mm.a, mm.b, bias, ep}, l.tilesN, l.tilesM*l.slices)
	if l.slices > 1 && !held[0] {
		x, y := be.reduceGroups(l.elems())
		be.run(be.kernel("matmul", "reduce", 5, 0), l.reduceProb(l.slices), []*tensor{mm.c, l.out, be.unused(3), bias, ep}, x, y)
	}
	be.holdReduces([]*matmulCall{mm}, []*launch{&l}, held)
}

// recordDual records the products held as a pair (see pairs) as one dispatch of dual64, and
// the reduce of whichever of them split K and could not hold it back (see holdReduces) as
// one of reduce2.
func (be *Backend) recordDual(m1, m2 *matmulCall) {
	s1, s2 := pairSplit(m1, m2)
	l1, l2 := be.plan(m1, s1), be.plan(m2, s2)
	bias, ep := be.or(l2.bias, 4), be.or(l1.ep, 5)
	ms, ls := []*matmulCall{m1, m2}, []*launch{&l1, &l2}
	held := be.placePartials(ms, ls, []*tensor{m1.c, m1.a, m1.b, bias, ep, m2.c, m2.a})
	n1, n2 := l1.tilesN*l1.tilesM*l1.slices, l2.tilesN*l2.tilesM*l2.slices
	prm := append(append(append([]uint32(nil), l1.prob...), l2.prob...), uint32(n1), uint32(n2))
	x, y := be.grid(n1 + n2)
	be.run(be.kernel("matmul", "dual64", 7, 0), prm, []*tensor{l1.out, m1.a, m1.b, bias, ep, l2.out, m2.a}, x, y)
	part1, part2, s1, s2 := be.unused(2), be.unused(7), 0, 0
	elems := 0
	if l1.slices > 1 && !held[0] {
		part1, s1 = l1.out, l1.slices
		elems += l1.elems()
	}
	if l2.slices > 1 && !held[1] {
		part2, s2 = l2.out, l2.slices
		elems += l2.elems()
	}
	if elems > 0 {
		prm = append(append(l1.reduceProb(s1), l2.reduceProb(s2)...), 0, 0)
		x, y = be.reduceGroups(elems)
		be.run(be.kernel("matmul", "reduce2", 7, 0), prm, []*tensor{m1.c, part1, be.unused(3), bias, ep, m2.c, part2}, x, y)
	}
	be.holdReduces(ms, ls, held)
}

// A split product's reduce is held back where it can be: the partial sums wait in a scratch
// tensor of their own until a dispatch binds what the reduce would write (or the partial
// sums), or the host reads, writes or releases a tensor, or more are held than one dispatch
// takes; then the reduces held by then run as one dispatch (reduce.wgsl's multi). A layer's
// backward pass thus reduces its four weight gradients and two input gradients in two
// dispatches, not four. A reduce with a bias or an epilogue to apply is not held (the
// forward pass's products; their result is read right after anyway).

// heldReduce is a split product's reduce held back.
type heldReduce struct {
	c, bias      *tensor // where the sums go: C, and the bias gradient's row (nil: none)
	part         *tensor // the partial sums, a view of the held partial sums' scratch
	M, N, slices int
	accumulate   bool
}

// maxHeld is the most reduces held at once: those reduce.wgsl's multi takes in its parameter
// words.
const maxHeld = (gpu.MaxParams - 1) / 6

// heldScratch names the scratch tensor that holds the held reduces' partial sums.
const heldScratch = "held partial sums"

// targets returns what h's reduce writes.
func (h *heldReduce) targets() []*tensor {
	if h.bias != nil {
		return []*tensor{h.c, h.bias}
	}
	return []*tensor{h.c}
}

// heldTouches reports whether any of ts overlaps what a held reduce writes or reads.
func (be *Backend) heldTouches(ts []*tensor) bool {
	for i := range be.held {
		h := &be.held[i]
		for _, t := range ts {
			if t != nil && (overlaps(t, h.c) || h.bias != nil && overlaps(t, h.bias) || overlaps(t, h.part)) {
				return true
			}
		}
	}
	return false
}

// placePartials gives each split product of one dispatch (ms and their launches ls, whose
// dispatch also binds binds, the products' C among them) the place of its partial sums: in
// the held partial sums' scratch where its reduce is to be held, else in the scratch tensor
// of its position in the dispatch. It reports which reduces are to be held, first running
// the ones held so far if they must come before this dispatch or make room.
func (be *Backend) placePartials(ms []*matmulCall, ls []*launch, binds []*tensor) []bool {
	held := make([]bool, len(ms))
	need, count, add := 0, 0, []*tensor(nil)
	lim := be.heldLimit()
	all := true // every split product's reduce can be held: else all are reduced now, in one dispatch
	for i, mm := range ms {
		l := ls[i]
		if l.slices <= 1 {
			continue
		}
		n := alignUp(l.slices * l.elems())
		if mm.bias != nil || mm.epilogue != epNone || need+n > lim ||
			!be.ok() || !bindable(mm.c) || mm.dbias != nil && !bindable(mm.dbias) {
			all = false
			continue
		}
		held[i], need, count = true, need+n, count+1
		add = append(add, mm.c)
		if mm.dbias != nil {
			add = append(add, mm.dbias)
		}
	}
	if count == 0 || !all || !be.reserveHeld(need, count, add, binds) {
		clear(held) // reduced now
	}
	names := []string{"matmul partial sums", "matmul partial sums 2"}
	for i, l := range ls {
		switch {
		case l.slices <= 1:
		case held[i]:
			n := l.slices * l.elems()
			l.out = be.scratch[heldScratch].view(be.heldUsed, n)
			be.heldUsed += alignUp(n)
		default:
			l.out = be.scratchTensor(names[i], l.slices*l.elems())
		}
	}
	return held
}

// reserveHeld makes room to hold count more reduces, which write add and whose partial sums
// take need elements (aligned, at most heldLimit), placed at heldUsed, for a dispatch that
// binds binds. It first
// runs the reduces held so far where they must come before that dispatch (it binds what they
// write or read, or add overlaps it), where one dispatch cannot take them all (more than
// maxHeld, or targets in more than two buffers: see heldFits), or where the scratch has no
// room; and it grows the scratch. It reports whether the reduces can be held (false: they
// must run now).
func (be *Backend) reserveHeld(need, count int, add, binds []*tensor) bool {
	lim := be.heldLimit()
	want := need // the scratch's size this dispatch asks for
	if len(be.held) > 0 {
		must := be.heldTouches(binds) || be.heldTouches(add) || len(be.held)+count > maxHeld || !be.heldFits(add)
		if full := be.heldUsed+need > be.heldCap(); must || full {
			if !must {
				// Only room was short for what would wait together: the scratch grows to
				// that, once the reduces held so far have run, so that the next step's fit.
				want = min(lim, be.heldUsed+need)
			}
			be.flushReduces()
		}
	}
	if !be.heldFits(add) || overlapping(add) {
		return false // these alone cannot be held
	}
	if want > be.heldCap() {
		if s := be.scratchTensor(heldScratch, min(lim, max(want, heldMinScratch))); !bindable(s) {
			return false // the allocation failed (the backend's error says why)
		}
	}
	return true
}

// heldLimit is the most elements the held partial sums' scratch may have: what one buffer and
// one binding hold.
func (be *Backend) heldLimit() int { return min(be.segment, int(be.dev.Limits().MaxBindingSize/4)) }

// heldMinScratch is the least the held partial sums' scratch is allocated with (elements).
var heldMinScratch = 4 << 20

// bindable reports whether t can be bound to a dispatch: it lies in one buffer, not released.
func bindable(t *tensor) bool { return t != nil && t.parts == nil && t.buf != nil }

// overlapping reports whether any two of ts overlap.
func overlapping(ts []*tensor) bool {
	for i, t := range ts {
		if overlapsAny(t, ts[:i]) {
			return true
		}
	}
	return false
}

// holdReduces holds the reduces placePartials chose to hold, once their products are
// recorded.
func (be *Backend) holdReduces(ms []*matmulCall, ls []*launch, held []bool) {
	for i, mm := range ms {
		if held[i] {
			h := heldReduce{c: mm.c, bias: mm.dbias, part: ls[i].out, M: mm.M, N: mm.N, slices: ls[i].slices, accumulate: mm.accumulate}
			be.held = append(be.held, h)
			// In step with the partial sums placed, even if a dispatch in between ran the held
			// reduces (placePartials flushes first where the product's dispatch would).
			be.heldUsed = max(be.heldUsed, h.part.off+alignUp(h.part.n))
		}
	}
}

// heldCap returns the elements the held partial sums' scratch has room for.
func (be *Backend) heldCap() int {
	if t := be.scratch[heldScratch]; t != nil {
		return t.n
	}
	return 0
}

// heldFits reports whether the targets of the held reduces and ts lie in at most two buffers
// (reduce.wgsl binds two).
func (be *Backend) heldFits(add []*tensor) bool {
	var bufs []*gpu.Buffer
	ts := slices.Clone(add)
	for i := range be.held {
		ts = append(ts, be.held[i].targets()...)
	}
	for _, t := range ts {
		if !slices.Contains(bufs, t.buf) {
			bufs = append(bufs, t.buf)
		}
	}
	return len(bufs) <= 2
}

// flushReduces runs the held reduces, as one dispatch.
func (be *Backend) flushReduces() {
	hs := be.held
	if len(hs) == 0 {
		return
	}
	be.held, be.heldUsed = nil, 0
	if !be.ok() {
		return
	}
	for _, h := range hs {
		if !bindable(h.c) || !bindable(h.part) || h.bias != nil && !bindable(h.bias) {
			be.fail(fmt.Errorf("a held reduce's tensors were released before it ran"))
			return
		}
	}
	var bufs []*gpu.Buffer
	sel := func(t *tensor) uint32 {
		if i := slices.Index(bufs, t.buf); i >= 0 {
			return uint32(i)
		}
		bufs = append(bufs, t.buf)
		return uint32(len(bufs) - 1)
	}
	prm, elems := []uint32{uint32(len(hs))}, 0
	for _, h := range hs {
		flags, biasOff := sel(h.c), uint32(0)
		if h.bias != nil {
			flags |= sel(h.bias)<<1 | 8
			biasOff = uint32(h.bias.off)
		}
		if h.accumulate {
			flags |= 4
		}
		rows := h.M
		if h.bias != nil {
			rows++
		}
		elems += rows * h.N
		prm = append(prm, uint32(h.c.off), biasOff, uint32(h.part.off), uint32(h.M), uint32(h.N), uint32(h.slices)|flags<<16)
	}
	whole := func(b *gpu.Buffer) *tensor { return &tensor{buf: b, n: int(b.Size() / 4)} }
	d1 := be.unused(2)
	if len(bufs) > 1 {
		d1 = whole(bufs[1])
	}
	x, y := be.reduceGroups(elems)
	be.run(be.kernel("reduce", "multi", 3, 0), prm, []*tensor{whole(bufs[0]), d1, whole(hs[0].part.buf)}, x, y)
}

// alignUp rounds n up to a whole number of backend.SliceAlign, where a binding may start.
func alignUp(n int) int {
	return (n + backend.SliceAlign - 1) / backend.SliceAlign * backend.SliceAlign
}

// matmulTile is the side of the tiles of C that matmul.wgsl's main64 computes, one per
// workgroup.
const matmulTile = 64

// gemvCols is the number of columns of C that matmul.wgsl's gemv computes per workgroup.
const gemvCols = 8

// reduceSlices records C = Σ_s part[s] for C [M, N] and part [slices, M, N], slices added
// in order (matmul.wgsl's reduce).
func (be *Backend) reduceSlices(c, part *tensor, slices, M, N int) {
	x, y := be.reduceGroups(M * N)
	be.run(be.kernel("matmul", "reduce", 5, 0), []uint32{uint32(M), uint32(N), 0, 0, 0, uint32(slices), 0, 0, 0, 0, epNone, 0},
		[]*tensor{c, part, be.unused(3), be.unused(4), be.unused(5)}, x, y)
}

// reduceGroups sizes the grid of reduce or reduce2 over elems elements: a workgroup of 256
// threads per 256 elements, at most 4096 workgroups (whose threads then loop over the rest).
func (be *Backend) reduceGroups(elems int) (int, int) { return be.grid(min((elems+255)/256, 4096)) }

// splitK returns into how many slices to split the inner dimension K of a product with the
// given number of output tiles and elements: enough workgroups for a few per SM of a large GPU
// (about 512) when the tiles alone are fewer than 256 and K is long, with slices of at least
// minSlice and partial sums of at most 16M elements. (Against splitting below 128 tiles toward
// 256 workgroups: huge and mega 6-7% faster on an H200, the smaller presets unchanged; toward
// 1024 workgroups or with slices of 64, xl to mega slower.) A K that makes fewer than three
// slices is not split: two slices do not repay the reduce pass they need (K 256, the products
// of width 256: on an H100, huge 1.7% and xl 0.8% faster unsplit; slices of at least 192 or
// 256 everywhere made small 6-17% slower; docs/performance.md, thirty-ninth session).
func splitK(tiles, K, elems int) int {
	if tiles < 1 || tiles >= 256 || K < 3*minSlice {
		return 1
	}
	s := min((512+tiles-1)/tiles, K/minSlice, (16<<20)/max(elems, 1))
	return max(s, 1)
}

// pairSplit returns the slices of K for the two products of a pair (dual64), 0 for splitK's
// choice. splitK sizes one product's grid as if it ran alone; in a pair the other product's
// workgroups fill the GPU too, so where both products split K and their tiles together are
// still under 256, each is split into at most ⌈K/pairSlice⌉ slices: fewer partial sums to
// write and add up. (So a K of 384 to 640 makes two slices, which splitK avoids for a product
// alone: measured, in a pair they pay.) On an H100, against splitK alone: large 2.2% faster,
// xl 1.0%, huge 0.9%, the others unchanged; slices of at least 384 left large unchanged and
// gained 1.5% at xl, 0.9% at massive (docs/performance.md, forty-second session).
func pairSplit(m1, m2 *matmulCall) (int, int) {
	tm1, tn1, r1 := tileGrid(m1)
	tm2, tn2, r2 := tileGrid(m2)
	t1, t2 := tm1*tn1, tm2*tn2
	if m1.K < 3*minSlice || m2.K < 3*minSlice || t1+t2 >= 256 {
		return 0, 0
	}
	return min(splitK(t1, m1.K, r1*m1.N), (m1.K+pairSlice-1)/pairSlice),
		min(splitK(t2, m2.K, r2*m2.N), (m2.K+pairSlice-1)/pairSlice)
}

// pairSlice is the length of K a slice of pairSplit's has about.
const pairSlice = 320

// tileGrid returns the tile rows and columns of C that mm's product computes, and C's rows,
// the bias gradient's included.
func tileGrid(mm *matmulCall) (tilesM, tilesN, rows int) {
	rows = mm.M
	if mm.dbias != nil {
		rows++
	}
	return (rows + matmulTile - 1) / matmulTile, (mm.N + matmulTile - 1) / matmulTile, rows
}

// minSlice is the shortest slice of K that splitK makes.
const minSlice = 128
