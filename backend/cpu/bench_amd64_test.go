package cpu

import "testing"

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
