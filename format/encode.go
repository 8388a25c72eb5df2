package format

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"tinygpt/internal/atomicfile"
)

// encoding is a File checked and prepared for writing.
type encoding struct {
	f        *File
	header   []byte // the JSON header
	dtype    string
	withOpt  bool
	sizes    []int    // tensor sizes in manifest order
	scales   []uint16 // int4 only
	packed   []byte   // int4 only
	stateLen int64
}

// prepare checks f and builds the header it will be written with.
func prepare(f *File) (*encoding, error) {
	if f == nil {
		return nil, errors.New("format: encode: nil File")
	}
	if f.Step < 0 {
		return nil, fmt.Errorf("format: encode: step %d is negative", f.Step)
	}
	h := f.Header // a copy; f is not modified
	c := h.Config
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("format: encode: %w", err)
	}
	p := ParamCount(c)
	if p == 0 {
		return nil, fmt.Errorf("format: encode: config too large for this platform")
	}
	if len(f.Weights) != p {
		return nil, fmt.Errorf("format: encode: %d weights, config needs %d", len(f.Weights), p)
	}
	e := &encoding{f: f, dtype: h.WeightDtype, sizes: tensorSizes(c)}
	switch e.dtype {
	case DtypeFull:
		e.withOpt = true
	case DtypeFP32:
		e.withOpt = f.M != nil || f.V != nil
		if e.withOpt && (f.M == nil || f.V == nil) {
			return nil, errors.New("format: encode: fp32 file with only one of the moments M and V")
		}
	case DtypeFP16, DtypeInt4:
	default:
		return nil, fmt.Errorf("format: encode: unsupported weightDtype %q", e.dtype)
	}
	if e.withOpt {
		if f.M != nil && len(f.M) != p {
			return nil, fmt.Errorf("format: encode: moment M has %d values, config needs %d", len(f.M), p)
		}
		if f.V != nil && len(f.V) != p {
			return nil, fmt.Errorf("format: encode: moment V has %d values, config needs %d", len(f.V), p)
		}
	}
	if h.Manifest == nil {
		h.Manifest = Manifest(c)
	} else if err := checkManifest(h.Manifest, c); err != nil {
		return nil, fmt.Errorf("format: encode: %s", err.(*FormatError).Msg)
	}
	if d := nonFinite(f, c); d != "" {
		return nil, fmt.Errorf("format: encode: %s: %w", d, ErrNotFinite)
	}
	if h.LossHistory == nil {
		h.LossHistory = []LossPoint{} // the original always writes an array
	}
	var err error
	e.stateLen, _, err = stateSize(c, e.dtype, e.withOpt)
	if err != nil {
		return nil, fmt.Errorf("format: encode: %w", err)
	}
	h.Version = Version
	h.IncludesOptimizerState = e.withOpt
	h.StateByteLength = int(e.stateLen)
	h.Int4BlockSize, h.Int4ScalesBytes, h.Int4PackedBytes = 0, 0, 0
	if e.dtype == DtypeInt4 {
		e.scales, e.packed = quantizeInt4(f.Weights, e.sizes, true)
		h.Int4BlockSize = Int4BlockSize
		h.Int4ScalesBytes = 2 * len(e.scales)
		h.Int4PackedBytes = len(e.packed)
	}
	e.header, err = marshalHeader(&h)
	if err != nil {
		return nil, err
	}
	return e, nil
}

// marshalHeader encodes h as compact JSON without HTML escaping, as
// JavaScript's JSON.stringify does.
func marshalHeader(h *Header) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(h); err != nil {
		return nil, fmt.Errorf("format: encode header: %w", err)
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if uint64(len(b)) > math.MaxUint32 {
		return nil, fmt.Errorf("format: encode: header is %d bytes, above the 4 GiB limit", len(b))
	}
	return b, nil
}

// size returns the size of the whole file.
func (e *encoding) size() int64 {
	return prefixLen + int64(len(e.header)) + e.stateLen
}

// writeTo writes the file to w.
func (e *encoding) writeTo(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	var pre [prefixLen]byte
	copy(pre[:], Magic)
	binary.LittleEndian.PutUint32(pre[4:], Version)
	binary.LittleEndian.PutUint32(pre[8:], uint32(len(e.header)))
	bw.Write(pre[:])
	bw.Write(e.header)
	var step [4]byte
	binary.LittleEndian.PutUint32(step[:], uint32(e.f.Step))
	bw.Write(step[:])

	f := e.f
	scratch := make([]byte, 0, 1<<14)
	switch e.dtype {
	case DtypeFull, DtypeFP32:
		if !e.withOpt {
			putFloats(bw, scratch, f.Weights, len(f.Weights))
			break
		}
		off := 0
		for _, n := range e.sizes {
			putFloats(bw, scratch, f.Weights[off:off+n], n)
			putFloats(bw, scratch, sub(f.M, off, n), n)
			putFloats(bw, scratch, sub(f.V, off, n), n)
			off += n
		}
	case DtypeFP16:
		for i := 0; i < len(f.Weights); {
			b := scratch[:0]
			for ; i < len(f.Weights) && len(b) < cap(b); i++ {
				b = binary.LittleEndian.AppendUint16(b, Float32ToFloat16(f.Weights[i]))
			}
			bw.Write(b)
		}
	case DtypeInt4:
		for _, s := range e.scales {
			bw.Write(binary.LittleEndian.AppendUint16(scratch[:0], s))
		}
		bw.Write(e.packed)
	}
	return bw.Flush() // bufio keeps the first write error
}

// sub returns xs[off:off+n], or nil if xs is nil.
func sub(xs []float32, off, n int) []float32 {
	if xs == nil {
		return nil
	}
	return xs[off : off+n]
}

// putFloats writes n little-endian float32 values from xs, or n zeros if xs
// is nil, using scratch as its buffer.
func putFloats(w io.Writer, scratch []byte, xs []float32, n int) {
	for i := 0; i < n; {
		b := scratch[:0]
		for ; i < n && len(b) < cap(b); i++ {
			var bits uint32
			if xs != nil {
				bits = math.Float32bits(xs[i])
			}
			b = binary.LittleEndian.AppendUint32(b, bits)
		}
		w.Write(b)
	}
}

// Encode returns the bytes of f as a .tinygpt file. f.Header.WeightDtype
// picks the state layout:
//
//   - "": the full state, weights and AdamW moments; nil M or V are written
//     as zeros.
//   - "fp32": weights only when M and V are nil, else the full state.
//   - "fp16": weights rounded by [Float32ToFloat16]; M and V are dropped.
//   - "int4": weights quantised like the original converter (see [ToInt4]);
//     blocks that already hold int4 values, as decoded from an int4 file,
//     are kept exactly. M and V are dropped.
//
// Encode writes the header with version, manifest (when f has none),
// includesOptimizerState, stateByteLength and the int4 keys set to match the
// state, without modifying f. A manifest that f does have must match its
// config.
func Encode(f *File) ([]byte, error) {
	e, err := prepare(f)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.Grow(int(e.size()))
	if err := e.writeTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Write writes f to w as a .tinygpt file; see [Encode].
func Write(w io.Writer, f *File) error {
	e, err := prepare(f)
	if err != nil {
		return err
	}
	if err := e.writeTo(w); err != nil {
		return fmt.Errorf("writing the model: %w", err)
	}
	return nil
}

// WriteFile writes f to the file at path so that a crash never leaves a partial file there
// (see package atomicfile: a temporary file in the same directory, synced, renamed over path).
// A new file gets mode perm less the umask; a file it replaces keeps its mode. On any error a
// file already at path is left untouched.
func WriteFile(path string, f *File, perm os.FileMode) error {
	e, err := prepare(f)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, perm, e.writeTo) // its errors name path
}
