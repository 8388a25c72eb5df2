package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"
)

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func writeString(s string) func(io.Writer) error {
	return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.tinygpt")
	if err := Write(path, 0o600, writeString("one")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "one" {
		t.Fatalf("%q, %v", b, err)
	}
	if fi, err := os.Stat(path); err != nil || (runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600) {
		t.Errorf("mode %v, %v", fi.Mode(), err)
	}
	if err := Write(path, 0o644, writeString("two")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "two" {
		t.Fatalf("after replacing: %q", b)
	}
	if got := names(t, dir); !slices.Equal(got, []string{"m.tinygpt"}) {
		t.Errorf("folder holds %v", got)
	}
}

// A failed write leaves the old file and no temporary file.
func TestWriteFails(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.tinygpt")
	if err := Write(path, 0o644, writeString("good")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("disk full")
	err := Write(path, 0o644, func(w io.Writer) error {
		io.WriteString(w, "half")
		return boom
	})
	if !errors.Is(err, boom) || err.Error() != "write "+path+": disk full" {
		t.Errorf("error %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "good" {
		t.Errorf("old file became %q", b)
	}
	if got := names(t, dir); !slices.Equal(got, []string{"m.tinygpt"}) {
		t.Errorf("folder holds %v", got)
	}
	if err := Write(filepath.Join(dir, "missing", "m.tinygpt"), 0o644, writeString("x")); err == nil {
		t.Error("write into a missing folder succeeded")
	}
}

// The temporary files of killed writes to the same destination are removed by the next
// successful one; others, and one being written now, are kept.
func TestWriteRemovesLeftovers(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.tinygpt")
	old := time.Now().Add(-time.Hour)
	for _, name := range []string{
		".m.tinygpt.tmp-123456", ".m.tinygpt.tmp-99", // leftovers of killed writes
		".m.tinygpt.tmp-abc", ".other.tmp-123", "m.tinygpt.tmp-1", ".m.tinygpt.tmp-", // not ours
		".m.tinygpt.tmp-777", // being written by another process (modified after we start)
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
		if name != ".m.tinygpt.tmp-777" {
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := Write(path, 0o644, func(w io.Writer) error {
		later := time.Now().Add(time.Minute)
		// The other writer goes on writing while this one runs.
		if err := os.Chtimes(filepath.Join(dir, ".m.tinygpt.tmp-777"), later, later); err != nil {
			return err
		}
		_, err := io.WriteString(w, "new")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{".m.tinygpt.tmp-", ".m.tinygpt.tmp-777", ".m.tinygpt.tmp-abc", ".other.tmp-123", "m.tinygpt", "m.tinygpt.tmp-1"}
	if got := names(t, dir); !slices.Equal(got, want) {
		t.Errorf("folder holds %v, want %v", got, want)
	}
}
