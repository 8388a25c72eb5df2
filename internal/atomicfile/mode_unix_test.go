//go:build unix

package atomicfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A new file gets perm less the umask; a file replaced keeps its own permission bits.
func TestWriteModes(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dir := t.TempDir()
	mode := func(path string) os.FileMode {
		t.Helper()
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return info.Mode().Perm()
	}
	path := filepath.Join(dir, "m.tinygpt")
	if err := Write(path, 0o644, writeString("one")); err != nil {
		t.Fatal(err)
	}
	if m := mode(path); m != 0o600 {
		t.Errorf("new file under umask 077: mode %v, want 0600", m)
	}
	for _, m := range []os.FileMode{0o640, 0o444, 0o604} {
		if err := os.Chmod(path, m); err != nil {
			t.Fatal(err)
		}
		if err := Write(path, 0o644, writeString("two")); err != nil {
			t.Fatal(err)
		}
		if got := mode(path); got != m {
			t.Errorf("replacing a file of mode %v: mode %v", m, got)
		}
	}
	syscall.Umask(0o022)
	other := filepath.Join(dir, "n.tinygpt")
	if err := Write(other, 0o644, writeString("x")); err != nil {
		t.Fatal(err)
	}
	if m := mode(other); m != 0o644 {
		t.Errorf("new file under umask 022: mode %v, want 0644", m)
	}
}
