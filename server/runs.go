package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"mime"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"tinygpt/backend"
	"tinygpt/data"
	"tinygpt/format"
	"tinygpt/gpt"
	"tinygpt/train"
)

// RunSettings is the body of POST /api/runs (the "settings" part of a multipart request) and
// of POST /api/plan. Zero values mean the preset's or the trainer's default.
type RunSettings struct {
	Name        string  `json:"name"`
	Preset      string  `json:"preset"` // "" the default one; sizes given change it; "custom" needs Layers, DModel and Ctx
	Layers      int     `json:"layers"`
	DModel      int     `json:"d_model"`
	Heads       int     `json:"heads"`
	Ctx         int     `json:"ctx"`
	Batch       int     `json:"batch"`
	Steps       int     `json:"steps"`
	LR          float64 `json:"lr"`
	MinLR       float64 `json:"min_lr"`
	Schedule    string  `json:"schedule"` // constant (default) or cosine
	Warmup      int     `json:"warmup"`
	Dropout     float64 `json:"dropout"`
	Seed        *int64  `json:"seed"` // default 42
	EvalEvery   int     `json:"eval_every"`
	SampleEvery int     `json:"sample_every"`
	Backend     string  `json:"backend"` // auto (default), cpu, webgpu
	Corpus      string  `json:"corpus"`  // builtin (default), or text: the request's "corpus" part
	CorpusName  string  `json:"corpus_name"`
	CorpusBytes int     `json:"corpus_bytes"` // for a plan: the size of the corpus to come
}

// Limits on what a request may ask for, beyond what the trainer checks.
const (
	maxSteps    = 1_000_000
	maxSettings = 64 << 10
)

// options turns settings into trainer options.
func (rs RunSettings) options() (train.Options, error) {
	if rs.Corpus != "" && rs.Corpus != "builtin" && rs.Corpus != "text" {
		return train.Options{}, fmt.Errorf("corpus must be \"builtin\" (the built-in text) or \"text\" (your own, sent in a \"corpus\" part), got %q", rs.Corpus)
	}
	name := rs.Preset
	if name == "" || name == "custom" {
		name = gpt.DefaultPreset
	}
	p, err := gpt.PresetByName(name)
	if err != nil {
		return train.Options{}, err
	}
	o := train.DefaultOptions(p)
	if rs.Preset == "custom" && (rs.Layers == 0 || rs.DModel == 0 || rs.Ctx == 0) {
		return o, errors.New("custom sizes need layers, d_model and ctx")
	}
	// Sizes change the preset named (or the default one), as tinygpt train's flags do; a new
	// d_model also sets the MLP's width and, unless heads is given, the heads.
	c := &o.Model
	if rs.Layers != 0 {
		c.Layers = rs.Layers
	}
	if rs.DModel != 0 {
		*c = c.WithWidth(rs.DModel)
	}
	if rs.Heads != 0 {
		c.Heads = rs.Heads
	}
	if rs.Ctx != 0 {
		c.Ctx = rs.Ctx
	}
	if *c != p.Config || rs.Preset == "custom" {
		o.Preset = ""
	}
	if rs.Batch != 0 {
		o.Batch = rs.Batch
	}
	if rs.Steps != 0 {
		o.Steps = rs.Steps
	}
	if rs.LR != 0 {
		o.LR = rs.LR
	}
	o.MinLR = o.LR / 10
	if rs.MinLR != 0 {
		o.MinLR = rs.MinLR
	}
	if rs.Schedule != "" {
		o.Schedule = rs.Schedule
	}
	o.Warmup, o.Dropout = rs.Warmup, rs.Dropout
	if rs.Seed != nil {
		o.Seed = *rs.Seed
	}
	o.EvalEvery = autoEvery(o.Steps, 10, 100)
	if rs.EvalEvery != 0 {
		o.EvalEvery = rs.EvalEvery
	}
	switch {
	case o.Steps < 1 || o.Steps > maxSteps:
		return o, fmt.Errorf("steps must be between 1 and %d, got %d", maxSteps, o.Steps)
	case o.Batch < 1 || o.Batch > 4096:
		return o, fmt.Errorf("batch must be between 1 and 4096, got %d", o.Batch)
	case rs.EvalEvery < 0 || rs.SampleEvery < 0:
		return o, errors.New("eval_every and sample_every must not be negative")
	case o.Warmup > o.Steps:
		return o, fmt.Errorf("warmup (%d steps) must not be longer than the run (%d steps)", o.Warmup, o.Steps)
	case math.IsNaN(o.Dropout):
		return o, errors.New("dropout must be a number")
	}
	return o, o.Validate()
}

// sampleEvery is how often a live sample is taken: every few hundred steps in a long run,
// about five times in a short one.
func (rs RunSettings) sampleEvery(steps int) int {
	if rs.SampleEvery > 0 {
		return rs.SampleEvery
	}
	return autoEvery(steps, 20, 250)
}

// autoEvery is steps/5, rounded to a round number, within [lo, hi].
func autoEvery(steps, lo, hi int) int {
	n := steps / 5
	for _, r := range []int{250, 100, 50, 25, 10} {
		if n >= r {
			n = n / r * r
			break
		}
	}
	return min(max(n, lo), hi)
}

// openBackend opens the named backend for a model of shape c trained on tokens a step ("auto"
// or "": the first available one that accepts the model), sets the run up on it with build,
// and returns it and its name. With auto, a backend that fails while build sets the run up (a
// GPU without the memory for it: only allocating tells) is released and the next one tried. On
// an error nothing is left open.
func (s *Server) openBackend(name string, c gpt.Config, tokens int, build func(be backend.Backend, name string) error) (backend.Backend, string, error) {
	var be backend.Backend
	name, err := s.tryBackends(name, func(name string) (bool, error) {
		b, err := s.cfg.Open(name, c, tokens)
		if err != nil {
			return false, err
		}
		if err := build(b, name); err != nil {
			final := backend.Err(b) == nil // the run's own fault, which no other backend mends
			backend.Close(b)
			return final, err
		}
		be = b
		return false, nil
	})
	if err != nil {
		return nil, "", err
	}
	return be, name, nil
}

// tryBackends runs try on the backend named, or for auto ("" or "auto") on each available one
// in order of preference until one succeeds, and returns the name of the one that did. With
// auto a failure passes on to the next backend unless try says it is final; the error then
// joins those of every backend tried.
func (s *Server) tryBackends(name string, try func(name string) (final bool, err error)) (string, error) {
	if name != "" && name != "auto" {
		if _, err := s.pickBackend(name); err != nil {
			return "", err
		}
		_, err := try(name)
		return name, err
	}
	var errs []string
	for _, b := range s.cfg.Backends() {
		if !b.Available {
			continue
		}
		final, err := try(b.Name)
		if err == nil {
			return b.Name, nil
		}
		errs = append(errs, err.Error())
		if final {
			break
		}
	}
	if len(errs) == 0 {
		return "", errors.New("no compute backend is available")
	}
	return "", errors.New(strings.Join(errs, "; "))
}

// pickBackend resolves a backend name ("auto" or "" picks the first available one).
func (s *Server) pickBackend(name string) (string, error) {
	list := s.cfg.Backends()
	if name == "" || name == "auto" {
		for _, b := range list {
			if b.Available {
				return b.Name, nil
			}
		}
		return "", errors.New("no compute backend is available")
	}
	var names []string
	for _, b := range list {
		if b.Name == name {
			if !b.Available {
				return "", fmt.Errorf("backend %s is not available: %s", name, b.Note)
			}
			return name, nil
		}
		names = append(names, b.Name)
	}
	return "", fmt.Errorf("unknown backend %q (have auto, %s)", name, strings.Join(names, ", "))
}

// readStart reads a start request: JSON settings alone, or multipart/form-data with a
// "settings" part and a "corpus" part (the text to train on). It writes the error itself.
func (s *Server) readStart(w http.ResponseWriter, r *http.Request) (RunSettings, []byte, bool) {
	var rs RunSettings
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "multipart/form-data" {
		if !decodeJSON(w, r, maxSettings, &rs) {
			return rs, nil, false
		}
		if rs.Corpus != "" && rs.Corpus != "builtin" {
			httpError(w, http.StatusBadRequest, "corpus %q needs the text in a multipart request's \"corpus\" part", rs.Corpus)
			return rs, nil, false
		}
		return rs, nil, true
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxCorpusBytes+maxSettings+4096)
	mr, err := r.MultipartReader()
	if err != nil {
		httpError(w, http.StatusBadRequest, "malformed multipart request: %v", err)
		return rs, nil, false
	}
	var corpus []byte
	seen := map[string]bool{}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			s.partError(w, err)
			return rs, nil, false
		}
		if seen[part.FormName()] {
			httpError(w, http.StatusBadRequest, "the multipart request has more than one %q part", part.FormName())
			return rs, nil, false
		}
		seen[part.FormName()] = true
		switch part.FormName() {
		case "settings":
			name := rs.CorpusName // a "corpus" part may have come first
			b, err := io.ReadAll(io.LimitReader(part, maxSettings+1))
			if err != nil {
				s.partError(w, err)
				return rs, nil, false
			}
			if len(b) > maxSettings {
				httpError(w, http.StatusRequestEntityTooLarge, "settings are larger than %d bytes", maxSettings)
				return rs, nil, false
			}
			dec := jsonDecoder(bytes.NewReader(b))
			if err := dec.Decode(&rs); err != nil {
				httpError(w, http.StatusBadRequest, "malformed settings JSON: %v", err)
				return rs, nil, false
			}
			if dec.More() {
				httpError(w, http.StatusBadRequest, "malformed settings JSON: more than one value")
				return rs, nil, false
			}
			if rs.CorpusName == "" {
				rs.CorpusName = name
			}
		case "corpus":
			b, err := io.ReadAll(io.LimitReader(part, s.cfg.MaxCorpusBytes+1))
			if err != nil {
				s.partError(w, err)
				return rs, nil, false
			}
			if int64(len(b)) > s.cfg.MaxCorpusBytes {
				httpError(w, http.StatusRequestEntityTooLarge, "the corpus is larger than the limit of %s; use a smaller text (or the command line, tinygpt train --data, for big corpora)", humanSize(s.cfg.MaxCorpusBytes))
				return rs, nil, false
			}
			corpus = b
			if fn := part.FileName(); rs.CorpusName == "" && fn != "" {
				rs.CorpusName = path.Base(fn)
			}
		default:
			httpError(w, http.StatusBadRequest, "unexpected form part %q (have settings, corpus)", part.FormName())
			return rs, nil, false
		}
	}
	if !seen["settings"] {
		httpError(w, http.StatusBadRequest, "multipart request has no \"settings\" part")
		return rs, nil, false
	}
	if corpus != nil && rs.Corpus == "builtin" {
		httpError(w, http.StatusBadRequest, "the settings ask for the built-in corpus but the request also has a \"corpus\" part: send one or the other")
		return rs, nil, false
	}
	if corpus != nil && rs.Corpus == "" {
		rs.Corpus = "text"
	}
	if rs.Corpus == "text" && corpus == nil {
		httpError(w, http.StatusBadRequest, "corpus \"text\" but the request has no \"corpus\" part")
		return rs, nil, false
	}
	return rs, corpus, true
}

func (s *Server) partError(w http.ResponseWriter, err error) {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		httpError(w, http.StatusRequestEntityTooLarge, "the request is larger than the corpus limit of %s", humanSize(s.cfg.MaxCorpusBytes))
		return
	}
	httpError(w, http.StatusBadRequest, "malformed multipart request: %v", err)
}

// StartResponse is the answer to POST /api/runs.
type StartResponse struct {
	Run      *Run     `json:"run"`
	Warnings []string `json:"warnings"`
}

func (s *Server) handleStart(w http.ResponseWriter, r *http.Request) {
	rs, text, ok := s.readStart(w, r)
	if !ok {
		return
	}
	opts, err := rs.options()
	if err != nil {
		httpError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if _, err := s.pickBackend(rs.Backend); err != nil {
		httpError(w, http.StatusBadRequest, "%v", err)
		return
	}
	// Refuse a second run before doing any work; checked again under the lock below.
	if !s.mayStart(w) {
		return
	}
	id := newID()
	if err := s.store.create(id); err != nil {
		httpError(w, http.StatusInternalServerError, "creating the run folder: %v", err)
		return
	}
	ok = false
	defer func() {
		if !ok {
			s.store.remove(id)
		}
	}()
	corpus := data.Builtin()
	source := "built-in corpus"
	if text != nil {
		if err := s.store.writeCorpus(id, text); err != nil {
			httpError(w, http.StatusInternalServerError, "%v", err)
			return
		}
		// Loading the saved file checks it as the command line checks --data (binary files are refused).
		c, err := data.Load(s.store.corpusPath(id), "", nil)
		if err != nil {
			httpError(w, http.StatusBadRequest, "%s", strings.Replace(err.Error(), s.store.corpusPath(id), "the corpus", 1))
			return
		}
		source = cleanName(rs.CorpusName)
		if source == "" {
			source = "pasted text"
		}
		c.Source = source
		corpus = c
	}
	if len(corpus.Text) < opts.Model.Ctx+2 {
		httpError(w, http.StatusBadRequest, "the corpus has %d bytes, too short for a context of %d: it needs at least %d bytes", len(corpus.Text), opts.Model.Ctx, opts.Model.Ctx+2)
		return
	}
	var t *train.Trainer
	be, beName, err := s.openBackend(rs.Backend, opts.Model, opts.Batch*opts.Model.Ctx, func(be backend.Backend, _ string) (err error) {
		t, err = train.New(be, opts, corpus)
		return err
	})
	if err != nil {
		httpError(w, http.StatusBadRequest, "%v", err)
		return
	}
	defer func() {
		if !ok { // the job did not start: nothing else will release the device
			backend.Close(be)
		}
	}()
	name := cleanName(rs.Name)
	if name == "" {
		label := opts.Preset
		if label == "" {
			label = fmt.Sprintf("%dL-d%d", opts.Model.Layers, opts.Model.DModel)
		}
		name = fmt.Sprintf("%s on %s", label, source)
	}
	c := opts.Model
	now := time.Now().UTC()
	run := &Run{ID: id, Name: name, Created: now, Status: StatusTraining, Origin: "trained", Preset: opts.Preset,
		Config: ModelConfig{Layers: c.Layers, DModel: c.DModel, Heads: c.Heads, Ctx: c.Ctx, DMlp: c.DMlp},
		Params: c.NumParams(), Batch: opts.Batch, Steps: opts.Steps, LR: opts.LR, Schedule: opts.Schedule,
		Warmup: opts.Warmup, Dropout: opts.Dropout, Seed: opts.Seed, Backend: beName, Dtype: "fp32",
		Corpus: CorpusInfo{Source: source, Bytes: len(corpus.Text)}, History: []format.LossPoint{}}
	s.mu.Lock()
	if !s.mayStartLocked(w) {
		return
	}
	ok = true
	j := s.startJob(t, run, beName, rs.sampleEvery(opts.Steps), false)
	s.mu.Unlock()
	st := j.snapshotState()
	writeJSON(w, http.StatusCreated, StartResponse{Run: st.Run, Warnings: s.runWarnings(opts, len(corpus.Text))})
}

// mayStart is mayStartLocked for a handler that does not hold s.mu, before it does any work
// (mayStartLocked checks again when the job is about to start).
func (s *Server) mayStart(w http.ResponseWriter) bool {
	s.mu.Lock()
	if !s.mayStartLocked(w) {
		return false
	}
	s.mu.Unlock()
	return true
}

// mayStartLocked reports whether a training job may start now: not while the server shuts
// down, and not while another job trains. Called with s.mu held; when it refuses, it has
// answered w and unlocked s.mu.
func (s *Server) mayStartLocked(w http.ResponseWriter) bool {
	if s.isClosing() {
		s.mu.Unlock()
		httpError(w, http.StatusServiceUnavailable, "the server is shutting down; no new training starts")
		return false
	}
	if s.job != nil && s.job.active() {
		j := s.job
		s.mu.Unlock()
		httpError(w, http.StatusConflict, "%s", busyMessage(j))
		return false
	}
	return true
}

func busyMessage(j *job) string {
	j.mu.Lock()
	name, step, steps := j.run.Name, j.stats.Step, j.stats.Steps
	j.mu.Unlock()
	return fmt.Sprintf("a run is already training (%q, step %d of %d); one run trains at a time: stop it or wait for it to finish",
		name, step, steps)
}

// ContinueRequest is the body of POST /api/runs/{id}/continue.
type ContinueRequest struct {
	Steps int `json:"steps"` // more steps to train; 0 finishes the planned steps of a stopped run
}

func (s *Server) handleContinue(w http.ResponseWriter, r *http.Request) {
	run, ok := s.getRun(w, r)
	if !ok {
		return
	}
	var req ContinueRequest
	if !decodeJSON(w, r, maxSettings, &req) {
		return
	}
	if req.Steps < 0 || req.Steps > maxSteps {
		httpError(w, http.StatusBadRequest, "steps must be between 0 and %d, got %d", maxSteps, req.Steps)
		return
	}
	if !s.mayStart(w) {
		return
	}
	f, err := format.ReadFile(s.store.modelPath(run.ID))
	if errors.Is(err, fs.ErrNotExist) {
		httpError(w, http.StatusConflict, "the run has no checkpoint yet")
		return
	}
	if err != nil {
		s.checkpointError(w, run, http.StatusConflict, err)
		return
	}
	if f.M == nil {
		httpError(w, http.StatusBadRequest, "this model holds weights only (%s), without the optimizer state that training continues from", run.Dtype)
		return
	}
	total := int(f.Step) + req.Steps
	if req.Steps == 0 {
		if int(f.Step) >= f.Header.Config.MaxSteps {
			httpError(w, http.StatusBadRequest, "the run has trained all its %d steps; ask for more steps", f.Step)
			return
		}
		total = f.Header.Config.MaxSteps // the planned total
	}
	if total > maxSteps {
		httpError(w, http.StatusBadRequest, "a run trains at most %d steps here, and this one would reach step %d; "+
			"to train longer, continue it on the command line: tinygpt train --resume FILE --steps N", maxSteps, total)
		return
	}
	var corpus *data.Corpus
	if b, err := os.ReadFile(s.store.corpusPath(run.ID)); err == nil {
		corpus = &data.Corpus{Text: b, Source: run.Corpus.Source, Files: 1}
	} else if f.Header.Corpus == "" {
		httpError(w, http.StatusBadRequest, "this model was saved without the text it was trained on, so its training cannot continue here; "+
			"sample from it, or continue it with the text on the command line: tinygpt train --resume FILE --data TEXT")
		return
	}
	// The run goes on on its own backend while that is available.
	fc := f.Header.Config
	shape, tokens := gpt.Config{Layers: fc.Layers, DModel: fc.DModel, Heads: fc.Heads, Ctx: fc.Ctx, DMlp: fc.DMlp}, fc.BatchSize*fc.Ctx
	beName := run.Backend
	if _, err := s.pickBackend(beName); err != nil {
		beName = "auto"
	}
	var t *train.Trainer
	be, beName, err := s.openBackend(beName, shape, tokens, func(be backend.Backend, name string) (err error) {
		t, err = train.Resume(be, f, train.ResumeOptions{Steps: total, Corpus: corpus, Backend: name})
		return err
	})
	if err != nil {
		httpError(w, http.StatusBadRequest, "%v", err)
		return
	}
	started := false
	defer func() {
		if !started { // nothing else will release the device
			backend.Close(be)
		}
	}()
	if t.Opts.EvalEvery == 0 {
		t.Opts.EvalEvery = autoEvery(t.Opts.Steps-t.Step(), 10, 100)
	}
	testHookContinue()
	s.mu.Lock()
	if !s.mayStartLocked(w) {
		return
	}
	// The run may have been deleted since getRun: DELETE holds s.mu and refuses only an
	// active job, so check again now that no other start or delete can run.
	if _, err := s.store.get(run.ID); err != nil {
		s.mu.Unlock()
		if errors.Is(err, errNoRun) {
			httpError(w, http.StatusNotFound, "run %q was deleted before it could continue", run.ID)
		} else {
			httpError(w, http.StatusInternalServerError, "%v", err)
		}
		return
	}
	if run.Origin != "trained" && corpus == nil {
		// An uploaded model trains on the corpus stored in it; keep it beside the run too.
		// Under s.mu, which DELETE holds: written while the folder was being removed, it
		// was left in a folder no listing showed and no DELETE could remove.
		s.store.writeCorpus(run.ID, t.Corpus.Text)
	}
	run.Backend = beName
	started = true
	j := s.startJob(t, run, beName, RunSettings{}.sampleEvery(t.Opts.Steps-t.Step()), true)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, j.snapshotState())
}

// testHookContinue runs in handleContinue just before it takes s.mu to start the job (tests).
var testHookContinue = func() {}

// getRun finds the run named in the path; it writes the 404 itself.
func (s *Server) getRun(w http.ResponseWriter, r *http.Request) (*Run, bool) {
	id := r.PathValue("id")
	if j := s.currentJob(); j != nil && j.id == id && j.active() {
		return j.snapshotState().Run, true
	}
	run, err := s.store.get(id)
	if errors.Is(err, errNoRun) {
		httpError(w, http.StatusNotFound, "no run with id %q", id)
		return nil, false
	}
	if err != nil {
		httpError(w, http.StatusInternalServerError, "%v", err)
		return nil, false
	}
	return run, true
}

// RunList is the answer to GET /api/runs: every run, newest first, with its loss curve
// thinned to about 200 points and its latest sample cut to maxListSample bytes.
type RunList struct {
	Runs []*Run `json:"runs"`
}

// maxListSample is how much of each run's latest sample the run list carries.
const maxListSample = 240

func (s *Server) handleListRuns(w http.ResponseWriter, r *http.Request) {
	runs, err := s.store.list()
	if err != nil {
		httpError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	if j := s.activeJob(); j != nil {
		for i, run := range runs {
			if run.ID == j.id {
				runs[i] = j.snapshotState().Run
			}
		}
	}
	for _, run := range runs {
		run.History = downsample(run.History, 200)
		run.Sample = cutSample(run.Sample, maxListSample)
	}
	if runs == nil {
		runs = []*Run{}
	}
	writeJSON(w, http.StatusOK, RunList{Runs: runs})
}

func (s *Server) handleGetRun(w http.ResponseWriter, r *http.Request) {
	run, ok := s.getRun(w, r)
	if !ok {
		return
	}
	run.History = downsample(run.History, maxStatePoints)
	writeJSON(w, http.StatusOK, run)
}

func (s *Server) handleDeleteRun(w http.ResponseWriter, r *http.Request) {
	run, ok := s.getRun(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.job != nil && s.job.id == run.ID && s.job.active() {
		httpError(w, http.StatusConflict, "the run is training; stop it before deleting it")
		return
	}
	s.models.forget(run.ID)
	if err := s.store.remove(run.ID); err != nil {
		httpError(w, http.StatusInternalServerError, "deleting the run: %v", err)
		return
	}
	if s.job != nil && s.job.id == run.ID {
		s.job = nil
	}
	writeJSON(w, http.StatusOK, map[string]string{"deleted": run.ID})
}

// handleDownload sends the run's checkpoint as a .tinygpt file: format=full (as stored, with the
// optimizer state where it has one), fp16 or int4 (weights only).
//
// A full download is sent from the file as it is, read as it goes (a full checkpoint of a large
// model is gigabytes: three floats a parameter). A conversion decodes the checkpoint and holds
// it in memory with its copy, so conversions run one at a time (parallel downloads of a large
// model's int4 copy once took the server to 10 GB); each then holds only its encoded copy, an
// eighth or half of the weights, while it is sent.
func (s *Server) handleDownload(w http.ResponseWriter, r *http.Request) {
	run, ok := s.getRun(w, r)
	if !ok {
		return
	}
	kind := r.URL.Query().Get("format")
	if kind == "" {
		kind = "full"
	}
	if kind != "full" && kind != "fp16" && kind != "int4" {
		httpError(w, http.StatusBadRequest, "format must be full, fp16 or int4, got %q", kind)
		return
	}
	// A run in training first saves its current state, so the download holds the latest weights.
	if j := s.activeJob(); j != nil && j.id == run.ID {
		if err := j.control(r.Context(), "save"); err != nil && !errors.Is(err, errNotTraining) {
			httpError(w, http.StatusInternalServerError, "%v", err)
			return
		}
	}
	if kind == "full" {
		s.sendCheckpoint(w, r, run)
		return
	}
	body, name, err := s.convertCheckpoint(r.Context(), run, kind)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		httpError(w, http.StatusConflict, "the run has no checkpoint yet")
		return
	case r.Context().Err() != nil:
		return // the client has gone
	case err != nil:
		s.checkpointError(w, run, http.StatusInternalServerError, err)
		return
	}
	setAttachment(w, name)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Write(body)
}

// sendCheckpoint sends the run's checkpoint file as stored. The file stays open while it is
// sent, so a checkpoint saved meanwhile (a new file renamed over the old) does not mix into it;
// it is opened through os.OpenInRoot, which on Windows lets that rename happen (os.Open would
// hold the file, and the run's saves would fail, for as long as the download lasts). Its ETag
// names this checkpoint (step, size, time to the nanosecond), so a resumed download (a range
// with If-Range) never joins two of them.
func (s *Server) sendCheckpoint(w http.ResponseWriter, r *http.Request, run *Run) {
	path := s.store.modelPath(run.ID)
	file, err := os.OpenInRoot(filepath.Dir(path), filepath.Base(path))
	if errors.Is(err, fs.ErrNotExist) {
		httpError(w, http.StatusConflict, "the run has no checkpoint yet")
		return
	}
	var head *format.File
	var fi os.FileInfo
	if err == nil {
		defer file.Close()
		if fi, err = file.Stat(); err == nil {
			if head, err = format.ReadHeader(file, fi.Size()); err == nil {
				_, err = file.Seek(0, io.SeekStart)
			}
		}
	}
	if err != nil {
		s.checkpointError(w, run, http.StatusInternalServerError, err)
		return
	}
	setAttachment(w, fmt.Sprintf("%s-step%d.tinygpt", fileName(run.Name), head.Step))
	w.Header().Set("ETag", fmt.Sprintf(`"%d-%d-%d"`, head.Step, fi.Size(), fi.ModTime().UnixNano()))
	w.Header().Set("Cache-Control", "no-store")
	http.ServeContent(w, r, "", time.Time{}, file) // with Content-Length, and ranges for resumed downloads
}

// checkpointError answers a request whose run's checkpoint could not be read: what is wrong
// with the file where the format says, else (the system's errors name the server's paths) a
// general message, the details going to the server's log.
func (s *Server) checkpointError(w http.ResponseWriter, run *Run, status int, err error) {
	if fe, ok := errors.AsType[*format.FormatError](err); ok {
		httpError(w, status, "the run's checkpoint is not readable: %v", fe)
		return
	}
	s.cfg.Logf("tinygpt serve: run %s: reading its checkpoint: %v", run.ID, err)
	httpError(w, status, "the run's checkpoint could not be read (the server's log says why)")
}

// convertCheckpoint returns the run's checkpoint converted to kind (fp16 or int4), encoded, and
// its file name. It waits for any other conversion to finish first, or for ctx to end.
func (s *Server) convertCheckpoint(ctx context.Context, run *Run, kind string) ([]byte, string, error) {
	select {
	case s.conversions <- struct{}{}:
		defer func() { <-s.conversions }()
	case <-ctx.Done():
		return nil, "", ctx.Err()
	}
	f, err := format.ReadFile(s.store.modelPath(run.ID))
	if err != nil {
		return nil, "", err
	}
	name := fmt.Sprintf("%s-step%d", fileName(run.Name), f.Step)
	if kind == "fp16" {
		f = format.ToFP16(f, name+".tinygpt", time.Now())
	} else {
		f = format.ToInt4(f, name+".tinygpt", time.Now())
	}
	body, err := format.Encode(f)
	if err != nil {
		return nil, "", err
	}
	return body, name + "." + kind + ".tinygpt", nil
}

// TicketResponse is the answer to POST /api/runs/{id}/ticket.
type TicketResponse struct {
	Ticket    string `json:"ticket"`
	ExpiresIn int    `json:"expires_in"` // seconds
}

// handleTicket hands out a ticket for the run's download link (GET .../download?ticket=), in
// place of the token: a browser keeps the address of every download in its history, where the
// token, which lasts across restarts and opens the whole API, would stay readable. A ticket
// opens only that run's downloads, for ticketLife.
func (s *Server) handleTicket(w http.ResponseWriter, r *http.Request) {
	run, ok := s.getRun(w, r)
	if !ok {
		return
	}
	t := s.tickets.issue("/api/runs/"+run.ID+"/download", time.Now())
	writeJSON(w, http.StatusOK, TicketResponse{Ticket: t, ExpiresIn: int(ticketLife / time.Second)})
}

// ticketLife is how long a download ticket can be used.
const ticketLife = 10 * time.Minute

// tickets are the download tickets handed out (handleTicket), by value.
type tickets struct {
	mu sync.Mutex
	m  map[string]ticket
}

type ticket struct {
	path    string // the one path it opens
	expires time.Time
}

// issue returns a new ticket for path, valid from now for ticketLife, and forgets expired ones.
func (ts *tickets) issue(path string, now time.Time) string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.m == nil {
		ts.m = map[string]ticket{}
	}
	for k, t := range ts.m {
		if now.After(t.expires) {
			delete(ts.m, k)
		}
	}
	id := make([]byte, 16)
	rand.Read(id)
	k := hex.EncodeToString(id)
	ts.m[k] = ticket{path: path, expires: now.Add(ticketLife)}
	return k
}

// valid reports whether key is an unexpired ticket for path.
func (ts *tickets) valid(key, path string) bool {
	if key == "" {
		return false
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t, ok := ts.m[key]
	return ok && t.path == path && time.Now().Before(t.expires)
}

// setAttachment sets the headers of a model file sent as a download named name.
func setAttachment(w http.ResponseWriter, name string) {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
}

// handleImport adds an uploaded .tinygpt file (the request body) as a run. The name comes from
// the "name" query parameter and is only shown, never used as a path.
func (s *Server) handleImport(w http.ResponseWriter, r *http.Request) {
	// Uploads are held whole in memory to be decoded: one at a time, so that parallel ones
	// cannot add up to more memory than the machine has.
	select {
	case s.imports <- struct{}{}:
		defer func() { <-s.imports }()
	case <-r.Context().Done():
		return
	}
	in := http.MaxBytesReader(w, r.Body, s.cfg.MaxModelBytes)
	// Something that is not a model is refused by its first bytes, not after a gigabyte.
	magic := make([]byte, len(format.Magic))
	n, err := io.ReadFull(in, magic)
	switch {
	case n == 0 && err == io.EOF:
		httpError(w, http.StatusBadRequest, "the upload is empty; send the .tinygpt file as the request body")
		return
	case (err == nil || err == io.ErrUnexpectedEOF) && string(magic[:n]) != format.Magic:
		httpError(w, http.StatusBadRequest, "not a usable .tinygpt model file: it does not begin with %q", format.Magic)
		return
	}
	buf := bytes.NewBuffer(magic[:n])
	if err == nil {
		_, err = buf.ReadFrom(in) // the rest, after the magic (no second copy of it)
	}
	body := buf.Bytes()
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			httpError(w, http.StatusRequestEntityTooLarge, "the model file is larger than the limit of %s", humanSize(s.cfg.MaxModelBytes))
			return
		}
		httpError(w, http.StatusBadRequest, "reading the upload: %v", err)
		return
	}
	f, err := format.Decode(body)
	if err != nil {
		httpError(w, http.StatusBadRequest, "not a usable .tinygpt model file: %v", err)
		return
	}
	c := f.Header.Config
	gc := gpt.Config{Layers: c.Layers, DModel: c.DModel, Heads: c.Heads, Ctx: c.Ctx, DMlp: c.DMlp}
	if err := gc.Validate(); err != nil {
		httpError(w, http.StatusBadRequest, "the model's config is not usable: %v", err)
		return
	}
	name := cleanName(strings.TrimSuffix(r.URL.Query().Get("name"), ".tinygpt"))
	if name == "" {
		name = "uploaded model"
	}
	id := newID()
	if err := s.store.create(id); err != nil {
		httpError(w, http.StatusInternalServerError, "creating the run folder: %v", err)
		return
	}
	run := &Run{ID: id, Name: name, Created: time.Now().UTC(), Status: StatusUploaded, Origin: "uploaded",
		Backend: c.Backend, FileBytes: int64(len(body))}
	run.fromHeader(f)
	if run.History == nil {
		run.History = []format.LossPoint{}
	}
	// A file's header can carry any history or sample: run.json, which every listing reads,
	// keeps a bounded share of them (the model file keeps them whole).
	run.History = downsample(run.History, maxStatePoints)
	run.Sample = cutSample(run.Sample, maxImportSample)
	if err := writeFileAtomic(s.store.modelPath(id), body); err != nil {
		s.store.remove(id)
		httpError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	if err := s.store.save(run); err != nil {
		s.store.remove(id)
		httpError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	writeJSON(w, http.StatusCreated, run)
}

// maxImportSample is how much of an uploaded model's sample its run keeps.
const maxImportSample = 4096

// cutSample returns s if it is at most n bytes long, else its first n bytes less a character
// cut in two, and "…".
func cutSample(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

func humanSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GB", n>>30)
	case n >= 1<<20:
		return fmt.Sprintf("%.0f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0f KB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

func statSize(path string) (int64, error) {
	info, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return info.Size(), nil
}
