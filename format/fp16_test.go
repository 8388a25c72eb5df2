package format

import (
	"math"
	"testing"
)

func TestFloat32ToFloat16(t *testing.T) {
	pow2 := func(e int) float32 { return float32(math.Ldexp(1, e)) }
	tests := []struct {
		in   float32
		want uint16
	}{
		{0, 0x0000},
		{float32(math.Copysign(0, -1)), 0x8000},
		{1, 0x3c00},
		{-2, 0xc000},
		{0.5, 0x3800},
		{65504, 0x7bff}, // largest finite half
		// Ties away from zero: 1 + 2⁻¹¹ lies halfway between 1 and 1+2⁻¹⁰.
		{1 + pow2(-11), 0x3c01},
		{-(1 + pow2(-11)), 0xbc01},
		// IEEE ties-to-even would give 0x3c02 here too, and 0x3c00 above.
		{1 + 3*pow2(-11), 0x3c02},
		{1 + pow2(-11) - pow2(-23), 0x3c00}, // just below the tie
		{1 + pow2(-11) + pow2(-23), 0x3c01}, // just above
		// Rounding up carries into the exponent.
		{2 - pow2(-12), 0x4000},
		// Overflow: 65520 is the tie between 65504 and 65536 and goes to Inf.
		{65519.998, 0x7bff},
		{65520, 0x7c00},
		{-65520, 0xfc00},
		{1e10, 0x7c00},
		{float32(math.Inf(1)), 0x7c00},
		{float32(math.Inf(-1)), 0xfc00},
		// Subnormals.
		{pow2(-14), 0x0400},                // smallest normal
		{pow2(-24), 0x0001},                // smallest subnormal
		{3 * pow2(-24), 0x0003},            // exact subnormal
		{pow2(-15) + pow2(-25), 0x0201},    // tie in the subnormal range, away from zero
		{-(pow2(-15) + pow2(-25)), 0x8201}, // and negative
		{pow2(-14) - pow2(-25), 0x0400},    // tie rounds up into the normal range
		{pow2(-24) + pow2(-25), 0x0002},    // 1.5 units, tie away
		// Flush below 2⁻²⁵; 2⁻²⁵ itself is a tie and goes to 2⁻²⁴.
		{pow2(-25), 0x0001},
		{-pow2(-25), 0x8001},
		{pow2(-25) - pow2(-49), 0x0000},
		{pow2(-26), 0x0000},
		{-pow2(-30), 0x8000},
		{math.SmallestNonzeroFloat32, 0x0000},
	}
	for _, tt := range tests {
		if got := Float32ToFloat16(tt.in); got != tt.want {
			t.Errorf("Float32ToFloat16(%g) = %#04x, want %#04x", tt.in, got, tt.want)
		}
	}
	for _, nan := range []float32{float32(math.NaN()), math.Float32frombits(0x7f800001), math.Float32frombits(0xffc00000)} {
		h := Float32ToFloat16(nan)
		if h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
			t.Errorf("Float32ToFloat16(NaN %#08x) = %#04x, not a NaN", math.Float32bits(nan), h)
		}
		if (h&0x8000 != 0) != math.Signbit(float64(nan)) {
			t.Errorf("Float32ToFloat16(NaN %#08x) = %#04x, sign lost", math.Float32bits(nan), h)
		}
	}
}

// TestFloat16RoundTrip checks that every binary16 value survives the trip
// through float32, and that the rounding picks a nearest neighbour, breaking
// ties away from zero, across the whole float32 range.
func TestFloat16RoundTrip(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := Float16ToFloat32(uint16(h))
		if math.IsNaN(float64(f)) {
			if h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
				t.Fatalf("Float16ToFloat32(%#04x) = NaN", h)
			}
			continue
		}
		if back := Float32ToFloat16(f); back != uint16(h) {
			t.Fatalf("Float32ToFloat16(Float16ToFloat32(%#04x) = %g) = %#04x", h, f, back)
		}
	}
	if got := Float16ToFloat32(0x0001); got != float32(math.Ldexp(1, -24)) {
		t.Errorf("Float16ToFloat32(1) = %g, want 2^-24", got)
	}
	if got := Float16ToFloat32(0x83ff); got != -float32(1023*math.Ldexp(1, -24)) {
		t.Errorf("Float16ToFloat32(0x83ff) = %g", got)
	}
	// Every float32 bit pattern with the low 9 bits fixed: compare with a
	// float64 reference of round-to-nearest, ties away from zero.
	for b := uint32(0); b < 1<<23; b++ {
		bits := b<<9 | 0x155
		f := math.Float32frombits(bits)
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			continue
		}
		got := Float32ToFloat16(f)
		if want := refFloat16(float64(f)); got != want {
			t.Fatalf("Float32ToFloat16(%g [%#08x]) = %#04x, want %#04x", f, bits, got, want)
		}
	}
}

// refFloat16 rounds x to binary16, ties away from zero, with the original's
// flush below 2⁻²⁵, by searching the table of halves.
func refFloat16(x float64) uint16 {
	sign := uint16(0)
	if math.Signbit(x) {
		sign, x = 0x8000, -x
	}
	if x >= 65520 {
		return sign | 0x7c00
	}
	// Halves are monotonic in their bits for 0..0x7bff; find the bracket.
	lo, hi := uint16(0), uint16(0x7bff)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if float64(Float16ToFloat32(mid)) <= x {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	a := float64(Float16ToFloat32(lo))
	if a == x || lo == 0x7bff {
		return sign | lo
	}
	b := float64(Float16ToFloat32(lo + 1))
	if x-a < b-x {
		return sign | lo
	}
	return sign | (lo + 1) // above the midpoint, or a tie: away from zero
}
