package train

import (
	"bytes"
	"os"
	"runtime/debug"
	"strconv"
)

// resetPeakRSS starts a new peak: what the program has freed goes back to the system, and the
// high-water mark is set to the memory in use now (writing 5 to clear_refs; where that is not
// allowed, peakRSS stays the whole process's).
func resetPeakRSS() {
	debug.FreeOSMemory()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// peakRSS returns the process's peak resident set size in bytes, or 0 if unknown. It reads
// VmHWM, the high-water mark of this program's memory: getrusage's maxrss would also count
// the memory of the process that started it, when that was larger (it survives exec).
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			kb, err := strconv.ParseInt(string(bytes.TrimSuffix(bytes.TrimSpace(v), []byte(" kB"))), 10, 64)
			if err != nil {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}
