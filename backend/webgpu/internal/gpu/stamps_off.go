//go:build !gpuprof || !(linux || windows)

package gpu

import "errors"

// Without the patched binding there are no timestamps (stamps.go).

func startStamps(*Device) error {
	return errors.New("GPU timestamps need a build of tools/gpuprof/build.sh (a patched binding, Vulkan only)")
}

func resetStamps()                   {}
func stampCount() int                { return 0 }
func stampPeriod() float64           { return 1 }
func resolveStamps(*Device, *Buffer) {}
