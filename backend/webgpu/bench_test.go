package webgpu

import (
	"fmt"
	"testing"
	"time"

	"tinygpt/backend"
	"tinygpt/backend/webgpu/internal/gpu"
)

// Benchmarks for the GPU machine (on lavapipe they measure the CPU): the matrix products in
// each layout, timed over many dispatches in one submit and reported in GFLOP/s, attention's
// passes (also many per submit), and the dispatch cost of a tiny kernel, as the host records
// it and as the GPU runs it. Whole training steps are timed by tinygpt bench.
//
//	go test -run NONE -bench . ./backend/webgpu

func BenchmarkMatMul(b *testing.B) {
	g := openGPU(b)
	// Square sizes; huge's products: the MLP's up and down projections for 2048 tokens; xl's:
	// the same for 1024 tokens and the up projection's weight gradient; large's (1536 tokens,
	// width 192): q, k and v, the MLP's up and down projections and the up projection's
	// weight gradient; nanoGPT's baby GPT for Shakespeare (python/quality.py: 16384 tokens,
	// width 384): the MLP's up and down projections and the up projection's weight gradient.
	for _, s := range [][3]int{{256, 256, 256}, {1024, 1024, 1024}, {2048, 2048, 2048}, {4096, 4096, 4096},
		{2048, 1024, 256}, {2048, 256, 1024}, {1024, 1024, 256}, {1024, 256, 1024}, {256, 1024, 1024},
		{1536, 576, 192}, {1536, 768, 192}, {1536, 192, 768}, {192, 768, 1536},
		{16384, 1536, 384}, {16384, 384, 1536}, {384, 1536, 16384}} {
		M, N, K := s[0], s[1], s[2]
		for _, l := range []backend.Layout{backend.NN, backend.NT, backend.TN} {
			b.Run(fmt.Sprintf("%dx%dx%d/%s", M, N, K, l), func(b *testing.B) {
				timeProducts(b, g, M, N, K, l)
				b.ReportMetric(2*float64(M)*float64(N)*float64(K)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// timeProducts times b.N products of shape M×N×K in layout l in one stream, each waiting for
// the one before (they write the same C), after one to compile the kernel and warm up; b's
// elapsed time is theirs.
func timeProducts(b *testing.B, g *Backend, M, N, K int, l backend.Layout) {
	x, y, z := g.Alloc(M*K), g.Alloc(K*N), g.Alloc(M*N)
	defer func() { g.Release(x); g.Release(y); g.Release(z) }()
	out := make([]float32, 1)
	g.MatMul(z, x, y, M, N, K, l, false)
	g.Download(out, z, 0)
	b.ResetTimer()
	for range b.N {
		g.MatMul(z, x, y, M, N, K, l, false)
	}
	g.Download(out, z, 0)
	b.StopTimer()
	if err := g.Err(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkProductTime is the time of one product in a stream of dependent ones (each waits
// for the one before, as in a training step), in µs: large's shapes (1536 rows, 768 and 192
// columns) against K, from one block of the inner loop (16) to 320, and against the number of
// rows (tiles of 64) at K 192; and one tile alone. The difference between two K is what the
// inner loop costs; K 16 is close to a product's fixed cost.
func BenchmarkProductTime(b *testing.B) {
	g := openGPU(b)
	var shapes [][3]int
	for _, K := range []int{16, 64, 128, 192, 256, 320} {
		shapes = append(shapes, [3]int{1536, 768, K}, [3]int{1536, 192, K})
	}
	for _, M := range []int{64, 384, 768, 3072} {
		shapes = append(shapes, [3]int{M, 768, 192})
	}
	shapes = append(shapes, [3]int{64, 64, 16}, [3]int{64, 64, 192})
	for _, s := range shapes {
		M, N, K := s[0], s[1], s[2]
		b.Run(fmt.Sprintf("%dx%dx%d", M, N, K), func(b *testing.B) {
			timeProducts(b, g, M, N, K, backend.NN)
			b.ReportMetric(b.Elapsed().Seconds()*1e6/float64(b.N), "µs/product")
		})
	}
}

// BenchmarkAttention times attention's forward and backward passes (all their dispatches)
// at the shapes of the large, xl and huge presets (batch, context, width, heads), many per
// submit, in microseconds per pass. Two more shapes take large's apart: one sequence (12
// workgroups: how long one workgroup's walk over 128 rows lasts) and a context of 32 (one
// tile: what a pass costs besides its walk).
func BenchmarkAttention(b *testing.B) {
	g := openGPU(b)
	for _, s := range [][4]int{{12, 128, 192, 6}, {8, 128, 256, 8}, {8, 256, 256, 8}, {1, 128, 192, 6}, {12, 32, 192, 6}} {
		B, T, C, NH := s[0], s[1], s[2], s[3]
		n := B * T * C
		qkv, out, dout, dqkv, lse := g.Alloc(3*n), g.Alloc(n), g.Alloc(n), g.Alloc(3*n), g.Alloc(B*NH*T)
		x := make([]float32, 3*n)
		for i := range x {
			x[i] = float32(i%17)*0.01 - 0.08
		}
		g.Upload(qkv, x)
		g.Upload(dout, x[:n])
		name := fmt.Sprintf("B%d_T%d_C%d_NH%d", B, T, C, NH)
		pass := func(b *testing.B, run func()) {
			res := make([]float32, 1)
			run()
			g.Download(res, dqkv, 0) // compile and warm up
			b.ResetTimer()
			for range b.N {
				run()
			}
			g.Download(res, dqkv, 0)
			b.ReportMetric(b.Elapsed().Seconds()*1e6/float64(b.N), "µs/pass")
			if err := g.Err(); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(name+"/forward", func(b *testing.B) {
			pass(b, func() { g.Attention(out, lse, qkv, B, T, C, NH) })
		})
		g.Attention(out, lse, qkv, B, T, C, NH)
		b.Run(name+"/backward", func(b *testing.B) {
			pass(b, func() { g.AttentionBackward(dqkv, dout, qkv, out, lse, B, T, C, NH) })
		})
		for _, t := range []backend.Tensor{qkv, out, dout, dqkv, lse} {
			g.Release(t)
		}
	}
}

// BenchmarkDispatch is the cost of one small kernel recorded in a long stream.
func BenchmarkDispatch(b *testing.B) {
	g := openGPU(b)
	x := g.Alloc(256)
	defer g.Release(x)
	y, z := g.Alloc(256), g.Alloc(256)
	defer g.Release(y)
	defer g.Release(z)
	out := make([]float32, 1)
	g.Add(z, x, y, 256)
	g.Download(out, z, 0)
	b.ResetTimer()
	for range b.N {
		g.Add(z, x, y, 256) // in place (z = x), the add would first copy x to scratch
	}
	g.Download(out, z, 0)
}

// BenchmarkRoundTrip is the latency of one small kernel submitted and read back (one float),
// with the host sleeping between polls of the GPU or spinning first.
func BenchmarkRoundTrip(b *testing.B) {
	g := openGPU(b)
	x := g.Alloc(256)
	defer g.Release(x)
	out := make([]float32, 1)
	defer func(s time.Duration) { gpu.SpinTime = s }(gpu.SpinTime)
	for _, spin := range []time.Duration{0, gpu.SpinTime} {
		b.Run(fmt.Sprintf("spin=%v", spin), func(b *testing.B) {
			gpu.SpinTime = spin
			g.Add(x, x, x, 256)
			g.Download(out, x, 0)
			g.dev.ResetStats()
			b.ResetTimer()
			for range b.N {
				g.Add(x, x, x, 256)
				g.Download(out, x, 0)
			}
			b.StopTimer()
			b.Log(g.Profile(b.N))
		})
	}
}

// BenchmarkDispatchFloor is what a dispatch costs the GPU in a stream of dependent ones (the
// binding puts a barrier after each), the host's recording left out: each round records n
// small dispatches with no submit in between (the stream is not cut every gpu.FlushEvery
// dispatches), then times their one submit until the GPU has finished (the read's copy
// included, a few µs over the thousand) and reports that time per dispatch. The variants take
// the cost apart: one kernel of one workgroup again and again; two kernels in turn (a pipeline
// switch at every dispatch); one kernel with a parameter block of its own each time, of eight
// (a bind group switch at every dispatch); one kernel over 1,024 workgroups (1 MB read twice
// and written: a full GPU's launch and drain); and, for comparison, a LayerNorm at the large
// preset's shape.
func BenchmarkDispatchFloor(b *testing.B) {
	g := openGPU(b)
	const n = 1000
	x, y, z, w := g.Alloc(1<<18), g.Alloc(1<<18), g.Alloc(1<<18), g.Alloc(4096)
	defer g.Release(w)
	defer g.Release(x)
	defer g.Release(y)
	defer g.Release(z)
	out := make([]float32, 1)
	defer func(e int) { gpu.FlushEvery = e }(gpu.FlushEvery)
	for _, v := range []struct {
		name   string
		record func(i int)
	}{
		{"same", func(int) { g.Add(z, x, y, 256) }},
		{"alternating", func(i int) {
			if i%2 == 0 {
				g.Add(z, x, y, 256)
			} else {
				g.Mul(z, x, y, 256)
			}
		}},
		{"params", func(i int) { g.Add(z, x, y, 256-4*(i%8)) }},
		{"wide", func(int) { g.Add(z, x, y, 1<<18) }},
		// A small kernel of the model: a LayerNorm over large's activations (1,536 rows of
		// 192, a workgroup a row, two reductions).
		{"layernorm", func(int) {
			g.LayerNorm(z, g.Slice(w, 0, 1536), g.Slice(w, 1536, 1536), x, g.Slice(w, 3072, 192), g.Slice(w, 3328, 192), 1536, 192)
		}},
	} {
		b.Run(v.name, func(b *testing.B) {
			gpu.FlushEvery = 0
			v.record(0)
			g.Download(out, z, 0) // compile and warm up
			var gpuTime time.Duration
			for range b.N {
				before := g.dev.Stats().Dispatches
				for i := range n {
					v.record(i)
				}
				g.settleAll()
				if d := g.dev.Stats().Dispatches - before; d != n {
					b.Fatalf("%d calls recorded %d dispatches, want one each (%v)", n, d, g.Err())
				}
				t0 := time.Now()
				g.Download(out, z, 0)
				gpuTime += time.Since(t0)
			}
			if err := g.Err(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(gpuTime.Seconds()*1e6/float64(b.N*n), "µs/dispatch")
		})
	}
}
