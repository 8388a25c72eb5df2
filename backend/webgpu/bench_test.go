package webgpu

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"tinygpt/backend"
	"tinygpt/backend/webgpu/internal/gpu"
)

// Benchmarks for the GPU machine (on lavapipe they measure the CPU, slowly): the matrix
// products in each layout, timed over many dispatches in one submit and reported in GFLOP/s,
// attention's passes (also many per submit), the dispatch cost of a tiny kernel, as the host
// records it and as the GPU runs it, and two probes of the GPU itself: the rate of
// multiply-adds a WGSL kernel reaches (FMAPeak) and what reads of workgroup memory cost
// (SharedReads). Whole training steps are timed by tinygpt bench.
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
	x, y := g.Alloc(256), g.Alloc(256)
	defer g.Release(x)
	defer g.Release(y)
	out := make([]float32, 1)
	defer func(s time.Duration) { gpu.SpinTime = s }(gpu.SpinTime)
	for _, spin := range []time.Duration{0, gpu.SpinTime} {
		b.Run(fmt.Sprintf("spin=%v", spin), func(b *testing.B) {
			gpu.SpinTime = spin
			g.Add(y, x, x, 256) // into a tensor of its own: in place, the inputs are first copied
			g.Download(out, y, 0)
			g.dev.ResetStats()
			b.ResetTimer()
			for range b.N {
				g.Add(y, x, x, 256)
				g.Download(out, y, 0)
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
// preset's shape, and products from one 64×64 tile to large's q, k, v product (the same
// kernel's fixed cost, its cost per block of K, a tile per SM). The variants that alternate
// with an add show whether switching between kernels with and without workgroup memory costs
// anything (on an H200 it does not: they take the mean of the two).
func BenchmarkDispatchFloor(b *testing.B) {
	g := openGPU(b)
	const n = 1000
	x, y, z, w := g.Alloc(1<<20), g.Alloc(1<<20), g.Alloc(1<<20), g.Alloc(4096)
	defer g.Release(w)
	defer g.Release(x)
	defer g.Release(y)
	defer g.Release(z)
	out := make([]float32, 1)
	defer func(e int) { gpu.FlushEvery = e }(gpu.FlushEvery)
	// A small kernel of the model: a LayerNorm over large's activations (1,536 rows of 192, a
	// workgroup a row, two reductions); one 64×64 tile of a product with one block of 16 along
	// K (the product kernel's fixed cost).
	layerNorm := func() {
		g.LayerNorm(z, g.Slice(w, 0, 1536), g.Slice(w, 1536, 1536), x, g.Slice(w, 3072, 192), g.Slice(w, 3328, 192), 1536, 192)
	}
	tile := func() { g.MatMul(z, x, y, 64, 64, 16, backend.NN, false) }
	add := func() { g.Add(z, x, y, 256) }
	// alternate records a at even dispatches and b at odd ones.
	alternate := func(a, b func()) func(int) {
		return func(i int) {
			if i%2 == 0 {
				a()
			} else {
				b()
			}
		}
	}
	for _, v := range []struct {
		name   string
		record func(i int)
	}{
		{"same", func(int) { add() }},
		{"alternating", alternate(add, func() { g.Mul(z, x, y, 256) })},
		{"params", func(i int) { g.Add(z, x, y, 256-4*(i%8)) }},
		{"wide", func(int) { g.Add(z, x, y, 1<<18) }},
		// Each alone and alternating with a kernel that uses no workgroup memory.
		{"layernorm", func(int) { layerNorm() }},
		{"layernorm-add", alternate(layerNorm, add)},
		{"product-1tile", func(int) { tile() }},
		{"product-1tile-add", alternate(tile, add)},
		{"product-1tile-k192", func(int) { g.MatMul(z, x, y, 64, 64, 192, backend.NN, false) }},
		{"product-132tiles-k16", func(int) { g.MatMul(z, x, y, 768, 704, 16, backend.NN, false) }},
		{"product-large-qkv", func(int) { g.MatMul(z, x, y, 1536, 576, 192, backend.NN, false) }},
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

// sharedReadsWGSL is BenchmarkSharedReads' kernel: each of a workgroup's 256 threads reads a
// vec4 of workgroup memory (or four f32) n times, where by prm.mode, and does four
// multiply-adds with each. The two arrays together are WebGPU's guaranteed 16 KB.
const sharedReadsWGSL = `
struct P { n: u32, mode: u32, p0: u32, p1: u32 }
@group(0) @binding(0) var<uniform> prm: P;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
var<workgroup> tile: array<vec4<f32>, 512>;
var<workgroup> tiles: array<f32, 2048>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wg: vec3<u32>) {
    for (var i = lid; i < 512u; i += 256u) {
        tile[i] = vec4<f32>(f32(i), 1.0, 2.0, 3.0);
    }
    for (var i = lid; i < 2048u; i += 256u) {
        tiles[i] = f32(i);
    }
    workgroupBarrier();
    let x = vec4<f32>(f32(lid) * 1e-3);
    var a0 = vec4<f32>(0.0); var a1 = vec4<f32>(0.0); var a2 = vec4<f32>(0.0); var a3 = vec4<f32>(0.0);
    // Each thread reads vec4 k + off of tile: off 0 (mode 0: the same vec4 for all threads,
    // though the compiler cannot tell), the thread (1: 32 distinct vec4 a warp), the thread mod
    // 16 (2: 16 distinct, each read by two threads of a warp, as main64 reads B), the warp (5:
    // one a warp), the thread's half warp mod 2 (6: two a warp, as main64 reads A). Mode 4
    // reads vec4 k (the same for all threads, known to the compiler), mode 3 the four f32
    // of it, from tiles.
    var off = 0u;
    if (prm.mode == 1u) { off = lid; }
    if (prm.mode == 2u) { off = lid % 16u; }
    if (prm.mode == 5u) { off = lid / 32u; }
    if (prm.mode == 6u) { off = (lid / 16u) % 2u; }
    if (prm.mode == 4u) {
        for (var k = 0u; k < prm.n; k += 4u) {
            a0 = fma(tile[k & 511u], x, a0);
            a1 = fma(tile[(k + 1u) & 511u], x, a1);
            a2 = fma(tile[(k + 2u) & 511u], x, a2);
            a3 = fma(tile[(k + 3u) & 511u], x, a3);
        }
    } else if (prm.mode == 3u) {
        for (var k = 0u; k < prm.n; k += 4u) {
            let j = (4u * k) & 2047u;
            a0 = fma(vec4<f32>(tiles[j], tiles[j + 1u], tiles[j + 2u], tiles[j + 3u]), x, a0);
            a1 = fma(vec4<f32>(tiles[j + 4u], tiles[j + 5u], tiles[j + 6u], tiles[j + 7u]), x, a1);
            a2 = fma(vec4<f32>(tiles[j + 8u], tiles[j + 9u], tiles[j + 10u], tiles[j + 11u]), x, a2);
            a3 = fma(vec4<f32>(tiles[j + 12u], tiles[j + 13u], tiles[j + 14u], tiles[j + 15u]), x, a3);
        }
    } else {
        for (var k = 0u; k < prm.n; k += 4u) {
            a0 = fma(tile[(k + off) & 511u], x, a0);
            a1 = fma(tile[(k + 1u + off) & 511u], x, a1);
            a2 = fma(tile[(k + 2u + off) & 511u], x, a2);
            a3 = fma(tile[(k + 3u + off) & 511u], x, a3);
        }
    }
    out[wg.x * 256u + lid] = dot(a0 + a1 + a2 + a3, vec4<f32>(1.0));
}
`

// BenchmarkSharedReads is what a read of workgroup memory costs by its pattern (see
// sharedReadsWGSL): 132 workgroups (one per SM of an H100 or H200) or four times as many,
// each thread reading a vec4 for four multiply-adds, n times, in one dispatch. Reported in ns
// per read of one SM's share (its workgroups' 256 threads each reading once); 1 ns is about
// two cycles of an H200 at full clock.
func BenchmarkSharedReads(b *testing.B) {
	g := openGPU(b)
	const n = 1 << 14
	for _, per := range []int{1, 4} {
		b.Run(fmt.Sprintf("%dwg", per), func(b *testing.B) {
			run := probeKernel(b, g, "sharedreads", sharedReadsWGSL, 132*per)
			for _, mode := range []struct {
				name string
				m    uint32
			}{{"broadcast", 0}, {"distinct", 1}, {"half-warp", 2}, {"uniform-f32x4", 3}, {"uniform", 4},
				{"one-a-warp", 5}, {"two-a-warp", 6}} {
				b.Run(mode.name, func(b *testing.B) {
					b.ReportMetric(float64(run(b, n, mode.m).Nanoseconds())/float64(n*per), "ns/read")
				})
			}
		})
	}
}

// probeKernel compiles a probe kernel (WGSL with a uniform of four words and one storage
// buffer, entry main) and returns a function that times b.N rounds of ten dispatches of it
// (b the caller's) over groups workgroups with parameters n and mode, after one round to
// compile and warm up, and returns the GPU's time per dispatch (each round's submit until its
// read is done).
func probeKernel(b *testing.B, g *Backend, name, src string, groups int) func(b *testing.B, n, mode uint32) time.Duration {
	k, err := g.dev.NewKernel(name, src, "main", 1)
	if err != nil {
		b.Fatal(err)
	}
	o := g.Alloc(groups * 256)
	b.Cleanup(func() { g.Release(o) })
	ot := ten(o)
	bind := []gpu.Binding{{Buf: ot.buf, Off: uint64(ot.off) * 4, Size: uint64(groups) * 256 * 4}}
	out := make([]float32, 1)
	return func(b *testing.B, n, mode uint32) time.Duration {
		defer func(e int) { gpu.FlushEvery = e }(gpu.FlushEvery)
		gpu.FlushEvery = 0
		var d time.Duration
		for i := range b.N + 1 {
			for range 10 {
				if err := g.dev.Dispatch(k, []uint32{n, mode, 0, 0}, bind, groups, 1, 1); err != nil {
					b.Fatal(err)
				}
			}
			t0 := time.Now()
			g.Download(out, o, 0)
			if i > 0 {
				d += time.Since(t0)
			}
		}
		return d / time.Duration(10*b.N)
	}
}

// fmaPeakWGSL is BenchmarkFMAPeak's kernel: each thread updates 32 independent sums n times
// (each step of a sum waits only for its own last step),
// written in ways chosen by prm.mode: as eight vec4 sums, each a vec4 times a scalar splat (0,
// as main64's inner loop), as eight vec4 sums of vec4 products (1), or as 32 f32 sums (2);
// mode 3 is mode 1 with half the sums each adding the step just made of another; modes 4 and
// 5 are f32 sums whose two factors both change from sum to sum, 5 as a 4×8 outer product.
const fmaPeakWGSL = `
struct P { n: u32, mode: u32, p0: u32, p1: u32 }
@group(0) @binding(0) var<uniform> prm: P;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wg: vec3<u32>) {
    let f = f32(lid) * 1e-3;
    let v = vec4<f32>(f, f + 0.1, f + 0.2, f + 0.3);
    let w = vec4<f32>(0.999, 0.998, 0.997, 0.996);
    var a0 = v; var a1 = v * 2.0; var a2 = v * 3.0; var a3 = v * 4.0;
    var a4 = v * 5.0; var a5 = v * 6.0; var a6 = v * 7.0; var a7 = v * 8.0;
    if (prm.mode == 0u) {
        for (var k = 0u; k < prm.n; k++) {
            a0 = fma(vec4<f32>(w.x), v, a0); a1 = fma(vec4<f32>(w.y), v, a1);
            a2 = fma(vec4<f32>(w.z), v, a2); a3 = fma(vec4<f32>(w.w), v, a3);
            a4 = fma(vec4<f32>(w.x), v, a4); a5 = fma(vec4<f32>(w.y), v, a5);
            a6 = fma(vec4<f32>(w.z), v, a6); a7 = fma(vec4<f32>(w.w), v, a7);
        }
    } else if (prm.mode == 1u) {
        for (var k = 0u; k < prm.n; k++) {
            a0 = fma(w, v, a0); a1 = fma(w, v, a1); a2 = fma(w, v, a2); a3 = fma(w, v, a3);
            a4 = fma(w, v, a4); a5 = fma(w, v, a5); a6 = fma(w, v, a6); a7 = fma(w, v, a7);
        }
    } else if (prm.mode == 3u) {
        for (var k = 0u; k < prm.n; k++) {
            a0 = fma(w, v, a0); a1 = fma(w, v, a1); a2 = fma(w, v, a2); a3 = fma(w, v, a3);
            a4 = fma(w, a0, a4); a5 = fma(w, a1, a5); a6 = fma(w, a2, a6); a7 = fma(w, a3, a7);
        }
    } else {
        var s: array<f32, 32>;
        for (var i = 0u; i < 32u; i++) {
            s[i] = f * f32(i);
        }
        if (prm.mode == 2u) {
            for (var k = 0u; k < prm.n; k++) {
                for (var i = 0u; i < 32u; i++) {
                    s[i] = fma(w[i % 4u], f, s[i]);
                }
            }
        } else if (prm.mode == 4u) {
            for (var k = 0u; k < prm.n; k++) {
                for (var i = 0u; i < 32u; i++) {
                    s[i] = fma(w[i % 4u], v[(i / 4u) % 4u], s[i]);
                }
            }
        } else {
            // An outer product, as a register block's: sum 8·i + j adds a[i]·b[j].
            let b2 = v * 1.001;
            for (var k = 0u; k < prm.n; k++) {
                for (var i = 0u; i < 4u; i++) {
                    for (var j = 0u; j < 4u; j++) {
                        s[8u * i + j] = fma(w[i], v[j], s[8u * i + j]);
                        s[8u * i + 4u + j] = fma(w[i], b2[j], s[8u * i + 4u + j]);
                    }
                }
            }
        }
        for (var i = 0u; i < 8u; i++) {
            a0 += vec4<f32>(s[4u * i], s[4u * i + 1u], s[4u * i + 2u], s[4u * i + 3u]);
        }
    }
    let t = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
    out[wg.x * 256u + lid] = dot(t, vec4<f32>(1.0));
}
`

// BenchmarkFMAPeak is the rate of fused multiply-adds a WGSL kernel reaches on this GPU and
// driver (with no memory traffic), in the ways a kernel can write them (see fmaPeakWGSL),
// over 132·8 workgroups of 256 threads in one dispatch.
func BenchmarkFMAPeak(b *testing.B) {
	g := openGPU(b)
	const n, groups = 1 << 12, 132 * 8
	run := probeKernel(b, g, "fmapeak", fmaPeakWGSL, groups)
	for _, mode := range []struct {
		name string
		m    uint32
	}{{"splat", 0}, {"vec4", 1}, {"f32", 2}, {"vec4-chained", 3}, {"f32-two", 4}, {"f32-outer", 5}} {
		b.Run(mode.name, func(b *testing.B) {
			b.ReportMetric(2*32*float64(n)*groups*256/run(b, n, mode.m).Seconds()/1e9, "GFLOP/s")
		})
	}
}

// TestKernelClock prints where the time of each tile of a product goes on the GPU, read from
// the GPU's own clock by an instrumented main64 (python/kernel_clock.py makes it from the
// product kernel's SPIR-V): over the tiles of each product (min/median/max, µs), when they
// start after the first, and how long their prologue (to the loop over K), that loop and their
// epilogue (the stores of C) take. A measuring aid for the GPU machine, not a test: it runs only
// with TINYGPT_KERNEL_CLOCK naming the folder that holds the instrumented
// matmul_main64_0.spv, on a backend of its own (the instrumented kernel writes its readings
// over C).
func TestKernelClock(t *testing.T) {
	dir := os.Getenv("TINYGPT_KERNEL_CLOCK")
	if dir == "" {
		t.Skip("set TINYGPT_KERNEL_CLOCK to a folder from python/kernel_clock.py")
	}
	if _, err := os.Stat(filepath.Join(dir, "matmul_main64_0.spv")); err != nil {
		t.Fatalf("TINYGPT_KERNEL_CLOCK: %v (python/kernel_clock.py writes it)", err)
	}
	g, err := New() // its self-test compiles the usual product kernel
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	delete(g.kernels, "matmul/main64/0")
	t.Setenv("TINYGPT_SPIRV_DIR", dir)
	// One tile alone (K 16 and 192); large's q, k and v, MLP up and attention output products;
	// 1024×1024×256. Sizes are multiples of 64 (the readings overwrite each thread's first two
	// rows), and none splits K (it splits from K 384: a reduce would add up the readings).
	for _, s := range [][3]int{{64, 64, 16}, {64, 64, 192}, {1536, 576, 192}, {1536, 768, 192}, {1536, 192, 192}, {1024, 1024, 256}} {
		M, N, K := s[0], s[1], s[2]
		x, y, z := g.Alloc(M*K), g.Alloc(K*N), g.Alloc(M*N)
		out := make([]float32, M*N)
		for range 3 { // the first compiles the kernel
			g.MatMul(z, x, y, M, N, K, backend.NN, false)
		}
		g.Download(out, z, 0)
		if err := g.Err(); err != nil {
			t.Fatal(err)
		}
		var clocks [][4]uint64 // per tile, thread (0, 0)'s readings
		for i := 0; i < M; i += 64 {
			for j := 0; j < N; j += 64 {
				var c [4]uint64
				for n := range 4 { // reading n: elements 2n and 2n+1 of the two rows of four
					lo, hi := 2*n, 2*n+1
					c[n] = uint64(math.Float32bits(out[(i+lo/4)*N+j+lo%4])) | uint64(math.Float32bits(out[(i+hi/4)*N+j+hi%4]))<<32
				}
				clocks = append(clocks, c)
			}
		}
		first, last := uint64(math.MaxUint64), uint64(0)
		for _, c := range clocks {
			first, last = min(first, c[0]), max(last, c[3])
		}
		if last <= first {
			t.Fatalf("%dx%dx%d: no clock readings in C: was the instrumented kernel run?", M, N, K)
		}
		var phase [4][]float64 // start, prologue, loop, epilogue
		for _, c := range clocks {
			for p, d := range []uint64{c[0] - first, c[1] - c[0], c[2] - c[1], c[3] - c[2]} {
				phase[p] = append(phase[p], float64(int64(d))/1e3) // the clocks of lavapipe's threads can disagree
			}
		}
		line := fmt.Sprintf("%dx%dx%d: %d tiles, %.2f µs from the first start to the last end", M, N, K, len(clocks), float64(int64(last-first))/1e3)
		for p, name := range []string{"start", "prologue", "loop", "epilogue"} {
			v := phase[p]
			slices.Sort(v)
			line += fmt.Sprintf("; %s %.2f/%.2f/%.2f", name, v[0], v[len(v)/2], v[len(v)-1])
		}
		t.Log(line)
		g.Release(x)
		g.Release(y)
		g.Release(z)
	}
}
