// Package e2e tests "tinygpt serve" end to end: it builds the command and starts the server on a
// temporary data directory. TestPlayground drives the playground page in headless Chromium with
// playwright-core (playground.mjs); it needs /usr/bin/chromium (or $CHROMIUM), node and
// `npm ci` at the repository root, and without them it skips, except under CI=true, where it
// fails. Screenshots of every screen go to test-output/e2e. TestServeCtrlCSavesTheRunningJob
// needs no browser.
package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// need skips the test, or fails it under CI, when a tool is missing.
func need(t *testing.T, ok bool, what string) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is missing; .ci/run installs it", what)
	}
	t.Skipf("%s is missing (install chromium and run npm ci at the repository root to run the browser test)", what)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// server is a running "tinygpt serve".
type server struct {
	cmd   *exec.Cmd
	page  string // the address it printed, with #token=
	url   string // the page's address without the token, ending in /
	token string
	out   *strings.Builder
}

// get sends a GET with the access token to path (relative to s.url).
func (s *server) get(t *testing.T, path string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", s.url+path, nil)
	req.Header.Set("X-TinyGPT-Token", s.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func startServer(t *testing.T, bin, dir string) *server {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--dir", dir)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, out: &strings.Builder{}}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			s.out.WriteString(line + "\n")
			if u, ok := strings.CutPrefix(line, "TinyGPT playground: "); ok {
				urls <- u
			}
		}
	}()
	select {
	case s.page = <-urls:
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		t.Fatalf("the server printed no address")
	}
	u, err := url.Parse(s.page)
	frag, _ := url.ParseQuery(u.Fragment)
	if err != nil || frag.Get("token") == "" || u.RawQuery != "" {
		cmd.Process.Kill()
		t.Fatalf("the server printed %q, not an address with its token in the fragment", s.page)
	}
	s.token = frag.Get("token")
	u.Fragment = ""
	s.url = u.String()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		pw.Close()
	})
	return s
}

// interrupt sends Ctrl-C and waits for a clean exit.
func (s *server) interrupt(t *testing.T) {
	t.Helper()
	s.cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("server exit after Ctrl-C: %v\n%s", err, s.out)
		}
	case <-time.After(time.Minute):
		t.Fatalf("server did not stop after Ctrl-C")
	}
}

func TestPlayground(t *testing.T) {
	chromium := os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	need(t, exists(chromium), "Chromium ("+chromium+")")
	node, err := exec.LookPath("node")
	need(t, err == nil, "node")
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	need(t, exists(filepath.Join(root, "node_modules", "playwright-core")), "node_modules/playwright-core")

	tmp := t.TempDir()
	bin := buildTinygpt(t, root, tmp)
	dir := filepath.Join(tmp, "data")
	s := startServer(t, bin, dir)

	shots := filepath.Join(root, "test-output", "e2e")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(root, "e2e", "playground.mjs"), s.page, shots)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CHROMIUM="+chromium)
	out, err := cmd.CombinedOutput()
	t.Logf("browser test:\n%s", out)
	if err != nil {
		t.Fatalf("browser test failed: %v\nserver output:\n%s", err, s.out)
	}
	s.interrupt(t)

	// A new server on the same directory still has the trained run.
	s2 := startServer(t, bin, dir)
	resp := s2.get(t, "api/runs")
	var list struct {
		Runs []struct {
			Name   string `json:"name"`
			Status string `json:"status"`
			Step   int    `json:"step"`
		} `json:"runs"`
	}
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"e2e pasted": 50, "e2e tiny": 200}
	for _, r := range list.Runs {
		if step, ok := want[r.Name]; ok && r.Status == "done" && r.Step == step {
			delete(want, r.Name)
		}
	}
	if len(list.Runs) != 2 || len(want) != 0 {
		t.Fatalf("after a restart the runs are %+v, want the two e2e runs, done", list.Runs)
	}
	s2.interrupt(t)
}

// buildTinygpt builds the command into dir.
func buildTinygpt(t *testing.T, root, dir string) string {
	t.Helper()
	if runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		t.Skip("no processes under " + runtime.GOOS)
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(dir, "tinygpt")
	build := exec.Command(goCmd, "build", "-o", bin, "./cmd/tinygpt")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// Ctrl-C on "tinygpt serve" checkpoints the running job; the checkpoint is a regular model file
// that "tinygpt sample" reads.
func TestServeCtrlCSavesTheRunningJob(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	bin := buildTinygpt(t, root, tmp)
	dir := filepath.Join(tmp, "data")
	s := startServer(t, bin, dir)
	token, err := os.ReadFile(filepath.Join(dir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(token)) != s.token {
		t.Errorf("the printed address has the token %q, the data directory %q", s.token, token)
	}
	req, _ := http.NewRequest("POST", s.url+"api/runs", strings.NewReader(
		`{"preset":"custom","layers":1,"d_model":16,"ctx":16,"batch":4,"steps":1000000}`))
	req.Header.Set("X-TinyGPT-Token", strings.TrimSpace(string(token)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var start struct {
		Run struct {
			ID string `json:"id"`
		} `json:"run"`
	}
	json.NewDecoder(resp.Body).Decode(&start)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("start: %d", resp.StatusCode)
	}
	// Wait for a few steps.
	for deadline := time.Now().Add(time.Minute); ; {
		var job struct {
			Stats struct {
				Step int `json:"step"`
			} `json:"stats"`
		}
		resp := s.get(t, "api/job")
		json.NewDecoder(resp.Body).Decode(&job)
		resp.Body.Close()
		if job.Stats.Step >= 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the run does not advance")
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.interrupt(t)
	runDir := filepath.Join(dir, "runs", start.Run.ID)
	meta, err := os.ReadFile(filepath.Join(runDir, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	var run struct {
		Status string `json:"status"`
		Step   int    `json:"step"`
	}
	json.Unmarshal(meta, &run)
	if run.Status != "stopped" || run.Step < 5 {
		t.Fatalf("after Ctrl-C the run is %q at step %d, want stopped at step ≥ 5", run.Status, run.Step)
	}
	out, err := exec.Command(bin, "sample", "--model", filepath.Join(runDir, "model.tinygpt"), "--tokens", "20", "--seed", "1").CombinedOutput()
	if err != nil {
		t.Fatalf("tinygpt sample on the checkpoint: %v\n%s", err, out)
	}
	info, err := exec.Command(bin, "inspect", filepath.Join(runDir, "model.tinygpt")).CombinedOutput()
	if err != nil || !strings.Contains(string(info), fmt.Sprintf("step %d of", run.Step)) {
		t.Fatalf("inspect the checkpoint: %v\n%s\nwant step %d", err, info, run.Step)
	}
}
