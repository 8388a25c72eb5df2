//go:build darwin

package gpu

// Metal is the native path on macOS.
import _ "github.com/gogpu/wgpu/hal/metal"
