package train

import (
	"fmt"
	"math"

	"tinygpt/gpt"
)

// stepper runs training steps of a model with an optimizer, and keeps the host memory its
// results are read back into.
//
// A step is three calls: record (its kernels, the optimizer's update included), ask (for its
// loss and gradient norm, with DownloadLater) and finish (wait for them). step makes all three.
// A caller that knows the next step comes straight after this one records the next step
// between this one's ask and finish (see Trainer.Run): a GPU backend then runs this step while
// the host records the next, and submits the next as soon as this one ends, so the GPU does
// not wait for the host between steps. Everything the host writes for a step (the batch, the
// dropout seeds, the optimizer's learning rate and bias corrections) is written with its first
// commands, never in the middle of it: the binding's writes wait for the GPU to finish what was
// submitted before (docs/performance.md, thirty-third session), so a GPU backend holds a
// recorded step back until the one before it has run.
type stepper struct {
	m      *gpt.Model
	o      *Optimizer
	n      int       // the tokens of the step recorded last
	buf    []float32 // host memory for the losses
	losses []float32 // the losses of the step asked for last: buf[:its tokens]
	sumsq  [1]float32
}

// step runs a training step on batch (dropout p from seed) and the optimizer's update with
// learning rate lr, and returns the step's loss and gradient norm (see finish).
func (s *stepper) step(batch gpt.Batch, p float32, seed uint64, lr float32) (loss, norm float64, err error) {
	if err := s.record(batch, p, seed, lr); err != nil {
		return 0, 0, err
	}
	s.ask()
	return s.finish(s.o.Step)
}

// record records a training step on batch (dropout p from seed) and the optimizer's update
// with learning rate lr, and counts it in the optimizer's Step.
func (s *stepper) record(batch gpt.Batch, p float32, seed uint64, lr float32) error {
	m, o := s.m, s.o
	o.Begin(lr)
	m.ZeroGrads()
	if err := m.RecordTrainForward(batch, p, seed); err != nil {
		return err
	}
	if err := m.Backward(); err != nil {
		return err
	}
	o.ComputeNorm()
	o.Apply()
	s.n = batch.B * batch.T
	return nil
}

// ask asks for the loss and gradient norm of the step recorded last, for finish.
func (s *stepper) ask() {
	if cap(s.buf) < s.n {
		s.buf = make([]float32, s.n)
	}
	s.losses = s.buf[:s.n]
	be := s.m.Backend()
	be.DownloadLater(s.losses, s.m.TrainLosses(), 0)
	be.DownloadLater(s.sumsq[:], s.o.state, 0)
}

// finish waits for what ask asked for and returns the mean loss and gradient norm of that
// step, whose number is step (for errors).
//
// The backend skips the update when the norm is not finite; a loss that is not finite comes
// from logits that are not, which make the gradients, and so the norm, NaN too. Either way
// the step is undone (o.Step) and the error wraps ErrNotFinite.
func (s *stepper) finish(step int) (loss, norm float64, err error) {
	o := s.o
	s.m.Backend().Await()
	var sum float64
	for _, v := range s.losses {
		sum += float64(v)
	}
	loss, norm = sum/float64(len(s.losses)), math.Sqrt(float64(s.sumsq[0]))
	switch {
	case math.IsNaN(loss) || math.IsInf(loss, 0):
		err = fmt.Errorf("training loss is %v at step %d: %w", loss, step, ErrNotFinite)
	case math.IsNaN(norm) || math.IsInf(norm, 0):
		err = fmt.Errorf("gradient norm is %v at step %d: %w", norm, step, ErrNotFinite)
	}
	if err != nil {
		o.Step--
	}
	return loss, norm, err
}
