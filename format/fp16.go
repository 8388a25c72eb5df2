package format

import "math"

// Float32ToFloat16 rounds f to IEEE binary16 exactly as the original fp16
// converter does, and returns the bits. Unlike IEEE's default it rounds to
// nearest with ties away from zero. Magnitudes below 2⁻²⁵ flush to a zero of
// the same sign (2⁻²⁵ itself, a tie, becomes the smallest subnormal 2⁻²⁴);
// magnitudes from 65520 up overflow to ±Inf. NaN becomes the quiet NaN
// 0x7e00 with f's sign.
func Float32ToFloat16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15 // biased binary16 exponent
	switch {
	case e >= 0x1f:
		return sign | 0x7c00
	case e <= 0:
		if e < -10 {
			return sign // below 2⁻²⁵ (includes float32 zeros and subnormals)
		}
		// A binary16 subnormal: count units of 2⁻²⁴, rounding half up.
		m := mant | 0x800000
		shift := uint(14 - e) // 14..24
		return sign | uint16((m+1<<(shift-1))>>shift)
	}
	h := uint32(e)<<10 | mant>>13
	if mant&0x1000 != 0 {
		h++ // half up in magnitude; a carry correctly bumps the exponent, up to Inf
	}
	return sign | uint16(h)
}

// Float16ToFloat32 returns the float32 value of the binary16 bits h. The
// conversion is exact; NaN payloads are kept.
func Float16ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		// Subnormal: mant·2⁻²⁴, exact in float32.
		v := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// roundFP16 returns f rounded through binary16 by [Float32ToFloat16].
func roundFP16(f float32) float32 {
	return Float16ToFloat32(Float32ToFloat16(f))
}
