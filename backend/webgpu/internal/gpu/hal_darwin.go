//go:build darwin

package gpu

import (
	"github.com/gogpu/wgpu"
	// Metal is the native path on macOS.
	_ "github.com/gogpu/wgpu/hal/metal"
)

// shaderModule describes the shader module of the WGSL source src, which the binding compiles.
func shaderModule(name, src string) (*wgpu.ShaderModuleDescriptor, error) {
	return &wgpu.ShaderModuleDescriptor{Label: name, WGSL: src}, nil
}

// noAdapterReason says why no adapter was found when the cause is one a user can mend; Metal
// is part of macOS, so there is none to name.
func noAdapterReason() string { return "" }
