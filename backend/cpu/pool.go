package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
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
type pool struct {
	mu      sync.Mutex // one parallel loop at a time
	workers int
	wake    []chan struct{}
	done    sync.WaitGroup

	// The loop in flight.
	t     task
	n     int
	chunk int
	next  atomic.Int64
}

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
	p := &pool{workers: workers, wake: make([]chan struct{}, workers)}
	for w := 1; w < workers; w++ {
		p.wake[w] = make(chan struct{}, 1)
		go p.loop(w)
	}
	return p
}

func (p *pool) loop(w int) {
	for range p.wake[w] {
		p.drain(w)
		p.done.Done()
	}
}

func (p *pool) drain(w int) {
	for {
		lo := int(p.next.Add(int64(p.chunk))) - p.chunk
		if lo >= p.n {
			return
		}
		p.t.run(w, lo, min(lo+p.chunk, p.n))
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
	nchunks := (n + chunk - 1) / chunk
	helpers := min(p.workers, nchunks) - 1
	const serialWork = 1 << 15 // below ~30k flops a wake-up costs more than it saves
	if helpers <= 0 || n*cost < serialWork {
		t.run(0, 0, n) // worker 0's scratch belongs to the calling Backend: no lock needed
		return
	}
	p.mu.Lock()
	p.t, p.n, p.chunk = t, n, chunk
	p.next.Store(0)
	p.done.Add(helpers)
	for w := 1; w <= helpers; w++ {
		p.wake[w] <- struct{}{}
	}
	p.drain(0)
	p.done.Wait()
	p.t = nil
	p.mu.Unlock()
}
