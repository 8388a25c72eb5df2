"""Side by side on one machine's CPU: TinyGPT's CPU backend against PyTorch, same presets,
same batch and context, same thread count, median ms per full training step.

    python python/compare_cpu.py --tinygpt ./tinygpt --threads 16
    python python/compare_cpu.py --tinygpt ./tinygpt --threads 16 --presets tiny,small,huge

It runs `tinygpt bench --backend cpu --json --threads N` and bench_torch.py with
torch.set_num_threads(N), then prints a Markdown table: ms/step for both, the ratio
ours/PyTorch (below 1 means we are faster) and our achieved GFLOP/s and decode tokens/s.
Go is not needed where this runs: pass a static linux/amd64 build of tinygpt. Our side runs one
process per preset, so its peak RSS column is that preset's.
"""

import argparse
import json
import os
import subprocess
import sys

import bench_torch


def run_ours(binary, preset, threads, steps, warmup, backend="cpu"):
    """Runs `tinygpt bench --json` for one preset (one process per preset, so that its peak
    memory is that preset's) and returns its JSON result; threads 0 means every core."""
    cmd = [binary, "bench", "--backend", backend, "--json", "--threads", str(threads),
           "--presets", preset, "--steps", str(steps), "--warmup", str(warmup)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[0])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tinygpt", required=True, help="path of the tinygpt binary")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--presets", default="tiny,small,medium,large,xl,huge")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    a = ap.parse_args(argv)

    # All of ours first, each in its own process, then all of PyTorch's: PyTorch's worker threads
    # keep spinning for a while after each run and would slow down a process started next.
    names = a.presets.split(",")
    ours = {name: run_ours(a.tinygpt, name, a.threads, a.steps, a.warmup) for name in names}
    bench_torch.torch.set_num_threads(a.threads)
    rows = []
    for name in names:
        o, t = ours[name], bench_torch.bench(name, "cpu", "eager", a.steps, a.warmup)
        rows.append((name, o, t))
        print(json.dumps({"preset": name, "tinygpt": o, "pytorch": t}), file=sys.stderr, flush=True)

    print(f"CPU, {a.threads} threads for both; median of {a.steps} steps after {a.warmup} warm-up steps;"
          f" PyTorch {bench_torch.torch.__version__}")
    print()
    print("| preset | batch×ctx | TinyGPT ms/step | PyTorch ms/step | ratio | TinyGPT GFLOP/s"
          " | TinyGPT peak RSS MB | decode tok/s |")
    print("|---|---|---|---|---|---|---|---|")
    for name, o, t in rows:
        print(f"| {name} | {o['batch']}×{o['ctx']} | {o['ms_per_step']:.2f} | {t['ms_per_step']:.2f} |"
              f" {o['ms_per_step'] / t['ms_per_step']:.2f} | {o['gflops']:.0f} |"
              f" {o['peak_rss_mb']:.0f} | {o['decode_tokens_per_s']:,.0f} |")


if __name__ == "__main__":
    main()
