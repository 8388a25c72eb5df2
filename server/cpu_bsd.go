//go:build darwin || freebsd || netbsd || openbsd

package server

import "syscall"

// cpuName asks the kernel for the processor's name ("" where unknown): machdep.cpu.brand_string
// on macOS, hw.model on the BSDs.
func cpuName() string {
	for _, key := range []string{"machdep.cpu.brand_string", "hw.model"} {
		if v, err := syscall.Sysctl(key); err == nil && v != "" {
			return v
		}
	}
	return ""
}
