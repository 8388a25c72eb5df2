package gpt

import (
	"fmt"
	"math"
	"strings"

	"tinygpt/backend"
)

// Param describes one parameter tensor.
type Param struct {
	Name       string  // PyTorch-style name, as in the .tinygpt manifest
	Shape      []int   // as stored: linear weights are [in, out] (y = x·W + b)
	Size       int     // number of elements
	Offset     int     // element offset in the model's flat parameter tensor (see ParamTable)
	Stride     int     // flat row stride of a weight stored as a column block (q, k, v); 0: contiguous
	FileOffset int     // element offset in the .tinygpt weights, which are packed back to back
	Decay      bool    // AdamW applies weight decay (embeddings and weight matrices)
	InitStd    float64 // standard deviation of the normal initialisation; 0 for constants
	InitValue  float32 // the constant of a non-random parameter (1 for LayerNorm gains, else 0)
}

// ParamTable lists c's parameters in file order: token_embedding, position_embedding,
// ln_final weight and bias, then per block ln1, q, k, v, o projections, ln2, fc_in, fc_out.
// The second result is the size of the flat tensor holding them all. In the flat tensor the
// parameters with weight decay come first (so that the optimizer updates each group in one
// pass; see DecayEnd), each group in file order, each offset rounded up to backend.SliceAlign,
// except that a block's q, k and v projections are one [C, 3C] weight (each projection a
// column block, with Stride 3C) and one [3C] bias, so that they are one matrix product.
func ParamTable(c Config) ([]Param, int) {
	ps, flat, _ := paramTable(c, 0)
	return ps, flat
}

// paramTable is ParamTable for a backend that stores tensors in pieces of segment elements
// (backend.Backend.SegmentLen; 0 for none): a parameter that would cross the end of a piece
// starts at the next one instead. It fails if a parameter is longer than a piece.
func paramTable(c Config, segment int) ([]Param, int, error) {
	C, L := c.DModel, c.Layers
	std := 0.02
	projStd := 0.02 / math.Sqrt(2*float64(L))
	var ps []Param
	fileOff := 0
	add := func(name string, shape []int, decay bool, initStd float64, initValue float32) {
		n := 1
		for _, d := range shape {
			n *= d
		}
		ps = append(ps, Param{Name: name, Shape: shape, Size: n, FileOffset: fileOff,
			Decay: decay, InitStd: initStd, InitValue: initValue})
		fileOff += n
	}
	weight := func(name string, in, out int, initStd float64) {
		add(name+".weight", []int{in, out}, true, initStd, 0)
		add(name+".bias", []int{out}, false, 0, 0)
	}
	norm := func(name string) {
		add(name+".weight", []int{C}, false, 0, 1)
		add(name+".bias", []int{C}, false, 0, 0)
	}
	add("token_embedding.weight", []int{Vocab, C}, true, std, 0)
	add("position_embedding.weight", []int{c.Ctx, C}, true, std, 0)
	norm("ln_final")
	for l := 0; l < L; l++ {
		p := fmt.Sprintf("blocks.%d.", l)
		norm(p + "ln1")
		weight(p+"attn.q_proj", C, C, std)
		weight(p+"attn.k_proj", C, C, std)
		weight(p+"attn.v_proj", C, C, std)
		weight(p+"attn.o_proj", C, C, projStd)
		norm(p + "ln2")
		weight(p+"mlp.fc_in", C, c.DMlp, std)
		weight(p+"mlp.fc_out", c.DMlp, C, projStd)
	}
	for i := range ps {
		ps[i].Offset = -1
	}
	off := 0
	// place returns where n elements go: off, or the start of the next piece if they would
	// cross a piece's end.
	place := func(name string, n int) (int, error) {
		if segment <= 0 || off/segment == (off+n-1)/segment {
			return off, nil
		}
		if n > segment {
			return 0, fmt.Errorf("parameter %s has %d elements (%.1f MB), more than the %d (%.1f MB) of one buffer of this backend",
				name, n, float64(n)/(1<<18), segment, float64(segment)/(1<<18))
		}
		return (off/segment + 1) * segment, nil
	}
	for _, decay := range []bool{true, false} {
		for i := 0; i < len(ps); i++ {
			if ps[i].Decay != decay || ps[i].Offset >= 0 {
				continue
			}
			if strings.HasSuffix(ps[i].Name, ".attn.q_proj.weight") || strings.HasSuffix(ps[i].Name, ".attn.q_proj.bias") {
				// q, k and v (each a weight and a bias apart in file order) side by side.
				at, err := place(ps[i].Name, 3*ps[i].Size)
				if err != nil {
					return nil, 0, err
				}
				for j := range 3 {
					p := &ps[i+2*j]
					p.Offset = at + j*C
					if len(p.Shape) == 2 {
						p.Stride = 3 * C
					}
				}
				off = at + alignUp(3*ps[i].Size)
				continue
			}
			at, err := place(ps[i].Name, ps[i].Size)
			if err != nil {
				return nil, 0, err
			}
			ps[i].Offset = at
			off = at + alignUp(ps[i].Size)
		}
	}
	return ps, off, nil
}

// LargestParam is the number of elements of c's largest parameter tensor, as a backend holds it
// (q, k and v as one), the most that must fit in one buffer.
func LargestParam(c Config) int {
	ps, _ := ParamTable(c)
	n := 0
	for _, p := range ps {
		if p.Stride != 0 {
			n = max(n, 3*p.Size) // q with k and v beside it
		}
		n = max(n, p.Size)
	}
	return n
}

// alignUp rounds n up to a multiple of backend.SliceAlign.
func alignUp(n int) int {
	return (n + backend.SliceAlign - 1) / backend.SliceAlign * backend.SliceAlign
}

// runs calls f(file, flat, n) for each run of n of p's elements that are consecutive both in
// the file layout (from element file) and in the flat one (from element flat), limited to the
// flat elements [lo, hi): the whole parameter, or each row of a column block.
func (p Param) runs(lo, hi int, f func(file, flat, n int)) {
	rows, cols, stride := 1, p.Size, 0
	if p.Stride != 0 {
		rows, cols, stride = p.Shape[0], p.Shape[1], p.Stride
	}
	for r := range rows {
		a := p.Offset + r*stride
		if s, e := max(a, lo), min(a+cols, hi); s < e {
			f(p.FileOffset+r*cols+s-a, s, e-s)
		}
	}
}

// span is the number of flat elements from p's first to its last.
func (p Param) span() int {
	if p.Stride == 0 {
		return p.Size
	}
	return (p.Shape[0]-1)*p.Stride + p.Shape[1]
}

// DecayEnd returns the flat offset where the parameters without weight decay begin: the flat
// tensor's elements before it belong to parameters with decay (or are zero padding).
func DecayEnd(ps []Param) int {
	end := 0
	for _, p := range ps {
		if p.Decay {
			end = max(end, p.Offset+alignUp(p.span()))
		}
	}
	return end
}

// tensors are views of one flat tensor (weights, gradients, or a moment) per parameter, named
// for the forward pass.
type tensors struct {
	wte, wpe   backend.Tensor
	lnfG, lnfB backend.Tensor
	layers     []layerTensors
}

type layerTensors struct {
	ln1G, ln1B backend.Tensor
	wqkv, bqkv backend.Tensor // q, k, v projections: [C, 3C] and [3C] (see ParamTable)
	wo, bo     backend.Tensor
	ln2G, ln2B backend.Tensor
	fcW, fcB   backend.Tensor // fc_in  [C, DMlp]
	prW, prB   backend.Tensor // fc_out [DMlp, C]
}

// views cuts flat into per-parameter views, in ParamTable order (q, k and v as one of each).
func views(be backend.Backend, flat backend.Tensor, ps []Param, layers int) tensors {
	v := make([]backend.Tensor, len(ps))
	for i, p := range ps {
		if strings.Contains(p.Name, ".attn.k_proj.") || strings.Contains(p.Name, ".attn.v_proj.") {
			continue // within q's
		}
		n := p.Size
		if strings.Contains(p.Name, ".attn.q_proj.") {
			n *= 3
		}
		v[i] = be.Slice(flat, p.Offset, n)
	}
	t := tensors{wte: v[0], wpe: v[1], lnfG: v[2], lnfB: v[3], layers: make([]layerTensors, layers)}
	for l := range t.layers {
		b := v[4+16*l:]
		t.layers[l] = layerTensors{
			ln1G: b[0], ln1B: b[1], wqkv: b[2], bqkv: b[3],
			wo: b[8], bo: b[9], ln2G: b[10], ln2B: b[11], fcW: b[12], fcB: b[13], prW: b[14], prB: b[15],
		}
	}
	return t
}

// RNG is the random stream of initialisation: SplitMix64, with normal deviates by the
// Box–Muller transform (both values of each pair are used). It is defined here, rather than
// taken from math/rand, so that a seed gives the same model on every platform and Go version.
type RNG struct {
	state   uint64
	spare   float64
	hasNext bool
}

// NewRNG returns a stream seeded with seed.
func NewRNG(seed uint64) *RNG { return &RNG{state: seed} }

// Uint64 returns the next 64 random bits.
func (r *RNG) Uint64() uint64 {
	r.state += 0x9E3779B97F4A7C15
	return Mix64(r.state)
}

// Float64 returns a uniform value in [0, 1).
func (r *RNG) Float64() float64 { return float64(r.Uint64()>>11) * (1.0 / (1 << 53)) }

// Normal returns a standard normal deviate.
func (r *RNG) Normal() float64 {
	if r.hasNext {
		r.hasNext = false
		return r.spare
	}
	u1 := 1 - r.Float64() // (0, 1]
	u2 := r.Float64()
	rad := math.Sqrt(-2 * math.Log(u1))
	r.spare = rad * math.Sin(2*math.Pi*u2)
	r.hasNext = true
	return rad * math.Cos(2*math.Pi*u2)
}

// Mix64 is SplitMix64's output function: a fast, well-mixed hash of x.
func Mix64(x uint64) uint64 {
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
	x = (x ^ (x >> 27)) * 0x94D049BB133111EB
	return x ^ (x >> 31)
}

// InitWeights returns freshly initialised weights for c in file layout (packed back to back,
// ParamTable order): N(0, 0.02) for embeddings, q, k, v and fc_in; N(0, 0.02/sqrt(2L)) for the
// o and fc_out projections; LayerNorm gains 1; biases 0. Normal deviates are drawn from one
// stream seeded with seed, in the order token embedding, position embedding, then per layer
// Wq, Wk, Wv, Wo, fc_in, fc_out, each tensor in storage order.
func InitWeights(c Config, seed uint64) []float32 {
	ps, _ := ParamTable(c)
	w := make([]float32, c.NumParams())
	rng := NewRNG(seed)
	for _, p := range ps {
		dst := w[p.FileOffset : p.FileOffset+p.Size]
		if p.InitStd == 0 {
			for i := range dst {
				dst[i] = p.InitValue
			}
			continue
		}
		for i := range dst {
			dst[i] = float32(rng.Normal() * p.InitStd)
		}
	}
	return w
}
