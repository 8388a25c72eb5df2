package webgpu

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"tinygpt/backend"
	"tinygpt/backend/cpu"
	"tinygpt/backend/webgpu/internal/gpu"
	"tinygpt/data"
	"tinygpt/gpt"
	"tinygpt/train"
)

// Whole-model tests: the same run on both backends must follow the same loss trajectory, the
// GPU must overfit a short text, and a checkpoint saved on one backend resumes on the other.

func trajectoryOptions() train.Options {
	p, _ := gpt.PresetByName("tiny")
	o := train.DefaultOptions(p)
	o.Model = gpt.Config{Layers: 2, DModel: 48, Heads: 3, Ctx: 32, DMlp: 192}
	o.Batch, o.Steps, o.LR = 4, 50, 3e-3
	o.Schedule, o.Warmup, o.MinLR, o.Dropout = train.Cosine, 5, 3e-4, 0.1
	return o
}

func trajectoryCorpus() data.Corpus {
	return data.Builtin()
}

func runSteps(t *testing.T, tr *train.Trainer, n int) []train.StepResult {
	t.Helper()
	var out []train.StepResult
	for range n {
		r, err := tr.TrainStep()
		if err != nil {
			if g, ok := tr.Model.Backend().(*Backend); ok && g.Err() != nil {
				err = fmt.Errorf("%w (backend: %v)", err, g.Err())
			}
			t.Fatalf("step %d on %s: %v", tr.Step()+1, tr.Model.Backend().Name(), err)
		}
		out = append(out, r)
	}
	return out
}

// bothTrainers returns trainers of the same run on the CPU and on the GPU g.
func bothTrainers(t *testing.T, g *Backend, o train.Options, corpus data.Corpus) (onCPU, onGPU *train.Trainer) {
	t.Helper()
	tc, err := train.New(cpu.New(), o, corpus)
	if err != nil {
		t.Fatal(err)
	}
	tg, err := train.New(g, o, corpus)
	if err != nil {
		t.Fatal(err)
	}
	return tc, tg
}

// sameRun reports each step at which the GPU run's loss or gradient norm differs from the CPU
// run's by more than tol relative, or the step numbers differ, and returns the worst relative
// difference of the losses.
func sameRun(t *testing.T, gpu, cpu []train.StepResult, tol float64) float64 {
	t.Helper()
	worst := 0.0
	for i, c := range cpu {
		g := gpu[i]
		rel := math.Abs(g.Loss-c.Loss) / math.Abs(c.Loss)
		worst = math.Max(worst, rel)
		if rel > tol || g.Step != c.Step {
			t.Errorf("step %d: gpu loss %.6f (step %d), cpu %.6f (relative difference %.2g, tolerance %.0g)", c.Step, g.Loss, g.Step, c.Loss, rel, tol)
		}
		if d := math.Abs(g.GradNorm-c.GradNorm) / c.GradNorm; d > tol {
			t.Errorf("step %d: gpu grad norm %.6f, cpu %.6f", c.Step, g.GradNorm, c.GradNorm)
		}
	}
	return worst
}

// Same seed, same data: the GPU and CPU runs must agree to float32 reordering noise at every
// one of 50 steps (dropout, cosine schedule with warmup and clipping included). The issue asks
// for 1e-3 relative; the test holds both runs to DESIGN.md's 1e-4 (lavapipe measures 4e-8),
// which also catches a missing clip (1e-3 after a few clipped steps).
func TestTrajectoryMatchesCPU(t *testing.T) {
	g := openGPU(t)
	o := trajectoryOptions()
	corpus := trajectoryCorpus()
	tc, tg := bothTrainers(t, g, o, corpus)
	rc := runSteps(t, tc, o.Steps)
	rg := runSteps(t, tg, o.Steps)
	worst := sameRun(t, rg, rc, 1e-4)
	clipped := 0
	for _, r := range rc {
		if r.GradNorm > float64(o.Clip) {
			clipped++
		}
	}
	t.Logf("loss %.4f → %.4f (cpu %.4f), worst relative difference %.2g; %d steps clipped", rg[0].Loss, rg[len(rg)-1].Loss, rc[len(rc)-1].Loss, worst, clipped)
	if clipped == 0 {
		t.Errorf("no step was clipped; the test does not cover clipping")
	}
	if !(rc[len(rc)-1].Loss < rc[0].Loss-0.5) {
		t.Errorf("the loss fell only from %.4f to %.4f; the run does not learn", rc[0].Loss, rc[len(rc)-1].Loss)
	}
}

// Once its kernels' parameter blocks exist, a training step (dropout included) writes to the
// device only with its first submit: the learning rate, the batch and the dropout seeds. The
// binding makes every submit that carries writes wait until the GPU has finished the work
// before it (gpu.Stats), so a write later in a step would leave the GPU idle. Each step here
// starts with the GPU idle, so its data goes through the upload arena (gpu.Device.Write); with
// the data in upload pages, as when a step is recorded while the one before it runs, the steps
// make no queued writes at all, and the same losses, gradient norms and weights.
func TestStepWritesOnlyAtItsStart(t *testing.T) {
	g := openGPU(t)
	o := trajectoryOptions()
	tr, err := train.New(g, o, trajectoryCorpus())
	if err != nil {
		t.Fatal(err)
	}
	runSteps(t, tr, 3)
	g.dev.ResetStats()
	const n = 5
	want := runSteps(t, tr, n)
	if s := g.dev.Stats(); s.WriteSubmits != n {
		t.Errorf("%d steps made %d submits with writes (of %d submits, %d dispatches), want one each", n, s.WriteSubmits, s.Submits, s.Dispatches)
	}

	defer func() { gpu.ForceUpload = "" }()
	gpu.ForceUpload = "page"
	tp, err := train.New(g, o, trajectoryCorpus())
	if err != nil {
		t.Fatal(err)
	}
	runSteps(t, tp, 3)
	g.dev.ResetStats()
	got := runSteps(t, tp, n)
	if s := g.dev.Stats(); s.WriteSubmits != 0 || s.Writes < 2*n {
		t.Errorf("through upload pages, %d steps made %d submits with queued writes (of %d submits) and %d staged writes, want none and at least %d",
			n, s.WriteSubmits, s.Submits, s.Writes, 2*n)
	}
	for i := range got {
		if got[i].Loss != want[i].Loss || got[i].GradNorm != want[i].GradNorm {
			t.Errorf("step %d through upload pages: loss %v, norm %v; through the arena %v, %v", i+4, got[i].Loss, got[i].GradNorm, want[i].Loss, want[i].GradNorm)
		}
	}
	if !slices.Equal(tp.Model.Weights(), tr.Model.Weights()) {
		t.Errorf("the weights after %d steps through upload pages differ from those through the arena", n+3)
	}
}

// Run records each step while the GPU runs the one before, where nothing comes between the
// two (train.Trainer.Run): the steps are bit for bit those of one TrainStep after another.
func TestRunAheadMatchesTrainStep(t *testing.T) {
	g := openGPU(t)
	o := trajectoryOptions()
	o.Steps, o.EvalEvery = 12, 5
	var got []train.StepResult
	a, err := train.New(g, o, trajectoryCorpus())
	if err != nil {
		t.Fatal(err)
	}
	err = a.Run(context.Background(), train.RunOptions{OnEvent: func(e train.Event) {
		if e.Kind == "step" {
			got = append(got, train.StepResult{Step: e.Step, Loss: e.Loss, GradNorm: e.GradNorm, LR: e.LR})
		}
	}})
	if err != nil {
		t.Fatalf("Run: %v (backend: %v)", err, g.Err())
	}
	b, err := train.New(g, o, trajectoryCorpus())
	if err != nil {
		t.Fatal(err)
	}
	want := runSteps(t, b, o.Steps)
	if len(got) != len(want) {
		t.Fatalf("Run reported %d steps, want %d", len(got), len(want))
	}
	for i, w := range want {
		w.Duration = 0
		if got[i] != w {
			t.Errorf("step %d: Run %+v, TrainStep %+v", i+1, got[i], w)
		}
	}
	wa, wb := a.Model.Weights(), b.Model.Weights()
	for i := range wb {
		if wa[i] != wb[i] {
			t.Fatalf("weight %d: %v after Run, %v after TrainStep", i, wa[i], wb[i])
		}
	}
}

// The overfit gate on the GPU: a small model on a short repeated text goes from about ln 256 to
// below 0.5. (Smaller than the CPU gate's tiny preset, so that lavapipe runs it in seconds.)
func TestOverfitGateGPU(t *testing.T) {
	g := openGPU(t)
	p, _ := gpt.PresetByName("tiny")
	o := train.DefaultOptions(p)
	o.Model = gpt.Config{Layers: 2, DModel: 32, Heads: 2, Ctx: 16, DMlp: 128}
	o.Batch, o.Steps, o.LR = 8, 80, 6e-3
	text := strings.Repeat("the cat sat on the mat. ", 40)
	tr, err := train.New(g, o, data.Corpus{Text: []byte(text), Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	rs := runSteps(t, tr, o.Steps)
	first, last := rs[0].Loss, rs[len(rs)-1].Loss
	t.Logf("loss %.4f → %.4f", first, last)
	if math.Abs(first-math.Log(256)) > 0.1 {
		t.Errorf("first loss %.4f, want about ln 256 = 5.545", first)
	}
	if !(last < 0.5) {
		t.Errorf("after %d steps the loss is %.4f, want < 0.5", o.Steps, last)
	}
	v, err := tr.Evaluate(context.Background())
	if err != nil || math.IsNaN(v) {
		t.Fatalf("validation on the GPU: %v, %v", v, err)
	}
}

// A checkpoint written on one backend resumes on the other: 10 steps on the GPU, saved, then
// 10 more on the CPU (and the reverse), agree with 20 straight steps on the CPU.
func TestCheckpointCrossBackend(t *testing.T) {
	g := openGPU(t)
	o := trajectoryOptions()
	o.Steps = 20
	corpus := trajectoryCorpus()
	straight, err := train.New(cpu.New(), o, corpus)
	if err != nil {
		t.Fatal(err)
	}
	want := runSteps(t, straight, 20)
	for _, order := range [][2]backend.Backend{{g, cpu.New()}, {cpu.New(), g}} {
		first, err := train.New(order[0], o, corpus)
		if err != nil {
			t.Fatal(err)
		}
		runSteps(t, first, 10)
		f, err := first.File(order[0].Name())
		if err != nil {
			t.Fatal(err)
		}
		second, err := train.Resume(order[1], f, train.ResumeOptions{})
		if err != nil {
			t.Fatalf("resuming a %s checkpoint on %s: %v", order[0].Name(), order[1].Name(), err)
		}
		got := runSteps(t, second, 10)
		for i, r := range got {
			w := want[10+i].Loss
			if rel := math.Abs(r.Loss-w) / w; rel > 1e-3 {
				t.Errorf("%s→%s step %d: loss %.6f, straight cpu run %.6f", order[0].Name(), order[1].Name(), r.Step, r.Loss, w)
			}
		}
	}
}

// Weights replaced between two steps (a fine-tune's start, a broken model) are the ones the
// next step uses on the GPU as on the CPU: both backends run 4 steps, get the same new
// weights, run 4 more, then get weights that overflow (a step that is not finite and changes
// nothing) and, after the first weights again, 2 more: the losses and norms agree at every
// step.
func TestWeightsReplacedBetweenSteps(t *testing.T) {
	g := openGPU(t)
	o := trajectoryOptions()
	o.Steps = 20
	corpus := trajectoryCorpus()
	w := gpt.InitWeights(o.Model, 99)
	huge := make([]float32, len(w))
	for i := range w {
		huge[i] = w[i] * 1e36 // finite, but the logits overflow
	}
	var results [2][]train.StepResult
	for k, be := range []backend.Backend{cpu.New(), g} {
		tr, err := train.New(be, o, corpus)
		if err != nil {
			t.Fatal(err)
		}
		results[k] = append(results[k], runSteps(t, tr, 4)...)
		if err := tr.Model.SetWeights(w); err != nil {
			t.Fatal(err)
		}
		results[k] = append(results[k], runSteps(t, tr, 4)...)
		if err := tr.Model.SetWeights(huge); err != nil {
			t.Fatal(err)
		}
		if _, err := tr.TrainStep(); !errors.Is(err, train.ErrNotFinite) {
			t.Fatalf("%s: a step from overflowing weights gave %v, want a not-finite error", be.Name(), err)
		}
		if err := tr.Model.SetWeights(w); err != nil {
			t.Fatal(err)
		}
		results[k] = append(results[k], runSteps(t, tr, 2)...)
	}
	sameRun(t, results[1], results[0], 1e-4)
}

// Generation with the key/value cache gives the CPU's logits at every position, through the
// single-token decode path and the sliding-window refill.
func TestGenerateMatchesCPU(t *testing.T) {
	g := openGPU(t)
	c := gpt.Config{Layers: 2, DModel: 48, Heads: 3, Ctx: 8, DMlp: 192}
	w := gpt.InitWeights(c, 5)
	r := gpt.NewRNG(6)
	for i := range w {
		// Sharper distributions than at init, and every LayerNorm's gains and biases its own.
		w[i] = w[i]*20 + float32(0.25*r.Normal())
	}
	var gens []*gpt.Generator
	for _, be := range []backend.Backend{g, cpu.New()} {
		m, err := gpt.New(be, c)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.SetWeights(w); err != nil {
			t.Fatal(err)
		}
		gens = append(gens, m.NewGenerator())
	}
	lg, err := gens[0].Reset([]int32{'a', 'b'})
	if err != nil {
		t.Fatal(err)
	}
	lc, _ := gens[1].Reset([]int32{'a', 'b'})
	for step := range 12 { // past Ctx, so the window slides
		worst := 0.0
		for i := range lc {
			worst = math.Max(worst, math.Abs(float64(lg[i]-lc[i])))
		}
		if worst > 1e-3 || math.IsNaN(worst) {
			t.Fatalf("step %d: logits differ by %.3g", step, worst)
		}
		tok := int32(argmax(lc))
		lg, err = gens[0].Push(tok)
		if err != nil {
			t.Fatal(err)
		}
		lc, _ = gens[1].Push(tok)
	}
}

func argmax(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

// A model whose flat weights, gradients and moments are longer than one buffer of the device
// (here made so by lowering SegmentLen, as on a GPU whose buffers are smaller than a large
// model's weights) trains on pieces: its parameters are laid out so that none crosses a
// piece's end, and the run agrees with the CPU's, as does a checkpoint of it resumed on the CPU.
func TestSplitWeightsTrain(t *testing.T) {
	g := openGPU(t)
	saved := g.segment
	g.segment = windowAlign
	defer func() { g.segment = saved }()
	o := trajectoryOptions()
	o.Model = gpt.Config{Layers: 3, DModel: 96, Heads: 6, Ctx: 16, DMlp: 384} // 360K parameters
	o.Batch, o.Steps = 2, 6
	corpus := trajectoryCorpus()
	tc, tg := bothTrainers(t, g, o, corpus)
	if k := len(ten(tg.Model.WeightsTensor()).parts); k < 2 {
		t.Fatalf("the flat weights (%d elements) are in %d buffers, want at least 2", tg.Model.FlatSize(), k)
	}
	for _, p := range tg.Model.Params {
		if p.Offset/windowAlign != (p.Offset+p.Size-1)/windowAlign {
			t.Fatalf("parameter %s [%d, %d) crosses a piece's end", p.Name, p.Offset, p.Offset+p.Size)
		}
	}
	rc := runSteps(t, tc, 4)
	sameRun(t, runSteps(t, tg, 4), rc, 1e-4)
	f, err := tg.File("webgpu")
	if err != nil {
		t.Fatal(err)
	}
	resumed, err := train.Resume(cpu.New(), f, train.ResumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, got := runSteps(t, tc, 2), runSteps(t, resumed, 2)
	for i := range want {
		if rel := math.Abs(got[i].Loss-want[i].Loss) / want[i].Loss; rel > 1e-4 {
			t.Errorf("resumed on the cpu, step %d: loss %.6f, straight cpu run %.6f", got[i].Step, got[i].Loss, want[i].Loss)
		}
	}
}
