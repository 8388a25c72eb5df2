package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"tinygpt/backend"
)

// These tests check every kernel against a plain float64 reference written here, and every
// backward kernel against central finite differences of that float64 reference: the gradient
// of the scalar L = Σ r_i·out_i for random weights r. Finite differences in float64 are accurate
// to about 1e-9, so the comparison measures the float32 kernels' own error, which is well
// under the 1e-4 (relative to the largest gradient) the tests allow.

func randVec(rng *rand.Rand, n int, scale float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = rng.NormFloat64() * scale
	}
	return v
}

func to32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// round64 returns v rounded to float32 and back, so references see the kernels' exact inputs.
func round64(v []float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(float32(x))
	}
	return out
}

func upload(be *Backend, v []float64) backend.Tensor {
	t := be.Alloc(len(v))
	be.Upload(t, to32(v))
	return t
}

func download(be *Backend, t backend.Tensor) []float64 {
	out := make([]float32, t.Len())
	be.Download(out, t, 0)
	v := make([]float64, len(out))
	for i, x := range out {
		v[i] = float64(x)
	}
	return v
}

// assertClose fails unless max|got−want| ≤ tol·max(1, max|want|).
// assertSameBits fails t unless got and want hold the same bits, element by element (−0
// differs from +0), naming the first element that differs.
func assertSameBits[F float32 | float64](t *testing.T, what string, got, want []F) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Float64bits(float64(got[i])) != math.Float64bits(float64(want[i])) {
			t.Fatalf("%s: element %d = %v, want %v", what, i, got[i], want[i])
		}
	}
}

// assertFusedMatches requires a fused kernel to give the bits of the separate calls it stands
// for: run(workers, true) runs the fused kernel on that many workers, run(1, false) the separate
// calls (named by against) on one, each returning its outputs in the order of names.
func assertFusedMatches(t *testing.T, what, against string, names []string, run func(workers int, fused bool) [][]float32) {
	t.Helper()
	want := run(1, false)
	for _, workers := range []int{1, 3, 16} {
		got := run(workers, true)
		for i, name := range names {
			assertSameBits(t, fmt.Sprintf("%s, %d workers: %s against %s", what, workers, name, against), got[i], want[i])
		}
	}
}

func assertClose(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	var scale, worst float64 = 1, 0
	worstAt := -1
	for i := range want {
		scale = math.Max(scale, math.Abs(want[i]))
	}
	for i := range want {
		d := math.Abs(got[i] - want[i])
		if math.IsNaN(got[i]) || d > worst {
			worst, worstAt = d, i
			if math.IsNaN(got[i]) {
				worst = math.Inf(1)
			}
		}
	}
	if worst > tol*scale {
		t.Errorf("%s: max error %.3g at %d (got %.6g, want %.6g), tolerance %.3g", what, worst, worstAt, got[worstAt], want[worstAt], tol*scale)
	}
}

// numGrad returns dL/dx by central differences, where L = Σ r·f(x).
func numGrad(x []float64, r []float64, f func([]float64) []float64) []float64 {
	const h = 1e-6
	g := make([]float64, len(x))
	for i := range x {
		old := x[i]
		x[i] = old + h
		lp := dot64(r, f(x))
		x[i] = old - h
		lm := dot64(r, f(x))
		x[i] = old
		g[i] = (lp - lm) / (2 * h)
	}
	return g
}

func dot64(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// backends returns the backend with each available micro-kernel, so that every test runs on
// every assembly kernel and the portable one.
func backends() []*Backend {
	var out []*Backend
	for _, k := range kernels() {
		be := New()
		be.kern = k
		for w := range be.scratch {
			be.scratch[w] = newMMScratch(k)
		}
		out = append(out, be)
	}
	return out
}

// ---------------------------------------------------------------- references

func matmul64(a, b []float64, M, N, K int, l backend.Layout) []float64 {
	c := make([]float64, M*N)
	for i := 0; i < M; i++ {
		for j := 0; j < N; j++ {
			var s float64
			for k := 0; k < K; k++ {
				var av, bv float64
				if l == backend.TN {
					av = a[k*M+i]
				} else {
					av = a[i*K+k]
				}
				if l == backend.NT {
					bv = b[j*K+k]
				} else {
					bv = b[k*N+j]
				}
				s += av * bv
			}
			c[i*N+j] = s
		}
	}
	return c
}

func layerNorm64(x, g, b []float64, N, C int) []float64 {
	out := make([]float64, N*C)
	for r := 0; r < N; r++ {
		row := x[r*C : r*C+C]
		var m, v float64
		for _, e := range row {
			m += e
		}
		m /= float64(C)
		for _, e := range row {
			v += (e - m) * (e - m)
		}
		s := 1 / math.Sqrt(v/float64(C)+1e-5)
		for i, e := range row {
			out[r*C+i] = (e-m)*s*g[i] + b[i]
		}
	}
	return out
}

func gelu64(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) }

func attention64(q, k, v []float64, B, T, C, NH int) []float64 {
	hs := C / NH
	out := make([]float64, B*T*C)
	scale := 1 / math.Sqrt(float64(hs))
	for b := 0; b < B; b++ {
		for h := 0; h < NH; h++ {
			for i := 0; i < T; i++ {
				s := make([]float64, i+1)
				mx := math.Inf(-1)
				for j := 0; j <= i; j++ {
					var d float64
					for e := 0; e < hs; e++ {
						d += q[(b*T+i)*C+h*hs+e] * k[(b*T+j)*C+h*hs+e]
					}
					s[j] = d * scale
					mx = math.Max(mx, s[j])
				}
				var sum float64
				for j := range s {
					s[j] = math.Exp(s[j] - mx)
					sum += s[j]
				}
				for j := range s {
					for e := 0; e < hs; e++ {
						out[(b*T+i)*C+h*hs+e] += s[j] / sum * v[(b*T+j)*C+h*hs+e]
					}
				}
			}
		}
	}
	return out
}

// joinQKV returns q, k and v [N, C] as the column blocks of one [N, 3C] matrix, the
// attention's input.
func joinQKV(q, k, v []float64, N, C int) []float64 {
	x := make([]float64, 0, 3*N*C)
	for r := range N {
		for _, m := range [][]float64{q, k, v} {
			x = append(x, m[r*C:(r+1)*C]...)
		}
	}
	return x
}

// block returns column block p of x [N, 3C] as [N, C].
func block(x []float64, N, C, p int) []float64 {
	out := make([]float64, 0, N*C)
	for r := range N {
		out = append(out, x[(3*r+p)*C:(3*r+p+1)*C]...)
	}
	return out
}

func crossEntropy64(logits []float64, targets []int32, N, V int) []float64 {
	out := make([]float64, N)
	for r := 0; r < N; r++ {
		x := logits[r*V : r*V+V]
		mx := math.Inf(-1)
		for _, e := range x {
			mx = math.Max(mx, e)
		}
		var s float64
		for _, e := range x {
			s += math.Exp(e - mx)
		}
		out[r] = mx + math.Log(s) - x[targets[r]]
	}
	return out
}

// ---------------------------------------------------------------- tests

func TestMatMulLayouts(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	shapes := [][3]int{{1, 1, 1}, {1, 256, 96}, {1, 70, 300}, {1, 517, 300}, {7, 5, 3}, {13, 17, 300}, {64, 96, 96}, {97, 130, 257}, {200, 33, 1}, {60, 48, 40}, {260, 288, 40}, {1000, 50, 300}, {5, 20, 600}}
	for _, be := range backends() {
		for _, s := range shapes {
			M, N, K := s[0], s[1], s[2]
			for _, l := range []backend.Layout{backend.NN, backend.NT, backend.TN} {
				for _, acc := range []bool{false, true} {
					name := fmt.Sprintf("%s/%dx%dx%d/%s/acc=%v", be.kern.name, M, N, K, l, acc)
					a := round64(randVec(rng, M*K, 1))
					b := round64(randVec(rng, K*N, 1))
					c0 := round64(randVec(rng, M*N, 1))
					want := matmul64(a, b, M, N, K, l)
					if acc {
						for i := range want {
							want[i] += c0[i]
						}
					}
					ct := upload(be, c0)
					if !acc {
						be.Upload(ct, to32(randVec(rng, M*N, 1e6))) // garbage must be overwritten
					}
					be.MatMul(ct, upload(be, a), upload(be, b), M, N, K, l, acc)
					// float32 sums of K products of unit normals: error ~ K·2^-24·sqrt(K).
					assertClose(t, name, download(be, ct), want, 1e-5*math.Sqrt(float64(K)+1))
				}
			}
		}
	}
}

func TestMatMulDeterministicAcrossThreads(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	// One worker computes all but the second and the third as one tile, k blocks outermost
	// (the fourth, fifth and sixth with A packed, see gemm), and packs the B of the first, the
	// fourth, the fifth and the last two a k block at a time (matmulByBlocks); more workers
	// cut them into tiles or split K.
	for _, s := range []product{{130, 97, 600, backend.TN}, {1, 97, 600, backend.NN}, {400, 300, 200, backend.NT}, {200, 300, 600, backend.TN},
		{268, 50, 600, backend.TN}, {1000, 64, 300, backend.TN}, {300, 100, 600, backend.NT}, {100, 300, 700, backend.NN}} {
		matMulDeterministic(t, rng, s.M, s.N, s.K, s.l)
	}
}

// matMulDeterministic requires one product to give the same bits on 1, 2, 3, 7 and 16 workers
// (which cut it into tiles of different sizes).
func matMulDeterministic(t *testing.T, rng *rand.Rand, M, N, K int, l backend.Layout) {
	a, b := randVec(rng, M*K, 1), randVec(rng, K*N, 1)
	var ref []float64
	for _, workers := range []int{1, 2, 3, 7, 16} {
		be := newTestBackend(workers, bestKernel())
		c := be.Alloc(M * N)
		be.MatMul(c, upload(be, a), upload(be, b), M, N, K, l, false)
		got := download(be, c)
		if ref == nil {
			ref = got
			continue
		}
		assertSameBits(t, fmt.Sprintf("%dx%dx%d %s, %d workers against 1", M, N, K, l, workers), got, ref)
	}
}

// newTestBackend returns a CPU backend with the given number of workers and micro-kernel.
func newTestBackend(workers int, kern microKernel) *Backend {
	be := New()
	be.pool = newPool(workers)
	be.kern = kern
	be.scratch = make([]mmScratch, workers)
	for w := range be.scratch {
		be.scratch[w] = newMMScratch(kern)
	}
	return be
}

// productBits computes c0 (+)= op(a)·op(b) (+ bias, unless nil) of shape s on be and returns
// the result.
func productBits(be *Backend, s product, a, b, c0, bias []float64, acc bool) []float32 {
	c := upload(be, c0)
	if bias != nil {
		be.matmul(f32(c), f32(upload(be, a)), f32(upload(be, b)), epilogue{bias: f32(upload(be, bias))}, s.M, s.N, s.K, s.l, acc)
	} else {
		be.MatMul(c, upload(be, a), upload(be, b), s.M, s.N, s.K, s.l, acc)
	}
	return f32(c)
}

// TestPackedAMatchesInPlace requires the products whose transposed A gemm packs to give the
// same bits as with A read in place: whole panels, a last panel of 4 or 8 rows (the 4-row
// kernel) or of other heights (zero-padded), partial columns, several k blocks and row
// blocks, accumulation and bias, on one worker (one tile) and on three.
func TestPackedAMatchesInPlace(t *testing.T) {
	if bestKernel().packT == nil {
		t.Skip("the kernel packs no A")
	}
	rng := rand.New(rand.NewPCG(9, 10))
	for _, s := range []product{{192, 64, 300, backend.TN}, {256, 64, 300, backend.TN}, {261, 50, 600, backend.TN}, {268, 48, 257, backend.TN}, {1000, 96, 520, backend.TN}, {300, 200, 1, backend.TN}} {
		for _, workers := range []int{1, 3} {
			for _, acc := range []bool{false, true} { // with the bias when accumulating
				a, b := randVec(rng, s.M*s.K, 1), randVec(rng, s.K*s.N, 1)
				c0, bias := randVec(rng, s.M*s.N, 1), randVec(rng, s.N, 1)
				if !acc {
					bias = nil
				}
				inPlace := bestKernel()
				inPlace.packT = nil
				got := [2][]float32{
					productBits(newTestBackend(workers, bestKernel()), s, a, b, c0, bias, acc),
					productBits(newTestBackend(workers, inPlace), s, a, b, c0, bias, acc),
				}
				assertSameBits(t, fmt.Sprintf("%v, %d workers, accumulate %v: packed against in place", s, workers, acc), got[0], got[1])
			}
		}
	}
}

func TestEncoder(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	be := New()
	B, T, C, V := 2, 5, 70, 11
	tok := []int32{3, 3, 0, 10, 3, 1, 2, 3, 3, 9}
	wte, wpe := round64(randVec(rng, V*C, 1)), round64(randVec(rng, (T+2)*C, 1))
	fwd := func(pos0 int) func(wte, wpe []float64) []float64 {
		return func(wte, wpe []float64) []float64 {
			out := make([]float64, B*T*C)
			for r := 0; r < B*T; r++ {
				for i := 0; i < C; i++ {
					out[r*C+i] = wte[int(tok[r])*C+i] + wpe[(pos0+r%T)*C+i]
				}
			}
			return out
		}
	}
	tt := be.AllocInt(B * T)
	be.UploadInt(tt, tok)
	for _, pos0 := range []int{0, 2} {
		out := be.Alloc(B * T * C)
		be.Encoder(out, tt, upload(be, wte), upload(be, wpe), B, T, pos0, C)
		assertClose(t, "encoder", download(be, out), fwd(pos0)(wte, wpe), 1e-6)
	}
	r := randVec(rng, B*T*C, 1)
	f := fwd(0)
	gte, gpe := numGrad(wte, r, func(x []float64) []float64 { return f(x, wpe) }), numGrad(wpe, r, func(x []float64) []float64 { return f(wte, x) })
	// The gradients are added to what dwte and dwpe hold, with the same bits on any number of
	// workers.
	dwte0, dwpe0 := randVec(rng, V*C, 1), randVec(rng, (T+2)*C, 1)
	var ref []float64
	for _, workers := range []int{1, 2, 7} {
		be.pool = newPool(workers)
		dwte, dwpe := upload(be, dwte0), upload(be, dwpe0)
		be.EncoderBackward(dwte, dwpe, upload(be, r), tt, B, T, C)
		gotTE, gotPE := download(be, dwte), download(be, dwpe)
		for i := range gotTE {
			gotTE[i] -= dwte0[i]
		}
		for i := range gotPE {
			gotPE[i] -= dwpe0[i]
		}
		assertClose(t, "dwte", gotTE, gte, 1e-5)
		assertClose(t, "dwpe", gotPE, gpe, 1e-5)
		got := append(download(be, dwte), download(be, dwpe)...)
		if ref == nil {
			ref = got
			continue
		}
		assertSameBits(t, fmt.Sprintf("dwte, dwpe on %d workers against 1", workers), got, ref)
	}
}

func TestLayerNorm(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	be := New()
	// C = 70 runs the scalar rows, C = 96 the vector ones; 40 rows span two row blocks.
	for _, s := range [][2]int{{9, 70}, {40, 96}} {
		N, C := s[0], s[1]
		name := fmt.Sprintf("%dx%d", N, C)
		x := round64(randVec(rng, N*C, 2))
		for i := range x[:C] {
			x[i] += 5 // a row with a large mean
		}
		g, b := round64(randVec(rng, C, 1)), round64(randVec(rng, C, 1))
		out, mean, rstd := be.Alloc(N*C), be.Alloc(N), be.Alloc(N)
		xt, gt := upload(be, x), upload(be, g)
		be.LayerNorm(out, mean, rstd, xt, gt, upload(be, b), N, C)
		assertClose(t, name+"/layernorm", download(be, out), layerNorm64(x, g, b, N, C), 1e-5)

		r := randVec(rng, N*C, 1)
		din0 := randVec(rng, N*C, 1) // din is added to
		din, dg, db := upload(be, din0), be.Alloc(C), be.Alloc(C)
		be.LayerNormBackward(din, dg, db, upload(be, r), xt, gt, mean, rstd, N, C)
		want := numGrad(x, r, func(x []float64) []float64 { return layerNorm64(x, g, b, N, C) })
		for i := range want {
			want[i] += din0[i]
		}
		assertClose(t, name+"/dx", download(be, din), want, 1e-4)
		assertClose(t, name+"/dg", download(be, dg), numGrad(g, r, func(g []float64) []float64 { return layerNorm64(x, g, b, N, C) }), 1e-4)
		assertClose(t, name+"/db", download(be, db), numGrad(b, r, func(b []float64) []float64 { return layerNorm64(x, g, b, N, C) }), 1e-4)
	}
}

func TestLinearBackward(t *testing.T) {
	// y = x·W + b: the input gradient is dy·Wᵀ (NT), the weight gradient xᵀ·dy (TN), the bias
	// gradient the column sums of dy.
	rng := rand.New(rand.NewPCG(9, 10))
	N, IC, OC := 11, 13, 37
	x, w, b := round64(randVec(rng, N*IC, 1)), round64(randVec(rng, IC*OC, 1)), round64(randVec(rng, OC, 1))
	fwd := func(x, w, b []float64) []float64 {
		y := matmul64(x, w, N, OC, IC, backend.NN)
		for i := range y {
			y[i] += b[i%OC]
		}
		return y
	}
	r := round64(randVec(rng, N*OC, 1))
	for _, be := range backends() {
		y := be.Alloc(N * OC)
		be.MatMul(y, upload(be, x), upload(be, w), N, OC, IC, backend.NN, false)
		be.AddBias(y, upload(be, b), N, OC)
		assertClose(t, "linear", download(be, y), fwd(x, w, b), 1e-5)

		dx, dw, db := be.Alloc(N*IC), be.Alloc(IC*OC), be.Alloc(OC)
		dy := upload(be, r)
		be.LinearBackward(dx, dw, db, dy, upload(be, x), upload(be, w), nil, N, IC, OC, false)
		assertClose(t, "dx", download(be, dx), numGrad(x, r, func(x []float64) []float64 { return fwd(x, w, b) }), 1e-5)
		assertClose(t, "dw", download(be, dw), numGrad(w, r, func(w []float64) []float64 { return fwd(x, w, b) }), 1e-5)
		assertClose(t, "db", download(be, db), numGrad(b, r, func(b []float64) []float64 { return fwd(x, w, b) }), 1e-5)
	}
}

func TestGELU(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	be := New()
	x := round64(randVec(rng, 5000, 3))
	x = append(x, 0, -0.5, 0.5, 0.4999, -6, 6, 7, -7, 1e-8)
	n := len(x)
	want := make([]float64, n)
	for i, v := range x {
		want[i] = gelu64(v)
	}
	out := be.Alloc(n)
	xt := upload(be, x)
	be.GELU(out, xt, n)
	assertClose(t, "gelu", download(be, out), want, 2e-7)
	r := randVec(rng, n, 1)
	din := be.Alloc(n)
	be.GELUBackward(din, xt, upload(be, r), n)
	want = numGrad(x, r, func(x []float64) []float64 {
		y := make([]float64, len(x))
		for i, v := range x {
			y[i] = gelu64(v)
		}
		return y
	})
	assertClose(t, "gelu'", download(be, din), want, 1e-6)
}

// seedsTensor returns a seeds tensor (backend.PutSeed) of the given sites' seeds.
func seedsTensor(be backend.Backend, s ...uint64) backend.Tensor {
	w := make([]int32, backend.SeedWords*len(s))
	for i, v := range s {
		backend.PutSeed(w, i, v)
	}
	t := be.AllocInt(len(w))
	be.UploadInt(t, w)
	return t
}

func TestDropout(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	be := New()
	n := 20000
	x := round64(randVec(rng, n, 1))
	p := float32(0.25)
	out := be.Alloc(n)
	// Site 1's seed has both halves set; the mask is DropoutKeep's for it, not site 0's.
	seed := uint64(0x9E3779B97F4A7C15)
	seeds := seedsTensor(be, 99, seed)
	be.Dropout(out, upload(be, x), n, p, seeds, 1)
	got := download(be, out)
	zeros, other := 0, 0
	for i, v := range got {
		if keep := DropoutKeep(seed, uint64(i), p); keep != (v != 0 || x[i] == 0) {
			t.Fatalf("element %d = %v: kept %v, DropoutKeep says %v", i, v, v != 0, keep)
		}
		if DropoutKeep(seed, uint64(i), p) != DropoutKeep(99, uint64(i), p) {
			other++
		}
		switch {
		case v == 0:
			zeros++
		case math.Abs(v-x[i]/0.75) > 1e-6*math.Abs(v):
			t.Fatalf("kept element %d = %v, want %v", i, v, x[i]/0.75)
		}
	}
	if other < n/10 {
		t.Errorf("sites 0 and 1 differ in %d of %d elements", other, n)
	}
	if frac := float64(zeros) / float64(n); math.Abs(frac-0.25) > 0.02 {
		t.Errorf("dropped %.3f of elements, want 0.25", frac)
	}
	// The backward pass uses the same mask: d(Σ r·out)/dx = r·keep/(1−p).
	r := randVec(rng, n, 1)
	din := be.Alloc(n)
	be.DropoutBackward(din, upload(be, r), n, p, seeds, 1)
	dg := download(be, din)
	for i := range dg {
		keep := got[i] != 0 || x[i] == 0
		want := 0.0
		if keep {
			want = float64(float32(r[i])) / 0.75
		}
		if math.Abs(dg[i]-want) > 1e-6*math.Max(1, math.Abs(want)) {
			t.Fatalf("dropout grad %d = %v, want %v", i, dg[i], want)
		}
	}
	// p = 0 is the identity.
	be.Dropout(out, upload(be, x), n, 0, nil, 0)
	assertClose(t, "p=0", download(be, out), x, 0)
}

func TestAttention(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	be := New()
	// Head sizes 16 and 32 are read in place (whole micro-kernel units); T = 50 spans two row blocks.
	for _, s := range [][4]int{{2, 5, 8, 2}, {1, 7, 12, 3}, {3, 1, 4, 1}, {1, 50, 32, 2}, {1, 20, 64, 2}} {
		B, T, C, NH := s[0], s[1], s[2], s[3]
		N := B * T
		q, k, v := round64(randVec(rng, N*C, 1)), round64(randVec(rng, N*C, 1)), round64(randVec(rng, N*C, 1))
		qkv := upload(be, joinQKV(q, k, v, N, C))
		out, lse := be.Alloc(N*C), be.Alloc(B*NH*T)
		be.Attention(out, lse, qkv, B, T, C, NH)
		assertClose(t, "attention", download(be, out), attention64(q, k, v, B, T, C, NH), 1e-5)

		r := randVec(rng, N*C, 1)
		dqkv := be.Alloc(3 * N * C)
		be.Upload(dqkv, to32(randVec(rng, 3*N*C, 100))) // overwritten, not added to
		be.AttentionBackward(dqkv, upload(be, r), qkv, out, lse, B, T, C, NH)
		d := download(be, dqkv)
		assertClose(t, "dq", block(d, N, C, 0), numGrad(q, r, func(x []float64) []float64 { return attention64(x, k, v, B, T, C, NH) }), 1e-4)
		assertClose(t, "dk", block(d, N, C, 1), numGrad(k, r, func(x []float64) []float64 { return attention64(q, x, v, B, T, C, NH) }), 1e-4)
		assertClose(t, "dv", block(d, N, C, 2), numGrad(v, r, func(x []float64) []float64 { return attention64(q, k, x, B, T, C, NH) }), 1e-4)
	}
}

func TestAttentionDecodeMatchesFullPass(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	be := New()
	// Head sizes 4 (no whole vector), 32 (whole vectors) and 36 (both).
	for _, s := range []struct{ T, C, NH int }{{9, 12, 3}, {21, 64, 2}, {14, 72, 2}} {
		T, C, NH := s.T, s.C, s.NH
		x := randVec(rng, 3*T*C, 1) // q, k and v as column blocks
		out, lse := be.Alloc(T*C), be.Alloc(NH*T)
		be.Attention(out, lse, upload(be, x), 1, T, C, NH)
		full := download(be, out)
		cache := be.Alloc(3 * T * C)
		o := be.Alloc(C)
		for pos := 0; pos < T; pos++ {
			be.AttentionDecode(o, upload(be, x[3*pos*C:3*(pos+1)*C]), cache, pos, C, NH)
			got := download(be, o)
			for i := range got {
				if d := math.Abs(float64(got[i] - full[pos*C+i])); d > 1e-6 {
					t.Fatalf("C %d, %d heads, position %d element %d: decode %v, full pass %v", C, NH, pos, i, got[i], full[pos*C+i])
				}
			}
		}
	}
}

func TestCrossEntropy(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	be := New()
	N, V := 6, 256
	logits := round64(randVec(rng, N*V, 3))
	logits[5] = 80 // a large logit must not overflow
	targets := []int32{0, 255, 17, 17, 3, 100}
	tt := be.AllocInt(N)
	be.UploadInt(tt, targets)
	lt := upload(be, logits)
	losses, dl := be.Alloc(N), be.Alloc(N*V)
	scale := float32(1.0 / 6)
	be.CrossEntropy(losses, dl, lt, tt, N, V, scale)
	assertClose(t, "loss", download(be, losses), crossEntropy64(logits, targets, N, V), 1e-6)
	r := make([]float64, N)
	for i := range r {
		r[i] = float64(scale)
	}
	assertClose(t, "dlogits", download(be, dl), numGrad(logits, r, func(x []float64) []float64 { return crossEntropy64(x, targets, N, V) }), 1e-6)
	// In place, and without a gradient.
	be.CrossEntropy(losses, nil, lt, tt, N, V, 1)
	assertClose(t, "loss without grad", download(be, losses), crossEntropy64(logits, targets, N, V), 1e-6)
	be.CrossEntropy(losses, lt, lt, tt, N, V, scale)
	assertClose(t, "in place", download(be, lt), download(be, dl), 0)
}

// adamState returns AdamW's state tensor (backend.AdamState) for step t with learning rate
// lr and a sum of squares sumsq (β 0.9 and 0.95).
func adamState(be *Backend, sumsq, lr float32, t int) backend.Tensor {
	st := backend.AdamState(lr, 0.9, 0.95, t)
	st[0] = sumsq
	x := be.Alloc(backend.AdamStateLen)
	be.Upload(x, st[:])
	return x
}

// TestSumSquaresLengths checks the four-chain sum of squares at every length up to 13 (every
// remainder modulo 4, its tail loop included) and at a chunk's length.
func TestSumSquaresLengths(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	for _, n := range []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, elemChunk} {
		x := make([]float32, n)
		want := 0.0
		for i := range x {
			x[i] = float32(rng.NormFloat64())
			want += float64(x[i]) * float64(x[i])
		}
		if got := sumSquares(x); math.Abs(got-want) > 1e-12*want {
			t.Errorf("n %d: sum of squares %v, want %v", n, got, want)
		}
	}
}

func TestSumSquaresAndAdamW(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	be := New()
	n := 10000
	p0, g0 := round64(randVec(rng, n, 1)), round64(randVec(rng, n, 0.05))
	m0, v0 := round64(randVec(rng, n, 0.01)), make([]float64, n)
	for i := range v0 {
		v0[i] = float64(float32(math.Abs(rng.NormFloat64()) * 1e-4))
	}
	acc := adamState(be, 0.5, 1e-3, 3)
	gt := upload(be, g0)
	be.SumSquares(acc, gt, n)
	want := 0.5 + dot64(g0, g0)
	if got := download(be, acc)[0]; math.Abs(got-want) > 1e-6*want {
		t.Fatalf("sum of squares %v, want %v", got, want)
	}
	for _, clip := range []float32{0, 1, 100} {
		pt, mt, vt := upload(be, p0), upload(be, m0), upload(be, v0)
		h := backend.AdamParams{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Clip: clip}
		be.AdamW(pt, gt, mt, vt, acc, n, h)
		norm := math.Sqrt(float64(float32(want)))
		scale := 1.0
		if clip > 0 && norm > float64(clip) {
			scale = float64(clip) / (norm + 1e-6)
		}
		wp, wm, wv := make([]float64, n), make([]float64, n), make([]float64, n)
		for i := range wp {
			g := g0[i] * scale
			wm[i] = 0.9*m0[i] + 0.1*g
			wv[i] = 0.95*v0[i] + 0.05*g*g
			mhat := wm[i] / (1 - math.Pow(0.9, 3))
			vhat := wv[i] / (1 - math.Pow(0.95, 3))
			wp[i] = p0[i] - 1e-3*0.1*p0[i] - 1e-3*mhat/(math.Sqrt(vhat)+1e-8)
		}
		name := fmt.Sprintf("clip %v", clip)
		assertClose(t, name+" m", download(be, mt), wm, 1e-6)
		assertClose(t, name+" v", download(be, vt), wv, 1e-6)
		assertClose(t, name+" p", download(be, pt), wp, 1e-6)
	}
	// A squared norm that is not finite (a step whose loss or gradients were not) changes
	// nothing.
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1))} {
		pt, mt, vt := upload(be, p0), upload(be, m0), upload(be, v0)
		bst := adamState(be, bad, 1e-3, 3)
		be.AdamW(pt, gt, mt, vt, bst, n, backend.AdamParams{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Clip: 1})
		name := fmt.Sprintf("squared norm %v", bad)
		assertClose(t, name+" m", download(be, mt), m0, 0)
		assertClose(t, name+" v", download(be, vt), v0, 0)
		assertClose(t, name+" p", download(be, pt), p0, 0)
	}
}

func TestExp32(t *testing.T) {
	worst := 0.0
	for x := -103.0; x < 88.7; x += 0.001237 {
		want := math.Exp(float64(float32(x)))
		got := float64(exp32(float32(x)))
		if want < 1e-37 { // float32 subnormals hold fewer digits
			if math.Abs(got-want) > 1e-44 {
				t.Fatalf("exp32(%v) = %v, want %v", float32(x), got, want)
			}
			continue
		}
		worst = math.Max(worst, math.Abs(got-want)/want)
	}
	if worst > 2e-7 {
		t.Errorf("exp32 relative error %.3g, want < 2e-7", worst)
	}
	if exp32(-200) != 0 || !math.IsInf(float64(exp32(100)), 1) || exp32(0) != 1 {
		t.Error("exp32 edge cases")
	}
}

// log32 is math.Log rounded to float32, within an ulp, from the smallest subnormal to the
// largest float32.
func TestLog32(t *testing.T) {
	for x64 := 1e-45; x64 < math.MaxFloat32; x64 *= 1.001 {
		x := float32(x64)
		want := float32(math.Log(float64(x)))
		got := log32(x)
		if d := math.Abs(float64(got - want)); d > 0 && d > math.Abs(float64(math.Nextafter32(want, 0)-want)) {
			t.Fatalf("log32(%v) = %v, want %v", x, got, want)
		}
	}
	if log32(1) != 0 || !math.IsInf(float64(log32(0)), -1) || !math.IsNaN(float64(log32(-1))) || !math.IsInf(float64(log32(float32(math.Inf(1)))), 1) {
		t.Error("log32 edge cases")
	}
}

// Many short loops on many workers, from several backends at once: the pool must neither lose
// nor repeat a chunk, nor hang, however its helpers are scheduled.
func TestPoolStress(t *testing.T) {
	p := newPool(16)
	var wg = make(chan struct{})
	for g := 0; g < 3; g++ {
		go func() {
			defer func() { wg <- struct{}{} }()
			for i := 0; i < 3000; i++ {
				n := 1 + i%97
				c := &countTask{hits: make([]int32, n)}
				p.Run(c, n, 1+i%3, 1<<20)
				for j, h := range c.hits {
					if h != 1 {
						t.Errorf("loop %d: element %d ran %d times", i, j, h)
						return
					}
				}
			}
		}()
	}
	for g := 0; g < 3; g++ {
		<-wg
	}
}

type countTask struct{ hits []int32 }

func (c *countTask) run(_, lo, hi int) {
	for i := lo; i < hi; i++ {
		c.hits[i]++
	}
}

// TestElementwiseAccuracy checks the vector (and scalar) GELU, GELU' and exp against float64
// on a dense grid, and that NaN passes through all of them.
func TestElementwiseAccuracy(t *testing.T) {
	var xs []float32
	for x := -20.0; x <= 20; x += 1.0 / 512 {
		xs = append(xs, float32(x))
	}
	xs = append(xs, 0, float32(math.Copysign(0, -1)), 1e-30, -1e-30, 100, -100)
	n := len(xs)
	out, grad, ones := make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range ones {
		ones[i] = 1
	}
	geluSlice(out, xs)
	geluGradSlice(grad, xs, ones)
	act2, grad2 := make([]float32, n), append([]float32(nil), xs...)
	geluBothSlice(act2, grad2, grad2) // in place, as Linear does
	for i := range xs {
		if d, e := math.Abs(float64(act2[i]-out[i])), math.Abs(float64(grad2[i]-grad[i])); d > 3e-7*math.Max(1, math.Abs(float64(xs[i]))) || e > 3e-7 {
			t.Fatalf("x = %v: geluBoth gave %v, %v; gelu and gelu' %v, %v", xs[i], act2[i], grad2[i], out[i], grad[i])
		}
	}
	for i, x := range xs {
		xf := float64(x)
		cdf := 0.5 * math.Erfc(-xf/math.Sqrt2)
		want, wantGrad := xf*cdf, cdf+xf*math.Exp(-xf*xf/2)/math.Sqrt(2*math.Pi)
		if d := math.Abs(float64(out[i]) - want); d > 2e-7*math.Max(1, math.Abs(xf)) {
			t.Fatalf("GELU(%v) = %v, want %v", x, out[i], want)
		}
		if d := math.Abs(float64(grad[i]) - wantGrad); d > 3e-7 {
			t.Fatalf("GELU'(%v) = %v, want %v", x, grad[i], wantGrad)
		}
	}
	e := make([]float32, 0, 4096)
	for x := -87.0; x < 80; x += 0.05 {
		e = append(e, float32(x))
	}
	in := append([]float32(nil), e...)
	sum := expShift(e, 1.5)
	var want float64
	for i, x := range in {
		w := math.Exp(float64(x - 1.5)) // the kernel subtracts in float32
		want += w
		if math.Abs(float64(e[i])-w) > 2e-7*w+1.2e-38 {
			t.Fatalf("exp(%v − 1.5) = %v, want %v", x, e[i], w)
		}
	}
	if math.Abs(float64(sum)-want) > 1e-6*want {
		t.Fatalf("sum of exps %v, want %v", sum, want)
	}
	nan := float32(math.NaN())
	v := []float32{1, 2, nan, 4, 5, 6, 7, 8, nan}
	geluSlice(out[:9], v)
	geluGradSlice(grad[:9], v, ones)
	expShift(v, 0)
	for _, i := range []int{2, 8} {
		if out[i] == out[i] || grad[i] == grad[i] || v[i] == v[i] {
			t.Fatalf("NaN input %d gave GELU %v, GELU' %v, exp %v", i, out[i], grad[i], v[i])
		}
	}
	w := make([]float32, 40) // long enough for every vector width
	w[3], w[21], w[37] = nan, nan, nan
	act3 := make([]float32, len(w))
	geluBothSlice(act3, w, w)
	for _, i := range []int{3, 21, 37} {
		if act3[i] == act3[i] || w[i] == w[i] {
			t.Fatalf("NaN input %d gave GELU %v, GELU' %v (both at once)", i, act3[i], w[i])
		}
	}
}

// TestAddMul checks Add and Mul at lengths that use each part of the vector loops (32 and 8
// floats at a time) and the scalar tail, into a new tensor and in place.
func TestAddMul(t *testing.T) {
	be := New()
	for _, n := range []int{5, 8, 40, 77} {
		a, b := make([]float32, n), make([]float32, n)
		for i := range a {
			a[i], b[i] = float32(i%7)-2.5, float32(i%5)*0.75-1
		}
		for _, mul := range []bool{false, true} {
			op, want := be.Add, func(x, y float32) float32 { return x + y }
			if mul {
				op, want = be.Mul, func(x, y float32) float32 { return x * y }
			}
			out, at := be.Alloc(n), upload32(be, a)
			op(out, at, upload32(be, b), n)
			op(at, at, upload32(be, b), n) // in place
			got, gotIn := make([]float32, n), make([]float32, n)
			be.Download(got, out, 0)
			be.Download(gotIn, at, 0)
			for i := range got {
				if w := want(a[i], b[i]); got[i] != w || gotIn[i] != w {
					t.Fatalf("n %d, mul %v, element %d: %v and in place %v, want %v", n, mul, i, got[i], gotIn[i], w)
				}
			}
		}
	}
}

// TestSoftmaxBack checks the softmax backward's row kernel (vectors where the CPU has them)
// against the plain formula bit for bit, at lengths around the vector widths, with an element
// past the row that must stay as it was.
func TestSoftmaxBack(t *testing.T) {
	for n := range 70 {
		ds, p := make([]float32, n+1), make([]float32, n+1)
		for i := range ds {
			ds[i], p[i] = float32(i%9)*0.37-1.2, float32(i%4)*0.21+0.05
		}
		want := make([]float32, n)
		for i := range want {
			want[i] = p[i] * (ds[i] - 0.31) * 0.125
		}
		softmaxBack(ds[:n], p, 0.31, 0.125)
		for i, w := range want {
			if ds[i] != w {
				t.Fatalf("n %d, element %d: %v, want %v", n, i, ds[i], w)
			}
		}
		if ds[n] != float32(n%9)*0.37-1.2 {
			t.Fatalf("n %d: the element past the row changed to %v", n, ds[n])
		}
	}
}

func upload32(be *Backend, v []float32) backend.Tensor {
	t := be.Alloc(len(v))
	be.Upload(t, v)
	return t
}

func TestLinear(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, be := range backends() {
		for _, s := range [][3]int{{1, 48, 48}, {7, 13, 5}, {100, 384, 96}, {37, 40, 300}, {24, 40, 48}, {3, 0, 5}} {
			N, IC, OC := s[0], s[1], s[2]
			in, w, b := round64(randVec(rng, N*IC, 1)), round64(randVec(rng, IC*OC, 1)), round64(randVec(rng, OC, 1))
			want := matmul64(in, w, N, OC, IC, backend.NN)
			wantAct, wantGrad := make([]float64, len(want)), make([]float64, len(want))
			for i := range want {
				want[i] += b[i%OC]
				wantAct[i] = gelu64(want[i])
				x := want[i]
				wantGrad[i] = 0.5*math.Erfc(-x/math.Sqrt2) + x*math.Exp(-x*x/2)/math.Sqrt(2*math.Pi)
			}
			name := fmt.Sprintf("%s/%dx%dx%d", be.kern.name, N, IC, OC)
			tol := 1e-5 * math.Sqrt(float64(IC)+1)
			out, act := be.Alloc(N*OC), be.Alloc(N*OC)
			be.Upload(out, to32(randVec(rng, N*OC, 1e6))) // garbage must be overwritten
			wt, bt, it := upload(be, w), upload(be, b), upload(be, in)
			be.Linear(out, act, it, wt, bt, N, IC, OC)
			assertClose(t, name+"/gelu'", download(be, out), wantGrad, tol)
			assertClose(t, name+"/act", download(be, act), wantAct, tol)
			be.Linear(out, nil, it, wt, bt, N, IC, OC)
			assertClose(t, name+"/no act", download(be, out), want, tol)
			be.Linear(out, out, it, wt, bt, N, IC, OC)
			assertClose(t, name+"/in place", download(be, out), wantAct, tol)
		}
	}
}

type panicTask struct{}

// run panics in any chunk the caller of Run (worker 0) takes; helpers' chunks do a little work.
func (t *panicTask) run(w, lo, hi int) {
	if w == 0 {
		panic("chunk failed")
	}
	x := float32(lo)
	for range 200 {
		x = x*0.999 + 1
	}
	sink += x * 0
}

// A panic in a chunk that the caller runs must reach the caller and leave the pool usable (a
// helper's panic ends the program, so the task panics on the caller only).
func TestPoolSurvivesPanic(t *testing.T) {
	p := newPool(4)
	for range 8 {
		func() {
			defer func() {
				if r := recover(); r != "chunk failed" {
					t.Fatalf("recovered %v, want the task's panic", r)
				}
			}()
			p.Run(&panicTask{}, 1000, 1, 1<<20) // the caller surely claims one of 1000 chunks
		}()
	}
	done := make(chan bool)
	go func() {
		p.Run(&spinTask{sink: make([]float32, 16*p.workers)}, 64, 1, 1<<20)
		done <- true
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the pool hangs after a panic")
	}
}

// beWith returns a backend with micro-kernel k and a pool of its own of the given size.
func beWith(k microKernel, workers int) *Backend {
	be := New()
	be.kern = k
	be.pool = newPool(workers)
	be.scratch = make([]mmScratch, workers)
	for w := range be.scratch {
		be.scratch[w] = newMMScratch(k)
	}
	return be
}

// Every kernel on every micro-kernel gives the same bits whatever the number of workers
// (attention over two row blocks, row-block reductions, split and one-row products, AdamW).
func TestDeterministicAcrossThreadsAllKernels(t *testing.T) {
	for _, k := range kernels() {
		var ref [][]float32
		for _, workers := range []int{1, 2, 3, 8, 16} {
			be := beWith(k, workers)
			rng := rand.New(rand.NewPCG(9, 9))
			var got [][]float32
			keep := func(ts ...backend.Tensor) {
				for _, x := range ts {
					got = append(got, append([]float32(nil), f32(x)...))
				}
			}
			// Attention, forward and backward, T over two row blocks.
			B, T, C, NH := 3, 100, 96, 3
			n := B * T * C
			up := func(n int) backend.Tensor { return upload(be, randVec(rng, n, 1)) }
			qkv := up(3 * n)
			out, lse := be.Alloc(n), be.Alloc(B*NH*T)
			be.Attention(out, lse, qkv, B, T, C, NH)
			dqkv, do := be.Alloc(3*n), up(n)
			be.AttentionBackward(dqkv, do, qkv, out, lse, B, T, C, NH)
			keep(out, lse, dqkv)
			// LayerNorm and bias backward over many row blocks.
			N := 1000
			x, g, bb := up(N*C), up(C), up(C)
			lo, mean, rstd := be.Alloc(N*C), be.Alloc(N), be.Alloc(N)
			be.LayerNorm(lo, mean, rstd, x, g, bb, N, C)
			din, dg, db := be.Alloc(N*C), be.Alloc(C), be.Alloc(C)
			be.LayerNormBackward(din, dg, db, up(N*C), x, g, mean, rstd, N, C)
			dbias := be.Alloc(C)
			be.BiasBackward(dbias, up(N*C), N, C)
			keep(lo, din, dg, db, dbias)
			// Products of many shapes, including split ones and M = 1.
			for _, s := range [][3]int{{1, 384, 96}, {1, 96, 384}, {50, 96, 1000}, {96, 384, 1000}, {1000, 96, 96}, {1000, 384, 96}} {
				M, Nn, K := s[0], s[1], s[2]
				for _, l := range []backend.Layout{backend.NN, backend.NT, backend.TN} {
					c := be.Alloc(M * Nn)
					be.MatMul(c, up(M*K), up(K*Nn), M, Nn, K, l, false)
					keep(c)
				}
				o, a := be.Alloc(M*Nn), be.Alloc(M*Nn)
				be.Linear(o, a, up(M*K), up(K*Nn), up(Nn), M, K, Nn)
				keep(o, a)
			}
			// AdamW and SumSquares.
			P := 70000
			p, gg, m, vv := up(P), up(P), up(P), up(P)
			for i := range f32(vv) {
				f32(vv)[i] *= f32(vv)[i]
			}
			ss := adamState(be, 0, 1e-3, 2)
			be.SumSquares(ss, gg, P)
			be.AdamW(p, gg, m, vv, ss, P, backend.AdamParams{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Clip: 1})
			keep(ss, p, m, vv)
			if ref == nil {
				ref = got
				continue
			}
			for i := range got {
				assertSameBits(t, fmt.Sprintf("%s: %d workers against 1, output %d", k.name, workers, i), got[i], ref[i])
			}
		}
	}
}

// Attention on every micro-kernel (head sizes read in place and copied, T over row blocks).
func TestAttentionAllKernels(t *testing.T) {
	for _, be := range backends() {
		rng := rand.New(rand.NewPCG(15, 16))
		for _, s := range [][4]int{{1, 50, 32, 2}, {1, 20, 64, 2}, {1, 60, 48, 1}, {2, 9, 40, 5}, {1, 100, 16, 1}, {1, 13, 32, 2}} {
			B, T, C, NH := s[0], s[1], s[2], s[3]
			N := B * T
			q, k, v := round64(randVec(rng, N*C, 1)), round64(randVec(rng, N*C, 1)), round64(randVec(rng, N*C, 1))
			qkv := upload(be, joinQKV(q, k, v, N, C))
			out, lse := be.Alloc(N*C), be.Alloc(B*NH*T)
			be.Attention(out, lse, qkv, B, T, C, NH)
			name := fmt.Sprintf("%s/%v", be.kern.name, s)
			assertClose(t, name+"/attention", download(be, out), attention64(q, k, v, B, T, C, NH), 1e-5)
			if B*T*C > 800 {
				continue // finite differences get slow
			}
			r := randVec(rng, N*C, 1)
			dqkv := be.Alloc(3 * N * C)
			be.AttentionBackward(dqkv, upload(be, r), qkv, out, lse, B, T, C, NH)
			d := download(be, dqkv)
			assertClose(t, name+"/dq", block(d, N, C, 0), numGrad(q, r, func(x []float64) []float64 { return attention64(x, k, v, B, T, C, NH) }), 1e-4)
			assertClose(t, name+"/dk", block(d, N, C, 1), numGrad(k, r, func(x []float64) []float64 { return attention64(q, x, v, B, T, C, NH) }), 1e-4)
			assertClose(t, name+"/dv", block(d, N, C, 2), numGrad(v, r, func(x []float64) []float64 { return attention64(q, k, x, B, T, C, NH) }), 1e-4)
		}
	}
}

// fusedAttentionShapes are the (B, T, C, NH) on which the fused attention kernels are checked
// against their separate calls: large's shape; head sizes of whole micro-kernel panels, half
// panels and neither; an inner dimension past one k block (C 320); T over several row blocks;
// and T 1.
var fusedAttentionShapes = [][4]int{{12, 128, 192, 6}, {4, 32, 48, 3}, {3, 50, 40, 5}, {2, 70, 320, 5}, {3, 1, 24, 2}, {1, 9, 36, 3}}

// QKVAttention gives the bits of Linear followed by Attention, on every micro-kernel and any
// number of workers: head sizes of whole micro-kernel panels, half panels and neither, a
// projection longer than one k block (C 320), T over several row blocks and T 1.
func TestQKVAttentionMatchesSeparateCalls(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	for _, k := range kernels() {
		for _, s := range fusedAttentionShapes {
			B, T, C, NH := s[0], s[1], s[2], s[3]
			N := B * T
			in, w, bias := randVec(rng, N*C, 1), randVec(rng, C*3*C, 0.2), randVec(rng, 3*C, 1)
			run := func(workers int, fused bool) [][]float32 {
				be := newTestBackend(workers, k)
				qkv, out, lse := be.Alloc(N*3*C), be.Alloc(N*C), be.Alloc(B*NH*T)
				be.Upload(qkv, to32(randVec(rng, N*3*C, 9))) // overwritten
				it, wt, bt := upload(be, in), upload(be, w), upload(be, bias)
				if fused {
					be.QKVAttention(qkv, out, lse, it, wt, bt, B, T, C, NH)
				} else {
					be.Linear(qkv, nil, it, wt, bt, N, C, 3*C)
					be.Attention(out, lse, qkv, B, T, C, NH)
				}
				return [][]float32{f32(qkv), f32(out), f32(lse)}
			}
			assertFusedMatches(t, fmt.Sprintf("%s %v", k.name, s), "Linear and Attention", []string{"qkv", "out", "lse"}, run)
		}
	}
}

// LinearAttentionBackward gives the bits of LinearBackward and AttentionBackward one after the
// other, on every micro-kernel and any number of workers: heads whose width is not a whole
// number of the kernels' units (copied), an inner dimension past a k block (C 320), sequences of
// one position, and weight gradients split along K or not.
func TestLinearAttentionBackwardMatchesSeparateCalls(t *testing.T) {
	rng := rand.New(rand.NewPCG(47, 48))
	for _, k := range kernels() {
		for _, s := range fusedAttentionShapes {
			B, T, C, NH := s[0], s[1], s[2], s[3]
			N := B * T
			qkv, dout, w := randVec(rng, N*3*C, 1), randVec(rng, N*C, 1), randVec(rng, C*C, 0.2)
			// dqkv, dw and dbias as they start: dqkv is overwritten, the others added into.
			start := [3][]float64{randVec(rng, N*3*C, 9), randVec(rng, C*C, 1), randVec(rng, C, 1)}
			run := func(workers int, fused bool) [][]float32 {
				be := newTestBackend(workers, k)
				var r [3]backend.Tensor
				for i, v := range start {
					r[i] = upload(be, v)
				}
				qt, dt, wt := upload(be, qkv), upload(be, dout), upload(be, w)
				out, lse := be.Alloc(N*C), be.Alloc(B*NH*T)
				be.Attention(out, lse, qt, B, T, C, NH) // the same bits on any number of workers
				if fused {
					be.LinearAttentionBackward(r[0], r[1], r[2], dt, out, wt, qt, lse, B, T, C, NH)
				} else {
					datt := be.Alloc(N * C)
					be.LinearBackward(datt, r[1], r[2], dt, out, wt, nil, N, C, C, false)
					be.AttentionBackward(r[0], datt, qt, out, lse, B, T, C, NH)
				}
				return [][]float32{f32(r[0]), f32(r[1]), f32(r[2])}
			}
			assertFusedMatches(t, fmt.Sprintf("%s %v", k.name, s), "LinearBackward and AttentionBackward", []string{"dqkv", "dw", "dbias"}, run)
		}
	}
}

// The vector copy and transpose that pack B must move every element, at any size and stride.
func TestPackCopies(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, s := range [][3]int{{1, 1, 3}, {8, 8, 8}, {17, 13, 20}, {64, 32, 33}, {9, 48, 50}, {24, 16, 16}} {
		rows, cols, ld := s[0], s[1], s[2]
		src := to32(randVec(rng, rows*ld, 1))
		tr := make([]float32, cols*(rows+3))
		transposeRows(tr, rows+3, src, ld, rows, cols)
		cp := make([]float32, rows*cols)
		copyRows(cp, src, ld, rows, cols)
		for r := range rows {
			for c := range cols {
				if v := src[r*ld+c]; tr[c*(rows+3)+r] != v || cp[r*cols+c] != v {
					t.Fatalf("%dx%d (stride %d): element (%d, %d) = %v transposed, %v copied, want %v",
						rows, cols, ld, r, c, tr[c*(rows+3)+r], cp[r*cols+c], v)
				}
			}
		}
	}
}

// gemvRows, through the 64-column kernel, the masked tail or both, and axpyRows, through its
// 64- and 8-column loops and its tail, must add every row into every column of y and write
// nothing past len(y). The values are small multiples of powers of two, so every sum is exact
// in float32 whatever its order.
func TestGemvRowsWidths(t *testing.T) {
	for _, f := range []struct {
		name string
		rows func(y, a, b []float32, bs int)
	}{{"gemvRows", gemvRows}, {"axpyRows", axpyRows}} {
		testRowsWidths(t, f.name, f.rows)
	}
}

func testRowsWidths(t *testing.T, name string, rows func(y, a, b []float32, bs int)) {
	for _, w := range []int{1, 5, 8, 16, 17, 48, 63, 64, 65, 72, 96, 130, 257} {
		for _, k := range []int{1, 3, 32} {
			bs := w + 3
			a, b := make([]float32, k), make([]float32, k*bs)
			for i := range a {
				a[i] = float32(i%7) - 2
			}
			for i := range b {
				b[i] = float32((i*37)%101-50) / 64
			}
			y := make([]float32, w+8)
			for i := range y {
				y[i] = float32(i%5) / 4
			}
			rows(y[:w], a, b, bs)
			for j := range y {
				want := float64(j%5) / 4
				for i := 0; j < w && i < k; i++ {
					want += float64(a[i]) * float64(b[i*bs+j])
				}
				if float64(y[j]) != want {
					t.Fatalf("%s, width %d, %d rows: y[%d] = %v, want %v", name, w, k, j, y[j], want)
				}
			}
		}
	}
}

// TestStreamPick requires a trial to alternate between the two kernels, timing each, and the
// products after it to use the one whose fastest product was faster, until the next trial.
func TestStreamPick(t *testing.T) {
	var p streamPick
	for cycle, rowFaster := range []bool{true, false, true} {
		for i := range 2 * pickTrial {
			byRow, timed := p.next()
			if !timed || byRow != (i%2 == 1) {
				t.Fatalf("cycle %d, trial product %d: byRow %v, timed %v", cycle, i, byRow, timed)
			}
			d := 100 * time.Microsecond
			if byRow == rowFaster {
				d = 90 * time.Microsecond
			}
			switch {
			case i < 2 && byRow == rowFaster:
				d = time.Millisecond // a product another program delayed: a sum would lose
			case i < 2:
				d = 95 * time.Microsecond // the slower kernel's best: slower still
			}
			p.record(byRow, d)
		}
		for i := range pickEvery {
			if byRow, timed := p.next(); timed || byRow != rowFaster {
				t.Fatalf("cycle %d, product %d after the trial: byRow %v, timed %v, want %v", cycle, i, byRow, timed, rowFaster)
			}
		}
	}
}

// TestGemvKernelsAgree requires a one-row product large enough for streamPick to give the same
// bits through both kernels (its trial alternates between them), on 1, 2 and 3 workers.
func TestGemvKernelsAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	K, N := 600, 301
	a, b := to32(randVec(rng, K, 1)), to32(randVec(rng, K*N, 1))
	for _, workers := range []int{1, 2, 3} {
		be := New()
		be.pool = newPool(workers)
		var want []float32
		for i := range 4 {
			c := make([]float32, N)
			be.gemv(c, a, b, nil, N, K, false, false)
			if i == 0 {
				want = c
			} else if !slices.Equal(c, want) {
				t.Fatalf("%d workers: product %d (byRow %v) differs from the first", workers, i, be.gv.byRow)
			}
		}
	}
}

// TestLinearBackwardMatchesSeparateCalls requires LinearBackward, whose products and bias sums
// run side by side, to give the same bits as MatMul (NT), MatMul (TN), BiasBackward and (with
// dgelu) Mul called one after the other: shapes whose input or weight gradient splits K, whose
// weight gradient packs dout, a single row, an input gradient that accumulates or not, on 1,
// 2, 3, 7 and 16 workers.
func TestLinearBackwardMatchesSeparateCalls(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, s := range [][3]int{{1536, 192, 768}, {1536, 768, 192}, {600, 300, 300}, {200, 64, 600}, {97, 13, 40}, {1, 30, 20}, {2, 7, 5}, {2048, 256, 1024}} {
		N, IC, OC := s[0], s[1], s[2]
		dout, in, w := randVec(rng, N*OC, 1), randVec(rng, N*IC, 1), randVec(rng, IC*OC, 1)
		din0, dw0, db0, gelu := randVec(rng, N*IC, 1), randVec(rng, IC*OC, 1), randVec(rng, OC, 1), randVec(rng, N*IC, 1)
		for _, c := range []struct{ acc, gelu bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
			ref := newTestBackend(1, bestKernel())
			want := [3]backend.Tensor{upload(ref, din0), upload(ref, dw0), upload(ref, db0)}
			ref.MatMul(want[0], upload(ref, dout), upload(ref, w), N, IC, OC, backend.NT, c.acc)
			ref.MatMul(want[1], upload(ref, in), upload(ref, dout), IC, OC, N, backend.TN, true)
			ref.BiasBackward(want[2], upload(ref, dout), N, OC)
			if c.gelu {
				ref.Mul(want[0], want[0], upload(ref, gelu), N*IC)
			}
			workers := []int{1, 2, 3, 7, 16}
			if c.gelu && c.acc {
				workers = []int{1, 7}
			}
			for _, workers := range workers {
				be := newTestBackend(workers, bestKernel())
				got := [3]backend.Tensor{upload(be, din0), upload(be, dw0), upload(be, db0)}
				var dgelu backend.Tensor
				if c.gelu {
					dgelu = upload(be, gelu)
				}
				be.LinearBackward(got[0], got[1], got[2], upload(be, dout), upload(be, in), upload(be, w), dgelu, N, IC, OC, c.acc)
				for i, name := range []string{"din", "dw", "db"} {
					assertSameBits(t, fmt.Sprintf("%dx%dx%d acc=%v gelu=%v, %d workers: %s against separate calls", N, IC, OC, c.acc, c.gelu, workers, name), f32(got[i]), f32(want[i]))
				}
			}
		}
	}
}

// TestLinearLayerNormBackwardMatchesSeparateCalls requires LinearLayerNormBackward, whose
// LayerNorm backward runs on the input gradient's tiles as they complete, to give the same bits
// as LinearBackward and LayerNormBackward one after the other: shapes whose input or weight
// gradient splits K, vector and scalar LayerNorm rows, row counts that are not whole blocks, a
// single row, on 1, 2, 3, 7 and 16 workers.
func TestLinearLayerNormBackwardMatchesSeparateCalls(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	for _, s := range [][3]int{{1536, 192, 768}, {1536, 192, 576}, {600, 70, 300}, {100, 48, 3000}, {97, 13, 40}, {1, 30, 20}, {2, 7, 5}, {2048, 256, 1024}} {
		N, IC, OC := s[0], s[1], s[2]
		dout, in, w := randVec(rng, N*OC, 1), randVec(rng, N*IC, 1), randVec(rng, IC*OC, 1)
		x, g, mean, rstd := randVec(rng, N*IC, 1), randVec(rng, IC, 1), randVec(rng, N, 1), randVec(rng, N, 1)
		for i := range rstd {
			rstd[i] = 0.5 + math.Abs(rstd[i])
		}
		// din, dw, dbias, dx, dg, db as they start.
		start := [6][]float64{randVec(rng, N*IC, 1), randVec(rng, IC*OC, 1), randVec(rng, OC, 1), randVec(rng, N*IC, 1), randVec(rng, IC, 1), randVec(rng, IC, 1)}
		run := func(be *Backend, fused bool) [6]backend.Tensor {
			var r [6]backend.Tensor
			for i, v := range start {
				r[i] = upload(be, v)
			}
			in, dout, w, x, g, mean, rstd := upload(be, in), upload(be, dout), upload(be, w), upload(be, x), upload(be, g), upload(be, mean), upload(be, rstd)
			if fused {
				be.LinearLayerNormBackward(r[0], r[1], r[2], dout, in, w, r[3], r[4], r[5], x, g, mean, rstd, N, IC, OC)
				return r
			}
			be.LinearBackward(r[0], r[1], r[2], dout, in, w, nil, N, IC, OC, false)
			be.LayerNormBackward(r[3], r[4], r[5], r[0], x, g, mean, rstd, N, IC)
			return r
		}
		want := run(newTestBackend(1, bestKernel()), false)
		for _, workers := range []int{1, 2, 3, 7, 16} {
			got := run(newTestBackend(workers, bestKernel()), true)
			for i, name := range []string{"din", "dw", "dbias", "dx", "dg", "db"} {
				assertSameBits(t, fmt.Sprintf("%dx%dx%d, %d workers: %s against separate calls", N, IC, OC, workers, name), f32(got[i]), f32(want[i]))
			}
		}
	}
}

// LinearAddLayerNorm gives the bits of Linear, Dropout and AddLayerNorm one after the other,
// with and without dropout, on every micro-kernel and any number of workers: products split
// along K (IC 768) or not, rows that are not whole blocks, a LayerNorm width without vectors
// (70) and a single row.
func TestLinearAddLayerNormMatchesSeparateCalls(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 46))
	seeds := seedsTensor(New(), 76, 77)
	for _, k := range kernels() {
		for _, s := range [][3]int{{1536, 192, 192}, {1536, 768, 192}, {97, 40, 70}, {50, 300, 96}, {1, 30, 48}} {
			N, IC, OC := s[0], s[1], s[2]
			in, w, bias := randVec(rng, N*IC, 1), randVec(rng, IC*OC, 0.2), randVec(rng, OC, 1)
			x, g, b := randVec(rng, N*OC, 2), randVec(rng, OC, 1), randVec(rng, OC, 1)
			for _, p := range []float32{0, 0.25} {
				run := func(workers int, fused bool) [][]float32 {
					be := newTestBackend(workers, k)
					r := [4]backend.Tensor{be.Alloc(N * OC), be.Alloc(N * OC), be.Alloc(N), be.Alloc(N)}
					it, wt, bt, xt, gt, bb := upload(be, in), upload(be, w), upload(be, bias), upload(be, x), upload(be, g), upload(be, b)
					if fused {
						be.LinearAddLayerNorm(r[0], r[1], r[2], r[3], it, wt, bt, xt, gt, bb, N, IC, OC, p, seeds, 1)
					} else {
						y := be.Alloc(N * OC)
						be.Linear(y, nil, it, wt, bt, N, IC, OC)
						be.Dropout(y, y, N*OC, p, seeds, 1)
						be.AddLayerNorm(r[0], r[1], r[2], r[3], xt, y, gt, bb, N, OC)
					}
					return [][]float32{f32(r[0]), f32(r[1]), f32(r[2]), f32(r[3])}
				}
				assertFusedMatches(t, fmt.Sprintf("%s %v, p %v", k.name, s, p), "the separate calls", []string{"sum", "out", "mean", "rstd"}, run)
			}
		}
	}
}

// MLPAddLayerNorm gives the bits of Linear with its GELU and LinearAddLayerNorm one after the
// other, with and without dropout, on every micro-kernel and any number of workers: a second
// product over more than one k block (F 300, 768), rows that are not whole blocks, widths
// without whole vectors, a single row, and weights too large to run by blocks (C 256, F 1024).
func TestMLPAddLayerNormMatchesSeparateCalls(t *testing.T) {
	rng := rand.New(rand.NewPCG(49, 50))
	seeds := seedsTensor(New(), 78)
	for _, k := range kernels() {
		for _, s := range [][3]int{{1536, 192, 768}, {97, 40, 70}, {50, 96, 300}, {30, 13, 20}, {1, 30, 48}, {40, 256, 1024}} {
			N, C, F := s[0], s[1], s[2]
			in, w1, b1 := randVec(rng, N*C, 1), randVec(rng, C*F, 0.3), randVec(rng, F, 1)
			w2, b2 := randVec(rng, F*C, 0.2), randVec(rng, C, 1)
			x, g, b := randVec(rng, N*C, 2), randVec(rng, C, 1), randVec(rng, C, 1)
			for _, p := range []float32{0, 0.25} {
				run := func(workers int, fused bool) [][]float32 {
					be := newTestBackend(workers, k)
					r := [6]backend.Tensor{be.Alloc(N * C), be.Alloc(N * C), be.Alloc(N), be.Alloc(N), be.Alloc(N * F), be.Alloc(N * F)}
					it, w1t, b1t, w2t, b2t := upload(be, in), upload(be, w1), upload(be, b1), upload(be, w2), upload(be, b2)
					xt, gt, bt := upload(be, x), upload(be, g), upload(be, b)
					if fused {
						be.MLPAddLayerNorm(r[0], r[1], r[2], r[3], r[4], r[5], it, w1t, b1t, w2t, b2t, xt, gt, bt, N, C, F, p, seeds, 0)
					} else {
						be.Linear(r[4], r[5], it, w1t, b1t, N, C, F)
						be.LinearAddLayerNorm(r[0], r[1], r[2], r[3], r[5], w2t, b2t, xt, gt, bt, N, F, C, p, seeds, 0)
					}
					out := make([][]float32, len(r))
					for i := range r {
						out[i] = f32(r[i])
					}
					return out
				}
				assertFusedMatches(t, fmt.Sprintf("%s %v, p %v", k.name, s, p), "the separate calls", []string{"sum", "out", "mean", "rstd", "GELU'", "GELU"}, run)
			}
		}
	}
}

// TestAddLayerNormMatchesSeparateCalls requires AddLayerNorm to give the same bits as Add and
// LayerNorm one after the other, with the sum in a tensor of its own or in place of a, on
// scalar (C = 70) and vector rows, on 1, 3 and 16 workers.
func TestAddLayerNormMatchesSeparateCalls(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, s := range [][2]int{{9, 70}, {40, 96}, {1536, 192}} {
		N, C := s[0], s[1]
		a, b := randVec(rng, N*C, 2), randVec(rng, N*C, 1)
		g, bias := randVec(rng, C, 1), randVec(rng, C, 1)
		ref := newTestBackend(1, bestKernel())
		want := [4]backend.Tensor{ref.Alloc(N * C), ref.Alloc(N * C), ref.Alloc(N), ref.Alloc(N)}
		ref.Add(want[0], upload(ref, a), upload(ref, b), N*C)
		ref.LayerNorm(want[1], want[2], want[3], want[0], upload(ref, g), upload(ref, bias), N, C)
		for _, workers := range []int{1, 3, 16} {
			for _, inPlace := range []bool{false, true} {
				be := newTestBackend(workers, bestKernel())
				at := upload(be, a)
				got := [4]backend.Tensor{be.Alloc(N * C), be.Alloc(N * C), be.Alloc(N), be.Alloc(N)}
				if inPlace {
					got[0] = at
				}
				be.AddLayerNorm(got[0], got[1], got[2], got[3], at, upload(be, b), upload(be, g), upload(be, bias), N, C)
				for i, name := range []string{"sum", "out", "mean", "rstd"} {
					assertSameBits(t, fmt.Sprintf("%dx%d, %d workers, in place %v: %s against Add and LayerNorm", N, C, workers, inPlace, name), f32(got[i]), f32(want[i]))
				}
			}
		}
	}
}

// dotRows (a KV cache's scores in decoding) gives the bits of dot row by row, for head
// sizes with and without a vector tail, and rows far apart.
func TestDotRowsMatchesDot(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for _, hs := range []int{4, 8, 12, 16, 32, 40, 64, 96} {
		for _, rows := range []int{1, 3, 9, 40} {
			ld := 3*hs + 5
			q := to32(randVec(rng, hs, 1))
			k := to32(randVec(rng, (rows-1)*ld+hs, 1))
			got := make([]float32, rows)
			dotRows(got, q, k, ld)
			want := make([]float32, rows)
			for r := range want {
				want[r] = dot(q, k[r*ld:r*ld+hs])
			}
			assertSameBits(t, fmt.Sprintf("hs %d, %d rows", hs, rows), got, want)
		}
	}
}

// TestDotAxpy checks dot and axpy, whose vector kernels take whole vectors and leave the
// tail to Go, against float64 at every length up to 70 (and the vector kernels' loops of 16
// and of 4 or 8 in every combination).
func TestDotAxpy(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	for n := 0; n <= 70; n++ {
		a, b, y := randVec(rng, n+3, 1), randVec(rng, n+3, 1), randVec(rng, n+3, 1)
		var want float64
		for i := range n {
			want += float64(float32(a[i])) * float64(float32(b[i]))
		}
		got := dot(to32(a)[:n], to32(b))
		if math.Abs(float64(got)-want) > 1e-5*math.Sqrt(float64(n)+1) {
			t.Errorf("dot, n %d: %v, want %v", n, got, want)
		}
		const s = 0.75
		y32, x32 := to32(y), to32(a)
		axpy(y32[:n], s, x32)
		for i := range y32 {
			w, scale := float32(y[i]), 0.0
			if i < n {
				w = float32(float64(float32(y[i])) + s*float64(x32[i]))
				scale = math.Abs(float64(float32(y[i]))) + math.Abs(s*float64(x32[i]))
			}
			// an FMA rounds once, a multiply and an add twice (Go's tail on amd64)
			if d := math.Abs(float64(y32[i] - w)); d > 1.2e-7*scale {
				t.Fatalf("axpy, n %d: y[%d] = %v, want %v", n, i, y32[i], w)
			}
		}
	}
}

// TestKernelsRefuseBadBlocks requires every micro-kernel's wrapper to panic, not to run its
// assembly, on a negative stride or an empty inner dimension: its bounds check looks at the
// block's far corner, which covers the block only for kc ≥ 1 and strides ≥ 0.
func TestKernelsRefuseBadBlocks(t *testing.T) {
	buf := make([]float32, 4096)
	for _, k := range kernels() {
		for _, s := range [][5]int{{2, -1, 12, 64, 64}, {2, 12, -1, 64, 64}, {2, 1, 12, -1, 64}, {2, 1, 12, 64, -1}, {0, 64, 1, 1, 64}} {
			kc, rs, ks, bs, ldc := s[0], s[1], s[2], s[3], s[4]
			// Start the operands mid-buffer so that the far corner of a bad block is inside it.
			a, b, c := buf[2048:], buf[2048:], buf[2048:]
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s: kc %d, strides %d %d %d %d: no panic", k.name, kc, rs, ks, bs, ldc)
					}
				}()
				k.fn(kc, a, rs, ks, b, bs, c, ldc, false, nil)
			}()
		}
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Errorf("dotRows with a negative row stride: no panic")
			}
		}()
		out := make([]float32, 3)
		dotRows(out, buf[:16], buf[2048:], -4) // the last row's end, k[7], is inside k
	}()
}
