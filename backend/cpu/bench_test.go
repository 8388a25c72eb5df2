package cpu

import (
	"math"
	"testing"
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
