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

func TestSniff(t *testing.T) {
	utf16le := "h\x00e\x00l\x00l\x00o\x00 \x00w\x00o\x00r\x00l\x00d\x00\n\x00"
	for text, kind := range map[string]string{
		"plain text\n":                                     "",
		"caf\u00e9 \u65e5\u672c\n\ttab\r\n":                "",
		"a\x00b":                                           "binary",
		strings.Repeat("\x01\x02\x03", 100):                "binary",
		strings.Repeat("\xff\xfe", 100):                    "",       // not UTF-8, but an 8-bit encoding is text too
		"Se\xf1or Mu\xf1oz, fa\xe7ade\n":                   "",       // Latin-1
		strings.Repeat("text\x1b[0m ", 20):                 "binary", // 10% control characters
		strings.Repeat(strings.Repeat("x", 30)+"\x1b", 20): "",       // 3%
		"":                                "",
		"\xff\xfe" + utf16le:              "UTF-16", // with a byte-order mark
		"\xfe\xff" + utf16le[1:] + "\x00": "UTF-16", // big-endian
		utf16le:                           "UTF-16", // without one
		"\xff\xfe\x00\x00h\x00\x00\x00i\x00\x00\x00":              "UTF-32",
		"\x00\x00\xfe\xff\x00\x00\x00h":                           "UTF-32",
		"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00": "binary",
	} {
		if got := sniff([]byte(text)); got.kind != kind {
			t.Errorf("sniff(%q) = %+v, want kind %q", text, got, kind)
		}
	}
	err := sniff([]byte(utf16le)).refuse("notes.txt")
	if !strings.Contains(err.Error(), "notes.txt is UTF-16 text (every other byte is NUL)") || !strings.Contains(err.Error(), "iconv -f UTF-16 -t UTF-8") {
		t.Errorf("UTF-16 refused with %q", err)
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
	text, nt, err := readText(z, 0, MaxCorpusBytes)
	if err != nil || text != nil || nt != (notText{"binary", "NUL byte at offset 0"}) || z.read > binaryHead {
		t.Errorf("zeros: %d bytes returned, %+v, err %v, %d bytes read", len(text), nt, err, z.read)
	}
	if _, err := Load("-", "", z); err == nil || !strings.Contains(err.Error(), "standard input looks like a binary file") {
		t.Errorf("Load of endless zeros: %v", err)
	}
	for _, n := range []int{0, 10, binaryHead - 1, binaryHead, binaryHead + 1, 3*binaryHead + 17, 5 << 20} {
		want := strings.Repeat("a line of text\n", n/15+1)[:n]
		for _, size := range []int64{0, int64(n)} { // a pipe, and a file of known size
			got, nt, err := readText(strings.NewReader(want), size, MaxCorpusBytes)
			if err != nil || nt.kind != "" || string(got) != want {
				t.Errorf("%d bytes of text, size %d: got %d bytes, %+v, err %v", n, size, len(got), nt, err)
			}
			if size > 0 && cap(got) != n+1 {
				t.Errorf("%d bytes of text of known size: read into %d bytes, want one buffer of the size (and a byte to see the end)", n, cap(got))
			}
		}
	}
}

// A file that grew since its size was read is read whole, whatever its size said.
func TestReadTextGrown(t *testing.T) {
	for _, n := range []int{20, 3 * binaryHead} {
		want := strings.Repeat("x", n)
		for _, size := range []int64{10, binaryHead + 3} {
			if got, _, err := readText(strings.NewReader(want), size, MaxCorpusBytes); err != nil || string(got) != want {
				t.Errorf("%d bytes, size %d: got %d bytes, %v", n, size, len(got), err)
			}
		}
	}
}

// Text followed by binary data (a log padded with NULs after a crash) is not text, however far
// in the binary data starts; a limit is kept without reading past it.
func TestReadTextWhole(t *testing.T) {
	text := strings.Repeat("a line of text\n", 10_000)
	for _, size := range []int64{0, int64(len(text) + 5)} {
		_, nt, err := readText(strings.NewReader(text+"\x00\x00\x00\x00\x00"), size, MaxCorpusBytes)
		if err != nil || nt != (notText{"binary", fmt.Sprintf("NUL byte at offset %d", len(text))}) {
			t.Errorf("size %d: %+v, %v", size, nt, err)
		}
	}
	r := strings.NewReader(text)
	if _, _, err := readText(r, int64(len(text)), 100_000); err != errTooBig || r.Len() != len(text)-binaryHead {
		t.Errorf("a file larger than the limit: %v, %d bytes read, want errTooBig after the first %d", err, len(text)-r.Len(), binaryHead)
	}
	if _, _, err := readText(strings.NewReader(text), 0, 100_000); err != errTooBig {
		t.Errorf("a stream longer than the limit: %v, want errTooBig", err)
	}
}

// In a folder, hidden files are left out as hidden folders are; files that are not text are
// skipped and listed with why.
func TestLoadDirSkips(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.txt"), "some text\n")
	write(t, filepath.Join(dir, ".env"), "SECRET=1\n")
	write(t, filepath.Join(dir, "b.txt"), "\xff\xfeh\x00i\x00")
	write(t, filepath.Join(dir, "c.bin"), "\x7fELF\x00\x00")
	write(t, filepath.Join(dir, "d.txt"), "")
	write(t, filepath.Join(dir, "e.log"), strings.Repeat("log line\n", 10_000)+"\x00\x00\x00")
	c, err := Load(dir, "", nil)
	if err != nil || string(c.Text) != "some text\n" || c.Files != 1 {
		t.Fatalf("corpus %q from %d files, %v", c.Text, c.Files, err)
	}
	want := []string{"b.txt (UTF-16)", "c.bin (binary)", "d.txt (empty)", "e.log (binary)"}
	for i := range want {
		want[i] = filepath.Join(dir, want[i])
	}
	if strings.Join(c.Skipped, "|") != strings.Join(want, "|") {
		t.Errorf("skipped %q, want %q", c.Skipped, want)
	}
	if _, err := Load(dir, "sub/*.txt", nil); err == nil || !strings.Contains(err.Error(), "matches file names, not paths") {
		t.Errorf("--glob with a path: %v", err)
	}
}
