"""Side by side on one machine's CPU: TinyGPT's CPU backend against PyTorch, same presets,
same batch and context, same thread count, median ms per full training step.

    python python/compare_cpu.py --tinygpt ./tinygpt --threads 16
    python python/compare_cpu.py --tinygpt ./tinygpt --threads 16 --presets tiny,small,huge

It runs `tinygpt bench --backend cpu --json --threads N` and bench_torch.py with
torch.set_num_threads(N), then prints a Markdown table: ms/step for both, the ratio
ours/PyTorch (below 1 means we are faster) and our achieved GFLOP/s and decode tokens/s.
Go is not needed where this runs: pass a static linux/amd64 build of tinygpt.
"""

import argparse
import json
import os
import subprocess
import sys

import bench_torch


def run_ours(binary, presets, threads, steps, warmup):
    cmd = [binary, "bench", "--backend", "cpu", "--json", "--threads", str(threads),
           "--presets", presets, "--steps", str(steps), "--warmup", str(warmup)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return {r["preset"]: r for r in map(json.loads, out.splitlines()) if r}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tinygpt", required=True, help="path of the tinygpt binary")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--presets", default="tiny,small,medium,large,xl,huge")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    a = ap.parse_args(argv)

    ours = run_ours(a.tinygpt, a.presets, a.threads, a.steps, a.warmup)
    bench_torch.torch.set_num_threads(a.threads)
    rows = []
    for name in a.presets.split(","):
        t = bench_torch.bench(name, "cpu", "eager", a.steps, a.warmup)
        o = ours[name]
        rows.append((name, o, t))
        print(json.dumps({"preset": name, "tinygpt": o, "pytorch": t}), file=sys.stderr, flush=True)

    print(f"CPU, {a.threads} threads for both; median of {a.steps} steps after {a.warmup} warm-up steps;"
          f" PyTorch {bench_torch.torch.__version__}")
    print()
    print("| preset | batch×ctx | TinyGPT ms/step | PyTorch ms/step | ratio | TinyGPT GFLOP/s | decode tok/s |")
    print("|---|---|---|---|---|---|---|")
    for name, o, t in rows:
        decode = o.get("decode_tokens_per_s")
        print(f"| {name} | {o['batch']}×{o['ctx']} | {o['ms_per_step']:.2f} | {t['ms_per_step']:.2f} |"
              f" {o['ms_per_step'] / t['ms_per_step']:.2f} | {o['gflops']:.0f} |"
              f" {'' if decode is None else f'{decode:,.0f}'} |")


if __name__ == "__main__":
    main()
