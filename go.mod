module tinygpt

go 1.26

require (
	github.com/gogpu/gputypes v0.5.2
	github.com/gogpu/naga v0.18.0
	github.com/gogpu/wgpu v0.31.5
	golang.org/x/sys v0.47.0
)

require (
	github.com/go-webgpu/goffi v0.6.3 // indirect
	github.com/go-webgpu/webgpu v0.5.5 // indirect
	github.com/gogpu/gpucontext v0.28.0 // indirect
)
