package main

import (
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"tinygpt/backend"
	"tinygpt/gpt"
)

func TestServeBadFlags(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"serve", "--addr", "no-port"}, "--addr"},
		{[]string{"serve", "--addr", "127.0.0.1:99999", "--dir", t.TempDir()}, "--addr"},
		{[]string{"serve", "--dir", filepath.Join(file, "sub")}, "data directory"},
		{[]string{"serve", "extra"}, "unexpected argument"},
		{[]string{"serve", "--addr", "0.0.0.0:0", "--token", "short", "--dir", t.TempDir()}, "at least 16 characters"},
	} {
		code, _, errOut := tinygpt(t, "", c.args...)
		if code == 0 || !strings.Contains(errOut, c.msg) {
			t.Errorf("%v: exit %d, %q; want an error mentioning %q", c.args, code, errOut, c.msg)
		}
	}
}

// Listening on every interface prints addresses a browser can open, not 0.0.0.0 or [::].
func TestPlaygroundURLs(t *testing.T) {
	addrs := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("192.168.1.20"), net.ParseIP("fe80::1"), net.ParseIP("2001:db8::5"), net.ParseIP("::1")}
	for _, c := range []struct {
		host  string
		addrs []net.IP
		want  string
	}{
		{"192.168.1.20", addrs, "http://192.168.1.20:8080/"},
		{"myhost.lan", addrs, "http://myhost.lan:8080/"},
		{"0.0.0.0", addrs, "http://192.168.1.20:8080/"},
		{"::", addrs, "http://192.168.1.20:8080/ http://[2001:db8::5]:8080/"},
		{"", addrs, "http://192.168.1.20:8080/ http://[2001:db8::5]:8080/"},
		{"::", nil, "http://localhost:8080/"},
	} {
		if got := strings.Join(playgroundURLs(c.host, 8080, c.addrs), " "); got != c.want {
			t.Errorf("%q: %s, want %s", c.host, got, c.want)
		}
	}
}

func TestTokenFragment(t *testing.T) {
	for token, want := range map[string]string{
		"Zx9-_abc": "#token=Zx9-_abc",
		"a b&c#d":  "#token=a+b%26c%23d", // URLSearchParams gives back "a b&c#d"
	} {
		if got := tokenFragment(token); got != want {
			t.Errorf("%q: %s, want %s", token, got, want)
		}
	}
}

func TestBackendList(t *testing.T) {
	list := backendList()
	var cpuOK bool
	for _, b := range list {
		if b.Name == "cpu" && b.Available && b.Detail != "" {
			cpuOK = true
		}
		if b.Available {
			be, err := openNamedBackend(b.Name, gpt.Config{}, 0)
			if err != nil {
				t.Errorf("backend %s is listed as available but does not open: %v", b.Name, err)
				continue
			}
			backend.Close(be)
			if b.Name == "webgpu" {
				// A model the GPU cannot run is refused when the run starts, in the
				// playground's words (no command-line flags).
				wide := gpt.Config{Layers: 1, DModel: 264, Heads: 1, Ctx: 8, DMlp: 1056}
				_, err := openNamedBackend(b.Name, wide, 8)
				if err == nil || !strings.Contains(err.Error(), "attention heads are 264 wide") ||
					!strings.Contains(err.Error(), "choose the cpu backend") || strings.Contains(err.Error(), "--backend") {
					t.Errorf("webgpu with 264-wide heads: %v", err)
				}
			}
		} else if b.Note == "" {
			t.Errorf("backend %s is unavailable without a note saying why", b.Name)
		}
	}
	if !cpuOK {
		t.Errorf("the CPU backend is not listed as available: %+v", list)
	}
}

// --open hands the browser a private page that redirects to the playground, not the address
// with the token, which would show in the process list.
func TestOpenPage(t *testing.T) {
	dir := t.TempDir()
	target := "http://127.0.0.1:8080/?x=1#token=abc"
	path, err := writeOpenPage(dir, target)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `content="0;url=http://127.0.0.1:8080/?x=1#token=abc"`) {
		t.Errorf("page: %s", b)
	}
	if info, err := os.Stat(path); err != nil || (runtime.GOOS != "windows" && info.Mode().Perm() != 0o600) {
		t.Errorf("page mode: %v, %v", info.Mode(), err)
	}
	u := fileURL(path)
	if !strings.HasPrefix(u, "file:///") || strings.Contains(u, "token") || !strings.HasSuffix(u, "/open.html") {
		t.Errorf("fileURL(%q) = %q", path, u)
	}
}
