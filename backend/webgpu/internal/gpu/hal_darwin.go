//go:build darwin

package gpu

import (
	"fmt"
	"os"

	"github.com/gogpu/wgpu"
	// Metal is the native path on macOS.
	_ "github.com/gogpu/wgpu/hal/metal"
)

// shaderModule describes the shader module of the WGSL source src, which the binding compiles.
// TINYGPT_SPIRV_DIR (spirvEnv) is refused: Metal takes no SPIR-V, and timing the usual kernels
// in place of the variants asked for would mislead.
func shaderModule(name, src string) (*wgpu.ShaderModuleDescriptor, error) {
	if os.Getenv(spirvEnv) != "" {
		return nil, fmt.Errorf("%s: kernels from SPIR-V files run on Vulkan only (Linux, Windows), not on Metal", spirvEnv)
	}
	return &wgpu.ShaderModuleDescriptor{Label: name, WGSL: src}, nil
}

// noAdapterReason says why no adapter was found when the cause is one a user can mend; Metal
// is part of macOS, so there is none to name.
func noAdapterReason() string { return "" }
