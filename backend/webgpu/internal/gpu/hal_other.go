//go:build !(linux || windows || darwin)

package gpu

import "github.com/gogpu/wgpu"

// shaderModule describes the shader module of the WGSL source src, which the binding compiles.
// No native backend of the binding is registered on these systems (js/wasm among them), so
// Open finds no adapter and reports it; the CPU backend still runs.
func shaderModule(name, src string) (*wgpu.ShaderModuleDescriptor, error) {
	return &wgpu.ShaderModuleDescriptor{Label: name, WGSL: src}, nil
}
