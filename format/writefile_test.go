package format

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// dirNames lists the names in dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.tinygpt")
	f := testFile(seedConfig, 11)
	if err := WriteFile(path, f, 0o644); err != nil {
		t.Fatal(err)
	}
	want, _ := Encode(f)
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("file differs from Encode (err %v)", err)
	}
	if fi, err := os.Stat(path); err != nil || (runtime.GOOS != "windows" && fi.Mode().Perm() != 0o644) {
		t.Errorf("mode %v, %v", fi.Mode(), err)
	}
	// Overwrite with another model: the file keeps the mode its owner gave it.
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	g := testFile(seedConfig, 12)
	if err := WriteFile(path, g, 0o644); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || (runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600) {
		t.Errorf("mode after the second write %v, %v", fi.Mode(), err)
	}
	want, _ = Encode(g)
	if got, _ := os.ReadFile(path); !bytes.Equal(got, want) {
		t.Fatal("overwritten file differs")
	}
	if names := dirNames(t, dir); len(names) != 1 {
		t.Errorf("directory holds %v, want only model.tinygpt", names)
	}
}

func TestWriteFileFailures(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.tinygpt")
	old := []byte("the previous model")
	if err := os.WriteFile(path, old, 0o644); err != nil {
		t.Fatal(err)
	}
	unchanged := func(what string) {
		t.Helper()
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, old) {
			t.Errorf("%s: existing file changed (err %v)", what, err)
		}
		if names := dirNames(t, dir); len(names) != 1 {
			t.Errorf("%s: directory holds %v, want only model.tinygpt", what, names)
		}
	}

	// An invalid File fails before anything is written.
	bad := testFile(seedConfig, 1)
	bad.Weights = bad.Weights[:10]
	if err := WriteFile(path, bad, 0o644); err == nil {
		t.Error("WriteFile of an invalid File succeeded")
	}
	unchanged("invalid File")

	// A missing directory.
	if err := WriteFile(filepath.Join(dir, "missing", "m.tinygpt"), testFile(seedConfig, 1), 0o644); err == nil {
		t.Error("WriteFile into a missing directory succeeded")
	}
	unchanged("missing directory")

	// The rename fails at the very end: the target is a non-empty directory.
	sub := filepath.Join(dir, "sub")
	if err := os.MkdirAll(filepath.Join(sub, "target", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(filepath.Join(sub, "target"), testFile(seedConfig, 1), 0o644); err == nil {
		t.Error("WriteFile over a directory succeeded")
	}
	if names := dirNames(t, sub); len(names) != 1 || names[0] != "target" {
		t.Errorf("temporary file left behind: %v", names)
	}
	os.RemoveAll(sub)

	// A read-only directory (meaningless for root, who may write anyway).
	if runtime.GOOS != "windows" && os.Geteuid() != 0 {
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(dir, 0o755)
		if err := WriteFile(path, testFile(seedConfig, 1), 0o644); err == nil {
			t.Error("WriteFile into a read-only directory succeeded")
		}
		unchanged("read-only directory")
	}
}
