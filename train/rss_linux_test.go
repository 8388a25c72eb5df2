package train

import (
	"os"
	"runtime"
	"testing"
)

// Bench's peak memory is its own run's: after memory is freed, resetPeakRSS lowers the
// high-water mark to what is in use.
func TestResetPeakRSS(t *testing.T) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Skipf("the high-water mark cannot be reset here: %v", err)
	}
	b := make([]byte, 256<<20)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	high := peakRSS()
	runtime.KeepAlive(b)
	resetPeakRSS()
	if low := peakRSS(); low > high-128<<20 {
		t.Errorf("peak %d MB after freeing 256 MB, %d MB before", low>>20, high>>20)
	}
}
