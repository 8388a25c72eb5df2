package gpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// GPU timestamps: how long each dispatch of a step takes on the GPU, in the stream as it runs
// (barriers, launches and the gaps where the GPU waits for the host included). The binding
// exposes no timestamps, so this needs a build of tools/gpuprof/build.sh, which patches a
// copy of the binding to write one after every dispatch and builds with the gpuprof tag; in
// that build, setting the environment variable TimestampsEnv turns them on and
// `tinygpt bench --backend webgpu --profile counts` prints Device.Timestamps. Other builds
// refuse the variable when the device opens. A developer's aid: the timestamps themselves
// add a few µs to every dispatch.

// TimestampsEnv is the environment variable that turns GPU timestamps on.
const TimestampsEnv = "TINYGPT_GPU_TIMESTAMPS"

// ErrTimestamps is returned by Open when TimestampsEnv is set but the build or the device
// cannot make timestamps.
var ErrTimestamps = errors.New("no GPU timestamps")

// maxStamps is the number of timestamps kept between two resets.
const maxStamps = 1 << 16

// stampLog names the dispatches whose timestamps the patched binding writes, in order.
type stampLog struct {
	names []string
	first []bool // the dispatch begins a submit
	wrote []bool // ... whose submit carried queued writes (kernel parameters or uploads)
}

func (l *stampLog) dispatch(name string, first bool) {
	l.names = append(l.names, name)
	l.first = append(l.first, first)
	l.wrote = append(l.wrote, false)
}

// flush notes that the last pending dispatches are submitted, with queued writes or not.
func (l *stampLog) flush(pending int, wrote bool) {
	if i := len(l.wrote) - pending; pending > 0 && i >= 0 {
		l.wrote[i] = wrote
	}
}

func (l *stampLog) reset() {
	l.names, l.first, l.wrote = l.names[:0], l.first[:0], l.wrote[:0]
}

// restartStamps waits for the GPU and starts the timestamps and their names over.
func (d *Device) restartStamps() {
	if d.drain() != nil {
		return
	}
	resetStamps()
	d.stamps.reset()
}

// Timestamps reports, for the dispatches since the last ResetStats over steps training steps,
// the GPU time from the end of each dispatch to the end of the next, by kernel, and the last
// step's dispatches in order. It is empty without TimestampsEnv.
func (d *Device) Timestamps(steps int) (string, error) {
	if d.stamps == nil {
		return "", nil
	}
	if err := d.drain(); err != nil {
		return "", err
	}
	n := stampCount()
	if n != len(d.stamps.names) {
		return "", fmt.Errorf("%d timestamps for %d dispatches (at most %d are kept)", n, len(d.stamps.names), maxStamps)
	}
	if n < 2 {
		return "", nil
	}
	buf, err := d.NewBuffer(uint64(8 * n))
	if err != nil {
		return "", err
	}
	defer d.Release(buf)
	if err := d.encoder(); err != nil {
		return "", err
	}
	resolveStamps(d, buf)
	raw := make([]byte, 8*n)
	if err := d.Read(raw, buf, 0); err != nil {
		return "", err
	}
	ticks := make([]uint64, n)
	for i := range ticks {
		ticks[i] = binary.LittleEndian.Uint64(raw[8*i:])
	}
	return d.stamps.report(ticks, stampPeriod(), steps), nil
}

// report summarises timestamps ticks (one after each dispatch of the log, period ns a tick)
// over steps steps. A dispatch that begins a submit is marked * (+ when that submit carried
// queued writes): its time includes any wait for the host.
func (l *stampLog) report(ticks []uint64, period float64, steps int) string {
	steps = max(steps, 1)
	type sum struct {
		n        int
		us       float64
		nFirst   int
		usFirst  float64
		nWrote   int
		usWrote  float64
		position int // first appearance, for a stable order among equal times
	}
	by := map[string]*sum{}
	var total, gaps float64
	us := func(i int) float64 { return float64(ticks[i]-ticks[i-1]) * period / 1e3 }
	for i := 1; i < len(ticks); i++ {
		t := us(i)
		s := by[l.names[i]]
		if s == nil {
			s = &sum{position: i}
			by[l.names[i]] = s
		}
		s.n++
		s.us += t
		if l.first[i] {
			s.nFirst++
			s.usFirst += t
			gaps += t
		}
		if l.wrote[i] {
			s.nWrote++
			s.usWrote += t
		}
		total += t
	}
	names := make([]string, 0, len(by))
	for k := range by {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := by[names[i]], by[names[j]]
		if a.us != b.us {
			return a.us > b.us
		}
		return a.position < b.position
	})
	per := float64(steps)
	var b strings.Builder
	fmt.Fprintf(&b, "GPU timestamps: %d dispatches in %d steps; %.3f ms a step from the first dispatch's end to the last's, %.3f ms of it in dispatches that begin a submit\n",
		len(ticks), steps, total/1e3/per, gaps/1e3/per)
	fmt.Fprintf(&b, "    %-32s %8s %10s %9s   %s\n", "kernel", "a step", "ms a step", "µs each", "beginning a submit (with writes)")
	for _, k := range names {
		s := by[k]
		fmt.Fprintf(&b, "    %-32s %8.1f %10.3f %9.2f", k, float64(s.n)/per, s.us/1e3/per, s.us/float64(s.n))
		if s.nFirst > 0 {
			fmt.Fprintf(&b, "   %d × %.1f µs", s.nFirst, s.usFirst/float64(s.nFirst))
			if s.nWrote > 0 {
				fmt.Fprintf(&b, " (%d × %.1f µs)", s.nWrote, s.usWrote/float64(s.nWrote))
			}
		}
		b.WriteByte('\n')
	}
	last := len(ticks) / steps
	fmt.Fprintf(&b, "  the last step in order (µs from the previous dispatch's end):\n")
	for i := max(len(ticks)-last, 1); i < len(ticks); i++ {
		mark := " "
		switch {
		case l.wrote[i]:
			mark = "+"
		case l.first[i]:
			mark = "*"
		}
		fmt.Fprintf(&b, "    %5d %s %-32s %8.2f\n", i-(len(ticks)-last), mark, l.names[i], us(i))
	}
	return b.String()
}
