package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"tinygpt/backend"
	"tinygpt/backend/cpu"
	"tinygpt/format"
	"tinygpt/gpt"
)

// craftModel encodes a one-layer model of the given context and heads (one dimension per head,
// so that a long context stays small), with weights from fill.
func craftModel(t *testing.T, ctx, heads int, fill func(i int) float32) []byte {
	t.Helper()
	c := format.Config{Ctx: ctx, Layers: 1, Heads: heads, DModel: heads, DMlp: 4, BatchSize: 1, MaxSteps: 10,
		LearningRate: 1e-3, Seed: 1}
	w := make([]float32, format.ParamCount(c))
	for i := range w {
		w[i] = fill(i)
	}
	f := &format.File{Header: format.Header{Version: 2, Config: c, Project: "x", WeightDtype: "fp32"}, Weights: w}
	b, err := format.Encode(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// importModel uploads a model file as a run of that name and returns the run.
func (ts *testServer) importModel(raw []byte, name string) Run {
	ts.t.Helper()
	status, b := ts.do("POST", "/api/runs/import?name="+url.QueryEscape(name), "application/octet-stream", bytes.NewReader(raw))
	if status != http.StatusCreated {
		ts.t.Fatalf("import of %s: %d %s", name, status, b)
	}
	var run Run
	if err := json.Unmarshal(b, &run); err != nil {
		ts.t.Fatal(err)
	}
	return run
}

func plainWeights(i int) float32 { return 0.01 * float32(i%7) }

// A model with a long context and many heads cannot make inspect build a huge answer: the text
// is capped, every head at once is refused when too big, and one head comes back compactly.
func TestInspectLimits(t *testing.T) {
	ts := newTestServer(t, "", nil)
	run := ts.importModel(craftModel(t, 2048, 16, plainWeights), "crafted")
	path := "/api/runs/" + run.ID + "/inspect"
	inspect := func(text string, head *int) (int, []byte) {
		b, _ := json.Marshal(InspectRequest{Text: text, Layer: 0, Head: head})
		return ts.do("POST", path, "application/json", bytes.NewReader(b))
	}
	if status, b := inspect(strings.Repeat("a", 2048), nil); status != http.StatusRequestEntityTooLarge || !bytes.Contains(b, []byte("at most 512 bytes")) {
		t.Errorf("2048 bytes: %d %.200s", status, b)
	}
	text := strings.Repeat("ab", maxInspect/2)
	if status, b := inspect(text, nil); status != http.StatusRequestEntityTooLarge || !bytes.Contains(b, []byte("one head")) {
		t.Errorf("512 bytes, every head: %d %.200s", status, b)
	}
	head := 3
	status, b := inspect(text, &head)
	if status != http.StatusOK {
		t.Fatalf("512 bytes, one head: %d %.200s", status, b)
	}
	if len(b) > 2<<20 {
		t.Errorf("one head over 512 bytes: a %d-byte answer", len(b))
	}
	var raw struct {
		Attention json.RawMessage `json:"attention"`
		Head      int             `json:"head"`
		Heads     int             `json:"heads"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	if long := regexp.MustCompile(`\.\d{5}`).Find(raw.Attention); long != nil {
		t.Errorf("attention weights with more than 4 decimals: %s", long)
	}
	var ins Inspection
	json.Unmarshal(b, &ins)
	if len(ins.Attention) != 1 || len(ins.Attention[0]) != maxInspect || raw.Head != 3 || raw.Heads != 16 {
		t.Fatalf("one head: %d heads of %d rows, head %d of %d", len(ins.Attention), len(ins.Attention[0]), raw.Head, raw.Heads)
	}
	for q, row := range ins.Attention[0] {
		var sum float64
		for _, p := range row {
			sum += float64(p)
		}
		if len(row) != q+1 || math.Abs(sum-1) > 5e-3*float64(q+1) {
			t.Fatalf("row %d: %d keys, sum %g", q, len(row), sum)
		}
	}
	// A short text still gets every head.
	if status, b := inspect("hello", nil); status != http.StatusOK {
		t.Errorf("short text: %d %s", status, b)
	} else if json.Unmarshal(b, &ins); len(ins.Attention) != 16 || ins.Head != -1 {
		t.Errorf("short text: %d heads, head %d", len(ins.Attention), ins.Head)
	}
	bad := 16
	if status, _ := inspect("hello", &bad); status != http.StatusBadRequest {
		t.Errorf("head 16 of 16: %d", status)
	}
}

// JSON has no NaN: an answer that cannot be encoded is a 500 with a message, never an empty
// 200; a file with NaN weights is refused with a message; the job's stats are sent with their non-finite
// numbers zeroed.
func TestNonFiniteNumbers(t *testing.T) {
	rec := httptest.NewRecorder()
	writeJSON(rec, http.StatusOK, map[string]float64{"x": math.NaN()})
	var e apiError
	if rec.Code != http.StatusInternalServerError || json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Error == "" {
		t.Errorf("NaN: %d %q", rec.Code, rec.Body.String())
	}

	ts := newTestServer(t, "", nil)
	// A file holding a NaN weight is damaged: the upload is refused.
	raw := craftModel(t, 32, 1, plainWeights)
	f, err := format.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	damaged := bytes.Clone(raw)
	binary.LittleEndian.PutUint32(damaged[len(damaged)-f.Header.StateByteLength+4:], 0x7fc00000)
	status, b := ts.do("POST", "/api/runs/import?name=nan", "application/octet-stream", bytes.NewReader(damaged))
	if status != http.StatusBadRequest || json.Unmarshal(b, &e) != nil || !strings.Contains(e.Error, "NaN") {
		t.Errorf("import of a NaN weight: %d %s", status, b)
	}

	done := make(chan struct{})
	close(done)
	j := &job{id: "0123456789abcdef", done: done, state: StatusStopped, cancel: func() {},
		run:   &Run{ID: "0123456789abcdef", History: []format.LossPoint{}},
		stats: Stats{Step: 3, TokensPerS: math.Inf(1), MsPerStep: math.NaN(), ETA: math.Inf(-1), LR: 1e-3}}
	ts.s.mu.Lock()
	ts.s.job = j
	ts.s.mu.Unlock()
	c := ts.s.hub.subscribe()
	defer ts.s.hub.unsubscribe(c)
	var st JobState
	ts.json("GET", "/api/job", nil, http.StatusOK, &st)
	if st.Stats.Step != 3 || st.Stats.TokensPerS != 0 || st.Stats.MsPerStep != 0 || st.Stats.ETA != 0 || st.Stats.LR != 1e-3 {
		t.Errorf("stats: %+v", st.Stats)
	}
	ts.s.hub.publish("state", j.snapshotState())
	select {
	case msg := <-c:
		if !bytes.HasPrefix(msg, []byte("event: state\n")) {
			t.Errorf("event %q", msg)
		}
	case <-time.After(time.Second):
		t.Error("the state event with non-finite stats was dropped")
	}
	nan := math.NaN()
	if p := cleanPoint(format.LossPoint{Step: 1, Train: &nan, Val: &nan}); p.Train != nil || p.Val != nil {
		t.Errorf("cleanPoint kept NaN: %+v", p)
	}
}

// Runs hold the user's corpora: folders are 0700 and files 0600.
func TestFilePermissions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	ts := newTestServer(t, dir, nil)
	mt, body := multipartStart(t, `{"preset":"custom","layers":1,"d_model":16,"ctx":16,"batch":2,"steps":2}`, bytes.Repeat([]byte("secret text "), 20))
	status, b := ts.do("POST", "/api/runs", mt, body)
	if status != http.StatusCreated {
		t.Fatalf("start: %d %s", status, b)
	}
	var start StartResponse
	json.Unmarshal(b, &start)
	ts.waitJob(ended)
	rd := filepath.Join(dir, "runs", start.Run.ID)
	for path, want := range map[string]os.FileMode{
		dir: 0o700, filepath.Join(dir, "runs"): 0o700, rd: 0o700, filepath.Join(dir, "token"): 0o600,
		filepath.Join(rd, "run.json"): 0o600, filepath.Join(rd, "corpus.txt"): 0o600,
		filepath.Join(rd, "model.tinygpt"): 0o600,
	} {
		info, err := os.Stat(path)
		if err != nil {
			t.Error(err)
		} else if info.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", path, info.Mode().Perm(), want)
		}
	}
}

// Once shutdown has begun, no training starts or continues.
func TestNoTrainingAfterShutdown(t *testing.T) {
	ts := newTestServer(t, "", nil)
	var start StartResponse
	ts.json("POST", "/api/runs", tinyRun(3), http.StatusCreated, &start)
	ts.waitJob(ended)
	ts.shutdown()
	ts.json("POST", "/api/runs", tinyRun(3), http.StatusServiceUnavailable, nil)
	ts.json("POST", "/api/runs/"+start.Run.ID+"/continue", ContinueRequest{Steps: 3}, http.StatusServiceUnavailable, nil)
	if j := ts.s.activeJob(); j != nil {
		t.Errorf("a job started after shutdown: %s", j.id)
	}
}

// A generation stops at once when the server begins to shut down, rather than holding the
// shutdown until its text is done (a long one on a large model took minutes).
func TestGenerationStopsAtShutdown(t *testing.T) {
	ts := newTestServer(t, "", nil)
	var start StartResponse
	ts.json("POST", "/api/runs", tinyRun(2), http.StatusCreated, &start)
	ts.waitJob(ended)
	ts.shutdown()
	status, b := ts.do("POST", "/api/runs/"+start.Run.ID+"/generate", "application/json", strings.NewReader(`{"prompt":"a","tokens":20000}`))
	if status != http.StatusOK || !strings.Contains(string(b), `"stopped":true`) || !strings.Contains(string(b), `"tokens":1,`) {
		t.Errorf("generate during shutdown: %d %.300s", status, b)
	}
}

// Continuing a run whose checkpoint is gone says so, without the server's paths.
func TestContinueWithoutCheckpoint(t *testing.T) {
	ts := newTestServer(t, "", nil)
	var start StartResponse
	ts.json("POST", "/api/runs", tinyRun(2), http.StatusCreated, &start)
	ts.waitJob(ended)
	model := filepath.Join(ts.dir, "runs", start.Run.ID, "model.tinygpt")
	if err := os.Remove(model); err != nil {
		t.Fatal(err)
	}
	status, b := ts.do("POST", "/api/runs/"+start.Run.ID+"/continue", "application/json", strings.NewReader(`{"steps":3}`))
	if status != http.StatusConflict || !strings.Contains(string(b), "the run has no checkpoint yet") || strings.Contains(string(b), ts.dir) {
		t.Errorf("continue without a checkpoint: %d %s", status, b)
	}
}

// An uploaded model's header can carry any loss history and sample: its run keeps a bounded
// share of them (run.json is read by every listing); the model file keeps them whole.
func TestImportBoundsHistoryAndSample(t *testing.T) {
	ts := newTestServer(t, "", nil)
	f, err := format.ReadFile("../testdata/pytorch/model.tinygpt")
	if err != nil {
		t.Fatal(err)
	}
	v := 2.0
	f.Header.LossHistory = make([]format.LossPoint, 50_000)
	for i := range f.Header.LossHistory {
		f.Header.LossHistory[i] = format.LossPoint{Step: i + 1, Train: &v}
	}
	f.Header.Sample = strings.Repeat("é", 20_000) // two bytes each: the cut must not split one
	raw, err := format.Encode(f)
	if err != nil {
		t.Fatal(err)
	}
	run := ts.importModel(raw, "long")
	h := run.History
	if len(h) > maxStatePoints+maxStatePoints/4 || h[0].Step != 1 || h[len(h)-1].Step != 50_000 {
		t.Errorf("history of %d points, from %d to %d", len(h), h[0].Step, h[len(h)-1].Step)
	}
	if len(run.Sample) > maxImportSample+len("…") || !utf8.ValidString(run.Sample) || !strings.HasPrefix(run.Sample, "éé") {
		t.Errorf("sample of %d bytes, valid UTF-8 %v", len(run.Sample), utf8.ValidString(run.Sample))
	}
	if stored, err := os.ReadFile(filepath.Join(ts.dir, "runs", run.ID, "model.tinygpt")); err != nil || !bytes.Equal(stored, raw) {
		t.Errorf("the stored file differs from the upload: %v", err)
	}
}

// The history sent with a job's state is bounded, validation points included.
func TestHistoryBounded(t *testing.T) {
	v := 1.0
	h := make([]format.LossPoint, 100_000)
	for i := range h {
		h[i] = format.LossPoint{Step: i + 1, Train: &v, Val: &v}
	}
	got := downsample(h, maxStatePoints)
	if len(got) > maxStatePoints+maxStatePoints/4 || got[0].Step != 1 || got[len(got)-1].Step != len(h) {
		t.Errorf("downsample of %d points: %d, from %d to %d", len(h), len(got), got[0].Step, got[len(got)-1].Step)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Step <= got[i-1].Step {
			t.Fatalf("points out of order at %d", i)
		}
	}
	done := make(chan struct{})
	close(done)
	j := &job{id: "0123456789abcdef", done: done, run: &Run{ID: "0123456789abcdef", History: h}}
	if n := len(j.snapshotState().Run.History); n > maxStatePoints+maxStatePoints/4 {
		t.Errorf("job state carries %d points", n)
	}
}

// Saving the live run's record updates its "updated" time.
func TestLiveRunUpdated(t *testing.T) {
	ts := newTestServer(t, "", nil)
	id := newID()
	if err := ts.s.store.create(id); err != nil {
		t.Fatal(err)
	}
	j := &job{id: id, done: make(chan struct{}), run: &Run{ID: id, History: []format.LossPoint{}}}
	ts.s.saveRun(j)
	first := j.run.Updated
	if first.IsZero() {
		t.Fatal("the live run's updated time was not set")
	}
	time.Sleep(5 * time.Millisecond)
	ts.s.saveRun(j)
	if !j.run.Updated.After(first) {
		t.Errorf("updated stayed at %v", first)
	}
}

// Waiting for a model that another request uses ends with the request.
func TestAcquireCancellable(t *testing.T) {
	ts := newTestServer(t, "", nil)
	run := &Run{ID: "0123456789abcdef"}
	l := &loaded{step: -1, sem: make(chan struct{}, 1)}
	l.sem <- struct{}{} // a long generation holds it
	ts.s.models.m[run.ID] = l
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := ts.s.models.acquire(ctx, run)
		errc <- err
	}()
	select {
	case err := <-errc:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("acquire: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("acquire kept waiting after its request ended")
	}
}

// Small request fixes: an empty preset is the default one, a wrong method is a 405 with Allow,
// and the built-in corpus cannot come with an uploaded one.
func TestRequestFixes(t *testing.T) {
	ts := newTestServer(t, "", nil)
	var plan Plan
	ts.json("POST", "/api/plan", `{"steps":300}`, http.StatusOK, &plan)
	ts.json("POST", "/api/plan", `null`, http.StatusOK, &plan)
	ts.json("POST", "/api/plan", `{"layers":1,"d_model":16,"ctx":16}`, http.StatusOK, &plan)
	if plan.Params == 0 {
		t.Errorf("custom sizes without a preset: %+v", plan)
	}

	req, _ := http.NewRequest("PUT", ts.srv.URL+"/api/runs", nil)
	req.Header.Set("X-TinyGPT-Token", ts.s.Token())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD, POST" {
		t.Errorf("PUT /api/runs: %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
	ts.json("GET", "/api/nothing", nil, http.StatusNotFound, nil)

	mt, body := multipartStart(t, `{"preset":"custom","layers":1,"d_model":16,"ctx":16,"steps":2,"corpus":"builtin"}`, bytes.Repeat([]byte("text "), 20))
	status, b := ts.do("POST", "/api/runs", mt, body)
	if status != http.StatusBadRequest || !bytes.Contains(b, []byte("built-in")) {
		t.Errorf("builtin with a corpus part: %d %s", status, b)
	}
	var list RunList
	ts.json("GET", "/api/runs", nil, http.StatusOK, &list)
	if len(list.Runs) != 0 {
		t.Errorf("a refused start left %d runs", len(list.Runs))
	}
}

// The processor's name comes from /proc/cpuinfo on x86 and ARM alike.
func TestCPUInfoName(t *testing.T) {
	for in, want := range map[string]string{
		"processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n":                                                        "Intel(R) Xeon(R) CPU @ 2.20GHz",
		"processor\t: 0\nBogoMIPS\t: 108.00\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n\nHardware\t: BCM2835\nModel\t: Raspberry Pi 4 Model B Rev 1.4\n": "Raspberry Pi 4 Model B Rev 1.4",
		"processor\t: 0\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU part\t: 0xd0c\n":                                                                "Arm (part 0xd0c)",
		"processor\t: 0\n": "",
	} {
		if got := cpuInfoName(strings.NewReader(in)); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
	if m := cpuModel(); m == "" || m == "amd64" || m == "arm64" {
		t.Errorf("cpuModel: %q", m)
	}
}

// A stopped run keeps its latest live sample across a restart, and the run list shows it.
func TestStoppedRunKeepsSample(t *testing.T) {
	dir := t.TempDir()
	a := newTestServer(t, dir, nil)
	var start StartResponse
	a.json("POST", "/api/runs", tinyRun(maxSteps), http.StatusCreated, &start)
	a.waitJob(func(st JobState) bool { return len(st.Samples) > 0 })
	a.json("POST", "/api/job/stop", nil, http.StatusOK, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a.s.Shutdown(ctx)
	b := newTestServer(t, dir, nil)
	var list RunList
	b.json("GET", "/api/runs", nil, http.StatusOK, &list)
	if len(list.Runs) != 1 || list.Runs[0].Status != StatusStopped || list.Runs[0].Sample == "" || len(list.Runs[0].Sample) > maxListSample+len("…") {
		t.Fatalf("after a restart: %+v", list.Runs)
	}
}

// A job's final state and its end are one step under its lock: no state snapshot, however it
// interleaves with the job's last save, shows a final state ("done") while the job is still
// active, which left the page treating a finished run as live.
func TestFinishedStateNeverActive(t *testing.T) {
	ts := newTestServer(t, "", nil)
	var start StartResponse
	ts.json("POST", "/api/runs", tinyRun(30), http.StatusCreated, &start)
	for {
		st := ts.s.jobState()
		if st.Active && st.State != StatusTraining && st.State != StatusPaused {
			t.Fatalf("state %q reported as active", st.State)
		}
		if !st.Active && st.Run != nil {
			if st.State != StatusDone {
				t.Fatalf("run ended %q, want %q", st.State, StatusDone)
			}
			return
		}
		// Look again at once, to catch a state that lasts a moment. Under js/wasm the
		// timers that the job waits on fire only when every goroutine is blocked, so there
		// the loop sleeps instead.
		if runtime.GOOS == "js" {
			time.Sleep(time.Millisecond)
		} else {
			runtime.Gosched()
		}
	}
}

// Every change of a job's state gets a larger Seq, over all of the server's jobs (a continued
// run is a new job of the same run), so the page can drop states that arrive late.
func TestJobStateSeq(t *testing.T) {
	ts := newTestServer(t, "", nil)
	var start StartResponse
	ts.json("POST", "/api/runs", tinyRun(maxSteps), http.StatusCreated, &start)
	id := start.Run.ID
	first := ts.waitJob(func(st JobState) bool { return st.Stats.Step >= 2 })
	var paused, resumed, stopped, continued JobState
	ts.json("POST", "/api/job/pause", nil, http.StatusOK, &paused)
	ts.json("POST", "/api/job/resume", nil, http.StatusOK, &resumed)
	ts.json("POST", "/api/job/stop", nil, http.StatusOK, &stopped)
	ended := ts.waitJob(func(st JobState) bool { return !st.Active })
	ts.json("POST", "/api/runs/"+id+"/continue", ContinueRequest{Steps: 5}, http.StatusOK, &continued)
	seqs := []uint64{first.Seq, paused.Seq, resumed.Seq, ended.Seq, continued.Seq}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			t.Fatalf("seq of start, pause, resume, end, continue: %v, want increasing", seqs)
		}
	}
	if stopped.Seq != ended.Seq || stopped.State != StatusStopped {
		t.Errorf("stop answered %s seq %d, the ended job has seq %d", stopped.State, stopped.Seq, ended.Seq)
	}
	ts.waitJob(func(st JobState) bool { return !st.Active })
}

// A run deleted while its continue request is on its way is not trained: the continue is a
// 404 and no job starts (both requests used to succeed, and the job trained a deleted run).
func TestContinueAfterDelete(t *testing.T) {
	ts := newTestServer(t, "", nil)
	var start StartResponse
	ts.json("POST", "/api/runs", tinyRun(3), http.StatusCreated, &start)
	ts.waitJob(ended)
	id := start.Run.ID
	testHookContinue = func() { ts.json("DELETE", "/api/runs/"+id, nil, http.StatusOK, nil) }
	defer func() { testHookContinue = func() {} }()
	status, b := ts.do("POST", "/api/runs/"+id+"/continue", "application/json", strings.NewReader(`{"steps":2}`))
	if status != http.StatusNotFound || !bytes.Contains(b, []byte("deleted")) {
		t.Errorf("continue of a run deleted meanwhile: %d %s", status, b)
	}
	var st JobState
	ts.json("GET", "/api/job", nil, http.StatusOK, &st)
	if st.Active {
		t.Errorf("a job trains the deleted run: %+v", st)
	}
	if _, err := os.Stat(ts.s.store.path(id)); !os.IsNotExist(err) {
		t.Errorf("the deleted run's folder: %v", err)
	}
}

// Size fields change the preset named (or the default one), as the command's flags do; an
// unknown corpus is refused by the plan as by the start.
func TestSettingsSizesAndCorpus(t *testing.T) {
	ts := newTestServer(t, "", nil)
	small, _ := gpt.PresetByName("small")
	for _, c := range []struct {
		body string
		want ModelConfig
	}{
		{`{"preset":"small"}`, ModelConfig{small.Config.Layers, small.Config.DModel, small.Config.Heads, small.Config.Ctx, small.Config.DMlp}},
		{`{"preset":"small","d_model":64}`, ModelConfig{small.Config.Layers, 64, 2, small.Config.Ctx, 256}},
		{`{"preset":"small","layers":1,"ctx":16}`, ModelConfig{1, small.Config.DModel, small.Config.Heads, 16, small.Config.DMlp}},
		{`{"layers":1}`, ModelConfig{1, small.Config.DModel, small.Config.Heads, small.Config.Ctx, small.Config.DMlp}},
		{`{"preset":"custom","layers":1,"d_model":48,"heads":2,"ctx":8}`, ModelConfig{1, 48, 2, 8, 192}},
	} {
		var plan Plan
		ts.json("POST", "/api/plan", c.body, http.StatusOK, &plan)
		if plan.Config != c.want {
			t.Errorf("%s: model %+v, want %+v", c.body, plan.Config, c.want)
		}
	}
	for _, body := range []string{`{"preset":"custom","layers":1}`, `{"corpus":"shakespeare"}`} {
		for _, path := range []string{"/api/plan", "/api/runs"} {
			status, b := ts.do("POST", path, "application/json", strings.NewReader(body))
			if status != http.StatusBadRequest {
				t.Errorf("%s %s: %d %s, want 400", path, body, status, b)
			}
		}
	}
	status, b := ts.do("POST", "/api/plan", "application/json", strings.NewReader(`{"corpus":"shakespeare"}`))
	if status != http.StatusBadRequest || !bytes.Contains(b, []byte(`got \"shakespeare\"`)) {
		t.Errorf("plan with an unknown corpus: %d %s", status, b)
	}
}

// A model whose weights are finite but too large for float32 arithmetic: inspect is a 422 and
// generation ends with the error line, instead of zero probabilities and NaN-driven text.
func TestNonFiniteOutput(t *testing.T) {
	ts := newTestServer(t, "", nil)
	run := ts.importModel(craftModel(t, 16, 1, func(int) float32 { return 3e38 }), "crafted")
	status, b := ts.do("POST", "/api/runs/"+run.ID+"/inspect", "application/json", strings.NewReader(`{"text":"abc"}`))
	if status != http.StatusUnprocessableEntity || !bytes.Contains(b, []byte("not finite")) {
		t.Errorf("inspect: %d %s", status, b)
	}
	status, b = ts.do("POST", "/api/runs/"+run.ID+"/generate", "application/json", strings.NewReader(`{"prompt":"a","tokens":5}`))
	if status != http.StatusOK || !bytes.Contains(b, []byte(`{"error":"the model's output is not finite`)) || bytes.Contains(b, []byte(`"text"`)) {
		t.Errorf("generate: %d %s", status, b)
	}
}

// Downloads: the full file is sent as stored, ranges included; a conversion waits for the one
// before it; a damaged checkpoint is reported without the server's paths.
func TestDownloads(t *testing.T) {
	ts := newTestServer(t, "", nil)
	run := ts.importModel(craftModel(t, 8, 2, plainWeights), "my model")
	path := "/api/runs/" + run.ID + "/download"
	get := func(ctx context.Context, query string, header map[string]string) (*http.Response, []byte, error) {
		req, err := http.NewRequestWithContext(ctx, "GET", ts.srv.URL+path+query, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-TinyGPT-Token", ts.s.Token())
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp, b, err
	}
	stored, err := os.ReadFile(ts.s.store.modelPath(run.ID))
	if err != nil {
		t.Fatal(err)
	}

	resp, b, err := get(context.Background(), "", nil)
	if err != nil || resp.StatusCode != http.StatusOK || !bytes.Equal(b, stored) {
		t.Fatalf("full download: %v, %d bytes, equal to the stored file %v", err, len(b), bytes.Equal(b, stored))
	}
	if cd := resp.Header.Get("Content-Disposition"); !strings.Contains(cd, `filename=my-model-step0.tinygpt`) {
		t.Errorf("full download named %q", cd)
	}
	if cl := resp.Header.Get("Content-Length"); cl != strconv.Itoa(len(stored)) {
		t.Errorf("full download's Content-Length %q, want %d", cl, len(stored))
	}
	etag := resp.Header.Get("ETag")
	if !strings.HasPrefix(etag, `"0-`+strconv.Itoa(len(stored))+"-") || resp.Header.Get("Cache-Control") != "no-store" || resp.Header.Get("Last-Modified") != "" {
		t.Errorf("full download's ETag %q, Cache-Control %q, Last-Modified %q", etag, resp.Header.Get("Cache-Control"), resp.Header.Get("Last-Modified"))
	}
	resp, b, err = get(context.Background(), "?format=full", map[string]string{"Range": "bytes=4-11", "If-Range": etag})
	if err != nil || resp.StatusCode != http.StatusPartialContent || !bytes.Equal(b, stored[4:12]) {
		t.Errorf("a range of the full download: %v, status %d, %q, want %q", err, resp.StatusCode, b, stored[4:12])
	}
	// A resumed download of another checkpoint gets the whole file, not a piece of this one.
	resp, b, err = get(context.Background(), "", map[string]string{"Range": "bytes=4-11", "If-Range": `"7-1-1"`})
	if err != nil || resp.StatusCode != http.StatusOK || !bytes.Equal(b, stored) {
		t.Errorf("a range for another checkpoint: %v, status %d, %d bytes", err, resp.StatusCode, len(b))
	}

	// A conversion waits for the one in progress (held here): its client's own deadline ends it.
	ts.s.conversions <- struct{}{}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, _, err = get(ctx, "?format=int4", nil)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a conversion while another one runs: %v, want it to wait", err)
	}
	<-ts.s.conversions
	for _, kind := range []string{"fp16", "int4"} {
		resp, b, err := get(context.Background(), "?format="+kind, nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s download: %v, %v %s", kind, err, resp.StatusCode, b)
		}
		f, err := format.Decode(b)
		if err != nil || f.Header.WeightDtype != kind {
			t.Fatalf("%s download: %v, dtype %q", kind, err, f.Header.WeightDtype)
		}
		if cd := resp.Header.Get("Content-Disposition"); !strings.Contains(cd, "filename=my-model-step0."+kind+".tinygpt") {
			t.Errorf("%s download named %q", kind, cd)
		}
	}

	// A checkpoint cut short on disk: each form says what is wrong, not where the server keeps it.
	if err := os.WriteFile(ts.s.store.modelPath(run.ID), stored[:len(stored)-4], 0o600); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"full", "fp16"} {
		resp, b, err := get(context.Background(), "?format="+kind, nil)
		if err != nil || resp.StatusCode != http.StatusInternalServerError || !bytes.Contains(b, []byte("state has")) || bytes.Contains(b, []byte(ts.dir)) {
			t.Errorf("%s download of a damaged checkpoint: %v, %d %s", kind, err, resp.StatusCode, b)
		}
	}
}

// An imported file's header is held to what training writes: unknown schedules and backends
// are dropped, names cut and cleaned of invisible format characters, numbers kept in range.
func TestImportCleansHeader(t *testing.T) {
	ts := newTestServer(t, "", nil)
	c := format.Config{Ctx: 4, Layers: 1, Heads: 1, DModel: 2, DMlp: 4, BatchSize: -3, MaxSteps: -10, LearningRate: 1e-3, Seed: 1,
		Backend: strings.Repeat("B", 1<<16)}
	huge := 1e300
	f := &format.File{Header: format.Header{Version: 2, Config: c, WeightDtype: "fp32",
		LossHistory: []format.LossPoint{{Step: 1, Train: &huge}}}, Weights: make([]float32, format.ParamCount(c))}
	train, _ := json.Marshal(map[string]any{
		"schedule": strings.Repeat("S", 1<<16), "warmup": -5, "dropout": 7.5, "trainSeconds": -1,
		"preset": "\u202egpj." + strings.Repeat("p", 200), "corpusSource": "notes\u200b.txt\u2066", "corpusBytes": -9,
	})
	f.Header.Train = train
	raw, err := format.Encode(f)
	if err != nil {
		t.Fatal(err)
	}
	run := ts.importModel(raw, "evil\u202e\u200bname")
	if run.Name != "evilname" || run.Schedule != "constant" || run.Backend != "" || run.Warmup != 0 || run.Dropout != 0 ||
		run.Elapsed != 0 || run.Batch != 0 || run.Steps != 0 {
		t.Errorf("imported run: name %q, schedule %.20q, backend %.20q, warmup %d, dropout %g, elapsed %g, batch %d, steps %d",
			run.Name, run.Schedule, run.Backend, run.Warmup, run.Dropout, run.Elapsed, run.Batch, run.Steps)
	}
	if utf8.RuneCountInString(run.Preset) != 80 || strings.ContainsRune(run.Preset, '\u202e') {
		t.Errorf("imported preset %q", run.Preset)
	}
	if run.Corpus.Source != "notes.txt" || run.Corpus.Bytes != 0 {
		t.Errorf("imported corpus %+v", run.Corpus)
	}
	// The joiners emoji and several scripts are written with stay.
	if got := cleanName("\U0001F469\u200d\U0001F4BB \u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"); got != "\U0001F469\u200d\U0001F4BB \u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645" {
		t.Errorf("cleanName took the joiners out: %q", got)
	}
}

// A download ticket stands in for the token on its own run's download link only, and only
// until it expires.
func TestDownloadTicket(t *testing.T) {
	ts := newTestServer(t, "", nil)
	a := ts.importModel(craftModel(t, 8, 2, plainWeights), "a")
	b := ts.importModel(craftModel(t, 8, 2, plainWeights), "b")
	var tk TicketResponse
	ts.json("POST", "/api/runs/"+a.ID+"/ticket", nil, http.StatusOK, &tk)
	if len(tk.Ticket) != 32 || tk.ExpiresIn != 600 {
		t.Fatalf("ticket %+v", tk)
	}
	get := func(path string) int {
		resp, err := http.Get(ts.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		path string
		want int
	}{
		{"/api/runs/" + a.ID + "/download?format=int4&ticket=" + tk.Ticket, 200},
		{"/api/runs/" + a.ID + "/download?ticket=" + tk.Ticket, 200}, // again: a resumed download
		{"/api/runs/" + b.ID + "/download?ticket=" + tk.Ticket, 401}, // another run's
		{"/api/runs?ticket=" + tk.Ticket, 401},                       // any other route
		{"/api/runs/" + a.ID + "/download?ticket=" + strings.Repeat("0", 32), 401},
		{"/api/runs/" + a.ID + "/download?ticket=", 401},
	} {
		if got := get(c.path); got != c.want {
			t.Errorf("GET %s: %d, want %d", c.path, got, c.want)
		}
	}
	// Expired, and forgotten when the next one is issued.
	ts.s.tickets.mu.Lock()
	e := ts.s.tickets.m[tk.Ticket]
	e.expires = time.Now().Add(-time.Second)
	ts.s.tickets.m[tk.Ticket] = e
	ts.s.tickets.mu.Unlock()
	if got := get("/api/runs/" + a.ID + "/download?ticket=" + tk.Ticket); got != 401 {
		t.Errorf("an expired ticket: %d, want 401", got)
	}
	ts.json("POST", "/api/runs/"+a.ID+"/ticket", nil, http.StatusOK, nil)
	if _, ok := ts.s.tickets.m[tk.Ticket]; ok {
		t.Errorf("an expired ticket was kept")
	}
	ts.json("POST", "/api/runs/0123456789abcdef/ticket", nil, http.StatusNotFound, nil)
}

// fullGPU is a backend that fails as a GPU without the memory for a run does: the run cannot be
// set up on it, and it says why.
type fullGPU struct{ backend.Backend }

func (fullGPU) Err() error { return errors.New("out of GPU memory") }
func (fullGPU) Close()     {}

// Auto takes the next backend when the first cannot set the run up (a GPU short of memory for
// it); a run that names the failing backend gets its error.
func TestAutoPassesOverAFullGPU(t *testing.T) {
	ts := newTestServer(t, "", func(c *Config) {
		c.Backends = func() []Backend {
			return []Backend{{Name: "gpu", Available: true}, {Name: "cpu", Available: true}}
		}
		c.Open = func(name string, _ gpt.Config, _ int) (backend.Backend, error) {
			if name == "gpu" {
				return fullGPU{cpu.New()}, nil
			}
			return cpu.New(), nil
		}
	})
	run := tinyRun(2)
	run["backend"] = "auto"
	var start StartResponse
	ts.json("POST", "/api/runs", run, http.StatusCreated, &start)
	if st := ts.waitJob(ended); st.State != StatusDone || st.Run.Backend != "cpu" {
		t.Errorf("auto past a full GPU: state %s on %q, error %q", st.State, st.Run.Backend, st.Run.Error)
	}
	run["backend"] = "gpu"
	status, b := ts.do("POST", "/api/runs", "application/json", strings.NewReader(mustJSON(t, run)))
	if status != http.StatusBadRequest || !strings.Contains(string(b), "out of GPU memory") {
		t.Errorf("a run on the full GPU: %d %s", status, b)
	}
}

// A plan and a start warn when the data directory's disk has no room for a checkpoint.
func TestDiskFullWarned(t *testing.T) {
	defer func(f func(string) (int64, bool)) { diskFree = f }(diskFree)
	diskFree = func(string) (int64, bool) { return 100 << 10, true }
	ts := newTestServer(t, "", nil)
	var plan Plan
	ts.json("POST", "/api/plan", map[string]any{"preset": "tiny"}, http.StatusOK, &plan)
	if len(plan.Warnings) != 1 || !strings.Contains(plan.Warnings[0], "has 100 KB free, less than a checkpoint of this model's 1.6 MB") {
		t.Errorf("plan's warnings: %q", plan.Warnings)
	}
	var start StartResponse
	ts.json("POST", "/api/runs", tinyRun(1), http.StatusCreated, &start)
	if len(start.Warnings) == 0 || !strings.Contains(start.Warnings[len(start.Warnings)-1], "100 KB free") {
		t.Errorf("start's warnings: %q", start.Warnings)
	}
	ts.waitJob(ended)
}

// A plan on a backend with memory of its own (a hardware GPU) checks the host's memory only for
// the host's share of the run, as training does; on the CPU, for all of it.
func TestPlanOwnMemory(t *testing.T) {
	ts := newTestServer(t, "", func(c *Config) {
		c.Backends = func() []Backend {
			return []Backend{{Name: "gpu", Available: true, OwnMemory: true}, {Name: "cpu", Available: true}}
		}
	})
	settings := map[string]any{"preset": "custom", "layers": 8, "d_model": 512, "ctx": 1024, "batch": 4096}
	for _, c := range []struct {
		backend string
		warned  bool
	}{{"gpu", false}, {"cpu", true}} {
		settings["backend"] = c.backend
		var plan Plan
		ts.json("POST", "/api/plan", settings, http.StatusOK, &plan)
		warned := strings.Contains(strings.Join(plan.Warnings, " "), "more than this machine's")
		if warned != c.warned {
			t.Errorf("%s: warnings %q, want the host's memory warned of: %v", c.backend, plan.Warnings, c.warned)
		}
	}
}

// While the server shuts down, a start or a continue is told so (503), even while the job it
// is stopping still trains or saves, rather than that a run is training (409).
func TestStartDuringShutdown(t *testing.T) {
	ts := newTestServer(t, "", nil)
	var first StartResponse
	ts.json("POST", "/api/runs", tinyRun(2), http.StatusCreated, &first)
	ts.waitJob(ended)
	var start StartResponse
	ts.json("POST", "/api/runs", tinyRun(maxSteps), http.StatusCreated, &start)
	ts.s.mu.Lock()
	close(ts.s.closing) // as Shutdown does first
	ts.s.mu.Unlock()
	ts.json("POST", "/api/runs", tinyRun(2), http.StatusServiceUnavailable, nil)
	ts.json("POST", "/api/runs/"+first.Run.ID+"/continue", ContinueRequest{Steps: 2}, http.StatusServiceUnavailable, nil)
}

// A plan is made on the backend a start would use, with the same refusals (Config.Check): a
// model the GPU cannot run is refused on it, and auto plans it on the next backend.
func TestPlanChecksBackend(t *testing.T) {
	ts := newTestServer(t, "", func(c *Config) {
		c.Backends = func() []Backend {
			return []Backend{{Name: "gpu", Available: true, OwnMemory: true}, {Name: "cpu", Available: true}}
		}
		c.Check = func(name string, m gpt.Config, _ int) error {
			if name == "gpu" && m.DModel/m.Heads > 256 {
				return errors.New("webgpu: the model's attention heads are too wide")
			}
			return nil
		}
	})
	settings := map[string]any{"preset": "custom", "layers": 1, "d_model": 512, "heads": 1, "ctx": 16, "backend": "gpu"}
	status, b := ts.do("POST", "/api/plan", "application/json", strings.NewReader(mustJSON(t, settings)))
	if status != http.StatusBadRequest || !strings.Contains(string(b), "heads are too wide") {
		t.Errorf("plan on the GPU: %d %s", status, b)
	}
	settings["backend"] = "auto"
	var plan Plan
	ts.json("POST", "/api/plan", settings, http.StatusOK, &plan)
	if plan.Backend != "cpu" {
		t.Errorf("auto's plan is on %q, want cpu", plan.Backend)
	}
	settings["heads"] = 4
	ts.json("POST", "/api/plan", settings, http.StatusOK, &plan)
	if plan.Backend != "gpu" {
		t.Errorf("auto's plan for narrow heads is on %q, want gpu", plan.Backend)
	}
}
