#!/bin/bash
# Times variants of tinygpt against each other on one machine: each round runs `tinygpt bench`
# once for every variant, in turn, so that a machine's drift (other tenants, clocks) falls on
# all of them alike; compare variants within one call only. A variant is LABEL:BINARY or
# LABEL:BINARY:ENV, ENV a comma-separated list of NAME=VALUE set for its runs (for example
# TINYGPT_WGSL_DIR=variants/a, which compiles the kernel files in that folder instead of the
# built-in ones; see docs/webgpu.md). Each line printed is one run: label, round, and per
# preset its median ms per step and decode tokens/s.
#
# Usage: tools/ab/ab.sh [-b backend] [-p presets] [-r rounds] [-s steps] [-w warmup] VARIANT...
#   tools/ab/ab.sh -p large,xl -r 3 base:./tinygpt new:./tinygpt-new
#   tools/ab/ab.sh -p large base:./tinygpt a:./tinygpt:TINYGPT_WGSL_DIR=variants/a
set -euo pipefail
backend=webgpu presets=large rounds=3 steps=30 warmup=10
while getopts "b:p:r:s:w:" o; do
	case $o in
	b) backend=$OPTARG ;;
	p) presets=$OPTARG ;;
	r) rounds=$OPTARG ;;
	s) steps=$OPTARG ;;
	w) warmup=$OPTARG ;;
	*) sed -n 2,12p "$0" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
if [ $# -lt 1 ]; then
	sed -n 2,12p "$0" >&2
	exit 2
fi
for spec in "$@"; do # check every variant before any run
	IFS=: read -r label bin env <<<"$spec"
	if [ -z "$label" ] || [ ! -x "$bin" ]; then
		echo "ab.sh: variant $spec: want LABEL:BINARY[:ENV] with an executable BINARY" >&2
		exit 2
	fi
done
for r in $(seq 1 "$rounds"); do
	for spec in "$@"; do
		IFS=: read -r label bin env <<<"$spec"
		vars=()
		if [ -n "$env" ]; then
			IFS=, read -r -a vars <<<"$env"
		fi
		out=$(env "${vars[@]}" "$bin" bench --backend "$backend" --presets "$presets" --steps "$steps" \
			--warmup "$warmup" --json)
		line=$(python3 -c 'import json,sys
print("  ".join("%s %.2f ms, decode %.0f tok/s" % (r["preset"], r["ms_per_step"], r["decode_tokens_per_s"])
      for r in (json.loads(l) for l in sys.stdin if l.strip())))' <<<"$out")
		echo "$label r=$r  $line"
	done
done
