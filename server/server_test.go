package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tinygpt/backend"
	"tinygpt/backend/cpu"
	"tinygpt/format"
	"tinygpt/gpt"
)

// testBackends is the backend list of a build with only the CPU.
func testBackends() []Backend {
	return []Backend{
		{Name: "webgpu", Note: "not in this build"},
		{Name: "cpu", Available: true, Detail: "test cpu"},
	}
}

func testOpen(name string, _ gpt.Config, _ int) (backend.Backend, error) {
	if name != "cpu" {
		return nil, fmt.Errorf("no backend %q", name)
	}
	return cpu.New(), nil
}

type testServer struct {
	t   *testing.T
	s   *Server
	srv *httptest.Server
	dir string
}

func newTestServer(t *testing.T, dir string, edit func(*Config)) *testServer {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	cfg := Config{Dir: dir, Backends: testBackends, Open: testOpen, CalibrationPreset: "tiny",
		Logf: func(string, ...any) {}}
	if edit != nil {
		edit(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{t: t, s: s, srv: httptest.NewServer(s), dir: dir}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s.Shutdown(ctx)
		ts.srv.Close()
	})
	return ts
}

// do sends a request with the token and returns the status and body.
func (ts *testServer) do(method, path, contentType string, body io.Reader) (int, []byte) {
	ts.t.Helper()
	req, err := http.NewRequest(method, ts.srv.URL+path, body)
	if err != nil {
		ts.t.Fatal(err)
	}
	req.Header.Set("X-TinyGPT-Token", ts.s.Token())
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		ts.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		ts.t.Fatal(err)
	}
	return resp.StatusCode, b
}

func (ts *testServer) json(method, path string, in any, want int, out any) {
	ts.t.Helper()
	var body io.Reader
	if in != nil {
		if s, ok := in.(string); ok {
			body = strings.NewReader(s)
		} else {
			b, _ := json.Marshal(in)
			body = bytes.NewReader(b)
		}
	}
	status, b := ts.do(method, path, "application/json", body)
	if status != want {
		ts.t.Fatalf("%s %s: status %d, want %d: %s", method, path, status, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			ts.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
}

// tinyRun is a run small enough to train in a moment.
func tinyRun(steps int) map[string]any {
	return map[string]any{"preset": "custom", "layers": 1, "d_model": 16, "ctx": 16, "batch": 4, "steps": steps,
		"eval_every": 10, "sample_every": 10, "seed": 3}
}

// waitJob polls the job until cond holds.
func (ts *testServer) waitJob(cond func(JobState) bool) JobState {
	ts.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var st JobState
		ts.json("GET", "/api/job", nil, http.StatusOK, &st)
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			ts.t.Fatalf("job never reached the expected state; last: %+v", st.Stats)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func ended(st JobState) bool { return !st.Active && st.Run != nil }

// shutdown shuts the server down as serve does on Ctrl-C (the job saved, no new ones).
func (ts *testServer) shutdown() {
	ts.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := ts.s.Shutdown(ctx); err != nil {
		ts.t.Fatal(err)
	}
}

// logRecorder collects what a server logs: newTestServer(t, dir, rec.config).
type logRecorder struct {
	mu  sync.Mutex
	got []string
}

func (r *logRecorder) config(c *Config) {
	c.Logf = func(format string, args ...any) {
		r.mu.Lock()
		r.got = append(r.got, fmt.Sprintf(format, args...))
		r.mu.Unlock()
	}
}

// lines returns what was logged so far.
func (r *logRecorder) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

func TestTrainDownloadGenerateInspectContinueDelete(t *testing.T) {
	ts := newTestServer(t, "", nil)
	var start StartResponse
	ts.json("POST", "/api/runs", tinyRun(40), http.StatusCreated, &start)
	id := start.Run.ID
	if !validID(id) || start.Run.Status != StatusTraining || start.Run.Params == 0 {
		t.Fatalf("start returned %+v", start.Run)
	}
	st := ts.waitJob(ended)
	if st.State != StatusDone || st.Stats.Step != 40 || st.Run.Status != StatusDone {
		t.Fatalf("after the run: state %s, step %d, run status %s (%s)", st.State, st.Stats.Step, st.Run.Status, st.Run.Error)
	}
	if len(st.Samples) == 0 || st.Stats.BestVal == nil || st.Stats.Loss == nil || *st.Stats.Loss >= math.Log(256) {
		t.Fatalf("stats after training: %+v, %d samples", st.Stats, len(st.Samples))
	}
	// Live samples every 10 steps, the last of them the final one, each once.
	var steps []int
	for _, s := range st.Samples {
		steps = append(steps, s.Step)
	}
	if !slices.Equal(steps, []int{10, 20, 30, 40}) {
		t.Errorf("samples at steps %v, want 10, 20, 30 and 40", steps)
	}

	// The stored record and the checkpoint agree.
	var run Run
	ts.json("GET", "/api/runs/"+id, nil, http.StatusOK, &run)
	if run.Step != 40 || len(run.History) != 40 || run.Best == nil || !run.Resumable || run.FileBytes == 0 {
		t.Fatalf("stored run: step %d, %d history points, best %v, resumable %v, %d bytes", run.Step, len(run.History), run.Best, run.Resumable, run.FileBytes)
	}
	var list RunList
	ts.json("GET", "/api/runs", nil, http.StatusOK, &list)
	if len(list.Runs) != 1 || list.Runs[0].ID != id {
		t.Fatalf("list: %+v", list)
	}

	// Downloads decode, in all three forms.
	for _, kind := range []string{"full", "fp16", "int4"} {
		status, b := ts.do("GET", "/api/runs/"+id+"/download?format="+kind, "", nil)
		if status != http.StatusOK {
			t.Fatalf("download %s: %d %s", kind, status, b)
		}
		f, err := format.Decode(b)
		if err != nil {
			t.Fatalf("download %s: %v", kind, err)
		}
		if f.Step != 40 || (kind == "full") != (f.M != nil) {
			t.Errorf("download %s: step %d, moments %v", kind, f.Step, f.M != nil)
		}
		if kind != "full" && f.Header.WeightDtype != kind {
			t.Errorf("download %s: dtype %q", kind, f.Header.WeightDtype)
		}
	}

	// Generation streams exactly the requested number of bytes, and is repeatable by seed.
	gen := func() (string, map[string]any) {
		status, b := ts.do("POST", "/api/runs/"+id+"/generate", "application/json",
			strings.NewReader(`{"prompt":"The ","tokens":50,"temperature":0.8,"top_k":20,"top_p":0.9,"seed":5}`))
		if status != http.StatusOK {
			t.Fatalf("generate: %d %s", status, b)
		}
		var text strings.Builder
		var last map[string]any
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("generate line %q: %v", sc.Text(), err)
			}
			if s, ok := m["text"].(string); ok {
				text.WriteString(s)
			}
			last = m
		}
		return text.String(), last
	}
	text, done := gen()
	if done["done"] != true || done["tokens"].(float64) != 50 || done["step"].(float64) != 40 {
		t.Fatalf("generate ended with %v", done)
	}
	if done["first_token_ms"].(float64) > 1e3*done["seconds"].(float64) || !(done["tokens_per_s"].(float64) > 0) {
		t.Errorf("the first token came after the last: %v", done)
	}
	if again, _ := gen(); again != text || text == "" {
		t.Errorf("same seed, different text: %q vs %q", text, again)
	}

	// Inspection: top-10 in order, attention causal and normalised (to the 4 decimals sent).
	var ins Inspection
	ts.json("POST", "/api/runs/"+id+"/inspect", InspectRequest{Text: "hello there", Layer: 0}, http.StatusOK, &ins)
	if len(ins.Tokens) != 11 || len(ins.Top) != 11 || len(ins.Attention) != run.Config.Heads {
		t.Fatalf("inspection shape: %d tokens, %d top rows, %d heads", len(ins.Tokens), len(ins.Top), len(ins.Attention))
	}
	for q, row := range ins.Attention[0] {
		var sum float64
		for _, p := range row {
			sum += float64(p)
		}
		if len(row) != q+1 || math.Abs(sum-1) > 1e-4*float64(q+1) {
			t.Errorf("attention row %d: %d keys, sum %g", q, len(row), sum)
		}
	}
	for _, row := range ins.Top {
		if len(row) != 10 || row[0].P < row[9].P {
			t.Fatalf("top candidates: %+v", row)
		}
	}
	ts.json("POST", "/api/runs/"+id+"/inspect", InspectRequest{Text: strings.Repeat("x", 40), Layer: 0}, http.StatusOK, &ins)
	if !ins.Truncated || len(ins.Tokens) != 16 {
		t.Errorf("long text: truncated %v, %d tokens; want the last ctx = 16", ins.Truncated, len(ins.Tokens))
	}

	// Continue +20 steps.
	ts.json("POST", "/api/runs/"+id+"/continue", ContinueRequest{Steps: 20}, http.StatusOK, nil)
	st = ts.waitJob(ended)
	if st.State != StatusDone || st.Stats.Step != 60 {
		t.Fatalf("after continuing: %s at step %d (%s)", st.State, st.Stats.Step, st.Run.Error)
	}
	ts.json("GET", "/api/runs/"+id, nil, http.StatusOK, &run)
	if run.Step != 60 || run.Steps != 60 || len(run.History) != 60 {
		t.Fatalf("continued run: step %d of %d, %d points", run.Step, run.Steps, len(run.History))
	}
	// Generation now uses the continued weights.
	if _, done := gen(); done["step"].(float64) != 60 {
		t.Errorf("generation after continuing used step %v", done["step"])
	}

	ts.json("DELETE", "/api/runs/"+id, nil, http.StatusOK, nil)
	ts.json("GET", "/api/runs/"+id, nil, http.StatusNotFound, nil)
	if _, err := os.Stat(filepath.Join(ts.dir, "runs", id)); !os.IsNotExist(err) {
		t.Errorf("run folder still there after delete: %v", err)
	}
}

// Pause really stops the training loop, generation works on the paused weights, and stop
// writes a checkpoint that continues.
func TestPauseResumeStop(t *testing.T) {
	ts := newTestServer(t, "", nil)
	var start StartResponse
	ts.json("POST", "/api/runs", tinyRun(maxSteps), http.StatusCreated, &start)
	id := start.Run.ID
	ts.waitJob(func(st JobState) bool { return st.Stats.Step >= 3 })
	var paused JobState
	ts.json("POST", "/api/job/pause", nil, http.StatusOK, &paused)
	if paused.State != StatusPaused {
		t.Fatalf("state after pause: %s", paused.State)
	}
	step := paused.Stats.Step
	// Generation during the pause runs on the weights of the paused step.
	status, b := ts.do("POST", "/api/runs/"+id+"/generate", "application/json", strings.NewReader(`{"tokens":5}`))
	if status != http.StatusOK || !bytes.Contains(b, []byte(fmt.Sprintf(`"step":%d`, step))) {
		t.Fatalf("generate while paused: %d %s", status, b)
	}
	// The pause wrote a checkpoint at the paused step.
	f, err := format.ReadFile(filepath.Join(ts.dir, "runs", id, "model.tinygpt"))
	if err != nil || int(f.Step) != step {
		t.Fatalf("checkpoint after pause: %v, step %v, want %d", err, f, step)
	}
	for range 3 {
		var st JobState
		ts.json("GET", "/api/job", nil, http.StatusOK, &st)
		if st.Stats.Step != step || st.State != StatusPaused {
			t.Fatalf("paused at step %d but now %s at step %d", step, st.State, st.Stats.Step)
		}
	}
	ts.json("POST", "/api/job/resume", nil, http.StatusOK, nil)
	ts.waitJob(func(st JobState) bool { return st.Stats.Step > step+2 })
	var stopped JobState
	ts.json("POST", "/api/job/stop", nil, http.StatusOK, &stopped)
	if stopped.Active || stopped.State != StatusStopped {
		t.Fatalf("after stop: active %v, state %s", stopped.Active, stopped.State)
	}
	f, err = format.ReadFile(filepath.Join(ts.dir, "runs", id, "model.tinygpt"))
	if err != nil || int(f.Step) != stopped.Stats.Step || f.M == nil {
		t.Fatalf("checkpoint after stop: %v, want step %d with moments", err, stopped.Stats.Step)
	}
	ts.json("POST", "/api/job/pause", nil, http.StatusConflict, nil)
	// An unknown action is unknown whether or not a run is training.
	ts.json("POST", "/api/job/bogus", nil, http.StatusNotFound, nil)
}

func TestConcurrentStartsTrainOneRun(t *testing.T) {
	ts := newTestServer(t, "", nil)
	const n = 4
	statuses := make([]int, n)
	bodies := make([][]byte, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, _ := json.Marshal(tinyRun(maxSteps))
			statuses[i], bodies[i] = ts.do("POST", "/api/runs", "application/json", bytes.NewReader(b))
		}()
	}
	wg.Wait()
	created := 0
	for i, s := range statuses {
		switch s {
		case http.StatusCreated:
			created++
		case http.StatusConflict:
			if !bytes.Contains(bodies[i], []byte("already training")) {
				t.Errorf("409 without a clear message: %s", bodies[i])
			}
		default:
			t.Errorf("start: status %d: %s", s, bodies[i])
		}
	}
	if created != 1 {
		t.Fatalf("%d runs started, want exactly 1", created)
	}
	var list RunList
	ts.json("GET", "/api/runs", nil, http.StatusOK, &list)
	if len(list.Runs) != 1 {
		t.Errorf("%d runs stored after refused starts, want 1", len(list.Runs))
	}
	id := list.Runs[0].ID
	// Generation and inspection run alongside training, on a snapshot of the latest weights.
	ts.waitJob(func(st JobState) bool { return st.Stats.Step >= 2 })
	var wg2 sync.WaitGroup
	for range 2 {
		wg2.Add(2)
		go func() {
			defer wg2.Done()
			status, b := ts.do("POST", "/api/runs/"+id+"/generate", "application/json", strings.NewReader(`{"tokens":20}`))
			if status != http.StatusOK || !bytes.Contains(b, []byte(`"done":true`)) || bytes.Contains(b, []byte(`"step":0`)) {
				t.Errorf("generate during training: %d %s", status, b)
			}
		}()
		go func() {
			defer wg2.Done()
			status, b := ts.do("POST", "/api/runs/"+id+"/inspect", "application/json", strings.NewReader(`{"text":"abc","layer":0}`))
			if status != http.StatusOK {
				t.Errorf("inspect during training: %d %s", status, b)
			}
		}()
	}
	wg2.Wait()
	// A download during training saves the current state first.
	before := ts.waitJob(func(st JobState) bool { return st.Stats.Step >= 3 }).Stats.Step
	status, b := ts.do("GET", "/api/runs/"+id+"/download", "", nil)
	if status != http.StatusOK {
		t.Fatalf("download during training: %d %s", status, b)
	}
	if f, err := format.Decode(b); err != nil || int(f.Step) < before || f.M == nil {
		t.Fatalf("download during training: %v, want the full state at step ≥ %d", err, before)
	}
	// Deleting the training run is refused; stop works, also from a pause.
	ts.json("DELETE", "/api/runs/"+id, nil, http.StatusConflict, nil)
	ts.json("POST", "/api/job/pause", nil, http.StatusOK, nil)
	var st JobState
	ts.json("POST", "/api/job/stop", nil, http.StatusOK, &st)
	if st.Active || st.State != StatusStopped {
		t.Fatalf("stop from a pause: active %v, state %s", st.Active, st.State)
	}
	f, err := format.ReadFile(filepath.Join(ts.dir, "runs", id, "model.tinygpt"))
	if err != nil || int(f.Step) != st.Stats.Step {
		t.Fatalf("checkpoint after stopping a paused run: %v (want step %d)", err, st.Stats.Step)
	}
}

func multipartStart(t *testing.T, settings string, corpus []byte) (string, io.Reader) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	mw.WriteField("settings", settings)
	if corpus != nil {
		fw, err := mw.CreateFormFile("corpus", "corpus.txt")
		if err != nil {
			t.Fatal(err)
		}
		fw.Write(corpus)
	}
	mw.Close()
	return mw.FormDataContentType(), &buf
}

func TestUploadedCorpus(t *testing.T) {
	ts := newTestServer(t, "", nil)
	text := []byte(strings.Repeat("the quick brown fox jumps over the lazy dog. ", 40))
	ct, body := multipartStart(t, `{"preset":"custom","layers":1,"d_model":16,"ctx":16,"batch":4,"steps":15,"corpus_name":"fox.txt"}`, text)
	status, b := ts.do("POST", "/api/runs", ct, body)
	if status != http.StatusCreated {
		t.Fatalf("start with corpus: %d %s", status, b)
	}
	var start StartResponse
	json.Unmarshal(b, &start)
	if start.Run.Corpus.Bytes != len(text) || start.Run.Corpus.Source != "fox.txt" {
		t.Errorf("corpus recorded as %+v", start.Run.Corpus)
	}
	st := ts.waitJob(ended)
	// Without corpus_name the part's file name is shown.
	ct, body = multipartStart(t, `{"preset":"custom","layers":1,"d_model":16,"ctx":16,"batch":4,"steps":1}`, text)
	var second StartResponse
	status, b = ts.do("POST", "/api/runs", ct, body)
	if json.Unmarshal(b, &second); status != http.StatusCreated || second.Run.Corpus.Source != "corpus.txt" {
		t.Errorf("start with an unnamed corpus: %d, source %q", status, second.Run.Corpus.Source)
	}
	ts.waitJob(ended)
	if st.State != StatusDone {
		t.Fatalf("run on uploaded corpus: %s %s", st.State, st.Run.Error)
	}
	stored, err := os.ReadFile(filepath.Join(ts.dir, "runs", start.Run.ID, "corpus.txt"))
	if err != nil || !bytes.Equal(stored, text) {
		t.Errorf("corpus.txt: %v", err)
	}
}

func TestBadInput(t *testing.T) {
	ts := newTestServer(t, "", func(c *Config) { c.MaxCorpusBytes = 1000; c.MaxModelBytes = 4000 })
	// A finished run to aim requests at.
	var start StartResponse
	ts.json("POST", "/api/runs", tinyRun(2), http.StatusCreated, &start)
	ts.waitJob(ended)
	id := start.Run.ID
	cases := []struct {
		name, method, path, ctype, body string
		status                          int
		msg                             string
	}{
		{"malformed JSON", "POST", "/api/runs", "application/json", `{"preset":`, 400, "malformed JSON"},
		{"empty body", "POST", "/api/runs", "application/json", ``, 400, "empty"},
		{"unknown field", "POST", "/api/runs", "application/json", `{"presett":"tiny"}`, 400, "unknown field"},
		{"unknown preset", "POST", "/api/runs", "application/json", `{"preset":"giant"}`, 400, "unknown preset"},
		{"heads", "POST", "/api/runs", "application/json", `{"preset":"custom","layers":1,"d_model":10,"heads":3,"ctx":8}`, 400, "heads must divide"},
		{"negative steps", "POST", "/api/runs", "application/json", `{"preset":"tiny","steps":-1}`, 400, "steps"},
		{"dropout", "POST", "/api/runs", "application/json", `{"preset":"tiny","dropout":1.5}`, 400, "dropout"},
		{"schedule", "POST", "/api/runs", "application/json", `{"preset":"tiny","schedule":"zigzag"}`, 400, "schedule"},
		{"webgpu", "POST", "/api/runs", "application/json", `{"preset":"tiny","backend":"webgpu"}`, 400, "not available"},
		{"text without part", "POST", "/api/runs", "application/json", `{"preset":"tiny","corpus":"text"}`, 400, "corpus"},
		{"plan bad", "POST", "/api/plan", "application/json", `{"preset":"tiny","lr":-1}`, 400, "learning rate"},
		{"plan negative corpus", "POST", "/api/plan", "application/json", `{"preset":"tiny","corpus":"text","corpus_bytes":-5}`, 400, "corpus_bytes must not be negative, got -5"},
		{"unknown run", "GET", "/api/runs/0123456789abcdef", "", "", 404, "no run"},
		{"bad id", "GET", "/api/runs/..%2F..%2Fetc", "", "", 404, "no run"},
		{"delete unknown", "DELETE", "/api/runs/0123456789abcdef", "", "", 404, "no run"},
		{"generate unknown", "POST", "/api/runs/0123456789abcdef/generate", "application/json", `{}`, 404, "no run"},
		{"download unknown", "GET", "/api/runs/0123456789abcdef/download", "", "", 404, "no run"},
		{"download format", "GET", "/api/runs/" + id + "/download?format=fp8", "", "", 400, "format"},
		{"generate tokens", "POST", "/api/runs/" + id + "/generate", "application/json", `{"tokens":-3}`, 400, "tokens"},
		{"generate top_p", "POST", "/api/runs/" + id + "/generate", "application/json", `{"top_p":0}`, 400, "top_p"},
		{"generate JSON", "POST", "/api/runs/" + id + "/generate", "application/json", `[1,2]`, 400, "malformed"},
		{"inspect layer", "POST", "/api/runs/" + id + "/inspect", "application/json", `{"text":"hi","layer":7}`, 400, "layer"},
		{"inspect empty", "POST", "/api/runs/" + id + "/inspect", "application/json", `{"text":""}`, 400, "empty"},
		{"continue negative", "POST", "/api/runs/" + id + "/continue", "application/json", `{"steps":-5}`, 400, "steps"},
		{"continue finished", "POST", "/api/runs/" + id + "/continue", "application/json", `{"steps":0}`, 400, "all its 2 steps"},
		{"continue past the cap", "POST", "/api/runs/" + id + "/continue", "application/json", `{"steps":999999}`, 400, "at most 1000000 steps here, and this one would reach step 1000001"},
		{"corrupt model", "POST", "/api/runs/import", "application/octet-stream", "TGPT\x02\x00\x00\x00\xff\xff\xff\x7f{", 400, "not a usable .tinygpt"},
		{"empty model", "POST", "/api/runs/import", "application/octet-stream", "", 400, "empty"},
		{"oversized model", "POST", "/api/runs/import", "application/octet-stream", "TGPT" + strings.Repeat("x", 5000), 413, "larger than the limit"},
		// Not a model: refused by its first bytes, before the rest is read.
		{"not a model", "POST", "/api/runs/import", "application/octet-stream", strings.Repeat("x", 5000), 400, "not a usable .tinygpt model file: it does not begin with"},
		{"three bytes", "POST", "/api/runs/import", "application/octet-stream", "TGP", 400, "not a usable .tinygpt model file: it does not begin with"},
		{"empty model", "POST", "/api/runs/import", "application/octet-stream", "", 400, "the upload is empty"},
		{"no job", "POST", "/api/job/pause", "", "", 409, "no run is training"},
		{"job action", "POST", "/api/job/explode", "", "", 404, `unknown job action \"explode\"`},
		{"unknown endpoint", "GET", "/api/nothing", "", "", 404, "no such API endpoint"},
	}
	for _, c := range cases {
		status, b := ts.do(c.method, c.path, c.ctype, strings.NewReader(c.body))
		if status != c.status || !strings.Contains(string(b), c.msg) {
			t.Errorf("%s: %d %s; want %d with %q", c.name, status, b, c.status, c.msg)
		}
		var e apiError
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			t.Errorf("%s: error body is not {\"error\": ...}: %s", c.name, b)
		}
	}

	// Corpus uploads: too big, binary, too short.
	for _, c := range []struct {
		name   string
		corpus []byte
		status int
		msg    string
	}{
		{"oversized corpus", bytes.Repeat([]byte("a"), 1500), 413, "larger than the limit"},
		{"binary corpus", append([]byte("text\x00"), bytes.Repeat([]byte{0}, 100)...), 400, "binary"},
		{"short corpus", []byte("too short"), 400, "too short"},
	} {
		ct, body := multipartStart(t, `{"preset":"custom","layers":1,"d_model":16,"ctx":16,"steps":5}`, c.corpus)
		status, b := ts.do("POST", "/api/runs", ct, body)
		if status != c.status || !strings.Contains(string(b), c.msg) {
			t.Errorf("%s: %d %s; want %d with %q", c.name, status, b, c.status, c.msg)
		}
	}
	// Multipart requests are held to what a JSON body is: one settings object, and each part once.
	text := []byte(strings.Repeat("the quick brown fox. ", 20))
	settings := `{"preset":"custom","layers":1,"d_model":16,"ctx":16,"steps":5}`
	for _, c := range []struct {
		name  string
		parts [][2]string // name, content
		msg   string
	}{
		{"trailing JSON", [][2]string{{"settings", settings + `{"steps":7}`}, {"corpus", string(text)}}, "more than one value"},
		{"two settings", [][2]string{{"settings", settings}, {"settings", `{"steps":7}`}, {"corpus", string(text)}}, `more than one \"settings\" part`},
		{"two corpora", [][2]string{{"corpus", string(text)}, {"settings", settings}, {"corpus", string(text)}}, `more than one \"corpus\" part`},
	} {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		for _, p := range c.parts {
			mw.WriteField(p[0], p[1])
		}
		mw.Close()
		status, b := ts.do("POST", "/api/runs", mw.FormDataContentType(), &buf)
		if status != http.StatusBadRequest || !strings.Contains(string(b), c.msg) {
			t.Errorf("%s: %d %s; want 400 with %q", c.name, status, b, c.msg)
		}
	}
	// No failed start left a run behind.
	var list RunList
	ts.json("GET", "/api/runs", nil, http.StatusOK, &list)
	if len(list.Runs) != 1 {
		t.Errorf("%d runs after refused requests, want 1", len(list.Runs))
	}
}

func TestAccessControl(t *testing.T) {
	ts := newTestServer(t, "", nil)
	send := func(method, path, token, origin, host string) int {
		req, _ := http.NewRequest(method, ts.srv.URL+path, strings.NewReader(`{"steps":1}`))
		if token != "" {
			req.Header.Set("X-TinyGPT-Token", token)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	tok := ts.s.Token()
	self := ts.srv.URL
	for _, c := range []struct {
		name, method, path, token, origin, host string
		want                                    int
	}{
		{"page (holds no token)", "GET", "/", "", "", "", 200},
		{"page from another host name", "GET", "/", "", "", "evil.example", 403},
		{"read API without token", "GET", "/api/runs", "", "", "", 401},
		{"read API wrong token", "GET", "/api/runs", "nope", "", "", 401},
		{"read API", "GET", "/api/runs", tok, "", "", 200},
		{"run's model without token", "GET", "/api/runs/x/model", "", "", "", 401},
		{"static file", "GET", "/app.js", "", "", "", 200},
		{"post without token", "POST", "/api/job/stop", "", "", "", 401},
		{"post wrong token", "POST", "/api/job/stop", "nope", "", "", 401},
		{"post other origin", "POST", "/api/job/stop", tok, "http://evil.example", "", 403},
		{"post own origin", "POST", "/api/job/stop", tok, self, "", 409},
		{"DNS rebinding", "GET", "/api/runs", tok, "", "evil.example", 403},
		{"localhost", "GET", "/api/runs", tok, "", "localhost:1234", 200},
	} {
		if got := send(c.method, c.path, c.token, c.origin, c.host); got != c.want {
			t.Errorf("%s: status %d, want %d", c.name, got, c.want)
		}
	}
	// Browsers' own markers: a cross-site fetch is refused even for reads, and an opaque
	// origin ("null", from a sandboxed frame or a file) may not change anything.
	for _, c := range []struct {
		name, method, path, header, value string
		want                              int
	}{
		{"cross-site read", "GET", "/api/runs", "Sec-Fetch-Site", "cross-site", 403},
		{"cross-site post", "POST", "/api/job/stop", "Sec-Fetch-Site", "cross-site", 403},
		{"same-origin read", "GET", "/api/runs", "Sec-Fetch-Site", "same-origin", 200},
		{"cross-site page", "GET", "/", "Sec-Fetch-Site", "cross-site", 200},
		{"null origin post", "POST", "/api/job/stop", "Origin", "null", 403},
		{"null origin read", "GET", "/api/runs", "Origin", "null", 200},
	} {
		req, _ := http.NewRequest(c.method, ts.srv.URL+c.path, nil)
		req.Header.Set("X-TinyGPT-Token", tok)
		req.Header.Set(c.header, c.value)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: status %d, want %d", c.name, resp.StatusCode, c.want)
		}
	}

	// The page holds no token (its script takes it from the address's fragment), so it is
	// served without one.
	resp, err := http.Get(ts.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || bytes.Contains(b, []byte(tok)) || !bytes.Contains(b, []byte("app.js")) {
		t.Errorf("page: %d, token inside: %v", resp.StatusCode, bytes.Contains(b, []byte(tok)))
	}
	// The page comes with its policy however it is reached (the file server answers /%2f/
	// with it too), and so does everything else.
	for _, p := range []string{"/", "/%2f/", "/%2f/app.js", "/app.js", "/api/runs"} {
		resp, err := http.Get(ts.srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "base-uri 'none'") {
			t.Errorf("%s: Content-Security-Policy %q", p, csp)
		}
	}

	// A public server too needs the token for everything but the page and its files.
	pub := newTestServer(t, "", func(c *Config) { c.Public = true; c.Token = "secret" })
	for _, c := range []struct {
		path string
		want int
	}{{"/", 200}, {"/api/runs", 401}, {"/api/runs?token=wrong", 401}, {"/api/runs?token=secret", 200}, {"/app.js", 200}} {
		resp, err := http.Get(pub.srv.URL + c.path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("public %s: %d, want %d", c.path, resp.StatusCode, c.want)
		}
	}
}

// A server that dies while training leaves the run stopped at its last checkpoint; a graceful
// shutdown checkpoints the running job.
func TestRestartKeepsRuns(t *testing.T) {
	dir := t.TempDir()
	a := newTestServer(t, dir, nil)
	var start StartResponse
	a.json("POST", "/api/runs", tinyRun(maxSteps), http.StatusCreated, &start)
	a.waitJob(func(st JobState) bool { return st.Stats.Step >= 2 })
	var paused JobState
	a.json("POST", "/api/job/pause", nil, http.StatusOK, &paused)

	// A second server on the same folder, as after a crash: the run is stopped at the checkpoint.
	b := newTestServer(t, dir, nil)
	if a.s.Token() != b.s.Token() {
		t.Errorf("the token changed across restarts: %q, %q", a.s.Token(), b.s.Token())
	}
	if info, err := os.Stat(filepath.Join(dir, "token")); err != nil {
		t.Error(err)
	} else if info.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, want 0600", info.Mode().Perm())
	}
	var run Run
	b.json("GET", "/api/runs/"+start.Run.ID, nil, http.StatusOK, &run)
	if run.Status != StatusStopped || run.Step != paused.Stats.Step || !run.Resumable {
		t.Fatalf("after a crash: %s at step %d (resumable %v), want stopped at %d", run.Status, run.Step, run.Resumable, paused.Stats.Step)
	}
	if !strings.Contains(run.Error, "can continue from its last checkpoint") {
		t.Errorf("after a crash, the run says %q", run.Error)
	}

	// Graceful shutdown of the first server saves the job.
	a.json("POST", "/api/job/resume", nil, http.StatusOK, nil)
	a.waitJob(func(st JobState) bool { return st.Stats.Step > paused.Stats.Step })
	a.shutdown()
	c := newTestServer(t, dir, nil)
	c.json("GET", "/api/runs/"+start.Run.ID, nil, http.StatusOK, &run)
	f, err := format.ReadFile(filepath.Join(dir, "runs", start.Run.ID, "model.tinygpt"))
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != StatusStopped || run.Step != int(f.Step) || run.Step <= paused.Stats.Step {
		t.Fatalf("after shutdown: %s at step %d, checkpoint at %d", run.Status, run.Step, f.Step)
	}
	// And it continues.
	c.json("POST", "/api/runs/"+start.Run.ID+"/continue", ContinueRequest{Steps: 3}, http.StatusOK, nil)
	st := c.waitJob(ended)
	if st.State != StatusDone || st.Stats.Step != int(f.Step)+3 {
		t.Fatalf("continued run: %s at %d", st.State, st.Stats.Step)
	}
}

func TestEventsStream(t *testing.T) {
	ts := newTestServer(t, "", nil)
	resp, err := http.Get(ts.srv.URL + "/api/events?token=" + ts.s.Token())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	events := make(chan string, 1000)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if k, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
				events <- k
			}
		}
	}()
	if k := <-events; k != "state" {
		t.Fatalf("first event %q, want state", k)
	}
	ts.json("POST", "/api/runs", tinyRun(30), http.StatusCreated, nil)
	seen := map[string]int{}
	for k := range events {
		seen[k]++
		if k == "state" && seen["progress"] > 0 && seen["eval"] > 0 {
			// The final state comes after the progress and evaluations.
			if seen["sample"] == 0 || seen["checkpoint"] == 0 {
				t.Errorf("events seen: %v", seen)
			}
			return
		}
	}
	t.Fatalf("stream ended early; saw %v", seen)
}

func TestImportAndPresets(t *testing.T) {
	ts := newTestServer(t, "", nil)
	raw, err := os.ReadFile("../testdata/pytorch/model.tinygpt")
	if err != nil {
		t.Fatal(err)
	}
	run := ts.importModel(raw, "../../etc/passwd")
	if run.Name != "../../etc/passwd" || !validID(run.ID) || run.Status != StatusUploaded {
		t.Errorf("imported run: %+v", run)
	}
	stored, err := os.ReadFile(filepath.Join(ts.dir, "runs", run.ID, "model.tinygpt"))
	if err != nil || !bytes.Equal(stored, raw) {
		t.Errorf("the stored file differs from the upload: %v", err)
	}
	status, b := ts.do("POST", "/api/runs/"+run.ID+"/generate", "application/json", strings.NewReader(`{"tokens":10,"temperature":0}`))
	if status != http.StatusOK || !bytes.Contains(b, []byte(`"done":true`)) {
		t.Errorf("generate from the upload: %d %s", status, b)
	}

	var presets PresetList
	ts.json("GET", "/api/presets", nil, http.StatusOK, &presets)
	if len(presets.Presets) == 0 || presets.Presets[0].Estimate.Params != 70464 || presets.Presets[0].Estimate.Seconds <= 0 || presets.BuiltinBytes == 0 {
		t.Errorf("presets: %+v", presets.Presets[0])
	}
	var plan Plan
	ts.json("POST", "/api/plan", map[string]any{"preset": "small", "corpus": "text", "corpus_bytes": 5000}, http.StatusOK, &plan)
	if plan.Params != 366432 || len(plan.Warnings) == 0 || !strings.Contains(plan.Warnings[0], "bytes per parameter") {
		t.Errorf("plan for a small corpus: %+v", plan)
	}
	ts.json("POST", "/api/plan", map[string]any{"preset": "small", "corpus_bytes": 5000}, http.StatusOK, &plan)
	if plan.CorpusBytes != 5000 || len(plan.Warnings) == 0 {
		t.Errorf("plan with a corpus size and no corpus kind: %+v", plan)
	}
	ts.json("POST", "/api/plan", map[string]any{"preset": "tiny"}, http.StatusOK, &plan)
	if len(plan.Warnings) != 0 || plan.Backend != "cpu" || plan.CorpusBytes != presets.BuiltinBytes {
		t.Errorf("plan for tiny on the built-in corpus: %+v", plan)
	}
	var sys System
	ts.json("GET", "/api/system", nil, http.StatusOK, &sys)
	if sys.Cores < 1 || len(sys.Backends) != 2 {
		t.Errorf("system: %+v", sys)
	}
}

// repoRoot is the folder holding go.mod, found by walking up from the package's folder.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test's folder")
		}
		dir = up
	}
}

// Files written by the original TinyGPT upload and generate what the original generated.
func TestUploadOriginalFiles(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "..", "shared", "data", "original")
	raw, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Skipf("original fixtures not available: %v", err)
	}
	var exp struct {
		Greedy struct {
			Prompt string `json:"prompt"`
			MaxNew int    `json:"max_new"`
		} `json:"greedy"`
		Models map[string]struct {
			Greedy struct {
				FromFiles map[string]struct {
					Continuation string `json:"continuation"`
				} `json:"from_files"`
			} `json:"greedy"`
		} `json:"models"`
	}
	if err := json.Unmarshal(raw, &exp); err != nil {
		t.Fatal(err)
	}
	ts := newTestServer(t, "", nil)
	for _, file := range []string{"tiny.tinygpt", "tiny.int4.tinygpt"} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		run := ts.importModel(b, file)
		req, _ := json.Marshal(GenerateRequest{Prompt: exp.Greedy.Prompt, Tokens: exp.Greedy.MaxNew, Temperature: new(float64)})
		status, body := ts.do("POST", "/api/runs/"+run.ID+"/generate", "application/json", bytes.NewReader(req))
		if status != http.StatusOK {
			t.Fatalf("%s: generate %d %s", file, status, body)
		}
		var text strings.Builder
		for line := range strings.Lines(string(body)) {
			var m map[string]any
			json.Unmarshal([]byte(line), &m)
			if s, ok := m["text"].(string); ok {
				text.WriteString(s)
			}
		}
		dtype := "fp32"
		if strings.Contains(file, "int4") {
			dtype = "int4"
		}
		want := strings.ToValidUTF8(exp.Models["tiny"].Greedy.FromFiles[dtype].Continuation, "\uFFFD")
		if text.String() != want {
			t.Errorf("%s: greedy\n%q\nwant\n%q", file, text.String(), want)
		}
	}
}

// lostDevice is a backend whose device is lost at the first loss it computes: its losses come
// out NaN, as a GPU's reads do after a failure, and Err says why from then on.
type lostDevice struct {
	*cpu.Backend
	lost *atomic.Bool
}

func (b lostDevice) Err() error {
	if b.lost.Load() {
		return errors.New("webgpu: device lost")
	}
	return nil
}

func (b lostDevice) CrossEntropy(losses, dlogits, logits, targets backend.Tensor, N, V int, scale float32) {
	b.lost.Store(true)
	b.Backend.CrossEntropy(losses, dlogits, logits, targets, N, V, scale)
	nan := make([]float32, N)
	for i := range nan {
		nan[i] = float32(math.NaN())
	}
	b.Upload(losses, nan)
}

// A run whose backend fails says what the backend says, not its symptom (a NaN loss); and a
// continued run goes on on its own backend.
func TestBackendFailureReported(t *testing.T) {
	var lost atomic.Bool
	ts := newTestServer(t, "", func(c *Config) {
		c.Backends = func() []Backend {
			return []Backend{{Name: "cpu", Available: true}, {Name: "gpu", Available: true}}
		}
		c.Open = func(name string, _ gpt.Config, _ int) (backend.Backend, error) {
			if name == "gpu" && lost.Load() {
				return lostDevice{cpu.New(), new(atomic.Bool)}, nil
			}
			return cpu.New(), nil
		}
	})
	run := tinyRun(4)
	run["backend"] = "gpu"
	var start StartResponse
	ts.json("POST", "/api/runs", run, http.StatusCreated, &start)
	if st := ts.waitJob(ended); st.State != StatusDone || st.Run.Backend != "gpu" {
		t.Fatalf("first run: state %s on %q", st.State, st.Run.Backend)
	}
	lost.Store(true)
	ts.json("POST", "/api/runs/"+start.Run.ID+"/continue", ContinueRequest{Steps: 3}, http.StatusOK, nil)
	st := ts.waitJob(func(j JobState) bool { return ended(j) && j.Run.Step > 0 && j.State == StatusFailed })
	if !strings.Contains(st.Run.Error, "webgpu: device lost (start the run again on the cpu backend)") || st.Run.Backend != "gpu" {
		t.Errorf("continued run: state %s on %q, error %q", st.State, st.Run.Backend, st.Run.Error)
	}
}

// closeCounted is a CPU backend that counts its Close calls.
type closeCounted struct {
	*cpu.Backend
	closed *atomic.Int32
}

func (b closeCounted) Close() { b.closed.Add(1) }

// A run's backend is closed when the run ends, a continued run's too (a GPU's device and
// buffers are released then, not left to the garbage collector, which made the binding warn
// about every buffer).
func TestRunClosesItsBackend(t *testing.T) {
	var opened, closed atomic.Int32
	ts := newTestServer(t, "", func(c *Config) {
		c.Open = func(name string, _ gpt.Config, _ int) (backend.Backend, error) {
			opened.Add(1)
			return closeCounted{cpu.New(), &closed}, nil
		}
	})
	var start StartResponse
	ts.json("POST", "/api/runs", tinyRun(3), http.StatusCreated, &start)
	ts.waitJob(ended)
	if opened.Load() != 1 || closed.Load() != 1 {
		t.Errorf("after a run: %d opened, %d closed", opened.Load(), closed.Load())
	}
	// A continued run opens a backend of its own, and closes it too.
	ts.json("POST", "/api/runs/"+start.Run.ID+"/continue", ContinueRequest{Steps: 2}, http.StatusOK, nil)
	ts.waitJob(func(j JobState) bool { return ended(j) && j.Run.Step == 5 })
	if opened.Load() != 2 || closed.Load() != 2 {
		t.Errorf("after a continued run: %d opened, %d closed", opened.Load(), closed.Load())
	}
}

// A backend that refuses a model refuses the run that names it (400, saying why); auto then
// takes the next backend that accepts it.
func TestAutoSkipsBackendThatRefusesModel(t *testing.T) {
	ts := newTestServer(t, "", func(c *Config) {
		c.Backends = func() []Backend {
			return []Backend{{Name: "gpu", Available: true}, {Name: "cpu", Available: true}}
		}
		c.Open = func(name string, m gpt.Config, _ int) (backend.Backend, error) {
			if name == "gpu" && m.DModel >= 16 { // tinyRun's model is 16 wide
				return nil, errors.New("webgpu: the model is too wide for this GPU")
			}
			return cpu.New(), nil
		}
	})
	run := tinyRun(2)
	run["backend"] = "gpu"
	status, body := ts.do("POST", "/api/runs", "application/json", strings.NewReader(mustJSON(t, run)))
	if status != http.StatusBadRequest || !strings.Contains(string(body), "too wide for this GPU") {
		t.Errorf("gpu: %d %s", status, body)
	}
	run["backend"] = "auto"
	var start StartResponse
	ts.json("POST", "/api/runs", run, http.StatusCreated, &start)
	if st := ts.waitJob(ended); st.State != StatusDone || st.Run.Backend != "cpu" {
		t.Errorf("auto: state %s on %q", st.State, st.Run.Backend)
	}
}

// A run whose loss becomes NaN fails with a message and, having written no checkpoint, cannot
// continue.
func TestDivergingRunFails(t *testing.T) {
	ts := newTestServer(t, "", nil)
	run := tinyRun(20)
	run["lr"] = 1e30
	var start StartResponse
	ts.json("POST", "/api/runs", run, http.StatusCreated, &start)
	st := ts.waitJob(ended)
	if st.State != StatusFailed || !strings.Contains(st.Run.Error, "not finite") || st.Run.Resumable {
		t.Fatalf("diverged run: state %s, error %q, resumable %v", st.State, st.Run.Error, st.Run.Resumable)
	}
	// The advice is in the page's terms, not the command line's, and names none of the server's paths.
	if e := st.Run.Error; !strings.Contains(e, "lower learning rate (this one's was 1e+30)") || !strings.Contains(e, "No checkpoint was written") ||
		strings.Contains(e, "--") || strings.Contains(e, ts.dir) {
		t.Errorf("diverged run's message: %q", e)
	}
	var stored Run
	ts.json("GET", "/api/runs/"+start.Run.ID, nil, http.StatusOK, &stored)
	if stored.Status != StatusFailed || stored.Error == "" {
		t.Errorf("stored run: %s %q", stored.Status, stored.Error)
	}
	ts.json("POST", "/api/runs/"+start.Run.ID+"/continue", ContinueRequest{Steps: 5}, http.StatusConflict, nil)
}

// mustJSON encodes v as JSON.
func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// An imported model saved without its corpus cannot continue training here, and the answer says
// what can be done instead (not a command-line flag alone).
func TestContinueWithoutCorpus(t *testing.T) {
	ts := newTestServer(t, "", nil)
	var start StartResponse
	ts.json("POST", "/api/runs", tinyRun(2), http.StatusCreated, &start)
	ts.waitJob(ended)
	status, raw := ts.do("GET", "/api/runs/"+start.Run.ID+"/download", "", nil)
	if status != http.StatusOK {
		t.Fatalf("download: %d %s", status, raw)
	}
	f, err := format.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	f.Header.Corpus = ""
	if raw, err = format.Encode(f); err != nil {
		t.Fatal(err)
	}
	run := ts.importModel(raw, "bare")
	status, b := ts.do("POST", "/api/runs/"+run.ID+"/continue", "application/json", strings.NewReader(`{"steps":3}`))
	if status != http.StatusBadRequest || !bytes.Contains(b, []byte("saved without the text it was trained on")) {
		t.Errorf("continuing a model without its corpus: %d %s", status, b)
	}
}

// A run folder whose run.json is damaged is not listed, and the server says so when it starts,
// naming the model that is still there.
func TestDamagedRunIsReported(t *testing.T) {
	dir := t.TempDir()
	a := newTestServer(t, dir, nil)
	var start StartResponse
	a.json("POST", "/api/runs", tinyRun(2), http.StatusCreated, &start)
	a.waitJob(ended)
	if err := os.WriteFile(filepath.Join(dir, "runs", start.Run.ID, "run.json"), []byte("{garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	var rec logRecorder
	b := newTestServer(t, dir, rec.config)
	var list struct{ Runs []Run }
	b.json("GET", "/api/runs", nil, http.StatusOK, &list)
	logged := rec.lines()
	model := filepath.Join(dir, "runs", start.Run.ID, "model.tinygpt")
	if len(list.Runs) != 0 || len(logged) != 1 || !strings.Contains(logged[0], "damaged run.json") || !strings.Contains(logged[0], model) {
		t.Errorf("%d runs listed; logged %q", len(list.Runs), logged)
	}
}

// A run.json damaged while the server runs is logged by the next listing that misses it, once.
func TestRunDamagedWhileServingIsLogged(t *testing.T) {
	dir := t.TempDir()
	var rec logRecorder
	a := newTestServer(t, dir, rec.config)
	var start StartResponse
	a.json("POST", "/api/runs", tinyRun(2), http.StatusCreated, &start)
	a.waitJob(ended)
	if err := os.WriteFile(filepath.Join(dir, "runs", start.Run.ID, "run.json"), []byte("{garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	var list struct{ Runs []Run }
	for range 3 {
		a.json("GET", "/api/runs", nil, http.StatusOK, &list)
	}
	logged := rec.lines()
	var damaged []string
	for _, l := range logged {
		if strings.Contains(l, "damaged run.json") {
			damaged = append(damaged, l)
		}
	}
	if len(list.Runs) != 0 || len(damaged) != 1 || !strings.Contains(damaged[0], start.Run.ID) {
		t.Errorf("%d runs listed; logged %q", len(list.Runs), logged)
	}
}
