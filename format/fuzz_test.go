package format

import (
	"bytes"
	"math"
	"reflect"
	"testing"
)

// FuzzDecode checks that Decode never panics and that whatever it accepts
// encodes again and decodes to the same model. The seed corpus in
// testdata/fuzz/FuzzDecode holds small valid files of every layout (built
// from seedConfig) and some corrupt ones.
func FuzzDecode(f *testing.F) {
	for _, data := range seedFiles(f) {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Decode(data)
		if err != nil {
			if file != nil {
				t.Fatal("Decode returned a File with its error")
			}
			return
		}
		enc, err := Encode(file)
		if err != nil {
			t.Fatalf("Encode of a decoded file: %v", err)
		}
		g, err := Decode(enc)
		if err != nil {
			t.Fatalf("Decode of a re-encoded file: %v", err)
		}
		if g.Step != file.Step || g.Header.Config != file.Header.Config || g.Header.WeightDtype != file.Header.WeightDtype ||
			!bytes.Equal(g.Header.Train, file.Header.Train) && len(file.Header.Train) > 0 {
			t.Fatalf("header changed: %+v\nbecame %+v", file.Header, g.Header)
		}
		if !reflect.DeepEqual(g.Header.Manifest, Manifest(file.Header.Config)) {
			t.Fatal("manifest not rebuilt")
		}
		dtype := file.Header.WeightDtype
		finite := true
		for i, w := range file.Weights {
			v := g.Weights[i]
			switch {
			case math.IsNaN(float64(w)) || math.IsInf(float64(w), 0):
				finite = false
				if dtype == DtypeFP16 && math.IsNaN(float64(w)) != math.IsNaN(float64(v)) {
					t.Fatalf("weight %d: %v became %v", i, w, v)
				}
			case dtype == DtypeInt4:
				if v != w {
					t.Fatalf("weight %d: %v became %v", i, w, v)
				}
			default:
				if math.Float32bits(v) != math.Float32bits(w) {
					t.Fatalf("weight %d: %v became %v", i, w, v)
				}
			}
		}
		for _, m := range [][2][]float32{{file.M, g.M}, {file.V, g.V}} {
			if len(m[0]) != len(m[1]) {
				t.Fatalf("moments: %d values became %d", len(m[0]), len(m[1]))
			}
			for i := range m[0] {
				if math.Float32bits(m[0][i]) != math.Float32bits(m[1][i]) {
					t.Fatalf("moment %d changed", i)
				}
			}
		}
		// Once normalised by one encode, encoding is stable.
		if finite || dtype != DtypeInt4 {
			again, err := Encode(g)
			if err != nil || !bytes.Equal(again, enc) {
				t.Fatalf("second encoding differs (err %v)", err)
			}
		}
	})
}
