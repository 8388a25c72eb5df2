package main

import (
	"sync"

	"tinygpt/backend/cpu"
	"tinygpt/server"
)

// cpuDetail describes the CPU backend (once: making a backend allocates its scratch space).
var cpuDetail = sync.OnceValue(func() string { return cpu.New().Describe() })

// backendList lists the compute backends of this build, in order of preference for "auto",
// with what each runs on or why it cannot be used. A new backend adds its entry here (and its
// case in openBackend); tinygpt serve shows this list.
func backendList() []server.Backend {
	return []server.Backend{
		{Name: "webgpu", Available: false, Note: "this build has no WebGPU backend yet"},
		{Name: "cpu", Available: true, Detail: cpuDetail()},
	}
}
