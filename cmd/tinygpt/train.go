package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"tinygpt/backend"
	"tinygpt/backend/cpu"
	"tinygpt/backend/webgpu"
	"tinygpt/data"
	"tinygpt/format"
	"tinygpt/gpt"
	"tinygpt/internal/disk"
	"tinygpt/train"
)

// backendHelp is the --backend flag's help.
const backendHelp = "compute backend: cpu, webgpu (the GPU, through Vulkan or Metal) or auto (the GPU when it pays off)"

// autoGPUWorkPerCore is the work of one pass, in floating-point operations per CPU thread,
// from which auto prefers a hardware GPU. Measured on 2026-11-22 (docs/performance.md, fourth
// session), `tinygpt train` on an NVIDIA H100 through WebGPU against 16 threads of the CPU
// backend: small's step (2.3 GFLOP) 2.3 ms against 6.9, tiny's (0.22 GFLOP) 1.5 ms against
// 2.1, but a GPU run starts by compiling its kernels (about a second on a fresh machine), which
// a tiny run does not win back. So from 0.8 GFLOP on 16 threads (small up), 0.1 on 2 (tiny
// up). Generation (a single-token pass is a few MFLOP) always stays on the CPU.
const autoGPUWorkPerCore = 0.05e9

// autoGPUWork is the pass size from which auto prefers a hardware GPU on this machine.
func autoGPUWork() float64 { return autoGPUWorkPerCore * float64(runtime.GOMAXPROCS(0)) }

// workload describes the passes a command will run, for choosing and checking a backend.
type workload struct {
	flops    float64 // floating-point operations of one pass (0: unknown)
	param    int64   // bytes of the largest parameter tensor (0: unknown)
	seqs     int     // sequences of ctx positions in one pass
	seqBytes int64   // bytes of the largest activation tensor per sequence
	headSize int     // the largest attention head, d_model / heads (0: unknown)
}

// modelLoad is the workload of passes over tokens positions (B·T) of a model of shape c, with
// flopsPerToken operations per position.
func modelLoad(c gpt.Config, tokens int, flopsPerToken float64) workload {
	// The flat weights, gradients and moments are split across buffers where they must be
	// (backend.Backend.SegmentLen); a parameter and an activation each live in one.
	// The largest activations are the logits and the MLP's hidden layer.
	return workload{flops: flopsPerToken * float64(tokens), param: int64(gpt.LargestParam(c)) * 4,
		seqs: (tokens + c.Ctx - 1) / c.Ctx, seqBytes: int64(c.Ctx) * int64(max(gpt.Vocab, c.DMlp)) * 4,
		headSize: c.DModel / max(c.Heads, 1)}
}

// trainLoad is the workload of training steps of batch sequences.
func trainLoad(c gpt.Config, batch int) workload {
	return modelLoad(c, batch*c.Ctx, c.FLOPsPerToken())
}

// openBackend returns the named compute backend for work. With "auto" it picks the GPU when a
// hardware adapter exists, the model's tensors fit its buffers and a pass is large enough to
// gain; it falls back to the CPU otherwise, and says on w which it chose and why.
func openBackend(name string, work workload, w io.Writer) (backend.Backend, error) {
	switch name {
	case "cpu":
		return cpu.New(), nil
	case "webgpu":
		be, err := openGPU(work)
		if errors.Is(err, webgpu.ErrTimestamps) {
			return nil, fmt.Errorf("--backend webgpu: %w; unset %s", err, webgpu.TimestampsEnv)
		}
		if err != nil {
			return nil, fmt.Errorf("--backend webgpu: %w; use --backend cpu", err)
		}
		if be.Software() {
			fmt.Fprintf(w, "note:    %s is a software renderer, which runs the GPU's kernels on the CPU, many times slower than --backend cpu\n",
				strings.TrimPrefix(be.Describe(), "webgpu: "))
		}
		return be, nil
	case "auto":
		if work.flops > 0 && work.flops < autoGPUWork() {
			fmt.Fprintf(w, "backend auto: cpu (a pass is %.3g GFLOP, under the %.3g GFLOP from which a GPU overtakes %d CPU threads)\n",
				work.flops/1e9, autoGPUWork()/1e9, runtime.GOMAXPROCS(0))
			return cpu.New(), nil
		}
		be, err := webgpu.New()
		if err != nil {
			fmt.Fprintf(w, "backend auto: cpu (no usable GPU: %v)\n", err)
			return cpu.New(), nil
		}
		if be.Software() {
			fmt.Fprintf(w, "backend auto: cpu (the only WebGPU adapter, %s, is a software renderer, slower than the CPU backend)\n",
				strings.TrimPrefix(be.Describe(), "webgpu: "))
			be.Close()
			return cpu.New(), nil
		}
		if err := fits(be, work); err != nil {
			fmt.Fprintf(w, "backend auto: cpu (%s: %v)\n", be.Describe(), err)
			be.Close()
			return cpu.New(), nil
		}
		why := "a GPU adapter is available"
		if work.flops > 0 {
			why = fmt.Sprintf("a hardware GPU and a pass of %.3g GFLOP, over the %.3g GFLOP from which it overtakes %d CPU threads",
				work.flops/1e9, autoGPUWork()/1e9, runtime.GOMAXPROCS(0))
		}
		fmt.Fprintf(w, "backend auto: %s (%s)\n", be.Describe(), why)
		return be, nil
	}
	return nil, fmt.Errorf("--backend %q: unknown backend (have cpu, webgpu, auto)", name)
}

// openGPU opens the webgpu backend for work, refusing work that does not fit it.
func openGPU(work workload) (*webgpu.Backend, error) {
	be, err := webgpu.New()
	if err != nil {
		return nil, err
	}
	if err := fits(be, work); err != nil {
		be.Close()
		return nil, err
	}
	return be, nil
}

// fits checks that the largest tensor of work that must lie in one buffer fits one buffer of
// the GPU, and that the GPU's attention kernels take the model's heads.
func fits(be *webgpu.Backend, work workload) error {
	return fitsGPU(work, int64(be.SegmentLen())*4)
}

// fitsGPU is fits for a GPU whose buffers hold at most lim bytes.
func fitsGPU(work workload, lim int64) error {
	if err := fitsBuffers(work, lim); err != nil {
		return err
	}
	if work.headSize > webgpu.MaxHeadSize {
		return fmt.Errorf("the model's attention heads are %d wide (d_model / heads) and the GPU's attention takes at most %d (more heads would do)",
			work.headSize, webgpu.MaxHeadSize)
	}
	return nil
}

// fitsBuffers checks that each tensor of work fits a GPU buffer of lim bytes; where the batch's
// activations are what does not fit, it says how large a batch does.
func fitsBuffers(work workload, lim int64) error {
	mb := func(n int64) int64 { return (n + 1<<20 - 1) >> 20 }
	if work.param > lim {
		return fmt.Errorf("the model has a parameter tensor of %d MB and the GPU's buffers hold at most %d MB", mb(work.param), lim>>20)
	}
	if act := int64(work.seqs) * work.seqBytes; act > lim {
		fit := lim / work.seqBytes
		if fit == 0 {
			return fmt.Errorf("one sequence needs an activation tensor of %d MB and the GPU's buffers hold at most %d MB", mb(work.seqBytes), lim>>20)
		}
		return fmt.Errorf("a batch of %d sequences needs an activation tensor of %d MB and the GPU's buffers hold at most %d MB: a batch of at most %d fits",
			work.seqs, mb(act), lim>>20, fit)
	}
	return nil
}

// backendFailure returns the backend's own error (a lost GPU device, out of GPU memory) when
// it has one, since it explains a failure better than its symptom (such as a NaN loss), and
// err otherwise (nil for none). hint, if not empty, says what to do next.
func backendFailure(be backend.Backend, err error, hint string) error {
	if berr := backend.Err(be); berr != nil {
		if hint == "" {
			hint = "switch to --backend cpu"
		}
		return fmt.Errorf("%w (%s)", berr, hint)
	}
	return err
}

// diskFree is disk.Free, which tests replace.
var diskFree = disk.Free

// autoFallback runs build, which sets a run up on *be. When auto put the run on a GPU that then
// failed while setting it up (short of memory for it: only allocating tells), it says so,
// releases the GPU and runs build again on the CPU, as auto would have chosen had it known.
func autoFallback(e *env, name string, be *backend.Backend, build func() error) error {
	err := build()
	berr := backend.Err(*be)
	if err == nil || name != "auto" || berr == nil {
		return err
	}
	fmt.Fprintf(e.stderr, "backend auto: cpu (the GPU could not set the run up: %v)\n", berr)
	backend.Close(*be)
	*be = cpu.New()
	return build()
}

func presetNames() string {
	var names []string
	for _, p := range gpt.Presets {
		names = append(names, p.Name)
	}
	return strings.Join(names, ", ")
}

func cmdTrain(args []string, e *env) error {
	fs := newFlags(e, "train", "[flags]", `
Trains a model and saves it to --out, checkpointing as it goes. With no flags it trains the
small preset on the built-in corpus for 1500 steps and prints a sample at the end.
Ctrl-C (or SIGTERM, SIGHUP, SIGPIPE) stops the run after the current step and saves a
checkpoint, exiting with 128 + the signal's number; --resume continues it.`)
	presetName := fs.String("preset", gpt.DefaultPreset, "model size: "+presetNames())
	dataPath := fs.String("data", "", "training text: a file, a directory (see --glob) or - for stdin; default the built-in corpus")
	glob := fs.String("glob", "", "with a directory --data, only files whose name matches this pattern (e.g. '*.go')")
	steps := fs.Int("steps", 0, "training steps (default: the preset's)")
	batch := fs.Int("batch", 0, "sequences per step (default: the preset's)")
	size := addSizeFlags(fs)
	lr := fs.Float64("lr", 3e-4, "peak learning rate")
	minLR := fs.Float64("min-lr", 0, "final learning rate of the cosine schedule (default lr/10)")
	schedule := fs.String("schedule", train.Constant, "learning-rate schedule: constant or cosine")
	warmup := fs.Int("warmup", 0, "steps of linear learning-rate warmup")
	dropout := fs.Float64("dropout", 0, "dropout probability on embeddings and residual branches")
	evalEvery := fs.Int("eval-every", 100, "steps between validation passes (0: only at the end)")
	evalBatches := fs.Int("eval-batches", 8, "validation batches averaged per evaluation")
	ckptEvery := fs.Int("checkpoint-every", 500, "steps between checkpoints (0: only at the end and on Ctrl-C)")
	out := fs.String("out", "", "model file to write (default: derived from the corpus and preset; with --resume, the resumed file)")
	resume := fs.String("resume", "", "continue the run saved in this model file")
	initFrom := fs.String("init-from", "", "start a new run from the weights of this model file (fine-tuning), of its size unless --preset or sizes say otherwise")
	seed := fs.Int64("seed", 42, "random seed for initialisation, batches and dropout")
	backendName := fs.String("backend", "cpu", backendHelp)
	logJSON := fs.String("log-json", "", "also write one JSON object per event (step, eval, sample, checkpoint) to this file")
	sampleEvery := fs.Int("sample-every", 0, "steps between live samples printed during training (0: only at the end)")
	if _, err := parse(e, fs, args, 0); err != nil {
		return err
	}
	set := setFlags(fs)
	if err := checkData(fs, "the built-in corpus (with --resume, the one the model holds)"); err != nil {
		return err
	}

	var be backend.Backend
	open := func(c gpt.Config, batch int) error {
		var err error
		be, err = openBackend(*backendName, trainLoad(c, batch), e.stderr)
		return err
	}
	defer func() {
		if be != nil {
			backend.Close(be)
		}
	}()

	var corpus *data.Corpus
	if set["data"] || set["glob"] {
		if set["glob"] && !set["data"] {
			return fmt.Errorf("--glob needs a directory --data")
		}
		c, err := data.Load(*dataPath, *glob, e.stdin)
		if err != nil {
			return err
		}
		corpus = &c
	}

	var t *train.Trainer
	initNote := "" // what a new run's weights came from, with --init-from
	if *resume != "" {
		for _, name := range []string{"preset", "layers", "d-model", "heads", "ctx", "batch", "lr", "min-lr", "schedule", "warmup", "dropout", "seed", "init-from", "eval-batches"} {
			if set[name] {
				return fmt.Errorf("--%s cannot be changed when resuming: a resumed run keeps its settings (only --steps, --data, --out, --eval-every, --checkpoint-every and logging can be given)", name)
			}
		}
		f, err := format.ReadFile(*resume)
		if err != nil {
			return err
		}
		if f.M == nil {
			return fmt.Errorf("%s holds weights only (%s), without the optimizer state a run resumes from; use --init-from to start a new run from its weights", *resume, dtypeName(f))
		}
		fc := f.Header.Config
		if err := open(fileConfig(f), fc.BatchSize); err != nil {
			return err
		}
		err = autoFallback(e, *backendName, &be, func() (err error) {
			t, err = train.Resume(be, f, train.ResumeOptions{Steps: *steps, Corpus: corpus})
			return err
		})
		if err != nil {
			return fmt.Errorf("resuming %s: %w", *resume, backendFailure(be, err, ""))
		}
		if set["steps"] && (*steps < 1 || *steps > train.MaxSteps) {
			return fmt.Errorf("--steps must be between 1 and %d", train.MaxSteps)
		}
		if set["eval-every"] {
			if *evalEvery < 0 {
				return fmt.Errorf("--eval-every must not be negative")
			}
			t.Opts.EvalEvery = *evalEvery
		}
		if set["checkpoint-every"] {
			if *ckptEvery < 0 {
				return fmt.Errorf("--checkpoint-every must not be negative")
			}
			t.Opts.CheckpointEvery = *ckptEvery
		}
		if *out == "" {
			*out = *resume
			if real, err := filepath.EvalSymlinks(*resume); err == nil {
				*out = real // a link to the model (latest.tinygpt, say) is followed, not replaced
			}
		}
		fmt.Fprintf(e.stdout, "resuming %s at step %d of %d\n", *resume, t.Step(), t.Opts.Steps)
		if note := scheduleMoved(t, fc.MaxSteps); note != "" {
			fmt.Fprintln(e.stdout, note)
		}
	} else {
		p, err := gpt.PresetByName(*presetName)
		if err != nil {
			return fmt.Errorf("--preset: %w", err)
		}
		var init *format.File
		if *initFrom != "" {
			if init, err = format.ReadFile(*initFrom); err != nil {
				return err
			}
			if !set["preset"] && !set["layers"] && !set["d-model"] && !set["heads"] && !set["ctx"] {
				p = initPreset(fileConfig(init)) // the model's own size
			}
		}
		opts := train.DefaultOptions(p)
		if size.apply(&opts.Model, set) {
			opts.Preset = ""
		}
		if set["steps"] {
			opts.Steps = *steps
		}
		if set["batch"] {
			opts.Batch = *batch
		}
		opts.LR, opts.MinLR = *lr, *lr/10
		if set["min-lr"] {
			opts.MinLR = *minLR
		}
		opts.Schedule, opts.Warmup, opts.Dropout = *schedule, *warmup, *dropout
		opts.EvalEvery, opts.EvalBatches, opts.CheckpointEvery = *evalEvery, *evalBatches, *ckptEvery
		opts.Seed = *seed
		if err := validateFlags(opts, set); err != nil {
			return err
		}
		if corpus == nil {
			c := data.Builtin()
			corpus = &c
		}
		if err := open(opts.Model, opts.Batch); err != nil {
			return err
		}
		if n := opts.Model.NumParams(); n >= slowInitParams {
			fmt.Fprintf(e.stdout, "initialising %s parameters...\n", commas(n))
		}
		err = autoFallback(e, *backendName, &be, func() (err error) {
			t, err = train.New(be, opts, *corpus)
			return err
		})
		if err != nil {
			return backendFailure(be, err, "")
		}
		if init != nil {
			if err := loadInitWeights(t, init, *initFrom); err != nil {
				return err
			}
			initNote = fmt.Sprintf("init:    weights from %s (step %d, %s); a new run, with its own settings\n", *initFrom, init.Step, dtypeName(init))
		}
		if *out == "" {
			if *out, err = freeName(defaultOutName(corpus.Source, opts)); err != nil {
				return err
			}
		}
	}
	outIsModel, err := checkWritable("--out", *out)
	if err != nil {
		return err
	}

	if *sampleEvery < 0 {
		return fmt.Errorf("--sample-every must not be negative")
	}
	var logw io.Writer
	if *logJSON != "" {
		if err := checkLog(*logJSON, *out); err != nil {
			return err
		}
		f, err := os.OpenFile(*logJSON, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("--log-json: %w", err)
		}
		defer f.Close()
		logw = f
	}

	resumed := *resume != "" && samePath(*resume, *out) // *out holds the run's current state
	saving := *out
	if outIsModel && !resumed {
		saving += " (replacing the model there at the first checkpoint)"
	}
	if n := train.CheckpointBytes(t.Opts.Model); n >= 256<<20 {
		saving += fmt.Sprintf(", %.1f GB a checkpoint", float64(n)/(1<<30))
	}
	describeRun(e.stdout, t, be, saving)
	fmt.Fprint(e.stdout, initNote)
	// A run of hours should not learn at its first checkpoint that there is no room for it.
	need := train.CheckpointBytes(t.Opts.Model)
	if t.CorpusStored() {
		need += int64(len(t.Corpus.Text))
	}
	if free, ok := diskFree(filepath.Dir(*out)); ok && free < need {
		fmt.Fprintf(e.stderr, "warning: the disk holding %s has %s free, less than a checkpoint's %s: saving will fail until there is room "+
			"(training goes on, and its last state then goes to the temporary folder)\n", *out, disk.Size(free), disk.Size(need))
	}
	ctx, caught, stop := interruptible(e.stdout, "stopping; a checkpoint is saved once the step under way is done")
	defer stop()
	p := newProgress(e, t.Opts.Steps, logw)
	saved := 0 // the step the checkpoint at *out holds, for the hint after a failure
	if resumed {
		saved = t.Step()
	}
	err = t.Run(ctx, train.RunOptions{Out: *out, Backend: be.Name(), SampleEvery: *sampleEvery, Resumed: resumed,
		OnEvent: func(ev train.Event) {
			if ev.Kind == "checkpoint" {
				saved = ev.Step
			}
			p.event(ev)
		}})
	p.finish()
	if errors.Is(err, context.Canceled) {
		if t.Step() >= t.Opts.Steps { // stopped in the final evaluation or sample: nothing is left to resume
			without := "a final sample"
			if t.LastEvalStep() != t.Step() {
				without = "the final evaluation and sample"
			}
			fmt.Fprintf(e.stdout, "\nstopped after the last step; saved %s with all %d steps (without %s)\n", *out, t.Step(), without)
		} else {
			fmt.Fprintf(e.stdout, "\nstopped at step %d; saved %s. Continue with: %s\n", t.Step(), *out,
				resumeHint(*out, *dataPath, *glob, t.CorpusStored()))
		}
		if s := caught(); s != nil {
			return interrupted{s}
		}
		return nil
	}
	if err != nil {
		hint := ""
		if saved > 0 {
			hint = fmt.Sprintf("switch to --backend cpu; the last checkpoint, %s, holds step %d: tinygpt train --resume %s --backend cpu", *out, saved, *out)
		}
		return backendFailure(be, err, hint)
	}
	tr, val := t.LastLosses()
	fmt.Fprintf(e.stdout, "\ndone: %s in %s, train loss %.4f, val loss %.4f", plural(t.Step(), "step"), t.Elapsed.Round(100*time.Millisecond), tr, val)
	if t.Best != nil {
		fmt.Fprintf(e.stdout, " (best %.4f at step %d)", t.Best.Loss, t.Best.Step)
	}
	fmt.Fprintf(e.stdout, "\nsaved %s\n\nsample:\n%s\n", *out, safeText(t.Sample))
	return nil
}

// interruptible returns a context that the first Ctrl-C, SIGTERM, SIGHUP (the terminal was
// closed) or SIGPIPE (whoever read the output went away) cancels, saying so on w with what
// happens next; a signal the process ignores (nohup's SIGHUP) stays ignored. A second Ctrl-C or
// SIGTERM ends the process at once, as it would without us, while later hangups and broken
// pipes are ignored, so that the checkpoint is still written. caught returns the signal that
// cancelled the context (nil if none); stop releases the signals.
func interruptible(w io.Writer, what string) (ctx context.Context, caught func() os.Signal, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sig := make(chan os.Signal, 4)
	quit, done := make(chan struct{}), make(chan struct{})
	var first atomic.Value
	notifyStop(sig)
	go func() {
		defer close(done)
		for {
			select {
			case s := <-sig:
				if ctx.Err() != nil {
					continue // a hangup or broken pipe after the first signal
				}
				first.Store(s)
				signal.Reset(os.Interrupt, syscall.SIGTERM) // the next one takes its default action
				fmt.Fprintf(w, "\n%s: %s (Ctrl-C again quits at once, without saving)\n", signalName(s), what)
				cancel()
			case <-quit:
				return
			}
		}
	}()
	caught = func() os.Signal {
		s, _ := first.Load().(os.Signal)
		return s
	}
	return ctx, caught, func() {
		signal.Stop(sig)
		cancel()
		close(quit)
		<-done // nothing is printed after stop returns
	}
}

// signalName says what a signal that stops training means to the user.
func signalName(s os.Signal) string {
	if name, ok := stopSignalNames[s]; ok {
		return name
	}
	return s.String()
}

// interrupted is the error of a run stopped by a signal, after its checkpoint was saved: the
// process exits with 128 + the signal's number, as a shell reports a process the signal ended.
type interrupted struct{ sig os.Signal }

func (e interrupted) Error() string { return "stopped by " + e.sig.String() }

// exitCode is the process's exit status for the run e stopped.
func (e interrupted) exitCode() int {
	if n, ok := e.sig.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return 1
}

// scheduleMoved says how a resumed cosine run's learning rate changes when --steps moves the
// schedule's end away from saved, the total the file planned ("" when nothing changes): the
// cosine is stretched over the new total, so the rate of the next step jumps (up, when a finished
// run is extended).
func scheduleMoved(t *train.Trainer, saved int) string {
	now := t.Opts.LRSchedule()
	if now.Kind != train.Cosine || saved == now.Steps {
		return ""
	}
	was := now
	was.Steps = saved
	next := t.Step() + 1
	wasLR := was.At(next)
	if t.Step() >= saved {
		wasLR = was.At(saved) // the run had ended: its last rate
	}
	return fmt.Sprintf("note:    the cosine schedule now ends at step %d, not %d: step %d's learning rate is %.2e (the saved schedule: %.2e), falling to %.2e at step %d",
		now.Steps, saved, next, now.At(next), wasLR, now.At(now.Steps), now.Steps)
}

// resumeHint is the command that continues a run saved in out: with the run's --data (and
// --glob) where the file does not hold the corpus.
// Its arguments are quoted for a shell where they need it.
func resumeHint(out, dataPath, glob string, stored bool) string {
	hint := "tinygpt train --resume " + shellQuote(out)
	if stored {
		return hint
	}
	switch {
	case dataPath == "-":
		hint += " --data - (the same text on standard input)"
	case strings.HasPrefix(dataPath, "/dev/fd/") || strings.HasPrefix(dataPath, "/proc/self/fd/"):
		hint += " --data <(...) (the same text, from the same command)" // --data <(command): its pipe is gone
	default:
		hint += " --data " + shellQuote(dataPath)
	}
	if glob != "" {
		hint += " --glob " + shellQuote(glob)
	}
	return hint
}

// shellQuote returns s as one word for a POSIX shell: as it is when it holds only characters
// no shell treats specially, else in single quotes.
func shellQuote(s string) string {
	plain := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:,+=@%", r)) {
			plain = false
			break
		}
	}
	if plain {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// checkWritable fails early, before any training, if the model file cannot be written: its
// directory is missing or read-only, or the path is a directory. It also refuses to replace a
// file that is not a model (a corpus given by mistake, say): only .tinygpt files are replaced.
// It refuses a path that is not a regular file (a symbolic link, a device, a pipe), which the
// save's rename would replace. what names the path in messages (--out, output). isModel reports
// that out already holds a model file, which the run will replace.
func checkWritable(what, out string) (isModel bool, err error) {
	// A model is written to a temporary file renamed over out, which would replace a link, a
	// device or a pipe (as root, /dev/null) rather than write through it.
	info, statErr := os.Lstat(out)
	if statErr == nil && info.IsDir() {
		return false, fmt.Errorf("%s %s is a directory; give a file name", what, out)
	} else if statErr == nil && !info.Mode().IsRegular() {
		return false, fmt.Errorf("%s %s exists and is not a regular file (a symbolic link, device or pipe), which saving would replace; give the file itself, or another name", what, out)
	}
	head, err := fileHead(out, len(format.Magic))
	if err == nil && len(head) > 0 && string(head) != format.Magic {
		return false, fmt.Errorf("%s %s exists and is not a .tinygpt model file; TinyGPT replaces only model files: give another name, or remove it first", what, out)
	}
	isModel = err == nil && string(head) == format.Magic
	// Saving renames a new file over out, which the folder's permissions allow whatever out's
	// own are: a model its owner made read-only would be replaced without a word.
	if isModel && statErr == nil && info.Mode().Perm()&0o200 == 0 {
		return false, fmt.Errorf("%s %s is read-only, and TinyGPT does not replace a read-only model: give another name, or make it writable first", what, out)
	}
	dir := filepath.Dir(out)
	if info, err := os.Stat(dir); err != nil && errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("%s %s: the folder %s does not exist", what, out, dir)
	} else if err == nil && !info.IsDir() {
		return false, fmt.Errorf("%s %s: %s is not a folder", what, out, dir)
	}
	f, err := os.CreateTemp(dir, ".tinygpt-check-*")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) { // the probe's own name says nothing to the user
			err = pe.Err
		}
		return false, fmt.Errorf("%s %s: cannot write in the folder %s: %w", what, out, dir, err)
	}
	f.Close()
	return isModel, os.Remove(f.Name())
}

// checkLog refuses a --log-json file that would damage something: the model file itself, or
// an existing file that is not a JSON log (a corpus given by mistake, say), which appending
// would change.
func checkLog(path, out string) error {
	if samePath(path, out) {
		return fmt.Errorf("--log-json %s is the model file --out; give the log another name", path)
	}
	if head, err := fileHead(path, 1); err == nil && len(head) > 0 && head[0] != '{' {
		return fmt.Errorf("--log-json %s exists and is not a JSON log (the log is appended to it); give another name, or remove it first", path)
	}
	return nil
}

// samePath reports whether a and b name the same file: the same file where both exist,
// otherwise the same absolute path.
func samePath(a, b string) bool {
	if fa, err := os.Stat(a); err == nil {
		fb, err := os.Stat(b)
		return err == nil && os.SameFile(fa, fb)
	}
	pa, err1 := filepath.Abs(a)
	pb, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && pa == pb
}

// fileHead returns up to n bytes from the start of the regular file at path, and an error
// where there is no such file.
func fileHead(path string, n int) ([]byte, error) {
	if info, err := os.Stat(path); err != nil {
		return nil, err
	} else if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	k, err := io.ReadFull(f, b)
	if err != nil && k == 0 && err != io.EOF {
		return nil, err
	}
	return b[:k], nil
}

// sizeFlags are the flags that give a model a custom size (train, bench).
type sizeFlags struct{ layers, dModel, heads, ctx *int }

func addSizeFlags(fs *flag.FlagSet) sizeFlags {
	return sizeFlags{
		layers: fs.Int("layers", 0, "custom size: transformer blocks"),
		dModel: fs.Int("d-model", 0, "custom size: embedding width"),
		heads:  fs.Int("heads", 0, "custom size: attention heads (default, as the original: d-model/32 when 32 divides it, else 3 when 3 does, else 1; 1280: 20)"),
		ctx:    fs.Int("ctx", 0, "custom size: context length in bytes"),
	}
}

// apply changes c by the size flags that were set (a new --d-model also sets the MLP's width
// and, unless --heads is set, the heads), and reports whether any was.
func (s sizeFlags) apply(c *gpt.Config, set map[string]bool) (custom bool) {
	if set["layers"] {
		c.Layers, custom = *s.layers, true
	}
	if set["d-model"] {
		*c, custom = c.WithWidth(*s.dModel), true
	}
	if set["heads"] {
		c.Heads, custom = *s.heads, true
	}
	if set["ctx"] {
		c.Ctx, custom = *s.ctx, true
	}
	return custom
}

// validateFlags checks options against the flags that set them, so that errors name the flag.
func validateFlags(o train.Options, set map[string]bool) error {
	c := o.Model
	checks := []struct {
		flag string
		bad  bool
		msg  string
	}{
		{"layers", c.Layers < 1 || c.Layers > gpt.MaxLayers, fmt.Sprintf("must be between 1 and %d", gpt.MaxLayers)},
		{"d-model", c.DModel < 1 || c.DModel > gpt.MaxDModel, fmt.Sprintf("must be between 1 and %d", gpt.MaxDModel)},
		{"heads", c.Heads < 1, "must be at least 1"},
		{"heads", c.Heads >= 1 && c.DModel%c.Heads != 0, fmt.Sprintf("must divide --d-model %d", c.DModel)},
		{"ctx", c.Ctx < 1 || c.Ctx > gpt.MaxCtx, fmt.Sprintf("must be between 1 and %d", gpt.MaxCtx)},
		{"steps", o.Steps < 1 || o.Steps > train.MaxSteps, fmt.Sprintf("must be between 1 and %d", train.MaxSteps)},
		{"batch", o.Batch < 1, "must be at least 1"},
		{"lr", !(o.LR > 0) || math.IsInf(o.LR, 0), "must be a positive number"},
		{"min-lr", !(o.MinLR >= 0 && o.MinLR <= o.LR), "must be between 0 and --lr"},
		{"min-lr", set["min-lr"] && o.Schedule != train.Cosine, "is the floor of the cosine schedule: add --schedule cosine"},
		{"schedule", o.Schedule != train.Constant && o.Schedule != train.Cosine, "must be constant or cosine"},
		{"warmup", o.Warmup < 0, "must not be negative"},
		{"warmup", o.Warmup > o.Steps, fmt.Sprintf("must not be longer than the run (--steps %d): the learning rate would never reach --lr", o.Steps)},
		{"dropout", !(o.Dropout >= 0 && o.Dropout < 1), "must be in [0, 1)"},
		{"eval-every", o.EvalEvery < 0, "must not be negative"},
		{"eval-batches", o.EvalBatches < 1, "must be at least 1"},
		{"checkpoint-every", o.CheckpointEvery < 0, "must not be negative"},
		{"seed", o.Seed < 0, "must not be negative"},
	}
	for _, ch := range checks {
		if ch.bad {
			return fmt.Errorf("--%s %s", ch.flag, ch.msg)
		}
	}
	return o.Validate()
}

func loadInitWeights(t *train.Trainer, f *format.File, path string) error {
	fc := f.Header.Config
	if c := t.Opts.Model; fileConfig(f) != c {
		return fmt.Errorf("--init-from %s: its model is %dL d%d %dh ctx%d, the run's is %s; pick the same --preset or sizes",
			path, fc.Layers, fc.DModel, fc.Heads, fc.Ctx, c)
	}
	return t.Model.SetWeights(f.Weights)
}

// initPreset is the preset to start a run from a model of shape c with: the preset of that
// shape, or a custom one of it with the default preset's batch and steps.
func initPreset(c gpt.Config) gpt.Preset {
	for _, p := range gpt.Presets {
		if p.Config == c {
			return p
		}
	}
	p, _ := gpt.PresetByName(gpt.DefaultPreset)
	p.Name, p.Config = "", c
	return p
}

// freeName returns name, or, when a file of that name exists, the first of name-2, name-3, ...
// that does not (before the extension): a name train chose itself never replaces a model.
func freeName(name string) (string, error) {
	ext := filepath.Ext(name)
	stem := strings.TrimSuffix(name, ext)
	for i := 1; i <= 1000; i++ {
		try := name
		if i > 1 {
			try = fmt.Sprintf("%s-%d%s", stem, i, ext)
		}
		if _, err := os.Lstat(try); errors.Is(err, fs.ErrNotExist) {
			return try, nil
		}
	}
	return "", fmt.Errorf("%s and %s-2%s to -1000%s all exist; name the model with --out", name, stem, ext, ext)
}

// defaultOutName derives a model file name from the corpus and the model size.
func defaultOutName(source string, o train.Options) string {
	base := "builtin"
	switch source {
	case "stdin":
		base = "stdin"
	case "builtin", "":
	default:
		base = strings.TrimSuffix(filepath.Base(source), filepath.Ext(source))
		if base == "" || base == "." || base == "/" {
			base = "corpus"
		}
	}
	size := o.Preset
	if size == "" {
		size = fmt.Sprintf("%dL-d%d-ctx%d", o.Model.Layers, o.Model.DModel, o.Model.Ctx)
	}
	return base + "-" + size + ".tinygpt"
}

// plural returns "1 step" or "n steps".
func plural(n int, one string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %ss", n, one)
}

// slowInitParams is the model size from which initialising takes long enough (seconds to a
// minute) to say so first.
const slowInitParams = 50_000_000

// listPaths lists the first few of paths for a note, their control characters made visible
// (a file name can hold any byte but / and NUL), and how many more there are.
func listPaths(paths []string) string {
	const shown = 5
	var b strings.Builder
	for i, p := range paths[:min(len(paths), shown)] {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(safeText(p))
	}
	if len(paths) > shown {
		fmt.Fprintf(&b, " and %d more", len(paths)-shown)
	}
	return b.String()
}

func describeRun(w io.Writer, t *train.Trainer, be backend.Backend, out string) {
	o := t.Opts
	name := o.Preset
	if name == "" {
		name = "custom"
	}
	fmt.Fprintf(w, "model:   %s (%s), %s parameters\n", name, o.Model, commas(o.Model.NumParams()))
	fmt.Fprintf(w, "corpus:  %s, %s bytes (train %s, val %s)\n", t.Corpus.Source, commas(len(t.Corpus.Text)), commas(len(t.Split.Train)), commas(len(t.Split.Val)))
	if u := t.Corpus.Unreadable; len(u) > 0 {
		fmt.Fprintf(w, "note:    skipped what could not be read: %s\n", listPaths(u))
	}
	if s := t.Corpus.Skipped; len(s) > 0 {
		fmt.Fprintf(w, "note:    skipped %s that are not text (binary, UTF-16 or UTF-32) or empty: %s\n", plural(len(s), "file"), listPaths(s))
	}
	if t.Split.Overlap() {
		fmt.Fprintf(w, "warning: the corpus is so short that a split was widened to one window of ctx+1 bytes; validation overlaps training\n")
	}
	if !t.CorpusStored() {
		why := "it is not UTF-8 text"
		if len(t.Corpus.Text) > train.MaxStoredCorpus {
			why = fmt.Sprintf("it is larger than %d MB", train.MaxStoredCorpus>>20)
		}
		fmt.Fprintf(w, "note:    the corpus is not kept in the model file (%s): --resume and continuing need --data again\n", why)
	}
	if ratio := float64(len(t.Split.Train)) / float64(o.Model.NumParams()); ratio < 1 {
		fmt.Fprintf(w, "note:    only %.2f training bytes per parameter: expect the model to memorise rather than generalise (watch val loss)\n", ratio)
	}
	lr := fmt.Sprintf("lr %.6g %s", o.LR, o.Schedule)
	if o.Schedule == train.Cosine {
		lr += fmt.Sprintf(" to %.6g", o.MinLR) // lr/10 would print as 2.9999999999999997e-05
	}
	if o.Warmup > 0 {
		lr += fmt.Sprintf(", warmup %d", o.Warmup)
	}
	fmt.Fprintf(w, "train:   %s × batch %d × ctx %d, %s, dropout %g, seed %d\n", plural(o.Steps, "step"), o.Batch, o.Model.Ctx, lr, o.Dropout, o.Seed)
	fmt.Fprintf(w, "backend: %s\nsaving:  %s\n\n", be.Describe(), out)
}

func dtypeName(f *format.File) string {
	if f.Header.WeightDtype == "" {
		return "fp32"
	}
	return f.Header.WeightDtype
}

// progress prints training events: a redrawn line on a terminal, periodic lines otherwise,
// and JSON lines to the log.
type progress struct {
	e        *env
	steps    int
	log      *json.Encoder
	lastLine time.Time
	live     bool // a live line is on screen
	val      float64
	best     float64
	diverged bool // the divergence warning was given
}

// divergedLoss is a loss far above a random model's, ln 256 ≈ 5.55 nats: a run whose loss
// climbs past it is diverging (the learning rate is too high for it).
const divergedLoss = 2 * 5.545

func newProgress(e *env, steps int, log io.Writer) *progress {
	p := &progress{e: e, steps: steps, val: math.NaN(), best: math.NaN()}
	if log != nil {
		p.log = json.NewEncoder(log)
	}
	return p
}

func (p *progress) event(ev train.Event) {
	if p.log != nil {
		if err := p.log.Encode(ev); err != nil {
			// A full disk must not stop the training; say once that the log ends here.
			p.clear()
			fmt.Fprintf(p.e.stderr, "warning: --log-json: %v; the log stops here, training goes on\n", err)
			p.log = nil
		}
	}
	w := p.e.stdout
	if ev.Kind == "step" && ev.Loss > divergedLoss && !p.diverged {
		p.diverged = true
		p.clear()
		fmt.Fprintf(p.e.stderr, "warning: the loss, %.4g at step %d, is far above a random model's (5.55): the run is diverging; a lower --lr or more --warmup may help\n", ev.Loss, ev.Step)
	}
	switch ev.Kind {
	case "step":
		line := fmt.Sprintf("step %*d/%d  loss %.4f  val %s  lr %.2e  %6.1f ms/step  %s tok/s  ETA %s",
			len(fmt.Sprint(p.steps)), ev.Step, p.steps, ev.Loss, fmtLoss(p.val), ev.LR, ev.MsPerStep,
			commas(int(ev.TokensPerS)), fmtDuration(ev.ETA))
		if p.e.tty {
			if time.Since(p.lastLine) > 100*time.Millisecond || ev.Step == p.steps {
				fmt.Fprintf(w, "\r\033[K%s", line)
				p.lastLine, p.live = time.Now(), true
			}
		} else if ev.Step == 1 || time.Since(p.lastLine) > 10*time.Second {
			fmt.Fprintln(w, line)
			p.lastLine = time.Now()
		}
	case "eval":
		p.val, p.best = ev.Val, ev.BestVal
		p.clear()
		fmt.Fprintf(w, "step %*d/%d  train %.4f  val %.4f  best val %.4f  elapsed %s\n",
			len(fmt.Sprint(p.steps)), ev.Step, p.steps, ev.Loss, ev.Val, ev.BestVal, fmtDuration(ev.Elapsed))
		p.lastLine = time.Now()
	case "sample":
		if ev.Step == p.steps {
			break // the final sample, printed with the run's summary
		}
		p.clear()
		fmt.Fprintf(w, "--- sample at step %d ---\n%s\n---\n", ev.Step, safeText(ev.Text))
	case "checkpoint":
		// Saving is quiet; the final message names the file.
	case "warning":
		p.clear()
		fmt.Fprintf(p.e.stderr, "warning: %s\n", ev.Text)
	}
}

func (p *progress) clear() {
	if p.live {
		fmt.Fprint(p.e.stdout, "\r\033[K")
		p.live = false
	}
}

func (p *progress) finish() { p.clear() }

func fmtLoss(v float64) string {
	if math.IsNaN(v) {
		return "  -   "
	}
	return fmt.Sprintf("%.4f", v)
}

func fmtDuration(sec float64) string {
	if sec <= 0 || math.IsNaN(sec) || math.IsInf(sec, 0) {
		return "-"
	}
	d := time.Duration(sec * float64(time.Second))
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%.0fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

// commas formats n with thousands separators.
func commas(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + commas(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
