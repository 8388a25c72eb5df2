package data

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.txt"), "hello\n")
	write(t, filepath.Join(dir, "src", "b.go"), "package b")
	write(t, filepath.Join(dir, "src", "c.go"), "package c\n")
	write(t, filepath.Join(dir, "src", "img.go"), "\x00\x01\x02binary")
	write(t, filepath.Join(dir, ".git", "x.go"), "package hidden\n")

	c, err := Load(filepath.Join(dir, "a.txt"), "", nil)
	if err != nil || string(c.Text) != "hello\n" {
		t.Fatalf("file: %q, %v", c.Text, err)
	}
	c, err = Load(dir, "*.go", nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(c.Text) != "package b\npackage c\n" || c.Files != 2 {
		t.Errorf("directory with glob: %q from %d files", c.Text, c.Files)
	}
	c, err = Load(dir, "", nil)
	if err != nil || c.Files != 3 {
		t.Errorf("whole directory: %d files, %v", c.Files, err)
	}
	// A linked folder is read as the folder; a link inside it to a file outside is followed,
	// one to a file inside is not (the file is read as itself), nor one to a folder (a loop).
	if runtime.GOOS != "windows" && runtime.GOOS != "js" {
		other := t.TempDir()
		write(t, filepath.Join(other, "d.go"), "package d\n")
		must(t, os.Symlink(filepath.Join(other, "d.go"), filepath.Join(dir, "src", "d.go")))
		must(t, os.Symlink(dir, filepath.Join(dir, "src", "loop")))
		must(t, os.Symlink(filepath.Join(dir, "src", "b.go"), filepath.Join(dir, "src", "e.go"))) // read once, as b.go
		must(t, os.Symlink(dir, filepath.Join(other, "link")))
		c, err = Load(filepath.Join(other, "link"), "*.go", nil)
		if err != nil || string(c.Text) != "package b\npackage c\npackage d\n" {
			t.Errorf("linked folder: %q, %v", c.Text, err)
		}
	}
	c, err = Load("-", "", strings.NewReader("from stdin"))
	if err != nil || string(c.Text) != "from stdin" || c.Source != "stdin" {
		t.Errorf("stdin: %q %v", c.Text, err)
	}
	c, err = Load("", "", nil)
	if err != nil || c.Source != "builtin" || len(c.Text) < 100000 {
		t.Errorf("builtin: %d bytes, %v", len(c.Text), err)
	}
	// A pipe (--data <(command)): read to its end.
	if runtime.GOOS == "linux" {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		go func() { w.WriteString("from a pipe\n"); w.Close() }()
		c, err = Load(fmt.Sprintf("/dev/fd/%d", r.Fd()), "", nil)
		r.Close()
		if err != nil || string(c.Text) != "from a pipe\n" {
			t.Errorf("pipe: %q, %v", c.Text, err)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "bin.dat"), "\x7fELF\x00\x00\x00")
	os.Mkdir(filepath.Join(dir, "empty"), 0o755)
	write(t, filepath.Join(dir, "only", "a.txt"), "text\n")
	for _, c := range []struct {
		path, glob, want string
	}{
		{filepath.Join(dir, "bin.dat"), "", "looks like a binary file"},
		{filepath.Join(dir, "missing.txt"), "", "missing.txt"}, // and fs.ErrNotExist, below
		{filepath.Join(dir, "empty"), "", "has no files"},
		{filepath.Join(dir, "only"), "*.go", `no files matching "*.go"`},
		{filepath.Join(dir, "only"), "[", "bad --glob pattern"},
		{filepath.Join(dir, "only", "a.txt"), "*.txt", "picks files in a folder"},
	} {
		_, err := Load(c.path, c.glob, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Load(%s, %q): %v, want an error containing %q", c.path, c.glob, err, c.want)
		}
	}
	// The system's own words for a missing file differ (Node.js under js/wasm capitalises
	// them), so the error is checked by its kind.
	if _, err := Load(filepath.Join(dir, "missing.txt"), "", nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want an error wrapping fs.ErrNotExist", err)
	}
	if _, err := Load("-", "", strings.NewReader("a\x00b")); err == nil {
		t.Error("binary stdin accepted")
	}
}

func TestBinaryReason(t *testing.T) {
	for text, binary := range map[string]bool{
		"plain text\n":                                     false,
		"caf\u00e9 \u65e5\u672c\n\ttab\r\n":                false,
		"a\x00b":                                           true,
		strings.Repeat("\x01\x02\x03", 100):                true,
		strings.Repeat("\xff\xfe", 100):                    false, // not UTF-8, but an 8-bit encoding is text too
		"Se\xf1or Mu\xf1oz, fa\xe7ade\n":                   false, // Latin-1
		strings.Repeat("text\x1b[0m ", 20):                 true,  // 10% control characters
		strings.Repeat(strings.Repeat("x", 30)+"\x1b", 20): false, // 3%
		"": false,
	} {
		if got := binaryReason([]byte(text)) != ""; got != binary {
			t.Errorf("binaryReason(%q) = %v, want %v", text, got, binary)
		}
	}
}

func TestSplit(t *testing.T) {
	text := []byte(strings.Repeat("x", 4002))
	s, err := NewSplit(text, 64)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Train) != 3601 || len(s.Val) != 401 || s.Overlap() {
		t.Errorf("split %d/%d, want 3601/401 as the original", len(s.Train), len(s.Val))
	}
	if _, err := NewSplit(make([]byte, 65), 64); err == nil || !strings.Contains(err.Error(), "at least ctx+2 = 66 bytes") {
		t.Errorf("short corpus: %v", err)
	}
	s, err = NewSplit(make([]byte, 66), 64)
	if err != nil || !s.Overlap() || len(s.Train) != 65 || len(s.Val) != 65 {
		t.Errorf("minimal corpus: %d/%d overlap %v, %v", len(s.Train), len(s.Val), s.Overlap(), err)
	}
}

func TestBatchesAreDeterministicAndInRange(t *testing.T) {
	text := make([]byte, 1000)
	for i := range text {
		text[i] = byte(i % 251)
	}
	s, _ := NewSplit(text, 16)
	B, T := 8, 16
	in1, tg1 := make([]int32, B*T), make([]int32, B*T)
	in2, tg2 := make([]int32, B*T), make([]int32, B*T)
	s.TrainBatch(42, 7, B, in1, tg1)
	s.TrainBatch(42, 7, B, in2, tg2)
	for i := range in1 {
		if in1[i] != in2[i] || tg1[i] != tg2[i] {
			t.Fatal("the same (seed, step) gave different batches")
		}
	}
	for r := 0; r < B; r++ {
		for i := 0; i < T; i++ {
			// Targets are the inputs shifted by one, and windows lie inside the train split.
			if i+1 < T && tg1[r*T+i] != in1[r*T+i+1] {
				t.Fatalf("row %d: targets are not the next bytes", r)
			}
		}
	}
	s.TrainBatch(42, 8, B, in2, tg2)
	same := true
	for i := range in1 {
		same = same && in1[i] == in2[i]
	}
	if same {
		t.Error("consecutive steps drew the same batch")
	}
	// Every start in range is reachable and none outside.
	seen := map[int]bool{}
	for step := 0; step < 20000; step++ {
		off := Draw(1, uint64(step), 0, 5)
		if off < 0 || off >= 5 {
			t.Fatalf("Draw gave %d, outside [0, 5)", off)
		}
		seen[off] = true
	}
	if len(seen) != 5 {
		t.Errorf("Draw reached %d of 5 starts", len(seen))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A folder or file that cannot be read is skipped, and the corpus names it, rather than failing
// the whole directory. (Root reads everything, so this runs for other users only.)
func TestLoadSkipsUnreadable(t *testing.T) {
	if runtime.GOOS == "windows" || os.Geteuid() == 0 {
		t.Skip("needs a user whom permissions stop")
	}
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.go"), "package a\n")
	locked := filepath.Join(dir, "locked")
	write(t, filepath.Join(locked, "b.go"), "package b\n")
	if err := os.Chmod(locked, 0); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(locked, 0o755)
	lockedFile := filepath.Join(dir, "c.go")
	write(t, lockedFile, "package c\n")
	if err := os.Chmod(lockedFile, 0); err != nil {
		t.Fatal(err)
	}
	c, err := Load(dir, "*.go", nil)
	if err != nil || string(c.Text) != "package a\n" || strings.Join(c.Unreadable, " ") != locked+" "+lockedFile {
		t.Errorf("corpus %q, unreadable %v, error %v", c.Text, c.Unreadable, err)
	}
	os.Remove(filepath.Join(dir, "a.go"))
	if _, err := Load(dir, "*.go", nil); err == nil || !strings.Contains(err.Error(), "(could not read: "+locked+", "+lockedFile+")") {
		t.Errorf("only unreadable paths: %v", err)
	}
}

// zeros is an endless stream of NUL bytes that counts what was read of it.
type zeros struct{ read int }

func (z *zeros) Read(p []byte) (int, error) {
	clear(p)
	z.read += len(p)
	return len(p), nil
}

// An endless binary stream (/dev/zero, or a binary file piped in) is refused after its first
// 64 KB, not read to the gigabyte limit; text of any length is read whole.
func TestReadTextStopsEarly(t *testing.T) {
	z := &zeros{}
	text, why, err := readText(z)
	if err != nil || text != nil || why != "NUL byte at offset 0" || z.read > binaryHead {
		t.Errorf("zeros: %d bytes returned, why %q, err %v, %d bytes read", len(text), why, err, z.read)
	}
	if _, err := Load("-", "", z); err == nil || !strings.Contains(err.Error(), "standard input looks like a binary file") {
		t.Errorf("Load of endless zeros: %v", err)
	}
	for _, n := range []int{0, 10, binaryHead - 1, binaryHead, binaryHead + 1, 3*binaryHead + 17} {
		want := strings.Repeat("a line of text\n", n/15+1)[:n]
		got, why, err := readText(strings.NewReader(want))
		if err != nil || why != "" || string(got) != want {
			t.Errorf("%d bytes of text: got %d bytes, why %q, err %v", n, len(got), why, err)
		}
	}
}
