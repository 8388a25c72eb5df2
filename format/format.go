package format

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// Constants of the container.
const (
	Magic   = "TGPT" // the first four bytes of every file
	Version = 2      // the only version this package reads and writes

	// VocabSize is the vocabulary of every TinyGPT model (bytes). It is
	// not stored in the file.
	VocabSize = 256

	// Int4BlockSize is the number of values that share one scale in int4
	// files.
	Int4BlockSize = 64
)

// Weight dtypes, the values of [Header.WeightDtype].
const (
	DtypeFull = ""     // full fp32 state with AdamW moments, as the original trainer writes
	DtypeFP32 = "fp32" // fp32 weights, with moments only when includesOptimizerState is true
	DtypeFP16 = "fp16" // binary16 weights only
	DtypeInt4 = "int4" // block-wise 4-bit weights only
)

// Upper bounds that [Config.Validate] enforces, so that sizes computed from a
// header cannot overflow.
const (
	MaxLayers = 1024
	MaxDModel = 1 << 16
	MaxCtx    = 1 << 20
	MaxDMlp   = 1 << 20
	MaxHeads  = MaxDModel
)

// Config is the "config" object of the header, with the keys in the order the
// original writes them.
type Config struct {
	Ctx          int     `json:"ctx"`
	Layers       int     `json:"layers"`
	Heads        int     `json:"heads"`
	DModel       int     `json:"dModel"`
	DMlp         int     `json:"dMlp"`
	BatchSize    int     `json:"batchSize"`
	LearningRate float64 `json:"learningRate"`
	GradClip     float64 `json:"gradClip"`
	MaxSteps     int     `json:"maxSteps"`
	EvalEvery    int     `json:"evalEvery"`
	Seed         int64   `json:"seed"`
	Backend      string  `json:"backend"`
}

// Validate reports whether c describes a model this package can size: all
// model dimensions positive and at most their Max constants, and heads
// dividing dModel. The training settings are not checked.
func (c Config) Validate() error {
	for _, d := range []struct {
		name     string
		val, max int
	}{
		{"ctx", c.Ctx, MaxCtx},
		{"layers", c.Layers, MaxLayers},
		{"heads", c.Heads, MaxHeads},
		{"dModel", c.DModel, MaxDModel},
		{"dMlp", c.DMlp, MaxDMlp},
	} {
		if d.val <= 0 {
			return fmt.Errorf("config %s is %d, must be positive", d.name, d.val)
		}
		if d.val > d.max {
			return fmt.Errorf("config %s is %d, above the limit %d", d.name, d.val, d.max)
		}
	}
	if c.DModel%c.Heads != 0 {
		return fmt.Errorf("config heads %d does not divide dModel %d", c.Heads, c.DModel)
	}
	return nil
}

// ManifestEntry describes one tensor: its PyTorch-style name, its shape as
// the original lists it ([out, in] for matrices, although the bytes are
// [in, out]) and the offset of its first weight in a weights-only view, in
// floats.
type ManifestEntry struct {
	Name        string `json:"name"`
	Shape       []int  `json:"shape"`
	FloatOffset int    `json:"floatOffset"`
}

// Size returns the number of values in the tensor, the product of its shape.
func (e ManifestEntry) Size() int {
	n := 1
	for _, d := range e.Shape {
		n *= d
	}
	return n
}

// LossPoint is one entry of the loss history. Train or Val is nil when the
// original wrote null.
type LossPoint struct {
	Step  int      `json:"step"`
	Train *float64 `json:"train"`
	Val   *float64 `json:"val"`
}

// FinalLoss is the last point of the training run, at full precision.
type FinalLoss struct {
	Step  int      `json:"step"`
	Train *float64 `json:"train"`
	Val   *float64 `json:"val"`
}

// BestVal is the best validation loss seen and its step.
type BestVal struct {
	Loss float64 `json:"loss"`
	Step int     `json:"step"`
}

// Header is the JSON header. Its fields are in the order the original writes
// its keys, so that encoding a decoded header reproduces the original bytes
// (the JSON is written compact, without HTML escaping, like JavaScript's
// JSON.stringify; only U+2028, U+2029 and invalid UTF-8 in strings come out
// differently). FinalLoss and BestVal are null in files with no training
// or no evaluation. The weightDtype and conversion keys appear only in
// converted files. Keys this package does not know are ignored when reading
// and dropped when writing.
type Header struct {
	Version                int             `json:"version"`
	SavedAt                string          `json:"savedAt"`
	Config                 Config          `json:"config"`
	Corpus                 string          `json:"corpus"`
	Manifest               []ManifestEntry `json:"manifest"`
	IncludesOptimizerState bool            `json:"includesOptimizerState"`
	StateByteLength        int             `json:"stateByteLength"`
	LossHistory            []LossPoint     `json:"lossHistory"`
	FinalLoss              *FinalLoss      `json:"finalLoss"`
	Sample                 string          `json:"sample"`
	BestVal                *BestVal        `json:"bestVal"`
	Project                string          `json:"project"`
	WeightDtype            string          `json:"weightDtype,omitempty"`
	SourceConvertedFrom    string          `json:"sourceConvertedFrom,omitempty"`
	ConvertedAt            string          `json:"convertedAt,omitempty"`
	Int4BlockSize          int             `json:"int4BlockSize,omitempty"`
	Int4ScalesBytes        int             `json:"int4ScalesBytes,omitempty"`
	Int4PackedBytes        int             `json:"int4PackedBytes,omitempty"`

	// Train is this project's own key, "tinygpt": the trainer's run
	// settings. This package stores and returns it untouched.
	Train json.RawMessage `json:"tinygpt,omitempty"`
}

// File is a decoded .tinygpt file.
type File struct {
	Header Header

	// Step is the int32 that starts the state: the training step.
	Step int32

	// Weights holds all parameters, flat, in manifest order and in the
	// stored layout (matrices [in, out] row-major). fp16 and int4 files are
	// expanded to float32 exactly.
	Weights []float32

	// M and V are the AdamW moments in the same layout, nil for
	// weights-only files.
	M, V []float32
}

// Manifest returns the manifest the original builds for c: the tensor names,
// the shapes as it lists them and their float offsets. It returns nil if c is
// not valid.
func Manifest(c Config) []ManifestEntry {
	if c.Validate() != nil {
		return nil
	}
	C, F := c.DModel, c.DMlp
	ents := make([]ManifestEntry, 0, 4+16*c.Layers)
	off := 0
	push := func(name string, shape ...int) {
		e := ManifestEntry{Name: name, Shape: shape, FloatOffset: off}
		ents = append(ents, e)
		off += e.Size()
	}
	push("token_embedding.weight", VocabSize, C)
	push("position_embedding.weight", c.Ctx, C)
	push("ln_final.weight", C)
	push("ln_final.bias", C)
	for i := 0; i < c.Layers; i++ {
		p := "blocks." + strconv.Itoa(i) + "."
		push(p+"ln1.weight", C)
		push(p+"ln1.bias", C)
		for _, proj := range []string{"q_proj", "k_proj", "v_proj", "o_proj"} {
			push(p+"attn."+proj+".weight", C, C)
			push(p+"attn."+proj+".bias", C)
		}
		push(p+"ln2.weight", C)
		push(p+"ln2.bias", C)
		push(p+"mlp.fc_in.weight", F, C)
		push(p+"mlp.fc_in.bias", F)
		push(p+"mlp.fc_out.weight", C, F)
		push(p+"mlp.fc_out.bias", C)
	}
	return ents
}

// ParamCount returns the number of parameters of a model with config c,
// 256·C + ctx·C + 2·C + layers·(4·C² + 2·C·dMlp + 9·C + dMlp), or 0 if c is
// not valid. On 32-bit platforms the largest valid configs overflow int.
func ParamCount(c Config) int {
	n, err := paramCount64(c)
	if err != nil || int64(int(n)) != n {
		return 0
	}
	return int(n)
}

// paramCount64 is ParamCount in int64, which cannot overflow for a valid
// config.
func paramCount64(c Config) (int64, error) {
	if err := c.Validate(); err != nil {
		return 0, err
	}
	C, F, L, T := int64(c.DModel), int64(c.DMlp), int64(c.Layers), int64(c.Ctx)
	return VocabSize*C + T*C + 2*C + L*(4*C*C+2*C*F+9*C+F), nil
}

// tensorSizes returns the number of values of each tensor in manifest order.
func tensorSizes(c Config) []int {
	m := Manifest(c)
	sizes := make([]int, len(m))
	for i, e := range m {
		sizes[i] = e.Size()
	}
	return sizes
}

// int4Blocks returns the number of int4 blocks of a model with config c,
// Σ ceil(n/64) over its tensors, computed without building the manifest.
func int4Blocks(c Config) int64 {
	C, F, L, T := int64(c.DModel), int64(c.DMlp), int64(c.Layers), int64(c.Ctx)
	b := func(n int64) int64 { return (n + Int4BlockSize - 1) / Int4BlockSize }
	perLayer := 4*b(C) + 4*b(C*C) + 4*b(C) + b(F*C) + b(F) + b(C*F) + b(C)
	return b(VocabSize*C) + b(T*C) + 2*b(C) + L*perLayer
}

// stateSize returns the number of state bytes a file with config c, dtype
// and optimizer flag needs, and a description of that layout.
func stateSize(c Config, dtype string, withOpt bool) (int64, string, error) {
	p, err := paramCount64(c)
	if err != nil {
		return 0, "", err
	}
	switch dtype {
	case DtypeFull, DtypeFP32:
		if withOpt {
			return 4 + 12*p, "fp32 weights + AdamW moments", nil
		}
		return 4 + 4*p, "fp32 weights only", nil
	case DtypeFP16:
		return 4 + 2*p, "fp16 weights", nil
	case DtypeInt4:
		s := int4Blocks(c)
		return 4 + 34*s, fmt.Sprintf("int4 weights, %d blocks", s), nil
	}
	return 0, "", fmt.Errorf("unsupported weightDtype %q", dtype)
}
