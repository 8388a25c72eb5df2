#!/usr/bin/env python3
"""Side-by-side training speed: tinygpt's WebGPU backend against PyTorch on CUDA.

For each preset it runs `tinygpt bench --backend webgpu --json` (our static binary) and the
same training step in PyTorch (bench_torch.py: the reference model with fused attention,
global-norm clipping at 1.0, AdamW with the same decay groups, fp32, random tokens, the loss
read back to the host every step, each step launched before the previous one's loss is read,
as tinygpt times itself; TINYGPT_TORCH_SYNC_EACH=1 times each step alone between
synchronizations instead), in three modes: eager, torch.compile, and
torch.compile(mode="reduce-overhead") (CUDA graphs). It prints the median ms/step of each and
our ratio to PyTorch's best (ours / best: below 1 means tinygpt is faster), the convention of
the targets and of compare_cpu.py.

    python3 python/bench_gpu.py --tinygpt ./tinygpt --presets tiny,small,medium,large,xl,huge

Run it on the GPU machine; it needs PyTorch with CUDA. Set TINYGPT_BENCH_MODES to a
comma-separated subset of eager,compile,reduce-overhead to skip modes.
"""

import argparse
import math
import os
import subprocess
import sys

import needs  # noqa: F401  (stops with how to install PyTorch when it is missing)
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_torch  # noqa: E402
import compare_cpu  # noqa: E402


def ours(binary, presets, steps, warmup):
    """Runs tinygpt bench on the WebGPU backend; returns {preset: ms/step}. A preset that fails
    (too large for the GPU) says why on stderr and is left out. Each preset first runs one
    untimed step in a process of its own: on a machine just started, the first process to run
    the kernels (whose driver compiled them) ran its steps up to three times slower, warm-up
    and all (docs/performance.md, 2026-11-27)."""
    res = {}
    for p in presets:
        try:
            compare_cpu.run_ours(binary, p, 0, 1, 0, backend="webgpu")
            res[p] = compare_cpu.run_ours(binary, p, 0, steps, warmup, backend="webgpu")["ms_per_step"]
        except subprocess.CalledProcessError as e:
            sys.stderr.write(e.stderr or "")
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tinygpt", default="./tinygpt", help="path to the tinygpt binary")
    ap.add_argument("--presets", default="tiny,small,medium,large,xl,huge,massive,mega")
    ap.add_argument("--steps", type=int, default=50, help="timed steps per preset and mode")
    ap.add_argument("--warmup", type=int, default=10, help="untimed steps (compilation happens here)")
    args = ap.parse_args()
    presets = [p.strip() for p in args.presets.split(",") if p.strip()]
    for p in presets:
        if p not in bench_torch.PRESETS:
            ap.error(f"unknown preset {p!r}")
    if not torch.cuda.is_available():
        ap.error("PyTorch sees no CUDA device")
    modes = os.environ.get("TINYGPT_BENCH_MODES", "eager,compile,reduce-overhead").split(",")

    go = ours(args.tinygpt, presets, args.steps, args.warmup)
    print(f"GPU: {torch.cuda.get_device_name()}, PyTorch {torch.__version__}; median ms per training step (fp32)")
    head = f"{'preset':<9} {'tinygpt':>9} " + " ".join(f"{m:>16}" for m in modes) + f" {'ours/best':>10}"
    print(head)
    for p in presets:
        row = {}
        for m in modes:
            try:
                row[m] = bench_torch.bench(p, "cuda", m, args.steps, args.warmup,
                                           os.environ.get("TINYGPT_TORCH_SYNC_EACH") == "1")["ms_per_step"]
            except Exception as e:  # a mode that fails (e.g. out of memory) is reported, not fatal
                print(f"  {p} {m}: {type(e).__name__}: {e}", file=sys.stderr)
                row[m] = float("nan")
            torch.cuda.empty_cache()
        ms = go.get(p, float("nan"))
        finite = [v for v in row.values() if math.isfinite(v)]
        best = min(finite) if finite else float("nan")
        ratio = ms / best if math.isfinite(ms) and math.isfinite(best) else float("nan")
        cells = " ".join(f"{row[m]:>16.2f}" for m in modes)
        print(f"{p:<9} {ms:>9.2f} {cells} {ratio:>9.2f}x")


if __name__ == "__main__":
    main()
