package train

import (
	"tinygpt/backend"
	"tinygpt/format"
	"tinygpt/gpt"
)

// LoadModel builds a model on be from a decoded file's config and weights, after checking that
// it fits in memory together with passes over batch windows and a generator's workspace.
func LoadModel(be backend.Backend, f *format.File, batch int) (*gpt.Model, error) {
	fc := f.Header.Config
	c := gpt.Config{Layers: fc.Layers, DModel: fc.DModel, Heads: fc.Heads, Ctx: fc.Ctx, DMlp: fc.DMlp}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	need := gpt.MemoryEstimate(c, batch, c.Ctx, false) + gpt.MemoryEstimate(c, 1, c.Ctx, false)
	if backend.OnDevice(be) {
		need = 0 // all on the device, which says so if it is short of memory
	}
	if err := gpt.CheckMemory(need, "model "+c.String()); err != nil {
		return nil, err
	}
	m, err := gpt.New(be, c)
	if err != nil {
		return nil, err
	}
	if err := m.SetWeights(f.Weights); err != nil {
		return nil, err
	}
	return m, nil
}
