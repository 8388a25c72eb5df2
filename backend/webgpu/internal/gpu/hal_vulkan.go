//go:build linux || windows

package gpu

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/gogpu/naga"
	"github.com/gogpu/wgpu"
	// Vulkan is the native path on Linux and Windows (and, through Mesa's lavapipe, the CPU
	// path that CI tests the kernels on).
	_ "github.com/gogpu/wgpu/hal/vulkan"
)

// shaderModule describes the shader module of the WGSL source src: compiled to SPIR-V here,
// without naga's zeroing of workgroup memory (see zeroinit.go).
func shaderModule(name, src string) (*wgpu.ShaderModuleDescriptor, error) {
	b, err := naga.Compile(src)
	if err != nil {
		return nil, err
	}
	words, err := spirvWords(b)
	if err != nil {
		return nil, fmt.Errorf("naga returned %w", err)
	}
	if stripWorkgroupZeroing(words) < 0 {
		return nil, fmt.Errorf("naga returned malformed SPIR-V")
	}
	if dir := os.Getenv("TINYGPT_DUMP_SPIRV"); dir != "" {
		if err := dumpSPIRV(dir, name, words); err != nil {
			slog.Warn("TINYGPT_DUMP_SPIRV", "err", err)
		}
	}
	return &wgpu.ShaderModuleDescriptor{Label: name, SPIRV: words}, nil
}

// dumpSPIRV writes the SPIR-V words of the kernel called name, as the driver gets them, to
// dir/name.spv (slashes and spaces in name become underscores). A developer's aid: with
// TINYGPT_DUMP_SPIRV=dir set, every kernel compiled is written there, for python/vkstats.py
// (the driver's register counts and stack sizes) or spirv-dis.
func dumpSPIRV(dir, name string, words []uint32) error {
	b := make([]byte, 4*len(words))
	for i, w := range words {
		binary.LittleEndian.PutUint32(b[4*i:], w)
	}
	f := strings.NewReplacer("/", "_", " ", "_").Replace(name) + ".spv"
	return os.WriteFile(filepath.Join(dir, f), b, 0o644)
}
