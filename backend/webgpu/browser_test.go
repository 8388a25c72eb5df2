package webgpu

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"tinygpt/backend/webgpu/internal/gpu"
)

// Every kernel compiles in the browser's WebGPU too: Chromium's shader compiler (Tint) checks
// rules that gogpu's naga lets pass, WGSL's uniformity analysis among them (a barrier in
// control flow that may differ between a workgroup's threads is an error there), so a kernel
// that runs natively could still fail in the browser build. Each entry point of each .wgsl file
// is compiled as kernel compiles it, attention's for head sizes on both sides of every
// threshold (see attnKernel, attnLanes, blockedMaxHS), and the gpu layer's own kernels, in
// headless Chromium on SwiftShader (testdata/browser_wgsl.mjs). It needs Chromium
// (/usr/bin/chromium or $CHROMIUM), node and `npm ci` at the repository root, and skips without
// them, except under CI=true, where it fails.
func TestKernelsCompileInBrowser(t *testing.T) {
	chromium := os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	_, errChromium := os.Stat(chromium)
	node, errNode := exec.LookPath("node")
	_, errModules := os.Stat("../../node_modules/playwright-core")
	if errChromium != nil || errNode != nil || errModules != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("chromium (%v), node (%v) or playwright-core (%v) is missing; .ci/run installs them", errChromium, errNode, errModules)
		}
		t.Skip("needs chromium, node and `npm ci` at the repository root")
	}

	type kernel struct {
		Name  string `json:"name"`
		Entry string `json:"entry"`
		Code  string `json:"code"`
	}
	var kernels []kernel
	entries := regexp.MustCompile(`@compute[^\n]*\n\s*fn (\w+)\(`)
	files, err := shaders.ReadDir("wgsl")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		file := strings.TrimSuffix(f.Name(), ".wgsl")
		src, err := shaders.ReadFile("wgsl/" + f.Name())
		if err != nil {
			t.Fatal(err)
		}
		variants := []uint32{0}
		switch file {
		case "attention":
			variants = []uint32{1, 7, 16, 32, 33, 48, 64, 0}
		case "attention_blocked":
			variants = []uint32{1, 7, 16, 32}
		}
		for _, m := range entries.FindAllStringSubmatch(string(src), -1) {
			for _, v := range variants {
				code, err := kernelSource(file, m[1], v)
				if err != nil {
					t.Fatal(err)
				}
				kernels = append(kernels, kernel{fmt.Sprintf("%s/%s/%d", file, m[1], v), m[1], code})
			}
		}
	}
	for entry, code := range gpu.OwnKernels() {
		kernels = append(kernels, kernel{"gpu/" + entry, entry, code})
	}
	if len(kernels) < 30 {
		t.Fatalf("found %d kernels; the entry points' pattern no longer matches the .wgsl files", len(kernels))
	}
	list := filepath.Join(t.TempDir(), "kernels.json")
	b, err := json.Marshal(kernels)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(list, b, 0o644); err != nil {
		t.Fatal(err)
	}

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "<!doctype html><title>wgsl</title>")
	}))
	defer srv.Close()
	cmd := exec.Command(node, "testdata/browser_wgsl.mjs", srv.URL, list)
	cmd.Env = append(os.Environ(), "CHROMIUM="+chromium)
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if e, ok := err.(*exec.ExitError); ok {
			stderr = string(e.Stderr)
		}
		t.Fatalf("browser_wgsl.mjs: %v\n%s%s", err, out, stderr)
	}
	var res struct {
		Adapter string
		Kernels []struct {
			Name   string
			Errors []string
		}
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("browser_wgsl.mjs printed %q: %v", out, err)
	}
	if len(res.Kernels) != len(kernels) {
		t.Fatalf("the browser compiled %d kernels of %d", len(res.Kernels), len(kernels))
	}
	t.Logf("%d kernels compiled on %s", len(kernels), res.Adapter)
	for _, k := range res.Kernels {
		for _, e := range k.Errors {
			t.Errorf("%s: %s", k.Name, e)
		}
	}
}
