package gpu

import (
	"encoding/binary"
	"fmt"
)

// WGSL zero-initialises workgroup memory. naga (as gogpu's Vulkan path runs it) does so with
// a polyfill at the start of every compute entry point: thread (0, 0, 0) alone stores zero to
// each whole workgroup variable, then the workgroup waits at a barrier. A matrix product's
// tiles are 8.5 KB and attention's 16 KB, so that one thread issues hundreds to a thousand
// stores while the workgroup waits, in every workgroup of every dispatch. Our kernels write
// every element of workgroup memory they read before reading it (each shader's comment on its
// workgroup variables says how), so on Vulkan the WGSL is compiled here and the polyfill's
// stores are removed from the SPIR-V (its barrier stays).

// The SPIR-V magic number, and the opcodes and the storage class this file looks for.
const (
	opNop          = 0
	spirvMagic     = 0x07230203 // a SPIR-V module's first word
	opConstantNull = 46
	opVariable     = 59
	opStore        = 62
	classWorkgroup = 4
)

// stripWorkgroupZeroing replaces with OpNop every OpStore of a null constant (the polyfill's
// zero of a whole variable) into a workgroup variable of the SPIR-V module words, and returns
// how many it removed. It returns -1, changing nothing, if words is not a well-formed stream
// of instructions.
func stripWorkgroupZeroing(words []uint32) int {
	const header = 5
	if len(words) < header || words[0] != spirvMagic {
		return -1
	}
	// Check the instruction stream first, so that a malformed module is left as it is.
	for i := header; i < len(words); {
		n := int(words[i] >> 16)
		if n == 0 || i+n > len(words) {
			return -1
		}
		i += n
	}
	nulls, shared := map[uint32]bool{}, map[uint32]bool{}
	removed := 0
	for i := header; i < len(words); {
		n, op := int(words[i]>>16), words[i]&0xffff
		switch {
		case op == opConstantNull && n >= 3:
			nulls[words[i+2]] = true
		case op == opVariable && n >= 4 && words[i+3] == classWorkgroup:
			shared[words[i+2]] = true
		case op == opStore && n >= 3 && shared[words[i+1]] && nulls[words[i+2]]:
			for j := range n {
				words[i+j] = 1<<16 | opNop
			}
			removed++
		}
		i += n
	}
	return removed
}

// spirvWords returns the SPIR-V module b (as naga writes it: little-endian words) as words.
func spirvWords(b []byte) ([]uint32, error) {
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("%d bytes of SPIR-V, not whole words", len(b))
	}
	words := make([]uint32, len(b)/4)
	for i := range words {
		words[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return words, nil
}
