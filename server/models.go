package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"tinygpt/data"
	"tinygpt/format"
	"tinygpt/gpt"
	"tinygpt/train"
)

// modelCache keeps models loaded for generation and inspection, each on its own backend
// instance, one request at a time per model. A model of the training run is refreshed from a
// snapshot of the trainer's weights, so it never shares memory the optimizer writes.
type modelCache struct {
	s  *Server
	mu sync.Mutex
	m  map[string]*loaded
}

type loaded struct {
	sem   chan struct{} // holds a token for a whole generation or inspection
	model *gpt.Model
	step  int // the step whose weights the model holds
	used  time.Time
}

// maxLoaded is how many models stay loaded.
const maxLoaded = 3

func newModelCache(s *Server) *modelCache { return &modelCache{s: s, m: map[string]*loaded{}} }

func (c *modelCache) forget(id string) {
	c.mu.Lock()
	delete(c.m, id)
	c.mu.Unlock()
}

// acquire returns the run's model holding its latest weights, reserved for the caller, who
// releases it. Waiting for another request that uses the model ends with ctx.
func (c *modelCache) acquire(ctx context.Context, run *Run) (*loaded, error) {
	c.mu.Lock()
	l := c.m[run.ID]
	if l == nil {
		l = &loaded{step: -1, sem: make(chan struct{}, 1)}
		c.m[run.ID] = l
		if len(c.m) > maxLoaded {
			var oldest string
			for id, x := range c.m {
				if id != run.ID && (oldest == "" || x.used.Before(c.m[oldest].used)) {
					oldest = id
				}
			}
			delete(c.m, oldest)
		}
	}
	l.used = time.Now()
	c.mu.Unlock()

	select {
	case l.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for another request that uses this model: %w", ctx.Err())
	}
	if err := c.refresh(ctx, l, run); err != nil {
		l.release()
		return nil, err
	}
	return l, nil
}

// release ends the use of a model that acquire returned.
func (l *loaded) release() { <-l.sem }

// errNonFinite reports weights that are NaN or infinite: the model cannot be used.
var errNonFinite = errors.New("the model's weights hold NaN or infinite values (its training diverged), so it cannot generate or be inspected")

// checkFinite returns errNonFinite if any weight is NaN or infinite.
func checkFinite(w []float32) error {
	if !train.AllFinite(w) {
		return errNonFinite
	}
	return nil
}

// modelError answers a request whose model could not be made ready.
func modelError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, errNonFinite):
		httpError(w, http.StatusUnprocessableEntity, "%v", err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		httpError(w, http.StatusServiceUnavailable, "%v", err)
	default:
		httpError(w, http.StatusConflict, "loading the model: %v", err)
	}
}

// refresh brings l up to the run's latest weights: a snapshot from the training job, or the
// checkpoint on disk.
func (c *modelCache) refresh(ctx context.Context, l *loaded, run *Run) error {
	if j := c.s.activeJob(); j != nil && j.id == run.ID {
		j.mu.Lock()
		step := j.stats.Step
		j.mu.Unlock()
		if l.model != nil && l.step == step {
			return nil
		}
		snap, ok, err := j.weights(ctx)
		if err != nil {
			return err
		}
		if ok {
			if err := checkFinite(snap.weights); err != nil {
				return err
			}
			if l.model == nil {
				if err := c.build(l, run); err != nil {
					return err
				}
			}
			if err := l.model.SetWeights(snap.weights); err != nil {
				return err
			}
			l.step = snap.step
			return nil
		}
		// The job ended meanwhile: its checkpoint is final.
	}
	// format.ReadFile refuses a file holding NaN or infinite numbers: only a live job's
	// snapshot needs checkFinite.
	f, err := format.ReadFile(c.s.store.modelPath(run.ID))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("the run has no checkpoint yet")
	} else if err != nil {
		return fmt.Errorf("reading the run's checkpoint: %w", err)
	}
	if l.model != nil && l.step == int(f.Step) {
		return nil
	}
	l.model = nil
	be, err := c.s.cfg.Open("cpu", gpt.Config{}, 0)
	if err != nil {
		return err
	}
	m, err := train.LoadModel(be, f, 1)
	if err != nil {
		return err
	}
	l.model, l.step = m, int(f.Step)
	return nil
}

func (c *modelCache) build(l *loaded, run *Run) error {
	be, err := c.s.cfg.Open("cpu", gpt.Config{}, 0)
	if err != nil {
		return err
	}
	k := run.Config
	m, err := gpt.New(be, gpt.Config{Layers: k.Layers, DModel: k.DModel, Heads: k.Heads, Ctx: k.Ctx, DMlp: k.DMlp})
	if err != nil {
		return err
	}
	l.model = m
	return nil
}

// GenerateRequest is the body of POST /api/runs/{id}/generate.
type GenerateRequest struct {
	Prompt      string   `json:"prompt"`
	Tokens      int      `json:"tokens"`      // bytes to generate, default 300
	Temperature *float64 `json:"temperature"` // default 0.8; ≤ 0 is greedy
	TopK        *int     `json:"top_k"`       // default 40; 0 keeps all
	TopP        *float64 `json:"top_p"`       // default 1
	Seed        *int64   `json:"seed"`        // default from the clock
}

// Limits of a generation request.
const (
	maxGenTokens = 20000
	maxPrompt    = 64 << 10
)

// handleGenerate streams generated text as newline-delimited JSON: {"text": "..."} per token
// (bytes are held back until they complete a UTF-8 character), then {"done": true, ...} with
// the counts and speeds, or {"error": "..."}. Closing the connection stops generation.
func (s *Server) handleGenerate(w http.ResponseWriter, r *http.Request) {
	run, ok := s.getRun(w, r)
	if !ok {
		return
	}
	var req GenerateRequest
	if !decodeJSON(w, r, maxPrompt+4096, &req) {
		return
	}
	sp := gpt.Sampling{Temperature: 0.8, TopK: 40, TopP: 1}
	if req.Temperature != nil {
		sp.Temperature = *req.Temperature
	}
	if req.TopK != nil {
		sp.TopK = *req.TopK
	}
	if req.TopP != nil {
		sp.TopP = *req.TopP
	}
	if req.Tokens == 0 {
		req.Tokens = 300
	}
	seed := uint64(time.Now().UnixNano())
	if req.Seed != nil {
		seed = uint64(*req.Seed)
	}
	switch {
	case req.Tokens < 1 || req.Tokens > maxGenTokens:
		httpError(w, http.StatusBadRequest, "tokens must be between 1 and %d, got %d", maxGenTokens, req.Tokens)
		return
	case math.IsNaN(sp.Temperature) || sp.Temperature > 10:
		httpError(w, http.StatusBadRequest, "temperature must be at most 10 (0 or less is greedy)")
		return
	case sp.TopK < 0 || sp.TopK > gpt.Vocab:
		httpError(w, http.StatusBadRequest, "top_k must be between 0 (all) and %d", gpt.Vocab)
		return
	case !(sp.TopP > 0 && sp.TopP <= 1):
		httpError(w, http.StatusBadRequest, "top_p must be in (0, 1]")
		return
	case len(req.Prompt) > maxPrompt:
		httpError(w, http.StatusBadRequest, "the prompt is longer than %d bytes", maxPrompt)
		return
	}
	start := time.Now()
	l, err := s.models.acquire(r.Context(), run)
	if err != nil {
		modelError(w, err)
		return
	}
	defer l.release()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	enc := json.NewEncoder(w)
	enc.Encode(map[string]any{"step": l.step})
	var first time.Duration
	n := 0
	var pending []byte
	lastFlush := time.Now()
	genStart := time.Now()
	_, err = train.Generate(l.model, []byte(req.Prompt), req.Tokens, sp, seed, func(b byte) error {
		if n == 0 {
			first = time.Since(start)
		}
		n++
		pending = append(pending, b)
		text := completeRunes(&pending)
		if text != "" {
			if err := enc.Encode(map[string]string{"text": text}); err != nil {
				return err
			}
		}
		if fl != nil && time.Since(lastFlush) > 15*time.Millisecond {
			fl.Flush()
			lastFlush = time.Now()
		}
		select {
		case <-s.closing: // shutting down: end the stream now, not when the text is done
			return errClosing
		default:
		}
		return r.Context().Err()
	})
	if len(pending) > 0 {
		enc.Encode(map[string]string{"text": strings.Repeat("\uFFFD", len(pending))})
	}
	// seconds and first_token_ms count from the request, the model's loading included, as its
	// client waited; tokens_per_s is the generation's own rate.
	gen := time.Since(genStart).Seconds()
	switch {
	case err == nil || errors.Is(err, context.Canceled) || errors.Is(err, errClosing):
		enc.Encode(map[string]any{"done": true, "tokens": n, "seconds": time.Since(start).Seconds(), "tokens_per_s": float64(n) / math.Max(gen, 1e-9),
			"first_token_ms": first.Seconds() * 1e3, "step": l.step, "stopped": err != nil})
	default:
		enc.Encode(map[string]string{"error": err.Error()})
	}
	if fl != nil {
		fl.Flush()
	}
}

// errClosing ends a generation when the server begins to shut down.
var errClosing = errors.New("the server is shutting down")

// completeRunes removes the complete UTF-8 characters from the front of *p and returns them
// as text (invalid bytes become U+FFFD); an incomplete character stays in *p.
func completeRunes(p *[]byte) string {
	var b strings.Builder
	buf := *p
	for len(buf) > 0 && utf8.FullRune(buf) {
		r, n := utf8.DecodeRune(buf)
		if r == utf8.RuneError && n == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.Write(buf[:n])
		}
		buf = buf[n:]
	}
	*p = append((*p)[:0], buf...)
	return b.String()
}

// InspectRequest is the body of POST /api/runs/{id}/inspect.
type InspectRequest struct {
	Text  string `json:"text"`  // at most ctx bytes are used (the last ones), and at most maxInspect
	Layer int    `json:"layer"` // 0-based layer whose attention to return
	Head  *int   `json:"head"`  // 0-based head whose attention to return; omitted or -1: every head
}

// Limits of an inspection: the positions looked at, and the attention weights in one answer
// (each at most 6 bytes of JSON), so that a large model cannot make the server build a
// response of gigabytes.
const (
	maxInspect      = 512
	maxInspectCells = 2 << 20
)

// Inspection is the answer to an inspect request.
type Inspection struct {
	Tokens    []string      `json:"tokens"` // each byte of the text, printable
	Truncated bool          `json:"truncated"`
	Top       [][]Candidate `json:"top"` // per position: the 10 likeliest next bytes
	Layer     int           `json:"layer"`
	Layers    int           `json:"layers"`
	Head      int           `json:"head"` // the head returned, or -1: every head
	Heads     int           `json:"heads"`
	Attention []attnRows    `json:"attention"` // [head][query][key ≤ query], 4 decimals
	Step      int           `json:"step"`
	Config    ModelConfig   `json:"config"`
}

// Candidate is a possible next byte.
type Candidate struct {
	Byte int     `json:"byte"`
	Text string  `json:"text"`
	P    float64 `json:"p"`
}

// attnRows is one head's attention weights, sent with 4 decimals (a non-finite weight as 0).
type attnRows [][]float32

// MarshalJSON writes the rows compactly.
func (a attnRows) MarshalJSON() ([]byte, error) {
	n := 2
	for _, row := range a {
		n += 3 + 7*len(row)
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for q, row := range a {
		if q > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		for k, p := range row {
			if k > 0 {
				b = append(b, ',')
			}
			v := float64(p)
			if math.IsNaN(v) || math.IsInf(v, 0) {
				v = 0
			}
			b = strconv.AppendFloat(b, math.Round(v*1e4)/1e4, 'f', -1, 64)
		}
		b = append(b, ']')
	}
	return append(b, ']'), nil
}

func (s *Server) handleInspect(w http.ResponseWriter, r *http.Request) {
	run, ok := s.getRun(w, r)
	if !ok {
		return
	}
	var req InspectRequest
	if !decodeJSON(w, r, maxPrompt+4096, &req) {
		return
	}
	head := -1
	if req.Head != nil {
		head = *req.Head
	}
	if req.Text == "" {
		httpError(w, http.StatusBadRequest, "text is empty: give some text to look inside the model with")
		return
	}
	if req.Layer < 0 || req.Layer >= run.Config.Layers {
		httpError(w, http.StatusBadRequest, "layer must be between 0 and %d, got %d", run.Config.Layers-1, req.Layer)
		return
	}
	if head < -1 || head >= run.Config.Heads {
		httpError(w, http.StatusBadRequest, "head must be between 0 and %d (or -1 for every head), got %d", run.Config.Heads-1, head)
		return
	}
	text := []byte(req.Text)
	truncated := false
	if len(text) > run.Config.Ctx {
		text, truncated = text[len(text)-run.Config.Ctx:], true
	}
	if len(text) > maxInspect {
		httpError(w, http.StatusRequestEntityTooLarge, "the text has %d bytes; look inside at most %d bytes at a time", len(text), maxInspect)
		return
	}
	heads := 1
	if head < 0 {
		heads = run.Config.Heads
	}
	if cells := heads * len(text) * (len(text) + 1) / 2; cells > maxInspectCells {
		httpError(w, http.StatusRequestEntityTooLarge, "the attention of %d heads over %d bytes is %d weights, more than the %d one answer may hold: ask for one head, or use a shorter text", heads, len(text), cells, maxInspectCells)
		return
	}
	l, err := s.models.acquire(r.Context(), run)
	if err != nil {
		modelError(w, err)
		return
	}
	defer l.release()
	toks := data.Tokens(text)
	top, err := l.model.TopNext(toks, 10)
	if err != nil {
		httpError(w, http.StatusBadRequest, "%v", err)
		return
	}
	att, err := l.model.AttentionWeights(toks, req.Layer, head)
	if err != nil {
		httpError(w, http.StatusBadRequest, "%v", err)
		return
	}
	out := Inspection{Truncated: truncated, Layer: req.Layer, Layers: run.Config.Layers, Head: head, Heads: run.Config.Heads,
		Step: l.step, Config: run.Config}
	for _, b := range text {
		out.Tokens = append(out.Tokens, byteText(b))
	}
	for _, row := range top {
		cs := make([]Candidate, len(row))
		for i, c := range row {
			if math.IsNaN(c.Prob) || math.IsInf(c.Prob, 0) {
				httpError(w, http.StatusUnprocessableEntity, "%v", train.ErrOutputNotFinite)
				return
			}
			cs[i] = Candidate{Byte: int(c.Token), Text: byteText(byte(c.Token)), P: c.Prob}
		}
		out.Top = append(out.Top, cs)
	}
	out.Attention = make([]attnRows, len(att))
	for h, rows := range att {
		out.Attention[h] = rows
	}
	writeJSON(w, http.StatusOK, out)
}

// byteText shows one byte: printable ASCII as itself, space as "␣", newline as "⏎", anything
// else as \xNN.
func byteText(b byte) string {
	switch {
	case b == ' ':
		return "␣"
	case b == '\n':
		return "⏎"
	case b == '\t':
		return "⇥"
	case b > 32 && b < 127:
		return string(rune(b))
	}
	return fmt.Sprintf("\\x%02x", b)
}
