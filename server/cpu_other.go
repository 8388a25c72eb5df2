//go:build !linux && !darwin && !freebsd && !netbsd && !openbsd && !windows

package server

// cpuName is "" where the platform does not tell the processor's name.
func cpuName() string { return "" }
