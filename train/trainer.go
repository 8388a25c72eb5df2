// Package train trains a TinyGPT model: the batch sampler, AdamW with clipping, learning-rate
// schedules, validation, checkpoints that resume exactly, and progress events.
package train

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"tinygpt/backend"
	"tinygpt/data"
	"tinygpt/format"
	"tinygpt/gpt"
)

// Options are the settings of a training run. They are saved in every checkpoint, so a resumed
// run continues with the same ones.
type Options struct {
	Preset          string     `json:"preset,omitempty"`
	Model           gpt.Config `json:"-"` // saved in the header's config
	Batch           int        `json:"-"`
	Steps           int        `json:"-"` // total steps of the run
	LR              float64    `json:"-"`
	MinLR           float64    `json:"minLR"`
	Schedule        string     `json:"schedule"`
	Warmup          int        `json:"warmup"`
	Dropout         float64    `json:"dropout"`
	EvalEvery       int        `json:"-"`
	EvalBatches     int        `json:"evalBatches"`
	CheckpointEvery int        `json:"checkpointEvery"`
	Seed            int64      `json:"-"`
	Clip            float64    `json:"-"`
	WeightDecay     float64    `json:"weightDecay"`
}

// DefaultOptions returns the options of a preset with the original's defaults: constant
// learning rate 3e-4, clip 1.0, weight decay 0.1, no dropout, seed 42.
func DefaultOptions(p gpt.Preset) Options {
	return Options{
		Preset: p.Name, Model: p.Config, Batch: p.Batch, Steps: p.Steps,
		LR: 3e-4, MinLR: 3e-5, Schedule: Constant, EvalEvery: 100, EvalBatches: 8,
		CheckpointEvery: 500, Seed: 42, Clip: GradClip, WeightDecay: WeightDecay,
	}
}

// MaxSteps is the most steps a run can have: a model file stores its step as an int32.
const MaxSteps = math.MaxInt32

// Validate checks the options.
func (o Options) Validate() error {
	if err := o.Model.Validate(); err != nil {
		return err
	}
	switch {
	case o.Batch < 1:
		return fmt.Errorf("batch must be at least 1, got %d", o.Batch)
	case o.Steps < 1 || o.Steps > MaxSteps:
		return fmt.Errorf("steps must be between 1 and %d, got %d", MaxSteps, o.Steps)
	case o.Dropout < 0 || o.Dropout >= 1:
		return fmt.Errorf("dropout must be in [0, 1), got %v", o.Dropout)
	case o.EvalEvery < 0 || o.EvalBatches < 1:
		return fmt.Errorf("eval-every must be ≥ 0 and eval batches ≥ 1")
	case o.CheckpointEvery < 0:
		return fmt.Errorf("checkpoint-every must not be negative, got %d", o.CheckpointEvery)
	case o.Seed < 0:
		return fmt.Errorf("seed must not be negative, got %d", o.Seed)
	case !(o.Clip >= 0 && o.WeightDecay >= 0):
		return fmt.Errorf("clip and weight decay must not be negative")
	case o.Batch > (1<<26)/o.Model.Ctx:
		return fmt.Errorf("batch %d × ctx %d tokens a step is too large: at most %d tokens", o.Batch, o.Model.Ctx, 1<<26)
	}
	return o.LRSchedule().Validate()
}

// LRSchedule is the learning-rate schedule the options describe.
func (o Options) LRSchedule() Schedule {
	return Schedule{Kind: o.Schedule, LR: o.LR, MinLR: o.MinLR, Warmup: o.Warmup, Steps: o.Steps}
}

// savedSettings is the "tinygpt" key of the header: the options the original's config lacks
// and facts about the corpus.
type savedSettings struct {
	Options
	Seed         uint64  `json:"seed"`
	CorpusSource string  `json:"corpusSource"`
	CorpusBytes  int     `json:"corpusBytes"`
	CorpusSHA256 string  `json:"corpusSHA256"`
	TrainSeconds float64 `json:"trainSeconds"`
}

// Trainer is a training run in progress.
type Trainer struct {
	Opts    Options
	Model   *gpt.Model
	Optim   *Optimizer
	Corpus  data.Corpus
	Split   data.Split
	History []format.LossPoint
	Best    *format.BestVal
	Sample  string        // the last generated sample
	Elapsed time.Duration // training time so far, over all sessions of the run

	lastTrain       float64
	lastVal         float64
	lastValStep     int // the step lastVal was measured at
	inputs, targets []int32
	sched           Schedule
	stepper         stepper
	ahead           recordedStep // the next step, recorded by Run before this one's results were read (step 0: none)
	lastDone        time.Time    // when the last step's results were read
}

// recordedStep is a training step whose kernels are recorded (a GPU backend runs them once the
// steps before have run) and whose results are not read yet. Steps count from 1: step 0 is
// none.
type recordedStep struct {
	step  int
	lr    float64
	start time.Time
}

// Step is the number of completed steps.
func (t *Trainer) Step() int {
	if t.ahead.step != 0 {
		return t.Optim.Step - 1 // counted in the optimizer when it was recorded
	}
	return t.Optim.Step
}

// New starts a run from freshly initialised weights.
func New(be backend.Backend, opts Options, corpus data.Corpus) (*Trainer, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := checkTrainMemory(be, opts); err != nil {
		return nil, err
	}
	m, err := gpt.New(be, opts.Model)
	if err != nil {
		return nil, err
	}
	if err := m.SetWeights(gpt.InitWeights(opts.Model, uint64(opts.Seed))); err != nil {
		return nil, err
	}
	return newTrainer(m, opts, corpus)
}

func newTrainer(m *gpt.Model, opts Options, corpus data.Corpus) (*Trainer, error) {
	split, err := data.NewSplit(corpus.Text, opts.Model.Ctx)
	if err != nil {
		return nil, err
	}
	o := NewOptimizer(m)
	o.Clip, o.WeightDecay = float32(opts.Clip), float32(opts.WeightDecay)
	// The activations too, now: a GPU short of memory for the run says so before it starts.
	if err := m.Reserve(opts.Batch, opts.Model.Ctx); err != nil {
		return nil, err
	}
	n := opts.Batch * opts.Model.Ctx
	return &Trainer{Opts: opts, Model: m, Optim: o, Corpus: corpus, Split: split,
		inputs: make([]int32, n), targets: make([]int32, n), sched: opts.LRSchedule(),
		lastTrain: math.NaN(), lastVal: math.NaN(), lastValStep: -1, stepper: stepper{m: m, o: o}}, nil
}

// corpusNamed describes the corpus a header records, for messages: ` ("SOURCE", N bytes)`,
// quoted (a file's header is anyone's to write, and errors go to a terminal), or "" where the
// header names none.
func corpusNamed(source string, bytes int) string {
	if source == "" {
		return ""
	}
	return fmt.Sprintf(" (%q, %d bytes)", source, bytes)
}

// ResumeOptions changes a resumed run.
type ResumeOptions struct {
	Steps   int          // new total step count; 0 keeps the file's
	Corpus  *data.Corpus // nil trains on the corpus stored in the file
	Backend string       // recorded in the header
}

// Resume continues the run saved in f. Given the same corpus, the continued run computes
// exactly what an uninterrupted run would have (on the same machine and backend).
func Resume(be backend.Backend, f *format.File, ro ResumeOptions) (*Trainer, error) {
	opts, saved, err := optionsFromHeader(f.Header)
	if err != nil {
		return nil, err
	}
	if ro.Steps > MaxSteps {
		return nil, fmt.Errorf("steps must be between 1 and %d, got %d", MaxSteps, ro.Steps)
	}
	if ro.Steps > 0 {
		opts.Steps = ro.Steps
	}
	if int(f.Step) == opts.Steps {
		return nil, fmt.Errorf("the model has already trained all %d of its steps; pass a larger --steps to continue", f.Step)
	}
	if int(f.Step) > opts.Steps {
		return nil, fmt.Errorf("the model has already trained %d steps, more than the %d asked for; pass a larger --steps to continue", f.Step, opts.Steps)
	}
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("settings in the file: %w", err)
	}
	if err := checkTrainMemory(be, opts); err != nil {
		return nil, err
	}
	var corpus data.Corpus
	switch {
	case ro.Corpus != nil:
		corpus = *ro.Corpus
	case f.Header.Corpus != "":
		corpus = data.Corpus{Text: []byte(f.Header.Corpus), Source: "the corpus stored in the model file", Files: 1}
		if saved.CorpusSource != "" {
			corpus.Source = saved.CorpusSource
		}
		if saved.CorpusSHA256 != "" && saved.CorpusSHA256 != hashText(corpus.Text) {
			return nil, fmt.Errorf("the corpus stored in the model file is not the text it was trained on (its SHA-256 differs from the one the header records): "+
				"the file was changed after it was written; pass --data with the original text%s", corpusNamed(saved.CorpusSource, saved.CorpusBytes))
		}
	default:
		return nil, fmt.Errorf("the model file does not hold its training corpus; pass --data with it%s", corpusNamed(saved.CorpusSource, saved.CorpusBytes))
	}
	if saved.CorpusSHA256 != "" && ro.Corpus != nil && saved.CorpusSHA256 != hashText(corpus.Text) {
		return nil, fmt.Errorf("--data differs from the corpus this model was trained on%s; "+
			"resuming on other data would not continue the same run. Start a new run, or fine-tune with --init-from", corpusNamed(saved.CorpusSource, saved.CorpusBytes))
	}
	m, err := gpt.New(be, opts.Model)
	if err != nil {
		return nil, err
	}
	if err := m.SetWeights(f.Weights); err != nil {
		return nil, err
	}
	t, err := newTrainer(m, opts, corpus)
	if err != nil {
		return nil, err
	}
	if err := t.Optim.SetMoments(f.M, f.V); err != nil {
		return nil, err
	}
	t.Optim.Step = int(f.Step)
	t.History = append(t.History, f.Header.LossHistory...)
	if f.Header.BestVal != nil {
		b := *f.Header.BestVal
		t.Best = &b
	}
	if fl := f.Header.FinalLoss; fl != nil {
		if fl.Train != nil {
			t.lastTrain = *fl.Train
		}
		if fl.Val != nil {
			t.lastVal, t.lastValStep = *fl.Val, int(fl.Step)
		}
	}
	t.Sample = f.Header.Sample
	t.Elapsed = time.Duration(saved.TrainSeconds * float64(time.Second))
	return t, nil
}

func checkTrainMemory(be backend.Backend, o Options) error {
	return gpt.CheckMemory(HostMemory(o.Model, o.Batch, backend.OnDevice(be)), fmt.Sprintf("training %s with batch %d", o.Model, o.Batch))
}

// TrainMemory is the number of bytes training a model of shape c with batch sequences needs:
// the backend's (gpt.MemoryEstimate) and, while a checkpoint is written (or a file resumed
// from is loaded), the host's copy of the weights and both AdamW moments.
func TrainMemory(c gpt.Config, batch int) int64 {
	return gpt.MemoryEstimate(c, batch, c.Ctx, true) + CheckpointBytes(c)
}

// HostMemory is the host's share of TrainMemory: all of it, or, on a backend with memory of
// its own (onDevice, see backend.OnDevice), only the copy a checkpoint is written from. The
// device holds the model, its gradients, moments and activations, and a device short of
// memory for them says so when the run reserves them (gpt.Model.Reserve).
func HostMemory(c gpt.Config, batch int, onDevice bool) int64 {
	if onDevice {
		return CheckpointBytes(c)
	}
	return TrainMemory(c, batch)
}

// CheckpointBytes is the size of a checkpoint's state for a model of shape c, its weights and
// both AdamW moments in fp32 (the header, which may hold the corpus, comes on top).
func CheckpointBytes(c gpt.Config) int64 { return 12 * int64(c.NumParams()) }

// CorpusStored reports whether checkpoints hold the corpus (so --resume needs no --data).
func (t *Trainer) CorpusStored() bool {
	return utf8.Valid(t.Corpus.Text) && len(t.Corpus.Text) <= MaxStoredCorpus
}

// optionsFromHeader recovers the run's options from a header, using the original's config
// keys and, when present, our own "tinygpt" key; files written by the original get its
// defaults for the rest.
func optionsFromHeader(h format.Header) (Options, savedSettings, error) {
	c := h.Config
	opts := Options{
		Model: gpt.Config{Layers: c.Layers, DModel: c.DModel, Heads: c.Heads, Ctx: c.Ctx, DMlp: c.DMlp},
		Batch: c.BatchSize, Steps: c.MaxSteps, LR: c.LearningRate, MinLR: c.LearningRate / 10,
		Schedule: Constant, EvalEvery: c.EvalEvery, EvalBatches: 8, CheckpointEvery: 500,
		Seed: c.Seed, Clip: c.GradClip, WeightDecay: WeightDecay,
	}
	saved := savedSettings{Seed: uint64(c.Seed)}
	if len(h.Train) > 0 {
		saved.Options = opts
		if err := json.Unmarshal(h.Train, &saved); err != nil {
			return Options{}, saved, fmt.Errorf("reading the file's training settings: %w", err)
		}
		// Fields the header's config carries win; the rest come from our key.
		keep := opts
		opts = saved.Options
		opts.Model, opts.Batch, opts.Steps, opts.LR = keep.Model, keep.Batch, keep.Steps, keep.LR
		opts.EvalEvery, opts.Clip = keep.EvalEvery, keep.Clip
		opts.Seed = int64(saved.Seed)
	}
	if opts.Batch < 1 {
		opts.Batch = 16
	}
	return opts, saved, nil
}

// ErrNotFinite reports a loss or gradient that is NaN or infinite.
var ErrNotFinite = errors.New("not finite")

// A DivergedError is what Run returns when a loss, gradient or weight stops being a finite
// number: the run is stopped, and its checkpoint file keeps the last state that was finite.
// Its message advises the command line's flags; a caller with other controls can build its own
// from the fields.
type DivergedError struct {
	Err       error   // what was found not finite, and at which step; wraps ErrNotFinite
	Out       string  // the checkpoint file (RunOptions.Out)
	LastSaved int     // the step of the last checkpoint written to Out, or -1 if none was
	LR        float64 // the run's peak learning rate
}

func (e *DivergedError) Error() string {
	where := "no checkpoint was written"
	if e.LastSaved >= 0 {
		where = fmt.Sprintf("the last checkpoint, with finite weights, is %s (step %d)", e.Out, e.LastSaved)
	}
	return fmt.Sprintf("%v; stopped: %s. Start again with a lower --lr (now %g) or more --warmup, "+
		"or continue from a checkpoint with --init-from FILE --lr X", e.Err, where, e.LR)
}

// Unwrap returns e.Err.
func (e *DivergedError) Unwrap() error { return e.Err }

// StepResult is what one training step measured.
type StepResult struct {
	Step     int
	Loss     float64
	GradNorm float64
	LR       float64
	Duration time.Duration
}

// TrainStep runs one step: forward, backward, clip and AdamW update. A NaN or infinite loss or
// gradient norm leaves the weights as they were (the update is skipped where it runs, see
// backend.AdamW); the error wraps ErrNotFinite.
func (t *Trainer) TrainStep() (StepResult, error) { return t.trainStep(false) }

// trainStep is TrainStep. With next, the caller's next call is another trainStep, with
// nothing in between that reads or changes the model: on a backend that runs kernels
// asynchronously (backend.Async: a GPU) the next step is then recorded before this one's
// results are read, so that the GPU runs this step while the host records the next and goes
// straight on to it (see stepper). Step counts only the steps whose results were read.
//
// A step that fails does not stop the one recorded after it, which has already been handed
// to the GPU: that step is finished too and its results dropped, but its update, if its own
// gradients were finite, stays applied. Run stops at such an error without saving, so the
// last checkpoint holds the last good state; a caller that goes on from the trainer itself
// after one should call TrainStep, which records nothing ahead.
func (t *Trainer) trainStep(next bool) (StepResult, error) {
	next = next && backend.Async(t.Model.Backend())
	cur := t.ahead
	t.ahead = recordedStep{}
	if cur.step == 0 {
		r, err := t.recordStep()
		if err != nil {
			return StepResult{Step: t.Optim.Step + 1}, err
		}
		t.stepper.ask()
		cur = r
	}
	var after recordedStep
	if next && cur.step < t.Opts.Steps {
		// recordStep refuses a step whose learning rate is not finite (and a batch the model
		// refuses, which the trainer's never are) before recording anything: that step is
		// then not recorded ahead, and fails with its error when it comes.
		after, _ = t.recordStep()
		if after.step != 0 {
			t.stepper.ask() // before cur's results are awaited: see stepper
		}
	}
	loss, norm, err := t.stepper.finish(cur.step)
	if after.step != 0 {
		if err != nil {
			_, _, _ = t.stepper.finish(after.step)
		} else {
			t.ahead = after
		}
	}
	if err != nil {
		return StepResult{Step: cur.step, Loss: loss, GradNorm: norm}, err
	}
	now := time.Now()
	start := cur.start
	if t.lastDone.After(start) {
		start = t.lastDone // it ran after the step before, which was read then
	}
	t.lastDone = now
	d := now.Sub(start)
	t.Elapsed += d
	t.lastTrain = loss
	t.History = append(t.History, format.LossPoint{Step: cur.step, Train: round4(loss)})
	return StepResult{Step: cur.step, Loss: loss, GradNorm: norm, LR: cur.lr, Duration: d}, nil
}

// recordStep records the step after the last one recorded (see stepper.record).
func (t *Trainer) recordStep() (recordedStep, error) {
	start := time.Now()
	step := t.Optim.Step + 1
	t.Split.TrainBatch(uint64(t.Opts.Seed), step, t.Opts.Batch, t.inputs, t.targets)
	batch := gpt.Batch{B: t.Opts.Batch, T: t.Opts.Model.Ctx, Inputs: t.inputs, Targets: t.targets}
	dropSeed := gpt.Mix64(uint64(t.Opts.Seed)<<20 ^ uint64(step))
	lr := t.sched.At(step)
	if math.IsNaN(lr) {
		return recordedStep{}, fmt.Errorf("learning rate is %v at step %d: %w", lr, step, ErrNotFinite)
	}
	if err := t.stepper.record(batch, float32(t.Opts.Dropout), dropSeed, float32(lr)); err != nil {
		return recordedStep{}, err
	}
	return recordedStep{step: step, lr: lr, start: start}, nil
}

func round4(x float64) *float64 {
	r := math.Round(x*1e4) / 1e4
	return &r
}

// Evaluate returns the mean loss over the validation batches (the same windows every time) and
// records it in the history and the best-validation mark. It stops with ctx's error, recording
// nothing, when ctx is cancelled (an evaluation can take minutes on a software GPU).
func (t *Trainer) Evaluate(ctx context.Context) (float64, error) {
	loss, err := t.ValLoss(ctx)
	if err != nil {
		return 0, err
	}
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return loss, fmt.Errorf("validation loss is %v at step %d: %w", loss, t.Optim.Step, ErrNotFinite)
	}
	t.lastVal, t.lastValStep = loss, t.Optim.Step
	step := t.Optim.Step
	v := loss
	if n := len(t.History); n > 0 && t.History[n-1].Step == step {
		t.History[n-1].Val = round4(v)
	} else {
		t.History = append(t.History, format.LossPoint{Step: step, Val: round4(v)})
	}
	if t.Best == nil || loss < t.Best.Loss {
		t.Best = &format.BestVal{Loss: loss, Step: step}
	}
	return loss, nil
}

// ValLoss is the mean loss over Opts.EvalBatches validation batches, without recording it. It
// stops with ctx's error when ctx is cancelled.
func (t *Trainer) ValLoss(ctx context.Context) (float64, error) {
	var sum float64
	for i := 0; i < t.Opts.EvalBatches; i++ {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		t.Split.ValBatch(uint64(t.Opts.Seed), i, t.Opts.Batch, t.inputs, t.targets)
		l, err := t.Model.Forward(gpt.Batch{B: t.Opts.Batch, T: t.Opts.Model.Ctx, Inputs: t.inputs, Targets: t.targets})
		if err != nil {
			return 0, err
		}
		sum += l
	}
	return sum / float64(t.Opts.EvalBatches), nil
}

// LastEvalStep returns the step of the latest evaluation (-1 where none yet).
func (t *Trainer) LastEvalStep() int { return t.lastValStep }

// LastLosses returns the latest training and validation losses (NaN where none yet).
func (t *Trainer) LastLosses() (train, val float64) { return t.lastTrain, t.lastVal }

// GenerateSample generates n bytes after prompt with temperature 0.8 and top-k 40, stores the
// text as the run's sample, and returns it. Bytes that are not UTF-8 become U+FFFD, since the
// sample is saved as a JSON string. It stops with ctx's error, keeping the previous sample,
// when ctx is cancelled (generation is slow on a software GPU).
func (t *Trainer) GenerateSample(ctx context.Context, prompt string, n int, seed uint64) (string, error) {
	out, err := Generate(t.Model, []byte(prompt), n, gpt.Sampling{Temperature: 0.8, TopK: 40}, seed,
		func(byte) error { return ctx.Err() })
	if err != nil {
		return "", err
	}
	t.Sample = strings.ToValidUTF8(string(out), "\uFFFD")
	return t.Sample, nil
}

// ErrOutputNotFinite reports a model whose next-byte scores came out NaN or infinite: weights
// too large for float32 arithmetic, though each is finite.
var ErrOutputNotFinite = errors.New("the model's output is not finite: its weights are too large for float32 arithmetic, so it cannot generate")

// AllFinite reports whether every value of xs is a finite number (not NaN, not ±Inf).
func AllFinite(xs []float32) bool {
	for _, v := range xs {
		if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
			return false
		}
	}
	return true
}

// Generate produces n bytes after prompt from m, calling emit (if not nil) with each byte as it
// is produced.
func Generate(m *gpt.Model, prompt []byte, n int, s gpt.Sampling, seed uint64, emit func(byte) error) ([]byte, error) {
	g := m.NewGenerator()
	logits, err := g.Reset(data.Tokens(prompt))
	if err != nil {
		return nil, err
	}
	sampler := gpt.NewSampler(s, seed)
	var out []byte
	for i := 0; i < n; i++ {
		if !AllFinite(logits) {
			if err := backend.Err(m.Backend()); err != nil {
				return out, err // what a failed backend reads back is NaN: not the model's fault
			}
			return out, fmt.Errorf("%w (at generated byte %d)", ErrOutputNotFinite, i)
		}
		tok := sampler.Next(logits)
		out = append(out, byte(tok))
		if emit != nil {
			if err := emit(byte(tok)); err != nil {
				return out, err
			}
		}
		if i+1 < n {
			if logits, err = g.Push(tok); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// File returns the run's state as a .tinygpt file: weights, AdamW moments and step, and a header
// with the original's keys plus our settings.
func (t *Trainer) File(backendName string) (*format.File, error) {
	c := t.Opts.Model
	w := t.Model.Weights()
	mom, vel := t.Optim.Moments()
	if err := backend.Err(t.Model.Backend()); err != nil {
		// What a failed backend gives back is garbage: it must not replace a good checkpoint.
		return nil, fmt.Errorf("the backend failed, so the model cannot be read from it: %w", err)
	}
	fc := format.Config{Ctx: c.Ctx, Layers: c.Layers, Heads: c.Heads, DModel: c.DModel, DMlp: c.DMlp,
		BatchSize: t.Opts.Batch, LearningRate: t.Opts.LR, GradClip: t.Opts.Clip, MaxSteps: t.Opts.Steps,
		EvalEvery: t.Opts.EvalEvery, Seed: t.Opts.Seed, Backend: backendName}
	corpus := ""
	if t.CorpusStored() {
		corpus = string(t.Corpus.Text)
	}
	saved := savedSettings{Options: t.Opts, Seed: uint64(t.Opts.Seed), CorpusSource: t.Corpus.Source,
		CorpusBytes: len(t.Corpus.Text), CorpusSHA256: hashText(t.Corpus.Text), TrainSeconds: t.Elapsed.Seconds()}
	raw, err := json.Marshal(saved)
	if err != nil { // only non-finite numbers, which Validate rejects, make this fail
		return nil, fmt.Errorf("encoding run settings: %w", err)
	}
	h := format.Header{
		Version: 2, SavedAt: time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), Config: fc, Corpus: corpus,
		Manifest: format.Manifest(fc), IncludesOptimizerState: true, LossHistory: t.History,
		Sample: t.Sample, Project: Project, Train: raw,
	}
	if h.LossHistory == nil {
		h.LossHistory = []format.LossPoint{}
	}
	step := t.Optim.Step
	if step > 0 {
		fl := &format.FinalLoss{Step: step}
		if !math.IsNaN(t.lastTrain) {
			v := t.lastTrain
			fl.Train = &v
		}
		if !math.IsNaN(t.lastVal) && t.lastValStep == step { // not an earlier step's
			v := t.lastVal
			fl.Val = &v
		}
		h.FinalLoss = fl
	}
	if t.Best != nil {
		b := *t.Best
		h.BestVal = &b
	}
	return &format.File{Header: h, Step: int32(step), Weights: w, M: mom, V: vel}, nil
}

// Project is the address written in the header's "project" key.
const Project = "https://github.com/tinygpt-go/tinygpt"

// MaxStoredCorpus is the largest corpus stored inside a model file (as the original does, so
// that the file can resume training on its own); larger corpora are identified by their hash.
const MaxStoredCorpus = 32 << 20

func hashText(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Event is a progress report of Run.
type Event struct {
	Kind       string        `json:"event"` // "step", "eval", "checkpoint", "sample", "warning" (Text says what)
	Step       int           `json:"step"`
	Steps      int           `json:"steps"`
	Loss       float64       `json:"loss,omitempty"`
	Val        float64       `json:"val,omitempty"`
	BestVal    float64       `json:"best_val,omitempty"`
	LR         float64       `json:"lr,omitempty"`
	GradNorm   float64       `json:"grad_norm,omitempty"`
	MsPerStep  float64       `json:"ms_per_step,omitempty"`
	TokensPerS float64       `json:"tokens_per_s,omitempty"`
	Elapsed    float64       `json:"elapsed_s"`
	ETA        float64       `json:"eta_s,omitempty"`
	Path       string        `json:"path,omitempty"`
	Text       string        `json:"text,omitempty"`
	Duration   time.Duration `json:"-"`
}

// RunOptions control Run.
type RunOptions struct {
	Out         string      // checkpoint path; "" saves nothing
	Perm        os.FileMode // a new checkpoint file's mode, less the umask; 0 means 0644 (see format.WriteFile)
	Backend     string      // backend name recorded in checkpoints
	SampleEvery int         // steps between live samples; 0 for none
	Resumed     bool        // Out already holds the state at the current step (a resumed run)
	// OnEvent receives the run's events. It must not use the trainer's model: when nothing
	// comes between two steps, the next one is already recorded when a step's event goes out
	// (see Trainer.TrainStep).
	OnEvent func(Event)
	// Between, when not nil, runs after a step's event whenever no later step is recorded:
	// the model then holds that step's weights, so Between may read or save them, or block (a
	// pause). Hold, when not nil, is asked before each step: true keeps Run from recording the
	// next step ahead, so that Between runs after this one (a caller with work for Between
	// says so there).
	Between func()
	Hold    func() bool
}

// Run trains until the step count is reached or ctx is cancelled, evaluating every EvalEvery
// steps and at the end, and saving a checkpoint every CheckpointEvery steps, at the end and
// when cancelled. A NaN loss stops the run without saving, so the last checkpoint on disk is
// the last good state; the returned error says so.
func (t *Trainer) Run(ctx context.Context, ro RunOptions) error {
	emit := func(e Event) {
		if ro.OnEvent != nil {
			e.Steps = t.Opts.Steps
			e.Elapsed = t.Elapsed.Seconds()
			ro.OnEvent(e)
		}
	}
	lastSaved := -1
	if ro.Resumed {
		lastSaved = t.Step() // the file resumed from holds this step
	}
	// snapshot reads the current step's checkpoint from the backend: nil when there is nothing
	// to save (no output, or the step is on disk already).
	snapshot := func() (*format.File, error) {
		if ro.Out == "" || lastSaved == t.Step() {
			return nil, nil
		}
		f, err := t.File(ro.Backend)
		if err != nil {
			return nil, fmt.Errorf("saving checkpoint: %w", err)
		}
		return f, nil
	}
	perm := ro.Perm
	if perm == 0 {
		perm = 0o644
	}
	// diverged stops the run on err, a loss, gradient or weight that is not finite.
	diverged := func(err error) error {
		return &DivergedError{Err: err, Out: ro.Out, LastSaved: lastSaved, LR: t.Opts.LR}
	}
	// write writes a snapshot to ro.Out (none for nil). When that fails, the run's last
	// state (final) is written elsewhere rather than lost; a checkpoint on the way is only
	// reported, and the run goes on to the next.
	write := func(f *format.File, final bool) error {
		if f == nil {
			return nil
		}
		if err := format.WriteFile(ro.Out, f, perm); err != nil {
			if errors.Is(err, format.ErrNotFinite) { // no file can hold it: training diverged
				return diverged(fmt.Errorf("the model after step %d is %w (%v)", t.Step(), ErrNotFinite, err))
			}
			if final {
				return rescue(f, ro.Out, perm, err)
			}
			held := "no checkpoint has been written yet"
			if lastSaved >= 0 {
				held = fmt.Sprintf("%s holds step %d", ro.Out, lastSaved)
			}
			emit(Event{Kind: "warning", Step: t.Step(), Text: fmt.Sprintf("saving the checkpoint of step %d failed: %v; "+
				"training goes on and the next checkpoint tries again (%s)", t.Step(), err, held)})
			return nil
		}
		lastSaved = t.Step()
		emit(Event{Kind: "checkpoint", Step: t.Step(), Path: ro.Out})
		return nil
	}
	save := func(final bool) error {
		f, err := snapshot()
		if err != nil {
			return err
		}
		return write(f, final)
	}
	// stopped saves the step and returns ctx's error: the run was stopped.
	stopped := func() error {
		if err := save(true); err != nil {
			return err
		}
		return ctx.Err()
	}
	tokens := float64(t.Opts.Batch * t.Opts.Model.Ctx)
	var ema float64 // smoothed seconds per step, for the ETA
	// quiet reports whether step k is followed at once by step k+1, with no evaluation,
	// sample or checkpoint between them: the next step can then be recorded before k's
	// results are read (see trainStep).
	quiet := func(k int) bool {
		at := func(every int) bool { return every > 0 && k%every == 0 }
		return k < t.Opts.Steps && !at(t.Opts.EvalEvery) && !at(ro.SampleEvery) && !at(t.Opts.CheckpointEvery)
	}
	for t.Step() < t.Opts.Steps {
		if ctx.Err() != nil && t.ahead.step == 0 {
			return stopped()
		}
		// (When stopped with a step recorded ahead, that step is finished first.)
		hold := ro.Hold != nil && ro.Hold()
		r, err := t.trainStep(ctx.Err() == nil && quiet(t.Step()+1) && !hold)
		if err != nil {
			if errors.Is(err, ErrNotFinite) {
				return diverged(err)
			}
			return err
		}
		sec := r.Duration.Seconds()
		if ema == 0 {
			ema = sec
		} else {
			ema = 0.9*ema + 0.1*sec
		}
		emit(Event{Kind: "step", Step: r.Step, Loss: r.Loss, LR: r.LR, GradNorm: r.GradNorm,
			MsPerStep: sec * 1e3, TokensPerS: tokens / sec, ETA: ema * float64(t.Opts.Steps-r.Step), Duration: r.Duration})
		if ro.Between != nil && t.ahead.step == 0 {
			ro.Between()
		}
		last := t.Step() == t.Opts.Steps
		if (t.Opts.EvalEvery > 0 && t.Step()%t.Opts.EvalEvery == 0) || last {
			v, err := t.Evaluate(ctx)
			if err != nil {
				if ctx.Err() != nil { // stopped during the evaluation: the step is saved without it
					return stopped()
				}
				return err
			}
			emit(Event{Kind: "eval", Step: t.Step(), Loss: r.Loss, Val: v, BestVal: t.Best.Loss})
		}
		if ro.SampleEvery > 0 && t.Step()%ro.SampleEvery == 0 && !last {
			s, err := t.GenerateSample(ctx, "\n", 160, uint64(t.Step()))
			if err != nil && ctx.Err() == nil && !errors.Is(err, ErrOutputNotFinite) {
				return err // (a model that cannot sample still trains and saves)
			}
			if err == nil {
				emit(Event{Kind: "sample", Step: t.Step(), Text: s})
			}
		}
		if last {
			// The state is read before the final sample and written after it, with it: a
			// sample that fails (after a GPU error nothing can be read back) still leaves the
			// run saved. A stop during the sample saves at once, with the sample before it.
			f, err := snapshot()
			if err != nil {
				return err
			}
			s, serr := t.GenerateSample(ctx, "\n", 300, uint64(t.Opts.Seed))
			if serr == nil && f != nil {
				f.Header.Sample = s
			}
			if err := write(f, true); err != nil {
				return err
			}
			if serr == nil {
				emit(Event{Kind: "sample", Step: t.Step(), Text: s})
			}
			if serr != nil && ctx.Err() != nil {
				return ctx.Err()
			}
			if serr != nil && !errors.Is(serr, ErrOutputNotFinite) {
				return fmt.Errorf("sampling after the last step: %w", serr)
			}
		} else if t.Opts.CheckpointEvery > 0 && t.Step()%t.Opts.CheckpointEvery == 0 {
			if err := save(false); err != nil {
				return err
			}
		}
	}
	return nil
}

// rescue writes f, the last state of a run that could not be saved at out (err: a full disk,
// say), to a new file in the system's temporary folder, so that the run's training is not
// lost, and returns the error that says where it went.
func rescue(f *format.File, out string, perm os.FileMode, err error) error {
	base := strings.TrimSuffix(filepath.Base(out), ".tinygpt")
	tmp, terr := os.CreateTemp("", fmt.Sprintf("%s-step%d-*.tinygpt", base, f.Step))
	if terr == nil {
		path := tmp.Name()
		tmp.Close()
		if terr = format.WriteFile(path, f, perm); terr == nil {
			return fmt.Errorf("saving checkpoint: %w; the run's state (step %d) was saved to %s instead: move it where it belongs (it resumes from there)", err, f.Step, path)
		}
		os.Remove(path)
	}
	return fmt.Errorf("saving checkpoint: %w; saving it to the temporary folder failed too (%v), so the steps since the last checkpoint are lost", err, terr)
}
