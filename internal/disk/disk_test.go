package disk

import (
	"path/filepath"
	"runtime"
	"testing"
)

func TestFree(t *testing.T) {
	dir := t.TempDir()
	n, ok := Free(dir)
	switch runtime.GOOS {
	case "linux", "darwin", "freebsd", "windows":
		if !ok || n <= 0 {
			t.Errorf("Free(%s) = %d, %v: want the room left on a real file system", dir, n, ok)
		}
	}
	if _, ok := Free(filepath.Join(dir, "no", "such", "folder")); ok {
		t.Error("Free of a missing folder said how much room it has")
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0 KB", 1: "1 KB", 5 << 20: "5.0 MB", 5_700_000_000: "5.3 GB"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}
