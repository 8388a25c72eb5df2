package gpu

import (
	"encoding/binary"
	"errors"
	"os"
	"testing"
)

// openDevice opens the GPU for a test and closes it at the end; without an adapter the test
// is skipped, except in CI (CI=true), where lavapipe must be there.
func openDevice(t *testing.T) *Device {
	t.Helper()
	d, err := Open()
	if err != nil {
		if errors.Is(err, ErrNoAdapter) && os.Getenv("CI") != "true" {
			t.Skipf("skipping: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

// Clearing a buffer larger than one binding works window by window: with the binding limit
// forced down to 1 KB, a 10,000-byte buffer written with ones reads back all zero after fill.
func TestFillInWindows(t *testing.T) {
	d := openDevice(t)
	const n = 10000
	b, err := d.NewBuffer(n)
	if err != nil {
		t.Fatal(err)
	}
	ones := make([]byte, n)
	for i := range ones {
		ones[i] = 1
	}
	if err := d.Write(b, 0, ones); err != nil {
		t.Fatal(err)
	}
	saved := d.limits.MaxBindingSize
	d.limits.MaxBindingSize = 1024
	err = d.fill(b)
	d.limits.MaxBindingSize = saved
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, n)
	if err := d.Read(got, b, 0); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if v != 0 {
			t.Fatalf("byte %d is %d after fill, want 0", i, v)
		}
	}
}

// A long stream submitted in many pieces without waiting (FlushEvery small), past the end of
// the parameter arena (which makes the host wait and start it again): 5,000 staged writes, each
// its own dispatch, to 100 places in turn; each place holds the last value written to it.
func TestStreamInPieces(t *testing.T) {
	d := openDevice(t)
	defer func(n int) { FlushEvery = n }(FlushEvery)
	FlushEvery = 7
	const places, writes = 100, 5000
	b, err := d.NewBuffer(4 * places)
	if err != nil {
		t.Fatal(err)
	}
	for i := range writes {
		if err := d.Write(b, 4*uint64(i%places), binary.LittleEndian.AppendUint32(nil, uint32(i))); err != nil {
			t.Fatal(err)
		}
	}
	got := make([]byte, 4*places)
	if err := d.Read(got, b, 0); err != nil {
		t.Fatal(err)
	}
	for j := range places {
		if v := binary.LittleEndian.Uint32(got[4*j:]); v != writes-places+uint32(j) {
			t.Fatalf("place %d holds %d, want %d", j, v, writes-places+j)
		}
	}
	if s := d.Stats(); s.Submits < writes/FlushEvery {
		t.Errorf("%d submits for %d dispatches flushed every %d", s.Submits, s.Dispatches, FlushEvery)
	}
}
