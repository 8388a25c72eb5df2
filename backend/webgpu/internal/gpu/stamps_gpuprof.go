//go:build gpuprof && (linux || windows)

package gpu

import "github.com/gogpu/wgpu/hal/vulkan"

// The timestamps of a build of tools/gpuprof/build.sh, through its patch of the binding.

func startStamps(d *Device) error {
	if err := vulkan.ProfStart(d.dev.HalDevice(), maxStamps); err != nil {
		return err
	}
	d.stamps = &stampLog{}
	return nil
}

func resetStamps()         { vulkan.ProfReset() }
func stampCount() int      { return int(vulkan.ProfCount()) }
func stampPeriod() float64 { return float64(vulkan.ProfPeriod) }

func resolveStamps(d *Device, b *Buffer) {
	vulkan.ProfResolve(d.enc.HalEncoder(), d.buffer(b).HalBuffer())
}
