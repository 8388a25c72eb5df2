package gpu

import (
	"strings"
	"testing"
)

// The report of GPU timestamps, from made-up ones: two steps of three dispatches.
func TestStampReport(t *testing.T) {
	var l stampLog
	for step := 0; step < 2; step++ {
		l.dispatch("upload", true)
		l.flush(1, true)
		l.dispatch("matmul", true)
		l.dispatch("matmul", false)
		l.flush(2, false)
	}
	// Ticks of 1 µs: the dispatches end 0, 100, 130, 400, 460 and 490 µs in.
	ticks := []uint64{1000, 1100, 1130, 1400, 1460, 1490}
	got := strings.Join(strings.Fields(l.report(ticks, 1000, 2)), " ")
	for _, want := range []string{
		"6 dispatches in 2 steps; 0.245 ms a step from the first dispatch's end to the last's, 0.215 ms of it in dispatches that begin a submit",
		"upload 0.5 0.135 270.00 1 × 270.0 µs (1 × 270.0 µs) matmul 2.0 0.110 55.00 2 × 80.0 µs",
		"0 + upload 270.00 1 * matmul 60.00 2 matmul 30.00",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	l.reset()
	if len(l.names)+len(l.first)+len(l.wrote) != 0 {
		t.Errorf("reset left %d names", len(l.names))
	}
}
