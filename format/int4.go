package format

import "math"

// int4Layout returns the number of int4 blocks of each tensor with the given
// sizes, and their total.
func int4Layout(sizes []int) (blocks []int, total int) {
	blocks = make([]int, len(sizes))
	for i, n := range sizes {
		blocks[i] = (n + Int4BlockSize - 1) / Int4BlockSize
		total += blocks[i]
	}
	return blocks, total
}

// quantizeInt4 packs w, cut into tensors of the given sizes, into int4
// scales (binary16 bits, one per block) and packed nibbles (32 bytes per
// block).
//
// If keepExact is set, a block whose values are already exactly
// int4-representable (as [dequantizeInt4] returns them) is stored exactly,
// so that decoding and re-encoding an int4 file reproduces its bytes. Any
// other block is quantised as the original converter does: from its values rounded to
// binary16; scale = absmax/7 in float64, rounded to float32 then to binary16;
// q = clamp(round(v/scale), −7, 7) with the float64 scale and rounding ties
// toward +∞; nibble q+8. An all-zero block gets scale 0 and zero nibbles.
func quantizeInt4(w []float32, sizes []int, keepExact bool) (scales []uint16, packed []byte) {
	_, total := int4Layout(sizes)
	scales = make([]uint16, total)
	packed = make([]byte, total*Int4BlockSize/2)
	blk, off := 0, 0
	var vals [Int4BlockSize]float64
	for _, n := range sizes {
		for start := 0; start < n; start += Int4BlockSize {
			src := w[off+start : off+min(start+Int4BlockSize, n)]
			dst := packed[blk*Int4BlockSize/2 : (blk+1)*Int4BlockSize/2]
			if keepExact {
				if s, ok := exactInt4Block(src, dst); ok {
					scales[blk] = s
					blk++
					continue
				}
			}
			absmax := 0.0
			for i, x := range src {
				v := float64(roundFP16(x))
				vals[i] = v
				if a := math.Abs(v); a > absmax || math.IsNaN(a) {
					absmax = a
				}
			}
			if absmax == 0 {
				blk++ // scale 0, nibbles 0
				continue
			}
			scale := absmax / 7
			scales[blk] = Float32ToFloat16(float32(scale))
			inv := 1 / scale
			for i := range src {
				setNibble(dst, i, uint8(quantInt4(vals[i]*inv)+8))
			}
			blk++
		}
		off += n
	}
	return scales, packed
}

// quantInt4 rounds x like JavaScript's Math.round (ties toward +∞) and clamps
// it to [−7, 7]. NaN gives 0.
func quantInt4(x float64) int {
	if math.IsNaN(x) {
		return 0
	}
	r := math.Floor(x)
	if x-r >= 0.5 {
		r++
	}
	return int(max(-7, min(7, r)))
}

// setNibble stores the 4-bit value v as element i of a packed block.
func setNibble(dst []byte, i int, v uint8) {
	if i%2 == 0 {
		dst[i/2] = dst[i/2]&0xf0 | v&0x0f
	} else {
		dst[i/2] = dst[i/2]&0x0f | v<<4
	}
}

// exactInt4Block reports whether the block src equals q·scale for some
// binary16 scale and integers q in [−8, 7] (nibble 0, q = −8, is never
// written by the converter but decodes fine); if so it writes the nibbles to
// dst (which must be zero) and returns the scale. It tries absmax/7 first,
// the scale the converter picks, then absmax/8 and absmax/6 … absmax/1, then
// the same negated (a negative scale also decodes fine).
func exactInt4Block(src []float32, dst []byte) (uint16, bool) {
	absmax := 0.0
	for _, x := range src {
		a := math.Abs(float64(x))
		if math.IsNaN(a) || math.IsInf(a, 0) {
			return 0, false
		}
		absmax = max(absmax, a)
	}
	if absmax == 0 {
		return 0, true
	}
next:
	for _, k := range [...]float64{7, 8, 6, 5, 4, 3, 2, 1, -7, -8, -6, -5, -4, -3, -2, -1} {
		s := absmax / k
		h := Float32ToFloat16(float32(s))
		if float64(Float16ToFloat32(h)) != s {
			continue
		}
		for _, x := range src {
			q := float64(x) / s
			if q != math.Trunc(q) || q < -8 || q > 7 || float32(q)*float32(s) != x {
				continue next
			}
		}
		for i, x := range src {
			setNibble(dst, i, uint8(int(float64(x)/s)+8))
		}
		return h, true
	}
	return 0, false
}

// dequantizeInt4 expands int4 scales and packed nibbles to float32 values,
// (nibble−8)·scale, for tensors of the given sizes.
func dequantizeInt4(scales []uint16, packed []byte, sizes []int, w []float32) {
	blk, off := 0, 0
	for _, n := range sizes {
		for start := 0; start < n; start += Int4BlockSize {
			s := Float16ToFloat32(scales[blk])
			p := packed[blk*Int4BlockSize/2:]
			end := min(start+Int4BlockSize, n)
			for i := 0; i < end-start; i++ {
				b := p[i/2]
				if i%2 == 1 {
					b >>= 4
				}
				w[off+start+i] = float32(int(b&0x0f)-8) * s
			}
			blk++
		}
		off += n
	}
}
