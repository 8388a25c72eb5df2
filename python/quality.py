#!/usr/bin/env python3
"""Training quality side by side: TinyGPT and PyTorch train the same model on the same text with
the same settings and the same batches, and both are scored the same way.

    python3 python/quality.py --tinygpt ./tinygpt --data tinyshakespeare.txt \\
        --backend webgpu --device cuda                     # on the GPU machine
    python3 python/quality.py --tinygpt ./tinygpt --data tinyshakespeare.txt \\
        --backend cpu --device cpu --layers 4 --d-model 128 --heads 4 --ctx 64 \\
        --batch 12 --lr 1e-3 --dropout 0 --warmup 0 --steps 2000      # a CPU-sized run

The defaults are nanoGPT's "baby GPT" for Shakespeare (config/train_shakespeare_char.py: 6
layers, 6 heads, width 384, context 256, batch 64, learning rate 1e-3 with 100 warm-up steps
and a cosine to 1e-4, dropout 0.2), trained for 2000 steps. nanoGPT reports a validation loss
of about 1.47 for it. Both sides here use TinyGPT's fixed optimizer (AdamW, betas 0.9 and
0.95, weight decay 0.1 on the matrices and embeddings, global-norm clipping at 1.0) and its
model (byte vocabulary, tied head, dropout on the embeddings and on each residual branch, none
on the attention weights), so the numbers compare the two engines, not the two recipes.

Ours: `tinygpt train` with those flags, then `tinygpt eval`. PyTorch: the model of
bench_torch.py (reference.py's parameters and init, fused attention, TinyGPT's dropout sites),
torch.optim.AdamW with the decay groups, the same learning-rate schedule, and the same
windows: the window starts of TinyGPT's data.Draw (a hash of the seed, the step and the row),
reproduced below, so both sides see the same batches in the same order. Only the dropout
masks, the initial weights' random draws and the float32 rounding differ.

Every --eval-every steps both sides report what `tinygpt train` prints as val: the mean loss
of --eval-batches validation batches, the same windows on both sides and at every
evaluation. At the end both are scored by the exact loss over the whole validation split (the
last 10% of the text) in consecutive windows of ctx+1 bytes, what `tinygpt eval` computes.

Prints a JSON line per side and a Markdown table: the validation losses, the median ms per
training step, the training time (the sum of the steps' times: ours from `tinygpt train
--log-json`, PyTorch's from its loop, evaluations excluded) and each side's wall time
(compiling, evaluations and saving included).
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import needs  # noqa: F401  (stops with how to install PyTorch when it is missing)
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_torch  # noqa: E402
import reference as ref  # noqa: E402

TRAIN_FRACTION = 0.9  # data.TrainFraction
VAL_STREAM = 1 << 62  # data.ValStream
M64 = (1 << 64) - 1


def mix64(x):
    """data.mix64: SplitMix64's finaliser, in 64-bit unsigned arithmetic."""
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def draw(seed, stream, row, count):
    """data.Draw: the window start in [0, count) of (seed, stream, row)."""
    h = mix64((mix64(seed ^ 0x74696E7967707421) + stream * 0x9E3779B97F4A7C15 + row) & M64)
    return (h * count) >> 64


def train_batch(text, seed, stream, batch, ctx):
    """data.Split.TrainBatch: the rows [batch, ctx+1] of training step stream (1-based)."""
    starts = len(text) - ctx
    rows = [text[o:o + ctx + 1] for o in (draw(seed, stream, r, starts) for r in range(batch))]
    return torch.tensor([list(r) for r in rows], dtype=torch.long)


def lr_at(step, a):
    """train.Schedule.At: linear warm-up over steps 1..warmup, then a cosine to min_lr."""
    if step <= a.warmup:
        return a.lr * step / a.warmup
    progress = min(1.0, (step - a.warmup) / max(1, a.steps - a.warmup))
    return a.min_lr + 0.5 * (a.lr - a.min_lr) * (1 + math.cos(math.pi * progress))


def val_batch(val, seed, i, batch, ctx):
    """data.Split.ValBatch: validation batch i, the same windows at every evaluation."""
    return train_batch(val, seed, VAL_STREAM + i, batch, ctx)


@torch.no_grad()
def estimate_val_loss(p, cfg, val, a):
    """train.Trainer.ValLoss: the mean loss of --eval-batches validation batches."""
    losses = []
    for i in range(a.eval_batches):
        rows = val_batch(val, a.seed, i, a.batch, a.ctx).to(a.device)
        logits = bench_torch.forward(p, cfg, rows[:, :-1])
        losses.append(F.cross_entropy(logits.reshape(-1, ref.VOCAB), rows[:, 1:].reshape(-1)).item())
    return sum(losses) / len(losses)


@torch.no_grad()
def exact_val_loss(p, cfg, val, device, batch=64):
    """train.ExactLoss: the mean loss over the consecutive windows val[w·ctx : w·ctx+ctx+1]."""
    T = cfg.ctx
    windows = (len(val) - 1) // T
    total = 0.0
    for w0 in range(0, windows, batch):
        rows = torch.tensor([list(val[w * T:w * T + T + 1]) for w in range(w0, min(windows, w0 + batch))],
                            dtype=torch.long, device=device)
        logits = bench_torch.forward(p, cfg, rows[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, ref.VOCAB).float(), rows[:, 1:].reshape(-1), reduction="sum")
        total += loss.item()
    return total / (windows * T)


def train_torch(text, a):
    cfg = ref.Config(ctx=a.ctx, layers=a.layers, d_model=a.d_model, heads=a.heads, d_mlp=4 * a.d_model)
    n_train = int(len(text) * TRAIN_FRACTION)
    train, val = text[:n_train], text[n_train:]
    state = ref.init_state(cfg, seed=a.seed, dtype=torch.float32, device=a.device)
    params = {n: t.requires_grad_(True) for n, t in state.params.items()}
    decay = {s.name for s in ref.param_table(cfg) if s.decay}
    groups = [
        {"params": [t for n, t in params.items() if n in decay], "weight_decay": 0.1},
        {"params": [t for n, t in params.items() if n not in decay], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=a.lr, betas=(0.9, 0.95), eps=1e-8,
                            **({"fused": True} if a.device.startswith("cuda") else {}))

    def loss_of(rows):
        logits = bench_torch.forward(params, cfg, rows[:, :-1], a.dropout)
        return F.cross_entropy(logits.reshape(-1, ref.VOCAB), rows[:, 1:].reshape(-1))

    loss_step = torch.compile(loss_of) if a.mode == "compile" else loss_of

    def sync():
        if a.device.startswith("cuda"):
            torch.cuda.synchronize()

    evals, times, train_s = [], [], 0.0
    for step in range(1, a.steps + 1):
        rows = train_batch(train, a.seed, step, a.batch, a.ctx).to(a.device)
        sync()
        t0 = time.perf_counter()
        for g in opt.param_groups:
            g["lr"] = lr_at(step, a)
        opt.zero_grad(set_to_none=True)
        loss = loss_step(rows)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params.values(), 1.0)
        opt.step()
        sync()
        dt = time.perf_counter() - t0
        train_s += dt
        times.append(dt * 1e3)
        if step % a.eval_every == 0 or step == a.steps:
            v = estimate_val_loss(params, cfg, val, a)
            evals.append((step, v))
            print(f"pytorch step {step}: train {loss.item():.4f} val {v:.4f}", file=sys.stderr, flush=True)
    return {"evals": evals, "val": exact_val_loss(params, cfg, val, a.device), "train_s": train_s,
            "ms_per_step": statistics.median(times[min(10, len(times) - 1):])}


def train_ours(a, out_dir):
    """Runs `tinygpt train` and `tinygpt eval`; the evaluations during training come from the
    run's --log-json."""
    model = os.path.join(out_dir, "quality.tinygpt")
    log = os.path.join(out_dir, "quality.jsonl")
    cmd = [a.tinygpt, "train", "--data", a.data, "--backend", a.backend, "--out", model, "--log-json", log,
           "--layers", str(a.layers), "--d-model", str(a.d_model), "--heads", str(a.heads), "--ctx", str(a.ctx),
           "--batch", str(a.batch), "--steps", str(a.steps), "--lr", str(a.lr), "--min-lr", str(a.min_lr),
           "--schedule", "cosine", "--warmup", str(a.warmup), "--dropout", str(a.dropout), "--seed", str(a.seed),
           "--eval-every", str(a.eval_every), "--eval-batches", str(a.eval_batches), "--checkpoint-every", "0"]
    subprocess.run(cmd, check=True, stdout=sys.stderr)
    events = [json.loads(line) for line in open(log)]
    ms = [e["ms_per_step"] for e in events if e["event"] == "step"]
    evals = {e["step"]: e["val"] for e in events if e["event"] == "eval"}
    out = subprocess.run([a.tinygpt, "eval", "--model", model, "--data", a.data, "--backend", a.backend],
                         check=True, capture_output=True, text=True).stdout
    return {"evals": sorted(evals.items()), "val": float(out.split()[1]), "train_s": sum(ms) / 1e3,
            "ms_per_step": statistics.median(ms[min(10, len(ms) - 1):])}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tinygpt", required=True, help="path of the tinygpt binary")
    ap.add_argument("--data", required=True, help="the training text (a file)")
    ap.add_argument("--backend", default="webgpu", help="our backend: cpu or webgpu")
    ap.add_argument("--device", default="cuda", help="PyTorch's device: cuda or cpu")
    ap.add_argument("--mode", default="compile", choices=["eager", "compile"], help="PyTorch's mode")
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--d-model", type=int, default=384)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--min-lr", type=float, default=1e-4)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--dropout", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--eval-batches", type=int, default=8)
    ap.add_argument("--sides", default="tinygpt,pytorch", help="which sides to run")
    a = ap.parse_args(argv)
    text = open(a.data, "rb").read()
    if len(text) - int(len(text) * TRAIN_FRACTION) < a.ctx + 1:
        ap.error("the text is too short for a validation split of one window")

    results = {}
    for side in a.sides.split(","):
        t0 = time.perf_counter()
        if side == "tinygpt":
            with tempfile.TemporaryDirectory() as d:
                results[side] = train_ours(a, d)
        elif side == "pytorch":
            torch.manual_seed(a.seed)
            results[side] = train_torch(text, a)
        else:
            ap.error(f"unknown side {side!r}")
        results[side]["wall_s"] = time.perf_counter() - t0
        print(json.dumps({"side": side, **results[side]}), flush=True)

    names = list(results)
    print(f"\n{a.layers} layers, width {a.d_model}, {a.heads} heads, ctx {a.ctx}, batch {a.batch}, "
          f"{a.steps} steps, lr {a.lr:g} cosine to {a.min_lr:g} after {a.warmup} warm-up, dropout {a.dropout:g}, "
          f"seed {a.seed}; tinygpt on {a.backend}, PyTorch {torch.__version__} {a.mode} on {a.device}\n")
    print("| step | " + " | ".join(f"{n} val" for n in names) + " |")
    print("|---|" + "---|" * len(names))
    steps = sorted({s for r in results.values() for s, _ in r["evals"]})
    for s in steps:
        cells = [next((f"{v:.4f}" for t, v in results[n]["evals"] if t == s), "") for n in names]
        print(f"| {s} | " + " | ".join(cells) + " |")
    print("| exact val (whole split) | " + " | ".join(f"**{results[n]['val']:.4f}**" for n in names) + " |")
    print("| ms/step (median) | " + " | ".join(f"{results[n]['ms_per_step']:.2f}" for n in names) + " |")
    print("| training time, s | " + " | ".join(f"{results[n]['train_s']:.1f}" for n in names) + " |")
    print("| wall time, s | " + " | ".join(f"{results[n]['wall_s']:.1f}" for n in names) + " |")


if __name__ == "__main__":
    main()
