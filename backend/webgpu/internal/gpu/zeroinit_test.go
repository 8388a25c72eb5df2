package gpu

import (
	"slices"
	"testing"

	"github.com/gogpu/naga"
)

// countStores returns the OpStore instructions of a SPIR-V module.
func countStores(words []uint32) int {
	n := 0
	for i := 5; i < len(words); i += int(words[i] >> 16) {
		if words[i]&0xffff == opStore {
			n++
		}
	}
	return n
}

func TestStripWorkgroupZeroing(t *testing.T) {
	const src = `
var<workgroup> tile: array<vec4<f32>, 64>;
var<workgroup> sums: array<f32, 64>;
@group(0) @binding(0) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32) {
    tile[lid] = vec4<f32>(f32(lid));
    sums[lid] = 1.0;
    workgroupBarrier();
    out[lid] = tile[63u - lid].x + sums[lid];
}`
	b, err := naga.Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	words, err := spirvWords(b)
	if err != nil {
		t.Fatal(err)
	}
	before := countStores(words)
	// The polyfill's two stores (one per variable) go; the kernel's own three stay.
	if n := stripWorkgroupZeroing(words); n != 2 {
		t.Fatalf("removed %d stores, want 2 (the zeroing of tile and sums)", n)
	}
	if after := countStores(words); after != before-2 || after < 3 {
		t.Fatalf("stores before %d, after %d: want 2 fewer and the kernel's own 3 kept", before, after)
	}
	if n := stripWorkgroupZeroing(words); n != 0 {
		t.Fatalf("second pass removed %d more", n)
	}

	// A malformed module is left as it was.
	bad := slices.Clone(words[:len(words)-1])
	bad[len(bad)-1] = 0x00ff0000 | opStore // claims 255 words
	orig := slices.Clone(bad)
	if n := stripWorkgroupZeroing(bad); n != -1 || !slices.Equal(bad, orig) {
		t.Fatalf("malformed module: got %d and changed words", n)
	}
	if n := stripWorkgroupZeroing([]uint32{1, 2, 3}); n != -1 {
		t.Fatalf("not SPIR-V: got %d, want -1", n)
	}
}
