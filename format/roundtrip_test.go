package format

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

// seedConfig is the small config of the fuzz seeds and several tests.
var seedConfig = Config{
	Ctx: 4, Layers: 1, Heads: 1, DModel: 8, DMlp: 32,
	BatchSize: 2, LearningRate: 0.003, GradClip: 1, MaxSteps: 10, EvalEvery: 5, Seed: 42, Backend: "go",
}

// testFile returns a model with random weights and moments for c.
func testFile(c Config, seed uint64) *File {
	r := rand.New(rand.NewPCG(seed, 1))
	p := ParamCount(c)
	f := &File{Step: int32(r.IntN(1000)), Weights: make([]float32, p), M: make([]float32, p), V: make([]float32, p)}
	for i := range f.Weights {
		f.Weights[i] = float32(r.NormFloat64() * 0.1)
		f.M[i] = float32(r.NormFloat64() * 1e-3)
		f.V[i] = float32(r.Float64() * 1e-6)
	}
	// Some exact zeros and a zero tensor, as in freshly initialised biases.
	f.Weights[0] = 0
	zero := Manifest(c)[3] // ln_final.bias
	clear(f.Weights[zero.FloatOffset : zero.FloatOffset+zero.Size()])
	train, val := 2.5, 2.25
	f.Header = Header{
		SavedAt:     "2026-11-22T02:41:34.080Z",
		Config:      c,
		Corpus:      "a <tiny> & \"quoted\" corpus\n\twith\u00e9 unicode",
		LossHistory: []LossPoint{{Step: 1, Train: &train}, {Step: 2, Train: &train, Val: &val}},
		FinalLoss:   &FinalLoss{Step: 2, Train: &train, Val: &val},
		Sample:      "the ",
		BestVal:     &BestVal{Loss: val, Step: 2},
		Project:     "https://example.invalid/tinygpt",
		Train:       []byte(`{"optimizer":"adamw","warmup":10}`),
	}
	return f
}

var roundTripConfigs = []Config{
	seedConfig,
	{Ctx: 8, Layers: 2, Heads: 2, DModel: 16, DMlp: 64},
	{Ctx: 5, Layers: 1, Heads: 3, DModel: 12, DMlp: 20}, // dMlp ≠ 4C, partial int4 blocks
	{Ctx: 32, Layers: 2, Heads: 3, DModel: 48, DMlp: 192},
}

func TestParamCount(t *testing.T) {
	for _, c := range append(roundTripConfigs, Config{Ctx: 64, Layers: 3, Heads: 3, DModel: 96, DMlp: 384}) {
		C, L := c.DModel, c.Layers
		want := 0
		for _, e := range Manifest(c) {
			want += e.Size()
		}
		if got := ParamCount(c); got != want {
			t.Errorf("ParamCount(%+v) = %d, manifest sums to %d", c, got, want)
		}
		if c.DMlp == 4*C {
			if formula := 256*C + c.Ctx*C + 2*C + L*(12*C*C+13*C); formula != want {
				t.Errorf("%+v: 12C² formula gives %d, want %d", c, formula, want)
			}
		}
		var blocks int64
		for _, e := range Manifest(c) {
			blocks += int64((e.Size() + 63) / 64)
		}
		if got := int4Blocks(c); got != blocks {
			t.Errorf("int4Blocks(%+v) = %d, want %d", c, got, blocks)
		}
	}
	if got := ParamCount(Config{Ctx: 32, Layers: 2, Heads: 3, DModel: 48, DMlp: 192}); got != 70464 {
		t.Errorf("tiny ParamCount = %d, want 70464", got)
	}
	if got := ParamCount(Config{Ctx: 64, Layers: 3, Heads: 3, DModel: 96, DMlp: 384}); got != 366432 {
		t.Errorf("small ParamCount = %d, want 366432", got)
	}
	// The largest valid config does not overflow int64.
	big := Config{Ctx: MaxCtx, Layers: MaxLayers, Heads: 1, DModel: MaxDModel, DMlp: MaxDMlp}
	if n, err := paramCount64(big); err != nil || n <= 0 || n > math.MaxInt64/12 {
		t.Errorf("paramCount64(max) = %d, %v", n, err)
	}
	for _, bad := range []Config{{}, {Ctx: 4, Layers: 1, Heads: 3, DModel: 8, DMlp: 32}, {Ctx: 4, Layers: 1, Heads: 1, DModel: MaxDModel + 1, DMlp: 1}} {
		if ParamCount(bad) != 0 || Manifest(bad) != nil {
			t.Errorf("ParamCount/Manifest(%+v) accepted an invalid config", bad)
		}
	}
}

func TestRoundTripFull(t *testing.T) {
	for i, c := range roundTripConfigs {
		f := testFile(c, uint64(i))
		data, err := Encode(f)
		if err != nil {
			t.Fatal(err)
		}
		g, err := Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		if g.Step != f.Step {
			t.Errorf("step %d, want %d", g.Step, f.Step)
		}
		sameFloats(t, "weights", g.Weights, f.Weights)
		sameFloats(t, "m", g.M, f.M)
		sameFloats(t, "v", g.V, f.V)
		want := f.Header
		want.Version, want.Manifest, want.IncludesOptimizerState = 2, Manifest(c), true
		want.StateByteLength = 4 + 12*ParamCount(c)
		if !reflect.DeepEqual(g.Header, want) {
			t.Errorf("header:\n got %+v\nwant %+v", g.Header, want)
		}
		if string(g.Header.Train) != `{"optimizer":"adamw","warmup":10}` {
			t.Errorf("tinygpt key = %s", g.Header.Train)
		}
		if !bytes.Contains(data, []byte(`"corpus":"a <tiny> & \"quoted\" corpus\n\twithé unicode"`)) {
			t.Errorf("corpus not written as JSON.stringify would")
		}
		// Encode is stable and does not touch f.
		again, err := Encode(g)
		if err != nil || !bytes.Equal(again, data) {
			t.Errorf("re-encoding differs (err %v)", err)
		}
		if f.Header.Manifest != nil || f.Header.Version != 0 {
			t.Errorf("Encode modified its argument")
		}
		// Write and Encode agree.
		var buf bytes.Buffer
		if err := Write(&buf, f); err != nil || !bytes.Equal(buf.Bytes(), data) {
			t.Errorf("Write differs from Encode (err %v)", err)
		}
	}
}

func TestNilMomentsWriteZeros(t *testing.T) {
	f := testFile(seedConfig, 7)
	f.M, f.V = nil, nil
	data, err := Encode(f)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if !g.Header.IncludesOptimizerState || len(g.M) != len(f.Weights) || len(g.V) != len(f.Weights) {
		t.Fatalf("moments: flag %v, %d, %d", g.Header.IncludesOptimizerState, len(g.M), len(g.V))
	}
	for i := range g.M {
		if g.M[i] != 0 || g.V[i] != 0 {
			t.Fatalf("moment %d not zero", i)
		}
	}
}

func TestRoundTripFP32WeightsOnly(t *testing.T) {
	f := testFile(seedConfig, 3)
	f.M, f.V = nil, nil
	f.Header.WeightDtype = DtypeFP32
	data, err := Encode(f)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if g.M != nil || g.V != nil || g.Header.IncludesOptimizerState {
		t.Errorf("weights-only fp32 file came back with moments")
	}
	if g.Header.StateByteLength != 4+4*ParamCount(seedConfig) {
		t.Errorf("stateByteLength %d", g.Header.StateByteLength)
	}
	sameFloats(t, "weights", g.Weights, f.Weights)

	// The same without a weightDtype key, as a file written by hand might be.
	g.Header.WeightDtype = ""
	hdr, _ := marshalHeader(&g.Header)
	_, state := splitFile(t, data)
	if h, err := Decode(assemble(hdr, state)); err != nil || h.M != nil || h.Header.WeightDtype != DtypeFP32 {
		t.Errorf("weights-only fp32 without weightDtype: %v", err)
	}
}

func TestRoundTripFP16(t *testing.T) {
	for i, c := range roundTripConfigs {
		f := testFile(c, uint64(100+i))
		f.Weights[1] = 1e-9  // flushes to zero
		f.Weights[2] = -7e4  // overflows to -Inf: such a copy cannot be written
		f.Weights[4] = 65504 // largest half, exact
		if _, err := Encode(ToFP16(f, "src.tinygpt", time.Now())); err == nil || !strings.Contains(err.Error(), "weight 2 of token_embedding.weight is -Inf") {
			t.Errorf("fp16 copy with an infinite weight: %v", err)
		}
		f.Weights[2] = -3
		g := ToFP16(f, "src.tinygpt", time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.FixedZone("x", 3600)))
		if g.Header.ConvertedAt != "2026-01-02T02:04:05.006Z" || g.Header.SourceConvertedFrom != "src.tinygpt" ||
			g.Header.WeightDtype != "fp16" || g.Header.IncludesOptimizerState || g.M != nil {
			t.Errorf("ToFP16 header: %+v", g.Header)
		}
		data, err := Encode(g)
		if err != nil {
			t.Fatal(err)
		}
		if want := 4 + 2*ParamCount(c); g.Header.StateByteLength != want {
			t.Errorf("stateByteLength %d, want %d", g.Header.StateByteLength, want)
		}
		h, err := Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		sameFloats(t, "fp16 weights", h.Weights, g.Weights)
		if h.Weights[1] != 0 || h.Weights[2] != -3 || h.Weights[4] != 65504 {
			t.Errorf("special values: %v %v %v", h.Weights[1], h.Weights[2], h.Weights[4])
		}
		for j, w := range f.Weights {
			if j < 5 {
				continue
			}
			// Relative error at most half an ulp of binary16, 2⁻¹¹, for normal halves.
			if d := math.Abs(float64(h.Weights[j] - w)); d > math.Abs(float64(w))/2048+math.Ldexp(1, -25) {
				t.Fatalf("weight %d: %v became %v", j, w, h.Weights[j])
			}
		}
		// Encoding fp16 values again is lossless and stable.
		again, err := Encode(h)
		if err != nil || !bytes.Equal(again, data) {
			t.Errorf("fp16 re-encoding differs (err %v)", err)
		}
	}
}

func TestRoundTripInt4(t *testing.T) {
	for i, c := range roundTripConfigs {
		f := testFile(c, uint64(200+i))
		g := ToInt4(f, "src.fp16.tinygpt", time.Unix(0, 0))
		data, err := Encode(g)
		if err != nil {
			t.Fatal(err)
		}
		h, err := Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		sameFloats(t, "int4 weights", h.Weights, g.Weights)
		blocks := int(int4Blocks(c))
		if h.Header.Int4BlockSize != 64 || h.Header.Int4ScalesBytes != 2*blocks || h.Header.Int4PackedBytes != 32*blocks ||
			h.Header.StateByteLength != 4+34*blocks || h.Header.SourceConvertedFrom != "src.fp16.tinygpt" {
			t.Errorf("int4 header: %+v", h.Header)
		}
		// Error at most half a step, scale/2, with scale ≈ absmax/7 per block.
		off := 0
		for _, n := range tensorSizes(c) {
			for s := 0; s < n; s += 64 {
				blk := f.Weights[off+s : off+min(s+64, n)]
				absmax := 0.0
				for _, w := range blk {
					absmax = max(absmax, math.Abs(float64(w)))
				}
				for j, w := range blk {
					got := h.Weights[off+s+j]
					if d := math.Abs(float64(got - w)); d > absmax/14*1.01+1e-6 {
						t.Fatalf("weight %d: %v became %v (block absmax %v)", off+s+j, w, got, absmax)
					}
				}
			}
			off += n
		}
		// Decoded int4 weights re-encode to the same bytes.
		again, err := Encode(h)
		if err != nil || !bytes.Equal(again, data) {
			t.Errorf("int4 re-encoding differs (err %v)", err)
		}
		// Encode with weightDtype int4 quantises like ToInt4.
		f2 := *f
		f2.Header = g.Header
		direct, err := Encode(&f2)
		if err != nil || !bytes.Equal(direct, data) {
			t.Errorf("Encode(int4 dtype) differs from Encode(ToInt4) (err %v)", err)
		}
	}
}

// TestInt4Details checks the block rules on hand-made values.
func TestInt4Details(t *testing.T) {
	// One tensor of 3 values: a partial block.
	w := []float32{0.875, -0.4375, 0.0625} // binary16-exact, scale 0.125
	scales, packed := quantizeInt4(w, []int{3}, false)
	if len(scales) != 1 || len(packed) != 32 {
		t.Fatalf("%d scales, %d packed bytes", len(scales), len(packed))
	}
	if want := Float32ToFloat16(0.125); scales[0] != want {
		t.Errorf("scale %#04x, want %#04x", scales[0], want)
	}
	// q = 7, round(-3.5) = -3 (ties toward +Inf), round(0.5) = 1 → nibbles 15, 5, 9.
	if packed[0] != 5<<4|15 || packed[1] != 9 {
		t.Errorf("packed % x, want 5f 09", packed[:2])
	}
	for _, b := range packed[2:] {
		if b != 0 {
			t.Fatalf("padding not zero: % x", packed)
		}
	}
	// An all-zero block: scale 0 and zero nibbles.
	scales, packed = quantizeInt4(make([]float32, 64), []int{64}, false)
	if scales[0] != 0 || !bytes.Equal(packed, make([]byte, 32)) {
		t.Errorf("zero block: scale %#04x, packed % x", scales[0], packed)
	}
	// Blocks the converter never writes still re-encode losslessly: nibble 0
	// (q = −8), a negative scale, small q only.
	for _, scale := range []uint16{Float32ToFloat16(0.034179688), Float32ToFloat16(-0.25), 0x0001} {
		for _, nibbles := range [][]byte{{0x80, 0x9f}, {0x8a, 0x97}, {0x00, 0x00}, {0xff, 0x88}} {
			packed := append(append([]byte{}, nibbles...), make([]byte, 30)...)
			w := make([]float32, 4)
			dequantizeInt4([]uint16{scale}, packed, []int{4}, w)
			s2, p2 := quantizeInt4(w, []int{4}, true)
			w2 := make([]float32, 4)
			dequantizeInt4(s2, p2, []int{4}, w2)
			for i := range w {
				if w[i] != w2[i] {
					t.Errorf("scale %#04x nibbles % x: %v re-encoded as %v", scale, nibbles, w, w2)
					break
				}
			}
		}
	}
	// Non-finite values do not panic.
	quantizeInt4([]float32{float32(math.NaN()), 1, float32(math.Inf(1))}, []int{3}, true)
	quantizeInt4([]float32{float32(math.NaN()), 1, float32(math.Inf(1))}, []int{3}, false)
}

// assemble builds a file from header JSON and state bytes.
func assemble(header, state []byte) []byte {
	out := []byte(Magic)
	out = append(out, 2, 0, 0, 0)
	out = append(out, byte(len(header)), byte(len(header)>>8), byte(len(header)>>16), byte(len(header)>>24))
	out = append(out, header...)
	return append(out, state...)
}

// Reading a file decodes it a piece at a time: ReadFile allocates little more than the File it
// returns (the whole file in memory as well would double it), for each kind of state.
func TestReadFileHoldsLittleMoreThanTheModel(t *testing.T) {
	c := Config{Ctx: 64, Layers: 4, Heads: 4, DModel: 128, DMlp: 512}
	full := testFile(c, 3)
	full.Header.Corpus = ""
	for _, dtype := range []string{DtypeFull, DtypeFP32, DtypeFP16, DtypeInt4} {
		f := full
		switch dtype {
		case DtypeFP32:
			w := *full
			w.M, w.V, w.Header.WeightDtype = nil, nil, DtypeFP32
			f = &w
		case DtypeFP16:
			f = ToFP16(full, "m", time.Now())
		case DtypeInt4:
			f = ToInt4(full, "m", time.Now())
		}
		path := filepath.Join(t.TempDir(), "m.tinygpt")
		if err := WriteFile(path, f, 0o600); err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		got, err := ReadFile(path)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		model := uint64(4 * (len(got.Weights) + len(got.M) + len(got.V)))
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("dtype %q: %d bytes of model, %d allocated", dtype, model, alloc)
		if alloc > model+model/8+2<<20 {
			t.Errorf("dtype %q: reading a model of %d bytes allocated %d", dtype, model, alloc)
		}
		if !reflect.DeepEqual(got.Weights, mustDecodeWeights(t, path)) {
			t.Errorf("%s: ReadFile and Decode differ", dtype)
		}
	}
}

// mustDecodeWeights decodes the file at path from memory.
func mustDecodeWeights(t *testing.T, path string) []float32 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	return f.Weights
}
