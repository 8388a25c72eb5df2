package cpu

import (
	"fmt"
	"testing"
	"time"
)

func TestZZSmall(t *testing.T) {
	N, C := 512, 48
	for _, th := range []int{1, 2} {
		be := New()
		be.pool = newPool(th)
		be.scratch = be.scratch[:th]
		x, out, g, b := be.Alloc(N*C), be.Alloc(N*C), be.Alloc(C), be.Alloc(C)
		mean, rstd := be.Alloc(N), be.Alloc(N)
		din, dg, db := be.Alloc(N*C), be.Alloc(C), be.Alloc(C)
		be.Upload(g, make([]float32, C))
		tm := func(name string, f func()) {
			best := time.Hour
			for r := 0; r < 200; r++ {
				start := time.Now()
				f()
				best = min(best, time.Since(start))
			}
			fmt.Printf("threads %d %s: %v\n", th, name, best)
		}
		tm("LayerNorm", func() { be.LayerNorm(out, mean, rstd, x, g, b, N, C) })
		tm("LayerNormBackward", func() { be.LayerNormBackward(din, dg, db, out, x, g, mean, rstd, N, C) })
		tm("BiasBackward", func() { be.BiasBackward(dg, out, N, C) })
		tm("Add", func() { be.Add(out, out, x, N*C) })
	}
}
