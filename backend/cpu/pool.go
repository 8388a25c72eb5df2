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
// generation, chunk count and next chunk index: the value the add returns says which loop the
// claimed chunk belongs to and whether it exists, so a late helper can never take a chunk of a
// later loop for one of an earlier loop, and a loop's fields stay valid while any of its chunks
// is running. (An add, unlike a compare-and-swap, never has to be retried, which matters when
// sixteen cores claim at once.)
//
// A training step is a few hundred parallel loops of tens of microseconds each, so waking a
// sleeping goroutine (several microseconds, more on a busy machine) for each would cost as much
// as the work. Helpers therefore watch for the next loop for spinTime after finishing one before
// they go to sleep, and the caller watches for its chunks to complete before it sleeps on done.
type pool struct {
	mu       sync.Mutex // one parallel loop at a time
	workers  int
	wake     []chan struct{}
	sleeping []atomic.Bool // helper w is asleep (or about to be) on wake[w]

	// The loop in flight. t, n and chunk are written before the loop is published in claim,
	// and not changed until every chunk of it has completed.
	t         task
	n, chunk  int
	claim     atomic.Uint64 // generation<<40 | chunk count<<20 | next chunk index
	completed atomic.Uint64
	done      chan struct{} // receives one value when the last chunk of a loop completes
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
	p := &pool{workers: workers, wake: make([]chan struct{}, workers), sleeping: make([]atomic.Bool, workers), done: make(chan struct{}, 1)}
	for w := 1; w < workers; w++ {
		p.wake[w] = make(chan struct{}, 1)
		go p.loop(w)
	}
	return p
}

// spinTime is how long an idle helper keeps watching for the next loop, and the caller for the
// end of its loop, before sleeping.
const spinTime = 50 * time.Microsecond

func (p *pool) loop(w int) {
	for {
		p.drain(w)
		if spin(p.hasWork) {
			continue
		}
		// Announce the sleep, then look once more: Run publishes a loop before it reads
		// sleeping, so either it sees this helper asleep and wakes it, or this look sees the loop.
		p.sleeping[w].Store(true)
		if p.hasWork() {
			p.sleeping[w].Store(false)
			continue
		}
		<-p.wake[w]
		p.sleeping[w].Store(false)
	}
}

// hasWork reports whether the current loop has an unclaimed chunk.
func (p *pool) hasWork() bool {
	v := p.claim.Load()
	return v&chunkMask < v>>20&chunkMask
}

// spin calls ready until it returns true (spin returns true) or spinTime has passed (false).
// It busy-waits: yielding to the Go scheduler instead (runtime.Gosched) sends every watching
// goroutine through the global run queue, whose lock then costs more than the loops.
func spin(ready func() bool) bool {
	start := time.Now()
	for i := 0; ; i++ {
		if ready() {
			return true
		}
		if i&255 == 255 && time.Since(start) > spinTime {
			return false
		}
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
		if p.completed.Add(1) == nchunks {
			p.done <- struct{}{}
		}
	}
}

// Run executes t over [0, n) in chunks of the given size. Loops whose total work (n·cost, in
// rough flops) is too small to repay waking other goroutines run on the caller alone.
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
	helpers := min(p.workers, nchunks) - 1
	const serialWork = 1 << 15 // below ~30k flops a wake-up costs more than it saves
	if helpers <= 0 || n*cost < serialWork {
		t.run(0, 0, n) // worker 0's scratch belongs to the calling Backend: no lock needed
		return
	}
	p.mu.Lock()
	p.t, p.n, p.chunk = t, n, chunk
	p.completed.Store(0)
	gen := p.claim.Load()>>40 + 1
	p.claim.Store(gen<<40 | uint64(nchunks)<<20) // publishes the loop
	for w := 1; w <= helpers; w++ {
		if !p.sleeping[w].Load() {
			continue // watching for work: it will see this loop
		}
		select {
		case p.wake[w] <- struct{}{}:
		default: // already has a wake-up pending; it will see this loop
		}
	}
	p.drain(0)
	spin(func() bool { return p.completed.Load() == uint64(nchunks) })
	<-p.done
	p.t = nil
	p.mu.Unlock()
}
