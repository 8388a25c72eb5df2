package cpu

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"testing"

	"tinygpt/backend"
)

var sink float32

func BenchmarkExp32(b *testing.B) {
	x := float32(-3.3)
	for i := 0; i < b.N; i++ {
		sink += exp32(x - float32(i&7)*0.1)
	}
}
func BenchmarkMathExp(b *testing.B) {
	x := float32(-3.3)
	for i := 0; i < b.N; i++ {
		sink += float32(math.Exp(float64(x - float32(i&7)*0.1)))
	}
}
func BenchmarkGELUGrad(b *testing.B) {
	for i := 0; i < b.N; i++ {
		sink += GELUGrad(float32(i&63)*0.05 - 1.5)
	}
}

func BenchmarkGELUKernel(b *testing.B) {
	be := New()
	n := 1024 * 384
	x := be.Alloc(n)
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i%1000)*0.004 - 2
	}
	be.Upload(x, v)
	out := be.Alloc(n)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		be.GELU(out, x, n)
		be.GELUBackward(out, x, out, n)
	}
}

// product is the shape and layout of one matrix product C [M, N] = op(A)·op(B) with K inner.
type product struct {
	M, N, K int
	l       backend.Layout
}

func (p product) String() string { return fmt.Sprintf("%dx%dx%d/%s", p.M, p.N, p.K, p.l) }

// BenchmarkMatMul times each micro-kernel on products of the shapes a training step of the
// small and large presets runs (tokens × width), single-threaded and on all cores.
func BenchmarkMatMul(b *testing.B) {
	shapes := []product{
		{1024, 96, 96, backend.NN}, {1024, 384, 96, backend.NN}, {1024, 96, 384, backend.NT},
		{96, 384, 1024, backend.TN}, {1536, 768, 192, backend.NN}, {1536, 192, 768, backend.NT},
		{256, 256, 2048, backend.TN}, {2048, 256, 256, backend.NN}, {2048, 1024, 256, backend.NN},
		{1536, 192, 192, backend.NT}, {192, 192, 1536, backend.TN},
	}
	for _, k := range kernels() {
		for _, threads := range []int{1, 0} {
			for _, s := range shapes {
				name := fmt.Sprintf("%s/threads=%d/%v", k.name, threads, s)
				b.Run(name, func(b *testing.B) {
					be := New()
					if threads > 0 {
						be.pool = newPool(threads)
					}
					be.kern = k
					be.scratch = make([]mmScratch, be.pool.workers)
					for w := range be.scratch {
						be.scratch[w] = newMMScratch(k)
					}
					a, bb, c := be.Alloc(s.M*s.K), be.Alloc(s.K*s.N), be.Alloc(s.M*s.N)
					be.MatMul(c, a, bb, s.M, s.N, s.K, s.l, false)
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						be.MatMul(c, a, bb, s.M, s.N, s.K, s.l, false)
					}
					b.ReportMetric(2*float64(s.M*s.N*s.K)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}

// BenchmarkGemv times one-row products (a decoded token's linear layers) on all cores, with a
// B whose rows are not transposed, of 4 MB (in the cache) and 64 MB (read from memory), in
// GB/s of B read.
func BenchmarkGemv(b *testing.B) {
	for _, mb := range []int{4, 64} {
		for _, N := range []int{256, 1024} {
			K := mb << 20 / 4 / N
			b.Run(fmt.Sprintf("%dMB/N=%d", mb, N), func(b *testing.B) {
				be := New()
				a, bb, c := be.Alloc(K), be.Alloc(K*N), be.Alloc(N)
				for i, f := 0, f32(bb); i < len(f); i++ {
					f[i] = float32(i%7) * 0.1 // written, so not the kernel's shared zero pages
				}
				be.MatMul(c, a, bb, 1, N, K, backend.NN, false)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					be.MatMul(c, a, bb, 1, N, K, backend.NN, false)
				}
				b.ReportMetric(float64(4*K*N)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
	}
}

// BenchmarkMatMulShared measures how well one product shares the cores: per core, the rate of
// a product computed by all workers together (shared), and of the same product computed
// independently on every core at once, each core with its own operands and one worker
// (independent: all cores busy, nothing shared between them). The gap between the two is what
// the parallel product loses to splitting, synchronisation and data moving between cores,
// not to the cores themselves. Run it with -benchtime 100x or more.
func BenchmarkMatMulShared(b *testing.B) {
	shapes := []product{
		{1536, 768, 192, backend.NN}, {1536, 192, 768, backend.NT}, {192, 768, 1536, backend.TN},
		{1024, 384, 96, backend.NN}, {2048, 1024, 256, backend.NN},
	}
	workers := defaultPool().workers
	for _, s := range shapes {
		flops := 2 * float64(s.M*s.N*s.K)
		b.Run("shared/"+s.String(), func(b *testing.B) {
			be := New()
			a, bb, c := be.Alloc(s.M*s.K), be.Alloc(s.K*s.N), be.Alloc(s.M*s.N)
			be.MatMul(c, a, bb, s.M, s.N, s.K, s.l, false)
			b.ResetTimer()
			for range b.N {
				be.MatMul(c, a, bb, s.M, s.N, s.K, s.l, false)
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9/float64(workers), "GFLOP/s/core")
		})
		b.Run("independent/"+s.String(), func(b *testing.B) {
			var ready, done sync.WaitGroup
			start := make(chan struct{})
			for range workers {
				ready.Add(1)
				done.Add(1)
				go func() {
					defer done.Done()
					runtime.LockOSThread()
					be := newTestBackend(1, bestKernel())
					a, bb, c := be.Alloc(s.M*s.K), be.Alloc(s.K*s.N), be.Alloc(s.M*s.N)
					be.MatMul(c, a, bb, s.M, s.N, s.K, s.l, false)
					ready.Done()
					<-start
					for range b.N {
						be.MatMul(c, a, bb, s.M, s.N, s.K, s.l, false)
					}
				}()
			}
			ready.Wait()
			b.ResetTimer()
			close(start)
			done.Wait()
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s/core")
		})
	}
}

type spinTask struct{ sink []float32 }

func (t *spinTask) run(w, lo, hi int) {
	for i := lo; i < hi; i++ {
		x := float32(i)
		for range 200 { // about 0.2 µs
			x = x*0.999 + 1
		}
		t.sink[w*16] += x
	}
}

// BenchmarkPoolLoop measures the cost of one parallel loop of one tiny chunk per worker: the
// synchronisation overhead that every kernel call pays.
func BenchmarkPoolLoop(b *testing.B) {
	p := defaultPool()
	t := &spinTask{sink: make([]float32, 16*p.workers)}
	for i := 0; i < b.N; i++ {
		p.Run(t, p.workers, 1, 1<<20)
	}
}

// BenchmarkAttention times the attention forward and backward of one layer of the tiny, small
// and large presets on one core.
func BenchmarkAttention(b *testing.B) {
	be := newTestBackend(1, bestKernel())
	// The tiny, small and large presets' shapes.
	for _, s := range [][4]int{{16, 32, 48, 3}, {16, 64, 96, 3}, {12, 128, 192, 6}} {
		B, T, C, NH := s[0], s[1], s[2], s[3]
		n := B * T * C
		x := make([]float32, 3*n)
		for i := range x {
			x[i] = float32(i%17)*0.01 - 0.08
		}
		qkv, out, dout := be.Alloc(3*n), be.Alloc(n), be.Alloc(n)
		dqkv, lse := be.Alloc(3*n), be.Alloc(B*NH*T)
		be.Upload(qkv, x)
		be.Upload(dout, x[:n])
		name := fmt.Sprintf("B%d_T%d_C%d_NH%d", B, T, C, NH)
		b.Run(name+"/forward", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				be.Attention(out, lse, qkv, B, T, C, NH)
			}
		})
		b.Run(name+"/backward", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				be.AttentionBackward(dqkv, dout, qkv, out, lse, B, T, C, NH)
			}
		})
	}
}

// BenchmarkGELUBoth times the GELU-and-derivative epilogue of the MLP's first layer (one row
// block of the small preset) on one core.
func BenchmarkGELUBoth(b *testing.B) {
	n := 1024 * 384
	x, act := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i] = float32(i%1000)*0.004 - 2
	}
	grad := make([]float32, n)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		copy(grad, x)
		geluBothSlice(act, grad, grad)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/element")
}

// BenchmarkMLP times the MLP branch with the residual add and LayerNorm after it, at large's
// and xl's shapes, on all cores: MLPAddLayerNorm (each block of rows through both products on
// one core) against the two calls it stands for.
func BenchmarkMLP(b *testing.B) {
	for _, s := range [][3]int{{1536, 192, 768}, {1024, 256, 1024}} {
		N, C, F := s[0], s[1], s[2]
		be := New()
		r := func(n int) backend.Tensor {
			t := be.Alloc(n)
			v := make([]float32, n)
			for i := range v {
				v[i] = float32(i%17)*0.01 - 0.08
			}
			be.Upload(t, v)
			return t
		}
		sum, out, mean, rstd, grad, act := be.Alloc(N*C), be.Alloc(N*C), be.Alloc(N), be.Alloc(N), be.Alloc(N*F), be.Alloc(N*F)
		in, w1, b1, w2, b2, x, g, bb := r(N*C), r(C*F), r(F), r(F*C), r(C), r(N*C), r(C), r(C)
		for _, fused := range []bool{true, false} {
			b.Run(fmt.Sprintf("%dx%dx%d/fused=%v", N, C, F, fused), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					if fused {
						be.MLPAddLayerNorm(sum, out, mean, rstd, grad, act, in, w1, b1, w2, b2, x, g, bb, N, C, F, 0, nil, 0)
						continue
					}
					be.Linear(grad, act, in, w1, b1, N, C, F)
					be.LinearAddLayerNorm(sum, out, mean, rstd, act, w2, b2, x, g, bb, N, F, C, 0, nil, 0)
				}
				b.ReportMetric(float64(4*N*C*F)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
