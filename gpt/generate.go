package gpt

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"tinygpt/backend"
)

// Generator produces text from a model one token at a time with a key/value cache.
//
// Every token is predicted from the last Ctx tokens placed at positions 0..Ctx−1, exactly as in
// training. While the text is shorter than Ctx each new token costs one single-position pass
// over the cache. Once the window is full it slides by one token per step, which moves every
// token to a new position, so the cache is rebuilt from the window (one pass over Ctx tokens);
// the cost per token stays bounded, so generation is linear in its length.
type Generator struct {
	m      *Model
	ws     *workspace // a B=1, T=Ctx inference workspace; its layers' qkv are the cache
	window []int32    // tokens in the cache, at most Ctx
	cached int        // how many window tokens the cache holds
	logits []float32  // next-token logits for the current window

	// Single-position scratch: the residual stream in x and x2 in turn, the LayerNorms before
	// the attention and the MLP in ln and ln2.
	tok                  backend.Tensor
	x, x2, ln, ln2       backend.Tensor
	qkv, att, fch, fchDG backend.Tensor
	lnMean, lnRs         backend.Tensor
	logitsT              backend.Tensor
}

// NewGenerator returns a generator over m's current weights, with its own cache, so several
// generators and other passes can use one model in turn. Weight updates made later (by
// training) are seen by the next pass.
func (m *Model) NewGenerator() *Generator {
	be, c := m.be, m.Config
	C := c.DModel
	return &Generator{
		m: m, ws: m.newWorkspace(1, c.Ctx, false), logits: make([]float32, Vocab),
		tok: be.AllocInt(1), x: be.Alloc(C), x2: be.Alloc(C), ln: be.Alloc(C), ln2: be.Alloc(C),
		qkv: be.Alloc(3 * C), att: be.Alloc(C), fch: be.Alloc(c.DMlp), fchDG: be.Alloc(c.DMlp),
		lnMean: be.Alloc(1), lnRs: be.Alloc(1), logitsT: be.Alloc(Vocab),
	}
}

// Reset starts over with the given prompt tokens (an empty prompt is a single newline, byte
// 10) and returns the logits for the token that follows. Only the last Ctx prompt tokens are
// used.
func (g *Generator) Reset(prompt []int32) ([]float32, error) {
	if len(prompt) == 0 {
		prompt = []int32{'\n'}
	}
	for _, t := range prompt {
		if t < 0 || t >= Vocab {
			return nil, fmt.Errorf("token %d out of range [0, %d)", t, Vocab)
		}
	}
	if n := g.m.Config.Ctx; len(prompt) > n {
		prompt = prompt[len(prompt)-n:]
	}
	g.window = append(g.window[:0], prompt...)
	g.prefill()
	return g.logits, nil
}

// Push appends token t to the text and returns the logits for the token after it.
func (g *Generator) Push(t int32) ([]float32, error) {
	if t < 0 || t >= Vocab {
		return nil, fmt.Errorf("token %d out of range [0, %d)", t, Vocab)
	}
	if len(g.window) < g.m.Config.Ctx {
		g.window = append(g.window, t)
		g.decode()
		return g.logits, nil
	}
	copy(g.window, g.window[1:])
	g.window[len(g.window)-1] = t
	g.prefill()
	return g.logits, nil
}

// prefill runs the whole window through the network, leaving its keys and values in the
// workspace (the cache) and the last position's logits in g.logits.
func (g *Generator) prefill() {
	n := len(g.window)
	g.m.forward(g.ws, Batch{B: 1, T: n, Inputs: g.window}, 0, 0, false)
	g.m.be.Download(g.logits, g.ws.logits, (n-1)*Vocab)
	g.cached = n
}

// decode runs the newest window token alone at position cached, attending over the cache,
// through the kernels forward runs (each residual add together with the LayerNorm after it).
func (g *Generator) decode() {
	m, be, c := g.m, g.m.be, g.m.Config
	C, F, pos := c.DModel, c.DMlp, g.cached
	w := &m.wv
	be.UploadInt(g.tok, g.window[pos:pos+1])
	be.Encoder(g.x, g.tok, w.wte, w.wpe, 1, 1, pos, C)
	gain, bias := m.normParamsAfter(-1)
	be.LayerNorm(g.ln, g.lnMean, g.lnRs, g.x, gain, bias, 1, C)
	for l := range c.Layers {
		a, lw := &g.ws.layers[l], &w.layers[l]
		m.linear(g.qkv, g.ln, lw.wqkv, lw.bqkv, 1, C, 3*C)
		be.AttentionDecode(g.att, g.qkv, a.qkv, pos, C, c.Heads)
		be.LinearAddLayerNorm(g.x2, g.ln2, g.lnMean, g.lnRs, g.att, lw.wo, lw.bo, g.x, lw.ln2G, lw.ln2B, 1, C, C, 0, nil, 0)
		gain, bias = m.normParamsAfter(l)
		be.MLPAddLayerNorm(g.x, g.ln, g.lnMean, g.lnRs, g.fchDG, g.fch, g.ln2, lw.fcW, lw.fcB, lw.prW, lw.prB,
			g.x2, gain, bias, 1, C, F, 0, nil, 0)
	}
	be.MatMul(g.logitsT, g.ln, w.wte, 1, Vocab, C, backend.NT, false)
	be.Download(g.logits, g.logitsT, 0)
	g.cached = pos + 1
}

// NextLogitsUncached computes the logits that follow text by a full pass over its last Ctx
// tokens, without any cache. It is the reference the cached Generator must agree with.
func (m *Model) NextLogitsUncached(text []int32) []float32 {
	if len(text) == 0 {
		text = []int32{'\n'}
	}
	if len(text) > m.Config.Ctx {
		text = text[len(text)-m.Config.Ctx:]
	}
	ws := m.workspaceFor(1, m.Config.Ctx, false)
	m.forward(ws, Batch{B: 1, T: len(text), Inputs: text}, 0, 0, false)
	out := make([]float32, Vocab)
	m.be.Download(out, ws.logits, (len(text)-1)*Vocab)
	return out
}

// Sampling chooses the next token from logits.
type Sampling struct {
	Temperature float64 // ≤ 0: greedy (the most likely token; ties go to the lower byte)
	TopK        int     // keep the k most likely tokens; ≤ 0 or ≥ 256 keeps all
	TopP        float64 // keep the smallest set whose probability reaches p; ≤ 0 or ≥ 1 keeps all
}

// Sampler draws tokens with a Sampling policy from its own random stream.
type Sampler struct {
	Sampling
	rng   *RNG
	idx   []int
	probs []float64
}

// NewSampler returns a sampler seeded with seed.
func NewSampler(s Sampling, seed uint64) *Sampler {
	return &Sampler{Sampling: s, rng: NewRNG(seed), idx: make([]int, Vocab), probs: make([]float64, Vocab)}
}

// Next picks a token from logits [Vocab].
func (s *Sampler) Next(logits []float32) int32 {
	if s.Temperature <= 0 {
		return Argmax(logits)
	}
	for i := range s.idx {
		s.idx[i] = i
	}
	// Stable sort by descending logit, ties by token, so the candidate set is well defined.
	slices.SortStableFunc(s.idx, func(a, b int) int { return cmp.Compare(logits[b], logits[a]) })
	k := len(s.idx)
	if s.TopK > 0 && s.TopK < k {
		k = s.TopK
	}
	mx := float64(logits[s.idx[0]])
	var sum float64
	for i := 0; i < k; i++ {
		p := math.Exp((float64(logits[s.idx[i]]) - mx) / s.Temperature)
		s.probs[i] = p
		sum += p
	}
	if s.TopP > 0 && s.TopP < 1 {
		var cum float64
		for i := 0; i < k; i++ {
			cum += s.probs[i] / sum
			if cum >= s.TopP {
				k = i + 1
				break
			}
		}
		sum = 0
		for i := 0; i < k; i++ {
			sum += s.probs[i]
		}
	}
	r := s.rng.Float64() * sum
	for i := 0; i < k; i++ {
		r -= s.probs[i]
		if r < 0 {
			return int32(s.idx[i])
		}
	}
	return int32(s.idx[k-1])
}

// Argmax returns the index of the largest logit, the lowest index among equals.
func Argmax(logits []float32) int32 {
	best := 0
	for i, v := range logits {
		if v > logits[best] {
			best = i
		}
	}
	return int32(best)
}
