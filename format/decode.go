package format

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
)

// prefixLen is the size of magic, version and header length.
const prefixLen = 12

// A FormatError reports that the input is not a valid .tinygpt file, and why.
type FormatError struct {
	Msg string // what is wrong
	Err error  // the underlying error, if any (from encoding/json)
}

// Error returns the message, prefixed with "format: ".
func (e *FormatError) Error() string {
	if e.Err != nil {
		return "format: " + e.Msg + ": " + e.Err.Error()
	}
	return "format: " + e.Msg
}

// Unwrap returns the underlying error, if any.
func (e *FormatError) Unwrap() error { return e.Err }

func formatErr(format string, args ...any) error {
	return &FormatError{Msg: fmt.Sprintf(format, args...)}
}

// Decode parses a whole .tinygpt file held in memory. The returned File does
// not share memory with data. Any error is a *[FormatError].
//
// A weights-only fp32 file (includesOptimizerState false) comes back with
// nil M and V and Header.WeightDtype "fp32", even if its header has no
// weightDtype key, so that [Encode] writes the same layout again.
func Decode(data []byte) (*File, error) {
	return decode(bytes.NewReader(data), int64(len(data)))
}

// decode parses a .tinygpt file of size bytes read from r. It checks the header against size
// before it reads the state, which it decodes a piece at a time, so that reading a file holds
// little more than the File it returns.
func decode(r io.Reader, size int64) (*File, error) {
	f, err := ReadHeader(r, size)
	if err != nil {
		return nil, err
	}
	h := &f.Header
	if err := readState(r, f, h.Config, h.WeightDtype, h.IncludesOptimizerState); err != nil {
		return nil, readErr(err)
	}
	if d := nonFinite(f, h.Config); d != "" {
		return nil, formatErr("%s: %v, so the file is damaged", d, ErrNotFinite)
	}
	return f, nil
}

// ReadHeader reads a .tinygpt file of size bytes from r as far as its step: the prefix, the
// header and the step, with every check that [Decode] makes of them (the state's size against
// the config and size included), but not the state, which it leaves unread in r. The returned
// File has its Header and Step and no weights. It tells what a file holds (a run's settings,
// its step, its loss history) by reading kilobytes where the whole file may be gigabytes. Any
// error about the content is a *[FormatError].
func ReadHeader(r io.Reader, size int64) (*File, error) {
	var prefix [prefixLen]byte
	if size < 0 {
		return nil, fmt.Errorf("format: a file cannot be %d bytes long", size)
	}
	if size < prefixLen {
		n, _ := io.ReadFull(r, prefix[:size])
		if n >= 4 && string(prefix[:4]) != Magic {
			return nil, formatErr("not a .tinygpt file: magic is %q, want %q", prefix[:4], Magic)
		}
		return nil, formatErr("file is %d bytes, too short for the %d-byte prefix (magic, version, header length)", size, prefixLen)
	}
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return nil, readErr(err)
	}
	if string(prefix[:4]) != Magic {
		return nil, formatErr("not a .tinygpt file: magic is %q, want %q", prefix[:4], Magic)
	}
	if v := binary.LittleEndian.Uint32(prefix[4:]); v != Version {
		return nil, formatErr("unsupported version %d, want %d", v, Version)
	}
	hlen := int64(binary.LittleEndian.Uint32(prefix[8:]))
	if hlen > size-prefixLen {
		return nil, formatErr("header length %s exceeds file size (%d bytes): the file is cut short, or not a model file", humanBytes(uint64(hlen)), size)
	}
	hdrBytes := make([]byte, hlen)
	if _, err := io.ReadFull(r, hdrBytes); err != nil {
		return nil, readErr(err)
	}

	f := new(File)
	h := &f.Header
	if err := json.Unmarshal(hdrBytes, h); err != nil {
		return nil, &FormatError{Msg: "header is not valid JSON", Err: err}
	}
	hdrBytes = nil // the header's bytes (a stored corpus, maybe large) may go while the state is read
	if h.Version != 0 && h.Version != Version {
		return nil, formatErr("header version %d does not match container version %d", h.Version, Version)
	}
	c := h.Config
	if c == (Config{}) {
		return nil, formatErr("header has no config")
	}
	if err := c.Validate(); err != nil {
		return nil, formatErr("%v", err)
	}
	if h.Manifest != nil {
		if err := checkManifest(h.Manifest, c); err != nil {
			return nil, err
		}
	}

	dtype := h.WeightDtype
	withOpt := h.IncludesOptimizerState
	switch dtype {
	case DtypeFP16, DtypeInt4:
		if withOpt {
			return nil, formatErr("weightDtype %q file claims includesOptimizerState", dtype)
		}
	}
	need, what, err := stateSize(c, dtype, withOpt)
	if err != nil {
		return nil, formatErr("%v", err)
	}
	have := size - prefixLen - hlen
	if have != need {
		if have > need {
			return nil, formatErr("state has %d bytes, config needs %d (%s): %d trailing bytes", have, need, what, have-need)
		}
		return nil, formatErr("state has %d bytes, config needs %d (%s)", have, need, what)
	}
	if h.StateByteLength != 0 && int64(h.StateByteLength) != have {
		return nil, formatErr("header stateByteLength %d does not match the state's %d bytes", h.StateByteLength, have)
	}
	if dtype != DtypeInt4 && (h.Int4BlockSize != 0 || h.Int4ScalesBytes != 0 || h.Int4PackedBytes != 0) {
		return nil, formatErr("int4 keys in a file whose weightDtype is %q", dtype)
	}
	if dtype == DtypeInt4 {
		blocks := int(int4Blocks(c))
		if h.Int4BlockSize != Int4BlockSize {
			return nil, formatErr("int4BlockSize is %d, want %d", h.Int4BlockSize, Int4BlockSize)
		}
		if h.Int4ScalesBytes != 2*blocks {
			return nil, formatErr("int4ScalesBytes is %d, config needs %d (%d blocks)", h.Int4ScalesBytes, 2*blocks, blocks)
		}
		if h.Int4PackedBytes != Int4BlockSize/2*blocks {
			return nil, formatErr("int4PackedBytes is %d, config needs %d (%d blocks)", h.Int4PackedBytes, Int4BlockSize/2*blocks, blocks)
		}
	}

	// The state size matches the config and size, so every size below is bounded by the
	// file's and fits in an int.
	var step [4]byte
	if _, err := io.ReadFull(r, step[:]); err != nil {
		return nil, readErr(err)
	}
	f.Step = int32(binary.LittleEndian.Uint32(step[:]))
	if f.Step < 0 {
		return nil, formatErr("step is %d; a step count cannot be negative", f.Step)
	}
	if dtype == DtypeFull && !withOpt {
		h.WeightDtype = DtypeFP32 // say so explicitly: Encode writes "" as the full state
	}
	return f, nil
}

// readState reads the state after the step: the weights in dtype, and with withOpt the two
// moments, interleaved tensor by tensor.
func readState(r io.Reader, f *File, c Config, dtype string, withOpt bool) error {
	p := ParamCount(c)
	sizes := tensorSizes(c)
	buf := make([]byte, min(1<<20, 4*p))
	f.Weights = make([]float32, p)
	switch dtype {
	case DtypeFull, DtypeFP32:
		if !withOpt {
			return readFloats(r, f.Weights, buf)
		}
		f.M = make([]float32, p)
		f.V = make([]float32, p)
		off := 0
		for _, n := range sizes {
			for _, dst := range [][]float32{f.Weights, f.M, f.V} {
				if err := readFloats(r, dst[off:off+n], buf); err != nil {
					return err
				}
			}
			off += n
		}
	case DtypeFP16:
		for w := f.Weights; len(w) > 0; {
			b := buf[:2*min(len(w), len(buf)/2)]
			if _, err := io.ReadFull(r, b); err != nil {
				return err
			}
			for i := range len(b) / 2 {
				w[i] = Float16ToFloat32(binary.LittleEndian.Uint16(b[2*i:]))
			}
			w = w[len(b)/2:]
		}
	case DtypeInt4:
		// About a seventh of the weights' size: read whole.
		blocks := int(int4Blocks(c))
		raw := make([]byte, 2*blocks+Int4BlockSize/2*blocks)
		if _, err := io.ReadFull(r, raw); err != nil {
			return err
		}
		scales := make([]uint16, blocks)
		for i := range scales {
			scales[i] = binary.LittleEndian.Uint16(raw[2*i:])
		}
		dequantizeInt4(scales, raw[2*blocks:], sizes, f.Weights)
	}
	return nil
}

// readFloats fills dst with little-endian float32s read from r, through buf.
func readFloats(r io.Reader, dst []float32, buf []byte) error {
	for len(dst) > 0 {
		b := buf[:4*min(len(dst), len(buf)/4)]
		if _, err := io.ReadFull(r, b); err != nil {
			return err
		}
		for i := range len(b) / 4 {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		dst = dst[len(b)/4:]
	}
	return nil
}

// readErr reports a read that failed after the file's size had been checked: a file cut
// short by another program while it was read, or an I/O error.
func readErr(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return &FormatError{Msg: "the file ended early while it was read (did another program change it?)", Err: err}
	}
	return fmt.Errorf("format: reading: %w", err)
}

// ErrNotFinite is wrapped by Encode's and WriteFile's error when a weight or optimizer moment
// is not a finite number (or a second moment is negative): a model whose training diverged, or
// an fp16 copy of weights beyond ±65504. No file can hold it.
var ErrNotFinite = errors.New("a model holds finite numbers only")

// nonFinite describes the first weight or optimizer moment that is not a finite number (or a
// second moment that is negative), or returns "". No training that has not diverged produces
// one, so a file holding one is damaged (and a model loaded from it would only produce NaN);
// Encode refuses to write one.
func nonFinite(f *File, c Config) string {
	for _, e := range Manifest(c) {
		n := e.Size()
		for _, t := range []struct {
			what string
			v    []float32
		}{{"weight", f.Weights}, {"first moment", f.M}, {"second moment", f.V}} {
			if t.v == nil {
				continue
			}
			for i, x := range t.v[e.FloatOffset : e.FloatOffset+n] {
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) || t.what == "second moment" && x < 0 {
					return fmt.Sprintf("%s %d of %s is %v", t.what, i, e.Name, x)
				}
			}
		}
	}
	return ""
}

// checkManifest reports the first entry of m that differs from the manifest
// of c.
func checkManifest(m []ManifestEntry, c Config) error {
	want := Manifest(c)
	for i := range max(len(m), len(want)) {
		switch {
		case i >= len(m):
			return formatErr("manifest has %d entries, config needs %d (first missing: %q)", len(m), len(want), want[i].Name)
		case i >= len(want):
			return formatErr("manifest has %d entries, config needs %d (first extra: %q)", len(m), len(want), m[i].Name)
		}
		g, w := m[i], want[i]
		switch {
		case g.Name != w.Name:
			return formatErr("manifest entry %d is %q, config needs %q", i, g.Name, w.Name)
		case !slices.Equal(g.Shape, w.Shape):
			return formatErr("manifest entry %d (%q) has shape %v, config needs %v", i, g.Name, g.Shape, w.Shape)
		case g.FloatOffset != w.FloatOffset:
			return formatErr("manifest entry %d (%q) has floatOffset %d, config needs %d", i, g.Name, g.FloatOffset, w.FloatOffset)
		}
	}
	return nil
}

// humanBytes formats a byte count for an error message.
func humanBytes(n uint64) string {
	switch {
	case n < 10_000:
		return fmt.Sprintf("%d bytes", n)
	case n < 1_000_000:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	case n < 1_000_000_000:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%.1f GB", float64(n)/1e9)
}

// Read reads a whole .tinygpt file from r and decodes it. It allocates no
// more than the stream holds, whatever the header claims.
func Read(r io.Reader) (*File, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("format: reading: %w", err)
	}
	return Decode(data)
}

// ReadFile reads and decodes the .tinygpt file at path, a piece at a time: it holds little more
// than the File it returns.
func ReadFile(path string) (*File, error) {
	file, size, err := openModel(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	f, err := decode(file, size)
	if err == nil {
		if n, _ := file.Read(make([]byte, 1)); n > 0 {
			err = formatErr("the file grew while it was read (did another program change it?)")
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// ReadFileHeader reads the .tinygpt file at path as far as its step (see ReadHeader): what a
// model is, its settings and progress, read in kilobytes where the file may be gigabytes.
func ReadFileHeader(path string) (*File, error) {
	file, size, err := openModel(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	f, err := ReadHeader(file, size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// openModel opens the file at path to be read as a model and returns its size. Only a regular
// file is: a device such as /dev/zero would be read into memory for ever, and opening a pipe
// waits for a writer.
func openModel(path string) (*os.File, int64, error) {
	if fi, err := os.Stat(path); err != nil {
		return nil, 0, err
	} else if !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("%s: not a regular file (%s), so not a model file", path, fileKind(fi.Mode()))
	}
	file, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	fi, err := file.Stat()
	if err == nil && fi.Size() == 0 {
		// The files of /proc and /sys say they are empty and hold text all the same.
		if n, _ := file.Read(make([]byte, 1)); n > 0 {
			err = fmt.Errorf("%s: the system gives its size as 0 but it holds data (a file of /proc or /sys?), so not a model file", path)
		}
	}
	if err != nil {
		file.Close()
		return nil, 0, err
	}
	return file, fi.Size(), nil
}

// fileKind names the kind of a file that is not a regular one, for errors.
func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a folder"
	case m&os.ModeNamedPipe != 0:
		return "a pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return "not a plain file"
}
