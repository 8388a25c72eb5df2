package train

import (
	"os"
	"testing"

	"tinygpt/backend"
	"tinygpt/backend/cpu"
	"tinygpt/gpt"
)

// BenchmarkTrainStep times one full training step (forward, backward, AdamW) per preset and
// reports allocations, which must be zero after warm-up.
func BenchmarkTrainStep(b *testing.B) {
	for _, name := range []string{"tiny", "small", "medium"} {
		p, _ := gpt.PresetByName(name)
		b.Run(name, func(b *testing.B) {
			step := presetStep(b, cpu.New(), p)
			step()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				step()
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/step")
		})
	}
}

// presetStep returns one full training step (forward, backward, AdamW) of preset p on be, on
// a fixed batch, for the benchmarks and the kernel breakdown.
func presetStep(tb testing.TB, be backend.Backend, p gpt.Preset) func() {
	m, err := gpt.New(be, p.Config)
	if err != nil {
		tb.Fatal(err)
	}
	if err := m.SetWeights(gpt.InitWeights(p.Config, 1)); err != nil {
		tb.Fatal(err)
	}
	o := NewOptimizer(m)
	n := p.Batch * p.Ctx
	in, tg := make([]int32, n), make([]int32, n)
	for i := range in {
		in[i], tg[i] = int32(i*7%256), int32(i*13%256)
	}
	batch := gpt.Batch{B: p.Batch, T: p.Ctx, Inputs: in, Targets: tg}
	return func() {
		m.ZeroGrads()
		if _, err := m.TrainForward(batch, 0, 0); err != nil {
			tb.Fatal(err)
		}
		if err := m.Backward(); err != nil {
			tb.Fatal(err)
		}
		o.Update(3e-4)
	}
}

// BenchmarkDecode times KV-cached generation of a window of tokens at the small preset (or
// the one in TINYGPT_DECODE_PRESET).
func BenchmarkDecode(b *testing.B) {
	name := "small"
	if env := os.Getenv("TINYGPT_DECODE_PRESET"); env != "" {
		name = env
	}
	p, _ := gpt.PresetByName(name)
	m, _ := gpt.New(cpu.New(), p.Config)
	m.SetWeights(gpt.InitWeights(p.Config, 1))
	g := m.NewGenerator()
	g.Reset([]int32{'\n'})
	b.ReportAllocs()
	b.ResetTimer()
	tokens := 0
	for i := 0; i < b.N; i++ {
		logits, _ := g.Reset([]int32{'\n'})
		for range p.Ctx - 1 {
			logits, _ = g.Push(gpt.Argmax(logits))
			tokens++
		}
	}
	b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
}
