//go:build linux || windows

package gpu

// Vulkan is the native path on Linux and Windows (and, through Mesa's lavapipe, the CPU path
// that CI tests the kernels on).
import _ "github.com/gogpu/wgpu/hal/vulkan"
