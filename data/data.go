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
	"strconv"
	"strings"
	"unicode"

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
	// Skipped lists the files below a directory that were left out as not text, each with why:
	// "path (binary)", "(UTF-16)", "(UTF-32)" or "(empty)".
	Skipped []string
}

// MaxCorpusBytes bounds what Load reads, so a mistaken path cannot exhaust memory.
const MaxCorpusBytes = 1 << 30

// maxCorpus is MaxCorpusBytes in words, for messages.
const maxCorpus = "1 GiB"

// Builtin returns the corpus embedded in the binary.
func Builtin() Corpus {
	return Corpus{Text: builtin.Text(), Source: builtin.Name, Files: 1}
}

// Load reads a corpus from path: "" for the built-in corpus, "-" for standard input, a file, or
// a directory, whose files matching glob (a filepath.Match pattern on the file name; "" for
// all) are concatenated in lexical path order, hidden files and folders (names that begin
// with a dot) left out. Files that are not text (binary data, UTF-16 or UTF-32) are refused
// for a single file and skipped in a directory.
func Load(path, glob string, stdin io.Reader) (Corpus, error) {
	if glob != "" {
		if _, err := filepath.Match(glob, "x"); err != nil {
			return Corpus{}, fmt.Errorf("bad --glob pattern %q: %w", glob, err)
		}
		if strings.ContainsRune(glob, '/') || strings.ContainsRune(glob, filepath.Separator) {
			return Corpus{}, fmt.Errorf("--glob %q: a pattern matches file names, not paths (files in every folder below --data are matched): use one such as '*.txt'", glob)
		}
	}
	switch path {
	case "":
		return Builtin(), nil
	case "-":
		text, nt, err := readText(stdin, 0, MaxCorpusBytes)
		switch {
		case errors.Is(err, errTooBig):
			return Corpus{}, fmt.Errorf("standard input holds more than the %s limit of a corpus", maxCorpus)
		case err != nil:
			return Corpus{}, fmt.Errorf("reading standard input: %w", err)
		case nt.kind != "":
			return Corpus{}, nt.refuse("standard input")
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
		text, nt, err := readFile(path, MaxCorpusBytes)
		switch {
		case errors.Is(err, errTooBig):
			return Corpus{}, fmt.Errorf("%s holds more than the %s limit of a corpus", path, maxCorpus)
		case err != nil:
			return Corpus{}, err
		case nt.kind != "":
			return Corpus{}, nt.refuse(path)
		}
		return Corpus{Text: text, Source: path, Files: 1}, nil
	}
	return loadDir(path, glob)
}

// errTooBig is readText's error for a text past its limit.
var errTooBig = errors.New("more bytes than the limit")

// readFile reads the corpus file at path as readText does, expecting the size the opened file
// has (0 for a pipe or a device, which have none).
func readFile(path string, limit int64) ([]byte, notText, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, notText{}, fmt.Errorf("corpus: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, notText{}, fmt.Errorf("corpus: %w", err)
	}
	text, nt, err := readText(f, info.Size(), limit)
	if err != nil && !errors.Is(err, errTooBig) {
		err = fmt.Errorf("corpus: %w", err)
	}
	return text, nt, err
}

// readText reads r to its end, expecting size bytes (0 if unknown), and returns errTooBig
// once more than limit bytes have come. It first reads 64 KB: if they are not text (sniff),
// it stops there and says why, so that /dev/zero or a binary stream is refused at once rather
// than after a gigabyte; then, where size is already past the limit, it stops too. The rest
// goes into one buffer of the expected size where there is one (a file is then read with no
// copy), else into pieces joined at the end: at most twice the text in memory, where doubling
// one buffer as it filled took up to four times. A NUL byte anywhere makes the whole not text
// (binary data after text: a log padded with NULs, a script carrying a payload).
func readText(r io.Reader, size, limit int64) ([]byte, notText, error) {
	want := int64(binaryHead)
	if size > 0 && size < binaryHead {
		want = size + 1 // a small file: a buffer of its size (and a byte to see the end)
	}
	head := make([]byte, want)
	n, err := io.ReadFull(r, head)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return nil, notText{}, err
	}
	whole := n < len(head)
	head = head[:n]
	if nt := sniff(head); nt.kind != "" {
		return nil, nt, nil
	}
	if int64(n) > limit || size > limit {
		return nil, notText{}, errTooBig
	}
	if whole {
		return head, notText{}, nil
	}
	room := int64(2 * binaryHead)
	if size > 0 {
		room = max(size+1, int64(n)+1) // a byte more, to see the end
	}
	piece := make([]byte, n, room)
	copy(piece, head)
	var pieces [][]byte
	total := int64(n)
	for {
		if len(piece) == cap(piece) {
			pieces = append(pieces, piece)
			piece = make([]byte, 0, min(2*cap(piece), 64<<20))
		}
		m, err := r.Read(piece[len(piece):cap(piece)])
		piece = piece[:len(piece)+m]
		if total += int64(m); total > limit {
			return nil, notText{}, errTooBig
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, notText{}, err
		}
	}
	text := piece
	if len(pieces) > 0 {
		text = make([]byte, 0, total)
		for _, p := range pieces {
			text = append(text, p...)
		}
		text = append(text, piece...)
	}
	if i := bytes.IndexByte(text[n:], 0); i >= 0 {
		return nil, notText{"binary", fmt.Sprintf("NUL byte at offset %d", n+i)}, nil
	}
	return text, notText{}, nil
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
	var paths, unreadable, skipped []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p != dir && d != nil && d.IsDir() {
				unreadable = append(unreadable, p) // skipped; the caller says so
				return filepath.SkipDir
			}
			return err
		}
		hidden := p != dir && len(d.Name()) > 1 && d.Name()[0] == '.'
		if d.IsDir() {
			if hidden {
				return filepath.SkipDir // .git and other hidden folders
			}
			return nil
		}
		if hidden {
			return nil // .env, .npmrc and other hidden files: settings, often secrets
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
	// Each file's text is read whole (a file of its size, no copy), then all are joined.
	var texts [][]byte
	total := int64(0) // with a newline after each text that lacks one
	for _, p := range paths {
		text, nt, err := readFile(p, MaxCorpusBytes-total)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// Gone since the folder was listed: an editor's temporary file, a rotated log.
		case errors.Is(err, fs.ErrPermission):
			unreadable = append(unreadable, p) // skipped, as an unreadable folder is
		case errors.Is(err, errTooBig):
			return Corpus{}, fmt.Errorf("the text files under %s add up to more than the %s limit of a corpus (reached with %s): pick fewer with --glob, or a smaller folder", root, maxCorpus, showPath(p))
		case err != nil:
			return Corpus{}, err
		case nt.kind != "":
			skipped = append(skipped, p+" ("+nt.kind+")")
		case len(text) == 0:
			skipped = append(skipped, p+" (empty)")
		default:
			texts = append(texts, text)
			total += int64(len(text))
			if text[len(text)-1] != '\n' {
				total++
			}
		}
	}
	if len(texts) == 0 {
		what := "no files"
		if glob != "" {
			what = fmt.Sprintf("no files matching %q", glob)
		}
		if len(skipped) > 0 {
			what = fmt.Sprintf("%s with text (%d binary, UTF-16, UTF-32 or empty files skipped)", what, len(skipped))
		}
		if len(unreadable) > 0 {
			what = fmt.Sprintf("%s (could not read: %s)", what, listPaths(unreadable))
		}
		return Corpus{}, fmt.Errorf("directory %s has %s", root, what)
	}
	text := texts[0] // one file: its own buffer, which has room for a last newline
	if len(texts) > 1 {
		text = make([]byte, 0, total)
	}
	for i, t := range texts {
		if i > 0 || len(texts) > 1 {
			text = append(text, t...)
		}
		if t[len(t)-1] != '\n' {
			text = append(text, '\n')
		}
	}
	return Corpus{Text: text, Source: root, Files: len(texts), Unreadable: unreadable, Skipped: skipped}, nil
}

// listPaths lists the first few of paths for a message (showPath), and how many more there are.
func listPaths(paths []string) string {
	const shown = 5
	list := make([]string, 0, shown)
	for _, p := range paths[:min(len(paths), shown)] {
		list = append(list, showPath(p))
	}
	s := strings.Join(list, ", ")
	if len(paths) > shown {
		s += fmt.Sprintf(" and %d more", len(paths)-shown)
	}
	return s
}

// showPath returns p for a message: as it is, or quoted with its escapes where it holds a
// character that is not printable (a file name can hold any byte but / and NUL, terminal
// controls included).
func showPath(p string) string {
	for _, r := range p {
		if !unicode.IsPrint(r) {
			return strconv.Quote(p)
		}
	}
	return p
}

// A notText says why bytes are not text to train on: kind is "binary", "UTF-16" or "UTF-32",
// and detail what shows it. The zero value is text.
type notText struct{ kind, detail string }

// refuse returns the error that refuses name's bytes as a corpus.
func (n notText) refuse(name string) error {
	if n.kind == "binary" {
		return fmt.Errorf("%s looks like a binary file (%s); TinyGPT trains on text", name, n.detail)
	}
	return fmt.Errorf("%s is %s text (%s); TinyGPT reads text as bytes, in UTF-8 or a one-byte encoding: convert it first, e.g. iconv -f %s -t UTF-8",
		name, n.kind, n.detail, n.kind)
}

// sniff says why text is not text to train on, judging by its first 64 KB, or returns the
// zero notText: they hold a NUL byte (UTF-16 or UTF-32 text, by a byte-order mark or every
// other byte NUL, else binary data), or more than 5% of them are control characters other
// than tab, newline, carriage return and form feed. Bytes that are not UTF-8 are text: a
// byte-level model trains on Latin-1 or any other 8-bit encoding as well. (Compressed and
// random data hold NUL bytes within a few hundred bytes.)
func sniff(text []byte) notText {
	head := text[:min(len(text), binaryHead)]
	if i := bytes.IndexByte(head, 0); i >= 0 {
		bom := "it begins with a byte-order mark"
		switch {
		case bytes.HasPrefix(head, []byte{0xff, 0xfe, 0, 0}) || bytes.HasPrefix(head, []byte{0, 0, 0xfe, 0xff}):
			return notText{"UTF-32", bom}
		case bytes.HasPrefix(head, []byte{0xff, 0xfe}) || bytes.HasPrefix(head, []byte{0xfe, 0xff}):
			return notText{"UTF-16", bom}
		case utf16Like(head):
			return notText{"UTF-16", "every other byte is NUL"}
		}
		return notText{"binary", fmt.Sprintf("NUL byte at offset %d", i)}
	}
	bad := 0
	for _, b := range head {
		if b < 32 && b != '\t' && b != '\n' && b != '\r' && b != '\f' {
			bad++
		}
	}
	if len(head) > 0 && bad*20 > len(head) {
		return notText{"binary", fmt.Sprintf("%d of its first %d bytes are control characters", bad, len(head))}
	}
	return notText{}
}

// utf16Like reports whether the first bytes of b look like UTF-16 text of mostly Latin
// letters: in nine of ten pairs of bytes, one byte is NUL and the other not, on the same side.
func utf16Like(b []byte) bool {
	b = b[:min(len(b), 512)&^1]
	if len(b) < 8 {
		return false
	}
	var first, second int
	for i := 0; i < len(b); i += 2 {
		switch {
		case b[i] == 0 && b[i+1] != 0:
			first++
		case b[i] != 0 && b[i+1] == 0:
			second++
		}
	}
	return max(first, second)*10 >= len(b)/2*9
}

// binaryHead is how much of a corpus sniff looks at.
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
