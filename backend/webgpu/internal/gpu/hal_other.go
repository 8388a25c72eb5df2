//go:build !(linux || windows || darwin)

package gpu

import (
	"runtime"

	"github.com/gogpu/wgpu"
)

// shaderModule describes the shader module of the WGSL source src, which the binding compiles.
// No native backend of the binding is registered on these systems (js/wasm among them), so
// Open finds no adapter and reports it; the CPU backend still runs.
func shaderModule(name, src string) (*wgpu.ShaderModuleDescriptor, error) {
	return &wgpu.ShaderModuleDescriptor{Label: name, WGSL: src}, nil
}

// noAdapterReason says why no adapter was found: this system has no native backend.
func noAdapterReason() string {
	return "this build has no native GPU backend on " + runtime.GOOS + "/" + runtime.GOARCH
}
