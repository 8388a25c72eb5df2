//go:build unix && !linux

package train

import (
	"runtime"
	"syscall"
)

// peakRSS returns the process's peak resident set size in bytes, or 0 if unknown.
func peakRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	if runtime.GOOS == "darwin" || runtime.GOOS == "ios" {
		return ru.Maxrss // bytes there
	}
	return ru.Maxrss * 1024 // kilobytes on Linux and the BSDs
}

// resetPeakRSS starts a new peak where the system allows it (not here: getrusage's maximum
// is the whole process's).
func resetPeakRSS() {}
