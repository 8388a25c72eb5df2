package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"tinygpt/backend"
)

// BenchmarkFMAPeak measures one core's peak AVX-512 fused multiply-add rate, the yardstick
// for the matmul kernel's GFLOP/s.
func BenchmarkFMAPeak(b *testing.B) {
	if !useAVX512 {
		b.Skip("no AVX-512")
	}
	const iters = 1 << 16
	for i := 0; i < b.N; i++ {
		fmaPeak512(iters)
	}
	b.ReportMetric(768*iters*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// BenchmarkMatMulVsPeak measures the chosen micro-kernel single-threaded on the products of
// training steps (tiny to huge), as a fraction of the core's FMA peak. On a shared machine the
// rate of one core moves by tens of percent from one second to the next, so each of b.N
// rounds times one window of products and one window of the peak loop (the same flops),
// back to back, and each keeps its fastest window: run it with -benchtime 15x or more.
func BenchmarkMatMulVsPeak(b *testing.B) {
	if !useAVX512 {
		b.Skip("no AVX-512")
	}
	shapes := []product{
		// forward (NN), input gradients (NT) and weight gradients (TN) at widths 48 to 256
		{512, 144, 48, backend.NN}, {512, 48, 192, backend.NT}, {48, 192, 512, backend.TN},
		{1024, 384, 96, backend.NN}, {1024, 96, 384, backend.NT}, {96, 384, 1024, backend.TN},
		{1536, 768, 192, backend.NN}, {1536, 192, 768, backend.NT}, {192, 768, 1536, backend.TN},
		{2048, 1024, 256, backend.NN}, {2048, 256, 1024, backend.NT}, {256, 256, 2048, backend.TN},
		// the MLP's other products at large and huge: the second layer forward and its input
		// gradient, and both layers' weight gradients
		{1536, 192, 768, backend.NN}, {1536, 768, 192, backend.NT}, {768, 192, 1536, backend.TN},
		{2048, 256, 1024, backend.NN}, {2048, 1024, 256, backend.NT}, {1024, 256, 2048, backend.TN},
		{256, 1024, 2048, backend.TN},
	}
	for _, s := range shapes {
		b.Run(s.String(), func(b *testing.B) {
			be := newTestBackend(1, bestKernel())
			a, bb, c := be.Alloc(s.M*s.K), be.Alloc(s.K*s.N), be.Alloc(s.M*s.N)
			flops := 2 * s.M * s.N * s.K
			reps := max(1, 100_000_000/flops) // windows of about a millisecond
			best, peak := time.Duration(1<<62), time.Duration(1<<62)
			for range b.N {
				start := time.Now()
				for range reps {
					be.MatMul(c, a, bb, s.M, s.N, s.K, s.l, false)
				}
				best = min(best, time.Since(start))
				start = time.Now()
				fmaPeak512(flops * reps / 768)
				peak = min(peak, time.Since(start))
			}
			gflops := float64(flops*reps) / best.Seconds() / 1e9
			b.ReportMetric(gflops, "GFLOP/s")
			b.ReportMetric(100*peak.Seconds()/best.Seconds(), "%peak")
		})
	}
}

// The vector AdamW must give exactly the bits of the Go loop (same operations, same order).
func TestAdamWVectorMatchesScalar(t *testing.T) {
	if !useFMA {
		t.Skip("no AVX2")
	}
	n := 1000
	mk := func(seed float32) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = seed * float32((i*7919)%997-498) / 498
		}
		return v
	}
	run := func() [][]float32 {
		be := New()
		p, g, m, v := mk(0.3), mk(0.01), mk(0.001), mk(0.0001)
		for i := range v {
			v[i] *= v[i] // second moments are not negative
		}
		ts := []backend.Tensor{upload32(be, p), upload32(be, g), upload32(be, m), upload32(be, v)}
		state := adamState(be, 4, 3e-4, 3) // norm 2 > clip 1: the gradient is scaled
		be.AdamW(ts[0], ts[1], ts[2], ts[3], state, n, backend.AdamParams{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Clip: 1})
		var out [][]float32
		for _, x := range ts {
			d := make([]float32, n)
			be.Download(d, x, 0)
			out = append(out, d)
		}
		return out
	}
	vec := run()
	useFMA = false
	scalar := run()
	useFMA = true
	for k := range vec {
		for i := range vec[k] {
			if vec[k][i] != scalar[k][i] {
				t.Fatalf("tensor %d element %d: vector %v, Go %v", k, i, vec[k][i], scalar[k][i])
			}
		}
	}
}

// The AVX-512 expShift and scaleMax (16 lanes, the tail under a mask) must give each element
// exactly as the 8-lane kernels do (and as the Go tail, up to exp32's rounding), the same maximum, a sum equal up to the
// order of its additions, and write nothing past n.
func TestExpShiftScaleMax16(t *testing.T) {
	if !useAVX512 {
		t.Skip("no AVX-512")
	}
	for n := 1; n <= 70; n++ {
		run := func() (x []float32, mx, sum float32) {
			x = make([]float32, n+5)
			for i := range x {
				x[i] = float32((i*29)%23-11) * 0.37
			}
			mx = scaleMax(x[:n], 0.9)
			sum = expShift(x[:n], mx)
			return x, mx, sum
		}
		x16, mx16, sum16 := run()
		useAVX512 = false
		x8, mx8, sum8 := run()
		useAVX512 = true
		if mx16 != mx8 || math.Abs(float64(sum16-sum8)) > 1e-6*float64(sum8) {
			t.Fatalf("n %d: max %v, sum %v; want %v, %v", n, mx16, sum16, mx8, sum8)
		}
		for i := range x16 {
			// The 8-lane path leaves the last n mod 8 elements to Go's exp32, which may
			// round differently.
			if d := math.Abs(float64(x16[i] - x8[i])); d != 0 && (i < n&^7 || i >= n || d > 1e-6*math.Abs(float64(x8[i]))) {
				t.Fatalf("n %d: x[%d] = %v, want %v", n, i, x16[i], x8[i])
			}
		}
	}
}

// The AVX-512 geluBoth must give each element exactly as the 8-lane kernels (the same
// operations in the same order), and write nothing past n.
func TestGELUBoth16(t *testing.T) {
	if !useAVX512 {
		t.Skip("no AVX-512")
	}
	for _, n := range []int{16, 48, 400} {
		run := func() (act, grad []float32) {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32((i*37)%101-50) * 0.13
			}
			act, grad = make([]float32, n+3), make([]float32, n+3)
			geluBothSlice(act[:n], grad[:n], x)
			return act, grad
		}
		act16, grad16 := run()
		useAVX512 = false
		act8, grad8 := run()
		useAVX512 = true
		for i := range act16 {
			if act16[i] != act8[i] || grad16[i] != grad8[i] {
				t.Fatalf("n %d, element %d: GELU %v and GELU' %v, want %v and %v", n, i, act16[i], grad16[i], act8[i], grad8[i])
			}
		}
	}
}

// The row kernels must give each row exactly what scaleMax and expShift give it alone (the
// same lanes, the same order), −Inf padding turned into zeros, and touch nothing past w.
func TestRowKernels(t *testing.T) {
	if !useAVX512 {
		t.Skip("no AVX-512")
	}
	defer func() { useAVX512, rowVector = true, 16 }()
	for _, lanes := range []int{16, 8} {
		useAVX512, rowVector = lanes == 16, lanes
		const rows, ld = 7, 70
		for _, w := range []int{lanes, 4 * lanes} {
			x := make([]float32, rows*ld)
			for i := range x {
				x[i] = float32((i*29)%23-11) * 0.37
			}
			for r := range rows { // row r has r+1 scores, then −Inf
				for j := r + 1; j < w; j++ {
					x[r*ld+j] = float32(math.Inf(-1))
				}
			}
			want := append([]float32(nil), x...)
			wantMx, wantSum := make([]float32, rows), make([]float32, rows)
			for r := range rows {
				row := want[r*ld : r*ld+w]
				wantMx[r] = scaleMax(row, 0.9)
				wantSum[r] = expShift(row, wantMx[r]-0.5)
			}
			mx, shift, sum := make([]float32, rows), make([]float32, rows), make([]float32, rows)
			scaleMaxRows(x, ld, rows, w, 0.9, mx)
			for r := range rows {
				shift[r] = mx[r] - 0.5
			}
			expRows(x, ld, rows, w, shift, sum)
			for r := range rows {
				if mx[r] != wantMx[r] || sum[r] != wantSum[r] {
					t.Fatalf("%d lanes, w %d, row %d: max %v, sum %v; want %v, %v", lanes, w, r, mx[r], sum[r], wantMx[r], wantSum[r])
				}
			}
			for i := range x {
				if row, col := i/ld, i%ld; x[i] != want[i] || col > row && col < w && x[i] != 0 {
					t.Fatalf("%d lanes, w %d: x[%d] = %v, want %v", lanes, w, i, x[i], want[i])
				}
			}
		}
	}
}

// The 4-row kernel for a block's last rows must give exactly the bits of the 12-row kernel on
// zero-padded rows, in every layout, with and without accumulation and bias, over one and
// several k blocks.
func TestRows4MatchesPadded(t *testing.T) {
	if !useAVX512 {
		t.Skip("no AVX-512")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, s := range []product{{16, 64, 40, backend.NN}, {8, 96, 300, backend.TN}, {28, 70, 600, backend.NT}, {100, 64, 257, backend.TN}, {4, 32, 1, backend.NN}} {
		for _, acc := range []bool{false, true} {
			for _, withBias := range []bool{false, true} {
				a, b := randVec(rng, s.M*s.K, 1), randVec(rng, s.K*s.N, 1)
				c0, bias := randVec(rng, s.M*s.N, 1), randVec(rng, s.N, 1)
				if !withBias {
					bias = nil
				}
				padded := bestKernel()
				padded.rows4 = nil
				workers := New().pool.workers
				got := [2][]float32{
					productBits(newTestBackend(workers, bestKernel()), s, a, b, c0, bias, acc),
					productBits(newTestBackend(workers, padded), s, a, b, c0, bias, acc),
				}
				assertSameBits(t, fmt.Sprintf("%v accumulate %v bias %v: rows4 against padded", s, acc, withBias), got[0], got[1])
			}
		}
	}
}
