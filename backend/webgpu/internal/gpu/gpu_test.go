package gpu

import (
	"errors"
	"os"
	"testing"
)

// Clearing a buffer larger than one binding works window by window: with the binding limit
// forced down to 1 KB, a 10,000-byte buffer written with ones reads back all zero after fill.
func TestFillInWindows(t *testing.T) {
	d, err := Open()
	if err != nil {
		if errors.Is(err, ErrNoAdapter) && os.Getenv("CI") != "true" {
			t.Skipf("skipping: %v", err)
		}
		t.Fatal(err)
	}
	defer d.Close()
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
