//go:build unix

package main

import (
	"bytes"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"tinygpt/format"
)

// hangupWriter collects what train prints and sends the process sig once the first progress
// line comes, when training has begun (and its signals are caught).
type hangupWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	sig  syscall.Signal
	sent bool
}

func (w *hangupWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.sent && bytes.Contains(p, []byte("step ")) {
		w.sent = true
		syscall.Kill(os.Getpid(), w.sig)
	}
	return w.buf.Write(p)
}

// A closed terminal (SIGHUP) or a reader of the output gone (SIGPIPE) stops training as Ctrl-C
// does: after the step under way, with a checkpoint that resumes, and an exit status that says
// the run was stopped (128 + the signal), as do Ctrl-C and SIGTERM.
func TestSignalsStopTrainingWithACheckpoint(t *testing.T) {
	dir := t.TempDir()
	corpus := writeCorpus(t, dir)
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGPIPE, syscall.SIGTERM, syscall.SIGINT} {
		model := filepath.Join(dir, sig.String()+".tinygpt")
		w := &hangupWriter{sig: sig}
		var errb bytes.Buffer
		code := run([]string{"train", "--data", corpus, "--steps", "100000", "--eval-every", "0", "--out", model,
			"--layers", "1", "--d-model", "32", "--ctx", "16", "--batch", "4"}, &env{stdin: strings.NewReader(""), stdout: w, stderr: &errb})
		out := w.buf.String()
		if code != 128+int(sig) || !strings.Contains(out, "stopped at step") {
			t.Errorf("%v: exit %d, want %d:\n%s%s", sig, code, 128+int(sig), out, errb.String())
			continue
		}
		f, err := format.ReadFile(model)
		if err != nil || f.Step < 1 || f.M == nil {
			t.Errorf("%v: the checkpoint: %v", sig, err)
		}
	}
}

// Under nohup, which makes the process ignore SIGHUP, a closed terminal does not stop training.
func TestIgnoredHangupDoesNotStopTraining(t *testing.T) {
	signal.Ignore(syscall.SIGHUP)
	defer signal.Reset(syscall.SIGHUP)
	dir := t.TempDir()
	corpus := writeCorpus(t, dir)
	w := &hangupWriter{sig: syscall.SIGHUP}
	var errb bytes.Buffer
	code := run([]string{"train", "--data", corpus, "--steps", "30", "--eval-every", "0", "--out", filepath.Join(dir, "m.tinygpt"),
		"--layers", "1", "--d-model", "32", "--ctx", "16", "--batch", "4"}, &env{stdin: strings.NewReader(""), stdout: w, stderr: &errb})
	if out := w.buf.String(); code != 0 || !w.sent || !strings.Contains(out, "done: 30 steps") {
		t.Errorf("exit %d (hangup sent: %v):\n%s%s", code, w.sent, out, errb.String())
	}
}
