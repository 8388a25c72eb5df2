package train

import (
	"fmt"
	"math"

	"tinygpt/gpt"
)

// stepper runs training steps of a model with an optimizer, and keeps the host memory its
// results are read back into.
type stepper struct {
	m      *gpt.Model
	o      *Optimizer
	losses []float32
	sumsq  [1]float32
}

// step runs a training step on batch (dropout p from seed) and the optimizer's update with
// learning rate lr, and returns the step's loss and gradient norm.
//
// The whole step is recorded before anything is read, and both results are read with
// DownloadLater, so that a GPU backend runs the step in pieces as it is recorded and the host
// waits once, at the end. Everything the host writes for the step (the batch, the optimizer's
// learning rate and bias corrections) is written at its start, while the GPU is idle: the
// binding's writes wait for the GPU to finish what was submitted before (docs/performance.md,
// thirty-third session). For the same reason the next step's passes are not recorded before
// this one's results are read.
//
// The backend skips the update when the norm is not finite; a loss that is not finite comes
// from logits that are not, which make the gradients, and so the norm, NaN too. Either way
// the step is undone (o.Step) and the error wraps ErrNotFinite.
func (s *stepper) step(batch gpt.Batch, p float32, seed uint64, lr float32) (loss, norm float64, err error) {
	m, o := s.m, s.o
	o.Begin(lr)
	m.ZeroGrads()
	if err := m.RecordTrainForward(batch, p, seed); err != nil {
		return 0, 0, err
	}
	if err := m.Backward(); err != nil {
		return 0, 0, err
	}
	o.ComputeNorm()
	o.Apply()
	n := batch.B * batch.T
	if cap(s.losses) < n {
		s.losses = make([]float32, n)
	}
	be := m.Backend()
	be.DownloadLater(s.losses[:n], m.TrainLosses(), 0)
	be.DownloadLater(s.sumsq[:], o.state, 0)
	be.Await()
	var sum float64
	for _, v := range s.losses[:n] {
		sum += float64(v)
	}
	loss, norm = sum/float64(n), math.Sqrt(float64(s.sumsq[0]))
	switch {
	case math.IsNaN(loss) || math.IsInf(loss, 0):
		err = fmt.Errorf("training loss is %v at step %d: %w", loss, o.Step, ErrNotFinite)
	case math.IsNaN(norm) || math.IsInf(norm, 0):
		err = fmt.Errorf("gradient norm is %v at step %d: %w", norm, o.Step, ErrNotFinite)
	}
	if err != nil {
		o.Step--
	}
	return loss, norm, err
}
