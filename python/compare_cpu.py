"""Side by side on one machine's CPU: TinyGPT's CPU backend against PyTorch, same presets,
same batch and context, same thread count, median ms per full training step.

    python python/compare_cpu.py --tinygpt ./tinygpt --threads 16
    python python/compare_cpu.py --tinygpt ./tinygpt --threads 16 --presets tiny,small,huge --rounds 5

It runs `tinygpt bench --backend cpu --json --threads N` and bench_torch.py with
torch.set_num_threads(N) (and its fused AdamW, PyTorch at its fastest: --adamw), then prints a Markdown table: ms/step for both, the ratio
ours/PyTorch (below 1 means we are faster) and our achieved GFLOP/s and decode tokens/s.
Go is not needed where this runs: pass a static linux/amd64 build of tinygpt.

A shared machine's speed drifts by 10-30% over minutes, for both programs. So the two run in
turn, preset by preset, each in a process of its own, for --rounds rounds; the table gives
each side's median over the rounds (each round's figure is itself the median of --steps
steps), the ratio of those medians, and the lowest and highest ratio of a single round. Each
process runs one preset, so the peak RSS column is that preset's.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run_ours(binary, preset, threads, steps, warmup, backend="cpu"):
    """Runs `tinygpt bench --json` for one preset (one process per preset, so that its peak
    memory is that preset's) and returns its JSON result; threads 0 means every core."""
    cmd = [binary, "bench", "--backend", backend, "--json", "--threads", str(threads),
           "--presets", preset, "--steps", str(steps), "--warmup", str(warmup)]
    return json.loads(run(cmd).splitlines()[0])


def run_torch(preset, threads, steps, warmup, adamw="auto"):
    """Runs bench_torch.py on the CPU for one preset in a process of its own (its worker
    threads end with it, so they cannot slow down the next run) and returns its JSON result."""
    cmd = [sys.executable, os.path.join(HERE, "bench_torch.py"), "--device", "cpu",
           "--threads", str(threads), "--presets", preset, "--steps", str(steps),
           "--warmup", str(warmup), "--adamw", adamw]
    return json.loads(run(cmd).splitlines()[0])


def run(cmd):
    """Runs cmd and returns its output; if it fails, stops with its own error message."""
    try:
        return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    except subprocess.CalledProcessError as e:
        sys.exit(f"{' '.join(cmd)} failed (exit {e.returncode}):\n{e.stderr.strip()}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tinygpt", required=True, help="path of the tinygpt binary")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--presets", default="tiny,small,medium,large,xl,huge")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3, help="runs of each side, taken in turn")
    ap.add_argument("--adamw", default="auto", choices=["auto", "default", "fused", "foreach", "loop"],
                    help="PyTorch's AdamW implementation (bench_torch.py; auto: fused where it has it)")
    a = ap.parse_args(argv)
    if a.rounds < 1:
        ap.error("--rounds must be at least 1")

    names = a.presets.split(",")
    ours = {name: [] for name in names}
    theirs = {name: [] for name in names}
    torch_version, adamw = "", ""
    for r in range(a.rounds):
        for name in names:
            o = run_ours(a.tinygpt, name, a.threads, a.steps, a.warmup)
            t = run_torch(name, a.threads, a.steps, a.warmup, a.adamw)
            torch_version, adamw = t.get("torch", torch_version), t.get("adamw", adamw)
            ours[name].append(o)
            theirs[name].append(t)
            print(json.dumps({"round": r + 1, "preset": name, "tinygpt": o, "pytorch": t}),
                  file=sys.stderr, flush=True)

    print(f"CPU, {a.threads} threads for both; each round the median of {a.steps} steps after"
          f" {a.warmup} warm-up steps; medians of {a.rounds} rounds, the two run in turn;"
          f" PyTorch {torch_version}, its AdamW {adamw}")
    print()
    print("| preset | batch×ctx | TinyGPT ms/step | PyTorch ms/step | ratio | ratio per round"
          " | TinyGPT GFLOP/s | TinyGPT peak RSS MB | decode tok/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in names:
        o_runs, t_runs = ours[name], theirs[name]
        o_ms = statistics.median(o["ms_per_step"] for o in o_runs)
        t_ms = statistics.median(t["ms_per_step"] for t in t_runs)
        per_round = [o["ms_per_step"] / t["ms_per_step"] for o, t in zip(o_runs, t_runs)]
        flops = statistics.median(o["gflops"] for o in o_runs)
        rss = max(o["peak_rss_mb"] for o in o_runs)
        decode = statistics.median(o["decode_tokens_per_s"] for o in o_runs)
        print(f"| {name} | {o_runs[0]['batch']}×{o_runs[0]['ctx']} | {o_ms:.2f} | {t_ms:.2f} |"
              f" {o_ms / t_ms:.2f} | {min(per_round):.2f}–{max(per_round):.2f} | {flops:.0f} |"
              f" {rss:.0f} | {decode:,.0f} |")


if __name__ == "__main__":
    main()
