package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"text/tabwriter"
	"time"

	"tinygpt/backend"
	"tinygpt/backend/webgpu"
	"tinygpt/data"
	"tinygpt/format"
	"tinygpt/gpt"
	"tinygpt/train"
)

func cmdEval(args []string, e *env) error {
	fs := newFlags(e, "eval", "--model FILE [--data PATH]", `
Computes a model's exact loss over the validation split (the last 10%) of a corpus, in
windows of ctx+1 bytes starting every ctx bytes, each predicting its ctx next bytes. The
result is deterministic, so models and tools can be compared on it. Without --data it uses the
corpus stored in the model file.`)
	modelPath := fs.String("model", "", "model file")
	dataPath := fs.String("data", "", "corpus: a file, a directory (see --glob) or - for stdin")
	glob := fs.String("glob", "", "with a directory --data, only files matching this pattern")
	split := fs.String("split", "val", "which part of the corpus: val, train or all")
	batch := fs.Int("batch", 16, "windows per forward pass")
	backendName := fs.String("backend", "cpu", backendHelp)
	threads := fs.Int("threads", 0, "CPU threads (0 = all cores)")
	if _, err := parse(e, fs, args, 0); err != nil {
		return err
	}
	if *threads < 0 || *threads > 4096 {
		return fmt.Errorf("--threads must be between 0 and 4096")
	}
	if *threads > 0 {
		runtime.GOMAXPROCS(*threads) // before the backend starts its workers
	}
	if *modelPath == "" {
		return fmt.Errorf("--model is required")
	}
	if err := checkData(fs, "the corpus stored in the model"); err != nil {
		return err
	}
	if *batch < 1 || *batch > 1<<16 {
		return fmt.Errorf("--batch must be between 1 and 65536")
	}
	f, err := format.ReadFile(*modelPath)
	if err != nil {
		return err
	}
	if *glob != "" && *dataPath == "" {
		return fmt.Errorf("--glob picks files in a directory given with --data; without --data the corpus stored in the model is used")
	}
	var corpus data.Corpus
	if *dataPath != "" {
		if corpus, err = data.Load(*dataPath, *glob, e.stdin); err != nil {
			return err
		}
	} else if f.Header.Corpus != "" {
		corpus = data.Corpus{Text: []byte(f.Header.Corpus), Source: "the corpus stored in " + *modelPath}
	} else {
		what := ""
		if facts := readCorpusFacts(f.Header); facts.Source != "" {
			what = fmt.Sprintf(" (%s, %s bytes)", safeText(facts.Source), commas(facts.Bytes))
		}
		return fmt.Errorf("%s does not hold its corpus; pass --data with the text it was trained on%s", *modelPath, what)
	}
	text := corpus.Text
	c := fileConfig(f)
	switch *split {
	case "val", "train":
		// The split training used: a part shorter than one window is widened to one, as
		// training widened it.
		s, err := data.NewSplit(text, c.Ctx)
		if err != nil { // a corpus too short to split
			if len(text) > c.Ctx {
				return fmt.Errorf("%s: %w; --split all scores it whole", corpus.Source, err)
			}
			return fmt.Errorf("%s: %w", corpus.Source, err)
		}
		var widened bool
		text, widened = s.Val, s.ValWidened
		if *split == "train" {
			text, widened = s.Train, s.TrainWidened
		}
		if widened {
			fmt.Fprintf(e.stderr, "note: the %s split of %s is shorter than one window of ctx+1 = %d bytes; it is widened to one, as training widened it\n",
				*split, corpus.Source, c.Ctx+1)
		}
	case "all":
	default:
		return fmt.Errorf("--split must be val, train or all, got %q", *split)
	}
	windows := (len(text) - 1) / c.Ctx
	if windows < 1 {
		msg := fmt.Sprintf("the %s split of %s is %d bytes, shorter than one window of ctx+1 = %d bytes", *split, corpus.Source, len(text), c.Ctx+1)
		if *split != "all" && len(corpus.Text) > c.Ctx {
			msg += "; --split all scores the whole corpus"
		}
		return errors.New(msg)
	}
	*batch = min(*batch, windows) // no larger than the split needs
	be, err := openBackend(*backendName, modelLoad(c, *batch*c.Ctx, c.FLOPsPerToken()/3), e.stderr)
	if err != nil {
		return err
	}
	defer backend.Close(be)
	m, err := modelFromFile(be, f, *batch)
	if err != nil {
		return fmt.Errorf("%s: %w", *modelPath, err)
	}
	start := time.Now()
	var progress func(done, total int)
	if e.tty { // a long split takes minutes: say how far it is
		var last time.Time
		progress = func(done, total int) {
			if time.Since(last) >= 250*time.Millisecond {
				last = time.Now()
				fmt.Fprintf(e.stdout, "\r\033[Kevaluating: %d%% (%s of %s windows)", 100*done/total, commas(done), commas(total))
			}
		}
	}
	loss, windows, err := train.ExactLoss(m, text, *batch, progress)
	if progress != nil {
		fmt.Fprint(e.stdout, "\r\033[K")
	}
	if err := backendFailure(be, nil, ""); err != nil {
		return err // the loss was computed from garbage
	}
	if err != nil {
		return fmt.Errorf("%s split of %s: %w", *split, corpus.Source, err)
	}
	fmt.Fprintf(e.stdout, "loss %.6f nats/byte, %.4f bits/byte, perplexity %.3f\n", loss, loss/math.Ln2, math.Exp(loss))
	fmt.Fprintf(e.stdout, "%s split of %s: %s of %d bytes (%s bytes predicted) in %s\n",
		*split, corpus.Source, plural(windows, "window"), m.Config.Ctx+1, commas(windows*m.Config.Ctx), time.Since(start).Round(time.Millisecond))
	return nil
}

func cmdInspect(args []string, e *env) error {
	fs := newFlags(e, "inspect", "FILE [--json]", `
Prints a model file's format, model size, training settings, loss history and sample.`)
	asJSON := fs.Bool("json", false, "print the header as JSON (without the corpus text)")
	rest, err := parse(e, fs, args, 1)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		fmt.Fprintln(e.stderr, "tinygpt inspect: need one model file")
		fs.Usage()
		return errUsage
	}
	path := rest[0]
	f, err := format.ReadFile(path)
	if err != nil {
		return err
	}
	h := f.Header
	if *asJSON {
		h.Corpus = fmt.Sprintf("(%d bytes)", len(h.Corpus))
		if len(f.Header.Corpus) == 0 {
			h.Corpus = "(not stored)"
		}
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(h)
	}
	c := h.Config
	cfg := gpt.Config{Layers: c.Layers, DModel: c.DModel, Heads: c.Heads, Ctx: c.Ctx, DMlp: c.DMlp}
	size := int64(-1)
	if info, err := os.Stat(path); err == nil {
		size = info.Size()
	}
	w := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "file:\t%s (%s bytes), .tinygpt v%d, %s\n", filepath.Base(path), commas(int(size)), h.Version, describeDtype(f))
	fmt.Fprintf(w, "model:\t%s, %s parameters\n", cfg, commas(cfg.NumParams()))
	if h.SavedAt != "" {
		fmt.Fprintf(w, "saved:\t%s\n", h.SavedAt)
	}
	if h.SourceConvertedFrom != "" {
		fmt.Fprintf(w, "converted:\tfrom %s at %s\n", h.SourceConvertedFrom, h.ConvertedAt)
	}
	fmt.Fprintf(w, "training:\tstep %d of %d, batch %d, lr %g, clip %g, seed %d, backend %s\n",
		f.Step, c.MaxSteps, c.BatchSize, c.LearningRate, c.GradClip, c.Seed, c.Backend)
	if len(h.Train) > 0 {
		var extra map[string]any
		if json.Unmarshal(h.Train, &extra) == nil {
			fmt.Fprintf(w, "settings:\tschedule %v, warmup %v, dropout %v, weight decay %v", extra["schedule"], extra["warmup"], extra["dropout"], extra["weightDecay"])
			if p, ok := extra["preset"].(string); ok && p != "" {
				fmt.Fprintf(w, ", preset %s", p)
			}
			if s, ok := extra["trainSeconds"].(float64); ok {
				fmt.Fprintf(w, ", trained for %s", fmtDuration(s))
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintf(w, "corpus:\t%s\n", describeCorpus(h))
	summarizeHistory(w, h)
	w.Flush()
	if h.Sample != "" {
		s := h.Sample
		if len(s) > 400 {
			s = s[:400] + "…"
		}
		fmt.Fprintf(e.stdout, "sample:\n%s\n", safeText(s))
	}
	return nil
}

// corpusFacts is what a header records of the training text, stored or not.
type corpusFacts struct {
	Source string `json:"corpusSource"`
	Bytes  int    `json:"corpusBytes"`
	SHA256 string `json:"corpusSHA256"`
}

// readCorpusFacts returns what h records of its training text (nothing for a header this
// project did not write).
func readCorpusFacts(h format.Header) corpusFacts {
	var facts corpusFacts
	json.Unmarshal(h.Train, &facts) // absent or foreign: no facts
	return facts
}

// describeCorpus says whether the file holds its training text and what the header records of
// it (a corpus over 32 MB, or one that is not UTF-8, is recorded by its SHA-256 only).
func describeCorpus(h format.Header) string {
	facts := readCorpusFacts(h)
	if len(h.Corpus) > 0 {
		return commas(len(h.Corpus)) + " bytes stored"
	}
	if facts.SHA256 == "" {
		return "not stored"
	}
	return fmt.Sprintf("not stored, only its SHA-256 (%s, %s bytes, %s…): --resume and eval need --data with that text",
		facts.Source, commas(facts.Bytes), facts.SHA256[:min(12, len(facts.SHA256))])
}

func describeDtype(f *format.File) string {
	switch {
	case f.Header.WeightDtype == "fp16":
		return "weights only, fp16"
	case f.Header.WeightDtype == "int4":
		return fmt.Sprintf("weights only, int4 (blocks of %d)", f.Header.Int4BlockSize)
	case f.M == nil:
		return "weights only, fp32"
	}
	return "fp32 weights + AdamW moments (resumable)"
}

func summarizeHistory(w *tabwriter.Writer, h format.Header) {
	hist := h.LossHistory
	var trains, evals int
	var first, last, minTrain *format.LossPoint
	for i := range hist {
		p := &hist[i]
		if p.Train != nil {
			trains++
			if first == nil {
				first = p
			}
			last = p
			if minTrain == nil || *p.Train < *minTrain.Train {
				minTrain = p
			}
		}
		if p.Val != nil {
			evals++
		}
	}
	if trains > 0 {
		fmt.Fprintf(w, "loss history:\t%s recorded, train %.4f (step %d) → %.4f (step %d), lowest %.4f (step %d); %s\n",
			plural(trains, "step"), *first.Train, first.Step, *last.Train, last.Step, *minTrain.Train, minTrain.Step, plural(evals, "evaluation"))
	} else {
		fmt.Fprintf(w, "loss history:\tempty\n")
	}
	if fl := h.FinalLoss; fl != nil {
		fmt.Fprintf(w, "final loss:\tstep %d, train %s, val %s\n", fl.Step, ptrLoss(fl.Train), ptrLoss(fl.Val))
	}
	if b := h.BestVal; b != nil {
		fmt.Fprintf(w, "best val:\t%.4f at step %d\n", b.Loss, b.Step)
	}
}

func ptrLoss(p *float64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%.4f", *p)
}

func cmdConvert(args []string, e *env) error {
	fs := newFlags(e, "convert", "--to fp32|fp16|int4 [--force] IN OUT", `
Converts a model file. fp16 (half size of the weights) and int4 (blocks of 64 weights sharing a
scale, about 1/7 of fp32) keep the weights only, in the original TinyGPT's formats, and can be
sampled and evaluated but not resumed. fp32 writes full-precision weights (with the AdamW moments when
the input has them, so the copy still resumes; weights only otherwise). An existing model file
OUT is replaced only with --force, so that IN and OUT swapped by mistake cannot turn a
checkpoint into a weights-only copy of a quantized file; a file that is not a model is never
replaced.`)
	to := fs.String("to", "", "target format: fp32, fp16 or int4")
	force := fs.Bool("force", false, "replace OUT if it is an existing model file")
	rest, err := parse(e, fs, args, 2)
	if err != nil {
		return err
	}
	if len(rest) != 2 {
		fmt.Fprintln(e.stderr, "tinygpt convert: need an input and an output file")
		fs.Usage()
		return errUsage
	}
	switch strings.ToLower(*to) { // before looking at the files: the command cannot run without it
	case "fp16", "int4", "fp32":
	case "":
		return fmt.Errorf("--to is required (fp32, fp16 or int4)")
	default:
		return fmt.Errorf("--to must be fp32, fp16 or int4, got %q", *to)
	}
	in, out := rest[0], rest[1]
	if samePath(in, out) {
		return fmt.Errorf("input and output are the same file %s", in)
	}
	isModel, err := checkWritable("output", out)
	if err != nil {
		return err
	}
	if isModel && !*force {
		return fmt.Errorf("output %s is an existing model file (are IN and OUT in order?); give another name, or pass --force to replace it", out)
	}
	f, err := format.ReadFile(in)
	if err != nil {
		return err
	}
	now := time.Now()
	var g *format.File
	switch strings.ToLower(*to) {
	case "fp16":
		g = format.ToFP16(f, filepath.Base(in), now)
	case "int4":
		g = format.ToInt4(f, filepath.Base(in), now)
	case "fp32":
		g = &format.File{Header: f.Header, Step: f.Step, Weights: f.Weights, M: f.M, V: f.V}
		g.Header.WeightDtype = format.DtypeFull
		if f.M == nil {
			g.Header.WeightDtype = format.DtypeFP32 // weights only: there are no moments to keep
		}
	}
	if err := format.WriteFile(out, g, 0o644); err != nil {
		return err
	}
	info, err := os.Stat(out)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "wrote %s (%s, %s bytes)\n", out, describeDtype(g), commas(int(info.Size())))
	return nil
}

func cmdBench(args []string, e *env) error {
	fs := newFlags(e, "bench", "[--presets a,b,...] [--steps N] [--json]", `
Times full training steps (forward, backward, AdamW) of each preset on random tokens and prints
the median ms/step, tokens/s and achieved GFLOP/s (from 6·(matrix parameters)·tokens plus
attention), then the KV-cached decode rate (tokens/s, within the context) and the process's
peak memory.
The custom-size flags and --batch time one model instead, as train would build it: the preset
that --presets names (default small) changed by them.`)
	presets := fs.String("presets", "tiny,small,medium,large,xl", "comma-separated presets, or all")
	size := addSizeFlags(fs)
	batch := fs.Int("batch", 0, "sequences per step (default: the preset's)")
	steps := fs.Int("steps", 10, "timed steps per preset")
	warmup := fs.Int("warmup", 2, "untimed warm-up steps per preset (more, to fill a second, when not 0)")
	asJSON := fs.Bool("json", false, "print one JSON object per preset")
	backendName := fs.String("backend", "cpu", backendHelp)
	threads := fs.Int("threads", 0, "CPU threads (0 = all cores)")
	profile := fs.String("profile", "", "after each row, the backend's account of a timed step: counts (webgpu: dispatches, submits, waits, host time) or kernels (webgpu: also each kernel's GPU time, every kernel run on its own: slow)")
	cpuProfile := fs.String("cpuprofile", "", "write a Go CPU profile of the run to `file` (go tool pprof reads it), to see where the host's time goes")
	if _, err := parse(e, fs, args, 0); err != nil {
		return err
	}
	set := setFlags(fs)
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	if *threads < 0 || *threads > 4096 {
		return fmt.Errorf("--threads must be between 0 and 4096")
	}
	if *threads > 0 {
		runtime.GOMAXPROCS(*threads) // before the backend starts its workers
	}
	if *profile != "" && *profile != "counts" && *profile != "kernels" {
		return fmt.Errorf("--profile must be counts or kernels, not %q", *profile)
	}
	if *steps < 1 || *steps > 100000 || *warmup < 0 || *warmup > 100000 {
		return fmt.Errorf("--steps must be between 1 and 100000 and --warmup between 0 and 100000")
	}
	var list []gpt.Preset
	if *presets == "all" {
		list = gpt.Presets
	} else {
		for _, name := range strings.Split(*presets, ",") {
			p, err := gpt.PresetByName(strings.TrimSpace(name))
			if err != nil {
				return fmt.Errorf("--presets: %w", err)
			}
			list = append(list, p)
		}
	}
	if set["layers"] || set["d-model"] || set["heads"] || set["ctx"] || set["batch"] {
		if !set["presets"] {
			p, _ := gpt.PresetByName(gpt.DefaultPreset)
			list = []gpt.Preset{p}
		}
		if len(list) != 1 {
			return fmt.Errorf("--layers, --d-model, --heads, --ctx and --batch change one preset: name one with --presets (or none, for %s)", gpt.DefaultPreset)
		}
		p := &list[0]
		if size.apply(&p.Config, set) {
			p.Name = "custom"
		}
		if set["batch"] {
			p.Batch = *batch
		}
		if err := validateFlags(train.DefaultOptions(*p), set); err != nil {
			return err
		}
	}
	// auto decides by the largest preset of the list; a preset too large for the GPU's
	// buffers is refused on its own row.
	var work workload
	for _, p := range list {
		work.flops = max(work.flops, trainLoad(p.Config, p.Batch).flops)
	}
	be, err := openBackend(*backendName, work, e.stderr)
	if err != nil {
		return err
	}
	defer backend.Close(be)
	if s, ok := be.(interface{ SyncEach(bool) }); ok && *profile == "kernels" {
		s.SyncEach(true)
	}
	// Rows are printed as each preset finishes, so the columns have fixed widths.
	const row = "%-9s %12s %10s %10s %10s %9s %12s %8s\n"
	if !*asJSON {
		fmt.Fprintf(e.stdout, "backend %s\n", be.Describe())
		fmt.Fprintf(e.stdout, row, "preset", "params", "batch×ctx", "ms/step", "tokens/s", "GFLOP/s", "decode tok/s", "peak MB")
	}
	enc := json.NewEncoder(e.stdout)
	for _, p := range list {
		if g, ok := be.(*webgpu.Backend); ok {
			if err := fits(g, trainLoad(p.Config, p.Batch)); err != nil {
				return fmt.Errorf("%s: --backend webgpu: %w; use --backend cpu", p.Name, err)
			}
		}
		r, err := train.Bench(be, p, *warmup, *steps, train.BenchWarmupTime)
		if err != nil {
			return fmt.Errorf("%s: %w", p.Name, backendFailure(be, err, ""))
		}
		if *asJSON {
			if err := enc.Encode(r); err != nil {
				return err
			}
			continue
		}
		rss := "n/a" // the system does not report it (js/wasm, Windows)
		if r.PeakRSSMB > 0 {
			rss = fmt.Sprintf("%.0f", r.PeakRSSMB)
		}
		fmt.Fprintf(e.stdout, row, r.Preset, commas(r.Params), fmt.Sprintf("%d×%d", r.Batch, r.Ctx),
			fmt.Sprintf("%.2f", r.MsPerStep), commas(int(r.TokensPerS)), fmt.Sprintf("%.1f", r.GFLOPs),
			commas(int(r.DecodeTokensPerS)), rss)
		if *profile != "" && r.Profile != "" {
			fmt.Fprintf(e.stdout, "  %s\n", r.Profile)
		}
	}
	return nil
}
