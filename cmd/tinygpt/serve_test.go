package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	} {
		code, _, errOut := tinygpt(t, "", c.args...)
		if code == 0 || !strings.Contains(errOut, c.msg) {
			t.Errorf("%v: exit %d, %q; want an error mentioning %q", c.args, code, errOut, c.msg)
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
			if _, err := openBackend(b.Name); err != nil {
				t.Errorf("backend %s is listed as available but does not open: %v", b.Name, err)
			}
		} else if b.Note == "" {
			t.Errorf("backend %s is unavailable without a note saying why", b.Name)
		}
	}
	if !cpuOK {
		t.Errorf("the CPU backend is not listed as available: %+v", list)
	}
}
