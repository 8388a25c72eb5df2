// Package data turns text into training data: it loads a corpus (the built-in one, a file, a
// directory tree or standard input), splits it into training and validation parts, and draws
// the windows a training step learns from.
//
// Tokens are bytes: the model's vocabulary is the 256 byte values, so any UTF-8 text (or any
// bytes at all) is a token sequence without a tokenizer.
package data

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/bits"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"tinygpt/data/builtin"
)

// Corpus is a training text and where it came from.
type Corpus struct {
	Text   []byte
	Source string // "builtin", a path, or "stdin"
	Files  int    // files read (for a directory)
	// Unreadable lists the folders and files below a directory that could not be read (no
	// permission, say): they were skipped.
	Unreadable []string
}

// MaxCorpusBytes bounds what Load reads, so a mistaken path cannot exhaust memory.
const MaxCorpusBytes = 1 << 30

// Builtin returns the corpus embedded in the binary.
func Builtin() Corpus {
	return Corpus{Text: builtin.Text(), Source: builtin.Name, Files: 1}
}

// Load reads a corpus from path: "" for the built-in corpus, "-" for standard input, a file, or
// a directory, whose files matching glob (a filepath.Match pattern on the file name; "" for
// all) are concatenated in lexical path order. Binary files are refused for a single file and
// skipped in a directory.
func Load(path, glob string, stdin io.Reader) (Corpus, error) {
	if glob != "" {
		if _, err := filepath.Match(glob, "x"); err != nil {
			return Corpus{}, fmt.Errorf("bad --glob pattern %q: %w", glob, err)
		}
	}
	switch path {
	case "":
		return Builtin(), nil
	case "-":
		text, why, err := readText(stdin)
		if err != nil {
			return Corpus{}, fmt.Errorf("reading standard input: %w", err)
		}
		if why != "" {
			return Corpus{}, fmt.Errorf("standard input looks like a binary file (%s); TinyGPT trains on text", why)
		}
		if len(text) > MaxCorpusBytes {
			return Corpus{}, fmt.Errorf("standard input is larger than %d bytes", MaxCorpusBytes)
		}
		return Corpus{Text: text, Source: "stdin", Files: 1}, nil
	}
	info, err := os.Stat(path)
	if err != nil {
		return Corpus{}, fmt.Errorf("corpus: %w", err)
	}
	if !info.IsDir() {
		if glob != "" {
			return Corpus{}, fmt.Errorf("--glob %q picks files in a folder, and %s is a file", glob, path)
		}
		text, why, err := readFile(path, info.Size())
		if err != nil {
			return Corpus{}, err
		}
		if why != "" {
			return Corpus{}, fmt.Errorf("%s looks like a binary file (%s); TinyGPT trains on text", path, why)
		}
		return Corpus{Text: text, Source: path, Files: 1}, nil
	}
	return loadDir(path, glob)
}

// readFile reads the corpus file at path, of the given size, and says why it looks binary
// (binaryReason; then text is nil), or "".
func readFile(path string, size int64) (text []byte, why string, err error) {
	if size > MaxCorpusBytes {
		return nil, "", fmt.Errorf("%s is %d bytes, more than the %d-byte limit", path, size, MaxCorpusBytes)
	}
	// A pipe (--data <(command)) or a device has no size to check first; read no more than
	// the limit allows, so that an endless stream is an error, not an endless read.
	f, err := os.Open(path)
	if err != nil {
		return nil, "", fmt.Errorf("corpus: %w", err)
	}
	defer f.Close()
	text, why, err = readText(f)
	if err != nil {
		return nil, "", fmt.Errorf("corpus: %w", err)
	}
	if len(text) > MaxCorpusBytes {
		return nil, "", fmt.Errorf("%s holds more than the %d-byte limit", path, MaxCorpusBytes)
	}
	return text, why, nil
}

// readText reads r to its end, or to one byte past MaxCorpusBytes, unless its first 64 KB
// look binary (binaryReason, which looks at no more): then it stops there and says why, so
// that /dev/zero or a binary stream is refused at once rather than after a gigabyte.
func readText(r io.Reader) (text []byte, why string, err error) {
	head := make([]byte, binaryHead)
	n, err := io.ReadFull(r, head)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return nil, "", err
	}
	if why := binaryReason(head[:n]); why != "" {
		return nil, why, nil
	}
	if n < len(head) { // the whole stream
		return head[:n], "", nil
	}
	buf := bytes.NewBuffer(head)
	_, err = buf.ReadFrom(io.LimitReader(r, MaxCorpusBytes+1-int64(n)))
	return buf.Bytes(), "", err
}

func loadDir(root, glob string) (Corpus, error) {
	// WalkDir does not follow links: walk the folder a linked root names. Links inside it are
	// followed to files outside the folder (one inside is read as itself), not to folders
	// (which could loop).
	realDir, realErr := filepath.EvalSymlinks(root)
	dir := root
	if info, err := os.Lstat(root); err == nil && info.Mode()&fs.ModeSymlink != 0 {
		if realErr != nil {
			return Corpus{}, fmt.Errorf("corpus: %w", realErr)
		}
		dir = realDir
	}
	inside := func(p string) bool { // whether the resolved path p lies in the folder
		rel, err := filepath.Rel(realDir, p)
		return realErr == nil && err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
	}
	var paths, unreadable []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p != dir && d != nil && d.IsDir() {
				unreadable = append(unreadable, p) // skipped; the caller says so
				return filepath.SkipDir
			}
			return err
		}
		if d.IsDir() {
			if p != dir && len(d.Name()) > 1 && d.Name()[0] == '.' {
				return filepath.SkipDir // .git and other hidden directories
			}
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			if info, err := os.Stat(p); err != nil || !info.Mode().IsRegular() {
				return nil // a broken link, or one to a folder or device
			}
			if target, err := filepath.EvalSymlinks(p); err != nil || inside(target) {
				return nil
			}
		} else if !d.Type().IsRegular() {
			return nil
		}
		if glob != "" {
			if ok, _ := filepath.Match(glob, d.Name()); !ok {
				return nil
			}
		}
		paths = append(paths, p)
		return nil
	})
	if err != nil {
		return Corpus{}, fmt.Errorf("reading directory %s: %w", root, err)
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	files, skipped := 0, 0
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return Corpus{}, fmt.Errorf("corpus: %w", err)
		}
		if int64(buf.Len())+info.Size() > MaxCorpusBytes {
			return Corpus{}, fmt.Errorf("files under %s add up to more than the %d-byte limit", root, MaxCorpusBytes)
		}
		text, why, err := readFile(p, info.Size())
		if errors.Is(err, fs.ErrPermission) {
			unreadable = append(unreadable, p) // skipped, as an unreadable folder is
			continue
		}
		if err != nil {
			return Corpus{}, err
		}
		if why != "" || len(text) == 0 {
			skipped++
			continue
		}
		buf.Write(text)
		if text[len(text)-1] != '\n' {
			buf.WriteByte('\n')
		}
		files++
	}
	if files == 0 {
		what := "no files"
		if glob != "" {
			what = fmt.Sprintf("no files matching %q", glob)
		}
		if skipped > 0 {
			what = fmt.Sprintf("%s (%d binary or empty files skipped)", what+" with text", skipped)
		}
		if len(unreadable) > 0 {
			what = fmt.Sprintf("%s (could not read: %s)", what, strings.Join(unreadable, ", "))
		}
		return Corpus{}, fmt.Errorf("directory %s has %s", root, what)
	}
	return Corpus{Text: buf.Bytes(), Source: root, Files: files, Unreadable: unreadable}, nil
}

// binaryReason says why text looks like binary data rather than text, or "" if it looks like
// text: its first 64 KB hold a NUL byte, or more than 5% of them are control characters other
// than tab, newline, carriage return and form feed. Bytes that are not UTF-8 are text: a
// byte-level model trains on Latin-1 or any other 8-bit encoding as well. (Compressed and
// random data hold NUL bytes within a few hundred bytes.)
func binaryReason(text []byte) string {
	head := text[:min(len(text), binaryHead)]
	if i := bytes.IndexByte(head, 0); i >= 0 {
		return fmt.Sprintf("NUL byte at offset %d", i)
	}
	bad := 0
	for _, b := range head {
		if b < 32 && b != '\t' && b != '\n' && b != '\r' && b != '\f' {
			bad++
		}
	}
	if len(head) > 0 && bad*20 > len(head) {
		return fmt.Sprintf("%d of its first %d bytes are control characters", bad, len(head))
	}
	return ""
}

// binaryHead is how much of a corpus binaryReason looks at.
const binaryHead = 1 << 16

// TrainFraction is the share of the corpus used for training; the rest, at the end, is the
// validation split.
const TrainFraction = 0.9

// Split is a corpus cut into a training part (the first 90%) and a validation part (the rest).
// When a part is shorter than one window of ctx+1 bytes it is widened to one window, taken
// from the corpus edge it lies on; TrainWidened or ValWidened then says so.
type Split struct {
	Train, Val               []byte
	Ctx                      int
	TrainWidened, ValWidened bool
}

// Overlap reports whether a part was widened, so that validation overlaps training.
func (s Split) Overlap() bool { return s.TrainWidened || s.ValWidened }

// NewSplit splits text for a model with context ctx. The corpus needs at least ctx+2 bytes:
// one window of ctx inputs and their ctx targets, and one more byte so that there is more than
// one window.
func NewSplit(text []byte, ctx int) (Split, error) {
	n := len(text)
	if n < ctx+2 {
		return Split{}, fmt.Errorf("corpus has %d bytes, too short for context %d: it needs at least ctx+2 = %d bytes", n, ctx, ctx+2)
	}
	nTrain := int(float64(n) * TrainFraction)
	s := Split{Ctx: ctx, Train: text[:nTrain], Val: text[nTrain:]}
	if len(s.Train) < ctx+1 {
		s.Train, s.TrainWidened = text[:ctx+1], true
	}
	if len(s.Val) < ctx+1 {
		s.Val, s.ValWidened = text[n-ctx-1:], true
	}
	return s, nil
}

// windowStarts is the number of places a window of ctx+1 bytes can start in a text of n bytes: 0 … n−ctx−1.
func windowStarts(n, ctx int) int { return n - ctx }

// Draw picks a window start in [0, count) for (seed, stream, row): the 64-bit hash of the three
// scaled to the range by a 128-bit multiply. Batches are thus a pure function of the seed, the
// step and the row, so a resumed run sees exactly the batches it would have seen, and every
// backend sees the same ones.
func Draw(seed uint64, stream uint64, row int, count int) int {
	h := mix64(mix64(seed^0x7469_6e79_6770_7421) + stream*0x9E3779B97F4A7C15 + uint64(row))
	hi, _ := bits.Mul64(h, uint64(count))
	return int(hi)
}

func mix64(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
	x = (x ^ (x >> 27)) * 0x94D049BB133111EB
	return x ^ (x >> 31)
}

// Streams of Draw: training step s uses stream s (s ≥ 1); validation batch i uses stream
// ValStream+i, far from any step number.
const ValStream = 1 << 62

// TrainBatch fills inputs and targets ([B·T] each, T = ctx) with the B training windows of step
// (1-based): row r is the window starting at Draw(seed, step, r, starts).
func (s Split) TrainBatch(seed uint64, step, B int, inputs, targets []int32) {
	s.fill(s.Train, seed, uint64(step), B, inputs, targets)
}

// ValBatch fills inputs and targets with validation batch i, the same windows every time.
func (s Split) ValBatch(seed uint64, i, B int, inputs, targets []int32) {
	s.fill(s.Val, seed, ValStream+uint64(i), B, inputs, targets)
}

func (s Split) fill(text []byte, seed, stream uint64, B int, inputs, targets []int32) {
	T := s.Ctx
	starts := windowStarts(len(text), T)
	for r := 0; r < B; r++ {
		off := Draw(seed, stream, r, starts)
		w := text[off : off+T+1]
		for t := 0; t < T; t++ {
			inputs[r*T+t] = int32(w[t])
			targets[r*T+t] = int32(w[t+1])
		}
	}
}

// Tokens converts text to tokens.
func Tokens(text []byte) []int32 {
	out := make([]int32, len(text))
	for i, b := range text {
		out[i] = int32(b)
	}
	return out
}
