package train

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"tinygpt/backend"
	"tinygpt/backend/cpu"
	"tinygpt/data"
	"tinygpt/format"
	"tinygpt/gpt"
)

func testCorpus(n int) data.Corpus {
	var b bytes.Buffer
	words := []string{"apple", "river", "stone", "light", "green", "small", "house", "cloud", "seven", "quiet"}
	r := gpt.NewRNG(1)
	for b.Len() < n {
		b.WriteString(words[r.Uint64()%uint64(len(words))])
		if r.Uint64()%7 == 0 {
			b.WriteString(".\n")
		} else {
			b.WriteByte(' ')
		}
	}
	return data.Corpus{Text: b.Bytes()[:n], Source: "test"}
}

func smallOptions() Options {
	p, _ := gpt.PresetByName("tiny")
	o := DefaultOptions(p)
	o.Model = gpt.Config{Layers: 2, DModel: 32, Heads: 2, Ctx: 16, DMlp: 128}
	o.Batch, o.Steps, o.LR = 4, 20, 3e-3
	o.EvalEvery, o.EvalBatches = 5, 2
	return o
}

// The overfit gate: a tiny model on a short repeated text must drive its loss from about
// ln 256 to below 0.5, or something in the forward, backward or optimizer is broken.
func TestOverfitGate(t *testing.T) {
	p, _ := gpt.PresetByName("tiny")
	o := DefaultOptions(p)
	o.Batch, o.Steps, o.LR = 8, 150, 3e-3
	text := strings.Repeat("the cat sat on the mat. ", 40)
	tr, err := New(cpu.New(), o, data.Corpus{Text: []byte(text), Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	var first, last float64
	for tr.Step() < o.Steps {
		r, err := tr.TrainStep()
		if err != nil {
			t.Fatal(err)
		}
		if r.Step == 1 {
			first = r.Loss
		}
		last = r.Loss
	}
	t.Logf("loss %.4f → %.4f", first, last)
	if math.Abs(first-math.Log(256)) > 0.1 {
		t.Errorf("first loss %.4f, want about ln 256 = 5.545", first)
	}
	if !(last < 0.5) {
		t.Errorf("after %d steps the loss is %.4f, want < 0.5", o.Steps, last)
	}
}

// steppedFile returns the model file of a small run of the given steps after its first step,
// on the CPU and testCorpus(2000).
func steppedFile(t *testing.T, steps int) *format.File {
	t.Helper()
	o := smallOptions()
	o.Steps = steps
	tr, err := New(cpu.New(), o, testCorpus(2000))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.TrainStep(); err != nil {
		t.Fatal(err)
	}
	f, err := tr.File("cpu")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// A run's steps must fit the int32 a model file keeps its step in, asked for by a new run or
// by a resumed one.
func TestStepsFitTheFile(t *testing.T) {
	o := smallOptions()
	o.Steps = MaxSteps
	if err := o.Validate(); err != nil {
		t.Errorf("%d steps: %v", MaxSteps, err)
	}
	o.Steps++ // past MaxSteps (or, where int has 32 bits, negative)
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "steps must be between 1 and 2147483647") {
		t.Errorf("%d steps: error %v", o.Steps, err)
	}
	f := steppedFile(t, 2)
	steps := MaxSteps
	if steps++; steps < 0 {
		return // int has 32 bits here: no int is past MaxSteps
	}
	// The steps asked for are at fault, not the file's settings.
	_, err := Resume(cpu.New(), f, ResumeOptions{Steps: steps})
	if err == nil || err.Error() != "steps must be between 1 and 2147483647, got 2147483648" {
		t.Errorf("resumed with %d steps: error %v", steps, err)
	}
}

// A model file whose stored corpus is not the text its header's SHA-256 records (edited after
// it was written) is not resumed on that text.
func TestResumeChecksStoredCorpus(t *testing.T) {
	f := steppedFile(t, 4)
	if _, err := Resume(cpu.New(), f, ResumeOptions{}); err != nil {
		t.Fatalf("the file as written: %v", err)
	}
	f.Header.Corpus = "x" + f.Header.Corpus[1:]
	if _, err := Resume(cpu.New(), f, ResumeOptions{}); err == nil || !strings.Contains(err.Error(), "the corpus stored in the model file is not the text it was trained on") {
		t.Errorf("an edited corpus: %v", err)
	}
	corpus := testCorpus(2000)
	if _, err := Resume(cpu.New(), f, ResumeOptions{Corpus: &corpus}); err != nil {
		t.Errorf("an edited corpus, the original given: %v", err)
	}
}

// A run saved after N steps and resumed for N more computes bit-for-bit what 2N steps straight
// compute: same batches, dropout masks, schedule and optimizer state.
func TestResumeIsExact(t *testing.T) {
	o := smallOptions()
	o.Schedule, o.Warmup, o.Dropout, o.Steps = Cosine, 3, 0.1, 16
	corpus := testCorpus(3000)
	straight, err := New(cpu.New(), o, corpus)
	if err != nil {
		t.Fatal(err)
	}
	var want []float64
	for straight.Step() < o.Steps {
		r, err := straight.TrainStep()
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, r.Loss)
	}
	wantVal, _ := straight.ValLoss(context.Background())

	first, _ := New(cpu.New(), o, corpus)
	for first.Step() < o.Steps/2 {
		if _, err := first.TrainStep(); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "half.tinygpt")
	ff, err := first.File("cpu")
	if err != nil {
		t.Fatal(err)
	}
	if err := format.WriteFile(path, ff, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := format.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	resumed, err := Resume(cpu.New(), f, ResumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if resumed.Opts != first.Opts {
		t.Fatalf("resumed options %+v, saved %+v", resumed.Opts, first.Opts)
	}
	if string(resumed.Corpus.Text) != string(corpus.Text) {
		t.Fatal("the corpus stored in the file differs from the one trained on")
	}
	got := want[: o.Steps/2 : o.Steps/2]
	for resumed.Step() < o.Steps {
		r, err := resumed.TrainStep()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r.Loss)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("step %d: resumed loss %v, straight %v", i+1, got[i], want[i])
		}
	}
	if v, _ := resumed.ValLoss(context.Background()); v != wantVal {
		t.Errorf("validation loss %v after resuming, %v straight", v, wantVal)
	}
	a, b := straight.Model.Weights(), resumed.Model.Weights()
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("weight %d: %v resumed, %v straight", i, b[i], a[i])
		}
	}
	// The same data under a different name is fine; other data is refused.
	other := testCorpus(2999)
	if _, err := Resume(cpu.New(), f, ResumeOptions{Corpus: &other}); err == nil {
		t.Error("resuming on a different corpus was accepted")
	}
	if _, err := Resume(cpu.New(), f, ResumeOptions{Steps: 8}); err == nil {
		t.Error("resuming with fewer total steps than done was accepted")
	}
}

// Run checkpoints, records evaluations and the best validation loss, and stops on a NaN loss
// without overwriting the last good checkpoint.
func TestRunCheckpointsAndStopsOnNaN(t *testing.T) {
	o := smallOptions()
	o.Steps, o.CheckpointEvery = 12, 4
	tr, err := New(cpu.New(), o, testCorpus(2000))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "run.tinygpt")
	var events []Event
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err = tr.Run(ctx, RunOptions{Out: path, Backend: "cpu", OnEvent: func(e Event) {
		events = append(events, e)
		if e.Kind == "checkpoint" && e.Step == 8 {
			// Break the weights: the next step's loss is NaN.
			w := tr.Model.Weights()
			w[0] = float32(math.NaN())
			for i := range w {
				w[i] = float32(math.NaN())
			}
			tr.Model.SetWeights(w)
		}
	}})
	if !errors.Is(err, ErrNotFinite) {
		t.Fatalf("Run returned %v, want a not-finite error", err)
	}
	if !strings.Contains(err.Error(), "step 9") || !strings.Contains(err.Error(), "(step 8)") {
		t.Errorf("error %q should name the bad step and the last checkpoint", err)
	}
	f, err := format.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Step != 8 {
		t.Errorf("checkpoint on disk is at step %d, want the last good one, 8", f.Step)
	}
	for _, w := range f.Weights {
		if math.IsNaN(float64(w)) {
			t.Fatal("the checkpoint on disk has NaN weights")
		}
	}
	var evals, steps int
	for _, e := range events {
		switch e.Kind {
		case "eval":
			evals++
		case "step":
			steps++
		}
	}
	if steps != 8 || evals != 1 {
		t.Errorf("%d step and %d eval events, want 8 and 1 (at step 5)", steps, evals)
	}
	if len(f.Header.LossHistory) != 8 || f.Header.LossHistory[4].Val == nil || f.Header.BestVal == nil {
		t.Errorf("history %d points, eval at 5 recorded: %v", len(f.Header.LossHistory), f.Header.LossHistory[4].Val != nil)
	}
}

// A cancelled run saves a checkpoint that resumes; a finished run saves its sample.
func TestRunCancelAndFinish(t *testing.T) {
	o := smallOptions()
	o.Steps = 6
	path := filepath.Join(t.TempDir(), "c.tinygpt")
	f := runCancelledAt(t, cpu.New(), o, 2, path)
	if f.Step != 2 || len(f.Header.LossHistory) != 2 {
		t.Fatalf("after cancel: step %d, %d points of history", f.Step, len(f.Header.LossHistory))
	}
	tr2, err := Resume(cpu.New(), f, ResumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr2.Run(context.Background(), RunOptions{Out: path}); err != nil {
		t.Fatal(err)
	}
	f, _ = format.ReadFile(path)
	if f.Step != 6 || len(f.Header.Sample) < 100 || !utf8.ValidString(f.Header.Sample) || f.Header.FinalLoss == nil || f.Header.FinalLoss.Val == nil {
		t.Errorf("finished file: step %d, sample %d bytes, final loss %+v", f.Step, len(f.Header.Sample), f.Header.FinalLoss)
	}
}

// Stopping during the final sample (slow on a software GPU) saves the last step at once, with
// the sample from before, instead of finishing the sample first.
func TestRunCancelDuringFinalSample(t *testing.T) {
	o := smallOptions()
	o.Steps = 3
	o.CheckpointEvery = 0
	tr, _ := New(cpu.New(), o, testCorpus(2000))
	path := filepath.Join(t.TempDir(), "c.tinygpt")
	ctx, cancel := context.WithCancel(context.Background())
	var samples int
	err := tr.Run(ctx, RunOptions{Out: path, OnEvent: func(e Event) {
		if e.Kind == "eval" && e.Step == o.Steps {
			cancel() // the final sample comes next
		}
		if e.Kind == "sample" {
			samples++
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v, want context.Canceled", err)
	}
	f, err := format.ReadFile(path)
	if err != nil || int(f.Step) != o.Steps {
		t.Fatalf("after cancel: %v, step %d", err, f.Step)
	}
	if f.Header.Sample != "" || samples != 0 {
		t.Errorf("a sample was generated after the cancel: %q, %d events", f.Header.Sample, samples)
	}
}

func TestSchedule(t *testing.T) {
	s := Schedule{Kind: Cosine, LR: 1e-3, MinLR: 1e-4, Warmup: 10, Steps: 110}
	for _, c := range []struct {
		step int
		want float64
	}{{1, 1e-4}, {5, 5e-4}, {10, 1e-3}, {60, 5.5e-4}, {110, 1e-4}, {200, 1e-4}} {
		if got := s.At(c.step); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("cosine step %d: %g, want %g", c.step, got, c.want)
		}
	}
	s.Kind = Constant
	if s.At(50) != 1e-3 || s.At(5) != 5e-4 {
		t.Error("constant schedule with warmup")
	}
	if (Schedule{Kind: "linear", LR: 1}).Validate() == nil {
		t.Error("unknown schedule accepted")
	}
}

func TestExactLoss(t *testing.T) {
	o := smallOptions()
	tr, _ := New(cpu.New(), o, testCorpus(2000))
	text := testCorpus(16*10 + 5).Text
	var calls []string
	l1, n1, err := ExactLoss(tr.Model, text, 3, func(done, total int) { calls = append(calls, fmt.Sprint(done, "/", total)) })
	if err != nil {
		t.Fatal(err)
	}
	l2, n2, _ := ExactLoss(tr.Model, text, 16, nil)
	if n1 != 10 || n2 != 10 || math.Abs(l1-l2) > 1e-6 {
		t.Errorf("batch 3: %v over %d windows; batch 16: %v over %d", l1, n1, l2, n2)
	}
	if got := strings.Join(calls, " "); got != "3/10 6/10 9/10 10/10" {
		t.Errorf("progress reported %s", got)
	}
	if _, _, err := ExactLoss(tr.Model, text[:16], 4, nil); err == nil {
		t.Error("a text shorter than one window was accepted")
	}
}

func TestBench(t *testing.T) {
	p, _ := gpt.PresetByName("tiny")
	r, err := Bench(cpu.New(), p, 1, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r.Params != 70464 || !(r.MsPerStep > 0) || !(r.GFLOPs > 0) || r.TokensPerS <= 0 || r.Steps != 2 || r.WarmupSteps != 1 {
		t.Errorf("bench result %+v", r)
	}
}

// The warm-up runs more steps than asked until it has lasted minWarmup, and none when asked
// for none. minWarmup is five steps' time, measured first (a step is 20 ms here, ~165 ms under
// js/wasm). Asked for one, it runs more than one: at least two, and not many more than five
// (on a loaded machine a single step can take several steps' time, so three was too many to
// ask for: it failed once with two while other tests ran beside it).
func TestBenchWarmupTime(t *testing.T) {
	p, _ := gpt.PresetByName("tiny")
	r, err := Bench(slowCPU{cpu.New()}, p, 0, 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	five := time.Duration(5 * r.MsPerStep * float64(time.Millisecond))
	for _, c := range []struct{ warmup, least, most int }{{0, 0, 0}, {1, 2, 12}, {8, 8, 8}} {
		r, err := Bench(slowCPU{cpu.New()}, p, c.warmup, 1, five)
		if err != nil {
			t.Fatal(err)
		}
		if r.WarmupSteps < c.least || r.WarmupSteps > c.most {
			t.Errorf("--warmup %d: %d warm-up steps, want %d to %d (at least %v, five steps)", c.warmup, r.WarmupSteps, c.least, c.most, five)
		}
	}
}

// slowCPU is the CPU backend with every training step at least 20 ms longer (its encoder
// forward, which each step runs once, sleeps; decoding's, of one token, does not).
type slowCPU struct{ backend.Backend }

func (b slowCPU) Encoder(out, tok, wte, wpe backend.Tensor, B, T, pos0, C int) {
	if B*T > 1 {
		time.Sleep(20 * time.Millisecond)
	}
	b.Backend.Encoder(out, tok, wte, wpe, B, T, pos0, C)
}

// Every timed interval of the bench holds a whole step, the last one too: with one or two
// timed steps, none can be shorter than the step's sleep (the bench once timed its last
// step's read alone, ~0 ms on the CPU, which computes a step as it records it).
func TestBenchTimesWholeSteps(t *testing.T) {
	p, _ := gpt.PresetByName("tiny")
	for _, steps := range []int{1, 2} {
		for _, warmup := range []int{0, 1} {
			r, err := Bench(slowCPU{cpu.New()}, p, warmup, steps, 0)
			if err != nil {
				t.Fatal(err)
			}
			if r.MinMs < 20 || r.MsPerStep < 20 {
				t.Errorf("%d steps after %d warm-up: %.3f ms a step, the shortest %.3f; each step sleeps 20 ms", steps, warmup, r.MsPerStep, r.MinMs)
			}
		}
	}
}

// After warm-up a training step allocates nothing.
func TestTrainStepDoesNotAllocate(t *testing.T) {
	o := smallOptions()
	tr, _ := New(cpu.New(), o, testCorpus(2000))
	tr.TrainStep()
	tr.History = make([]format.LossPoint, 0, 1000)
	allocs := testing.AllocsPerRun(5, func() {
		m := tr.Model
		m.ZeroGrads()
		tr.Split.TrainBatch(1, 1, o.Batch, tr.inputs, tr.targets)
		if _, err := m.TrainForward(gpt.Batch{B: o.Batch, T: o.Model.Ctx, Inputs: tr.inputs, Targets: tr.targets}, 0.1, 7); err != nil {
			t.Fatal(err)
		}
		m.Backward()
		tr.Optim.Update(1e-3)
	})
	if allocs != 0 {
		t.Errorf("a training step made %v allocations, want 0", allocs)
	}
	// The trainer's own steps, one at a time and each recorded ahead of the one before's
	// results, as Run makes them on a GPU: one allocation, the loss in the history point (a
	// *float64, as the file format's history has it).
	tr, _ = New(asyncCPU{cpu.New()}, o, testCorpus(2000))
	tr.TrainStep()
	tr.History = make([]format.LossPoint, 0, 1000)
	tr.Opts.Steps = 1000
	for _, next := range []bool{false, true} {
		allocs = testing.AllocsPerRun(5, func() {
			if _, err := tr.trainStep(next); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 1 {
			t.Errorf("trainStep(%v) made %v allocations, want 1", next, allocs)
		}
	}
}

// A step whose gradients overflow, from finite weights, fails and changes nothing: weights,
// moments and the step count stay as they were (the update is skipped where it runs, before
// the host has read the norm).
func TestDivergingStepChangesNothing(t *testing.T) {
	o := smallOptions()
	o.Steps = 10
	tr, err := New(cpu.New(), o, testCorpus(2000))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := tr.TrainStep(); err != nil {
			t.Fatal(err)
		}
	}
	w := tr.Model.Weights()
	for i := range w {
		w[i] *= 1e36 // finite, but the logits overflow
	}
	if err := tr.Model.SetWeights(w); err != nil {
		t.Fatal(err)
	}
	w0 := tr.Model.Weights()
	m0, v0 := tr.Optim.Moments()
	r, err := tr.TrainStep()
	if !errors.Is(err, ErrNotFinite) {
		t.Fatalf("step with overflowing gradients: %v (loss %v, norm %v), want a not-finite error", err, r.Loss, r.GradNorm)
	}
	if tr.Step() != 3 {
		t.Errorf("step count %d after the failed step, want 3", tr.Step())
	}
	m1, v1 := tr.Optim.Moments()
	for name, p := range map[string][2][]float32{"weights": {w0, tr.Model.Weights()}, "first moments": {m0, m1}, "second moments": {v0, v1}} {
		for i := range p[0] {
			if math.Float32bits(p[0][i]) != math.Float32bits(p[1][i]) {
				t.Fatalf("%s changed at %d: %v → %v", name, i, p[0][i], p[1][i])
			}
		}
	}
}

// A model whose weights are finite but too large for float32 arithmetic does not generate
// garbage as if all were well: Generate reports that its output is not finite.
func TestGenerateRefusesNonFiniteOutput(t *testing.T) {
	m, err := gpt.New(cpu.New(), gpt.Config{Layers: 1, DModel: 16, Heads: 1, Ctx: 8, DMlp: 64})
	if err != nil {
		t.Fatal(err)
	}
	w := m.Weights()
	for i := range w {
		w[i] = 3e38
	}
	if err := m.SetWeights(w); err != nil {
		t.Fatal(err)
	}
	out, err := Generate(m, []byte("ab"), 5, gpt.Sampling{Temperature: 0.8, TopK: 40}, 1, nil)
	if !errors.Is(err, ErrOutputNotFinite) || len(out) != 0 {
		t.Errorf("Generate with huge weights: %q, %v", out, err)
	}
}

// failingDecode is the CPU backend with a decoder that fails as a GPU's may: after the first
// decoding step its error is set and what is read back is NaN.
type failingDecode struct {
	*cpu.Backend
	err error
}

func (f *failingDecode) AttentionDecode(out, qkv, cache backend.Tensor, pos, C, NH int) {
	f.err = errors.New("decoding kernel failed")
}

func (f *failingDecode) Err() error { return f.err }

func (f *failingDecode) Download(dst []float32, t backend.Tensor, off int) {
	if f.err != nil {
		for i := range dst {
			dst[i] = float32(math.NaN())
		}
		return
	}
	f.Backend.Download(dst, t, off)
}

// A final sample that fails on the backend leaves the finished run saved (its state is read
// before the sample), says what failed rather than blaming the model's output, and a failed
// backend's garbage never replaces a checkpoint.
func TestRunSavesWhenFinalSampleFails(t *testing.T) {
	o := smallOptions()
	o.Steps = 3
	o.CheckpointEvery = 0
	be := &failingDecode{Backend: cpu.New()}
	tr, err := New(be, o, testCorpus(2000))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "c.tinygpt")
	err = tr.Run(context.Background(), RunOptions{Out: path})
	if err == nil || !strings.Contains(err.Error(), "decoding kernel failed") || errors.Is(err, ErrOutputNotFinite) {
		t.Fatalf("Run returned %v, want the backend's error", err)
	}
	f, err := format.ReadFile(path)
	if err != nil || int(f.Step) != o.Steps {
		t.Fatalf("after the failed sample: %v, step %d", err, f.Step)
	}
	if !AllFinite(f.Weights) || !AllFinite(f.M) || !AllFinite(f.V) {
		t.Errorf("the saved state is not finite")
	}
	if _, err := tr.File("cpu"); err == nil || !strings.Contains(err.Error(), "decoding kernel failed") {
		t.Errorf("File after the backend failed: %v, want its error", err)
	}
}

// A stop during an evaluation (which can take minutes on a software GPU) saves the step at
// once, without the evaluation.
func TestRunCancelDuringEvaluation(t *testing.T) {
	o := smallOptions()
	o.EvalBatches = 1 << 20 // far longer than the test may wait
	tr, _ := New(cpu.New(), o, testCorpus(2000))
	path := filepath.Join(t.TempDir(), "c.tinygpt")
	ctx, cancel := context.WithCancel(context.Background())
	err := tr.Run(ctx, RunOptions{Out: path, OnEvent: func(e Event) {
		if e.Kind == "step" && e.Step == o.EvalEvery {
			cancel() // its evaluation comes next
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v, want context.Canceled", err)
	}
	f, err := format.ReadFile(path)
	if err != nil || int(f.Step) != o.EvalEvery {
		t.Fatalf("after cancel: %v, step %d", err, f.Step)
	}
	for _, p := range f.Header.LossHistory {
		if p.Val != nil {
			t.Errorf("the cancelled evaluation was recorded: %+v", p)
		}
	}
}

// On an asynchronous backend Run records each step before the results of the one before are
// read, where nothing comes between the two (trainStep); the steps are exactly those of one
// TrainStep after another: the same losses, gradient norms and weights, across evaluations and
// with dropout. (The CPU backend stands in for a GPU here, claiming to be asynchronous: it
// runs the steps in the same order.)
func TestRunAheadMatchesTrainStep(t *testing.T) {
	o := smallOptions()
	o.Steps, o.EvalEvery, o.Dropout = 12, 5, 0.1
	var order orderBackend
	run := func(ahead bool) ([]StepResult, []float32) {
		order = orderBackend{Backend: cpu.New()}
		tr, err := New(&order, o, testCorpus(2000))
		if err != nil {
			t.Fatal(err)
		}
		var rs []StepResult
		if ahead {
			err = tr.Run(context.Background(), RunOptions{OnEvent: func(e Event) {
				if e.Kind == "step" {
					rs = append(rs, StepResult{Step: e.Step, Loss: e.Loss, GradNorm: e.GradNorm, LR: e.LR})
				}
			}})
			if err != nil {
				t.Fatal(err)
			}
		} else {
			for range o.Steps {
				r, err := tr.TrainStep()
				if err != nil {
					t.Fatal(err)
				}
				r.Duration = 0
				rs = append(rs, r)
			}
		}
		if tr.Step() != o.Steps || tr.ahead.step != 0 {
			t.Fatalf("ahead %v: %d steps done, step %d recorded ahead", ahead, tr.Step(), tr.ahead.step)
		}
		return rs, tr.Model.Weights()
	}
	got, gw := run(true)
	// Steps 1-4, 6-9 and 11 have the next step recorded before their results are read; 5 and
	// 10 are followed by an evaluation, 12 is the last.
	if order.ahead != 9 || len(order.bad) > 0 {
		t.Errorf("Run recorded %d steps ahead, want 9; awaits of other than one step's reads: %v", order.ahead, order.bad)
	}
	want, ww := run(false)
	if order.ahead != 0 || len(order.bad) > 0 {
		t.Errorf("TrainStep recorded %d steps ahead, want none; awaits of other than one step's reads: %v", order.ahead, order.bad)
	}
	if len(got) != len(want) {
		t.Fatalf("Run reported %d steps, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("step %d: Run %+v, TrainStep %+v", i+1, got[i], want[i])
		}
	}
	for i := range ww {
		if gw[i] != ww[i] {
			t.Fatalf("weight %d: %v after Run, %v after TrainStep", i, gw[i], ww[i])
		}
	}
}

// A step that fails while the next is recorded ahead (an asynchronous backend) takes the next
// one's results with it: Run stops, nothing is left asked for, and a later TrainStep reads its
// own results, not those of the step dropped.
func TestRunAheadFailureLeavesNothingAsked(t *testing.T) {
	o := smallOptions()
	o.Steps, o.EvalEvery = 12, 100 // no evaluation, which would stop the run first
	tr, err := New(asyncCPU{cpu.New()}, o, testCorpus(2000))
	if err != nil {
		t.Fatal(err)
	}
	good := tr.Model.Weights()
	err = tr.Run(context.Background(), RunOptions{OnEvent: func(e Event) {
		if e.Kind == "step" && e.Step == 4 {
			w := tr.Model.Weights()
			copy(good, w)
			for i := range w {
				w[i] = float32(math.NaN())
			}
			tr.Model.SetWeights(w) // step 5 was recorded already; step 6 fails
		}
	}})
	if !errors.Is(err, ErrNotFinite) || !strings.Contains(err.Error(), "training loss") {
		t.Fatalf("Run returned %v, want a training step's not-finite error", err)
	}
	if tr.stepper.nasked != 0 || tr.ahead.step != 0 {
		t.Fatalf("after the failed Run: %d steps asked for and not finished, step %d recorded ahead", tr.stepper.nasked, tr.ahead.step)
	}
	if err := tr.Model.SetWeights(good); err != nil {
		t.Fatal(err)
	}
	r, err := tr.TrainStep()
	if err != nil || math.IsNaN(r.Loss) {
		t.Fatalf("TrainStep after the failed Run: loss %v, %v", r.Loss, err)
	}
}

// asyncCPU is the CPU backend claiming to run kernels asynchronously (backend.Async), so that
// the trainer records steps ahead on it as on a GPU.
type asyncCPU struct{ backend.Backend }

func (asyncCPU) Async() bool { return true }

// orderBackend counts the Awaits that keep reads in flight: those of a step whose next step
// was recorded and asked for first. It also checks that every Await waits for exactly one
// step's reads (readsPerAsk DownloadLaters), no more and no fewer. It claims to be
// asynchronous (see asyncCPU).
type orderBackend struct {
	backend.Backend
	ahead   int
	pending int      // DownloadLaters not yet awaited
	bad     []string // Awaits that did not wait for exactly one step's reads
}

func (b *orderBackend) Async() bool { return true }

func (b *orderBackend) DownloadLater(dst []float32, t backend.Tensor, off int) {
	b.pending++
	b.Backend.DownloadLater(dst, t, off)
}

func (b *orderBackend) Await(keep int) {
	if keep > 0 {
		b.ahead++
	}
	if b.pending-keep != readsPerAsk {
		b.bad = append(b.bad, fmt.Sprintf("Await(%d) with %d reads pending", keep, b.pending))
	}
	b.pending = keep
	b.Backend.Await(keep)
}

// RunOptions.Between runs only where the model holds the last reported step's weights: after
// the steps that nothing was recorded ahead of (evaluations, the last step) and, when Hold asks
// for it, after the step in flight. A cancelled run on an asynchronous backend stops after the
// step in flight.
func TestRunBetweenSeesItsStep(t *testing.T) {
	o := smallOptions()
	o.Steps, o.EvalEvery = 12, 5
	tr, err := New(asyncCPU{cpu.New()}, o, testCorpus(2000))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := New(cpu.New(), o, testCorpus(2000))
	if err != nil {
		t.Fatal(err)
	}
	var hold bool
	var at []int
	last := 0
	err = tr.Run(context.Background(), RunOptions{
		OnEvent: func(e Event) {
			if e.Kind == "step" {
				last = e.Step
				hold = e.Step == 2 // step 3 is recorded already; Between runs after it
			}
		},
		Hold: func() bool { return hold },
		Between: func() {
			at = append(at, last)
			if tr.Step() != last {
				t.Errorf("Between after step %d: the trainer is at step %d", last, tr.Step())
			}
			for ref.Step() < last {
				if _, err := ref.TrainStep(); err != nil {
					t.Fatal(err)
				}
			}
			w, rw := tr.Model.Weights(), ref.Model.Weights()
			for i := range rw {
				if w[i] != rw[i] {
					t.Fatalf("Between after step %d: weight %d is %v, want %v", last, i, w[i], rw[i])
				}
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(at) != "[3 5 10 12]" {
		t.Errorf("Between ran after steps %v, want [3 5 10 12]", at)
	}

	// Cancelled at step 2's event, the run had already recorded step 3 (nothing came between
	// the two), which it finishes and saves.
	f := runCancelledAt(t, asyncCPU{cpu.New()}, o, 2, filepath.Join(t.TempDir(), "c.tinygpt"))
	if f.Step != 3 || len(f.Header.LossHistory) != 3 {
		t.Fatalf("after cancel: step %d, %d points of history", f.Step, len(f.Header.LossHistory))
	}
}

// runCancelledAt runs a new trainer of o on be, saving to path, cancels it at the event of
// the given step, and returns the checkpoint it saved.
func runCancelledAt(t *testing.T, be backend.Backend, o Options, step int, path string) *format.File {
	t.Helper()
	tr, err := New(be, o, testCorpus(2000))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	err = tr.Run(ctx, RunOptions{Out: path, OnEvent: func(e Event) {
		if e.Kind == "step" && e.Step == step {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v, want context.Canceled", err)
	}
	f, err := format.ReadFile(path)
	if err != nil {
		t.Fatalf("after cancel: %v", err)
	}
	return f
}

// A checkpoint that cannot be written (here its folder is a file; in use, a full disk) is
// reported and training goes on; the last state, which would otherwise be lost, is written to
// the temporary folder, and the run's error says where.
func TestUnwritableCheckpointLosesNothing(t *testing.T) {
	tmp := t.TempDir()
	for _, v := range []string{"TMPDIR", "TMP", "TEMP"} { // os.TempDir's, on every system
		t.Setenv(v, tmp)
	}
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	o := smallOptions()
	o.Steps, o.CheckpointEvery, o.EvalEvery = 5, 2, 0
	tr, err := New(cpu.New(), o, testCorpus(2000))
	if err != nil {
		t.Fatal(err)
	}
	var warnings []int
	err = tr.Run(context.Background(), RunOptions{Out: filepath.Join(blocker, "m.tinygpt"), OnEvent: func(ev Event) {
		if ev.Kind == "warning" {
			warnings = append(warnings, ev.Step)
		}
	}})
	if tr.Step() != 5 || len(warnings) != 2 || warnings[0] != 2 || warnings[1] != 4 {
		t.Errorf("trained %d steps with warnings at %v; want 5 steps, warnings at steps 2 and 4", tr.Step(), warnings)
	}
	rescued, _ := filepath.Glob(filepath.Join(tmp, "m-step5-*.tinygpt"))
	if err == nil || len(rescued) != 1 || !strings.Contains(err.Error(), "saved to "+rescued[0]+" instead") {
		t.Fatalf("the run's error %v; files rescued %v", err, rescued)
	}
	f, err := format.ReadFile(rescued[0])
	if err != nil || f.Step != 5 || f.M == nil {
		t.Errorf("the rescued file: %v", err)
	}
	// The temporary folder is shared: the copy, training text and all, is its owner's only.
	if info, err := os.Stat(rescued[0]); err != nil || (runtime.GOOS != "windows" && info.Mode().Perm() != 0o600) {
		t.Errorf("the rescued file's mode %v (%v), want 0600", info.Mode().Perm(), err)
	}
}
