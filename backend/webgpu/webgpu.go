// Package webgpu is the GPU backend: every kernel of package backend as a WGSL compute shader,
// run natively through WebGPU (Vulkan on Linux and Windows, Metal on macOS) by the pure-Go
// binding github.com/gogpu/wgpu, with no cgo.
//
// Tensors are device buffers; kernels are recorded into one command stream, submitted in pieces
// without waiting (every gpu.FlushEvery dispatches, so that the GPU runs while the host records
// the rest) and when the host needs a result, the only times it waits for the GPU: Download, or
// Await for the results asked for with DownloadLater (a training step's loss and gradient
// norm, read once the step has run, whatever was recorded after them). The WGSL sources live
// in wgsl/, one file per kernel family, and each kernel has a CPU twin in package cpu that the
// tests compare it with.
//
// The backend.Backend interface has no error results, so failures (out of GPU memory, a lost
// device, a readback that never completes) are sticky: the first is kept and reported by Err,
// every later kernel does nothing, and Download (or Await) fills its destination with NaN so that a
// training loop stops at the non-finite loss. Callers check Err to say why.
package webgpu

import (
	"embed"
	"encoding/binary"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
	"time"

	"tinygpt/backend"
	"tinygpt/backend/webgpu/internal/gpu"
)

//go:embed wgsl/*.wgsl
var shaders embed.FS

// ErrNoAdapter is returned by New when the machine has no usable GPU adapter.
var ErrNoAdapter = gpu.ErrNoAdapter

// ErrTimestamps is returned by New when the environment variable TimestampsEnv asks for GPU
// timestamps that this build or device cannot make (see tools/gpuprof).
var ErrTimestamps = gpu.ErrTimestamps

// TimestampsEnv is the environment variable that asks for GPU timestamps (tools/gpuprof).
const TimestampsEnv = gpu.TimestampsEnv

// tensor is a range of a device buffer, in 4-byte elements, or of several: a tensor longer
// than one buffer may be is stored in pieces of Backend.SegmentLen elements, each a buffer of
// its own (parts; buf is then nil).
type tensor struct {
	buf   *gpu.Buffer
	off   int // elements
	n     int
	isInt bool
	owner bool      // made by Alloc (not a Slice view): Release frees the buffers
	parts []*tensor // a tensor in several buffers: its pieces, in order
}

func (t *tensor) Len() int { return t.n }

// view returns elements [off, off+n) of t, which lie in one buffer.
func (t *tensor) view(off, n int) *tensor {
	if t.parts != nil {
		ps := t.pieces(off, n)
		if len(ps) != 1 {
			panic(fmt.Sprintf("webgpu: view [%d:%d] of a tensor split in pieces crosses a piece's end", off, off+n))
		}
		return ps[0].t
	}
	return &tensor{buf: t.buf, off: t.off + off, n: n, isInt: t.isInt}
}

// piece is the part of a range of a tensor that lies in one buffer: t holds the range's
// elements [at, at+t.n).
type piece struct {
	t  *tensor
	at int
}

// pieces returns elements [off, off+n) of t as the pieces that lie in one buffer each, in
// order (one piece, a view of t, unless t is split).
func (t *tensor) pieces(off, n int) []piece {
	if t.parts == nil {
		return []piece{{t.view(off, n), 0}}
	}
	var ps []piece
	start := 0 // of the part
	for _, p := range t.parts {
		lo, hi := max(off, start), min(off+n, start+p.n)
		if lo < hi {
			ps = append(ps, piece{&tensor{buf: p.buf, off: p.off + lo - start, n: hi - lo, isInt: t.isInt}, lo - off})
		}
		start += p.n
	}
	return ps
}

// released reports whether t's memory is gone (or was never allocated).
func (t *tensor) released() bool {
	if t.parts == nil {
		return t.buf == nil
	}
	for _, p := range t.parts {
		if p.buf == nil {
			return true
		}
	}
	return false
}

// overlaps reports whether a and b, bound to one dispatch, would share memory.
func overlaps(a, b *tensor) bool {
	if a.parts != nil || b.parts != nil {
		return false // not bindable: run refuses them
	}
	x, y := a.bind(), b.bind()
	if x.Buf == nil || y.Buf == nil {
		return false // not allocated (the backend failed first): nothing to share
	}
	return x.Buf == y.Buf && x.Off < y.Off+y.Size && y.Off < x.Off+x.Size
}

// bind returns t, which lies in one buffer, as a binding of a dispatch.
func (t *tensor) bind() gpu.Binding {
	return gpu.Binding{Buf: t.buf, Off: uint64(t.off) * 4, Size: uint64(max(t.n, 1)) * 4}
}

// laterRead is a piece of a DownloadLater in flight: the device fills raw, Await converts it
// into dst.
type laterRead struct {
	dst  []float32
	raw  []byte
	dev  bool // the device reads it (none is asked for after an error)
	last bool // the last piece of its DownloadLater
}

// Backend is the WebGPU implementation of backend.Backend.
type Backend struct {
	dev     *gpu.Device
	kernels map[string]*gpu.Kernel
	scratch map[string]*tensor // partial sums, attention's D
	err     error
	hostBuf []byte
	later   []laterRead // DownloadLater's reads, for Await

	mm   *matmulCall  // a product held back to fuse with what follows (see MatMul, settle)
	mm2  *matmulCall  // a second product held with mm, to run in one dispatch with it
	sum  *addCall     // a residual add held back to run with the layer norm of its result
	adam []adamUpdate // AdamW calls gathered for one dispatch (see settle)
	// The reduces of split products held back to run together (see holdReduces), and the
	// elements of the held partial sums' scratch they use.
	held     []heldReduce
	heldUsed int
	// The segment table adamw_multi was last given, and the tensor it was written to.
	adamTable *tensor
	adamSegs  []int32

	// window is the most elements a kernel over a whole tensor (Zero, Copy, SumSquares) binds
	// at once: the device's binding limit, in whole multiples of windowAlign. Longer tensors
	// (a large model's flat weights and gradients) are processed window by window.
	window int
	// segment is SegmentLen: the elements of the largest tensor kept in one buffer (both the
	// buffer and the binding limit, in whole multiples of windowAlign); longer ones are split.
	segment int
}

// windowAlign is the granularity of windows: a whole number of SumSquares chunks whose partial
// sums start at a 256-byte aligned offset (64 chunks of 4096 elements, 1 MB).
const windowAlign = 64 * sumsqChunk

// New opens the highest-performance GPU adapter. It returns an error wrapping ErrNoAdapter when
// there is none.
func New() (*Backend, error) {
	dev, err := gpu.Open()
	if err != nil {
		return nil, err
	}
	be := &Backend{dev: dev, kernels: map[string]*gpu.Kernel{}, scratch: map[string]*tensor{}}
	lim := dev.Limits()
	be.window = max(windowAlign, int(lim.MaxBindingSize/4)/windowAlign*windowAlign)
	be.segment = max(windowAlign, int(min(lim.MaxBufferSize, lim.MaxBindingSize)/4)/windowAlign*windowAlign)
	if err := be.selfTest(); err != nil {
		be.Close()
		return nil, err
	}
	return be, nil
}

// selfTest runs a small linear layer (a product with a bias, then a GELU) and checks it against
// the same arithmetic on the host, so that a device or driver that runs the kernels wrongly is
// refused when the backend opens instead of training a model on garbage. (Seen: on an NVIDIA
// H100 through gogpu v0.31.5 the matmul kernels wrote nothing while simpler kernels worked.)
func (be *Backend) selfTest() error {
	const M, K, N = 7, 5, 3
	a, w, b := make([]float32, M*K), make([]float32, K*N), make([]float32, N)
	for i := range a {
		a[i] = float32(i%11)/8 - 0.6
	}
	for i := range w {
		w[i] = float32(i%7)/5 - 0.5
	}
	for i := range b {
		b[i] = float32(i) / 4
	}
	ta, tw, tb, out, act := be.Alloc(M*K), be.Alloc(K*N), be.Alloc(N), be.Alloc(M*N), be.Alloc(M*N)
	defer func() {
		for _, t := range []backend.Tensor{ta, tw, tb, out, act} {
			be.Release(t)
		}
	}()
	be.Upload(ta, a)
	be.Upload(tw, w)
	be.Upload(tb, b)
	be.Linear(out, act, ta, tw, tb, M, K, N)
	got := make([]float32, M*N)
	be.Download(got, act, 0)
	if err := be.Err(); err != nil {
		return fmt.Errorf("webgpu: self-test on %s: %w", be.Describe(), err)
	}
	for i := range M {
		for j := range N {
			x := float64(b[j])
			for k := range K {
				x += float64(a[i*K+k]) * float64(w[k*N+j])
			}
			want := x * 0.5 * math.Erfc(-x/math.Sqrt2)
			if g := float64(got[i*N+j]); !(math.Abs(g-want) <= 1e-4) {
				return fmt.Errorf("webgpu: %s fails the self-test (a 7×5×3 linear layer gave %v at [%d, %d], want %.6g): this device or driver does not run the kernels correctly; use --backend cpu", be.Describe(), g, i, j, want)
			}
		}
	}
	return nil
}

// Adapter describes the GPU adapter this machine offers, as Describe would, and whether it is
// a software renderer, by opening the device and closing it again without running any kernel
// (unlike New, whose self-test runs some). It returns an error wrapping ErrNoAdapter when
// there is none.
func Adapter() (desc string, software bool, err error) {
	dev, err := gpu.Open()
	if err != nil {
		return "", false, err
	}
	defer dev.Close()
	i := dev.Info()
	return fmt.Sprintf("webgpu: %s (%s, %s)", i.Name, i.DeviceType, i.Backend), i.Software, nil
}

// Close releases the device. The backend and its tensors must not be used afterwards.
func (be *Backend) Close() {
	be.dev.Close()
}

// Err returns the first error the backend met (out of memory, a lost device), or nil.
func (be *Backend) Err() error {
	if be.err != nil {
		return be.err
	}
	return be.dev.Err()
}

func (be *Backend) fail(err error) {
	if be.err == nil && be.dev.Err() == nil {
		be.err = fmt.Errorf("webgpu: %w", err)
	}
}

// Software reports whether the adapter is a CPU implementation (lavapipe, SwiftShader).
func (be *Backend) Software() bool { return be.dev.Info().Software }

// Limits returns the device limits the backend works within.
func (be *Backend) Limits() gpu.Limits { return be.dev.Limits() }

// Name implements backend.Backend.
func (be *Backend) Name() string { return "webgpu" }

// Async reports that the backend runs kernels after their calls return (see backend.Async).
func (be *Backend) Async() bool { return true }

// OnDevice reports whether the backend's tensors live in memory of the GPU's own (see
// backend.OnDevice): on a hardware GPU; a software renderer's memory is the host's.
func (be *Backend) OnDevice() bool { return !be.Software() }

// Describe implements backend.Backend.
func (be *Backend) Describe() string {
	i := be.dev.Info()
	return fmt.Sprintf("webgpu: %s (%s, %s)", i.Name, i.DeviceType, i.Backend) // as Adapter
}

// kernel returns the compiled kernel entry of file (compiling it the first time). For
// attention and attention_blocked, variant is the head size (see attnKernel).
func (be *Backend) kernel(file, entry string, nbuf int, variant uint32) *gpu.Kernel {
	key := fmt.Sprintf("%s/%s/%d", file, entry, variant)
	if k := be.kernels[key]; k != nil {
		return k
	}
	code, err := kernelSource(file, entry, variant)
	if err != nil {
		be.fail(err)
		return nil
	}
	k, err := be.dev.NewKernel(key, code, entry, nbuf)
	if err != nil {
		be.fail(err)
		return nil
	}
	be.kernels[key] = k
	return k
}

// wgslDirEnv names an environment variable for kernel experiments: when it names a folder, a
// kernel file found there (matmul.wgsl, ...) is compiled instead of the built-in one, so that
// variants of a kernel can be timed with one binary, on a machine without Go. Files it does
// not hold come from the binary as usual.
const wgslDirEnv = "TINYGPT_WGSL_DIR"

// wgslFile returns the text of kernel file name (without .wgsl): from the folder wgslDirEnv
// names if it holds the file (gpu.VariantFile), else the built-in one.
func wgslFile(name string) (string, error) {
	b, err := gpu.VariantFile(wgslDirEnv, name+".wgsl")
	if b == nil && err == nil {
		b, err = shaders.ReadFile("wgsl/" + name + ".wgsl")
	}
	return string(b), err
}

// includes lists the files whose text goes before a file's own.
var includes = map[string][]string{
	"matmul":             {"gelu"}, // both end some products in a GELU
	"elementwise":        {"gelu"},
	"layernorm_backward": {"layernorm"}, // its parameters, bindings and helpers
	"attention":          {"attention_params"},
	"attention_blocked":  {"attention_params"},
}

// kernelSource returns the WGSL that kernel compiles for entry of file and variant: the file
// with what it includes and the constants of the variant filled in.
func kernelSource(file, entry string, variant uint32) (string, error) {
	code, err := wgslFile(file)
	if err != nil {
		return "", err
	}
	for _, inc := range includes[file] {
		b, err := wgslFile(inc)
		if err != nil {
			return "", err
		}
		code = b + "\n" + code
	}
	if file == "matmul" {
		code += problem2(code)
	}
	if file == "attention_blocked" { // variant is the head size
		if variant == 0 || variant > blockedMaxHS {
			return "", fmt.Errorf("attention_blocked.wgsl: head size %d (1 to %d)", variant, blockedMaxHS)
		}
		hs4 := (int(variant) + 3) / 4
		return strings.NewReplacer("HS4u", fmt.Sprintf("%du", hs4), "TXVu", fmt.Sprintf("%du", blockedRows*hs4)).Replace(code), nil
	}
	if file != "attention" {
		return code, nil
	}
	// variant is the head size (≤ 64: unrolled) or 0 (any size up to 256).
	hs4 := (int(variant) + 3) / 4
	loop := fmt.Sprintf("%du", hs4)
	if variant == 0 {
		hs4, loop = 64, "((prm.HS + 3u) / 4u)"
	}
	// Two tiles of KT rows of hs4 vec4 within 16 KB of workgroup memory; with lanes, one of
	// them also holds the 64 rows' partial results (KT ≥ 64).
	lanes := attnLanes(entry, int(variant))
	kt := min(32*lanes, 16384/(2*16*hs4)/4*4)
	if lanes > 1 && kt < 64 {
		return "", fmt.Errorf("attention kernel for head size %d: a tile of %d rows cannot hold the merge of 64 rows' lanes", variant, kt)
	}
	cp := min(16, (kt*hs4*4+64*lanes-1)/(64*lanes)) // the whole tile's share, up to 16
	return strings.NewReplacer("HS4MAXu", fmt.Sprintf("%du", hs4), "HS4L", loop,
		"KTu", fmt.Sprintf("%du", kt), "TILEVu", fmt.Sprintf("%du", kt*hs4),
		"LANESu", fmt.Sprintf("%du", lanes), "CPu", fmt.Sprintf("%du", cp),
		// A plain literal: naga compiles @workgroup_size(64u) as a workgroup of one thread.
		"WGn", fmt.Sprint(64*lanes)).Replace(code), nil
}

// ok reports whether work can go on.
func (be *Backend) ok() bool { return be.Err() == nil }

// run records one dispatch of a kernel.
func (be *Backend) run(k *gpu.Kernel, params []uint32, ts []*tensor, x, y int) {
	be.settle()
	if len(be.held) > 0 && be.heldTouches(ts) {
		be.flushReduces() // they come first
	}
	if k == nil || !be.ok() {
		return
	}
	binds := make([]gpu.Binding, len(ts))
	for i, t := range ts {
		if t != nil && t.parts != nil {
			be.fail(fmt.Errorf("kernel %s: tensor %d (%d elements) spans %d device buffers; only whole-tensor operations take such a view (see backend.Backend.SegmentLen)", k.Name, i, t.n, len(t.parts)))
			return
		}
		if t == nil || t.buf == nil {
			be.fail(fmt.Errorf("kernel %s: tensor %d is released or was never allocated", k.Name, i))
			return
		}
		if t.off%backend.SliceAlign != 0 {
			// Devices may require binding offsets aligned to up to 256 bytes (Metal does):
			// a kernel must never be handed a view that starts elsewhere (Copy widens its own).
			be.fail(fmt.Errorf("kernel %s: tensor %d is a view at element %d, not a multiple of %d", k.Name, i, t.off, backend.SliceAlign))
			return
		}
		binds[i] = t.bind()
		for j, u := range ts[:i] {
			// Every binding is read_write: WebGPU forbids two that overlap (real drivers read
			// stale or garbage data), so it is a bug in the caller.
			if overlaps(u, t) {
				be.fail(fmt.Errorf("kernel %s: bindings %d and %d overlap in one buffer", k.Name, j+1, i+1))
				return
			}
		}
	}
	_ = be.dev.Dispatch(k, params, binds, x, y, 1) // errors are sticky in the device
}

// grid splits n workgroups into an x×y grid within the per-dimension limit.
func (be *Backend) grid(n int) (x, y int) {
	lim := int(be.dev.Limits().MaxWorkgroupsPerDim)
	if n <= lim {
		return max(n, 1), 1
	}
	y = (n + lim - 1) / lim
	return (n + y - 1) / y, y
}

// elemGroups is the number of 256-thread workgroups for an elementwise loop over n elements
// (each thread strides over the rest).
func (be *Backend) elemGroups(n int) int {
	return max(1, min((n+255)/256, int(be.dev.Limits().MaxWorkgroupsPerDim)))
}

func ten(t backend.Tensor) *tensor { return t.(*tensor) }

// alloc returns a zero-filled tensor of n elements, in pieces of be.segment if it is longer.
func (be *Backend) alloc(n int, isInt bool) *tensor {
	t := &tensor{n: n, isInt: isInt, owner: true}
	if !be.ok() {
		return t
	}
	if n > be.segment {
		for off := 0; off < n; off += be.segment {
			t.parts = append(t.parts, be.alloc(min(be.segment, n-off), isInt))
		}
		return t
	}
	b, err := be.dev.NewBuffer(uint64(n) * 4)
	if err != nil {
		be.fail(err)
		return t
	}
	t.buf = b
	return t
}

// Alloc implements backend.Backend.
func (be *Backend) Alloc(n int) backend.Tensor { return be.alloc(n, false) }

// AllocInt implements backend.Backend.
func (be *Backend) AllocInt(n int) backend.Tensor { return be.alloc(n, true) }

// Slice implements backend.Backend.
func (be *Backend) Slice(t backend.Tensor, off, n int) backend.Tensor {
	if off%backend.SliceAlign != 0 {
		panic(fmt.Sprintf("webgpu: Slice offset %d is not a multiple of %d", off, backend.SliceAlign))
	}
	p := ten(t)
	if off+n > p.n {
		panic(fmt.Sprintf("webgpu: Slice [%d:%d] of a tensor of %d elements", off, off+n, p.n))
	}
	if p.parts == nil {
		return &tensor{buf: p.buf, off: p.off + off, n: n, isInt: p.isInt}
	}
	ps := p.pieces(off, n)
	if len(ps) == 1 {
		return ps[0].t
	}
	v := &tensor{n: n, isInt: p.isInt}
	for _, q := range ps {
		v.parts = append(v.parts, q.t)
	}
	return v
}

// SegmentLen implements backend.Backend: tensors longer than the device's buffers (or than
// a storage binding may be) are split.
func (be *Backend) SegmentLen() int { return be.segment }

func (be *Backend) write(t *tensor, words int, put func(b []byte)) {
	be.settleAll()
	if !be.ok() || words == 0 {
		return
	}
	if t.released() {
		be.fail(fmt.Errorf("upload to a released tensor"))
		return
	}
	if words > t.n {
		panic(fmt.Sprintf("webgpu: upload of %d values into a tensor of %d", words, t.n))
	}
	if cap(be.hostBuf) < 4*words {
		be.hostBuf = make([]byte, 4*words)
	}
	b := be.hostBuf[:4*words]
	put(b)
	for _, p := range t.pieces(0, words) {
		if err := be.dev.Write(p.t.buf, uint64(p.t.off)*4, b[4*p.at:4*(p.at+p.t.n)]); err != nil {
			be.fail(err)
			return
		}
	}
}

// Upload implements backend.Backend.
func (be *Backend) Upload(t backend.Tensor, src []float32) {
	be.write(ten(t), len(src), func(b []byte) {
		for i, v := range src {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
	})
}

// UploadInt implements backend.Backend.
func (be *Backend) UploadInt(t backend.Tensor, src []int32) {
	be.write(ten(t), len(src), func(b []byte) {
		for i, v := range src {
			binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
		}
	})
}

// downloadSource records what is pending and checks a download of len(dst) elements of t
// from off (a range past the tensor's end is a programming error). It returns nil when there
// is nothing to read.
func (be *Backend) downloadSource(dst []float32, t backend.Tensor, off int) *tensor {
	be.settleAll()
	if len(dst) == 0 {
		return nil
	}
	tt := ten(t)
	if off+len(dst) > tt.n {
		panic(fmt.Sprintf("webgpu: download of [%d:%d] from a tensor of %d", off, off+len(dst), tt.n))
	}
	if be.ok() && tt.released() {
		be.fail(fmt.Errorf("download from a released tensor"))
	}
	return tt
}

// fromBytes fills dst with the little-endian float32s in b, or with NaN if ok is false.
func fromBytes(dst []float32, b []byte, ok bool) {
	for i := range dst {
		if ok {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		} else {
			dst[i] = float32(math.NaN())
		}
	}
}

// Download implements backend.Backend. After an error it fills dst with NaN.
func (be *Backend) Download(dst []float32, t backend.Tensor, off int) {
	tt := be.downloadSource(dst, t, off)
	if tt == nil {
		return
	}
	if cap(be.hostBuf) < 4*len(dst) {
		be.hostBuf = make([]byte, 4*len(dst))
	}
	b := be.hostBuf[:4*len(dst)]
	ok := be.ok()
	for _, p := range tt.pieces(off, len(dst)) {
		ok = ok && be.dev.Read(b[4*p.at:4*(p.at+p.t.n)], p.t.buf, uint64(p.t.off)*4) == nil
	}
	fromBytes(dst, b, ok)
}

// DownloadLater implements backend.Backend (see gpu.Device.ReadLater). After an error Await
// fills dst with NaN.
func (be *Backend) DownloadLater(dst []float32, t backend.Tensor, off int) {
	tt := be.downloadSource(dst, t, off)
	if tt == nil {
		return
	}
	for _, p := range tt.pieces(off, len(dst)) {
		i := len(be.later)
		if i == cap(be.later) {
			be.later = append(be.later, laterRead{})
		}
		be.later = be.later[:i+1]
		r := &be.later[i]
		n := p.t.n
		if cap(r.raw) < 4*n {
			r.raw = make([]byte, 4*n)
		}
		r.dst, r.raw = dst[p.at:p.at+n], r.raw[:4*n]
		r.dev, r.last = be.ok() && be.dev.ReadLater(r.raw, p.t.buf, uint64(p.t.off)*4) == nil, false
	}
	if len(be.later) > 0 {
		be.later[len(be.later)-1].last = true
	}
}

// Await implements backend.Backend. After an error it fills every dst asked for with NaN, the
// kept ones too, and the device's reads are all awaited or dropped.
func (be *Backend) Await(keep int) {
	be.settleAll()
	keep = max(keep, 0)
	n := len(be.later) // later[n:] are the pieces of the last keep DownloadLaters
	for calls := 0; n > 0; n-- {
		if be.later[n-1].last {
			if calls == keep {
				break
			}
			calls++
		}
	}
	devKeep := 0
	for _, r := range be.later[n:] {
		if r.dev && be.ok() { // after an error nothing is kept
			devKeep++
		}
	}
	err := be.dev.Await(devKeep)
	ok := err == nil && be.ok()
	if !ok {
		n = len(be.later) // every read is done with: NaN
	}
	for i := range be.later[:n] {
		r := &be.later[i]
		fromBytes(r.dst, r.raw, ok)
		r.dst = nil
	}
	// The kept pieces to the front, the finished ones (their raw buffers free) behind them.
	k := len(be.later) - n
	for i := range k {
		be.later[i], be.later[n+i] = be.later[n+i], be.later[i]
	}
	be.later = be.later[:k]
}

// Zero implements backend.Backend.
func (be *Backend) Zero(t backend.Tensor, n int) {
	if n == 0 {
		return
	}
	for _, p := range ten(t).pieces(0, n) {
		for o := 0; o < p.t.n; o += be.window {
			w := min(be.window, p.t.n-o)
			be.elementwise("zero", []uint32{uint32(w)}, p.t.view(o, w), nil, nil, w)
		}
	}
}

// Copy implements backend.Backend.
func (be *Backend) Copy(dst, src backend.Tensor, n int) {
	if n == 0 {
		return
	}
	d, s := ten(dst), ten(src)
	for _, dp := range d.pieces(0, n) {
		for _, sp := range s.pieces(dp.at, dp.t.n) {
			for o := 0; o < sp.t.n; {
				// A view may start anywhere (the decoder writes one row of its cache): it is
				// bound from the SliceAlign boundary below its start, which every device
				// accepts, and the kernel is told where in the binding it begins.
				w := min(be.window, sp.t.n-o)
				xs, ys := (dp.t.off+sp.at+o)%backend.SliceAlign, (sp.t.off+o)%backend.SliceAlign
				w = min(w, be.window-max(xs, ys))
				x, y := dp.t.view(sp.at+o-xs, w+xs), sp.t.view(o-ys, w+ys)
				if xs+ys != 0 && overlaps(x, y) { // widened, they share memory: the source goes through scratch
					y, ys = be.copyToScratch("copy source", sp.t.view(o, w), w), 0
				}
				be.elementwise("copy", []uint32{uint32(w), 0, 0, 0, 0, 0, 0, uint32(xs), uint32(ys)}, x, y, nil, w)
				o += w
			}
		}
	}
}

// Release implements backend.Backend.
func (be *Backend) Release(t backend.Tensor) {
	be.settleAll()
	tt := ten(t)
	if tt.owner {
		for _, p := range append([]*tensor{tt}, tt.parts...) {
			if p.buf != nil {
				be.dev.Release(p.buf)
			}
			p.buf = nil
		}
	}
	tt.buf, tt.parts = nil, nil
}

var _ backend.Backend = (*Backend)(nil)

// Profile returns what the device did since the last call (dispatches, submits, waits and
// where the host's time went; with GPU timestamps, tools/gpuprof, how long each dispatch took
// on the GPU) and starts counting afresh; per is the number of steps the counts cover, for
// per-step averages.
func (be *Backend) Profile(per int) string {
	stamps, err := be.dev.Timestamps(per) // before ResetStats starts them over
	if err != nil {
		stamps = fmt.Sprintf("GPU timestamps: %v\n", err)
	}
	s := be.dev.Stats()
	be.dev.ResetStats()
	per = max(per, 1)
	f := func(n int) float64 { return float64(n) / float64(per) }
	ms := func(d time.Duration) float64 { return d.Seconds() * 1e3 / float64(per) }
	out := fmt.Sprintf("per step: %.0f dispatches (%.0f new bind groups), %.1f submits (%.1f with writes), %.1f waits (%.2f ms), %.1f reads, %.1f writes; host: recording %.2f ms, submitting %.2f ms, awaiting reads %.2f ms",
		f(s.Dispatches), f(s.NewGroups), f(s.Submits), f(s.WriteSubmits), f(s.Waits), ms(s.WaitTime), f(s.Reads), f(s.Writes), ms(s.RecordTime), ms(s.SubmitTime), ms(s.AwaitTime))
	names := make([]string, 0, len(s.PerKernel))
	for n := range s.PerKernel {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return s.PerKernel[names[i]].Time > s.PerKernel[names[j]].Time })
	for _, n := range names {
		kt := s.PerKernel[n]
		out += fmt.Sprintf("\n    %-32s %5.1f× %8.3f ms  (%.1f µs each)", n, f(kt.N), ms(kt.Time), kt.Time.Seconds()*1e6/float64(kt.N))
	}
	if stamps != "" {
		out += "\n  " + strings.TrimSuffix(stamps, "\n")
	}
	return out
}

// SyncEach makes every kernel run its own submit, waited for, so that Profile gives the time
// of each kernel (with a submit and a wait of overhead each). For profiling only.
func (be *Backend) SyncEach(on bool) { be.dev.SyncEach(on) }

// problem2 returns the copy of matmul.wgsl's functions between "PROBLEM BEGIN" and "PROBLEM
// END" that computes the second product of dual64: each function's name with "_2" added,
// parameters from prm.p2, C in c2, A in a2 and B in a (the first product's A).
func problem2(code string) string {
	sec := problemSection(code)
	if sec == "" {
		return ""
	}
	sec = problemNames.ReplaceAllString(sec, "${1}_2(")
	sec = strings.ReplaceAll(sec, "prm.p1.", "prm.p2.")
	sec = problemArrays.ReplaceAllStringFunc(sec, func(s string) string {
		return map[string]string{"a[": "a2[", "b[": "a[", "c[": "c2["}[s]
	})
	return "\n// The second product's copy (webgpu.go, problem2).\n" + sec
}

// problemSection returns the text of matmul.wgsl's code between "PROBLEM BEGIN" and "PROBLEM
// END", or "" if it has no such section.
func problemSection(code string) string {
	const begin, end = "// PROBLEM BEGIN", "// PROBLEM END"
	i, j := strings.Index(code, begin), strings.Index(code, end)
	if i < 0 || j < i {
		return ""
	}
	return code[i+len(begin) : j]
}

var (
	problemNames  = regexp.MustCompile(`\b(loadA|loadB|store|finish|finish4|fetchA|fetchB|store4|tile64|biasRow64|reduceOne)\(`)
	problemArrays = regexp.MustCompile(`\b[abc]\[`)
)
