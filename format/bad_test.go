package format

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// seedFiles returns small valid files of every layout, built from seedConfig.
func seedFiles(t testing.TB) map[string][]byte { return seedFilesFor(t, seedConfig) }

// seedFilesFor returns small valid files of every layout for c.
func seedFilesFor(t testing.TB, c Config) map[string][]byte {
	full := testFile(c, 1)
	fp32 := testFile(c, 2)
	fp32.M, fp32.V, fp32.Header.WeightDtype = nil, nil, DtypeFP32
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	out := map[string]*File{
		"full": full,
		"fp32": fp32,
		"fp16": ToFP16(full, "seed.tinygpt", now),
		"int4": ToInt4(full, "seed.fp16.tinygpt", now),
	}
	files := map[string][]byte{}
	for name, f := range out {
		data, err := Encode(f)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = data
	}
	return files
}

// withHeader re-assembles file data with its header changed by edit and its
// state cut or extended by delta bytes.
func withHeader(t *testing.T, data []byte, edit func(h *Header), delta int) []byte {
	t.Helper()
	f, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	h := f.Header
	if edit != nil {
		edit(&h)
	}
	hdr, err := marshalHeader(&h)
	if err != nil {
		t.Fatal(err)
	}
	_, state := splitFile(t, data)
	if delta < 0 {
		state = state[:len(state)+delta]
	} else {
		state = append(bytes.Clone(state), make([]byte, delta)...)
	}
	return assemble(hdr, state)
}

func TestDecodeBadInput(t *testing.T) {
	files := seedFiles(t)
	full, fp16, int4 := files["full"], files["fp16"], files["int4"]
	p := ParamCount(seedConfig)
	fullState := 4 + 12*p

	setVersion := func(v byte) []byte { d := bytes.Clone(full); d[4] = v; return d }
	setHeaderLen := func(n uint32) []byte {
		d := bytes.Clone(full[:1234])
		d[8], d[9], d[10], d[11] = byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
		return d
	}
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "file is 0 bytes, too short"},
		{"short", []byte("TGPT\x02"), "file is 5 bytes, too short"},
		{"short wrong magic", []byte("GIF89a"), `not a .tinygpt file: magic is "GIF8", want "TGPT"`},
		{"wrong magic", append([]byte("PK\x03\x04"), full[4:]...), `not a .tinygpt file: magic is "PK\x03\x04", want "TGPT"`},
		{"version 3", setVersion(3), "unsupported version 3, want 2"},
		{"version 1", setVersion(1), "unsupported version 1, want 2"},
		{"huge header length", setHeaderLen(0xffffffff), "header length 4.3 GB exceeds file size (1234 bytes)"},
		{"header length", setHeaderLen(5000), "header length 5000 bytes exceeds file size (1234 bytes): the file is cut short, or not a model file"},
		{"bad JSON", assemble([]byte(`{"version":2,`), []byte{0, 0, 0, 0}), "header is not valid JSON"},
		{"JSON array", assemble([]byte(`[1,2]`), nil), "header is not valid JSON"},
		{"JSON type", assemble([]byte(`{"config":{"ctx":"4"}}`), nil), "header is not valid JSON"},
		{"empty JSON", assemble([]byte(`{}`), nil), "header has no config"},
		{"JSON null", assemble([]byte(`null`), nil), "header has no config"},
		{"header version", withHeader(t, full, func(h *Header) { h.Version = 3 }, 0), "header version 3 does not match container version 2"},
		{"state too short", withHeader(t, full, nil, -8), "state has " + itoa(fullState-8) + " bytes, config needs " + itoa(fullState) + " (fp32 weights + AdamW moments)"},
		{"state too long", withHeader(t, full, nil, 3), "state has " + itoa(fullState+3) + " bytes, config needs " + itoa(fullState) + " (fp32 weights + AdamW moments): 3 trailing bytes"},
		{"no state", withHeader(t, full, nil, -fullState), "state has 0 bytes, config needs"},
		{"fp16 short", withHeader(t, fp16, nil, -2), "config needs " + itoa(4+2*p) + " (fp16 weights)"},
		{"int4 short", withHeader(t, int4, nil, -1), "(int4 weights, " + itoa(int(int4Blocks(seedConfig))) + " blocks)"},
		{"weights-only flag", withHeader(t, full, func(h *Header) { h.IncludesOptimizerState = false }, 0), "config needs " + itoa(4+4*p) + " (fp32 weights only): "},
		{"stateByteLength", withHeader(t, full, func(h *Header) { h.StateByteLength = 100 }, 0), "header stateByteLength 100 does not match the state's " + itoa(fullState) + " bytes"},
		{"heads", withHeader(t, full, func(h *Header) { h.Config.Heads = 3 }, 0), "config heads 3 does not divide dModel 8"},
		{"zero ctx", withHeader(t, full, func(h *Header) { h.Config.Ctx = 0 }, 0), "config ctx is 0, must be positive"},
		{"negative dMlp", withHeader(t, full, func(h *Header) { h.Config.DMlp = -1 }, 0), "config dMlp is -1, must be positive"},
		{"huge layers", withHeader(t, full, func(h *Header) { h.Config.Layers = 1 << 40 }, 0), "config layers is 1099511627776, above the limit 1024"},
		{"huge dModel", withHeader(t, full, func(h *Header) { h.Config.DModel = 1 << 20 }, 0), "config dModel is 1048576, above the limit 65536"},
		{"manifest config", withHeader(t, full, func(h *Header) { h.Config.DMlp = 16 }, 0), `manifest entry 16 ("blocks.0.mlp.fc_in.weight") has shape [32 8], config needs [16 8]`},
		{"manifest name", withHeader(t, full, func(h *Header) { h.Manifest[6].Name = "blocks.0.attn.c_attn.weight" }, 0), `manifest entry 6 is "blocks.0.attn.c_attn.weight", config needs "blocks.0.attn.q_proj.weight"`},
		{"manifest shape", withHeader(t, full, func(h *Header) { h.Manifest[6].Shape = []int{8, 4, 2} }, 0), `manifest entry 6 ("blocks.0.attn.q_proj.weight") has shape [8 4 2], config needs [8 8]`},
		{"manifest offset", withHeader(t, full, func(h *Header) { h.Manifest[2].FloatOffset++ }, 0), `manifest entry 2 ("ln_final.weight") has floatOffset 2081, config needs 2080`},
		{"manifest short", withHeader(t, full, func(h *Header) { h.Manifest = h.Manifest[:5] }, 0), `manifest has 5 entries, config needs 20 (first missing: "blocks.0.ln1.bias")`},
		{"manifest long", withHeader(t, full, func(h *Header) { h.Manifest = append(h.Manifest, ManifestEntry{Name: "extra"}) }, 0), `manifest has 21 entries, config needs 20 (first extra: "extra")`},
		{"dtype", withHeader(t, full, func(h *Header) { h.WeightDtype = "bf16" }, 0), `unsupported weightDtype "bf16"`},
		{"fp16 with moments", withHeader(t, fp16, func(h *Header) { h.IncludesOptimizerState = true }, 0), `weightDtype "fp16" file claims includesOptimizerState`},
		{"int4 keys in fp16", withHeader(t, fp16, func(h *Header) { h.Int4BlockSize = 64 }, 0), `int4 keys in a file whose weightDtype is "fp16"`},
		{"int4 block size", withHeader(t, int4, func(h *Header) { h.Int4BlockSize = 32 }, 0), "int4BlockSize is 32, want 64"},
		{"int4 block size missing", withHeader(t, int4, func(h *Header) { h.Int4BlockSize = 0 }, 0), "int4BlockSize is 0, want 64"},
		{"int4 scales", withHeader(t, int4, func(h *Header) { h.Int4ScalesBytes += 2 }, 0), "int4ScalesBytes is " + itoa(2*int(int4Blocks(seedConfig))+2) + ", config needs " + itoa(2*int(int4Blocks(seedConfig)))},
		{"int4 packed", withHeader(t, int4, func(h *Header) { h.Int4PackedBytes -= 32 }, 0), "int4PackedBytes is " + itoa(32*int(int4Blocks(seedConfig))-32) + ", config needs " + itoa(32*int(int4Blocks(seedConfig)))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Decode(tt.data)
			if err == nil {
				t.Fatalf("Decode succeeded (%d weights), want error %q", len(f.Weights), tt.want)
			}
			if f != nil {
				t.Errorf("Decode returned a File with its error")
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "format: ") {
				t.Errorf("error %q\nwant it to contain %q", err, tt.want)
			}
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Errorf("error %T is not a *FormatError", err)
			}
			// Every one of these is found before the state: ReadHeader refuses it the same way.
			if _, herr := ReadHeader(bytes.NewReader(tt.data), int64(len(tt.data))); herr == nil || herr.Error() != err.Error() {
				t.Errorf("ReadHeader's error %v, want Decode's %v", herr, err)
			}
		})
	}
}

// TestReadHeader checks that ReadHeader returns what Decode does but the state, and reads the
// file no further than its step.
func TestReadHeader(t *testing.T) {
	files := seedFiles(t)
	// Weights only, with no weightDtype key, as the original writes them: both say "fp32".
	files["fp32 no dtype"] = withHeader(t, files["fp32"], func(h *Header) { h.WeightDtype = "" }, 0)
	for name, data := range files {
		want, err := Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		r := bytes.NewReader(data)
		f, err := ReadHeader(r, int64(len(data)))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if f.Weights != nil || f.M != nil || f.V != nil {
			t.Errorf("%s: ReadHeader read the state", name)
		}
		if name == "fp32 no dtype" && f.Header.WeightDtype != DtypeFP32 {
			t.Errorf("%s: weightDtype %q, want %q", name, f.Header.WeightDtype, DtypeFP32)
		}
		if f.Step != want.Step || !reflect.DeepEqual(f.Header, want.Header) {
			t.Errorf("%s: ReadHeader gave step %d, header %+v\nDecode gave step %d, header %+v", name, f.Step, f.Header, want.Step, want.Header)
		}
		_, state := splitFile(t, data)
		if r.Len() != len(state)-4 {
			t.Errorf("%s: %d bytes left unread, want the state less its step, %d", name, r.Len(), len(state)-4)
		}
	}
}

// A negative size, which no file has, is an error, not a panic.
func TestReadHeaderNegativeSize(t *testing.T) {
	if _, err := ReadHeader(bytes.NewReader(nil), -1); err == nil {
		t.Error("ReadHeader of size -1 succeeded")
	}
}

var itoa = strconv.Itoa

// TestDecodeTruncated cuts valid files at every length; each must fail
// cleanly. The config is the smallest valid one, to keep it fast.
func TestDecodeTruncated(t *testing.T) {
	c := Config{Ctx: 1, Layers: 1, Heads: 1, DModel: 1, DMlp: 1}
	for name, data := range seedFilesFor(t, c) {
		if _, err := Decode(data); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for n := range len(data) {
			if f, err := Decode(data[:n]); err == nil || f != nil {
				t.Fatalf("%s cut to %d of %d bytes: Decode succeeded", name, n, len(data))
			}
		}
	}
}

func TestReadAndReadFile(t *testing.T) {
	data := seedFiles(t)["int4"]
	f, err := Read(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "m.tinygpt")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	g, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sameFloats(t, "ReadFile weights", g.Weights, f.Weights)
	if h, err := ReadFileHeader(path); err != nil || h.Step != g.Step || !reflect.DeepEqual(h.Header, g.Header) || h.Weights != nil {
		t.Errorf("ReadFileHeader: %v, step %v", err, h)
	}

	if err := os.WriteFile(path, data[:100], 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = ReadFile(path)
	var fe *FormatError
	if err == nil || !strings.HasPrefix(err.Error(), path+": format: ") || !errors.As(err, &fe) {
		t.Errorf("ReadFile of a cut file: %v", err)
	}
	// A file of /proc says it is empty and holds data all the same.
	if _, err := os.Stat("/proc/self/status"); err == nil {
		for _, read := range []func(string) (*File, error){ReadFile, ReadFileHeader} {
			if _, err := read("/proc/self/status"); err == nil || !strings.Contains(err.Error(), "gives its size as 0 but it holds data") {
				t.Errorf("reading a /proc file: %v", err)
			}
		}
	}
	if _, err := ReadFile(filepath.Join(dir, "missing.tinygpt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadFile of a missing file: %v", err)
	}
	// A folder, or a device that never ends (/dev/zero), is refused before anything is read.
	if _, err := ReadFile(dir); err == nil || !strings.Contains(err.Error(), "not a regular file (a folder)") {
		t.Errorf("ReadFile of a folder: %v", err)
	}
	if fi, err := os.Stat("/dev/zero"); err == nil && fi.Mode()&os.ModeDevice != 0 {
		if _, err := ReadFile("/dev/zero"); err == nil || !strings.Contains(err.Error(), "not a regular file (a device)") {
			t.Errorf("ReadFile of /dev/zero: %v", err)
		}
	}
	if _, err := Read(errReader{}); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("Read of a failing reader: %v", err)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

func TestEncodeErrors(t *testing.T) {
	good := testFile(seedConfig, 9)
	tests := []struct {
		name string
		edit func(f *File)
		want string
	}{
		{"config", func(f *File) { f.Header.Config.Heads = 0 }, "config heads is 0, must be positive"},
		// The reader refuses a negative step, so the writer must not write one.
		{"step", func(f *File) { f.Step = -2 }, "step -2 is negative"},
		{"weights", func(f *File) { f.Weights = f.Weights[1:] }, "2967 weights, config needs 2968"},
		{"M", func(f *File) { f.M = f.M[1:] }, "moment M has 2967 values, config needs 2968"},
		{"V", func(f *File) { f.V = append(f.V, 0) }, "moment V has 2969 values, config needs 2968"},
		{"one moment", func(f *File) { f.Header.WeightDtype, f.M = DtypeFP32, nil }, "only one of the moments"},
		{"dtype", func(f *File) { f.Header.WeightDtype = "q8" }, `unsupported weightDtype "q8"`},
		{"manifest", func(f *File) { f.Header.Manifest = Manifest(seedConfig)[:3] }, "manifest has 3 entries, config needs 20"},
	}
	for _, tt := range tests {
		f := *good
		f.Header.Manifest = nil
		tt.edit(&f)
		_, err := Encode(&f)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Encode error %v, want %q", tt.name, err, tt.want)
		}
		if err := Write(&bytes.Buffer{}, &f); err == nil {
			t.Errorf("%s: Write succeeded", tt.name)
		}
	}
	if _, err := Encode(nil); err == nil {
		t.Error("Encode(nil) succeeded")
	}
	if ToFP16(nil, "", time.Time{}) != nil || ToInt4(nil, "", time.Time{}) != nil {
		t.Error("ToFP16/ToInt4(nil) not nil")
	}
	// A File whose weights do not fit its config: the conversions do not
	// panic, and Encode reports the problem.
	bad := *good
	bad.Weights = bad.Weights[:100]
	for _, g := range []*File{ToFP16(&bad, "x", time.Time{}), ToInt4(&bad, "x", time.Time{})} {
		if _, err := Encode(g); err == nil || !strings.Contains(err.Error(), "100 weights, config needs 2968") {
			t.Errorf("Encode of a converted misfit: %v", err)
		}
	}
}

// A weight or moment that is not a finite number (or a negative second moment) means a
// damaged file: it is refused on reading, and never written.
func TestNonFiniteRefused(t *testing.T) {
	for _, c := range []struct {
		file  string
		float int // index of the float after the step to change
		bits  uint32
		want  string
	}{
		{"fp32", 0, 0x7fc00000, "weight 0 of token_embedding.weight is NaN"},
		{"fp32", 5, 0xff800000, "weight 5 of token_embedding.weight is -Inf"},
		{"full", 256 * 8, 0x7f800000, "first moment 0 of token_embedding.weight is +Inf"},
		{"full", 2 * 256 * 8, math.Float32bits(-1), "second moment 0 of token_embedding.weight is -1"},
	} {
		data := bytes.Clone(seedFiles(t)[c.file])
		f, err := Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		off := len(data) - f.Header.StateByteLength + 4 + 4*c.float
		binary.LittleEndian.PutUint32(data[off:], c.bits)
		if _, err := Decode(data); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s with float %d = %#x: %v, want %q", c.file, c.float, c.bits, err, c.want)
		}
	}
	f := testFile(seedConfig, 3)
	f.Weights[7] = float32(math.NaN())
	if _, err := Encode(f); err == nil || !strings.Contains(err.Error(), "weight 7 of token_embedding.weight is NaN") {
		t.Errorf("Encode of a NaN weight: %v", err)
	}
}
