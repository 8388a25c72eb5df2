//go:build linux || windows

package gpu

import (
	"encoding/binary"
	"fmt"

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
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("naga returned %d bytes of SPIR-V, not whole words", len(b))
	}
	words := make([]uint32, len(b)/4)
	for i := range words {
		words[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	if stripWorkgroupZeroing(words) < 0 {
		return nil, fmt.Errorf("naga returned malformed SPIR-V")
	}
	return &wgpu.ShaderModuleDescriptor{Label: name, SPIRV: words}, nil
}
