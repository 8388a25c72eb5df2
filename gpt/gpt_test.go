package gpt_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"tinygpt/backend/cpu"
	"tinygpt/format"
	"tinygpt/gpt"
)

func TestPresetParamCounts(t *testing.T) {
	want := map[string]int{
		"tiny": 70464, "small": 366432, "medium": 838400, "large": 2743296, "xl": 6416896,
		"huge": 9608704, "massive": 25039872, "mega": 25138176, "behemoth": 473244160,
	}
	for _, p := range gpt.Presets {
		if got := p.NumParams(); got != want[p.Name] {
			t.Errorf("%s: %d params, want %d", p.Name, got, want[p.Name])
		}
		ps, _ := gpt.ParamTable(p.Config)
		sum := 0
		for _, q := range ps {
			sum += q.Size
		}
		if sum != p.NumParams() {
			t.Errorf("%s: parameter table holds %d, NumParams %d", p.Name, sum, p.NumParams())
		}
	}
	heads := map[int]int{48: 3, 64: 2, 96: 3, 128: 4, 144: 3, 192: 6, 256: 8, 384: 12, 1280: 20, 320: 10, 33: 3, 7: 1}
	for c, h := range heads {
		if got := gpt.DefaultHeads(c); got != h {
			t.Errorf("DefaultHeads(%d) = %d, want %d", c, got, h)
		}
	}
}

// The parameter table must list tensors exactly as the file format's manifest does.
func TestParamTableMatchesManifest(t *testing.T) {
	for _, p := range gpt.Presets[:6] {
		c := p.Config
		man := format.Manifest(format.Config{Ctx: c.Ctx, Layers: c.Layers, Heads: c.Heads, DModel: c.DModel, DMlp: c.DMlp})
		ps, _ := gpt.ParamTable(c)
		if len(man) != len(ps) {
			t.Fatalf("%s: manifest has %d tensors, table %d", p.Name, len(man), len(ps))
		}
		for i := range ps {
			if man[i].Name != ps[i].Name || man[i].FloatOffset != ps[i].FileOffset || man[i].Size() != ps[i].Size {
				t.Errorf("%s tensor %d: manifest %s@%d, table %s@%d", p.Name, i, man[i].Name, man[i].FloatOffset, ps[i].Name, ps[i].FileOffset)
			}
		}
	}
}

func TestInitStatistics(t *testing.T) {
	c := gpt.Config{Layers: 4, DModel: 64, Heads: 2, Ctx: 16, DMlp: 256}
	w := gpt.InitWeights(c, 3)
	ps, _ := gpt.ParamTable(c)
	for _, p := range ps {
		v := w[p.FileOffset : p.FileOffset+p.Size]
		var s, ss float64
		for _, x := range v {
			s += float64(x)
			ss += float64(x) * float64(x)
		}
		mean, std := s/float64(len(v)), math.Sqrt(ss/float64(len(v)))
		if p.InitStd == 0 {
			if mean != float64(p.InitValue) || std != math.Abs(float64(p.InitValue)) {
				t.Errorf("%s: constant init gave mean %v", p.Name, mean)
			}
			continue
		}
		if math.Abs(std-p.InitStd) > 0.1*p.InitStd || math.Abs(mean) > 0.1*p.InitStd {
			t.Errorf("%s: mean %.4g std %.4g, want 0 and %.4g", p.Name, mean, std, p.InitStd)
		}
	}
	if w2 := gpt.InitWeights(c, 3); w2[100] != w[100] || gpt.InitWeights(c, 4)[100] == w[100] {
		t.Error("initialisation must depend on the seed and only on it")
	}
}

// A random model's loss is about ln 256: it spreads probability evenly.
func TestRandomInitLoss(t *testing.T) {
	p, _ := gpt.PresetByName("tiny")
	m, _ := gpt.New(cpu.New(), p.Config)
	m.SetWeights(gpt.InitWeights(p.Config, 1))
	b := gpt.Batch{B: 4, T: p.Ctx}
	for i := 0; i < b.B*b.T; i++ {
		b.Inputs = append(b.Inputs, int32(i*31%256))
		b.Targets = append(b.Targets, int32(i*17%256))
	}
	loss, err := m.Forward(b)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(loss-math.Log(256)) > 0.05 {
		t.Errorf("random-init loss %.4f, want about ln 256 = 5.545", loss)
	}
}

// An inference pass of the training shape (an evaluation between steps) runs in the training
// workspace: its loss is the same as in a workspace of its own, the gradients of the step
// before it are untouched, and a Backward after it (whose activations it replaced) is refused.
func TestEvalSharesTrainingWorkspace(t *testing.T) {
	p, _ := gpt.PresetByName("tiny")
	b := gpt.Batch{B: 4, T: p.Ctx}
	for i := 0; i < b.B*b.T; i++ {
		b.Inputs = append(b.Inputs, int32(i*31%256))
		b.Targets = append(b.Targets, int32(i*17%256))
	}
	w := gpt.InitWeights(p.Config, 1)
	alone, _ := gpt.New(cpu.New(), p.Config)
	alone.SetWeights(w)
	want, _ := alone.Forward(b)

	m, _ := gpt.New(cpu.New(), p.Config)
	m.SetWeights(w)
	if _, err := m.TrainForward(b, 0, 1); err != nil {
		t.Fatal(err)
	}
	if err := m.Backward(); err != nil {
		t.Fatal(err)
	}
	grads := m.Grads()
	if got, _ := m.Forward(b); got != want {
		t.Errorf("loss in the training workspace %v, alone %v", got, want)
	}
	for i, g := range m.Grads() {
		if g != grads[i] {
			t.Fatalf("gradient %d changed by the inference pass", i)
		}
	}
	m.TrainForward(b, 0, 1)
	m.Forward(b)
	if err := m.Backward(); err == nil {
		t.Errorf("Backward after an inference pass in its workspace was not refused")
	}
	if l := m.TrainLoss(); !math.IsNaN(l) {
		t.Errorf("TrainLoss after an inference pass in its workspace: %v, want NaN", l)
	}
}

func trainedTinyModel(t *testing.T) *gpt.Model {
	t.Helper()
	c := gpt.Config{Layers: 2, DModel: 32, Heads: 2, Ctx: 16, DMlp: 128}
	m, err := gpt.New(cpu.New(), c)
	if err != nil {
		t.Fatal(err)
	}
	// Random weights with a large scale give a peaked, position-sensitive distribution: a
	// stronger test of the cache than a model that predicts nearly the same byte everywhere.
	// The noise makes every LayerNorm's gains and biases its own (at init they are all 1 and
	// 0), so that a pass using one layer's for another's is caught.
	w := gpt.InitWeights(c, 11)
	r := gpt.NewRNG(12)
	for i := range w {
		w[i] = w[i]*8 + float32(0.25*r.Normal())
	}
	m.SetWeights(w)
	return m
}

// The key/value cache must not change a single generated byte, also long after the window
// starts sliding; logits agree to float32 rounding.
func TestCachedGenerationMatchesUncached(t *testing.T) {
	m := trainedTinyModel(t)
	for _, s := range []gpt.Sampling{{Temperature: 0}, {Temperature: 1, TopK: 40}, {Temperature: 0.7, TopP: 0.9}} {
		prompt := []int32("The ")
		n := 5*m.Config.Ctx + 3
		g := m.NewGenerator()
		logits, err := g.Reset(prompt)
		if err != nil {
			t.Fatal(err)
		}
		sa, sb := gpt.NewSampler(s, 9), gpt.NewSampler(s, 9)
		text := append([]int32(nil), prompt...)
		for i := 0; i < n; i++ {
			ref := m.NextLogitsUncached(text)
			for j := range ref {
				// Float32 rounding: the decode path sums in other orders (dot products), and
				// LayerNorm amplifies such differences by 1/std of the residual stream.
				if d := math.Abs(float64(ref[j] - logits[j])); d > 1e-3*(1+math.Abs(float64(ref[j]))) {
					t.Fatalf("%+v: token %d (text length %d): cached logit %d = %v, uncached %v", s, i, len(text), j, logits[j], ref[j])
				}
			}
			a, b := sa.Next(logits), sb.Next(ref)
			if a != b {
				t.Fatalf("%+v: token %d differs: cached %d, uncached %d", s, i, a, b)
			}
			text = append(text, a)
			if logits, err = g.Push(a); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestSampler(t *testing.T) {
	logits := make([]float32, gpt.Vocab)
	logits[7], logits[9], logits[200] = 5, 5, 4.9
	if got := gpt.NewSampler(gpt.Sampling{}, 1).Next(logits); got != 7 {
		t.Errorf("greedy picked %d, want the lower of two equal maxima, 7", got)
	}
	counts := map[int32]int{}
	s := gpt.NewSampler(gpt.Sampling{Temperature: 1, TopK: 2}, 5)
	for i := 0; i < 2000; i++ {
		counts[s.Next(logits)]++
	}
	if len(counts) != 2 || counts[7] < 800 || counts[9] < 800 {
		t.Errorf("top-k 2 drew %v, want only 7 and 9, evenly", counts)
	}
	counts = map[int32]int{}
	s = gpt.NewSampler(gpt.Sampling{Temperature: 1, TopP: 0.2}, 5)
	for i := 0; i < 200; i++ {
		counts[s.Next(logits)]++
	}
	if len(counts) != 1 || counts[7] != 200 {
		t.Errorf("top-p 0.2 drew %v, want only the single most likely token", counts)
	}
	a, b := gpt.NewSampler(gpt.Sampling{Temperature: 1}, 3), gpt.NewSampler(gpt.Sampling{Temperature: 1}, 3)
	for i := 0; i < 100; i++ {
		if a.Next(logits) != b.Next(logits) {
			t.Fatal("the same seed must draw the same tokens")
		}
	}
}

// Generators have their own caches: interleaving two of them, and other passes, changes nothing.
func TestGeneratorsAreIndependent(t *testing.T) {
	m := trainedTinyModel(t)
	g1, g2 := m.NewGenerator(), m.NewGenerator()
	g1.Reset([]int32("ab"))
	g2.Reset([]int32("xyz"))
	m.Forward(gpt.Batch{B: 1, T: m.Config.Ctx, Inputs: make([]int32, m.Config.Ctx)})
	got, _ := g1.Push('c')
	want := m.NextLogitsUncached([]int32("abc"))
	for i := range want {
		if math.Abs(float64(got[i]-want[i])) > 1e-4 {
			t.Fatalf("logit %d: %v after another generator and a pass ran, want %v", i, got[i], want[i])
		}
	}
}

func TestGeneratorRejectsBadTokens(t *testing.T) {
	m := trainedTinyModel(t)
	g := m.NewGenerator()
	if _, err := g.Reset([]int32{300}); err == nil {
		t.Error("Reset accepted token 300")
	}
	if _, err := g.Reset(nil); err != nil {
		t.Errorf("empty prompt: %v", err)
	}
	if _, err := g.Push(-1); err == nil {
		t.Error("Push accepted token -1")
	}
	if _, err := m.Forward(gpt.Batch{B: 1, T: 17, Inputs: make([]int32, 17)}); err == nil {
		t.Error("Forward accepted a sequence longer than ctx")
	}
}

// ---------------------------------------------------------------- files of the original engine

const originalDir = "../../shared/data/original"

type expected struct {
	Greedy struct {
		Prompt string `json:"prompt"`
		MaxNew int    `json:"max_new"`
	} `json:"greedy"`
	Models map[string]struct {
		Greedy struct {
			FromFiles map[string]struct {
				Continuation string `json:"continuation"`
			} `json:"from_files"`
		} `json:"greedy"`
		FixedWindowLosses []struct {
			Offset int                `json:"corpus_offset"`
			Length int                `json:"length"`
			Losses map[string]float64 `json:"-"`
			FP32   float64            `json:"fp32"`
			FP16   float64            `json:"fp16"`
			Int4   float64            `json:"int4"`
		} `json:"fixed_window_losses"`
	} `json:"models"`
}

// Files written by the original TinyGPT load, reproduce its fixed-window losses to 1e-5 and
// its greedy continuations byte for byte.
func TestOriginalFiles(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(originalDir, "expected.json"))
	if err != nil {
		t.Skipf("original fixtures not available: %v", err)
	}
	var exp expected
	if err := json.Unmarshal(raw, &exp); err != nil {
		t.Fatal(err)
	}
	corpus, err := os.ReadFile(filepath.Join(originalDir, "corpus.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for name, mexp := range exp.Models {
		for _, dtype := range []string{"fp32", "fp16", "int4"} {
			file := name + ".tinygpt"
			if dtype != "fp32" {
				file = name + "." + dtype + ".tinygpt"
			}
			f, err := format.ReadFile(filepath.Join(originalDir, file))
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			fc := f.Header.Config
			m, err := gpt.New(cpu.New(), gpt.Config{Layers: fc.Layers, DModel: fc.DModel, Heads: fc.Heads, Ctx: fc.Ctx, DMlp: fc.DMlp})
			if err != nil {
				t.Fatal(err)
			}
			if err := m.SetWeights(f.Weights); err != nil {
				t.Fatal(err)
			}
			for _, w := range mexp.FixedWindowLosses {
				want := map[string]float64{"fp32": w.FP32, "fp16": w.FP16, "int4": w.Int4}[dtype]
				win := corpus[w.Offset : w.Offset+w.Length]
				var b gpt.Batch
				b.B, b.T = 1, len(win)-1
				for i := 0; i < b.T; i++ {
					b.Inputs = append(b.Inputs, int32(win[i]))
					b.Targets = append(b.Targets, int32(win[i+1]))
				}
				loss, err := m.Forward(b)
				if err != nil {
					t.Fatal(err)
				}
				if math.Abs(loss-want) > 1e-5 {
					t.Errorf("%s offset %d: loss %.7f, the original computed %.7f", file, w.Offset, loss, want)
				}
			}
			g := m.NewGenerator()
			logits, err := g.Reset([]int32(exp.Greedy.Prompt))
			if err != nil {
				t.Fatal(err)
			}
			var out []byte
			for i := 0; i < exp.Greedy.MaxNew; i++ {
				tok := gpt.Argmax(logits)
				out = append(out, byte(tok))
				logits, _ = g.Push(tok)
			}
			if want := mexp.Greedy.FromFiles[dtype].Continuation; string(out) != want {
				t.Errorf("%s: greedy continuation\n%q\nwant\n%q", file, out, want)
			}
		}
	}
}

// The flat layout holds a block's q, k and v weights as the column blocks of one [C, 3C]
// matrix (and their biases as one [3C] vector): weights set in file layout come back
// unchanged, and the flat tensor has Wq's row r, then Wk's, then Wv's, side by side.
func TestFlatLayoutQKV(t *testing.T) {
	c := gpt.Config{Layers: 2, DModel: 24, Heads: 3, Ctx: 8, DMlp: 96}
	be := cpu.New()
	m, err := gpt.New(be, c)
	if err != nil {
		t.Fatal(err)
	}
	w := make([]float32, c.NumParams())
	for i := range w {
		w[i] = float32(i)
	}
	if err := m.SetWeights(w); err != nil {
		t.Fatal(err)
	}
	for i, v := range m.Weights() {
		if v != w[i] {
			t.Fatalf("weight %d came back as %v, want %v", i, v, w[i])
		}
	}
	flat := make([]float32, m.FlatSize()) // as the backend holds them
	be.Download(flat, m.WeightsTensor(), 0)
	ps := m.Params
	found := false
	for i, p := range ps {
		if p.Name != "blocks.1.attn.q_proj.weight" {
			continue
		}
		found = true
		C := c.DModel
		for j, name := range []string{"q", "k", "v"} {
			fp := ps[i+2*j]
			for r := range C {
				for col := range C {
					got := flat[p.Offset+r*3*C+j*C+col]
					if want := w[fp.FileOffset+r*C+col]; got != want {
						t.Fatalf("W%s[%d, %d] is at the wrong flat place: %v, want %v", name, r, col, got, want)
					}
				}
			}
		}
	}
	if !found {
		t.Fatal("no blocks.1.attn.q_proj.weight parameter")
	}
}
