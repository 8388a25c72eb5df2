package main

import (
	"tinygpt/backend/cpu"
	"tinygpt/server"
)

// backendList lists the compute backends of this build, in order of preference for "auto",
// with what each runs on or why it cannot be used. A new backend adds its entry here (and its
// case in openBackend); tinygpt serve shows this list.
func backendList() []server.Backend {
	return []server.Backend{
		{Name: "webgpu", Available: false, Note: "not available in this build: it has no WebGPU backend yet"},
		{Name: "cpu", Available: true, Detail: cpu.New().Describe()},
	}
}
