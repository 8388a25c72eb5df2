package format

import (
	"encoding/binary"
	"encoding/json"
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
	if len(data) < prefixLen {
		if len(data) >= 4 && string(data[:4]) != Magic {
			return nil, formatErr("not a .tinygpt file: magic is %q, want %q", data[:4], Magic)
		}
		return nil, formatErr("file is %d bytes, too short for the %d-byte prefix (magic, version, header length)", len(data), prefixLen)
	}
	if string(data[:4]) != Magic {
		return nil, formatErr("not a .tinygpt file: magic is %q, want %q", data[:4], Magic)
	}
	if v := binary.LittleEndian.Uint32(data[4:]); v != Version {
		return nil, formatErr("unsupported version %d, want %d", v, Version)
	}
	hlen := uint64(binary.LittleEndian.Uint32(data[8:]))
	if hlen > uint64(len(data)-prefixLen) {
		return nil, formatErr("header length %s exceeds file size (%d bytes)", humanBytes(hlen), len(data))
	}
	hdrBytes := data[prefixLen : prefixLen+int(hlen)]
	state := data[prefixLen+int(hlen):]

	f := new(File)
	h := &f.Header
	if err := json.Unmarshal(hdrBytes, h); err != nil {
		return nil, &FormatError{Msg: "header is not valid JSON", Err: err}
	}
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
	have := int64(len(state))
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

	// The state size matches the config, so every size below is bounded by
	// len(data) and fits in an int.
	p := ParamCount(c)
	f.Step = int32(binary.LittleEndian.Uint32(state))
	if f.Step < 0 {
		return nil, formatErr("step is %d; a step count cannot be negative", f.Step)
	}
	body := state[4:]
	sizes := tensorSizes(c)
	switch dtype {
	case DtypeFull, DtypeFP32:
		f.Weights = make([]float32, p)
		if !withOpt {
			// Say so explicitly: Encode writes "" as the full state.
			h.WeightDtype = DtypeFP32
			for i := range f.Weights {
				f.Weights[i] = math.Float32frombits(binary.LittleEndian.Uint32(body[4*i:]))
			}
			break
		}
		f.M = make([]float32, p)
		f.V = make([]float32, p)
		off := 0
		for _, n := range sizes {
			for _, dst := range [][]float32{f.Weights, f.M, f.V} {
				for i := off; i < off+n; i++ {
					dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(body))
					body = body[4:]
				}
			}
			off += n
		}
	case DtypeFP16:
		f.Weights = make([]float32, p)
		for i := range f.Weights {
			f.Weights[i] = Float16ToFloat32(binary.LittleEndian.Uint16(body[2*i:]))
		}
	case DtypeInt4:
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
		scales := make([]uint16, blocks)
		for i := range scales {
			scales[i] = binary.LittleEndian.Uint16(body[2*i:])
		}
		f.Weights = make([]float32, p)
		dequantizeInt4(scales, body[2*blocks:], sizes, f.Weights)
	}
	if err := checkFinite(f, c); err != nil {
		return nil, err
	}
	return f, nil
}

// checkFinite reports the first weight or optimizer moment that is not a finite number (or a
// second moment that is negative). No training produces one, so a file holding one is damaged
// (and a model loaded from it would only produce NaN); Encode refuses to write one (an fp16
// copy of weights beyond ±65504, say).
func checkFinite(f *File, c Config) error {
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
					return formatErr("%s %d of %s is %v: a model holds finite numbers only, so the file is damaged", t.what, i, e.Name, x)
				}
			}
		}
	}
	return nil
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

// ReadFile reads and decodes the .tinygpt file at path.
func ReadFile(path string) (*File, error) {
	// Only a regular file has an end: a device such as /dev/zero would be read into memory for
	// ever, and opening a pipe waits for a writer.
	if fi, err := os.Stat(path); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%s), so not a model file", path, fileKind(fi.Mode()))
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
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
