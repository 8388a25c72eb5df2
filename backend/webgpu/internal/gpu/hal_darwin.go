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
