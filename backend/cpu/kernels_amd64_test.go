package cpu

import (
	"testing"

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
		sumsq := upload32(be, []float32{4}) // norm 2 > clip 1: the gradient is scaled
		be.AdamW(ts[0], ts[1], ts[2], ts[3], sumsq, n, backend.AdamParams{LR: 3e-4, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Clip: 1, Step: 3})
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
