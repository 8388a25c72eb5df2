// Package gpt is the TinyGPT model: a byte-level GPT defined once in terms of the kernels of
// package backend, with its parameter table, initialisation, forward and backward passes, and
// generation with a key/value cache.
//
// The architecture is fixed (it matches the original TinyGPT, so model files interoperate):
// vocabulary of 256 bytes; learned token and position embeddings; Layers pre-LayerNorm blocks of
// causal multi-head attention (separate q, k, v, o projections with bias) and a GELU MLP of
// width DMlp; a final LayerNorm; an output head tied to the token embedding.
package gpt

import (
	"fmt"
	"strings"
)

// Vocab is the vocabulary size: one token per byte value.
const Vocab = 256

// Config is the shape of a model.
type Config struct {
	Layers int // transformer blocks
	DModel int // embedding width C
	Heads  int // attention heads; DModel must be a multiple
	Ctx    int // context length: the most tokens the model sees at once
	DMlp   int // MLP hidden width, 4·DModel for every preset
}

// WithWidth returns c with embedding width d and what goes with a width in every preset: an MLP
// 4·d wide and DefaultHeads(d) heads.
func (c Config) WithWidth(d int) Config {
	c.DModel, c.DMlp, c.Heads = d, 4*d, DefaultHeads(d)
	return c
}

// DefaultHeads is the head count the original chose for a width: about 32 dimensions per head.
func DefaultHeads(dModel int) int {
	switch dModel {
	case 48, 96, 144:
		return 3
	case 64:
		return 2
	case 128:
		return 4
	case 192:
		return 6
	case 256:
		return 8
	case 384:
		return 12
	case 1280:
		return 20
	}
	switch {
	case dModel%32 == 0:
		return dModel / 32
	case dModel%3 == 0:
		return 3
	}
	return 1
}

// Limits on sizes, far above any sensible TinyGPT and low enough that sizes cannot overflow.
const (
	MaxLayers = 1024
	MaxDModel = 1 << 16
	MaxCtx    = 1 << 20
)

// Validate reports whether c describes a model that can be built.
func (c Config) Validate() error {
	switch {
	case c.Layers < 1 || c.Layers > MaxLayers:
		return fmt.Errorf("layers must be between 1 and %d, got %d", MaxLayers, c.Layers)
	case c.DModel < 1 || c.DModel > MaxDModel:
		return fmt.Errorf("d-model must be between 1 and %d, got %d", MaxDModel, c.DModel)
	case c.Heads < 1 || c.DModel%c.Heads != 0:
		return fmt.Errorf("heads must divide d-model %d, got %d", c.DModel, c.Heads)
	case c.Ctx < 1 || c.Ctx > MaxCtx:
		return fmt.Errorf("ctx must be between 1 and %d, got %d", MaxCtx, c.Ctx)
	case c.DMlp < 1 || c.DMlp > 4*MaxDModel:
		return fmt.Errorf("MLP width must be between 1 and %d, got %d", 4*MaxDModel, c.DMlp)
	}
	return nil
}

// NumParams is the number of trainable parameters:
// 256·C + ctx·C + 2·C + L·(4·C² + 2·C·DMlp + 9·C + DMlp), which is
// 256·C + ctx·C + 2·C + L·(12·C² + 13·C) when DMlp = 4·C.
func (c Config) NumParams() int {
	C := c.DModel
	return Vocab*C + c.Ctx*C + 2*C + c.Layers*(4*C*C+2*C*c.DMlp+9*C+c.DMlp)
}

// FLOPsPerToken estimates the floating-point operations of one training step per token
// (forward and backward: 6 per parameter of every matrix product, plus attention).
func (c Config) FLOPsPerToken() float64 {
	C, L := float64(c.DModel), float64(c.Layers)
	matmul := L*(4*C*C+2*C*float64(c.DMlp)) + Vocab*C
	attn := L * float64(c.Ctx) * C // causal: about T/2 keys per query, 2 products, ×2 flops
	return 6*matmul + 6*attn
}

func (c Config) String() string {
	return fmt.Sprintf("%dL d%d %dh ctx%d mlp%d", c.Layers, c.DModel, c.Heads, c.Ctx, c.DMlp)
}

// Preset is a named model size with the original's default batch size and step count.
type Preset struct {
	Name string
	Config
	Batch int
	Steps int
}

func preset(name string, layers, dModel, ctx, batch, steps int) Preset {
	return Preset{Name: name, Batch: batch, Steps: steps,
		Config: Config{Layers: layers, Ctx: ctx}.WithWidth(dModel)}
}

// Presets are the original TinyGPT's model sizes, smallest first.
var Presets = []Preset{
	preset("tiny", 2, 48, 32, 16, 2000),
	preset("small", 3, 96, 64, 16, 1500),
	preset("medium", 4, 128, 96, 16, 1000),
	preset("large", 6, 192, 128, 12, 600),
	preset("xl", 8, 256, 128, 8, 400),
	preset("huge", 12, 256, 256, 8, 1500),
	preset("massive", 14, 384, 256, 4, 1000),
	preset("mega", 14, 384, 512, 2, 800),
	preset("behemoth", 24, 1280, 512, 1, 50),
}

// DefaultPreset is the preset used when none is named.
const DefaultPreset = "small"

// PresetByName finds a preset by its name (case-insensitive).
func PresetByName(name string) (Preset, error) {
	for _, p := range Presets {
		if strings.EqualFold(p.Name, name) {
			return p, nil
		}
	}
	names := make([]string, len(Presets))
	for i, p := range Presets {
		names[i] = p.Name
	}
	return Preset{}, fmt.Errorf("unknown preset %q (have %s)", name, strings.Join(names, ", "))
}
