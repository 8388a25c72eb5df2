package main

import (
	"fmt"
	"io"
	"sync"

	"tinygpt/backend"
	"tinygpt/backend/cpu"
	"tinygpt/backend/webgpu"
	"tinygpt/gpt"
	"tinygpt/server"
)

// cpuDetail describes the CPU backend (once: making a backend allocates its scratch space).
var cpuDetail = sync.OnceValue(func() string { return cpu.New().Describe() })

// gpuProbe looks once for a GPU adapter, without running anything on it (a broken driver can
// crash a process that does; the backend's own self-test runs only when it is chosen).
var gpuProbe = sync.OnceValue(func() (p struct {
	detail, err string
	software    bool
}) {
	desc, soft, err := webgpu.Adapter()
	if err != nil {
		p.err = err.Error()
		return p
	}
	p.detail, p.software = desc, soft
	return p
})

// backendList lists the compute backends of this build, in order of preference for "auto",
// with what each runs on or why it cannot be used; tinygpt serve shows it. A hardware GPU
// comes first; a software renderer (such as lavapipe) can be chosen but comes after the CPU,
// which is faster.
func backendList() []server.Backend {
	c := server.Backend{Name: "cpu", Available: true, Detail: cpuDetail()}
	g := gpuProbe()
	gpu := server.Backend{Name: "webgpu", Available: g.err == "", Detail: g.detail, Note: g.err}
	if g.err == "" && !g.software {
		gpu.Note = "faster than the CPU except at the smallest models, where a many-core CPU can win"
		gpu.OwnMemory = true
		return []server.Backend{gpu, c}
	}
	if g.software {
		gpu.Note = "a software renderer: slower than the CPU backend"
	}
	return []server.Backend{c, gpu}
}

// gpuBufferLimit reads once how many bytes one buffer of the GPU holds, opening the device to
// learn it (as the first run on the GPU would).
var gpuBufferLimit = sync.OnceValues(func() (int64, error) {
	be, err := webgpu.New()
	if err != nil {
		return 0, err
	}
	defer be.Close()
	return int64(be.SegmentLen()) * 4, nil
})

// checkNamedBackend says whether the backend named would refuse a model of shape c that runs
// tokens positions in one pass, as openNamedBackend would, without opening one: the
// playground's plans.
func checkNamedBackend(name string, c gpt.Config, tokens int) error {
	if name != "webgpu" || c.Layers == 0 {
		return nil
	}
	lim, err := gpuBufferLimit()
	if err == nil {
		err = fitsGPU(modelLoad(c, tokens, 0), lim)
	}
	if err != nil {
		return fmt.Errorf("webgpu: %w; choose the cpu backend", err)
	}
	return nil
}

// openNamedBackend opens a backend chosen by name for the playground (which resolves "auto"
// with backendList first), for a model of shape c that runs tokens positions in one pass
// (none for the zero Config): the GPU refuses a model it cannot run, as on the command line.
func openNamedBackend(name string, c gpt.Config, tokens int) (backend.Backend, error) {
	work := workload{}
	if c.Layers > 0 {
		work = modelLoad(c, tokens, 0)
	}
	if name == "webgpu" {
		be, err := openGPU(work)
		if err != nil {
			return nil, fmt.Errorf("webgpu: %w; choose the cpu backend", err) // no command-line flags here
		}
		return be, nil
	}
	return openBackend(name, work, io.Discard)
}
