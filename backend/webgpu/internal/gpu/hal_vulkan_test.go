//go:build linux || windows

package gpu

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// With TINYGPT_DUMP_SPIRV set, a kernel's SPIR-V is written to that folder as the driver gets
// it: the same words, without the zeroing of workgroup memory.
func TestDumpSPIRV(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TINYGPT_DUMP_SPIRV", dir)
	const src = `
var<workgroup> tile: array<f32, 64>;
@group(0) @binding(0) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32) {
    tile[lid] = f32(lid);
    workgroupBarrier();
    out[lid] = tile[63u - lid];
}`
	desc, err := shaderModule("test/dump one", src)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "test_dump_one.spv"))
	if err != nil {
		t.Fatal(err)
	}
	words, err := spirvWords(b)
	if err != nil || len(words) == 0 || words[0] != 0x07230203 {
		t.Fatalf("%d bytes, not a SPIR-V module", len(b))
	}
	if !slices.Equal(words, desc.SPIRV) {
		t.Fatalf("the file's %d words differ from the %d the driver gets", len(words), len(desc.SPIRV))
	}
	if n := stripWorkgroupZeroing(slices.Clone(words)); n != 0 {
		t.Fatalf("the file still zeroes workgroup memory (%d stores)", n)
	}

	// An unwritable folder costs a warning, not the kernel.
	t.Setenv("TINYGPT_DUMP_SPIRV", filepath.Join(dir, "missing"))
	if _, err := shaderModule("test/dump two", src); err != nil {
		t.Fatal(err)
	}
}
