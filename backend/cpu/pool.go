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
// part as worker 0. Chunks are handed out dynamically, but which chunk computes which element is
// fixed, so results never depend on scheduling.
//
// A loop waits for its chunks, not for its helpers: a helper that wakes late (its thread
// descheduled because the machine is busy) finds no chunk left and goes back to sleep, and the
// caller has long moved on. Chunks are claimed by one atomic add on a word that holds the loop's
// chunk count and next chunk index (and, for debugging, its generation): an index below the
// count is a chunk of the loop in flight, whose fields stay valid while any of its chunks is
// running, because a loop is published only after every chunk of the previous one completed;
// an index past the count claims nothing. (An add, unlike a compare-and-swap, never has to be
// retried, which matters when sixteen cores claim at once.)
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
// The caller must not block on done when it need not: a goroutine made runnable by another
// (the last helper to finish, sending on done) joins that goroutine's processor, which the
// helper keeps busy while it watches for the next loop, so the caller would stall for a whole
// spinTime. Only a caller that has announced it is waiting gets a value on done.
type pool struct {
	mu      sync.Mutex // one parallel loop at a time
	workers int
	gen     uint64 // generation of the latest loop; under mu
	slots   []slot // per helper (slot 0, the caller's, is unused)

	// The loop in flight. t, n and chunk are written before the loop is published in claim,
	// and not changed until every chunk of it has completed.
	t        task
	n, chunk int

	// The two counters that every worker updates each live on their own cache line.
	_         [64]byte
	claim     atomic.Uint64 // generation<<40 | chunk count<<20 | next chunk index
	_         [56]byte
	completed atomic.Uint64
	_         [56]byte
	waiting   atomic.Bool   // the caller has stopped watching completed and sleeps on done
	done      chan struct{} // woken when the last chunk of a loop completes, if waiting
}

// slot is one helper's mailbox, alone on its cache line so that a helper watching for work
// reads a line only the caller writes.
type slot struct {
	gen      atomic.Uint64 // the latest loop published to this helper
	sleeping atomic.Bool   // asleep (or about to be) on wake
	wake     chan struct{}
	_        [40]byte
}

// chunkMask masks a loop's chunk count and index, 20 bits each in the claim word. A loop has at
// most maxChunks chunks, so that the index, which every worker may push one past the count,
// never overflows into the count.
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
	p := &pool{workers: workers, slots: make([]slot, workers), done: make(chan struct{}, 1)}
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
			// the loop. A stale wake-up only costs one more look.
			s.sleeping.Store(true)
			if s.gen.Load() == seen {
				<-s.wake
			}
			s.sleeping.Store(false)
		}
		seen = s.gen.Load()
		p.drain(w)
	}
}

// hasWork reports whether the current loop has an unclaimed chunk.
func (p *pool) hasWork() bool {
	v := p.claim.Load()
	return v&chunkMask < v>>20&chunkMask
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

// drain claims and runs chunks of the current loop until none is left.
func (p *pool) drain(w int) {
	for p.hasWork() {
		v := p.claim.Add(1) - 1
		idx, nchunks := v&chunkMask, v>>20&chunkMask
		if idx >= nchunks {
			return
		}
		// Chunk idx of the loop of word v is ours, so that loop is still in flight and the
		// fields below are its.
		lo := int(idx) * p.chunk
		p.t.run(w, lo, min(lo+p.chunk, p.n))
		if p.completed.Add(1) == nchunks && p.waiting.Load() {
			select {
			case p.done <- struct{}{}:
				// The caller now waits to run on this helper's processor: let it.
				runtime.Gosched()
			default: // a wake-up is already pending
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
	p.t, p.n, p.chunk = t, n, chunk
	p.completed.Store(0)
	p.gen++
	p.claim.Store(p.gen<<40 | uint64(nchunks)<<20) // opens the loop's chunks
	for w := 1; w <= helpers; w++ {
		s := &p.slots[w]
		s.gen.Store(p.gen)
		if s.sleeping.Load() {
			select {
			case s.wake <- struct{}{}:
			default: // already has a wake-up pending
			}
		}
	}
	p.drainCaller(nchunks)
	finished := func() bool { return p.completed.Load() == uint64(nchunks) }
	if !spinFor(finished, callerSpin) {
		// As with a helper's sleep: announce, then look again. A stale wake-up left over
		// from an earlier loop only costs one more look.
		p.waiting.Store(true)
		for !finished() {
			<-p.done
		}
		p.waiting.Store(false)
	}
	p.t = nil
}

// drainCaller is drain for the caller of Run: if a chunk panics it closes the loop, waits for
// the chunks already claimed by helpers to complete, and passes the panic on.
func (p *pool) drainCaller(nchunks int) {
	defer func() {
		if r := recover(); r != nil {
			v := p.claim.Swap(p.gen << 40) // a count of 0: nothing more to claim
			claimed := min(v&chunkMask, uint64(nchunks))
			for p.completed.Load() < claimed-1 { // all but the chunk that panicked here
				runtime.Gosched()
			}
			p.t = nil
			panic(r)
		}
	}()
	p.drain(0)
}
