package train

import (
	"fmt"
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
	m    *gpt.Model
	be   backend.Backend
	M, V backend.Tensor
	// The two groups of the flat tensors (with and without weight decay): views of the
	// weights, gradients and moments of each, and their sizes.
	groups [2]struct {
		w, g, m, v backend.Tensor
		n          int
		decay      bool
	}
	state backend.Tensor                // backend.AdamState: the gradients' sum of squares, lr, bias corrections
	next  [backend.AdamStateLen]float32 // what Begin writes to state
	host  []float32

	Clip        float32
	WeightDecay float32
	Step        int // updates done so far; the next uses Step+1 for bias correction
}

// NewOptimizer returns an optimizer for m with zero moments.
func NewOptimizer(m *gpt.Model) *Optimizer {
	be := m.Backend()
	o := &Optimizer{m: m, be: be, M: be.Alloc(m.FlatSize()), V: be.Alloc(m.FlatSize()),
		state: be.Alloc(backend.AdamStateLen), host: make([]float32, 1), Clip: GradClip, WeightDecay: WeightDecay}
	split := gpt.DecayEnd(m.Params)
	bounds := [3]int{0, split, m.FlatSize()}
	for i := range o.groups {
		g := &o.groups[i]
		off, n := bounds[i], bounds[i+1]-bounds[i]
		g.n, g.decay = n, i == 0
		if n == 0 {
			continue
		}
		g.w, g.g = be.Slice(m.WeightsTensor(), off, n), be.Slice(m.GradsTensor(), off, n)
		g.m, g.v = be.Slice(o.M, off, n), be.Slice(o.V, off, n)
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
	if len(v) != len(m) {
		return fmt.Errorf("moments of %d and %d values", len(m), len(v))
	}
	if err := o.m.Upload(o.M, m); err != nil {
		return err
	}
	return o.m.Upload(o.V, v)
}

// Moments returns the moments in file layout.
func (o *Optimizer) Moments() (m, v []float32) {
	return o.m.Download(o.M), o.m.Download(o.V)
}

// Update applies one AdamW step with learning rate lr to the model's weights from its
// gradients. The global gradient norm is computed and used on the backend; GradNorm reads it.
func (o *Optimizer) Update(lr float32) {
	o.Begin(lr)
	o.ComputeNorm()
	o.Apply()
}

// Begin starts the next update (step Step+1) with learning rate lr: it writes the step's
// learning rate and bias corrections to the backend and clears the gradients' sum of squares
// (backend.AdamState). A training step calls it first, so that a GPU backend gets these values
// with the step's first commands; ComputeNorm and Apply come after the backward pass.
func (o *Optimizer) Begin(lr float32) {
	o.next = backend.AdamState(lr, Beta1, Beta2, o.Step+1)
	o.be.Upload(o.state, o.next[:])
}

// ComputeNorm computes the global gradient norm on the backend, for Apply (and GradNorm). It
// adds to the sum of squares that Begin cleared.
func (o *Optimizer) ComputeNorm() {
	o.be.SumSquares(o.state, o.m.GradsTensor(), o.m.FlatSize())
}

// Apply applies the AdamW update that Begin started, clipping with the norm of ComputeNorm.
func (o *Optimizer) Apply() {
	o.Step++
	h := backend.AdamParams{Beta1: Beta1, Beta2: Beta2, Eps: Eps, Clip: o.Clip}
	for _, g := range o.groups {
		if g.n == 0 {
			continue
		}
		h.WeightDecay = 0
		if g.decay {
			h.WeightDecay = o.WeightDecay
		}
		// The zero padding between parameters stays zero: its gradient and moments are zero.
		o.be.AdamW(g.w, g.g, g.m, g.v, o.state, g.n, h)
	}
}

// GradNorm returns the global gradient norm (before clipping) of the last ComputeNorm or
// Update. It reads the value back from the backend.
func (o *Optimizer) GradNorm() float64 {
	o.be.Download(o.host, o.state, 0)
	return math.Sqrt(float64(o.host[0]))
}
