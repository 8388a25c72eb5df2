package server

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"

	"tinygpt/format"
	"tinygpt/internal/atomicfile"
	"tinygpt/train"
)

// Run is a stored run as the API shows it: its settings, progress, loss history and sample.
type Run struct {
	ID        string             `json:"id"`
	Name      string             `json:"name"`
	Created   time.Time          `json:"created"`
	Updated   time.Time          `json:"updated"`
	Status    string             `json:"status"` // see the Status constants
	Error     string             `json:"error,omitempty"`
	Origin    string             `json:"origin"` // "trained" here or "uploaded"
	Preset    string             `json:"preset,omitempty"`
	Config    ModelConfig        `json:"config"`
	Params    int                `json:"params"`
	Batch     int                `json:"batch"`
	Step      int                `json:"step"`  // steps done (as of the checkpoint, or live while training)
	Steps     int                `json:"steps"` // planned total
	LR        float64            `json:"lr"`
	Schedule  string             `json:"schedule,omitempty"`
	Warmup    int                `json:"warmup"`
	Dropout   float64            `json:"dropout"`
	Seed      int64              `json:"seed"`
	Backend   string             `json:"backend,omitempty"`
	Corpus    CorpusInfo         `json:"corpus"`
	Train     *float64           `json:"train_loss,omitempty"`
	Val       *float64           `json:"val_loss,omitempty"`
	Best      *format.BestVal    `json:"best_val,omitempty"`
	Elapsed   float64            `json:"elapsed_s"`
	Sample    string             `json:"sample,omitempty"`
	Dtype     string             `json:"dtype"`     // fp32, fp16 or int4
	Resumable bool               `json:"resumable"` // holds the optimizer state and a corpus, so it can train on
	FileBytes int64              `json:"file_bytes"`
	History   []format.LossPoint `json:"history"`
}

// ModelConfig is a model's shape.
type ModelConfig struct {
	Layers int `json:"layers"`
	DModel int `json:"d_model"`
	Heads  int `json:"heads"`
	Ctx    int `json:"ctx"`
	DMlp   int `json:"d_mlp"`
}

// CorpusInfo says what a run trained on.
type CorpusInfo struct {
	Source string `json:"source"`
	Bytes  int    `json:"bytes"`
}

// Run statuses.
const (
	StatusTraining = "training"
	StatusPaused   = "paused"
	StatusDone     = "done"    // trained all its planned steps
	StatusStopped  = "stopped" // stopped early; it can continue
	StatusFailed   = "failed"
	StatusUploaded = "uploaded"
)

// store keeps runs in folders named by their id under dir/runs.
type store struct {
	dir string
	mu  sync.Mutex // serialises run.json writes and deletes

	logf     func(string, ...any)
	logMu    sync.Mutex
	reported map[string]bool // the damaged run folders already logged, by message
}

var idPattern = regexp.MustCompile(`^[0-9a-f]{16}$`)

// openStore opens the runs of the data directory dir, stopping those that were training, and
// says on logf which run folders it cannot read (they are not listed), now and whenever a
// listing finds another.
func openStore(dir string, logf func(string, ...any)) (*store, error) {
	// Runs hold the user's corpora: only the user may read them (loopback is no boundary
	// between the users of one machine). The runs folder of an older version is tightened.
	st := &store{dir: filepath.Join(dir, "runs"), logf: logf, reported: map[string]bool{}}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	if err := os.MkdirAll(st.dir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	if err := os.Chmod(st.dir, 0o700); err != nil && runtime.GOOS != "windows" {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	// Runs that were training when the server died are stopped; their checkpoint is the truth.
	runs, damaged, err := st.scan()
	if err != nil {
		return nil, err
	}
	st.report(damaged)
	for _, r := range runs {
		if r.Status != StatusTraining && r.Status != StatusPaused {
			continue
		}
		if err := st.recover(r); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// recover resets an interrupted run to its last checkpoint.
func (st *store) recover(r *Run) error {
	f, err := format.ReadFileHeader(st.modelPath(r.ID)) // not the state: gigabytes for a large model
	if err != nil {
		r.Status, r.Error = StatusFailed, "the server stopped before this run's first checkpoint"
		r.Resumable = false
		return st.save(r)
	}
	r.fromHeader(f)
	r.Status = StatusStopped
	r.Error = fmt.Sprintf("the server stopped while training; it can continue from its last checkpoint, at step %d", r.Step)
	return st.save(r)
}

func newID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// path returns the folder of a run. id must have passed validID.
func (st *store) path(id string) string       { return filepath.Join(st.dir, id) }
func (st *store) modelPath(id string) string  { return filepath.Join(st.dir, id, "model.tinygpt") }
func (st *store) corpusPath(id string) string { return filepath.Join(st.dir, id, "corpus.txt") }
func (st *store) metaPath(id string) string   { return filepath.Join(st.dir, id, "run.json") }
func validID(id string) bool                  { return idPattern.MatchString(id) }
func (st *store) create(id string) error      { return os.Mkdir(st.path(id), 0o700) }
func (st *store) writeCorpus(id string, b []byte) error {
	return writeFileAtomic(st.corpusPath(id), b)
}

// remove deletes a run's folder.
func (st *store) remove(id string) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	return os.RemoveAll(st.path(id))
}

// errNoRun reports an unknown run id.
var errNoRun = errors.New("no such run")

// get reads a run's record.
func (st *store) get(id string) (*Run, error) {
	if !validID(id) {
		return nil, errNoRun
	}
	b, err := os.ReadFile(st.metaPath(id))
	if errors.Is(err, os.ErrNotExist) {
		return nil, errNoRun
	}
	if err != nil {
		return nil, err
	}
	var r Run
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("run %s: damaged run.json: %w", id, err)
	}
	if r.History == nil {
		r.History = []format.LossPoint{}
	}
	return &r, nil
}

// save writes a run's record crash-safely.
func (st *store) save(r *Run) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, err := os.Stat(st.path(r.ID)); err != nil {
		return fmt.Errorf("run %s was deleted", r.ID)
	}
	r.Updated = time.Now().UTC()
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encoding run %s: %w", r.ID, err)
	}
	return writeFileAtomic(st.metaPath(r.ID), b)
}

// list returns every readable run, newest first, and logs the run folders it cannot read
// that were not logged before (a run.json damaged while the server runs).
func (st *store) list() ([]*Run, error) {
	runs, damaged, err := st.scan()
	st.report(damaged)
	return runs, err
}

// report logs each damaged run folder's error once.
func (st *store) report(damaged []error) {
	st.logMu.Lock()
	defer st.logMu.Unlock()
	for _, err := range damaged {
		if msg := err.Error(); !st.reported[msg] {
			st.reported[msg] = true
			st.logf("tinygpt serve: %s", msg)
		}
	}
}

// scan returns every readable run, newest first, and, for each run folder whose run.json
// exists but cannot be read, why, and where its model is.
func (st *store) scan() (runs []*Run, damaged []error, err error) {
	ents, err := os.ReadDir(st.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("listing runs: %w", err)
	}
	for _, e := range ents {
		if !e.IsDir() || !validID(e.Name()) {
			continue
		}
		r, err := st.get(e.Name())
		if err != nil { // a half-created or damaged folder is not a run
			if !errors.Is(err, errNoRun) {
				damaged = append(damaged, fmt.Errorf("%w; the run is not listed (its model, if it has one, is %s)", err, st.modelPath(e.Name())))
			}
			continue
		}
		runs = append(runs, r)
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].Created.After(runs[j].Created) })
	return runs, damaged, nil
}

// fromHeader fills the run's settings and progress from a model file's header and step.
func (r *Run) fromHeader(f *format.File) {
	h := f.Header
	c := h.Config
	r.Config = ModelConfig{Layers: c.Layers, DModel: c.DModel, Heads: c.Heads, Ctx: c.Ctx, DMlp: c.DMlp}
	r.Params = format.ParamCount(c)
	r.Batch, r.Steps, r.LR, r.Seed = c.BatchSize, c.MaxSteps, c.LearningRate, c.Seed
	r.Step = int(f.Step)
	r.History = h.LossHistory
	r.Best = h.BestVal
	r.Train, r.Val = nil, nil
	if h.FinalLoss != nil {
		r.Train, r.Val = h.FinalLoss.Train, h.FinalLoss.Val
	}
	r.Sample = h.Sample
	r.Dtype = h.WeightDtype
	if r.Dtype == "" {
		r.Dtype = "fp32"
	}
	if r.Corpus.Bytes == 0 {
		r.Corpus = CorpusInfo{Source: "stored in the model file", Bytes: len(h.Corpus)}
	}
	var saved struct {
		Schedule     string  `json:"schedule"`
		Warmup       int     `json:"warmup"`
		Dropout      float64 `json:"dropout"`
		Preset       string  `json:"preset"`
		CorpusSource string  `json:"corpusSource"`
		CorpusBytes  int     `json:"corpusBytes"`
		TrainSeconds float64 `json:"trainSeconds"`
	}
	// A file's header is anyone's to write (an imported model): what the page shows of it is
	// held to the values training writes there, its names to what cleanName lets through.
	if len(h.Train) > 0 && json.Unmarshal(h.Train, &saved) == nil {
		r.Schedule, r.Warmup, r.Dropout, r.Elapsed = saved.Schedule, max(saved.Warmup, 0), saved.Dropout, max(saved.TrainSeconds, 0)
		if r.Dropout < 0 || r.Dropout >= 1 {
			r.Dropout = 0
		}
		if r.Preset == "" {
			r.Preset = cleanName(saved.Preset)
		}
		if r.Origin == "uploaded" && saved.CorpusSource != "" {
			r.Corpus = CorpusInfo{Source: cleanName(saved.CorpusSource), Bytes: max(saved.CorpusBytes, 0)}
		}
	}
	if r.Schedule != train.Cosine {
		r.Schedule = train.Constant
	}
	r.Batch, r.Steps = max(r.Batch, 0), max(r.Steps, 0)
	if b := r.Backend; b != "" && b != "cpu" && b != "webgpu" {
		r.Backend = ""
	}
	// The header says whether the moments are there: f may be a header read without its state.
	r.Resumable = h.IncludesOptimizerState && (h.Corpus != "" || r.Origin == "trained")
}

// downsample returns about n points of h (at most n + n/4): n evenly spread, always the first
// and the last, and of the points with a validation loss at most n/4, evenly spread, so that a
// run that validates every step is thinned too. h itself is returned when it is short enough.
func downsample(h []format.LossPoint, n int) []format.LossPoint {
	n = max(n, 8)
	if len(h) <= n {
		return h
	}
	keep := make([]bool, len(h))
	for i := range n {
		keep[i*(len(h)-1)/(n-1)] = true
	}
	var vals []int
	for i, p := range h {
		if p.Val != nil {
			vals = append(vals, i)
		}
	}
	if m := n / 4; len(vals) <= m {
		for _, i := range vals {
			keep[i] = true
		}
	} else {
		for k := range m {
			keep[vals[k*(len(vals)-1)/(m-1)]] = true
		}
	}
	out := make([]format.LossPoint, 0, n+n/4)
	for i, p := range h {
		if keep[i] {
			out = append(out, p)
		}
	}
	return out
}

// cleanName makes a user-given name safe to show: printable, one line, at most 80 characters,
// and without the invisible characters that would make it look like another: the bidirectional
// controls (an override shows the rest of a line reversed), zero-width spaces and byte-order
// marks. The zero-width joiners, which emoji and several scripts need, stay.
func cleanName(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case unicode.IsControl(r):
			return ' '
		case unicode.Is(unicode.Bidi_Control, r), r == '\u200b', r == '\ufeff':
			return -1
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 80 {
		s = string(r[:80])
	}
	return s
}

// fileName turns a run's name into a download file name: letters, digits, '-', '_' and '.'.
func fileName(name string) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r < 128 && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_' || r == '.'):
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	s := strings.Trim(b.String(), "-.")
	if s == "" {
		s = "model"
	}
	return s
}

// finite returns a pointer to v, or nil when v is NaN or infinite (JSON has no NaN).
func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// filePerm is the mode of every file the server writes in its data directory (run.json,
// model.tinygpt, corpus.txt, the token): the user's only, as the folders (0700).
const filePerm = 0o600

// writeFileAtomic writes b to path so that a crash leaves either the old or the new file (see
// package atomicfile). The file is readable by the user only, from its creation on.
func writeFileAtomic(path string, b []byte) error {
	return atomicfile.Write(path, filePerm, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}
