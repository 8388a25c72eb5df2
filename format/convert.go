package format

import (
	"slices"
	"time"
)

// jsISOTime is the layout of JavaScript's Date.prototype.toISOString.
const jsISOTime = "2006-01-02T15:04:05.000Z"

// convertedHeader returns a copy of h prepared for a weights-only file of
// the given dtype, as the original converters set it.
func convertedHeader(h Header, dtype, sourceName string, now time.Time) Header {
	h = cloneHeader(h)
	h.WeightDtype = dtype
	h.SourceConvertedFrom = sourceName
	h.ConvertedAt = now.UTC().Format(jsISOTime)
	h.IncludesOptimizerState = false
	h.Int4BlockSize, h.Int4ScalesBytes, h.Int4PackedBytes = 0, 0, 0
	if n, _, err := stateSize(h.Config, dtype, false); err == nil {
		h.StateByteLength = int(n)
	}
	return h
}

// cloneHeader returns a deep copy of h.
func cloneHeader(h Header) Header {
	if h.Manifest != nil {
		m := make([]ManifestEntry, len(h.Manifest))
		for i, e := range h.Manifest {
			m[i] = ManifestEntry{Name: e.Name, Shape: slices.Clone(e.Shape), FloatOffset: e.FloatOffset}
		}
		h.Manifest = m
	}
	if h.LossHistory != nil {
		lh := make([]LossPoint, len(h.LossHistory))
		for i, p := range h.LossHistory {
			lh[i] = LossPoint{Step: p.Step, Train: clonePtr(p.Train), Val: clonePtr(p.Val)}
		}
		h.LossHistory = lh
	}
	if h.FinalLoss != nil {
		h.FinalLoss = &FinalLoss{Step: h.FinalLoss.Step, Train: clonePtr(h.FinalLoss.Train), Val: clonePtr(h.FinalLoss.Val)}
	}
	h.BestVal = clonePtr(h.BestVal)
	h.Train = slices.Clone(h.Train)
	return h
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// ToFP16 returns a weights-only fp16 copy of f, as the original converter
// (convert_to_fp16.ts) makes it: Weights rounded through binary16 by
// [Float32ToFloat16], no moments, the same step, and the header keys
// weightDtype "fp16", sourceConvertedFrom sourceName, convertedAt now
// (millisecond ISO 8601 in UTC), includesOptimizerState false and
// stateByteLength set. f is not modified. ToFP16 returns nil if f is nil.
func ToFP16(f *File, sourceName string, now time.Time) *File {
	if f == nil {
		return nil
	}
	g := &File{
		Header:  convertedHeader(f.Header, DtypeFP16, sourceName, now),
		Step:    f.Step,
		Weights: make([]float32, len(f.Weights)),
	}
	for i, w := range f.Weights {
		g.Weights[i] = roundFP16(w)
	}
	return g
}

// ToInt4 returns a weights-only int4 copy of f, as the original converter
// (finalize_gallery_int4.ts) makes it from the fp16 file: Weights rounded to
// binary16 first, then quantised per tensor in blocks of 64 (scale =
// absmax/7 rounded to binary16, q = clamp(round(v/scale), −7, 7)) and
// returned dequantised, q·scale, so that [Encode] stores exactly those
// blocks and the bytes match the original converter's. (The one exception:
// a non-zero block whose scale underflows binary16, absmax below 7·2⁻²⁵,
// dequantises to zeros and is then stored as an all-zero block.) The header gets weightDtype "int4", sourceConvertedFrom
// sourceName, convertedAt now, includesOptimizerState false, int4BlockSize
// 64, int4ScalesBytes, int4PackedBytes and stateByteLength. f is not
// modified. ToInt4 returns nil if f is nil.
//
// If f's weights do not fit its config, the blocks run over the flat weights
// and the int4 keys are left zero; Encode then reports the mismatch.
func ToInt4(f *File, sourceName string, now time.Time) *File {
	if f == nil {
		return nil
	}
	g := &File{
		Header:  convertedHeader(f.Header, DtypeInt4, sourceName, now),
		Step:    f.Step,
		Weights: make([]float32, len(f.Weights)),
	}
	sizes := []int{len(f.Weights)}
	fits := f.Header.Config.Validate() == nil && ParamCount(f.Header.Config) == len(f.Weights)
	if fits {
		sizes = tensorSizes(f.Header.Config)
	}
	// Quantise from the fp16 values, as the original does.
	for i, w := range f.Weights {
		g.Weights[i] = roundFP16(w)
	}
	scales, packed := quantizeInt4(g.Weights, sizes, false)
	dequantizeInt4(scales, packed, sizes, g.Weights)
	if fits {
		g.Header.Int4BlockSize = Int4BlockSize
		g.Header.Int4ScalesBytes = 2 * len(scales)
		g.Header.Int4PackedBytes = len(packed)
	}
	return g
}
