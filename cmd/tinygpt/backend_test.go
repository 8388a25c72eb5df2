package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"tinygpt/backend/webgpu"
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
