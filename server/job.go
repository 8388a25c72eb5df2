package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"tinygpt/backend"
	"tinygpt/format"
	"tinygpt/train"
)

// job is a training run in progress. Its goroutine owns the Trainer; other goroutines talk to
// it through channels (pause, resume, weight snapshots) and read its progress under mu.
type job struct {
	id      string
	backend string
	cancel  context.CancelFunc
	ctrl    chan ctrlMsg
	snaps   chan chan snapshot
	done    chan struct{}
	// wants counts the requests on ctrl and snaps not yet answered: while there are any, the
	// trainer records no step ahead, so that runJob's between gets to them after the step in
	// flight (train.RunOptions.Hold).
	wants atomic.Int32

	mu          sync.Mutex
	run         *Run // the live record; History grows as steps complete
	state       string
	seq         uint64 // from Server.seq at every change of state (see JobState.Seq)
	stats       Stats
	samples     []Sample
	pending     []format.LossPoint // points not yet broadcast
	lastPublish time.Time
}

// Stats is the live progress of a training job.
type Stats struct {
	Step       int      `json:"step"`
	Steps      int      `json:"steps"`
	Loss       *float64 `json:"loss,omitempty"`
	Val        *float64 `json:"val,omitempty"`
	BestVal    *float64 `json:"best_val,omitempty"`
	BestStep   int      `json:"best_step,omitempty"`
	LR         float64  `json:"lr"`
	GradNorm   float64  `json:"grad_norm"`
	MsPerStep  float64  `json:"ms_per_step"`
	TokensPerS float64  `json:"tokens_per_s"`
	Elapsed    float64  `json:"elapsed_s"`
	ETA        float64  `json:"eta_s"`
}

// clean returns the stats with every non-finite number (a speed measured over 0 s, a
// diverged loss) replaced by 0 or left out, since JSON has no NaN or infinity.
func (st Stats) clean() Stats {
	for _, p := range []**float64{&st.Loss, &st.Val, &st.BestVal} {
		if *p != nil {
			*p = finite(**p)
		}
	}
	for _, p := range []*float64{&st.LR, &st.GradNorm, &st.MsPerStep, &st.TokensPerS, &st.Elapsed, &st.ETA} {
		if math.IsNaN(*p) || math.IsInf(*p, 0) {
			*p = 0
		}
	}
	return st
}

// cleanPoint returns p with a NaN or infinite loss left out (JSON has no NaN): a diverging
// run's last points would otherwise make its record and events unencodable.
func cleanPoint(p format.LossPoint) format.LossPoint {
	if p.Train != nil {
		p.Train = finite(*p.Train)
	}
	if p.Val != nil {
		p.Val = finite(*p.Val)
	}
	return p
}

// cleanHistory appends the cleaned points of h to dst.
func cleanHistory(dst, h []format.LossPoint) []format.LossPoint {
	for _, p := range h {
		dst = append(dst, cleanPoint(p))
	}
	return dst
}

// Sample is a live sample taken during training.
type Sample struct {
	Step int    `json:"step"`
	Text string `json:"text"`
}

// JobState is what GET /api/job returns and the "state" event carries.
type JobState struct {
	Active bool   `json:"active"` // a run is training or paused
	State  string `json:"state,omitempty"`
	// Seq grows with every change of a job's state (start, pause, resume, end), over all the
	// server's jobs. A client gets states over several connections (the event stream,
	// responses to its requests), which may arrive out of order: of two states of one run it
	// keeps the one with the larger Seq, so a response computed before the run ended cannot
	// bring it back to life.
	Seq     uint64   `json:"seq"`
	Run     *Run     `json:"run,omitempty"`
	Stats   Stats    `json:"stats"`
	Samples []Sample `json:"samples"`
}

// ctrlMsg asks the training goroutine to pause, resume or save a checkpoint.
type ctrlMsg struct {
	action string // "pause", "resume" or "save"
	reply  chan error
}

// snapshot is a copy of the weights at a step.
type snapshot struct {
	step    int
	weights []float32
}

// active reports whether the job is still training or paused. The job's state turns final
// (done, stopped, failed) at the moment done is closed, under mu, so a state snapshot never
// shows a final state for an active job.
func (j *job) active() bool {
	select {
	case <-j.done:
		return false
	default:
		return true
	}
}

// stop asks the job to stop; it saves a checkpoint and then closes done.
func (j *job) stop() { j.cancel() }

// maxStatePoints bounds the loss history a job's state carries; the progress events carry
// every new point, which the page appends.
const maxStatePoints = 2000

// snapshotState returns a copy of the job's state, its loss history thinned to about
// maxStatePoints.
func (j *job) snapshotState() JobState {
	j.mu.Lock()
	defer j.mu.Unlock()
	r := *j.run
	r.History = append([]format.LossPoint{}, downsample(j.run.History, maxStatePoints)...)
	return JobState{Active: j.active(), State: j.state, Seq: j.seq, Run: &r, Stats: j.stats.clean(),
		Samples: append([]Sample{}, j.samples...)}
}

// weights asks the training goroutine for a copy of the current weights; ok is false if the job
// has ended.
func (j *job) weights(ctx context.Context) (snap snapshot, ok bool, err error) {
	reply := make(chan snapshot, 1)
	j.wants.Add(1) // (see runJob's Hold)
	defer j.wants.Add(-1)
	select {
	case j.snaps <- reply:
	case <-j.done:
		return snapshot{}, false, nil
	case <-ctx.Done():
		return snapshot{}, false, ctx.Err()
	}
	select {
	case s := <-reply:
		return s, true, nil
	case <-ctx.Done():
		return snapshot{}, false, ctx.Err()
	}
}

// control pauses, resumes or checkpoints the job and waits until the training goroutine has
// done so.
func (j *job) control(ctx context.Context, action string) error {
	m := ctrlMsg{action: action, reply: make(chan error, 1)}
	j.wants.Add(1) // (see runJob's Hold)
	defer j.wants.Add(-1)
	select {
	case j.ctrl <- m:
	case <-j.done:
		return errNotTraining
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-m.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

var errNotTraining = errors.New("no run is training")

// startJob runs t in a new goroutine as the server's job. The caller holds s.mu and has checked
// that no job is active.
func (s *Server) startJob(t *train.Trainer, run *Run, backendName string, sampleEvery int, resumed bool) *job {
	ctx, cancel := context.WithCancel(context.Background())
	j := &job{id: run.ID, backend: backendName, cancel: cancel, ctrl: make(chan ctrlMsg),
		snaps: make(chan chan snapshot), done: make(chan struct{}), run: run, state: StatusTraining, seq: s.seq.Add(1)}
	tr, val := t.LastLosses()
	j.stats = Stats{Step: t.Step(), Steps: t.Opts.Steps, Loss: finite(tr), Val: finite(val), Elapsed: t.Elapsed.Seconds()}
	if t.Best != nil {
		j.stats.BestVal, j.stats.BestStep = finite(t.Best.Loss), t.Best.Step
	}
	run.Status, run.Error, run.Step, run.Steps = StatusTraining, "", t.Step(), t.Opts.Steps
	run.History = cleanHistory(nil, t.History)
	if err := s.store.save(run); err != nil {
		s.cfg.Logf("tinygpt serve: %v", err)
	}
	s.job = j
	// The "state" event of the start goes out before the job's goroutine can publish its
	// first progress or evaluation, so that subscribers see the events in order.
	s.hub.publish("state", j.snapshotState())
	go s.runJob(ctx, j, t, sampleEvery, resumed)
	return j
}

func (s *Server) runJob(ctx context.Context, j *job, t *train.Trainer, sampleEvery int, resumed bool) {
	defer j.cancel()
	out := s.store.modelPath(j.id)
	paused := false
	// between runs on the training goroutine after a step, when no later step is recorded
	// (train.RunOptions.Between): it hands out weight snapshots, and while paused it blocks
	// here, so the training loop really stops.
	between := func() {
		for {
			if !paused {
				select {
				case r := <-j.snaps:
					r <- snapshot{step: t.Step(), weights: t.Model.Weights()}
				case m := <-j.ctrl:
					paused = s.applyControl(j, t, m, paused)
				default:
					return
				}
				continue
			}
			select {
			case r := <-j.snaps:
				r <- snapshot{step: t.Step(), weights: t.Model.Weights()}
			case m := <-j.ctrl:
				paused = s.applyControl(j, t, m, paused)
			case <-ctx.Done():
				return
			}
		}
	}
	onEvent := func(e train.Event) {
		switch e.Kind {
		case "step":
			j.mu.Lock()
			j.stats.Step, j.stats.Steps, j.stats.Loss = e.Step, e.Steps, finite(e.Loss)
			j.stats.LR, j.stats.GradNorm, j.stats.MsPerStep, j.stats.TokensPerS = e.LR, e.GradNorm, e.MsPerStep, e.TokensPerS
			j.stats.Elapsed, j.stats.ETA = e.Elapsed, e.ETA
			p := cleanPoint(t.History[len(t.History)-1])
			j.run.History = append(j.run.History, p)
			j.run.Step = e.Step
			j.pending = append(j.pending, p)
			due := time.Since(j.lastPublish) >= 100*time.Millisecond || e.Step == e.Steps
			j.mu.Unlock()
			if due {
				s.publishProgress(j)
			}
		case "eval":
			s.publishProgress(j)
			j.mu.Lock()
			j.stats.Val, j.stats.BestVal = finite(e.Val), finite(e.BestVal)
			if t.Best != nil {
				j.stats.BestStep = t.Best.Step
			}
			if n := len(j.run.History); n > 0 && j.run.History[n-1].Step == e.Step {
				j.run.History[n-1] = cleanPoint(t.History[len(t.History)-1])
			} else {
				j.run.History = append(j.run.History, cleanPoint(t.History[len(t.History)-1]))
			}
			stats := j.stats.clean()
			j.mu.Unlock()
			s.hub.publish("eval", map[string]any{"id": j.id, "step": e.Step, "val": finite(e.Val), "stats": stats})
		case "sample":
			j.mu.Lock()
			j.samples = append(j.samples, Sample{Step: e.Step, Text: e.Text})
			if len(j.samples) > 50 {
				j.samples = j.samples[len(j.samples)-50:]
			}
			j.mu.Unlock()
			s.hub.publish("sample", map[string]any{"id": j.id, "step": e.Step, "text": e.Text})
		case "checkpoint":
			s.saveRunFromTrainer(j, t, StatusTraining)
			s.hub.publish("checkpoint", map[string]any{"id": j.id, "step": e.Step})
		case "warning":
			s.cfg.Logf("tinygpt serve: run %s: %s", j.id, e.Text)
			s.hub.publish("warning", map[string]any{"id": j.id, "step": e.Step, "text": e.Text})
		}
	}
	var err error
	func() {
		defer func() {
			if v := recover(); v != nil {
				err = fmt.Errorf("internal error while training: %v", v)
			}
		}()
		err = t.Run(ctx, train.RunOptions{Out: out, Perm: filePerm, Backend: j.backend, SampleEvery: sampleEvery, OnEvent: onEvent, Resumed: resumed,
			Between: between, Hold: func() bool { return j.wants.Load() > 0 }})
	}()
	s.publishProgress(j)
	status := StatusDone
	msg := ""
	switch {
	case err == nil:
	case errors.Is(err, context.Canceled):
		status = StatusStopped
	default:
		// The backend's own error (a lost GPU device, out of GPU memory) explains a failure
		// better than its symptom, such as a NaN loss.
		var diverged *train.DivergedError
		if berr := backend.Err(t.Model.Backend()); berr != nil {
			err = fmt.Errorf("%w (start the run again on the cpu backend)", berr)
		} else if errors.As(err, &diverged) {
			err = divergedError(diverged)
		}
		status, msg = StatusFailed, err.Error()
		s.cfg.Logf("tinygpt serve: run %s: %v", j.id, err)
	}
	if t.Step() == t.Opts.Steps && status == StatusStopped {
		status = StatusDone
	}
	j.mu.Lock()
	j.run.Error = msg
	j.mu.Unlock()
	s.saveRunFromTrainer(j, t, status)
	s.models.forget(j.id) // the next generation loads the final checkpoint
	// Only this goroutine uses the trainer's backend: release its device now (a GPU's buffers
	// would otherwise wait for the garbage collector, and the binding warns about each).
	backend.Close(t.Model.Backend())
	j.mu.Lock()
	j.state = status
	j.seq = s.seq.Add(1)
	close(j.done)
	j.mu.Unlock()
	s.hub.publish("state", j.snapshotState())
}

// applyControl pauses (checkpointing, so a paused run is safe on disk), resumes, or saves a
// checkpoint, and returns whether the job is now paused.
func (s *Server) applyControl(j *job, t *train.Trainer, m ctrlMsg, paused bool) bool {
	pause := m.action == "pause"
	if m.action != "save" && pause == paused {
		m.reply <- nil
		return paused
	}
	state := StatusTraining
	if paused {
		state = StatusPaused
	}
	if m.action != "resume" {
		f, err := t.File(j.backend)
		if err == nil {
			err = format.WriteFile(s.store.modelPath(j.id), f, filePerm)
		}
		if err != nil {
			m.reply <- fmt.Errorf("saving a checkpoint: %w", err)
			return paused
		}
		s.hub.publish("checkpoint", map[string]any{"id": j.id, "step": t.Step()})
	}
	if m.action != "save" {
		paused = pause
		state = StatusTraining
		if pause {
			state = StatusPaused
		}
	}
	j.mu.Lock()
	j.state = state
	j.seq = s.seq.Add(1)
	j.mu.Unlock()
	s.saveRunFromTrainer(j, t, state)
	s.hub.publish("state", j.snapshotState())
	m.reply <- nil
	return paused
}

// saveRunFromTrainer records the trainer's progress in the run's record.
func (s *Server) saveRunFromTrainer(j *job, t *train.Trainer, status string) {
	j.mu.Lock()
	r := j.run
	r.Status = status
	r.Step, r.Steps = t.Step(), t.Opts.Steps
	tr, val := t.LastLosses()
	r.Train, r.Val = finite(tr), finite(val)
	if t.Best != nil {
		b := *t.Best
		r.Best = &b
	}
	if t.Sample != "" {
		r.Sample = t.Sample
	} else if n := len(j.samples); n > 0 {
		r.Sample = j.samples[n-1].Text // a stopped run keeps its latest live sample
	}
	r.Elapsed = t.Elapsed.Seconds()
	r.History = cleanHistory(r.History[:0], t.History)
	j.mu.Unlock()
	s.saveRun(j)
}

func (s *Server) saveRun(j *job) {
	j.mu.Lock()
	r := *j.run
	r.History = append([]format.LossPoint(nil), j.run.History...)
	j.mu.Unlock()
	// Training goes on from the checkpoint, if the run has written one.
	size, err := statSize(s.store.modelPath(r.ID))
	r.FileBytes, r.Resumable = size, err == nil
	j.mu.Lock()
	j.run.FileBytes, j.run.Resumable = r.FileBytes, r.Resumable
	j.mu.Unlock()
	if err := s.store.save(&r); err != nil {
		s.cfg.Logf("tinygpt serve: %v", err)
		return
	}
	j.mu.Lock()
	j.run.Updated = r.Updated
	j.mu.Unlock()
}

// publishProgress broadcasts the latest stats and the loss points not yet sent.
func (s *Server) publishProgress(j *job) {
	j.mu.Lock()
	if len(j.pending) == 0 {
		j.mu.Unlock()
		return
	}
	ev := map[string]any{"id": j.id, "points": j.pending, "stats": j.stats.clean()}
	j.pending = nil
	j.lastPublish = time.Now()
	j.mu.Unlock()
	s.hub.publish("progress", ev)
}

func (s *Server) currentJob() *job {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.job
}

// activeJob returns the job if one is training or paused.
func (s *Server) activeJob() *job {
	j := s.currentJob()
	if j != nil && j.active() {
		return j
	}
	return nil
}

func (s *Server) handleJob(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.jobState())
}

func (s *Server) jobState() JobState {
	j := s.currentJob()
	if j == nil {
		return JobState{Samples: []Sample{}}
	}
	return j.snapshotState()
}

func (s *Server) handleJobAction(w http.ResponseWriter, r *http.Request) {
	action := r.PathValue("action")
	if action != "pause" && action != "resume" && action != "stop" { // whether or not a run trains
		httpError(w, http.StatusNotFound, "unknown job action %q (have pause, resume, stop)", action)
		return
	}
	j := s.activeJob()
	if j == nil {
		httpError(w, http.StatusConflict, "no run is training")
		return
	}
	var err error
	switch action {
	case "pause", "resume":
		err = j.control(r.Context(), action)
	case "stop":
		j.stop()
		select {
		case <-j.done:
		case <-r.Context().Done():
			err = r.Context().Err()
		}
	default:
		httpError(w, http.StatusNotFound, "unknown job action %q (have pause, resume, stop)", action)
		return
	}
	switch {
	case errors.Is(err, errNotTraining):
		httpError(w, http.StatusConflict, "the run has already ended")
		return
	case err != nil:
		httpError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, j.snapshotState())
}

// hub fans server-sent events out to the connected streams.
type hub struct {
	logf func(format string, args ...any)
	mu   sync.Mutex
	subs map[chan []byte]struct{}
}

func newHub(logf func(format string, args ...any)) *hub {
	return &hub{logf: logf, subs: map[chan []byte]struct{}{}}
}

func (h *hub) subscribe() chan []byte {
	c := make(chan []byte, 256)
	h.mu.Lock()
	h.subs[c] = struct{}{}
	h.mu.Unlock()
	return c
}

func (h *hub) unsubscribe(c chan []byte) {
	h.mu.Lock()
	if _, ok := h.subs[c]; ok {
		delete(h.subs, c)
		close(c)
	}
	h.mu.Unlock()
}

// publish sends an event to every stream; a stream too slow to keep up is closed (its page
// reconnects and gets the whole state again).
func (h *hub) publish(kind string, v any) {
	msg, err := sseMessage(kind, v)
	if err != nil {
		h.logf("tinygpt serve: dropping a %s event: %v", kind, err)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.subs {
		select {
		case c <- msg:
		default:
			delete(h.subs, c)
			close(c)
		}
	}
}

func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		httpError(w, http.StatusInternalServerError, "streaming is not supported by this connection")
		return
	}
	c := s.hub.subscribe()
	defer s.hub.unsubscribe(c)
	sseHeaders(w)
	first, _ := sseMessage("state", s.jobState())
	w.Write(first)
	fl.Flush()
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case msg, ok := <-c:
			if !ok {
				return
			}
			if _, err := w.Write(msg); err != nil {
				return
			}
			fl.Flush()
		case <-tick.C:
			if _, err := w.Write([]byte(": keep-alive\n\n")); err != nil {
				return
			}
			fl.Flush()
		case <-r.Context().Done():
			return
		case <-s.closing:
			return
		}
	}
}

// divergedError says what train's DivergedError says in the page's terms: its learning rate and
// warmup settings instead of the command line's flags, and no path of the server's.
func divergedError(e *train.DivergedError) error {
	kept := "No checkpoint was written before."
	if e.LastSaved >= 0 {
		kept = fmt.Sprintf("The run keeps its last checkpoint, step %d, whose weights are finite: it can still generate.", e.LastSaved)
	}
	return fmt.Errorf("training diverged: %w. %s Start a new run with a lower learning rate (this one's was %g) or a longer warmup", e.Err, kept, e.LR)
}
