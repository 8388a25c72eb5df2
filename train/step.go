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
// loss and gradient norm, with DownloadLater) and finish (wait for them). A caller that knows
// the next step comes straight after this one records the next step and asks for its results
// before it finishes this one (see Trainer.Run). A GPU backend then runs this step while the
// host records the next, and submits the next, the reading back of its results at its end,
// when this one's results are awaited: the GPU never waits for the host between steps.
// Everything the host writes for a step (the batch, the dropout seeds, the optimizer's learning
// rate and bias corrections) is written with its first commands, never in the middle of it:
// the binding's writes wait for the GPU to finish what was submitted before
// (docs/performance.md, thirty-third session), so a GPU backend holds a recorded step back
// until the one before it has run.
type stepper struct {
	m *gpt.Model
	o *Optimizer
	n int // the tokens of the step recorded last
	// asked holds the results of the steps asked for and not finished, oldest first, at
	// most two: asked[(first+i)%2] for i < nasked.
	asked         [2]stepReads
	first, nasked int
}

// stepReads is the host memory a step's results are read back into.
type stepReads struct {
	buf    []float32 // host memory for the losses
	losses []float32 // the step's losses: buf[:its tokens]
	sumsq  [1]float32
}

// readsPerAsk is the number of DownloadLater calls ask makes.
const readsPerAsk = 2

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

// ask asks for the loss and gradient norm of the step recorded last, for finish. At most two
// steps are asked for and not finished.
func (s *stepper) ask() {
	if s.nasked == len(s.asked) {
		panic("train: a third step asked for before the first is finished")
	}
	r := &s.asked[(s.first+s.nasked)%len(s.asked)]
	s.nasked++
	if cap(r.buf) < s.n {
		r.buf = make([]float32, s.n)
	}
	r.losses = r.buf[:s.n]
	be := s.m.Backend()
	be.DownloadLater(r.losses, s.m.TrainLosses(), 0)
	be.DownloadLater(r.sumsq[:], s.o.state, 0)
}

// finish waits for the results of the oldest step asked for and not finished, and returns its
// mean loss and gradient norm; its number is step (for errors). A step asked for after it stays
// in flight.
//
// The backend skips the update when the norm is not finite; a loss that is not finite comes
// from logits that are not, which make the gradients, and so the norm, NaN too. Either way
// the step is undone (o.Step) and the error wraps ErrNotFinite.
func (s *stepper) finish(step int) (loss, norm float64, err error) {
	o := s.o
	r := &s.asked[s.first]
	s.first, s.nasked = (s.first+1)%len(s.asked), s.nasked-1
	s.m.Backend().Await(readsPerAsk * s.nasked)
	var sum float64
	for _, v := range r.losses {
		sum += float64(v)
	}
	loss, norm = sum/float64(len(r.losses)), math.Sqrt(float64(r.sumsq[0]))
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
