package server

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"

	"tinygpt/data"
	"tinygpt/gpt"
	"tinygpt/internal/disk"
	"tinygpt/train"
)

// System describes the machine the server trains on.
type System struct {
	CPU      string    `json:"cpu"`
	Cores    int       `json:"cores"`
	Memory   int64     `json:"memory_bytes"`
	OS       string    `json:"os"`
	Go       string    `json:"go"`
	Backends []Backend `json:"backends"`
	Dir      string    `json:"dir"`
	Limits   Limits    `json:"limits"`
}

// Limits are the server's size limits on uploads.
type Limits struct {
	CorpusBytes int64 `json:"corpus_bytes"`
	ModelBytes  int64 `json:"model_bytes"`
}

func (s *Server) handleSystem(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, System{
		CPU: cpuModel(), Cores: runtime.NumCPU(), Memory: gpt.PhysicalMemory(),
		OS: runtime.GOOS + "/" + runtime.GOARCH, Go: runtime.Version(), Backends: s.cfg.Backends(),
		Dir: s.cfg.Dir, Limits: Limits{CorpusBytes: s.cfg.MaxCorpusBytes, ModelBytes: s.cfg.MaxModelBytes},
	})
}

// cpuModel names the processor, or says "unknown CPU (GOARCH)" where this platform does not
// tell.
func cpuModel() string {
	if name := strings.Join(strings.Fields(cpuName()), " "); name != "" {
		return name
	}
	return "unknown CPU (" + runtime.GOARCH + ")"
}

// cpuInfoName reads the processor's name from a /proc/cpuinfo listing: "model name" (x86 and
// most others), else the board ("Model", "Hardware"), "cpu model" or "uarch", else the ARM
// implementer and part numbers; "" when it has none of them.
func cpuInfoName(r io.Reader) string {
	fields := map[string]string{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if ok && v != "" && fields[k] == "" {
			fields[k] = v
		}
	}
	for _, k := range []string{"model name", "Model", "Hardware", "cpu model", "uarch"} {
		if v := fields[k]; v != "" {
			return v
		}
	}
	if impl, part := fields["CPU implementer"], fields["CPU part"]; impl != "" && part != "" {
		name := "CPU implementer " + impl
		if impl == "0x41" {
			name = "Arm"
		}
		return name + " (part " + part + ")"
	}
	return ""
}

// calibration is the measured training speed of this machine, taken once.
type calibration struct {
	once   sync.Once
	gflops float64 // achieved GFLOP/s on the calibration preset
	preset string
	err    error
}

// speed times a few training steps of the calibration preset on the CPU backend and returns the
// achieved GFLOP/s, from which durations of other sizes are estimated.
func (s *Server) speed() (float64, error) {
	c := &s.calib
	c.once.Do(func() {
		p, err := gpt.PresetByName(s.cfg.CalibrationPreset)
		if err != nil {
			c.err = err
			return
		}
		be, err := s.cfg.Open("cpu", gpt.Config{}, 0)
		if err != nil {
			c.err = err
			return
		}
		r, err := train.Bench(be, p, 1, 3, 0)
		if err != nil {
			c.err = fmt.Errorf("calibration: %w", err)
			return
		}
		c.gflops, c.preset = r.GFLOPs, p.Name
	})
	return c.gflops, c.err
}

// Estimate is a training run's predicted cost.
type Estimate struct {
	Params      int     `json:"params"`
	MemoryBytes int64   `json:"memory_bytes"`
	MsPerStep   float64 `json:"ms_per_step"`
	Seconds     float64 `json:"seconds"`
	Calibration string  `json:"calibration"` // how the estimate was made
}

// estimate predicts the time of a run from the calibrated speed: FLOPs per step over achieved
// FLOP/s, plus the validation passes.
func (s *Server) estimate(c gpt.Config, batch, steps, evalEvery, evalBatches int) Estimate {
	e := Estimate{Params: c.NumParams(), MemoryBytes: train.TrainMemory(c, batch)}
	gf, err := s.speed()
	if err != nil || gf <= 0 {
		e.Calibration = "no estimate: " + fmt.Sprint(err)
		return e
	}
	perStep := c.FLOPsPerToken() * float64(batch*c.Ctx) / (gf * 1e9)
	e.MsPerStep = perStep * 1e3
	evals := 1
	if evalEvery > 0 {
		evals += steps / evalEvery
	}
	// A validation batch is a forward pass, about a third of a training step.
	e.Seconds = perStep * (float64(steps) + float64(evals*evalBatches)/3)
	e.Calibration = fmt.Sprintf("from %d timed steps of the %s preset on this machine's CPU (%.1f GFLOP/s)", 3, s.calib.preset, gf)
	return e
}

// PresetInfo is a preset with its size and estimated duration here.
type PresetInfo struct {
	Name     string      `json:"name"`
	Config   ModelConfig `json:"config"`
	Batch    int         `json:"batch"`
	Steps    int         `json:"steps"`
	Estimate Estimate    `json:"estimate"`
}

// PresetList is the answer to GET /api/presets.
type PresetList struct {
	Presets       []PresetInfo `json:"presets"`
	Default       string       `json:"default"`
	BuiltinBytes  int          `json:"builtin_corpus_bytes"`
	BuiltinSource string       `json:"builtin_corpus"`
}

func (s *Server) handlePresets(w http.ResponseWriter, r *http.Request) {
	out := PresetList{Default: gpt.DefaultPreset, BuiltinBytes: builtinBytes(), BuiltinSource: "built-in corpus"}
	for _, p := range gpt.Presets {
		o := train.DefaultOptions(p)
		o.EvalEvery = autoEvery(o.Steps, 10, 100)
		c := p.Config
		out.Presets = append(out.Presets, PresetInfo{Name: p.Name, Batch: p.Batch, Steps: p.Steps,
			Config:   ModelConfig{Layers: c.Layers, DModel: c.DModel, Heads: c.Heads, Ctx: c.Ctx, DMlp: c.DMlp},
			Estimate: s.estimate(c, p.Batch, p.Steps, o.EvalEvery, o.EvalBatches)})
	}
	writeJSON(w, http.StatusOK, out)
}

// Plan is the answer to POST /api/plan: what a run with these settings would be.
type Plan struct {
	Estimate
	Config      ModelConfig `json:"config"`
	Batch       int         `json:"batch"`
	Steps       int         `json:"steps"`
	LR          float64     `json:"lr"`
	EvalEvery   int         `json:"eval_every"`
	SampleEvery int         `json:"sample_every"`
	Backend     string      `json:"backend"`
	CorpusBytes int         `json:"corpus_bytes"`
	Warnings    []string    `json:"warnings"`
}

func (s *Server) handlePlan(w http.ResponseWriter, r *http.Request) {
	var rs RunSettings
	if !decodeJSON(w, r, maxSettings, &rs) {
		return
	}
	opts, err := rs.options()
	if err != nil {
		httpError(w, http.StatusBadRequest, "%v", err)
		return
	}
	be, err := s.planBackend(rs.Backend, opts.Model, opts.Batch*opts.Model.Ctx)
	if err != nil {
		httpError(w, http.StatusBadRequest, "%v", err)
		return
	}
	n := rs.CorpusBytes
	if n < 0 {
		httpError(w, http.StatusBadRequest, "corpus_bytes must not be negative, got %d", n)
		return
	}
	// A plan with a corpus size is for that text, with or without "corpus": "text".
	if rs.Corpus == "builtin" || rs.Corpus == "" && n == 0 {
		n = builtinBytes()
	}
	c := opts.Model
	p := Plan{Estimate: s.estimate(c, opts.Batch, opts.Steps, opts.EvalEvery, opts.EvalBatches),
		Config: ModelConfig{Layers: c.Layers, DModel: c.DModel, Heads: c.Heads, Ctx: c.Ctx, DMlp: c.DMlp},
		Batch:  opts.Batch, Steps: opts.Steps, LR: opts.LR, EvalEvery: opts.EvalEvery,
		SampleEvery: rs.sampleEvery(opts.Steps), Backend: be, CorpusBytes: n, Warnings: s.runWarnings(opts, n)}
	if err := gpt.CheckMemory(train.HostMemory(c, opts.Batch, s.ownMemory(be)), "this model"); err != nil {
		p.Warnings = append(p.Warnings, err.Error())
	}
	writeJSON(w, http.StatusOK, p)
}

// MinBytesPerParam is the corpus size per parameter below which a run is warned that the model
// can memorise its training text rather than learn from it.
const MinBytesPerParam = 1.0

// planBackend returns the backend a run of shape c over tokens positions a pass would start on
// (see openBackend), judged by Config.Check without opening any: the named one, if it takes
// the model; for auto, the first available one that does.
func (s *Server) planBackend(name string, c gpt.Config, tokens int) (string, error) {
	return s.tryBackends(name, func(name string) (bool, error) {
		if s.cfg.Check == nil {
			return false, nil
		}
		return false, s.cfg.Check(name, c, tokens)
	})
}

// ownMemory reports whether the backend named keeps a run's tensors in memory of its own.
func (s *Server) ownMemory(name string) bool {
	for _, b := range s.cfg.Backends() {
		if b.Name == name {
			return b.OwnMemory
		}
	}
	return false
}

// runWarnings is planWarnings, and a warning when the data directory's disk has no room for a
// checkpoint of the run (weights, both moments and the corpus it stores).
func (s *Server) runWarnings(o train.Options, corpusBytes int) []string {
	w := planWarnings(o, corpusBytes)
	need := train.CheckpointBytes(o.Model) + int64(min(corpusBytes, train.MaxStoredCorpus))
	if free, ok := diskFree(s.cfg.Dir); ok && free < need {
		w = append(w, fmt.Sprintf("The disk holding the playground's runs has %s free, less than a checkpoint of this model's %s: "+
			"saving will fail until there is room (training goes on).", disk.Size(free), disk.Size(need)))
	}
	return w
}

// diskFree is disk.Free, which tests replace.
var diskFree = disk.Free

// planWarnings says what is likely to go wrong with a run before it starts.
func planWarnings(o train.Options, corpusBytes int) []string {
	w := []string{}
	params := o.Model.NumParams()
	trainBytes := int(float64(corpusBytes) * 0.9)
	switch {
	case corpusBytes < o.Model.Ctx+2:
		w = append(w, fmt.Sprintf("The corpus has %d bytes, too short for a context of %d: it needs at least %d bytes.", corpusBytes, o.Model.Ctx, o.Model.Ctx+2))
	case float64(trainBytes) < MinBytesPerParam*float64(params):
		w = append(w, fmt.Sprintf("The corpus is small for this model: %s training bytes for %s parameters (%.2f bytes per parameter). "+
			"The model can memorise the text instead of learning from it: the training loss falls while the validation loss rises. "+
			"Use more text or a smaller model (at least %.0f byte per parameter).",
			commas(trainBytes), commas(params), float64(trainBytes)/float64(params), MinBytesPerParam))
	}
	if seen := float64(o.Steps) * float64(o.Batch*o.Model.Ctx); trainBytes > 0 && seen/float64(trainBytes) > 100 {
		w = append(w, fmt.Sprintf("The run reads the training text about %.0f times over; expect it to overfit.", seen/float64(trainBytes)))
	}
	return w
}

func builtinBytes() int {
	builtinOnce.Do(func() { builtinSize = len(builtinText()) })
	return builtinSize
}

var (
	builtinOnce sync.Once
	builtinSize int
)

func commas(n int) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 && s[0] != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func builtinText() []byte { return data.Builtin().Text }
