#!/bin/bash
# Builds a static linux/amd64 tinygpt whose WebGPU backend can report GPU timestamps: a copy
# of the binding patched to write a timestamp after every dispatch, and the gpuprof build tag.
# Usage: tools/gpuprof/build.sh [output path]   (default: ./tinygpt-gpuprof). See README.md.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(realpath -m "${1:-tinygpt-gpuprof}")
cd "$root"
ver=$(go list -m -f '{{.Version}}' github.com/gogpu/wgpu)
patch=$root/tools/gpuprof/wgpu-$ver.patch
if [ ! -f "$patch" ]; then
	echo "tools/gpuprof has no patch for github.com/gogpu/wgpu $ver: port wgpu-*.patch to it" >&2
	exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
src=$(go mod download -json "github.com/gogpu/wgpu@$ver" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
cp -r "$src" "$tmp/wgpu"
chmod -R u+w "$tmp/wgpu"
(cd "$tmp/wgpu" && git apply "$patch")
cp go.mod "$tmp/go.mod"
cp go.sum "$tmp/go.sum"
go mod edit -replace "github.com/gogpu/wgpu=$tmp/wgpu" "$tmp/go.mod"
CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -modfile "$tmp/go.mod" -tags gpuprof -ldflags="-s -w" -o "$out" ./cmd/tinygpt
echo "$out"
