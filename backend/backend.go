// Package backend defines the fixed set of compute kernels a TinyGPT model is built from.
//
// The model (package gpt) is written once in terms of these kernels and never touches the raw
// numbers of parameters or activations: it holds Tensor handles and calls kernels on them. A
// backend owns the memory behind the handles. The cpu backend keeps it in Go slices; a GPU
// backend keeps it in device buffers and may record kernels into a command stream that runs when
// the host next reads a result (Download), so every kernel here is a pure function of its
// arguments with no return value.
//
// Conventions shared by all kernels:
//   - Matrices are row-major. Activations are [B·T, C] with row b·T+t.
//   - Linear layers store their weight as [in, out] (y = x·W + b), as the .tinygpt format does.
//   - Attention heads are contiguous column blocks of width C/NH within q, k, v and its output.
//   - "Backward" kernels add (+=) into parameter gradients so that gradients of a step (or of
//     several micro-batches) accumulate; the caller zeroes them at the start of a step. Where a
//     backward kernel writes an activation gradient, its doc says whether it adds or overwrites.
//   - Tensors passed to one call never overlap unless a kernel's doc says they may.
package backend

import "math"

// Tensor is a handle to an array of float32 (or int32, for token ids) owned by a backend.
// Only the backend that made a Tensor can use it.
type Tensor interface {
	// Len reports the number of elements.
	Len() int
}

// SliceAlign is the element alignment that offsets passed to Backend.Slice must respect, so
// that a GPU backend can bind the view directly (256-byte buffer offset alignment).
const SliceAlign = 64

// Layout says which operands of a matrix product are transposed.
type Layout int

// The three matrix-product layouts a transformer's forward and backward passes need.
// With C of shape [M, N] and inner dimension K:
const (
	NN Layout = iota // C = A·B,   A is [M, K], B is [K, N]  (linear forward)
	NT               // C = A·Bᵀ,  A is [M, K], B is [N, K]  (input gradient; tied LM head)
	TN               // C = Aᵀ·B,  A is [K, M], B is [K, N]  (weight gradient)
)

func (l Layout) String() string {
	switch l {
	case NN:
		return "NN"
	case NT:
		return "NT"
	case TN:
		return "TN"
	}
	return "Layout(?)"
}

// AdamParams are the hyper-parameters of AdamW that stay the same from step to step. What
// changes every step (the learning rate and the bias corrections) is device data: see
// AdamState.
type AdamParams struct {
	Beta1       float32 // first-moment decay, 0.9
	Beta2       float32 // second-moment decay, 0.95
	Eps         float32 // added to the root of the second moment, 1e-8
	WeightDecay float32 // decoupled weight decay (0 for tensors that are not decayed)
	Clip        float32 // global gradient-norm clip; 0 disables clipping
}

// AdamStateLen is the length of AdamW's state tensor (see AdamState).
const AdamStateLen = 4

// AdamState returns the contents of AdamW's state tensor for step t (1-based) with learning
// rate lr, before the gradients' sum of squares is added into element 0:
//
//	[0] Σ g² over all gradients (0 here; SumSquares adds into it)
//	[1] lr
//	[2] 1 − β1^t
//	[3] sqrt(1 − β2^t)
//
// The step's values are written to the backend as data, together with the step's first
// commands, rather than passed to AdamW with its last ones: a GPU backend's writes to device
// memory wait for the GPU to finish the work already submitted (docs/performance.md,
// thirty-third session), so a write at the end of a step would leave the GPU idle.
func AdamState(lr, beta1, beta2 float32, t int) [AdamStateLen]float32 {
	bc1 := 1 - float32(math.Pow(float64(beta1), float64(t)))
	bc2sqrt := float32(math.Sqrt(1 - math.Pow(float64(beta2), float64(t))))
	return [AdamStateLen]float32{0, lr, bc1, bc2sqrt}
}

// SeedWords is the number of int32 elements one dropout seed takes in a seeds tensor.
const SeedWords = 2

// PutSeed stores seed as entry site of the host copy of a seeds tensor (see Backend.Dropout):
// its low 32 bits at words[2·site] and its high 32 bits at words[2·site+1].
//
// Dropout reads its seed from device data, not from an argument, for the reason AdamState
// gives: a pass's seeds are written once, with its first commands, while kernels' arguments
// stay the same from step to step.
func PutSeed(words []int32, site int, seed uint64) {
	words[SeedWords*site] = int32(uint32(seed))
	words[SeedWords*site+1] = int32(uint32(seed >> 32))
}

// Seed returns entry site of the host copy of a seeds tensor, as PutSeed stored it.
func Seed(words []int32, site int) uint64 {
	return uint64(uint32(words[SeedWords*site])) | uint64(uint32(words[SeedWords*site+1]))<<32
}

// Backend is a set of kernels and the memory they work on.
//
// A Backend is not safe for concurrent use by several goroutines; make one per goroutine (they
// may share a device or a worker pool underneath).
type Backend interface {
	// Name is the backend's short name ("cpu", "webgpu").
	Name() string
	// Describe says what the backend runs on, for people ("cpu: 16 threads, avx2").
	Describe() string

	// Alloc returns a zero-filled float32 tensor of n elements.
	Alloc(n int) Tensor
	// AllocInt returns a zero-filled int32 tensor of n elements (token ids).
	AllocInt(n int) Tensor
	// Slice returns a view of n elements of t starting at element off, which must be a multiple
	// of SliceAlign. Writes through the view change t.
	Slice(t Tensor, off, n int) Tensor
	// SegmentLen is the length, in elements, of the pieces in which the backend stores a
	// tensor longer than one of its buffers may be, or 0 when it never splits tensors. Piece i
	// of a tensor holds its elements [i·SegmentLen, (i+1)·SegmentLen), a multiple of
	// SliceAlign. A view passed to any kernel but Zero, Copy, Upload, UploadInt, Download,
	// DownloadLater, SumSquares and AdamW must lie within one piece (the model lays out its
	// flat parameters so that none crosses a piece's end); SumSquares' x must start at a
	// piece's start.
	SegmentLen() int
	// Upload copies src into t[0:len(src)].
	Upload(t Tensor, src []float32)
	// UploadInt copies src into the int32 tensor t[0:len(src)].
	UploadInt(t Tensor, src []int32)
	// Download copies t[off:off+len(dst)] into dst, finishing any pending work first.
	Download(dst []float32, t Tensor, off int)
	// DownloadLater is Download without the wait: it asks for t[off:off+len(dst)] as it is
	// once the kernels called so far have run, and Await fills dst. Kernels called after it
	// do not delay it: a GPU backend runs them while the host waits in Await, so that a
	// training step's loss can be read while the next step's passes run. dst must not be used
	// until an Await that does not keep it returns.
	DownloadLater(dst []float32, t Tensor, off int)
	// Await waits until every DownloadLater not yet awaited has filled its dst, but for the
	// last keep of them (a DownloadLater of nothing does not count), which stay in flight for
	// a later Await; a keep below 0 counts as 0. A trainer asks for a step's
	// loss as soon as the step is recorded, before it awaits the step before: a GPU backend
	// then reads the loss back at the end of the step's own submission rather than in one of
	// its own (each submission costs the GPU ~15 µs: docs/performance.md, 2026-11-27).
	Await(keep int)
	// Zero sets the first n elements of t to 0.
	Zero(t Tensor, n int)
	// Copy sets dst[i] = src[i] for i < n.
	Copy(dst, src Tensor, n int)
	// Release frees t's memory. Using t afterwards is an error.
	Release(t Tensor)

	// Encoder: out[b,t,:] = wte[tok[b,t],:] + wpe[pos0+t,:]. tok is int32 [B·T]. pos0 is 0
	// except when decoding one token at a later position.
	Encoder(out, tok, wte, wpe Tensor, B, T, pos0, C int)
	// EncoderBackward adds dout into the rows of dwte selected by tok and into dwpe.
	EncoderBackward(dwte, dwpe, dout, tok Tensor, B, T, C int)

	// LayerNorm normalises each of the N rows of in (eps 1e-5, biased variance), scales by g and
	// shifts by b. It saves each row's mean and 1/std for the backward pass.
	LayerNorm(out, mean, rstd, in, g, b Tensor, N, C int)
	// AddLayerNorm is Add followed by LayerNorm of its result, the residual connection and the
	// next sublayer's normalisation: sum = a + b (sum may be a), then LayerNorm(out, mean, rstd,
	// sum, g, bias) over N rows of C.
	AddLayerNorm(sum, out, mean, rstd, a, b, g, bias Tensor, N, C int)
	// LinearAddLayerNorm is the end of a residual branch and the next sublayer's normalisation:
	// y = Dropout(in·w + bias) (Linear without GELU, then Dropout with p, seeds and site), then
	// AddLayerNorm(sum, out, mean, rstd, x, y, g, b, N, OC). y itself is not kept; sum must
	// not be x.
	LinearAddLayerNorm(sum, out, mean, rstd, in, w, bias, x, g, b Tensor, N, IC, OC int, p float32, seeds Tensor, site int)
	// MLPAddLayerNorm is the MLP branch and the normalisation after it: Linear(grad, act, in,
	// w1, b1, N, C, F) with its GELU (act = GELU(h), grad = GELU'(h) for h = in·w1 + b1), then
	// LinearAddLayerNorm(sum, out, mean, rstd, act, w2, b2, x, g, b, N, F, C, p, seeds, site).
	MLPAddLayerNorm(sum, out, mean, rstd, grad, act, in, w1, b1, w2, b2, x, g, b Tensor, N, C, F int, p float32, seeds Tensor, site int)
	// LayerNormBackward adds the input gradient into din and the parameter gradients into dg, db.
	LayerNormBackward(din, dg, db, dout, in, g, mean, rstd Tensor, N, C int)

	// MatMul computes C = op(A)·op(B) for the given layout (see Layout), C of shape [M, N] with
	// inner dimension K. With accumulate it adds into C instead of overwriting it.
	MatMul(c, a, b Tensor, M, N, K int, l Layout, accumulate bool)
	// Linear is a linear layer: out = in·w + bias for N rows, in [N, IC], w [IC, OC], bias [OC];
	// the bias is added after the product, as MatMul followed by AddBias would. When act is not
	// nil it is followed by a GELU: act = GELU(x) and out = GELU'(x) for x = in·w + bias, the
	// derivative being all that the backward pass needs (dx = dact·out, see Mul). When act is
	// out itself only the GELU is written.
	Linear(out, act, in, w, bias Tensor, N, IC, OC int)
	// LinearBackward is the backward pass of Linear (without its GELU) for N rows: din =
	// dout·wᵀ (din += with accumulate), dw += inᵀ·dout and dbias += the column sums of dout,
	// each summed exactly as MatMul (NT), MatMul (TN, accumulating) and BiasBackward alone
	// would. The three are independent, so a backend may compute them side by side. When
	// dgelu [N, IC] is not nil, din is then multiplied by it elementwise, as Mul would: with
	// the GELU' that the Linear producing in kept (see Linear), din becomes the gradient before
	// that GELU.
	LinearBackward(din, dw, dbias, dout, in, w, dgelu Tensor, N, IC, OC int, accumulate bool)
	// LinearLayerNormBackward is LinearBackward (no dgelu, din overwritten) of a Linear whose
	// input in is a LayerNorm's output, followed by that LayerNorm's LayerNormBackward with din
	// as its output gradient: LayerNormBackward(dx, dg, db, din, x, g, mean, rstd, N, IC). din
	// is left holding the Linear's input gradient.
	LinearLayerNormBackward(din, dw, dbias, dout, in, w, dx, dg, db, x, g, mean, rstd Tensor, N, IC, OC int)
	// AddBias adds bias [C] to each of the N rows of out.
	AddBias(out, bias Tensor, N, C int)
	// BiasBackward adds the column sums of dout [N, C] into dbias.
	BiasBackward(dbias, dout Tensor, N, C int)

	// GELU: out = x·Φ(x), the exact erf form. out and in may be the same tensor.
	GELU(out, in Tensor, n int)
	// GELUBackward overwrites din with dout·GELU'(in). din and dout may be the same tensor.
	GELUBackward(din, in, dout Tensor, n int)
	// Add: out = a + b elementwise (the residual connection).
	Add(out, a, b Tensor, n int)
	// Mul: out = a·b elementwise. out may be a or b.
	Mul(out, a, b Tensor, n int)

	// Dropout: out = in·keep/(1−p), where keep for element i is a fixed hash of (seed, i), so the
	// backward pass and every backend draw the same mask. seed is entry site of the int32
	// tensor seeds (see PutSeed), which the caller writes once for all of a pass's dropouts.
	// out may be in. p = 0 copies and reads no seed.
	Dropout(out, in Tensor, n int, p float32, seeds Tensor, site int)
	// DropoutBackward overwrites din with dout·keep/(1−p), the same mask as Dropout.
	DropoutBackward(din, dout Tensor, n int, p float32, seeds Tensor, site int)

	// Attention is causal multi-head self-attention with NH heads and scale 1/sqrt(C/NH) over
	// qkv [B·T, 3C], whose column blocks are q, k and v (the output of the attention's one
	// input projection, read in place). It writes the attention output (before the output
	// projection) to out [B·T, C] and each query's log-sum-exp of scaled scores to lse
	// [B·NH·T], for the backward pass.
	Attention(out, lse, qkv Tensor, B, T, C, NH int)
	// QKVAttention is the attention's input projection followed by the attention: Linear(qkv,
	// nil, in, w, bias, B·T, C, 3C), then Attention(out, lse, qkv, B, T, C, NH). qkv is left
	// holding q, k and v for the backward pass.
	QKVAttention(qkv, out, lse, in, w, bias Tensor, B, T, C, NH int)
	// AttentionBackward overwrites dqkv [B·T, 3C] (dq, dk and dv as its column blocks) from
	// dout [B·T, C], recomputing the probabilities from lse.
	AttentionBackward(dqkv, dout, qkv, out, lse Tensor, B, T, C, NH int)
	// LinearAttentionBackward is the backward pass of the attention's output projection
	// followed by the attention's: LinearBackward(datt, dw, dbias, dout, out, w, nil, B·T, C,
	// C, false), then AttentionBackward(dqkv, datt, qkv, out, lse, B, T, C, NH), where datt, the
	// gradient of the attention output out, is not kept.
	LinearAttentionBackward(dqkv, dw, dbias, dout, out, w, qkv, lse Tensor, B, T, C, NH int)
	// AttentionDecode attends one new query (position pos) over a key/value cache for a single
	// sequence: cache [ctx, 3C] holds in rows 0..pos−1 the q, k and v of the positions before
	// (as Attention's qkv); it first stores qkv [3C], the new position's, as row pos, then
	// writes the attention output for its query to out [C].
	AttentionDecode(out, qkv, cache Tensor, pos, C, NH int)

	// CrossEntropy computes, for each of the N rows of logits [N, V], the loss
	// −log softmax(logits)[target] into losses [N]. If dlogits is not nil it also writes the
	// gradient scale·(softmax − onehot(target)); dlogits may be logits itself.
	CrossEntropy(losses, dlogits, logits, targets Tensor, N, V int, scale float32)

	// SumSquares adds the sum of squares of x[0:n] into acc[0].
	SumSquares(acc, x Tensor, n int)
	// AdamW updates n parameters p from gradients g with moments m, v, with the step's
	// learning rate and bias corrections from state (AdamState). If h.Clip > 0 the gradients
	// are first scaled by Clip/(norm+1e-6) when the global norm sqrt(state[0]) exceeds Clip;
	// the norm is read where it lives, never through the host. If state[0] is NaN or
	// infinite, nothing changes: a step whose loss or gradients are not finite leaves the
	// weights and moments as they were, even before the host has read the norm.
	AdamW(p, g, m, v, state Tensor, n int, h AdamParams)
}

// Close releases be's device, if it holds one (the webgpu backend does; the cpu backend holds
// nothing to release). be must not be used afterwards.
func Close(be Backend) {
	if c, ok := be.(interface{ Close() }); ok {
		c.Close()
	}
}

// Async reports whether be runs kernels after the calls that make them return, while the host
// goes on (the webgpu backend records them into a command stream), rather than within the
// calls (the cpu backend). Work recorded ahead of a read pays only on such a backend.
func Async(be Backend) bool {
	a, ok := be.(interface{ Async() bool })
	return ok && a.Async()
}

// OnDevice reports whether be keeps its tensors in memory of its own, outside the host's (the
// webgpu backend on a hardware GPU): the host then needs none of that memory, and a device
// short of it says so when the memory is allocated (see Err).
func OnDevice(be Backend) bool {
	d, ok := be.(interface{ OnDevice() bool })
	return ok && d.OnDevice()
}

// Err returns be's own error, if it keeps one (the webgpu backend: a lost device, out of
// memory), or nil. After one, be computes nothing: what is read from it is garbage.
func Err(be Backend) error {
	if f, ok := be.(interface{ Err() error }); ok {
		return f.Err()
	}
	return nil
}
