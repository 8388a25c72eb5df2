//go:build !unix

package train

// peakRSS returns the process's peak resident set size in bytes, or 0 if unknown.
func peakRSS() int64 { return 0 }

// resetPeakRSS starts a new peak where the system allows it (not here).
func resetPeakRSS() {}
