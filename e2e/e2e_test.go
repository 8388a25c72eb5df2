// Package e2e tests "tinygpt serve" end to end: it builds the command, starts the server on a
// temporary data directory and drives the playground page in headless Chromium with
// playwright-core (playground.mjs). It needs /usr/bin/chromium (or $CHROMIUM), node and
// `npm ci` at the repository root; without them the test skips, except under CI=true, where
// it fails. Screenshots of every screen go to test-output/e2e.
package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
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
	cmd *exec.Cmd
	url string
	out *strings.Builder
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
	case s.url = <-urls:
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		t.Fatalf("the server printed no address")
	}
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
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
	}

	tmp := t.TempDir()
	bin := filepath.Join(tmp, "tinygpt")
	build := exec.Command(goCmd, "build", "-o", bin, "./cmd/tinygpt")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := filepath.Join(tmp, "data")
	s := startServer(t, bin, dir)

	shots := filepath.Join(root, "test-output", "e2e")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(root, "e2e", "playground.mjs"), s.url, shots)
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
	resp, err := http.Get(s2.url + "api/runs")
	if err != nil {
		t.Fatal(err)
	}
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
	if len(list.Runs) != 1 || list.Runs[0].Name != "e2e tiny" || list.Runs[0].Status != "done" || list.Runs[0].Step != 120 {
		t.Fatalf("after a restart the runs are %+v, want the e2e run, done at step 120", list.Runs)
	}
	s2.interrupt(t)
}
