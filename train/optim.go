package train

import (
	"math"

	"tinygpt/backend"
	"tinygpt/gpt"
)

// AdamW defaults, as the original TinyGPT.
const (
	Beta1       = 0.9
	Beta2       = 0.95
	Eps         = 1e-8
	WeightDecay = 0.1
	GradClip    = 1.0
)

// Optimizer is AdamW with decoupled weight decay on embeddings and weight matrices only, and
// global-norm gradient clipping. Its moments live on the model's backend, laid out like the
// model's flat weights.
type Optimizer struct {
	m     *gpt.Model
	be    backend.Backend
	M, V  backend.Tensor
	mv    []backend.Tensor // per-parameter views: moment 1 then moment 2 for each parameter
	wv    []backend.Tensor
	gv    []backend.Tensor
	sumsq backend.Tensor
	host  []float32

	Clip        float32
	WeightDecay float32
	Step        int // updates done so far; the next uses Step+1 for bias correction
}

// NewOptimizer returns an optimizer for m with zero moments.
func NewOptimizer(m *gpt.Model) *Optimizer {
	be := m.Backend()
	o := &Optimizer{m: m, be: be, M: be.Alloc(m.FlatSize()), V: be.Alloc(m.FlatSize()),
		sumsq: be.Alloc(1), host: make([]float32, 1), Clip: GradClip, WeightDecay: WeightDecay}
	for _, p := range m.Params {
		o.mv = append(o.mv, be.Slice(o.M, p.Offset, p.Size), be.Slice(o.V, p.Offset, p.Size))
		o.wv = append(o.wv, be.Slice(m.WeightsTensor(), p.Offset, p.Size))
		o.gv = append(o.gv, be.Slice(m.GradsTensor(), p.Offset, p.Size))
	}
	return o
}

// SetMoments loads the moments from file layout (nil means zeros).
func (o *Optimizer) SetMoments(m, v []float32) error {
	if m == nil || v == nil {
		o.be.Zero(o.M, o.m.FlatSize())
		o.be.Zero(o.V, o.m.FlatSize())
		return nil
	}
	fm, err := o.m.ToFlat(m)
	if err != nil {
		return err
	}
	fv, err := o.m.ToFlat(v)
	if err != nil {
		return err
	}
	o.be.Upload(o.M, fm)
	o.be.Upload(o.V, fv)
	return nil
}

// Moments returns the moments in file layout.
func (o *Optimizer) Moments() (m, v []float32) {
	flat := make([]float32, o.m.FlatSize())
	o.be.Download(flat, o.M, 0)
	m = o.m.FromFlat(flat)
	o.be.Download(flat, o.V, 0)
	v = o.m.FromFlat(flat)
	return m, v
}

// Update applies one AdamW step with learning rate lr to the model's weights from its
// gradients. The global gradient norm is computed and used on the backend; GradNorm reads it.
func (o *Optimizer) Update(lr float32) {
	o.ComputeNorm()
	o.Apply(lr)
}

// ComputeNorm computes the global gradient norm on the backend, for Apply (and GradNorm).
func (o *Optimizer) ComputeNorm() {
	o.be.Zero(o.sumsq, 1)
	o.be.SumSquares(o.sumsq, o.m.GradsTensor(), o.m.FlatSize())
}

// Apply applies one AdamW step with learning rate lr, clipping with the norm of the last
// ComputeNorm.
func (o *Optimizer) Apply(lr float32) {
	o.Step++
	h := backend.AdamParams{LR: lr, Beta1: Beta1, Beta2: Beta2, Eps: Eps, Clip: o.Clip, Step: o.Step}
	for i, p := range o.m.Params {
		h.WeightDecay = 0
		if p.Decay {
			h.WeightDecay = o.WeightDecay
		}
		o.be.AdamW(o.wv[i], o.gv[i], o.mv[2*i], o.mv[2*i+1], o.sumsq, p.Size, h)
	}
}

// GradNorm returns the global gradient norm (before clipping) of the last ComputeNorm or
// Update. It reads the value back from the backend.
func (o *Optimizer) GradNorm() float64 {
	o.be.Download(o.host, o.sumsq, 0)
	return math.Sqrt(float64(o.host[0]))
}
