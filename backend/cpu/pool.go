package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// A task is a parallel loop body: run does iterations [lo, hi) of a loop, using worker w's
// scratch space (0 <= w < pool size). Kernels keep their task values inside the Backend so that
// starting a parallel loop allocates nothing.
type task interface {
	run(w, lo, hi int)
}

// pool is a fixed set of goroutines that run parallel loops. The goroutine calling Run takes
// part as worker 0. Which chunk computes which element is fixed, so results never depend on
// scheduling.
//
// Each worker taking part in a loop is first given its own share of the chunks: worker w of P
// gets chunks [w·n/P, (w+1)·n/P). Kernels number their chunks in row order (of the activations,
// [tokens, width]), so consecutive kernels give a worker the same rows, which stay in its core's
// L2 cache instead of moving between cores (a tiny step on two cores ran 1.4× faster than on one
// when chunks went to whichever worker asked first). A worker done with its share takes chunks
// from the others' shares, so a loop waits for its chunks, not for its helpers: a helper that
// wakes late (its thread descheduled because the machine is busy) finds its share taken and goes
// back to sleep, and the caller has long moved on.
//
// Chunks are claimed by one atomic add on a share's word in claims, which holds the number of
// workers taking part, the share's end and its next chunk: an index below the end is a chunk of
// the loop in flight, whose fields stay valid while any of its chunks is running, because a loop
// is published only after every chunk of the previous one completed; an index past the end
// claims nothing. (An add, unlike a compare-and-swap, never has to be retried.) Each worker
// counts the chunks it completed on a line of its own, and the caller adds the counts up, so no
// counter is updated by every worker.
//
// A panic in a chunk run by the caller stops the loop (no chunk is handed out any more), waits
// for the chunks that helpers are running and leaves the pool usable; a panic in a helper ends
// the program, as in any goroutine.
//
// A training step is a few hundred parallel loops of tens of microseconds each, so waking a
// sleeping goroutine (several microseconds, more on a busy machine) for each would cost as much
// as the work. Helpers therefore watch for the next loop for spinTime after finishing one before
// they go to sleep, and the caller watches for its chunks to complete before it sleeps on done.
//
// Handshake: a goroutine that goes to sleep first stores that it will, then looks once more
// for what would wake it; the goroutine that would wake it first stores what it has to say, then
// looks whether the other sleeps. Neither is lost only if neither goroutine's look can see
// memory from before the other's store, which Go's atomics guarantee (they are sequentially
// consistent). The stores of these handshakes are nevertheless swaps: a swap is what a store
// compiles to on amd64 anyway (XCHG), but on arm64 a store is STLR, and qemu's user-mode
// emulator of arm64 on an x86 host, on which CI runs the arm64 kernels, lets an STLR pass a
// later load (2–25 of 200,000 tries of this pattern saw both stale values; none with a swap).
// There it lost a wake-up and hung a test for good.
//
// The caller must not block on done when it need not: a goroutine made runnable by another
// (the last helper to finish, sending on done) joins that goroutine's processor, which the
// helper keeps busy while it watches for the next loop, so the caller would stall for a whole
// spinTime. Only a caller that has announced it is waiting gets a value on done.
type pool struct {
	mu      sync.Mutex // one parallel loop at a time
	workers int
	gen     atomic.Uint64 // generation of the latest loop: written under mu, read by workers
	// claims holds each worker's share of the loop in flight: workers taking part<<40 | end of
	// the share<<20 | next chunk index. The words are adjacent, so that publishing a loop and
	// looking for chunks left in the others' shares touch two cache lines, not sixteen (an
	// empty loop on 16 cores took 6.5 µs with a line per share, 4.4 µs so).
	claims []atomic.Uint64
	slots  []slot // per worker (slot 0 is the caller's: only its share is used)

	// The loop in flight. gen, t, n, chunk and nchunks are written before the loop is
	// published in claims, and not changed until every chunk of it has completed.
	t                 task
	n, chunk, nchunks int

	_       [64]byte
	waiting atomic.Bool   // the caller has stopped watching for completion and sleeps on done
	done    chan struct{} // woken when the last chunk of a loop completes, if waiting
}

// slot is one worker's mailbox, alone on its cache line so that a helper watching for work reads
// a line only the caller writes, and its count of completed chunks, on a line of its own.
type slot struct {
	gen      atomic.Uint64 // the latest loop published to this helper
	sleeping atomic.Bool   // asleep (or about to be) on wake
	wake     chan struct{}
	_        [40]byte
	// completed counts the chunks this worker ran of one loop: gen<<24 | count. Only the
	// worker writes it, on a line of its own, and the caller adds up every worker's count for
	// the loop in flight: no counter is shared by all the workers.
	completed atomic.Uint64
	_         [56]byte
}

// chunkMask masks a share's end and next index, 20 bits each in its claims word. A loop has at
// most maxChunks chunks, so that the index, which workers may push a little past the end (only
// after seeing it below), never overflows into the end.
const (
	chunkMask = 1<<20 - 1
	maxChunks = 1 << 19
)

var (
	sharedPoolOnce sync.Once
	sharedPool     *pool
)

// defaultPool returns the process-wide pool with one worker per usable CPU.
func defaultPool() *pool {
	sharedPoolOnce.Do(func() { sharedPool = newPool(runtime.GOMAXPROCS(0)) })
	return sharedPool
}

func newPool(workers int) *pool {
	if workers < 1 {
		workers = 1
	}
	p := &pool{workers: workers, slots: make([]slot, workers), claims: make([]atomic.Uint64, workers), done: make(chan struct{}, 1)}
	for w := 1; w < workers; w++ {
		p.slots[w].wake = make(chan struct{}, 1)
		go p.loop(w)
	}
	return p
}

// spinTime is how long an idle helper keeps watching for the next loop, and the caller for the
// end of its loop, before sleeping.
const spinTime = 500 * time.Microsecond

// loop is helper w: it waits for loops published to its slot and helps run them.
func (p *pool) loop(w int) {
	s := &p.slots[w]
	var seen uint64
	for {
		if !spin(func() bool { return s.gen.Load() != seen }) {
			// Announce the sleep, then look once more: Run publishes a loop before it reads
			// sleeping, so either it sees this helper asleep and wakes it, or this look sees
			// the loop. A stale wake-up only costs one more look. (A swap, not a store: see
			// handshake.)
			s.sleeping.Swap(true)
			if s.gen.Load() == seen {
				<-s.wake
			}
			s.sleeping.Store(false)
		}
		seen = s.gen.Load()
		p.drain(w)
	}
}

// callerSpin is how long the caller of Run watches for the other chunks to complete before it
// sleeps: shorter than spinTime, because on a busy machine a helper descheduled in the middle of
// a chunk would otherwise keep the caller spinning on a core that the helper needs.
const callerSpin = 50 * time.Microsecond

// spin calls ready until it returns true (spin returns true) or spinTime has passed (false).
// It busy-waits: yielding to the Go scheduler instead (runtime.Gosched) sends every watching
// goroutine through the global run queue, whose lock then costs more than the loops.
func spin(ready func() bool) bool { return spinFor(ready, spinTime) }

// spinFor is spin for at most d. Between looks it pauses the core briefly (the x86 PAUSE
// instruction), which lets a hyper-threaded sibling run and saves power.
func spinFor(ready func() bool, d time.Duration) bool {
	start := time.Now()
	for i := 0; ; i++ {
		if ready() {
			return true
		}
		if i&255 == 255 && time.Since(start) > d {
			return false
		}
		pause()
	}
}

// completedOf returns the number of chunks of loop gen that have completed.
func (p *pool) completedOf(gen uint64) int {
	n := 0
	for w := range p.slots {
		if v := p.slots[w].completed.Load(); v>>24 == gen {
			n += int(v & (1<<24 - 1))
		}
	}
	return n
}

// drain claims and runs chunks of the current loop until none is left: its own share first,
// then what is left of the other workers' shares, in turn.
func (p *pool) drain(w int) {
	parts := int(p.claims[w].Load() >> 40)
	for i := range parts {
		s := &p.claims[(w+i)%parts]
		for {
			// Look before adding, so that an exhausted share's index grows only by the
			// workers that saw a chunk left in it at once.
			if v := s.Load(); v&chunkMask >= v>>20&chunkMask {
				break
			}
			v := s.Add(1) - 1
			idx := v & chunkMask
			if idx >= v>>20&chunkMask {
				break
			}
			// Chunk idx of the loop in flight is ours, so the fields below are its until it
			// is counted as completed.
			lo := int(idx) * p.chunk
			gen, nchunks := p.gen.Load(), p.nchunks
			p.t.run(w, lo, min(lo+p.chunk, p.n))
			c := &p.slots[w].completed
			if v := c.Load(); v>>24 == gen { // a swap, not a store: see handshake
				c.Swap(v + 1)
			} else {
				c.Swap(gen<<24 | 1)
			}
			if p.waiting.Load() && p.completedOf(gen) == nchunks {
				select {
				case p.done <- struct{}{}:
					// The caller now waits to run on this helper's processor: let it.
					runtime.Gosched()
				default: // a wake-up is already pending
				}
			}
		}
	}
}

// Run executes t over [0, n) in chunks of the given size. cost is the work of one iteration in
// rough nanoseconds of one core (vector kernels: flops/64; scalar loops: about one per
// operation); loops too small to repay the synchronisation run on the caller alone.
func (p *pool) Run(t task, n, chunk int, cost int) {
	if n <= 0 {
		return
	}
	if chunk < 1 {
		chunk = 1
	}
	if (n+chunk-1)/chunk > maxChunks {
		chunk = (n + maxChunks - 1) / maxChunks
	}
	nchunks := (n + chunk - 1) / chunk
	// Each worker taking part costs the loop some synchronisation (cache lines passed between
	// cores), so a loop takes at most one worker per workPerWorker of work.
	const workPerWorker = 4096
	helpers := min(p.workers, nchunks, n*cost/workPerWorker) - 1
	if helpers <= 0 {
		t.run(0, 0, n) // worker 0's scratch belongs to the calling Backend: no lock needed
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	gen := p.gen.Add(1)
	p.t, p.n, p.chunk, p.nchunks = t, n, chunk, nchunks
	parts := helpers + 1
	for w := range parts { // opens the loop's chunks, share by share
		lo, hi := w*nchunks/parts, (w+1)*nchunks/parts
		p.claims[w].Store(uint64(parts)<<40 | uint64(hi)<<20 | uint64(lo))
	}
	for w := 1; w <= helpers; w++ {
		s := &p.slots[w]
		s.gen.Swap(gen) // a swap, not a store: see handshake
		if s.sleeping.Load() {
			select {
			case s.wake <- struct{}{}:
			default: // already has a wake-up pending
			}
		}
	}
	p.drainCaller(parts)
	finished := func() bool { return p.completedOf(gen) == nchunks }
	if !spinFor(finished, callerSpin) {
		// As with a helper's sleep: announce, then look again. A stale wake-up left over
		// from an earlier loop only costs one more look. (A swap, not a store: see
		// handshake.)
		p.waiting.Swap(true)
		for !finished() {
			<-p.done
		}
		p.waiting.Store(false)
	}
	p.t = nil
}

// drainCaller is drain for the caller of Run: if a chunk panics it closes the loop, waits for
// the chunks already claimed by helpers to complete, and passes the panic on.
func (p *pool) drainCaller(parts int) {
	defer func() {
		if r := recover(); r != nil {
			unclaimed := 0
			for w := range parts { // an end of 0: nothing more to claim
				v := p.claims[w].Swap(uint64(parts) << 40)
				unclaimed += int(v>>20&chunkMask - min(v&chunkMask, v>>20&chunkMask))
			}
			for p.completedOf(p.gen.Load()) < p.nchunks-unclaimed-1 { // all but the chunk that panicked here
				runtime.Gosched()
			}
			p.t = nil
			panic(r)
		}
	}()
	p.drain(0)
}
