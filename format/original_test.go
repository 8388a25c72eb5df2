package format

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// originalDir holds the files written by the original TinyGPT. CI does not
// have it; the tests that need it skip.
var originalDir = filepath.Join("..", "..", "shared", "data", "original")

type originalModel struct {
	Params            int `json:"params"`
	StepAfterTraining int `json:"step_after_training"`
}

// readOriginal returns the bytes of an original file, skipping the test if
// the fixtures are absent.
func readOriginal(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(originalDir, name))
	if os.IsNotExist(err) {
		t.Skipf("original fixtures not available: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func expectedModels(t *testing.T) map[string]originalModel {
	t.Helper()
	var exp struct {
		Models map[string]originalModel `json:"models"`
	}
	if err := json.Unmarshal(readOriginal(t, "expected.json"), &exp); err != nil {
		t.Fatal(err)
	}
	return exp.Models
}

// splitFile returns the header and state bytes of a file.
func splitFile(t *testing.T, data []byte) (header, state []byte) {
	t.Helper()
	h := int(binary.LittleEndian.Uint32(data[8:]))
	return data[12 : 12+h], data[12+h:]
}

// sameBytes reports the first difference between got and want.
func sameBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if bytes.Equal(got, want) {
		return
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	lo := max(0, i-40)
	t.Errorf("%s: %d bytes, want %d; first difference at byte %d:\n got %q\nwant %q",
		what, len(got), len(want), i, got[lo:min(len(got), i+40)], want[lo:min(len(want), i+40)])
}

func sameFloats(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d values, want %d", what, len(got), len(want))
		return
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Errorf("%s[%d] = %v, want %v", what, i, got[i], want[i])
			return
		}
	}
}

func TestOriginalFiles(t *testing.T) {
	models := expectedModels(t)
	for _, name := range []string{"tiny", "small"} {
		t.Run(name, func(t *testing.T) {
			exp, ok := models[name]
			if !ok {
				t.Fatalf("expected.json has no model %q", name)
			}
			raw := map[string][]byte{}
			files := map[string]*File{}
			for _, dt := range []string{"fp32", "fp16", "int4"} {
				fn := name + ".tinygpt"
				if dt != "fp32" {
					fn = name + "." + dt + ".tinygpt"
				}
				raw[dt] = readOriginal(t, fn)
				f, err := Decode(raw[dt])
				if err != nil {
					t.Fatalf("Decode(%s): %v", fn, err)
				}
				files[dt] = f
				if f.Step != int32(exp.StepAfterTraining) || f.Step != 60 {
					t.Errorf("%s: step %d, want %d", fn, f.Step, exp.StepAfterTraining)
				}
				if p := ParamCount(f.Header.Config); p != exp.Params || len(f.Weights) != p {
					t.Errorf("%s: ParamCount %d, %d weights, want %d", fn, p, len(f.Weights), exp.Params)
				}
				if m := Manifest(f.Header.Config); !reflect.DeepEqual(m, f.Header.Manifest) {
					t.Errorf("%s: Manifest(config) differs from the file's manifest", fn)
				}
				if (f.M != nil) != (dt == "fp32") || (f.V != nil) != (dt == "fp32") {
					t.Errorf("%s: moments present = %v, want %v", fn, f.M != nil, dt == "fp32")
				}
				// Decode then Encode gives the original file, header JSON included.
				enc, err := Encode(f)
				if err != nil {
					t.Fatalf("Encode(%s): %v", fn, err)
				}
				gh, gs := splitFile(t, enc)
				wh, ws := splitFile(t, raw[dt])
				sameBytes(t, fn+" re-encoded header", gh, wh)
				sameBytes(t, fn+" re-encoded state", gs, ws)
			}

			src := files["fp32"]
			convertedAt := func(f *File) time.Time {
				tm, err := time.Parse(time.RFC3339, f.Header.ConvertedAt)
				if err != nil {
					t.Fatal(err)
				}
				return tm
			}

			// fp16: the converter's output, byte for byte.
			f16 := ToFP16(src, name+".tinygpt", convertedAt(files["fp16"]))
			enc, err := Encode(f16)
			if err != nil {
				t.Fatal(err)
			}
			gh, gs := splitFile(t, enc)
			wh, ws := splitFile(t, raw["fp16"])
			sameBytes(t, "ToFP16 state", gs, ws)
			sameBytes(t, "ToFP16 header", gh, wh)
			sameFloats(t, "decoded fp16 weights", files["fp16"].Weights, f16.Weights)

			// int4, from the fp32 file and from the fp16 file.
			for _, from := range []string{"fp32", "fp16"} {
				f4 := ToInt4(files[from], name+".fp16.tinygpt", convertedAt(files["int4"]))
				enc, err := Encode(f4)
				if err != nil {
					t.Fatal(err)
				}
				gh, gs := splitFile(t, enc)
				wh, ws := splitFile(t, raw["int4"])
				sameBytes(t, "ToInt4("+from+") state", gs, ws)
				if from == "fp16" {
					sameBytes(t, "ToInt4("+from+") header", gh, wh)
				}
				sameFloats(t, "decoded int4 weights vs ToInt4("+from+")", files["int4"].Weights, f4.Weights)
			}
		})
	}
}
