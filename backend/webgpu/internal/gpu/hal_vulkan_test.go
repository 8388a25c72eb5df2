//go:build linux || windows

package gpu

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// With TINYGPT_DUMP_SPIRV set, a kernel's SPIR-V is written to that folder as the driver gets
// it: the same words, without the zeroing of workgroup memory.
func TestDumpSPIRV(t *testing.T) {
	t.Setenv("TINYGPT_SPIRV_DIR", "") // a developer's own setting must not replace the kernel
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
	if err != nil || len(words) == 0 || words[0] != spirvMagic {
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

// With TINYGPT_SPIRV_DIR set, a kernel whose SPIR-V file is in that folder runs that SPIR-V
// instead of its WGSL's; other kernels compile as usual, and a bad file or folder is an error.
func TestSPIRVDir(t *testing.T) {
	const src = `
@group(0) @binding(0) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32) {
    out[lid] = f32(lid);
}`
	other := strings.Replace(src, "f32(lid)", "2.0 * f32(lid)", 1)
	t.Setenv("TINYGPT_SPIRV_DIR", "")
	dump := t.TempDir()
	t.Setenv("TINYGPT_DUMP_SPIRV", dump)
	want, err := shaderModule("test/other", other)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TINYGPT_DUMP_SPIRV", "")
	dir := t.TempDir()
	if err := os.Rename(filepath.Join(dump, "test_other.spv"), filepath.Join(dir, "test_kernel.spv")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TINYGPT_SPIRV_DIR", dir)
	got, err := shaderModule("test/kernel", src)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.SPIRV, want.SPIRV) {
		t.Fatal("the kernel's SPIR-V is not the folder's")
	}
	usual, err := shaderModule("test/absent", src)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(usual.SPIRV, want.SPIRV) {
		t.Fatal("a kernel without a file in the folder took the folder's SPIR-V")
	}

	if err := os.WriteFile(filepath.Join(dir, "test_bad.spv"), []byte("not SPIR-V at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := shaderModule("test/bad", src); err == nil || !strings.Contains(err.Error(), "test_bad.spv") {
		t.Fatalf("a malformed file: %v, want an error naming it", err)
	}
	t.Setenv("TINYGPT_SPIRV_DIR", filepath.Join(dir, "missing"))
	if _, err := shaderModule("test/kernel", src); err == nil || !strings.Contains(err.Error(), "TINYGPT_SPIRV_DIR") {
		t.Fatalf("a folder that does not exist: %v, want an error naming TINYGPT_SPIRV_DIR", err)
	}
}
