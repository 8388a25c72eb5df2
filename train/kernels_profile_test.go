package train

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"tinygpt/backend"
	"tinygpt/backend/cpu"
	"tinygpt/gpt"
)

// timedBackend wraps the CPU backend and adds up the wall time of each kernel, by kernel and
// shape, to see where a training step's time goes.
type timedBackend struct {
	*cpu.Backend
	total map[string]time.Duration
	calls map[string]int
}

func (b *timedBackend) time(name string, start time.Time) {
	b.total[name] += time.Since(start)
	b.calls[name]++
}

func (b *timedBackend) Encoder(out, tok, wte, wpe backend.Tensor, B, T, pos0, C int) {
	defer b.time("Encoder", time.Now())
	b.Backend.Encoder(out, tok, wte, wpe, B, T, pos0, C)
}
func (b *timedBackend) EncoderBackward(dwte, dwpe, dout, tok backend.Tensor, B, T, C int) {
	defer b.time("EncoderBackward", time.Now())
	b.Backend.EncoderBackward(dwte, dwpe, dout, tok, B, T, C)
}
func (b *timedBackend) LayerNorm(out, mean, rstd, in, g, bb backend.Tensor, N, C int) {
	defer b.time("LayerNorm", time.Now())
	b.Backend.LayerNorm(out, mean, rstd, in, g, bb, N, C)
}
func (b *timedBackend) AddLayerNorm(sum, out, mean, rstd, x, y, g, bb backend.Tensor, N, C int) {
	defer b.time("AddLayerNorm", time.Now())
	b.Backend.AddLayerNorm(sum, out, mean, rstd, x, y, g, bb, N, C)
}
func (b *timedBackend) LayerNormBackward(din, dg, db, dout, in, g, mean, rstd backend.Tensor, N, C int) {
	defer b.time("LayerNormBackward", time.Now())
	b.Backend.LayerNormBackward(din, dg, db, dout, in, g, mean, rstd, N, C)
}
func (b *timedBackend) MatMul(c, a, bb backend.Tensor, M, N, K int, l backend.Layout, acc bool) {
	defer b.time(fmt.Sprintf("MatMul %s %dx%dx%d", l, M, N, K), time.Now())
	b.Backend.MatMul(c, a, bb, M, N, K, l, acc)
}
func (b *timedBackend) Linear(out, act, in, w, bias backend.Tensor, N, IC, OC int) {
	defer b.time(fmt.Sprintf("Linear %dx%dx%d gelu=%v", N, OC, IC, act != nil), time.Now())
	b.Backend.Linear(out, act, in, w, bias, N, IC, OC)
}
func (b *timedBackend) LinearBackward(din, dw, db, dout, in, w, dgelu backend.Tensor, N, IC, OC int, acc bool) {
	defer b.time(fmt.Sprintf("LinearBackward %dx%dx%d gelu=%v", N, IC, OC, dgelu != nil), time.Now())
	b.Backend.LinearBackward(din, dw, db, dout, in, w, dgelu, N, IC, OC, acc)
}
func (b *timedBackend) LinearLayerNormBackward(din, dw, dbias, dout, in, w, dx, dg, db, x, g, mean, rstd backend.Tensor, N, IC, OC int) {
	defer b.time(fmt.Sprintf("LinearLayerNormBackward %dx%dx%d", N, IC, OC), time.Now())
	b.Backend.LinearLayerNormBackward(din, dw, dbias, dout, in, w, dx, dg, db, x, g, mean, rstd, N, IC, OC)
}
func (b *timedBackend) LinearAddLayerNorm(sum, out, mean, rstd, in, w, bias, x, g, bb backend.Tensor, N, IC, OC int, p float32, seeds backend.Tensor, site int) {
	defer b.time(fmt.Sprintf("LinearAddLayerNorm %dx%dx%d", N, OC, IC), time.Now())
	b.Backend.LinearAddLayerNorm(sum, out, mean, rstd, in, w, bias, x, g, bb, N, IC, OC, p, seeds, site)
}
func (b *timedBackend) QKVAttention(qkv, out, lse, in, w, bias backend.Tensor, B, T, C, NH int) {
	defer b.time("QKVAttention", time.Now())
	b.Backend.QKVAttention(qkv, out, lse, in, w, bias, B, T, C, NH)
}
func (b *timedBackend) LinearAttentionBackward(dqkv, dw, dbias, dout, out, w, qkv, lse backend.Tensor, B, T, C, NH int) {
	defer b.time("LinearAttentionBackward", time.Now())
	b.Backend.LinearAttentionBackward(dqkv, dw, dbias, dout, out, w, qkv, lse, B, T, C, NH)
}
func (b *timedBackend) MLPAddLayerNorm(sum, out, mean, rstd, grad, act, in, w1, b1, w2, b2, x, g, bb backend.Tensor, N, C, F int, p float32, seeds backend.Tensor, site int) {
	defer b.time(fmt.Sprintf("MLPAddLayerNorm %dx%dx%d", N, C, F), time.Now())
	b.Backend.MLPAddLayerNorm(sum, out, mean, rstd, grad, act, in, w1, b1, w2, b2, x, g, bb, N, C, F, p, seeds, site)
}
func (b *timedBackend) BiasBackward(dbias, dout backend.Tensor, N, C int) {
	defer b.time("BiasBackward", time.Now())
	b.Backend.BiasBackward(dbias, dout, N, C)
}
func (b *timedBackend) GELUBackward(din, in, dout backend.Tensor, n int) {
	defer b.time("GELUBackward", time.Now())
	b.Backend.GELUBackward(din, in, dout, n)
}
func (b *timedBackend) Add(out, x, y backend.Tensor, n int) {
	defer b.time("Add", time.Now())
	b.Backend.Add(out, x, y, n)
}
func (b *timedBackend) Dropout(out, in backend.Tensor, n int, p float32, seeds backend.Tensor, site int) {
	defer b.time("Dropout", time.Now())
	b.Backend.Dropout(out, in, n, p, seeds, site)
}
func (b *timedBackend) DropoutBackward(din, dout backend.Tensor, n int, p float32, seeds backend.Tensor, site int) {
	defer b.time("DropoutBackward", time.Now())
	b.Backend.DropoutBackward(din, dout, n, p, seeds, site)
}
func (b *timedBackend) Mul(out, x, y backend.Tensor, n int) {
	defer b.time("Mul", time.Now())
	b.Backend.Mul(out, x, y, n)
}
func (b *timedBackend) Attention(out, lse, qkv backend.Tensor, B, T, C, NH int) {
	defer b.time("Attention", time.Now())
	b.Backend.Attention(out, lse, qkv, B, T, C, NH)
}
func (b *timedBackend) AttentionBackward(dqkv, dout, qkv, out, lse backend.Tensor, B, T, C, NH int) {
	defer b.time("AttentionBackward", time.Now())
	b.Backend.AttentionBackward(dqkv, dout, qkv, out, lse, B, T, C, NH)
}
func (b *timedBackend) CrossEntropy(losses, dlogits, logits, targets backend.Tensor, N, V int, scale float32) {
	defer b.time("CrossEntropy", time.Now())
	b.Backend.CrossEntropy(losses, dlogits, logits, targets, N, V, scale)
}
func (b *timedBackend) SumSquares(acc, x backend.Tensor, n int) {
	defer b.time("SumSquares", time.Now())
	b.Backend.SumSquares(acc, x, n)
}
func (b *timedBackend) AdamW(p, g, m, v, state backend.Tensor, n int, h backend.AdamParams) {
	defer b.time("AdamW", time.Now())
	b.Backend.AdamW(p, g, m, v, state, n, h)
}
func (b *timedBackend) Zero(t backend.Tensor, n int) {
	defer b.time("Zero", time.Now())
	b.Backend.Zero(t, n)
}

// TestKernelBreakdown prints, for the preset in TINYGPT_PROFILE_PRESET, the wall time per
// training step of each kernel and shape, largest first. It is a measuring tool and skips
// unless that variable is set.
func TestKernelBreakdown(t *testing.T) {
	name := os.Getenv("TINYGPT_PROFILE_PRESET")
	if name == "" {
		t.Skip("set TINYGPT_PROFILE_PRESET=small (for example) to print a per-kernel breakdown")
	}
	p, err := gpt.PresetByName(name)
	if err != nil {
		t.Fatal(err)
	}
	be := &timedBackend{Backend: cpu.New(), total: map[string]time.Duration{}, calls: map[string]int{}}
	step := presetStep(t, be, p)
	for range 3 {
		step()
	}
	clear(be.total)
	clear(be.calls)
	const steps = 20
	start := time.Now()
	for range steps {
		step()
	}
	wall := time.Since(start) / steps
	var names []string
	var sum time.Duration
	for k, d := range be.total {
		names = append(names, k)
		sum += d
	}
	slices.SortFunc(names, func(a, b string) int { return int(be.total[b] - be.total[a]) })
	fmt.Printf("%s on %s: %v per step, %v in kernels\n", name, be.Describe(), wall, sum/steps)
	for _, k := range names {
		fmt.Printf("%10.3f ms %5.1f%% %4d calls  %s\n", float64(be.total[k]/steps)/1e6, 100*float64(be.total[k])/float64(sum), be.calls[k]/steps, k)
	}
}
