package webgpu

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"

	"tinygpt/backend"
	"tinygpt/backend/cpu"
	"tinygpt/backend/webgpu/internal/gpu"
)

// Every kernel is run on the GPU and on its CPU twin (package cpu, itself checked against
// float64 references and finite differences) with the same random inputs. Outputs that a
// kernel overwrites are prefilled with NaN on the GPU, so an element left unwritten fails.
// Shapes are deliberately not multiples of the tile sizes. On a machine without a GPU adapter
// the tests skip, except in CI (CI=true), where lavapipe is installed and a missing adapter is
// a failure.

var (
	gpuOnce sync.Once
	gpuBE   *Backend
	gpuErr  error
)

// openGPU returns the shared GPU backend or skips the test.
func openGPU(t testing.TB) *Backend {
	t.Helper()
	gpuOnce.Do(func() { gpuBE, gpuErr = New() })
	if gpuErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but no WebGPU adapter (is mesa-vulkan-drivers installed?): %v", gpuErr)
		}
		if errors.Is(gpuErr, ErrNoAdapter) {
			t.Skipf("skipping: %v", gpuErr)
		}
		t.Fatalf("opening WebGPU: %v", gpuErr)
	}
	if err := gpuBE.Err(); err != nil {
		t.Fatalf("GPU backend failed earlier: %v", err)
	}
	return gpuBE
}

var cpuBE = cpu.New()

type pair struct {
	g, c backend.Tensor
}

// env holds one test's tensors on both backends.
type env struct {
	t   *testing.T
	g   *Backend
	rng *rand.Rand
}

func newEnv(t *testing.T, seed uint64) *env {
	return &env{t: t, g: openGPU(t), rng: rand.New(rand.NewPCG(seed, 7))}
}

func (e *env) randn(n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(e.rng.NormFloat64() * scale)
	}
	return v
}

// in uploads the same values to both backends.
func (e *env) in(v []float32) pair {
	p := pair{e.g.Alloc(len(v)), cpuBE.Alloc(len(v))}
	e.g.Upload(p.g, v)
	cpuBE.Upload(p.c, v)
	return p
}

// out allocates an output that the kernel overwrites: NaN on the GPU, zeros on the CPU.
func (e *env) out(n int) pair {
	p := pair{e.g.Alloc(n), cpuBE.Alloc(n)}
	e.g.Upload(p.g, nans(n))
	return p
}

// nans returns n NaNs.
func nans(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(math.NaN())
	}
	return v
}

// slice returns the view of n elements from off of p, on both backends.
func (e *env) slice(p pair, off, n int) pair {
	return pair{e.g.Slice(p.g, off, n), cpuBE.Slice(p.c, off, n)}
}

// both runs f on the GPU backend, then on its CPU twin; pick gives a pair's tensor on the
// backend f is given.
func (e *env) both(f func(be backend.Backend, pick func(pair) backend.Tensor)) {
	f(e.g, func(p pair) backend.Tensor { return p.g })
	f(cpuBE, func(p pair) backend.Tensor { return p.c })
}

func (e *env) ints(v []int32) pair {
	p := pair{e.g.AllocInt(len(v)), cpuBE.AllocInt(len(v))}
	e.g.UploadInt(p.g, v)
	cpuBE.UploadInt(p.c, v)
	return p
}

func (e *env) tokens(n, V int) []int32 {
	v := make([]int32, n)
	for i := range v {
		v[i] = int32(e.rng.IntN(V))
	}
	return v
}

// check compares the GPU and CPU contents of p: max|g−c| ≤ tol·max(1, max|c|), no NaN.
func (e *env) check(what string, p pair, tol float64) {
	e.t.Helper()
	n := p.c.Len()
	g := make([]float32, n)
	c := make([]float32, n)
	e.g.Download(g, p.g, 0)
	cpuBE.Download(c, p.c, 0)
	if err := e.g.Err(); err != nil {
		e.t.Fatalf("%s: %v", what, err)
	}
	scale := 1.0
	for _, v := range c {
		scale = math.Max(scale, math.Abs(float64(v)))
	}
	worst, at := 0.0, -1
	for i := range c {
		d := math.Abs(float64(g[i]) - float64(c[i]))
		if g[i] != g[i] {
			d = math.Inf(1)
		}
		if d > worst || at < 0 {
			worst, at = d, i
		}
	}
	if worst > tol*scale {
		e.t.Errorf("%s: max difference %.3g at %d (gpu %.7g, cpu %.7g), tolerance %.3g", what, worst, at, g[at], c[at], tol*scale)
	}
}

// TestMatMul runs the matrix product on every shape, layout and accumulate flag (shapes with
// a long K split it: 97×130×400; a single row runs as gemv: 1×300×400 would otherwise split).
func TestMatMul(t *testing.T) {
	e := newEnv(t, 1)
	shapes := [][3]int{{1, 1, 1}, {37, 53, 29}, {7, 5, 3}, {64, 96, 96}, {97, 130, 400}, {200, 33, 1}, {65, 64, 17}, {129, 250, 9}, {130, 70, 40}, {1, 300, 400}, {1, 65, 1000}, {1, 33, 5}}
	for _, s := range shapes {
		M, N, K := s[0], s[1], s[2]
		for _, l := range []backend.Layout{backend.NN, backend.NT, backend.TN} {
			for _, acc := range []bool{false, true} {
				a := e.in(e.randn(M*K, 1))
				b := e.in(e.randn(K*N, 1))
				var c pair
				if acc {
					c = e.in(e.randn(M*N, 1))
				} else {
					c = e.out(M * N)
				}
				e.g.MatMul(c.g, a.g, b.g, M, N, K, l, acc)
				cpuBE.MatMul(c.c, a.c, b.c, M, N, K, l, acc)
				e.check(fmt.Sprintf("%dx%dx%d/%s/acc=%v", M, N, K, l, acc), c, 1e-5*math.Sqrt(float64(K)))
			}
		}
	}
}

// A linear layer's weight gradient (a TN product adding into dW) followed by its bias gradient
// from the same output gradient runs as one dispatch (the bias as a row of ones in the product);
// dW and db are views of one flat gradient tensor, as in the model. Shapes with K split into
// slices and not, and with the extra row making an extra row of tiles (IC 64 and 128: that row
// computes only the column sums, see matmul.wgsl's biasRow64).
func TestMatMulBiasGrad(t *testing.T) {
	e := newEnv(t, 11)
	for _, s := range [][3]int{{37, 53, 400}, {64, 96, 29}, {128, 70, 600}, {129, 250, 9}, {48, 192, 512}, {5, 7, 1}} {
		IC, OC, N := s[0], s[1], s[2]
		dbOff := (IC*OC + 63) / 64 * 64
		flat := e.in(e.randn(dbOff+OC, 1))
		in, dout := e.in(e.randn(N*IC, 1)), e.in(e.randn(N*OC, 1))
		dw, db := e.slice(flat, 0, IC*OC), e.slice(flat, dbOff, OC)
		e.both(func(be backend.Backend, pick func(pair) backend.Tensor) {
			be.MatMul(pick(dw), pick(in), pick(dout), IC, OC, N, backend.TN, true)
			be.BiasBackward(pick(db), pick(dout), N, OC)
		})
		name := fmt.Sprintf("weight and bias gradients %v", s)
		e.check(name, flat, 1e-5*math.Sqrt(float64(N)))
		// Fused: the bias gradient adds no dispatch to the product's.
		count := func(bias bool) int {
			e.g.settleAll()
			d0 := e.g.dev.Stats().Dispatches
			e.g.MatMul(dw.g, in.g, dout.g, IC, OC, N, backend.TN, true)
			if bias {
				e.g.BiasBackward(db.g, dout.g, N, OC)
			}
			e.g.settleAll()
			return e.g.dev.Stats().Dispatches - d0
		}
		count(false) // allocates the scratch a product without a bias binds, outside the count
		if with, without := count(true), count(false); with != without {
			t.Errorf("%s: %d dispatches with the bias gradient, %d without", name, with, without)
		}
	}
}

func TestEncoder(t *testing.T) {
	e := newEnv(t, 2)
	const V = 256
	// 3×700 rows: more than backward_wte lists in one round; 70 columns: two column blocks.
	for _, s := range [][4]int{{3, 7, 0, 37}, {2, 5, 11, 48}, {1, 1, 0, 1}, {3, 700, 0, 70}} {
		B, T, pos0, C := s[0], s[1], s[2], s[3]
		ctx := pos0 + T
		wte, wpe := e.in(e.randn(V*C, 1)), e.in(e.randn(ctx*C, 1))
		tok := e.ints(e.tokens(B*T, V))
		out := e.out(B * T * C)
		e.g.Encoder(out.g, tok.g, wte.g, wpe.g, B, T, pos0, C)
		cpuBE.Encoder(out.c, tok.c, wte.c, wpe.c, B, T, pos0, C)
		e.check(fmt.Sprintf("encoder %v", s), out, 1e-6)
		if pos0 != 0 {
			continue
		}
		// Few distinct tokens, so that rows of dwte collect several contributions.
		tk := e.ints(e.tokens(B*T, 3))
		dwte, dwpe := e.in(e.randn(V*C, 1)), e.in(e.randn(ctx*C, 1))
		dout := e.in(e.randn(B*T*C, 1))
		e.g.EncoderBackward(dwte.g, dwpe.g, dout.g, tk.g, B, T, C)
		cpuBE.EncoderBackward(dwte.c, dwpe.c, dout.c, tk.c, B, T, C)
		e.check(fmt.Sprintf("encoder backward dwte %v", s), dwte, 1e-6)
		e.check(fmt.Sprintf("encoder backward dwpe %v", s), dwpe, 1e-6)
	}
	// The position gradient in several dispatches of a few sequences each, the last partial
	// (as a batch of more than wpeSeqs sequences is summed).
	defer func(n int) { wpeSeqs = n }(wpeSeqs)
	wpeSeqs = 2
	B, T, C := 7, 3, 5
	tk := e.ints(e.tokens(B*T, V))
	dwte, dwpe := e.in(e.randn(V*C, 1)), e.in(e.randn(T*C, 1))
	dout := e.in(e.randn(B*T*C, 1))
	e.g.EncoderBackward(dwte.g, dwpe.g, dout.g, tk.g, B, T, C)
	cpuBE.EncoderBackward(dwte.c, dwpe.c, dout.c, tk.c, B, T, C)
	e.check("encoder backward dwpe in four dispatches", dwpe, 1e-6)
}

func TestLayerNorm(t *testing.T) {
	e := newEnv(t, 3)
	for _, s := range [][2]int{{1, 1}, {7, 37}, {53, 48}, {13, 200}, {3, 64}, {300, 44}} {
		N, C := s[0], s[1]
		in := e.in(e.randn(N*C, 2))
		g, b := e.in(e.randn(C, 1)), e.in(e.randn(C, 1))
		out, mean, rstd := e.out(N*C), e.out(N), e.out(N)
		e.g.LayerNorm(out.g, mean.g, rstd.g, in.g, g.g, b.g, N, C)
		cpuBE.LayerNorm(out.c, mean.c, rstd.c, in.c, g.c, b.c, N, C)
		name := fmt.Sprintf("layernorm %dx%d", N, C)
		e.check(name+" out", out, 1e-5)
		e.check(name+" mean", mean, 1e-5)
		e.check(name+" rstd", rstd, 1e-5)

		dout := e.in(e.randn(N*C, 1))
		din, dg, db := e.in(e.randn(N*C, 1)), e.in(e.randn(C, 1)), e.in(e.randn(C, 1))
		e.g.LayerNormBackward(din.g, dg.g, db.g, dout.g, in.g, g.g, mean.g, rstd.g, N, C)
		cpuBE.LayerNormBackward(din.c, dg.c, db.c, dout.c, in.c, g.c, mean.c, rstd.c, N, C)
		// din is rstd times a difference of O(1) terms, so its rounding noise (the GPU may
		// contract dout·g − mean into one FMA) grows with rstd: 316 for the 1×1 row, whose
		// variance is 0 and rstd 1/sqrt(eps).
		rs := make([]float32, N)
		cpuBE.Download(rs, rstd.c, 0)
		dinTol := 1e-5
		for _, r := range rs {
			dinTol = math.Max(dinTol, 1e-5*float64(r))
		}
		e.check(name+" din", din, dinTol)
		e.check(name+" dg", dg, 1e-5)
		e.check(name+" db", db, 1e-5)
	}
}

func TestBiasGELUAdd(t *testing.T) {
	e := newEnv(t, 4)
	for _, s := range [][2]int{{1, 1}, {37, 53}, {5, 300}} {
		N, C := s[0], s[1]
		n := N * C
		name := fmt.Sprintf("%dx%d", N, C)
		out, bias := e.in(e.randn(n, 1)), e.in(e.randn(C, 1))
		e.g.AddBias(out.g, bias.g, N, C)
		cpuBE.AddBias(out.c, bias.c, N, C)
		e.check("add bias "+name, out, 1e-6)

		dbias, dout := e.in(e.randn(C, 1)), e.in(e.randn(n, 1))
		e.g.BiasBackward(dbias.g, dout.g, N, C)
		cpuBE.BiasBackward(dbias.c, dout.c, N, C)
		e.check("bias backward "+name, dbias, 1e-5)

		x := e.in(e.randn(n, 3))
		y := e.out(n)
		e.g.GELU(y.g, x.g, n)
		cpuBE.GELU(y.c, x.c, n)
		e.check("gelu "+name, y, 2e-6)

		d := e.in(e.randn(n, 1))
		dx := e.out(n)
		e.g.GELUBackward(dx.g, x.g, d.g, n)
		cpuBE.GELUBackward(dx.c, x.c, d.c, n)
		e.check("gelu backward "+name, dx, 2e-6)
		e.g.GELUBackward(d.g, x.g, d.g, n) // in place
		cpuBE.GELUBackward(d.c, x.c, d.c, n)
		e.check("gelu backward in place "+name, d, 2e-6)
		e.g.GELU(x.g, x.g, n) // in place
		cpuBE.GELU(x.c, x.c, n)
		e.check("gelu in place "+name, x, 2e-6)

		a, b, sum := e.in(e.randn(n, 1)), e.in(e.randn(n, 1)), e.out(n)
		e.g.Add(sum.g, a.g, b.g, n)
		cpuBE.Add(sum.c, a.c, b.c, n)
		e.check("add "+name, sum, 1e-6)

		prod := e.out(n)
		e.g.Mul(prod.g, a.g, b.g, n)
		cpuBE.Mul(prod.c, a.c, b.c, n)
		e.check("mul "+name, prod, 0)
		e.g.Mul(a.g, a.g, b.g, n) // in place, out = a
		cpuBE.Mul(a.c, a.c, b.c, n)
		e.check("mul in place (a) "+name, a, 0)
		e.g.Mul(b.g, a.g, b.g, n) // in place, out = b
		cpuBE.Mul(b.c, a.c, b.c, n)
		e.check("mul in place (b) "+name, b, 0)
	}
}

// seeds returns a seeds tensor (backend.PutSeed) of the given sites' seeds.
func (e *env) seeds(s ...uint64) pair {
	w := make([]int32, backend.SeedWords*len(s))
	for i, v := range s {
		backend.PutSeed(w, i, v)
	}
	return e.ints(w)
}

// Dropout draws the CPU's mask exactly, out of place, in place and backward, for each site of
// a seeds tensor (the seed read from the device, both halves of it).
func TestDropout(t *testing.T) {
	e := newEnv(t, 5)
	seeds := []uint64{0, 42, 0xDEADBEEFCAFEF00D, 1 << 40}
	st := e.seeds(seeds...)
	for _, p := range []float32{0, 0.1, 0.5} {
		for site, seed := range seeds {
			n := 5000
			x := e.in(e.randn(n, 1))
			y := e.out(n)
			e.g.Dropout(y.g, x.g, n, p, st.g, site)
			cpuBE.Dropout(y.c, x.c, n, p, st.c, site)
			e.check(fmt.Sprintf("dropout p=%v seed=%x", p, seed), y, 0) // the same mask, exactly
			dy := e.in(e.randn(n, 1))
			dx := e.out(n)
			e.g.DropoutBackward(dx.g, dy.g, n, p, st.g, site)
			cpuBE.DropoutBackward(dx.c, dy.c, n, p, st.c, site)
			e.check(fmt.Sprintf("dropout backward p=%v seed=%x", p, seed), dx, 0)
			e.g.Dropout(x.g, x.g, n, p, st.g, site) // in place
			cpuBE.Dropout(x.c, x.c, n, p, st.c, site)
			e.check(fmt.Sprintf("dropout in place p=%v seed=%x", p, seed), x, 0)
		}
	}
}

func TestAttention(t *testing.T) {
	e := newEnv(t, 6)
	// B, T, C, NH: head sizes 16, 32, 20, 7 and 1 (not multiples of 4; the backward pass of
	// attention_blocked.wgsl), 48 (attention.wgsl's, unrolled) and 100 (the kernel for any
	// size; each size is a kernel of its own, which lavapipe compiles slowly), and sequences
	// of one row, of a block and one row (33), and of more than one block of 64 rows; each with
	// the rows' partners in slices as the backend chooses (one, at these sizes), or in 3 or 13
	// slices (more than some rows have partners). The slices' partial results go to scratch
	// tensors, filled with NaN first: every slice must write all of its part.
	defer func() { forceSlices = 0 }()
	for _, c := range []struct {
		s      [4]int
		slices int
	}{{[4]int{2, 37, 48, 3}, 0}, {[4]int{1, 1, 64, 2}, 0}, {[4]int{3, 13, 14, 2}, 0}, {[4]int{1, 9, 100, 1}, 0}, {[4]int{2, 150, 64, 2}, 0},
		{[4]int{2, 37, 48, 3}, 1}, {[4]int{1, 70, 32, 2}, 13}, {[4]int{1, 100, 64, 2}, 3},
		{[4]int{2, 45, 96, 2}, 0}, {[4]int{2, 70, 40, 2}, 3}, {[4]int{1, 33, 2, 2}, 0}} {
		s := c.s
		forceSlices = c.slices
		B, T, C, NH := s[0], s[1], s[2], s[3]
		n := B * T * C
		if S := attnSlices(B*NH*T, T); S > 1 {
			for name, size := range map[string]int{"attention out slices": S * n, "attention m, l slices": 2 * S * B * NH * T,
				"attention dqkv slices": 3 * S * n} {
				scratch := e.g.scratchTensor(name, size)
				e.g.Upload(scratch, nans(scratch.n))
			}
		}
		qkv := e.in(e.randn(3*n, 1)) // q, k and v as column blocks
		out, lse := e.out(n), e.out(B*NH*T)
		e.g.Attention(out.g, lse.g, qkv.g, B, T, C, NH)
		cpuBE.Attention(out.c, lse.c, qkv.c, B, T, C, NH)
		name := fmt.Sprintf("attention %v slices %d", s, c.slices)
		e.check(name+" out", out, 1e-5)
		e.check(name+" lse", lse, 1e-5)

		dout := e.in(e.randn(n, 1))
		dqkv := e.out(3 * n) // every element written: dq, dk and dv
		e.g.AttentionBackward(dqkv.g, dout.g, qkv.g, out.g, lse.g, B, T, C, NH)
		cpuBE.AttentionBackward(dqkv.c, dout.c, qkv.c, out.c, lse.c, B, T, C, NH)
		e.check(name+" dq, dk, dv", dqkv, 2e-5)
	}
}

// The decoder writes each new row into its cache at row pos, which starts at no particular
// alignment (run refuses to bind such a view: Copy must bind it from the boundary below),
// and for widths that are not a multiple of 4 not even at a 16-byte one.
func TestAttentionDecode(t *testing.T) {
	e := newEnv(t, 7)
	for _, s := range [][2]int{{48, 3}, {6, 2}, {10, 5}} {
		const ctx = 11
		C, NH := s[0], s[1]
		cache := e.in(e.randn(ctx*3*C, 1))
		for pos := range ctx {
			qkv := e.in(e.randn(3*C, 1))
			out := e.out(C)
			e.g.AttentionDecode(out.g, qkv.g, cache.g, pos, C, NH)
			cpuBE.AttentionDecode(out.c, qkv.c, cache.c, pos, C, NH)
			e.check(fmt.Sprintf("C %d: decode pos %d", C, pos), out, 1e-5)
		}
		e.check(fmt.Sprintf("C %d: decode cache", C), cache, 0)
	}
}

func TestCrossEntropy(t *testing.T) {
	e := newEnv(t, 8)
	for _, s := range [][2]int{{1, 1}, {37, 256}, {5, 300}, {3, 53}} {
		N, V := s[0], s[1]
		name := fmt.Sprintf("cross-entropy %dx%d", N, V)
		x := e.randn(N*V, 3)
		logits, tg := e.in(x), e.ints(e.tokens(N, V))
		losses := e.out(N)
		e.g.CrossEntropy(losses.g, nil, logits.g, tg.g, N, V, 0)
		cpuBE.CrossEntropy(losses.c, nil, logits.c, tg.c, N, V, 0)
		e.check(name+" loss", losses, 1e-5)
		e.check(name+" logits untouched", logits, 0)

		d, l2 := e.out(N*V), e.out(N)
		e.g.CrossEntropy(l2.g, d.g, logits.g, tg.g, N, V, 0.25)
		cpuBE.CrossEntropy(l2.c, d.c, logits.c, tg.c, N, V, 0.25)
		e.check(name+" loss with grad", l2, 1e-5)
		e.check(name+" dlogits", d, 1e-6)

		l3 := e.out(N)
		e.g.CrossEntropy(l3.g, logits.g, logits.g, tg.g, N, V, 1/float32(N)) // in place
		cpuBE.CrossEntropy(l3.c, logits.c, logits.c, tg.c, N, V, 1/float32(N))
		e.check(name+" loss in place", l3, 1e-5)
		e.check(name+" dlogits in place", logits, 1e-6)
	}
}

// adamState returns the contents of AdamW's state tensor (backend.AdamState) for step t with
// learning rate lr and a sum of squares sumsq (β 0.9 and 0.95).
func adamState(sumsq, lr float32, t int) []float32 {
	st := backend.AdamState(lr, 0.9, 0.95, t)
	st[0] = sumsq
	return st[:]
}

func TestSumSquaresAdamW(t *testing.T) {
	e := newEnv(t, 9)
	// A flat tensor with two aligned parameter views, as the optimizer uses it.
	sizes := []int{5000, 37}
	offs := []int{0, 5056}
	flat := offs[1] + 64
	for _, clip := range []float32{0, 1, 1e6} {
		for _, gscale := range []float64{0.001, 1} {
			p, g := e.in(e.randn(flat, 1)), e.in(e.randn(flat, gscale))
			m, v := e.in(e.randn(flat, 0.1)), e.in(e.randn(flat, 0.1))
			vv := make([]float32, flat)
			cpuBE.Download(vv, v.c, 0)
			for i := range vv {
				vv[i] = vv[i] * vv[i] // second moments are not negative
			}
			e.g.Upload(v.g, vv)
			cpuBE.Upload(v.c, vv)
			sumsq := e.in(adamState(0.5, 1e-3, 3))
			e.g.SumSquares(sumsq.g, g.g, flat)
			cpuBE.SumSquares(sumsq.c, g.c, flat)
			name := fmt.Sprintf("clip %v grad scale %v", clip, gscale)
			e.check(name+" sum of squares", sumsq, 1e-5)
			for i, n := range sizes {
				h := backend.AdamParams{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1 * float32(i), Clip: clip}
				pv, gv, mv, vv := e.slice(p, offs[i], n), e.slice(g, offs[i], n), e.slice(m, offs[i], n), e.slice(v, offs[i], n)
				e.g.AdamW(pv.g, gv.g, mv.g, vv.g, sumsq.g, n, h)
				cpuBE.AdamW(pv.c, gv.c, mv.c, vv.c, sumsq.c, n, h)
			}
			e.check(name+" p", p, 1e-5)
			e.check(name+" m", m, 1e-5)
			e.check(name+" v", v, 1e-5)
			// A lone call (not gathered with others) takes the single-tensor kernel; here with
			// the next step's learning rate and bias corrections.
			ss := make([]float32, 1)
			cpuBE.Download(ss, sumsq.c, 0)
			next := e.in(adamState(ss[0], 2e-3, 4))
			h := backend.AdamParams{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Clip: clip}
			e.g.AdamW(e.g.Slice(p.g, 64, 100), e.g.Slice(g.g, 64, 100), e.g.Slice(m.g, 64, 100), e.g.Slice(v.g, 64, 100), next.g, 100, h)
			cpuBE.AdamW(cpuBE.Slice(p.c, 64, 100), cpuBE.Slice(g.c, 64, 100), cpuBE.Slice(m.c, 64, 100), cpuBE.Slice(v.c, 64, 100), next.c, 100, h)
			e.check(name+" p after a lone update", p, 1e-5)
		}
	}
	// A squared norm that is not finite changes nothing, gathered updates or a lone one.
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1))} {
		p, g := e.in(e.randn(flat, 1)), e.in(e.randn(flat, 1))
		m, v := e.in(e.randn(flat, 0.1)), e.in(e.randn(flat, 0.1))
		sumsq := e.in(adamState(bad, 1e-3, 3))
		h := backend.AdamParams{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, Clip: 1}
		for i, n := range sizes {
			e.g.AdamW(e.g.Slice(p.g, offs[i], n), e.g.Slice(g.g, offs[i], n), e.g.Slice(m.g, offs[i], n), e.g.Slice(v.g, offs[i], n), sumsq.g, n, h)
			cpuBE.AdamW(cpuBE.Slice(p.c, offs[i], n), cpuBE.Slice(g.c, offs[i], n), cpuBE.Slice(m.c, offs[i], n), cpuBE.Slice(v.c, offs[i], n), sumsq.c, n, h)
		}
		e.g.AdamW(e.g.Slice(p.g, 64, 100), e.g.Slice(g.g, 64, 100), e.g.Slice(m.g, 64, 100), e.g.Slice(v.g, 64, 100), sumsq.g, 100, h)
		cpuBE.AdamW(cpuBE.Slice(p.c, 64, 100), cpuBE.Slice(g.c, 64, 100), cpuBE.Slice(m.c, 64, 100), cpuBE.Slice(v.c, 64, 100), sumsq.c, 100, h)
		name := fmt.Sprintf("squared norm %v", bad)
		e.check(name+" p", p, 0)
		e.check(name+" m", m, 0)
		e.check(name+" v", v, 0)
	}
}

func TestZeroCopySlice(t *testing.T) {
	e := newEnv(t, 10)
	x := e.in(e.randn(300, 1))
	y := e.out(300)
	e.g.Copy(y.g, x.g, 300)
	cpuBE.Copy(y.c, x.c, 300)
	e.g.Zero(e.g.Slice(y.g, 128, 100), 100)
	cpuBE.Zero(cpuBE.Slice(y.c, 128, 100), 100)
	e.check("copy and zero through a slice", y, 0)
	got := make([]float32, 5)
	e.g.Download(got, y.g, 100)
	want := make([]float32, 5)
	cpuBE.Download(want, y.c, 100)
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("download at an offset: got %v, want %v", got, want)
		}
	}
}

// Alloc must return zeros even where the device reuses the memory of a released tensor.
func TestAllocIsZeroAfterRelease(t *testing.T) {
	g := openGPU(t)
	const n = 1000
	nan := make([]float32, n)
	for i := range nan {
		nan[i] = float32(math.NaN())
	}
	for range 5 {
		x := g.Alloc(n)
		g.Upload(x, nan)
		g.Release(x)
		y := g.Alloc(n)
		got := make([]float32, n)
		g.Download(got, y, 0)
		for i, v := range got {
			if v != 0 {
				t.Fatalf("element %d of a new tensor is %v, want 0", i, v)
			}
		}
		g.Release(y)
	}
	if err := g.Err(); err != nil {
		t.Fatal(err)
	}
}

// A failure is kept by the backend, not a panic: later kernels do nothing and downloads read
// NaN, so a training loop stops at a non-finite loss and the command reports Err. The failure
// here is a kernel given a view across two of a split tensor's buffers.
func TestFailureIsSticky(t *testing.T) {
	openGPU(t) // skips without an adapter
	be, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	be.segment = windowAlign
	small := be.Alloc(10)
	split := be.Alloc(windowAlign + 1024)
	// Reads in flight when the failure comes, one of them kept by the Await after it: both
	// come back NaN, and the device holds no read afterwards.
	before, kept := make([]float32, 3), make([]float32, 3)
	be.DownloadLater(before, small, 0)
	be.DownloadLater(kept, small, 3)
	be.GELU(be.Slice(split, windowAlign-64, 128), small, 10)
	if err := be.Err(); err == nil || !strings.Contains(err.Error(), "spans 2 device buffers") {
		t.Fatalf("Err after a kernel on a view across buffers: %v", err)
	}
	be.Await(1)
	for i := range before {
		if before[i] == before[i] || kept[i] == kept[i] {
			t.Fatalf("reads in flight at a failure: %v and %v after Await(1), want NaN", before, kept)
		}
	}
	if n := be.dev.PendingReads(); n != 0 || len(be.later) != 0 {
		t.Fatalf("after a failure and Await(1): %d device reads and %d pieces in flight, want none", n, len(be.later))
	}
	be.GELU(small, small, 10)
	got := make([]float32, 3)
	be.Download(got, small, 0)
	for _, v := range got {
		if v == v {
			t.Fatalf("download after a failure read %v, want NaN", got)
		}
	}
	// Tensors allocated after the failure have no buffers; copies and elementwise kernels
	// between them return (they once took each other for overlapping and copied to scratch
	// until the stack overflowed).
	x, y := be.Alloc(64), be.Alloc(64)
	be.Copy(x, y, 64)
	be.Add(x, x, y, 64)
	if err := be.Err(); err == nil || !strings.Contains(err.Error(), "spans 2 device buffers") {
		t.Fatalf("Err after more work: %v, want the first failure", err)
	}
}

// A tensor longer than SegmentLen is stored in pieces, each its own buffer: uploads,
// downloads (now and later), views, Zero, Copy, SumSquares and AdamW work across the pieces'
// ends and give what one buffer gives (SumSquares the same bits), and a view within one piece
// is bound like any tensor.
func TestSplitTensors(t *testing.T) {
	e := newEnv(t, 14)
	g := e.g
	n := 2*windowAlign + 12345
	v := e.randn(n, 1)
	whole, one := g.Alloc(n), pair{g.Alloc(n), cpuBE.Alloc(n)} // before the segment is lowered: one buffer each
	g.Upload(whole, v)
	saved := g.segment
	g.segment = windowAlign
	defer func() { g.segment = saved }()
	if g.SegmentLen() != windowAlign {
		t.Fatalf("SegmentLen %d, want %d", g.SegmentLen(), windowAlign)
	}
	x := e.in(v)
	if k := len(ten(x.g).parts); k != 3 {
		t.Fatalf("a tensor of %d elements with segments of %d is in %d pieces, want 3", n, windowAlign, k)
	}
	e.check("upload and download across pieces", x, 0)
	got := make([]float32, 3000)
	g.Download(got, x.g, windowAlign-1000)
	later, kept := make([]float32, 3000), make([]float32, 3000)
	g.DownloadLater(later, x.g, 2*windowAlign-2000)
	g.DownloadLater(kept, x.g, windowAlign-1000) // two pieces each
	g.Await(1)
	for i := range kept {
		if kept[i] != 0 {
			t.Fatalf("Await(1) filled the last DownloadLater (element %d)", i)
		}
	}
	if n := g.dev.PendingReads(); n != 2 {
		t.Fatalf("after Await(1): %d device reads in flight, want the last DownloadLater's 2", n)
	}
	g.Upload(x.g, make([]float32, n)) // kept sees x as it was when it was asked for
	g.Await(0)
	for i := range got {
		if got[i] != v[windowAlign-1000+i] || later[i] != v[2*windowAlign-2000+i] || kept[i] != got[i] {
			t.Fatalf("download at an offset across a piece's end: element %d differs", i)
		}
	}
	g.Upload(x.g, v)

	// Views: across pieces (only whole-tensor kernels take them) and within one.
	across := g.Slice(x.g, windowAlign-128, windowAlign+256)
	if len(ten(across).parts) != 3 {
		t.Fatalf("a view across two pieces' ends has %d parts, want 3", len(ten(across).parts))
	}
	inside := g.Slice(x.g, windowAlign+64, 1000)
	if ten(inside).parts != nil {
		t.Fatalf("a view within one piece is split")
	}
	y := e.out(1000)
	g.GELU(y.g, inside, 1000)
	cpuBE.GELU(y.c, cpuBE.Slice(x.c, windowAlign+64, 1000), 1000)
	e.check("a kernel on a view within one piece", y, 1e-6)

	// Copy between split tensors whose pieces end at different elements, and into one buffer.
	z := e.out(n)
	e.g.Zero(z.g, n)
	cpuBE.Zero(z.c, n)
	m := windowAlign + 5000
	g.Copy(g.Slice(z.g, 128, m), g.Slice(x.g, 64*100, m), m)
	cpuBE.Copy(cpuBE.Slice(z.c, 128, m), cpuBE.Slice(x.c, 64*100, m), m)
	e.check("copy across pieces", z, 0)
	g.Zero(g.Slice(z.g, windowAlign-640, 2000), 2000)
	cpuBE.Zero(cpuBE.Slice(z.c, windowAlign-640, 2000), 2000)
	e.check("zero across pieces", z, 0)
	g.Copy(one.g, x.g, n)
	cpuBE.Copy(one.c, x.c, n)
	e.check("copy from pieces into one buffer", one, 0)

	// The sum of squares: the same bits as over one buffer.
	s1, s2 := g.Alloc(1), g.Alloc(1)
	g.SumSquares(s1, whole, n)
	g.SumSquares(s2, x.g, n)
	a, b := make([]float32, 1), make([]float32, 1)
	g.Download(a, s1, 0)
	g.Download(b, s2, 0)
	if a[0] != b[0] {
		t.Errorf("sum of squares over pieces %v, over one buffer %v", b[0], a[0])
	}

	// AdamW over weights, gradients and moments in pieces, against the CPU.
	w, gr, m1, v1 := e.in(e.randn(n, 1)), e.in(e.randn(n, 0.1)), e.in(e.randn(n, 0.01)), e.in(make([]float32, n))
	sq := e.in(adamState(4, 1e-3, 3))
	h := backend.AdamParams{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Clip: 1}
	g.AdamW(w.g, gr.g, m1.g, v1.g, sq.g, n, h)
	cpuBE.AdamW(w.c, gr.c, m1.c, v1.c, sq.c, n, h)
	e.check("AdamW weights across pieces", w, 1e-6)
	e.check("AdamW moments across pieces", m1, 1e-6)
	if err := g.Err(); err != nil {
		t.Fatal(err)
	}
}

// Whole-tensor kernels (Zero, Copy, SumSquares) split tensors longer than the device's binding
// limit into windows. With the window forced down to its smallest size, a tensor of several
// windows plus a ragged end must give the same results as in one piece.
func TestWindows(t *testing.T) {
	e := newEnv(t, 11)
	saved := e.g.window
	defer func() { e.g.window = saved }()
	n := 2*windowAlign + 12345
	x := e.in(e.randn(n, 1))
	want := e.in([]float32{0.25})
	e.g.SumSquares(want.g, x.g, n) // in one piece
	e.g.window = windowAlign
	got := e.in([]float32{0.25})
	e.g.SumSquares(got.g, x.g, n)
	cpuBE.SumSquares(got.c, x.c, n)
	e.check("sum of squares in windows", got, 1e-5)
	gw, gg := make([]float32, 1), make([]float32, 1)
	e.g.Download(gw, want.g, 0)
	e.g.Download(gg, got.g, 0)
	if gw[0] != gg[0] {
		t.Errorf("sum of squares in windows %v, in one piece %v: the order changed", gg[0], gw[0])
	}
	y := e.out(n)
	e.g.Copy(y.g, x.g, n)
	cpuBE.Copy(y.c, x.c, n)
	e.check("copy in windows", y, 0)
	e.g.Zero(e.g.Slice(y.g, 64, n-100), n-100)
	cpuBE.Zero(cpuBE.Slice(y.c, 64, n-100), n-100)
	e.check("zero in windows", y, 0)
}

// Uploads and downloads larger than gpu.TransferChunk move in pieces.
func TestTransferInPieces(t *testing.T) {
	e := newEnv(t, 12)
	saved := gpu.TransferChunk
	gpu.TransferChunk = 1024
	defer func() { gpu.TransferChunk = saved }()
	n := 5000
	x := e.in(e.randn(n, 1)) // uploaded in pieces, while the allocation's clear is pending
	e.check("upload in pieces", x, 0)
	y := e.out(n)
	e.g.Copy(y.g, x.g, n)
	cpuBE.Copy(y.c, x.c, n)
	e.check("download in pieces", y, 0)
}

// A product followed by a bias on its output (a linear layer) runs fused; a bias elsewhere, or
// after an accumulating product, runs on its own. Both must equal the CPU's two kernels, for
// many rows and for one (gemv).
func TestLinearFusion(t *testing.T) {
	e := newEnv(t, 13)
	const N, K = 53, 29
	for _, M := range []int{37, 1} { // 1: gemv
		for _, l := range []backend.Layout{backend.NN, backend.NT, backend.TN} {
			for _, acc := range []bool{false, true} {
				a, b, bias := e.in(e.randn(M*K, 1)), e.in(e.randn(K*N, 1)), e.in(e.randn(N, 1))
				c, other := e.in(e.randn(M*N, 1)), e.in(e.randn(M*N, 1))
				e.g.MatMul(c.g, a.g, b.g, M, N, K, l, acc)
				cpuBE.MatMul(c.c, a.c, b.c, M, N, K, l, acc)
				e.g.AddBias(c.g, bias.g, M, N)
				cpuBE.AddBias(c.c, bias.c, M, N)
				e.g.MatMul(c.g, a.g, b.g, M, N, K, l, acc) // then a bias on another tensor
				cpuBE.MatMul(c.c, a.c, b.c, M, N, K, l, acc)
				e.g.AddBias(other.g, bias.g, M, N)
				cpuBE.AddBias(other.c, bias.c, M, N)
				name := fmt.Sprintf("M %d/%s/acc=%v", M, l, acc)
				e.check(name+" product", c, 1e-5*math.Sqrt(K))
				e.check(name+" other", other, 1e-6)
			}
		}
	}
}

// A linear layer's GELU (keeping GELU' for the backward pass, or in place) runs in its
// product's dispatch, and so does a product followed by multiplying its output in place (the
// gradient through the GELU): both with K split into slices (400) and not, and for a single row
// (gemv), equal to the CPU's kernels in turn, and without a dispatch of their own.
func TestEpilogues(t *testing.T) {
	e := newEnv(t, 17)
	const N = 53
	for _, M := range []int{37, 1} { // 1: gemv
		for _, K := range []int{29, 400} {
			in, w, bias := e.in(e.randn(M*K, 1)), e.in(e.randn(K*N, 0.2)), e.in(e.randn(N, 1))
			name := fmt.Sprintf("M %d, K %d", M, K)
			out, act := e.out(M*N), e.out(M*N)
			e.g.Linear(out.g, nil, in.g, w.g, bias.g, M, K, N)
			cpuBE.Linear(out.c, nil, in.c, w.c, bias.c, M, K, N)
			e.check(name+" linear", out, 1e-5*math.Sqrt(float64(K)))
			e.g.Linear(out.g, act.g, in.g, w.g, bias.g, M, K, N)
			cpuBE.Linear(out.c, act.c, in.c, w.c, bias.c, M, K, N)
			e.check(name+" linear+GELU, GELU'", out, 1e-5*math.Sqrt(float64(K)))
			e.check(name+" linear+GELU, GELU", act, 1e-5*math.Sqrt(float64(K)))
			e.g.Linear(out.g, out.g, in.g, w.g, bias.g, M, K, N)
			cpuBE.Linear(out.c, out.c, in.c, w.c, bias.c, M, K, N)
			e.check(name+" linear+GELU in place", out, 1e-5*math.Sqrt(float64(K)))

			// din = (dout·Wᵀ)∘f, the product's output as Mul's first or second operand.
			dout, f := e.in(e.randn(M*N, 1)), e.in(e.randn(M*K, 1))
			for i, first := range []bool{true, false} {
				din := e.out(M * K)
				for _, x := range []struct {
					be            backend.Backend
					d, dout, w, f backend.Tensor
				}{{e.g, din.g, dout.g, w.g, f.g}, {cpuBE, din.c, dout.c, w.c, f.c}} {
					x.be.MatMul(x.d, x.dout, x.w, M, K, N, backend.NT, false)
					if first {
						x.be.Mul(x.d, x.d, x.f, M*K)
					} else {
						x.be.Mul(x.d, x.f, x.d, M*K)
					}
				}
				e.check(fmt.Sprintf("%s product times f (%d)", name, i), din, 1e-5*math.Sqrt(float64(N)))
			}

			count := func(op func()) int {
				op() // first: scratch tensors allocated (and filled) on the way
				e.g.settleAll()
				d0 := e.g.dev.Stats().Dispatches
				op()
				e.g.settleAll()
				return e.g.dev.Stats().Dispatches - d0
			}
			product := count(func() { e.g.MatMul(out.g, in.g, w.g, M, N, K, backend.NN, false) })
			for what, op := range map[string]func(){
				"linear+GELU": func() { e.g.Linear(out.g, act.g, in.g, w.g, bias.g, M, K, N) },
				"product, mul": func() {
					e.g.MatMul(out.g, in.g, w.g, M, N, K, backend.NN, false)
					e.g.Mul(out.g, out.g, act.g, M*N)
				},
			} {
				if n := count(op); n != product {
					t.Errorf("%s %s: %d dispatches, the product alone %d", name, what, n, product)
				}
			}
		}
	}
}

// A linear layer's backward pass: the input gradient (NT), the weight gradient (TN, adding into
// dW) and the bias gradient from the same output gradient, with or without the input gradient
// multiplied by dgelu (through a GELU), run as one dual64 dispatch (and one reduce2 where K is
// split), equal to the CPU's LinearBackward. Shapes with neither, one or both products split (the
// last two as pairSplit splits them, in fewer slices than splitK would); dW and
// db are views of one flat gradient tensor, as in the model; with IC 64 the bias gradient's
// row of ones is a tile row of its own.
func TestLinearBackwardPair(t *testing.T) {
	e := newEnv(t, 19)
	// IC, OC, N and the dispatches: the pair's, and a reduce where either splits K.
	for _, s := range [][4]int{{37, 53, 29, 1}, {37, 53, 700, 2}, {29, 400, 53, 2}, {96, 288, 1024, 2}, {64, 96, 700, 2}, {96, 400, 700, 2}, {130, 96, 700, 2}, {128, 96, 700, 2}} {
		IC, OC, N := s[0], s[1], s[2]
		name := fmt.Sprintf("%dx%d over %d rows", IC, OC, N)
		dbOff := (IC*OC + 63) / 64 * 64
		grads := e.in(e.randn(dbOff+OC, 1))
		w, in, dout, f := e.in(e.randn(IC*OC, 0.3)), e.in(e.randn(N*IC, 1)), e.in(e.randn(N*OC, 1)), e.in(e.randn(N*IC, 1))
		dw, db := e.slice(grads, 0, IC*OC), e.slice(grads, dbOff, OC)
		din := e.out(N * IC)
		for _, mul := range []bool{false, true} {
			e.both(func(be backend.Backend, pick func(pair) backend.Tensor) {
				var dgelu backend.Tensor
				if mul {
					dgelu = pick(f)
				}
				be.LinearBackward(pick(din), pick(dw), pick(db), pick(dout), pick(in), pick(w), dgelu, N, IC, OC, false)
			})
			e.check(fmt.Sprintf("%s mul=%v input gradient", name, mul), din, 1e-5*math.Sqrt(float64(OC)))
			e.check(fmt.Sprintf("%s mul=%v weight and bias gradients", name, mul), grads, 1e-5*math.Sqrt(float64(N)))
		}

		// One product dispatch for both, and one reduce if either splits K.
		e.g.settleAll()
		d0 := e.g.dev.Stats().Dispatches
		e.g.LinearBackward(din.g, dw.g, db.g, dout.g, in.g, w.g, f.g, N, IC, OC, false)
		e.g.settleAll()
		if n := e.g.dev.Stats().Dispatches - d0; n != s[3] {
			t.Errorf("%s: %d dispatches for the pair, want %d", name, n, s[3])
		}
	}
}

// pairSplit gives the products of a pair longer slices than splitK only where both split K and
// their tiles are too few to fill the GPU.
func TestPairSplit(t *testing.T) {
	bwd := func(N, IC, OC int) (*matmulCall, *matmulCall) { // a linear layer's input and weight gradients
		return &matmulCall{M: N, N: IC, K: OC, l: backend.NT},
			&matmulCall{M: IC, N: OC, K: N, l: backend.TN, accumulate: true, dbias: &tensor{}}
	}
	for _, c := range []struct {
		name         string
		N, IC, OC    int
		want1, want2 int
	}{
		{"large's MLP", 1536, 768, 192, 0, 0},          // input gradient's K 192: not split
		{"large's MLP input", 1536, 192, 768, 3, 5},    // splitK: 6 and 11
		{"large's qkv", 1536, 192, 576, 2, 5},          // splitK: 4 and 12
		{"massive's MLP input", 1024, 384, 1536, 0, 0}, // 264 tiles
		{"small pair", 700, 96, 400, 2, 3},             // splitK: 3 and 5
	} {
		m1, m2 := bwd(c.N, c.IC, c.OC)
		if s1, s2 := pairSplit(m1, m2); s1 != c.want1 || s2 != c.want2 {
			t.Errorf("%s: slices %d and %d, want %d and %d", c.name, s1, s2, c.want1, c.want2)
		}
	}
}

// A layer's backward pass as the model records it: the MLP's two linear layers (the second's
// input gradient through the LayerNorm's backward pass), every weight gradient and the input
// gradient of the first split. The reduces are held back and run together where the LayerNorm
// reads the input gradient: four dispatches, not six, and the CPU's results. Then what must
// come after a held reduce does: a copy of its weight gradient, an upload over it, a second
// gradient added into it, more reduces held than one dispatch takes.
func TestHeldReduces(t *testing.T) {
	e := newEnv(t, 31)
	const N, C, F = 700, 48, 400
	flat := (C*F+63)/64*64*2 + 2*F
	grads := e.in(e.randn(flat, 1))
	view := func(off, n int) pair { return e.slice(grads, off, n) }
	woff := (C*F + 63) / 64 * 64
	fcW, prW := view(0, C*F), view(woff, C*F)
	fcB, prB := view(2*woff, F), view(2*woff+(F+63)/64*64, C)
	w1, w2 := e.in(e.randn(C*F, 0.3)), e.in(e.randn(F*C, 0.3))
	x, g, b := e.in(e.randn(N*C, 2)), e.in(e.randn(C, 1)), e.in(e.randn(C, 1))
	ln, mean, rstd := e.out(N*C), e.out(N), e.out(N)
	act, dgelu, dout := e.in(e.randn(N*F, 1)), e.in(e.randn(N*F, 1)), e.in(e.randn(N*C, 1))
	dfch, dln, dres := e.out(N*F), e.out(N*C), e.in(e.randn(N*C, 1))
	dg, db := e.in(e.randn(C, 1)), e.in(e.randn(C, 1))
	e.both(func(be backend.Backend, pick func(pair) backend.Tensor) {
		be.LayerNorm(pick(ln), pick(mean), pick(rstd), pick(x), pick(g), pick(b), N, C)
	})
	for pass := range 2 { // the second counted: the first allocates scratch tensors
		e.g.settleAll()
		d0 := e.g.dev.Stats().Dispatches
		e.both(func(be backend.Backend, pick func(pair) backend.Tensor) {
			be.LinearBackward(pick(dfch), pick(prW), pick(prB), pick(dout), pick(act), pick(w2), pick(dgelu), N, F, C, false)
			be.LinearLayerNormBackward(pick(dln), pick(fcW), pick(fcB), pick(dfch), pick(ln), pick(w1),
				pick(dres), pick(dg), pick(db), pick(x), pick(g), pick(mean), pick(rstd), N, C, F)
		})
		if n := e.g.dev.Stats().Dispatches - d0; pass == 1 && n != 4 {
			t.Errorf("the MLP's backward pass: %d dispatches, want 4 (two products, one reduce, the LayerNorm's)", n)
		}
	}
	e.check("dfch", dfch, 1e-5*math.Sqrt(float64(C)))
	e.check("dln", dln, 1e-5*math.Sqrt(float64(F)))
	e.check("grads", grads, 1e-5*math.Sqrt(float64(N)))
	e.check("dres", dres, 1e-4*math.Sqrt(float64(F)))

	// A kernel that reads a held reduce's C, and an upload over another's, come after them.
	cp := e.out(C * F)
	e.both(func(be backend.Backend, pick func(pair) backend.Tensor) {
		be.LinearBackward(pick(dfch), pick(prW), pick(prB), pick(dout), pick(act), pick(w2), nil, N, F, C, false)
		be.Copy(pick(cp), pick(prW), C*F)
	})
	e.check("a copy of a held weight gradient", cp, 1e-5*math.Sqrt(float64(N)))
	up := e.randn(C*F, 1)
	e.both(func(be backend.Backend, pick func(pair) backend.Tensor) {
		be.LinearBackward(pick(dfch), pick(prW), pick(prB), pick(dout), pick(act), pick(w2), nil, N, F, C, false)
		be.Upload(pick(prW), up)
	})
	e.check("an upload over a held weight gradient", grads, 1e-5*math.Sqrt(float64(N)))
	// Two gradients added into one: the second's reduce waits for the first's.
	e.both(func(be backend.Backend, pick func(pair) backend.Tensor) {
		for range 2 {
			be.LinearBackward(pick(dfch), pick(prW), pick(prB), pick(dout), pick(act), pick(w2), nil, N, F, C, false)
		}
	})
	e.check("two gradients added into one", grads, 2e-5*math.Sqrt(float64(N)))
	// More weight gradients than one reduce dispatch takes, each into a tensor of its own.
	ws := make([]pair, maxHeld+2)
	for i := range ws {
		ws[i] = e.in(e.randn(C*F, 1))
	}
	e.both(func(be backend.Backend, pick func(pair) backend.Tensor) {
		for _, w := range ws {
			be.MatMul(pick(w), pick(ln), pick(dfch), C, F, N, backend.TN, true)
		}
	})
	for i, w := range ws {
		e.check(fmt.Sprintf("weight gradient %d of %d", i+1, len(ws)), w, 1e-5*math.Sqrt(float64(N)))
	}
}

// When held reduces must run, and what they must equal: matmul.wgsl's reduce bit for bit;
// two weight gradients into one C (no bias) in turn; more than one dispatch takes, in views of
// one tensor; a scratch too small for the next (it runs them, then grows); a pair whose second
// product writes a held reduce's C; a released C; after an error, without a panic.
func TestHeldReducesFlush(t *testing.T) {
	e := newEnv(t, 37)
	const C, F, N = 48, 400, 700
	x, d := e.in(e.randn(N*C, 1)), e.in(e.randn(N*F, 1))
	count := func(op func()) int {
		e.g.settleAll()
		d0 := e.g.dev.Stats().Dispatches
		op()
		e.g.settleAll()
		return e.g.dev.Stats().Dispatches - d0
	}
	tn := func(w pair) func(be backend.Backend, pick func(pair) backend.Tensor) {
		return func(be backend.Backend, pick func(pair) backend.Tensor) {
			be.MatMul(pick(w), pick(x), pick(d), C, F, N, backend.TN, true)
		}
	}

	// A product with a bias reduces at once (reduce); without, it is held (multi): the same sums.
	a, b, bias := e.in(e.randn(256*N, 1)), e.in(e.randn(N*C, 1)), e.in(e.randn(C, 1))
	y1, y2 := e.out(256*C), e.out(256*C)
	e.g.MatMul(y1.g, a.g, b.g, 256, C, N, backend.NN, false)
	e.g.AddBias(y1.g, bias.g, 256, C)
	e.g.MatMul(y2.g, a.g, b.g, 256, C, N, backend.NN, false)
	e.g.settleAll()
	e.g.AddBias(y2.g, bias.g, 256, C)
	v1, v2 := make([]float32, 256*C), make([]float32, 256*C)
	e.g.Download(v1, y1.g, 0)
	e.g.Download(v2, y2.g, 0)
	for i := range v1 {
		if math.Float32bits(v1[i]) != math.Float32bits(v2[i]) {
			t.Fatalf("held reduce: element %d is %v, reduce's %v", i, v2[i], v1[i])
		}
	}

	// Two into one: the second waits for the first's reduce.
	w := e.in(e.randn(C*F, 1))
	if n := count(func() { e.both(tn(w)); e.both(tn(w)) }); n != 4 {
		t.Errorf("two weight gradients into one: %d dispatches, want 4 (product, reduce, product, reduce)", n)
	}
	e.check("two weight gradients into one", w, 2e-5*math.Sqrt(N))

	// maxHeld+2 into views of one tensor: a reduce dispatch when the held are maxHeld, one at the end.
	woff := (C*F + 63) / 64 * 64
	flat := e.in(e.randn(woff*(maxHeld+2), 1))
	views := make([]pair, maxHeld+2)
	for i := range views {
		views[i] = e.slice(flat, i*woff, C*F)
	}
	if n := count(func() {
		for _, v := range views {
			e.both(tn(v))
		}
	}); n != len(views)+2 {
		t.Errorf("%d weight gradients: %d dispatches, want %d", len(views), n, len(views)+2)
	}
	e.check("weight gradients in one tensor", flat, 1e-5*math.Sqrt(N))

	// A scratch with room for one product's partial sums: each next product runs the held
	// first, and the scratch grows to what waited together. Three rounds of the same three
	// products: the third finds room for all of them.
	defer func(n int) { heldMinScratch = n }(heldMinScratch)
	heldMinScratch = 64
	delete(e.g.scratch, heldScratch)
	two := e.in(e.randn(2*woff, 1)) // the first two Cs in one buffer: multi binds two
	ws := []pair{e.slice(two, 0, C*F), e.slice(two, woff, C*F), e.in(e.randn(2*C*F, 1))}
	d2 := e.in(e.randn(N*2*F, 1))
	three := func() {
		e.both(func(be backend.Backend, pick func(pair) backend.Tensor) {
			tn(ws[0])(be, pick)
			tn(ws[1])(be, pick)
			be.MatMul(pick(ws[2]), pick(x), pick(d2), C, 2*F, N, backend.TN, true)
		})
	}
	// Dispatches: three products, their reduce dispatches and a clear of each new scratch.
	for round, want := range []int{3 + 3 + 3, 3 + 2 + 1, 3 + 1} {
		if n := count(three); n != want {
			t.Errorf("small scratch, round %d: %d dispatches, want %d", round+1, n, want)
		}
	}
	for i, w := range ws { // three products accumulated into each: three times the one-product tolerance
		e.check(fmt.Sprintf("with a small scratch, gradient %d", i), w, 3e-5*math.Sqrt(N))
	}

	// A pair whose input gradient is split and held, and whose weight gradient (not split)
	// writes the C of a reduce held before: that one runs first, and the sums stay apart.
	dW, dW2 := e.in(e.randn(C*F, 1)), e.in(e.randn(96*F, 1))
	x2 := e.in(e.randn(N*96, 1))
	din, dout, wt, in := e.out(256*C), e.in(e.randn(256*F, 1)), e.in(e.randn(C*F, 1)), e.in(e.randn(256*C, 1))
	e.both(func(be backend.Backend, pick func(pair) backend.Tensor) {
		be.MatMul(pick(dW), pick(x), pick(d), C, F, N, backend.TN, true)
		be.MatMul(pick(din), pick(dout), pick(wt), 256, C, F, backend.NT, false)
		be.MatMul(pick(dW), pick(in), pick(dout), C, F, 256, backend.TN, true)
		be.MatMul(pick(dW2), pick(x2), pick(d), 96, F, N, backend.TN, true)
	})
	e.check("pair: din", din, 1e-5*math.Sqrt(F))
	e.check("pair: dW", dW, 1e-5*math.Sqrt(N+256))
	e.check("pair: dW2", dW2, 1e-5*math.Sqrt(N))

	// Releasing a held reduce's C runs it first: no error.
	r := e.g.Alloc(C * F)
	e.g.MatMul(r, x.g, d.g, C, F, N, backend.TN, true)
	e.g.Release(r)
	e.g.settleAll()
	if err := e.g.Err(); err != nil {
		t.Fatalf("a held reduce's C released: %v", err)
	}

	// After an error, or into a released C, a split product fails cleanly.
	for _, c := range []string{"after an error", "released C"} {
		be, err := New()
		if err != nil {
			t.Fatal(err)
		}
		dW, x, d := be.Alloc(C*F), be.Alloc(N*C), be.Alloc(N*F)
		if c == "released C" {
			be.Release(dW)
		} else {
			be.fail(errors.New("out of memory, as if"))
		}
		be.MatMul(dW, x, d, C, F, N, backend.TN, true)
		be.Download(make([]float32, 4), x, 0)
		if be.Err() == nil {
			t.Errorf("%s: no error", c)
		}
		be.Close()
	}
}

// A linear layer's backward pass followed by the backward pass of the LayerNorm that produced
// its input, as the model calls it, equal to the CPU's (which runs the LayerNorm on the input
// gradient's tiles): rows that are whole blocks and rows that are not, one split product.
func TestLinearLayerNormBackward(t *testing.T) {
	e := newEnv(t, 29)
	for _, s := range [][3]int{{29, 37, 53}, {48, 96, 300}, {100, 48, 700}} {
		N, IC, OC := s[0], s[1], s[2]
		name := fmt.Sprintf("%dx%dx%d", N, IC, OC)
		x, g, b := e.in(e.randn(N*IC, 2)), e.in(e.randn(IC, 1)), e.in(e.randn(IC, 1))
		in, mean, rstd := e.out(N*IC), e.out(N), e.out(N)
		e.both(func(be backend.Backend, pick func(pair) backend.Tensor) {
			be.LayerNorm(pick(in), pick(mean), pick(rstd), pick(x), pick(g), pick(b), N, IC)
		})
		w, dout := e.in(e.randn(IC*OC, 0.3)), e.in(e.randn(N*OC, 1))
		din, dw, dbias := e.out(N*IC), e.in(e.randn(IC*OC, 1)), e.in(e.randn(OC, 1))
		dx, dg, db := e.in(e.randn(N*IC, 1)), e.in(e.randn(IC, 1)), e.in(e.randn(IC, 1))
		e.both(func(be backend.Backend, pick func(pair) backend.Tensor) {
			be.LinearLayerNormBackward(pick(din), pick(dw), pick(dbias), pick(dout), pick(in), pick(w),
				pick(dx), pick(dg), pick(db), pick(x), pick(g), pick(mean), pick(rstd), N, IC, OC)
		})
		e.check(name+" din", din, 1e-5*math.Sqrt(float64(OC)))
		e.check(name+" dw", dw, 1e-5*math.Sqrt(float64(N)))
		e.check(name+" dbias", dbias, 1e-5*math.Sqrt(float64(N)))
		e.check(name+" dx", dx, 1e-4*math.Sqrt(float64(OC)))
		e.check(name+" dg", dg, 1e-5*math.Sqrt(float64(N*OC)))
		e.check(name+" db", db, 1e-5*math.Sqrt(float64(N*OC)))
	}
}

// The backward pass of the attention's output projection followed by the attention's
// (LinearAttentionBackward) equals the CPU's fused kernel: head sizes 16, 32 (in one tile
// column of the products, and in two with a part tile row), 64, and 20; with C 512 the input
// gradient's product splits K.
func TestLinearAttentionBackward(t *testing.T) {
	e := newEnv(t, 37)
	for _, s := range [][4]int{{2, 37, 48, 3}, {1, 20, 64, 2}, {2, 70, 128, 4}, {1, 40, 128, 2}, {1, 33, 40, 2}, {1, 64, 512, 8}} {
		B, T, C, NH := s[0], s[1], s[2], s[3]
		N := B * T
		qkv := e.in(e.randn(N*3*C, 1))
		out, lse := e.out(N*C), e.out(B*NH*T)
		e.both(func(be backend.Backend, pick func(pair) backend.Tensor) {
			be.Attention(pick(out), pick(lse), pick(qkv), B, T, C, NH)
		})
		w, dout := e.in(e.randn(C*C, 0.3)), e.in(e.randn(N*C, 1))
		dqkv, dw, dbias := e.out(N*3*C), e.in(e.randn(C*C, 1)), e.in(e.randn(C, 1))
		e.both(func(be backend.Backend, pick func(pair) backend.Tensor) {
			be.LinearAttentionBackward(pick(dqkv), pick(dw), pick(dbias), pick(dout), pick(out), pick(w), pick(qkv), pick(lse), B, T, C, NH)
		})
		name := fmt.Sprintf("LinearAttentionBackward %v", s)
		e.check(name+" dqkv", dqkv, 1e-4)
		e.check(name+" dw", dw, 1e-5*math.Sqrt(float64(N)))
		e.check(name+" dbias", dbias, 1e-5*math.Sqrt(float64(N)))
	}
}

// LinearAddLayerNorm (Linear, Dropout and AddLayerNorm), MLPAddLayerNorm (Linear with GELU,
// then LinearAddLayerNorm) and QKVAttention (Linear and Attention) equal the CPU's fused
// kernels, with and without dropout.
func TestFusedForwardKernels(t *testing.T) {
	e := newEnv(t, 31)
	for _, s := range [][3]int{{29, 37, 53}, {48, 400, 96}} {
		N, IC, OC := s[0], s[1], s[2]
		in, w, bias := e.in(e.randn(N*IC, 1)), e.in(e.randn(IC*OC, 0.3)), e.in(e.randn(OC, 1))
		x, g, b := e.in(e.randn(N*OC, 2)), e.in(e.randn(OC, 1)), e.in(e.randn(OC, 1))
		seeds := e.seeds(7, 99)
		for _, p := range []float32{0, 0.25} {
			sum, out, mean, rstd := e.out(N*OC), e.out(N*OC), e.out(N), e.out(N)
			e.both(func(be backend.Backend, pick func(pair) backend.Tensor) {
				be.LinearAddLayerNorm(pick(sum), pick(out), pick(mean), pick(rstd), pick(in), pick(w), pick(bias),
					pick(x), pick(g), pick(b), N, IC, OC, p, pick(seeds), 1)
			})
			name := fmt.Sprintf("LinearAddLayerNorm %v p %v", s, p)
			tol := 1e-5 * math.Sqrt(float64(IC))
			e.check(name+" sum", sum, tol)
			e.check(name+" out", out, 10*tol)
			e.check(name+" mean", mean, tol)
			e.check(name+" rstd", rstd, tol)
		}
	}
	for _, s := range [][3]int{{29, 37, 53}, {48, 64, 256}} {
		N, C, F := s[0], s[1], s[2]
		in, w1, b1 := e.in(e.randn(N*C, 1)), e.in(e.randn(C*F, 0.3)), e.in(e.randn(F, 1))
		w2, b2 := e.in(e.randn(F*C, 0.2)), e.in(e.randn(C, 1))
		x, g, b := e.in(e.randn(N*C, 2)), e.in(e.randn(C, 1)), e.in(e.randn(C, 1))
		sum, out, mean, rstd, grad, act := e.out(N*C), e.out(N*C), e.out(N), e.out(N), e.out(N*F), e.out(N*F)
		seeds := e.seeds(98)
		e.both(func(be backend.Backend, pick func(pair) backend.Tensor) {
			be.MLPAddLayerNorm(pick(sum), pick(out), pick(mean), pick(rstd), pick(grad), pick(act), pick(in), pick(w1), pick(b1),
				pick(w2), pick(b2), pick(x), pick(g), pick(b), N, C, F, 0.25, pick(seeds), 0)
		})
		name := fmt.Sprintf("MLPAddLayerNorm %v", s)
		tol := 1e-5 * math.Sqrt(float64(F))
		e.check(name+" GELU'", grad, 1e-5*math.Sqrt(float64(C)))
		e.check(name+" GELU", act, 1e-5*math.Sqrt(float64(C)))
		e.check(name+" sum", sum, tol)
		e.check(name+" out", out, 10*tol)
		e.check(name+" mean", mean, tol)
		e.check(name+" rstd", rstd, tol)
	}
	for _, s := range [][4]int{{2, 37, 48, 3}, {1, 20, 64, 2}} {
		B, T, C, NH := s[0], s[1], s[2], s[3]
		N := B * T
		in, w, bias := e.in(e.randn(N*C, 1)), e.in(e.randn(C*3*C, 0.3)), e.in(e.randn(3*C, 1))
		qkv, out, lse := e.out(N*3*C), e.out(N*C), e.out(B*NH*T)
		e.both(func(be backend.Backend, pick func(pair) backend.Tensor) {
			be.QKVAttention(pick(qkv), pick(out), pick(lse), pick(in), pick(w), pick(bias), B, T, C, NH)
		})
		name := fmt.Sprintf("QKVAttention %v", s)
		e.check(name+" qkv", qkv, 1e-5*math.Sqrt(float64(C)))
		e.check(name+" out", out, 1e-4)
		e.check(name+" lse", lse, 1e-4)
	}
}

// LinearAddLayerNorm without dropout whose product splits K, with the bias, gains and shifts
// in one tensor (as the model's parameters are): the LayerNorm's kernel adds up the slices
// (forward_slices), two dispatches; with them in tensors of their own, the product is split as
// splitK decides, with a reduce between where it splits (three dispatches). All equal the
// CPU's; with the slices splitK's in both (foldSlices replaced), the two equal each other bit
// for bit.
func TestLinearSlicesLayerNorm(t *testing.T) {
	e := newEnv(t, 41)
	defer func(f func(int, int, int) int) { foldSlices = f }(foldSlices)
	// Where the bias, gains and shifts lie in one tensor: slots of SliceAlign multiples after
	// a first one they leave free, in an order of their own for each shape.
	orders := [][3]int{{1, 2, 3}, {3, 1, 2}, {2, 3, 1}, {1, 3, 2}}
	for c, s := range [][3]int{{48, 400, 96}, {29, 1000, 53}, {13, 700, 200}, {100, 192, 96}} {
		N, IC, OC := s[0], s[1], s[2]
		tiles := (N + matmulTile - 1) / matmulTile * ((OC + matmulTile - 1) / matmulTile)
		split := splitK(tiles, IC, N*OC) > 1
		in, w, x := e.in(e.randn(N*IC, 1)), e.in(e.randn(IC*OC, 0.3)), e.in(e.randn(N*OC, 2))
		at := (OC + backend.SliceAlign - 1) / backend.SliceAlign * backend.SliceAlign
		flat := e.in(e.randn(4*at, 1))
		o := orders[c]
		bias, g, b := e.slice(flat, o[0]*at, OC), e.slice(flat, o[1]*at, OC), e.slice(flat, o[2]*at, OC)
		apart := make([]pair, 3) // the same values in tensors of their own
		for i, p := range []pair{bias, g, b} {
			v := make([]float32, OC)
			e.g.Download(v, p.g, 0)
			apart[i] = e.in(v)
		}
		for _, rule := range []string{"foldSplit", "splitK"} {
			foldSlices = foldSplit
			if rule == "splitK" {
				if !split {
					continue
				}
				foldSlices = splitK
			}
			name := fmt.Sprintf("%dx%dx%d, %s", N, IC, OC, rule)
			if foldSlices(tiles, IC, N*OC) < 2 {
				t.Fatalf("%s: K is not split", name)
			}
			var res [2][4]pair
			for k, ps := range [][3]pair{{bias, g, b}, {apart[0], apart[1], apart[2]}} {
				sum, out, mean, rstd := e.out(N*OC), e.out(N*OC), e.out(N), e.out(N)
				res[k] = [4]pair{sum, out, mean, rstd}
				// A first call on the GPU alone allocates the scratch (a clear is a dispatch),
				// the slices' own where the LayerNorm adds them up.
				delete(e.g.scratch, "branch slices")
				e.g.LinearAddLayerNorm(sum.g, out.g, mean.g, rstd.g, in.g, w.g, ps[0].g, x.g, ps[1].g, ps[2].g, N, IC, OC, 0, nil, 0)
				e.g.settleAll()
				if folded := e.g.scratch["branch slices"] != nil; folded != (k == 0) {
					t.Errorf("%s, %s: slices added up by the LayerNorm: %v", name, []string{"one tensor", "apart"}[k], folded)
				}
				d0 := e.g.dev.Stats().Dispatches
				e.both(func(be backend.Backend, pick func(pair) backend.Tensor) {
					be.LinearAddLayerNorm(pick(sum), pick(out), pick(mean), pick(rstd), pick(in), pick(w), pick(ps[0]),
						pick(x), pick(ps[1]), pick(ps[2]), N, IC, OC, 0, nil, 0)
				})
				e.g.settleAll()
				want := 2
				if k == 1 && split {
					want = 3
				}
				if n := e.g.dev.Stats().Dispatches - d0; n != want {
					t.Errorf("%s, %s: %d dispatches, want %d", name, []string{"one tensor", "apart"}[k], n, want)
				}
				tol := 1e-5 * math.Sqrt(float64(IC))
				e.check(name+" sum", sum, tol)
				e.check(name+" out", out, 10*tol)
				e.check(name+" mean", mean, tol)
				e.check(name+" rstd", rstd, tol)
			}
			if rule != "splitK" {
				continue
			}
			for i, what := range []string{"sum", "out", "mean", "rstd"} {
				n := res[0][i].c.Len()
				v0, v1 := make([]float32, n), make([]float32, n)
				e.g.Download(v0, res[0][i].g, 0)
				e.g.Download(v1, res[1][i].g, 0)
				for j := range v0 {
					if math.Float32bits(v0[j]) != math.Float32bits(v1[j]) {
						t.Fatalf("%s %s: element %d is %v in one dispatch, %v after a reduce", name, what, j, v0[j], v1[j])
					}
				}
			}
		}
	}
}

// LinearAddLayerNorm takes its other path, and still equals the CPU's, for one row (gemv), for
// a residual x inside the window of bias, gains and shifts, and for out = x.
func TestLinearSlicesLayerNormFallbacks(t *testing.T) {
	e := newEnv(t, 43)
	const IC, OC = 400, 96
	for _, c := range []string{"one row", "x in the window", "out = x"} {
		N := 48
		if c == "one row" {
			N = 1
		}
		in, w := e.in(e.randn(N*IC, 1)), e.in(e.randn(IC*OC, 0.3))
		// bias | x | gains | shifts, each at a multiple of SliceAlign
		at := (N*OC + backend.SliceAlign - 1) / backend.SliceAlign * backend.SliceAlign
		flat := e.in(e.randn(4*at, 1))
		bias, g, b := e.slice(flat, 0, OC), e.slice(flat, 2*at, OC), e.slice(flat, 3*at, OC)
		x := e.in(e.randn(N*OC, 2))
		if c == "x in the window" {
			x = e.slice(flat, at, N*OC)
		}
		sum, out, mean, rstd := e.out(N*OC), e.out(N*OC), e.out(N), e.out(N)
		if c == "out = x" {
			out = x
		}
		delete(e.g.scratch, "branch slices")
		e.both(func(be backend.Backend, pick func(pair) backend.Tensor) {
			be.LinearAddLayerNorm(pick(sum), pick(out), pick(mean), pick(rstd), pick(in), pick(w), pick(bias),
				pick(x), pick(g), pick(b), N, IC, OC, 0, nil, 0)
		})
		if err := e.g.Err(); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		if e.g.scratch["branch slices"] != nil {
			t.Errorf("%s: the LayerNorm added up the slices", c)
		}
		tol := 1e-5 * math.Sqrt(float64(IC))
		e.check(c+" sum", sum, tol)
		e.check(c+" out", out, 10*tol)
		e.check(c+" mean", mean, tol)
		e.check(c+" rstd", rstd, tol)
	}
}

// A residual add followed by the layer norm of its result runs as one dispatch (forward_add),
// leaving the sum as the add would; an add in place, or one whose result is not normalised
// next, runs on its own. Both equal the CPU's kernels in turn.
func TestAddLayerNorm(t *testing.T) {
	e := newEnv(t, 23)
	for _, s := range [][2]int{{1, 1}, {37, 53}, {13, 200}} {
		N, C := s[0], s[1]
		n := N * C
		name := fmt.Sprintf("%dx%d", N, C)
		x, y, g, b := e.in(e.randn(n, 1)), e.in(e.randn(n, 1)), e.in(e.randn(C, 1)), e.in(e.randn(C, 1))
		sum, out, mean, rstd := e.out(n), e.out(n), e.out(N), e.out(N)
		for _, inPlace := range []bool{false, true} {
			for _, p := range []struct {
				be                               backend.Backend
				sum, x, y, out, mean, rstd, g, b backend.Tensor
			}{{e.g, sum.g, x.g, y.g, out.g, mean.g, rstd.g, g.g, b.g}, {cpuBE, sum.c, x.c, y.c, out.c, mean.c, rstd.c, g.c, b.c}} {
				if inPlace {
					p.be.Add(p.x, p.x, p.y, n)
					p.be.LayerNorm(p.out, p.mean, p.rstd, p.x, p.g, p.b, N, C)
				} else {
					p.be.Add(p.sum, p.x, p.y, n)
					p.be.LayerNorm(p.out, p.mean, p.rstd, p.sum, p.g, p.b, N, C)
				}
			}
			what := fmt.Sprintf("%s in place %v", name, inPlace)
			e.check(what+" sum", sum, 1e-6)
			e.check(what+" x", x, 1e-6)
			e.check(what+" out", out, 1e-5)
			e.check(what+" mean", mean, 1e-5)
			e.check(what+" rstd", rstd, 1e-5)
		}
		e.g.settleAll()
		d0 := e.g.dev.Stats().Dispatches
		e.g.Add(sum.g, x.g, y.g, n)
		e.g.LayerNorm(out.g, mean.g, rstd.g, sum.g, g.g, b.g, N, C)
		e.g.settleAll()
		if d := e.g.dev.Stats().Dispatches - d0; d != 1 {
			t.Errorf("%s: %d dispatches for the add and the layer norm, want 1", name, d)
		}
	}
}

// Copy takes views that start anywhere (the decoder's cache rows), also two in one buffer
// whose bindings, widened to the aligned offsets below them, overlap.
func TestCopyUnalignedViews(t *testing.T) {
	g := openGPU(t)
	x := g.Alloc(256).(*tensor)
	defer g.Release(x)
	v := make([]float32, 256)
	for i := range v {
		v[i] = float32(i)
	}
	for _, c := range [][3]int{{100, 70, 10}, {70, 100, 10}, {130, 3, 50}, {192, 64, 60}} {
		dst, src, n := c[0], c[1], c[2]
		g.Upload(x, v)
		g.Copy(x.view(dst, n), x.view(src, n), n)
		got := make([]float32, 256)
		g.Download(got, x, 0)
		if err := g.Err(); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			want := v[i]
			if i >= dst && i < dst+n {
				want = v[src+i-dst]
			}
			if got[i] != want {
				t.Fatalf("copy of [%d, %d) to %d: element %d is %v, want %v", src, src+n, dst, i, got[i], want)
			}
		}
	}
}
