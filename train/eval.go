package train

import (
	"fmt"
	"sort"
	"time"

	"tinygpt/backend"
	"tinygpt/gpt"
)

// ExactLoss is the mean loss of m over text cut into windows of ctx+1 bytes at offsets 0, ctx,
// 2·ctx, … (each window predicts its ctx next bytes from the bytes before them; neighbouring
// windows share one byte, so every byte after the first is predicted once); bytes after the
// last whole window are not used. It is deterministic, so models
// and tools can be compared on it. batch windows run at a time.
//
// progress, if not nil, is called after each pass with the windows done so far and in all.
func ExactLoss(m *gpt.Model, text []byte, batch int, progress func(done, total int)) (loss float64, windows int, err error) {
	T := m.Config.Ctx
	windows = 0
	if len(text) >= T+1 {
		windows = (len(text) - 1) / T
	}
	if windows == 0 {
		return 0, 0, fmt.Errorf("text of %d bytes has no window of ctx+1 = %d bytes", len(text), T+1)
	}
	batch = max(1, min(batch, windows))
	inputs := make([]int32, batch*T)
	targets := make([]int32, batch*T)
	var sum float64
	for w0 := 0; w0 < windows; w0 += batch {
		B := min(batch, windows-w0)
		for r := 0; r < B; r++ {
			win := text[(w0+r)*T : (w0+r)*T+T+1]
			for t := 0; t < T; t++ {
				inputs[r*T+t] = int32(win[t])
				targets[r*T+t] = int32(win[t+1])
			}
		}
		l, err := m.Forward(gpt.Batch{B: B, T: T, Inputs: inputs[:B*T], Targets: targets[:B*T]})
		if err != nil {
			return 0, 0, err
		}
		sum += l * float64(B)
		if progress != nil {
			progress(w0+B, windows)
		}
	}
	return sum / float64(windows), windows, nil
}

// BenchResult is the speed of training steps of one model size.
type BenchResult struct {
	Preset     string  `json:"preset"`
	Backend    string  `json:"backend"`
	Params     int     `json:"params"`
	Batch      int     `json:"batch"`
	Ctx        int     `json:"ctx"`
	MsPerStep  float64 `json:"ms_per_step"`
	MinMs      float64 `json:"min_ms"`
	TokensPerS float64 `json:"tokens_per_s"`
	GFLOPs     float64 `json:"gflops"`
	Steps      int     `json:"steps"`
	// WarmupSteps is the number of untimed steps run first: at least the warmup asked for,
	// more where they took less than the least warm-up time asked for.
	WarmupSteps int `json:"warmup_steps"`
	// DecodeTokensPerS is the speed of KV-cached generation, one token at a time, while the
	// text fits the context (greedy, from a one-token prompt up to Ctx tokens).
	DecodeTokensPerS float64 `json:"decode_tokens_per_s"`
	// PeakRSSMB is the peak resident memory of the run, in MB (0 where the system does not
	// say): on Linux, where the high-water mark can be reset, from the start of this Bench
	// call (memory of an earlier call not yet freed, such as GPU buffers awaiting their
	// finalizers on a software GPU, still counts); elsewhere the whole process's, so run one
	// preset per process to read it as that preset's.
	PeakRSSMB float64 `json:"peak_rss_mb"`
	// Profile is the backend's own account of the timed steps, where it keeps one (the
	// WebGPU backend: dispatches, submits and waits per step).
	Profile string `json:"profile,omitempty"`
}

// profiler is a backend that counts what it does (the WebGPU backend).
type profiler interface {
	// Profile reports the counts since the last call, averaged over per steps, and resets them.
	Profile(per int) string
}

// BenchWarmupTime is the warm-up `tinygpt bench` asks of Bench at the least (see Bench's
// minWarmup). On a GPU machine the first process to run the kernels ran large's steps at
// 3.2-7.7 ms, where later ones took 2.5, through ten warm-up steps (~30 ms) and thirty timed
// ones, and at 2.5 after a second of warm-up (an H100 just started, whose driver compiled the
// kernels in that process: ~5 s). It is not the whole cure: another such first process, with
// the second of warm-up, still ran its second preset (small) at 1.34 ms against 0.76 in the
// next process; on a machine just started, run a bench twice. A second also covers a CPU's
// clock rising from idle.
const BenchWarmupTime = time.Second

// Bench times full training steps (forward, backward, AdamW) of preset p on be, on random
// tokens: warmup untimed steps (when warmup > 0, more if they took less than minWarmup), then
// steps timed ones. It reports the median.
func Bench(be backend.Backend, p gpt.Preset, warmup, steps int, minWarmup time.Duration) (BenchResult, error) {
	if steps < 1 {
		return BenchResult{}, fmt.Errorf("bench needs at least one timed step")
	}
	if err := checkTrainMemory(be, Options{Model: p.Config, Batch: p.Batch}); err != nil {
		return BenchResult{}, err
	}
	resetPeakRSS() // not the presets' before
	m, err := gpt.New(be, p.Config)
	if err != nil {
		return BenchResult{}, err
	}
	if err := m.SetWeights(gpt.InitWeights(p.Config, 1)); err != nil {
		return BenchResult{}, err
	}
	opt := NewOptimizer(m)
	n := p.Batch * p.Ctx
	rng := gpt.NewRNG(7)
	inputs, targets := make([]int32, n), make([]int32, n)
	var times []float64
	prof, _ := be.(profiler)
	var profile string
	s := stepper{m: m, o: opt}
	// The trainer's steps as Run makes them: each step recorded before the results of the one
	// before are read (see stepper), its time from those results to its own. A step after the
	// last timed one is recorded too, so that every timed interval holds one step's work on
	// every backend: the CPU computes a step as it records it, the GPU as it runs it.
	record := func() error {
		for j := range inputs {
			inputs[j] = int32(rng.Uint64() % gpt.Vocab)
			targets[j] = int32(rng.Uint64() % gpt.Vocab)
		}
		return s.record(gpt.Batch{B: p.Batch, T: p.Ctx, Inputs: inputs, Targets: targets}, 0, 0, 3e-4)
	}
	if err := record(); err != nil {
		return BenchResult{}, err
	}
	s.ask()
	start := time.Now()
	last := start
	i := 0 // steps finished
	for ; len(times) < steps; i++ {
		warm := i < warmup || warmup > 0 && time.Since(start) < minWarmup
		if prof != nil && !warm && len(times) == 0 {
			prof.Profile(1) // counts what the timed intervals do: a recording and a read each
		}
		if err := record(); err != nil {
			return BenchResult{}, err
		}
		s.ask()
		if _, _, err := s.finish(i + 1); err != nil {
			return BenchResult{}, err
		}
		now := time.Now()
		if !warm {
			times = append(times, now.Sub(last).Seconds()*1e3)
		}
		last = now
	}
	if prof != nil {
		profile = prof.Profile(steps)
	}
	if _, _, err := s.finish(i + 1); err != nil { // the step after the last, untimed
		return BenchResult{}, err
	}
	decode, err := benchDecode(m)
	if err != nil {
		return BenchResult{}, err
	}
	sort.Float64s(times)
	med := times[len(times)/2]
	if len(times)%2 == 0 {
		med = (times[len(times)/2-1] + times[len(times)/2]) / 2
	}
	return BenchResult{
		Preset: p.Name, Backend: be.Name(), Params: p.NumParams(), Batch: p.Batch, Ctx: p.Ctx,
		MsPerStep: med, MinMs: times[0], TokensPerS: float64(n) / (med / 1e3),
		GFLOPs: p.FLOPsPerToken() * float64(n) / (med / 1e3) / 1e9, Steps: steps, WarmupSteps: i - steps,
		DecodeTokensPerS: decode, PeakRSSMB: float64(peakRSS()) / (1 << 20), Profile: profile,
	}, nil
}

// benchDecode returns the tokens/s of greedy KV-cached generation with m's current weights,
// from a one-token prompt until the window is full, best of three runs.
func benchDecode(m *gpt.Model) (float64, error) {
	g := m.NewGenerator()
	n := m.Config.Ctx - 1
	best := 0.0
	for range 3 {
		logits, err := g.Reset([]int32{'\n'})
		if err != nil {
			return 0, err
		}
		start := time.Now()
		for range n {
			if logits, err = g.Push(gpt.Argmax(logits)); err != nil {
				return 0, err
			}
		}
		best = max(best, float64(n)/time.Since(start).Seconds())
	}
	return best, nil
}
