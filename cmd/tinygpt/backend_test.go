package main

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"tinygpt/backend"
	"tinygpt/backend/cpu"
	"tinygpt/backend/webgpu"
	"tinygpt/gpt"
)

// --backend auto always runs, and says which backend it chose and why.
func TestBackendAuto(t *testing.T) {
	dir := t.TempDir()
	corpus := writeCorpus(t, dir)
	model := filepath.Join(dir, "m.tinygpt")
	code, out, errOut := tinygpt(t, "", "train", "--data", corpus, "--steps", "2", "--eval-every", "0", "--out", model,
		"--layers", "1", "--d-model", "32", "--ctx", "16", "--batch", "2", "--backend", "auto")
	if code != 0 {
		t.Fatalf("train --backend auto: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "backend auto: ") || !strings.Contains(errOut, "(") {
		t.Errorf("auto did not say what it chose and why; stderr:\n%s", errOut)
	}
}

// --backend webgpu trains and samples on the GPU, and the model it saves samples on the CPU;
// without an adapter it fails with a clear message.
func TestBackendWebGPU(t *testing.T) {
	dir := t.TempDir()
	corpus := writeCorpus(t, dir)
	model := filepath.Join(dir, "m.tinygpt")
	args := []string{"train", "--data", corpus, "--steps", "3", "--eval-every", "0", "--out", model,
		"--layers", "1", "--d-model", "32", "--ctx", "16", "--batch", "2", "--backend", "webgpu"}
	be, err := webgpu.New()
	if err != nil {
		// CI installs a software adapter, except where there is none to have: under js/wasm
		// (Node.js) the binding finds no adapter, and the message below is what to check.
		if os.Getenv("CI") == "true" && runtime.GOOS != "js" {
			t.Fatalf("CI=true but no WebGPU adapter: %v", err)
		}
		code, _, errOut := tinygpt(t, "", args...)
		if code != 1 || !strings.Contains(errOut, "--backend webgpu: no WebGPU adapter") {
			t.Errorf("without an adapter: exit %d, stderr %q", code, errOut)
		}
		t.Skipf("no WebGPU adapter: %v", err)
	}
	be.Close()
	code, out, errOut := tinygpt(t, "", args...)
	if code != 0 {
		t.Fatalf("train --backend webgpu: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "backend: webgpu: ") || !strings.Contains(out, "done: 3 steps") {
		t.Errorf("train output:\n%s", out)
	}
	for _, b := range []string{"webgpu", "cpu"} {
		code, out, errOut = tinygpt(t, "", "sample", "--model", model, "--tokens", "20", "--seed", "1", "--temperature", "0", "--backend", b)
		if code != 0 || len(out) < 20 {
			t.Fatalf("sample --backend %s: exit %d\n%s%s", b, code, out, errOut)
		}
	}
}

// TINYGPT_GPU_TIMESTAMPS in a build without GPU timestamps is refused with what to do about
// it, not with the advice to use the CPU.
func TestBackendWebGPURefusesTimestamps(t *testing.T) {
	be, err := webgpu.New()
	if err != nil {
		t.Skipf("no WebGPU adapter: %v", err)
	}
	be.Close()
	t.Setenv(webgpu.TimestampsEnv, "1")
	code, _, errOut := tinygpt(t, "", "bench", "--presets", "tiny", "--steps", "1", "--warmup", "0", "--backend", "webgpu")
	if code != 1 || !strings.Contains(errOut, "unset "+webgpu.TimestampsEnv) || strings.Contains(errOut, "--backend cpu") {
		t.Errorf("exit %d, stderr %q; want exit 1 and the advice to unset %s", code, errOut, webgpu.TimestampsEnv)
	}
}

// A model whose attention heads are wider than the GPU's attention takes is refused when the
// backend opens, by train, sample and eval alike, rather than failing at its first pass (and
// auto falls back to the CPU for it).
func TestBackendWebGPURefusesWideHeads(t *testing.T) {
	be, err := webgpu.New()
	if err != nil {
		t.Skipf("no WebGPU adapter: %v", err)
	}
	be.Close()
	dir := t.TempDir()
	corpus := writeCorpus(t, dir)
	model := filepath.Join(dir, "m.tinygpt")
	shape := []string{"--layers", "1", "--d-model", "264", "--heads", "1", "--ctx", "8", "--batch", "1"}
	code, out, errOut := tinygpt(t, "", append([]string{"train", "--data", corpus, "--steps", "1", "--eval-every", "0", "--out", model, "--backend", "cpu"}, shape...)...)
	if code != 0 {
		t.Fatalf("train --backend cpu: exit %d\n%s%s", code, out, errOut)
	}
	const want = "--backend webgpu: the model's attention heads are 264 wide"
	for _, args := range [][]string{
		append([]string{"train", "--data", corpus, "--steps", "1", "--out", filepath.Join(dir, "g.tinygpt"), "--backend", "webgpu"}, shape...),
		{"sample", "--model", model, "--tokens", "5", "--backend", "webgpu"},
		{"eval", "--model", model, "--backend", "webgpu"},
		append([]string{"bench", "--steps", "1", "--warmup", "0", "--backend", "webgpu"}, shape...),
	} {
		code, _, errOut := tinygpt(t, "", args...)
		if code != 1 || !strings.Contains(errOut, want) {
			t.Errorf("%s: exit %d, stderr %q; want exit 1 and %q", args[0], code, errOut, want)
		}
	}
}

// failedBackend is a backend whose device has failed.
type failedBackend struct{ backend.Backend }

func (failedBackend) Err() error { return errors.New("webgpu: device lost") }

// A failure on a backend that has its own error reports that error, with what to do next; on
// a backend without one, the failure itself.
func TestBackendFailure(t *testing.T) {
	symptom := errors.New("training loss is NaN at step 3")
	if got := backendFailure(failedBackend{}, symptom, ""); got.Error() != "webgpu: device lost (switch to --backend cpu)" {
		t.Errorf("no hint: %v", got)
	}
	if got := backendFailure(failedBackend{}, symptom, "resume m.tinygpt"); got.Error() != "webgpu: device lost (resume m.tinygpt)" {
		t.Errorf("with a hint: %v", got)
	}
	if got := backendFailure(cpu.New(), symptom, "x"); got != symptom {
		t.Errorf("cpu: %v", got)
	}
}

// A model whose activations do not fit a GPU buffer is refused with the batch that would fit;
// one whose parameters do not is refused for the model itself.
func TestFitsBuffers(t *testing.T) {
	p, err := gpt.PresetByName("small")
	if err != nil {
		t.Fatal(err)
	}
	c := p.Config
	c.Ctx = 1024 // a sequence's MLP activations (1.5 MB) outweigh the largest parameter (144 KB)
	per := int64(c.Ctx) * int64(c.DMlp) * 4
	lim := 10 * per
	if err := fitsBuffers(modelLoad(c, 10*c.Ctx, 0), lim); err != nil {
		t.Errorf("a batch that fits exactly: %v", err)
	}
	err = fitsBuffers(modelLoad(c, 11*c.Ctx, 0), lim)
	if err == nil || !strings.Contains(err.Error(), "a batch of 11 sequences") || !strings.Contains(err.Error(), "at most 10 fits") {
		t.Errorf("a batch one too large: got %v, want the batch that fits", err)
	}
	if err := fitsBuffers(modelLoad(c, c.Ctx, 0), per-1); err == nil || !strings.Contains(err.Error(), "one sequence") {
		t.Errorf("not even one sequence fits: got %v", err)
	}
	if err := fitsBuffers(modelLoad(c, c.Ctx, 0), int64(gpt.LargestParam(c))*4-4); err == nil || !strings.Contains(err.Error(), "parameter tensor") {
		t.Errorf("a parameter that does not fit: got %v", err)
	}
}
