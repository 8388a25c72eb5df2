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
// without naga's zeroing of workgroup memory (see zeroinit.go), or read from the folder that
// TINYGPT_SPIRV_DIR names (see spirvEnv).
func shaderModule(name, src string) (*wgpu.ShaderModuleDescriptor, error) {
	words, err := loadSPIRV(name)
	if err != nil {
		return nil, err
	}
	if words != nil {
		return &wgpu.ShaderModuleDescriptor{Label: name, SPIRV: words}, nil
	}
	b, err := naga.Compile(src)
	if err != nil {
		return nil, err
	}
	words, err = spirvWords(b)
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

// loadSPIRV returns the SPIR-V words of the kernel called name from the folder spirvEnv
// names, or nil if it names none or the folder holds none for it (see VariantFile).
func loadSPIRV(name string) ([]uint32, error) {
	b, err := VariantFile(spirvEnv, spirvFile(name))
	if b == nil || err != nil {
		return nil, err
	}
	words, err := spirvWords(b)
	if err == nil && (len(words) < 5 || words[0] != spirvMagic) {
		err = fmt.Errorf("not a SPIR-V module")
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", spirvEnv, filepath.Join(os.Getenv(spirvEnv), spirvFile(name)), err)
	}
	return words, nil
}

// spirvFile is the name of the file that holds the SPIR-V of the kernel called name: slashes
// and spaces in name become underscores.
func spirvFile(name string) string {
	return strings.NewReplacer("/", "_", " ", "_").Replace(name) + ".spv"
}

// dumpSPIRV writes the SPIR-V words of the kernel called name, as the driver gets them, to
// the file of dir that spirvFile names. A developer's aid: with
// TINYGPT_DUMP_SPIRV=dir set, every kernel compiled is written there, for python/vkstats.py
// (the driver's register counts and stack sizes) or spirv-dis.
func dumpSPIRV(dir, name string, words []uint32) error {
	b := make([]byte, 4*len(words))
	for i, w := range words {
		binary.LittleEndian.PutUint32(b[4*i:], w)
	}
	return os.WriteFile(filepath.Join(dir, spirvFile(name)), b, 0o644)
}
