package gpt

import (
	"math"
	"testing"

	"tinygpt/backend/cpu"
)

// inspectModel is a small model with weights large enough that attention is far from uniform.
func inspectModel(t *testing.T) *Model {
	t.Helper()
	c := Config{Layers: 2, DModel: 32, Heads: 4, Ctx: 12, DMlp: 128}
	m, err := New(cpu.New(), c)
	if err != nil {
		t.Fatal(err)
	}
	w := InitWeights(c, 11)
	for i := range w {
		w[i] *= 15
	}
	if err := m.SetWeights(w); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestHostNetworkMatchesBackendLogits(t *testing.T) {
	m := inspectModel(t)
	text := []int32{'H', 'e', 'l', 'l', 'o', ',', ' ', 'w', 'o', 'r', 'l', 'd'}
	want, err := m.Logits(Batch{B: 1, T: len(text), Inputs: text})
	if err != nil {
		t.Fatal(err)
	}
	got := m.hostLogits(text)
	var worst float64
	for p := range text {
		for v := range Vocab {
			d := math.Abs(got[p][v] - float64(want[p*Vocab+v]))
			worst = max(worst, d/(1+math.Abs(float64(want[p*Vocab+v]))))
		}
	}
	if worst > 1e-4 {
		t.Fatalf("host logits differ from the backend's by %g (relative)", worst)
	}
}

func TestTopNextIsSoftmaxOfLogits(t *testing.T) {
	m := inspectModel(t)
	text := []int32{'a', 'b', 'c', ' ', 'a', 'b'}
	top, err := m.TopNext(text, 10)
	if err != nil {
		t.Fatal(err)
	}
	logits, _ := m.Logits(Batch{B: 1, T: len(text), Inputs: text})
	if len(top) != len(text) {
		t.Fatalf("%d positions, want %d", len(top), len(text))
	}
	for p, row := range top {
		lg := logits[p*Vocab : (p+1)*Vocab]
		var z float64
		mx := float64(lg[Argmax(lg)])
		for _, v := range lg {
			z += math.Exp(float64(v) - mx)
		}
		if len(row) != 10 || row[0].Token != Argmax(lg) {
			t.Fatalf("position %d: %d candidates, first %d, want 10 and argmax %d", p, len(row), row[0].Token, Argmax(lg))
		}
		for i, c := range row {
			want := math.Exp(float64(lg[c.Token])-mx) / z
			if math.Abs(c.Prob-want) > 1e-12 {
				t.Errorf("position %d candidate %d: p = %g, softmax gives %g", p, i, c.Prob, want)
			}
			if i > 0 && c.Prob > row[i-1].Prob {
				t.Errorf("position %d: candidates not in descending order", p)
			}
		}
		// No token outside the top 10 is more likely than the tenth.
		in := map[int32]bool{}
		for _, c := range row {
			in[c.Token] = true
		}
		for v := range Vocab {
			if !in[int32(v)] && lg[v] > lg[row[9].Token] {
				t.Errorf("position %d: token %d (logit %g) beats the tenth candidate", p, v, lg[v])
			}
		}
	}
}

func TestAttentionWeights(t *testing.T) {
	m := inspectModel(t)
	text := []int32{'t', 'h', 'e', ' ', 'c', 'a', 't', ' ', 's', 'a', 't'}
	for layer := range m.Config.Layers {
		att, err := m.AttentionWeights(text, layer, -1)
		if err != nil {
			t.Fatal(err)
		}
		if len(att) != m.Config.Heads {
			t.Fatalf("%d heads, want %d", len(att), m.Config.Heads)
		}
		peaked := false
		for h, rows := range att {
			if len(rows) != len(text) {
				t.Fatalf("head %d: %d rows, want %d", h, len(rows), len(text))
			}
			for q, row := range rows {
				if len(row) != q+1 {
					t.Fatalf("layer %d head %d query %d: %d keys, want %d (causal)", layer, h, q, len(row), q+1)
				}
				var s float64
				for _, p := range row {
					if p < 0 || p > 1 {
						t.Fatalf("probability %g out of [0, 1]", p)
					}
					s += float64(p)
					if q > 2 && p > 0.9 {
						peaked = true
					}
				}
				if math.Abs(s-1) > 1e-5 {
					t.Errorf("layer %d head %d query %d: weights sum to %g", layer, h, q, s)
				}
			}
		}
		if !peaked {
			t.Errorf("layer %d: attention is nowhere peaked; the test model is too uniform to check anything", layer)
		}
		for h := range m.Config.Heads {
			one, err := m.AttentionWeights(text, layer, h)
			if err != nil {
				t.Fatal(err)
			}
			if len(one) != 1 {
				t.Fatalf("head %d alone: %d heads returned, want 1", h, len(one))
			}
			for q, row := range one[0] {
				for k, p := range row {
					if p != att[h][q][k] {
						t.Fatalf("layer %d head %d [%d][%d]: %g alone, %g with every head", layer, h, q, k, p, att[h][q][k])
					}
				}
			}
		}
	}
}

func TestInspectBadInput(t *testing.T) {
	m := inspectModel(t)
	if _, err := m.AttentionWeights([]int32{1, 2}, 2, -1); err == nil {
		t.Error("layer 2 of a 2-layer model: no error")
	}
	if _, err := m.AttentionWeights([]int32{1, 2}, 0, m.Config.Heads); err == nil {
		t.Error("head past the last: no error")
	}
	if _, err := m.AttentionWeights(nil, 0, -1); err == nil {
		t.Error("empty text: no error")
	}
	if _, err := m.TopNext(make([]int32, 13), 10); err == nil {
		t.Error("text longer than ctx: no error")
	}
	if _, err := m.TopNext([]int32{300}, 10); err == nil {
		t.Error("token 300: no error")
	}
}
