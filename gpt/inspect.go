package gpt

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// TokenProb is a next-token candidate and its probability.
type TokenProb struct {
	Token int32   `json:"token"`
	Prob  float64 `json:"p"`
}

// TopNext returns, for every position of text (at most Ctx tokens), the k most likely next
// tokens with their probabilities (softmax of the model's logits), most likely first, ties
// to the lower token.
func (m *Model) TopNext(text []int32, k int) ([][]TokenProb, error) {
	if err := m.checkInspect(text); err != nil {
		return nil, err
	}
	k = min(max(k, 1), Vocab)
	logits, err := m.Logits(Batch{B: 1, T: len(text), Inputs: text})
	if err != nil {
		return nil, err
	}
	out := make([][]TokenProb, len(text))
	idx := make([]int32, Vocab)
	for t := range text {
		probs := Softmax(logits[t*Vocab : (t+1)*Vocab])
		for i := range idx {
			idx[i] = int32(i)
		}
		slices.SortStableFunc(idx, func(a, b int32) int { return cmp.Compare(probs[b], probs[a]) })
		row := make([]TokenProb, k)
		for i := range row {
			row[i] = TokenProb{Token: idx[i], Prob: probs[idx[i]]}
		}
		out[t] = row
	}
	return out, nil
}

// Softmax returns the probabilities of logits, computed in float64 with the maximum
// subtracted.
func Softmax(logits []float32) []float64 {
	mx := math.Inf(-1)
	for _, v := range logits {
		mx = max(mx, float64(v))
	}
	p := make([]float64, len(logits))
	var sum float64
	for i, v := range logits {
		p[i] = math.Exp(float64(v) - mx)
		sum += p[i]
	}
	for i := range p {
		p[i] /= sum
	}
	return p
}

// AttentionWeights returns the attention probabilities of one layer (0-based) for text (at
// most Ctx tokens), indexed [head][query][key]: row q holds the weights of keys 0..q, which sum
// to 1 (the causal mask leaves later keys out). With head ≥ 0 only that head is returned (the
// result has one entry); with head < 0, every head. The backend's attention kernel never
// materialises these probabilities, so they are computed on the host in float64 from the
// model's weights, by the same network up to that layer; only the requested head's
// probabilities are kept, as float32, so memory grows with T² once, not with heads × layers.
func (m *Model) AttentionWeights(text []int32, layer, head int) ([][][]float32, error) {
	if err := m.checkInspect(text); err != nil {
		return nil, err
	}
	if layer < 0 || layer >= m.Config.Layers {
		return nil, fmt.Errorf("layer %d out of range: the model has layers 0 to %d", layer, m.Config.Layers-1)
	}
	if head >= m.Config.Heads {
		return nil, fmt.Errorf("head %d out of range: the model has heads 0 to %d", head, m.Config.Heads-1)
	}
	h := newHostNet(m)
	x := h.embed(text)
	var att [][][]float32
	for l := 0; l <= layer; l++ {
		keep := keepNone
		if l == layer {
			keep = head // keepAll (-1) when head < 0
			if keep < 0 {
				keep = keepAll
			}
		}
		var probs [][][]float32
		x, probs = h.block(l, x, keep)
		if l == layer {
			att = probs
		}
	}
	return att, nil
}

// Which attention probabilities block keeps: a head index, or one of these.
const (
	keepAll  = -1
	keepNone = -2
)

// hostLogits computes the logits of every position of text on the host in float64; tests
// compare them with the backend's, which checks the host network AttentionWeights uses.
func (m *Model) hostLogits(text []int32) [][]float64 {
	h := newHostNet(m)
	x := h.embed(text)
	for l := range m.Config.Layers {
		x, _ = h.block(l, x, keepNone)
	}
	C := m.Config.DModel
	wte := h.param("token_embedding.weight")
	out := make([][]float64, len(x))
	for t, row := range x {
		ln := layerNorm64(row, h.param("ln_final.weight"), h.param("ln_final.bias"))
		out[t] = make([]float64, Vocab)
		for v := range Vocab {
			var s float64
			for c := range C {
				s += ln[c] * float64(wte[v*C+c])
			}
			out[t][v] = s
		}
	}
	return out
}

func (m *Model) checkInspect(text []int32) error {
	switch {
	case len(text) == 0:
		return fmt.Errorf("the text is empty")
	case len(text) > m.Config.Ctx:
		return fmt.Errorf("the text has %d bytes, more than the model's context of %d", len(text), m.Config.Ctx)
	}
	for _, t := range text {
		if t < 0 || t >= Vocab {
			return fmt.Errorf("token %d out of range [0, %d)", t, Vocab)
		}
	}
	return nil
}

// hostNet is the network on the host, in float64, over the weights in file layout.
type hostNet struct {
	c      Config
	w      []float32
	params map[string]Param
}

func newHostNet(m *Model) *hostNet {
	h := &hostNet{c: m.Config, w: m.Weights(), params: make(map[string]Param, len(m.Params))}
	for _, p := range m.Params {
		h.params[p.Name] = p
	}
	return h
}

func (h *hostNet) param(name string) []float32 {
	p := h.params[name]
	return h.w[p.FileOffset : p.FileOffset+p.Size]
}

func (h *hostNet) embed(text []int32) [][]float64 {
	C := h.c.DModel
	wte, wpe := h.param("token_embedding.weight"), h.param("position_embedding.weight")
	x := make([][]float64, len(text))
	for t, tok := range text {
		x[t] = make([]float64, C)
		for c := range C {
			x[t][c] = float64(wte[int(tok)*C+c]) + float64(wpe[t*C+c])
		}
	}
	return x
}

// block runs transformer block l on x and returns its output and the attention
// probabilities [head][query][key ≤ query] of the heads keep asks for (a head index, keepAll
// or keepNone), in float32.
func (h *hostNet) block(l int, x [][]float64, keep int) ([][]float64, [][][]float32) {
	C, NH, F := h.c.DModel, h.c.Heads, h.c.DMlp
	hd := C / NH
	p := func(s string) []float32 { return h.param(fmt.Sprintf("blocks.%d.%s", l, s)) }
	T := len(x)
	q, k, v := make([][]float64, T), make([][]float64, T), make([][]float64, T)
	for t := range T {
		ln := layerNorm64(x[t], p("ln1.weight"), p("ln1.bias"))
		q[t] = linear64(ln, p("attn.q_proj.weight"), p("attn.q_proj.bias"), C, C)
		k[t] = linear64(ln, p("attn.k_proj.weight"), p("attn.k_proj.bias"), C, C)
		v[t] = linear64(ln, p("attn.v_proj.weight"), p("attn.v_proj.bias"), C, C)
	}
	scale := 1 / math.Sqrt(float64(hd))
	var probs [][][]float32
	att := make([][]float64, T)
	for t := range T {
		att[t] = make([]float64, C)
	}
	scratch := make([]float64, T)
	for hh := range NH {
		var kept [][]float32
		if keep == keepAll || keep == hh {
			kept = make([][]float32, T)
		}
		lo := hh * hd
		for i := range T {
			row := scratch[:i+1]
			mx := math.Inf(-1)
			for j := 0; j <= i; j++ {
				var s float64
				for d := lo; d < lo+hd; d++ {
					s += q[i][d] * k[j][d]
				}
				row[j] = s * scale
				mx = max(mx, row[j])
			}
			var sum float64
			for j := range row {
				row[j] = math.Exp(row[j] - mx)
				sum += row[j]
			}
			for j := range row {
				row[j] /= sum
				for d := lo; d < lo+hd; d++ {
					att[i][d] += row[j] * v[j][d]
				}
			}
			if kept != nil {
				k := make([]float32, len(row))
				for j, p := range row {
					k[j] = float32(p)
				}
				kept[i] = k
			}
		}
		if kept != nil {
			probs = append(probs, kept)
		}
	}
	out := make([][]float64, T)
	for t := range T {
		o := linear64(att[t], p("attn.o_proj.weight"), p("attn.o_proj.bias"), C, C)
		r := make([]float64, C)
		for c := range C {
			r[c] = x[t][c] + o[c]
		}
		ln := layerNorm64(r, p("ln2.weight"), p("ln2.bias"))
		f := linear64(ln, p("mlp.fc_in.weight"), p("mlp.fc_in.bias"), C, F)
		for i := range f {
			f[i] = 0.5 * f[i] * (1 + math.Erf(f[i]/math.Sqrt2))
		}
		mo := linear64(f, p("mlp.fc_out.weight"), p("mlp.fc_out.bias"), F, C)
		for c := range C {
			r[c] += mo[c]
		}
		out[t] = r
	}
	return out, probs
}

// layerNorm64 normalises x (biased variance, eps 1e-5) and applies gain g and bias b.
func layerNorm64(x []float64, g, b []float32) []float64 {
	var mean, vr float64
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	for _, v := range x {
		vr += (v - mean) * (v - mean)
	}
	vr /= float64(len(x))
	rs := 1 / math.Sqrt(vr+1e-5)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = (v-mean)*rs*float64(g[i]) + float64(b[i])
	}
	return out
}

// linear64 computes x·W + b with W stored [in, out].
func linear64(x []float64, w, b []float32, in, out int) []float64 {
	y := make([]float64, out)
	for o := range out {
		y[o] = float64(b[o])
	}
	for i := range in {
		xi := x[i]
		row := w[i*out : (i+1)*out]
		for o, wv := range row {
			y[o] += xi * float64(wv)
		}
	}
	return y
}
