#!/usr/bin/env python3
"""Side-by-side training speed: tinygpt's WebGPU backend against PyTorch on CUDA.

For each preset it runs `tinygpt bench --backend webgpu --json` (our static binary) and the
same training step in PyTorch from reference.py (forward, backward, global-norm clipping at
1.0, AdamW with the same decay groups, loss read back to the host every step, fp32, random
tokens), in three modes: eager, torch.compile, and torch.compile(mode="reduce-overhead")
(CUDA graphs). It prints the median ms/step of each and our ratio to PyTorch's best
(> 1 means tinygpt is faster).

    python3 python/bench_gpu.py --tinygpt ./tinygpt --presets tiny,small,medium,large,xl,huge

Run it on the GPU machine; it needs PyTorch with CUDA. Set TINYGPT_BENCH_MODES to a
comma-separated subset of eager,compile,reduce-overhead to skip modes.
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference as ref  # noqa: E402

# The presets of DESIGN.md §3: layers, d_model, ctx, batch.
PRESETS = {
    "tiny": (2, 48, 32, 16),
    "small": (3, 96, 64, 16),
    "medium": (4, 128, 96, 16),
    "large": (6, 192, 128, 12),
    "xl": (8, 256, 128, 8),
    "huge": (12, 256, 256, 8),
    "massive": (14, 384, 256, 4),
    "mega": (14, 384, 512, 2),
    "behemoth": (24, 1280, 512, 1),
}


def ours(binary, presets, steps, warmup):
    """Runs tinygpt bench on the WebGPU backend; returns {preset: ms/step}."""
    cmd = [binary, "bench", "--backend", "webgpu", "--json", "--presets", ",".join(presets),
           "--steps", str(steps), "--warmup", str(warmup)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    sys.stderr.write(out.stderr)  # a preset that fails (too large for the GPU) says why here
    res = {}
    for line in out.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            r = json.loads(line)
            res[r["preset"]] = r["ms_per_step"]
    return res


def torch_step_fn(name, mode):
    """Returns (step, batch rows) for one training step of preset name in mode."""
    L, C, T, B = PRESETS[name]
    cfg = ref.Config(ctx=T, layers=L, d_model=C, heads=ref.default_heads(C), d_mlp=4 * C)
    st = ref.init_state(cfg, seed=1, dtype=torch.float32, device="cuda")
    names = list(st.params.keys())
    params = [st.params[n].requires_grad_(True) for n in names]
    decay = {s.name: s.decay for s in ref.param_table(cfg)}
    groups = [
        {"params": [p for n, p in zip(names, params) if decay[n]], "weight_decay": 0.1},
        {"params": [p for n, p in zip(names, params) if not decay[n]], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=3e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)
    pdict = dict(zip(names, params))

    def loss_of(rows):
        return ref.loss_fn(pdict, cfg, rows)

    if mode == "compile":
        loss_of = torch.compile(loss_of)
    elif mode == "reduce-overhead":
        loss_of = torch.compile(loss_of, mode="reduce-overhead")

    def step(rows):
        loss = loss_of(rows)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=False)
        return loss.item()  # the host reads the loss every step, as tinygpt's trainer does

    gen = torch.Generator(device="cuda").manual_seed(7)
    rows = [torch.randint(0, 256, (B, T + 1), device="cuda", generator=gen) for _ in range(4)]
    return step, rows


def bench_torch(name, mode, steps, warmup):
    step, rows = torch_step_fn(name, mode)
    for i in range(warmup):
        step(rows[i % len(rows)])
    torch.cuda.synchronize()
    times = []
    for i in range(steps):
        t0 = time.perf_counter()
        loss = step(rows[i % len(rows)])
        times.append((time.perf_counter() - t0) * 1e3)
        if not math.isfinite(loss):
            raise RuntimeError(f"{name} {mode}: loss {loss}")
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tinygpt", default="./tinygpt", help="path to the tinygpt binary")
    ap.add_argument("--presets", default="tiny,small,medium,large,xl,huge,massive,mega")
    ap.add_argument("--steps", type=int, default=50, help="timed steps per preset and mode")
    ap.add_argument("--warmup", type=int, default=10, help="untimed steps (compilation happens here)")
    args = ap.parse_args()
    presets = [p.strip() for p in args.presets.split(",") if p.strip()]
    for p in presets:
        if p not in PRESETS:
            ap.error(f"unknown preset {p!r}")
    if not torch.cuda.is_available():
        ap.error("PyTorch sees no CUDA device")
    modes = os.environ.get("TINYGPT_BENCH_MODES", "eager,compile,reduce-overhead").split(",")

    go = ours(args.tinygpt, presets, args.steps, args.warmup)
    print(f"GPU: {torch.cuda.get_device_name()}, PyTorch {torch.__version__}; median ms per training step (fp32)")
    head = f"{'preset':<9} {'tinygpt':>9} " + " ".join(f"{m:>16}" for m in modes) + f" {'ratio to best':>14}"
    print(head)
    for p in presets:
        row = {}
        for m in modes:
            try:
                row[m] = bench_torch(p, m, args.steps, args.warmup)
            except Exception as e:  # a mode that fails (e.g. out of memory) is reported, not fatal
                print(f"  {p} {m}: {type(e).__name__}: {e}", file=sys.stderr)
                row[m] = float("nan")
            torch.cuda.empty_cache()
        ms = go.get(p, float("nan"))
        finite = [v for v in row.values() if math.isfinite(v)]
        best = min(finite) if finite else float("nan")
        ratio = best / ms if math.isfinite(ms) and math.isfinite(best) else float("nan")
        cells = " ".join(f"{row[m]:>16.2f}" for m in modes)
        print(f"{p:<9} {ms:>9.2f} {cells} {ratio:>13.2f}x")


if __name__ == "__main__":
    main()
