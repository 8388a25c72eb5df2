package gpu

import (
	"encoding/binary"
	"errors"
	"os"
	"runtime"
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

// A long stream submitted in pieces (FlushEvery small), past the end of the parameter arena
// (which makes the host wait and start it again): 5,000 staged writes, each its own dispatch, to
// 100 places in turn; each place holds the last value written to it. Every piece carries new
// parameter blocks, so a piece is submitted only once the GPU has finished the one before (see
// writesWait): fewer submits than pieces, but more than one.
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
	if s := d.Stats(); s.WriteSubmits < 2 {
		t.Errorf("%d submits with writes (of %d) for %d dispatches flushed every %d", s.WriteSubmits, s.Submits, s.Dispatches, FlushEvery)
	}
}

// countFrom returns n little-endian words counting up from base.
func countFrom(base uint32, n int) []byte {
	b := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(b[4*i:], base+uint32(i))
	}
	return b
}

// ReadLater sees a buffer as the work recorded before it leaves it, whatever is recorded after
// it before Await: three reads of one buffer, each followed by writes that change it, one read
// at an offset that is not binding-aligned, and a read of another buffer. Over two rounds,
// so that the second reuses the first's buffers, and with a submit in the middle of a read's
// recording (FlushEvery 1).
func TestReadLater(t *testing.T) {
	d := openDevice(t)
	defer func(n int) { FlushEvery = n }(FlushEvery)
	const n = 300 // words
	a, err := d.NewBuffer(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	other, err := d.NewBuffer(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	words := func(base uint32) []byte { return countFrom(base, n) }
	for round := range 2 {
		FlushEvery = []int{64, 1}[round]
		base := uint32(1000 * round)
		if err := d.Write(other, 0, words(base+500)); err != nil {
			t.Fatal(err)
		}
		var got [4][]byte
		for i := range 3 {
			if err := d.Write(a, 0, words(base+uint32(100*i))); err != nil {
				t.Fatal(err)
			}
			got[i] = make([]byte, 4*(n-i*7))
			if err := d.ReadLater(got[i], a, 4*uint64(i*7)); err != nil {
				t.Fatal(err)
			}
		}
		got[3] = make([]byte, 4*n)
		if err := d.ReadLater(got[3], other, 0); err != nil {
			t.Fatal(err)
		}
		if err := d.Write(other, 0, words(9999)); err != nil {
			t.Fatal(err)
		}
		if err := d.Await(0); err != nil {
			t.Fatal(err)
		}
		for i, g := range got {
			for j := range len(g) / 4 {
				want := base + uint32(100*i+7*i+j)
				if i == 3 {
					want = base + 500 + uint32(j)
				}
				if v := binary.LittleEndian.Uint32(g[4*j:]); v != want {
					t.Fatalf("round %d, read %d, word %d: %d, want %d", round, i, j, v, want)
				}
			}
		}
	}
	if len(d.readPool) != 4 {
		t.Errorf("%d readback buffers after two rounds of four reads, want 4 (reused)", len(d.readPool))
	}
}

// Await(keep) waits for all reads but the last keep, which stay in flight and keep seeing the
// buffer as the work recorded before them left it: a trainer's pattern, each step's reads
// recorded before the reads of the step before are awaited. The reads awaited give their
// buffers back for reuse; the kept ones do not until they are awaited.
func TestAwaitKeeps(t *testing.T) {
	d := openDevice(t)
	const n = 64 // words
	a, err := d.NewBuffer(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	words := func(base uint32) []byte { return countFrom(base, n) }
	check := func(step int, got []byte, base uint32) {
		t.Helper()
		for j := range n {
			if v := binary.LittleEndian.Uint32(got[4*j:]); v != base+uint32(j) {
				t.Fatalf("step %d, word %d: %d, want %d", step, j, v, base+uint32(j))
			}
		}
	}
	var got [2][2][]byte // two steps in flight at most, two reads each
	for step := range 6 {
		r := &got[step%2]
		if err := d.Write(a, 0, words(uint32(1000*step))); err != nil {
			t.Fatal(err)
		}
		for i := range r {
			r[i] = make([]byte, 4*n)
			if err := d.ReadLater(r[i], a, 0); err != nil {
				t.Fatal(err)
			}
		}
		if step == 0 {
			continue
		}
		if err := d.Await(2); err != nil { // the step before's reads, this step's kept
			t.Fatal(err)
		}
		for _, g := range got[(step-1)%2] {
			check(step-1, g, uint32(1000*(step-1)))
		}
		if len(d.reads) != 2 {
			t.Fatalf("step %d: %d reads in flight after Await(2), want 2", step, len(d.reads))
		}
		for _, g := range r {
			for _, c := range g {
				if c != 0 {
					t.Fatalf("step %d: a kept read filled its bytes before it was awaited", step)
				}
			}
		}
	}
	if err := d.Write(a, 0, words(99999)); err != nil {
		t.Fatal(err)
	}
	if err := d.Await(0); err != nil {
		t.Fatal(err)
	}
	for _, g := range got[5%2] {
		check(5, g, 5000)
	}
	if len(d.reads) != 0 || len(d.readPool) != 4 {
		t.Errorf("after the last Await: %d reads in flight and %d buffers to reuse, want 0 and 4", len(d.reads), len(d.readPool))
	}
	if err := d.Await(5); err != nil { // nothing in flight: nothing to wait for
		t.Fatal(err)
	}
}

// Staged writes of 100 KB (two pieces each) to 3 buffers in turn, 60 of them, through the
// upload arena (two windows each: past the arena's end, which makes the host wait and start it
// again) and through upload pages (one each). Each buffer holds the last data written to it,
// and once the GPU has run them the pages are released: only the three buffers are left.
func TestUploads(t *testing.T) {
	defer func() { ForceUpload = "" }()
	for _, via := range []string{"arena", "page"} {
		ForceUpload = via
		t.Run(via, testUploads)
	}
}

func testUploads(t *testing.T) {
	d := openDevice(t)
	const size, writes = 100 << 10, 60
	var bufs [3]*Buffer
	for i := range bufs {
		var err error
		if bufs[i], err = d.NewBuffer(size); err != nil {
			t.Fatal(err)
		}
	}
	data := func(k int) []byte {
		b := make([]byte, size)
		for i := 0; i < size; i += 4 {
			binary.LittleEndian.PutUint32(b[i:], uint32(k<<20+i))
		}
		return b
	}
	for k := range writes {
		if err := d.Write(bufs[k%3], 0, data(k)); err != nil {
			t.Fatal(err)
		}
	}
	for i, b := range bufs {
		got := make([]byte, size)
		if err := d.Read(got, b, 0); err != nil {
			t.Fatal(err)
		}
		want := data(writes - 3 + i)
		for j := 0; j < size; j += 4 {
			if g, w := binary.LittleEndian.Uint32(got[j:]), binary.LittleEndian.Uint32(want[j:]); g != w {
				t.Fatalf("buffer %d, byte %d: %#x, want %#x", i, j, g, w)
			}
		}
	}
	// Read waited for the GPU, which released what it had finished with.
	if len(d.bufs) != len(bufs)+1 || len(d.graves) != 0 { // and the arena
		t.Errorf("%d buffers registered and %d waiting to be released after the writes have run, want %d and 0", len(d.bufs), len(d.graves), len(bufs)+1)
	}
}

// quietWayland gives the Vulkan layers an empty private XDG_RUNTIME_DIR only while it is unset,
// and leaves the environment as it found it.
func TestQuietWayland(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux only")
	}
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/1000") // restored after the test
	restore := quietWayland()
	if got := os.Getenv("XDG_RUNTIME_DIR"); got != "/run/user/1000" {
		t.Errorf("a set XDG_RUNTIME_DIR changed to %q", got)
	}
	restore()
	if got := os.Getenv("XDG_RUNTIME_DIR"); got != "/run/user/1000" {
		t.Errorf("a set XDG_RUNTIME_DIR changed to %q after restore", got)
	}

	os.Unsetenv("XDG_RUNTIME_DIR")
	restore = quietWayland()
	dir := os.Getenv("XDG_RUNTIME_DIR")
	if dir == "" {
		t.Fatal("XDG_RUNTIME_DIR still unset")
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("XDG_RUNTIME_DIR %s: %v, %v (want a folder, mode 0700)", dir, fi, err)
	}
	if names, _ := os.ReadDir(dir); len(names) != 0 {
		t.Errorf("%s is not empty: %v", dir, names)
	}
	restore()
	if v, ok := os.LookupEnv("XDG_RUNTIME_DIR"); ok {
		t.Errorf("XDG_RUNTIME_DIR = %q after restore, want unset", v)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s left behind: %v", dir, err)
	}
}
