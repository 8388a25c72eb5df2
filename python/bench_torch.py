"""Times TinyGPT training steps in PyTorch, the peer we measure ourselves against.

The model is the reference model of reference.py (same parameters, shapes, init, tied head,
exact-erf GELU), written the way a PyTorch user would write it for speed: parameters as leaf
tensors, fused scaled-dot-product attention with a causal mask, torch.optim.AdamW with the
decay groups of DESIGN.md §3 (its fused implementation, on the CPU too: --adamw), and
global-norm clipping at 1.0. A step is zero_grad, forward, cross-entropy, backward, clip,
AdamW, on random tokens, exactly what `tinygpt bench` times.

    python bench_torch.py --presets tiny,small --threads 16            # CPU
    python bench_torch.py --device cuda --mode compile                  # GPU

Prints one JSON object per preset: preset, device, mode, threads, batch, ctx, median ms/step
(ms_per_step), min_ms, steps, and the mean loss of the timed steps (a sanity check: about
ln 256 = 5.5 for random tokens).
"""

import argparse
import json
import math
import statistics
import sys
import time

import needs  # noqa: F401  (stops with how to install PyTorch when it is missing)
import torch
import torch.nn.functional as F

import reference as ref

# name: (layers, d_model, ctx, batch), DESIGN.md §3.
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


def config(name):
    L, C, ctx, batch = PRESETS[name]
    return ref.Config(ctx=ctx, layers=L, d_model=C, heads=ref.default_heads(C), d_mlp=4 * C), batch


def forward(p, cfg, idx, dropout=0.0):
    """The reference forward with fused attention; idx [B, T] -> logits [B, T, 256]. With
    dropout, TinyGPT's dropout (gpt/model.go): on the embeddings and on each branch's output
    before its residual add."""
    B, T = idx.shape
    C, H, D = cfg.d_model, cfg.heads, cfg.head_dim

    def drop(t):
        return F.dropout(t, dropout, training=True) if dropout > 0 else t

    x = drop(p["token_embedding.weight"][idx] + p["position_embedding.weight"][:T])
    for i in range(cfg.layers):
        b = f"blocks.{i}."
        h = F.layer_norm(x, (C,), p[b + "ln1.weight"], p[b + "ln1.bias"], ref.LN_EPS)
        q = h @ p[b + "attn.q_proj.weight"] + p[b + "attn.q_proj.bias"]
        k = h @ p[b + "attn.k_proj.weight"] + p[b + "attn.k_proj.bias"]
        v = h @ p[b + "attn.v_proj.weight"] + p[b + "attn.v_proj.bias"]
        q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in (q, k, v))
        if hasattr(F, "scaled_dot_product_attention"):  # PyTorch >= 2.0
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
            causal = torch.ones(T, T, dtype=torch.bool, device=idx.device).tril()
            y = att.masked_fill(~causal, float("-inf")).softmax(dim=-1) @ v
        y = y.transpose(1, 2).reshape(B, T, C)
        x = x + drop(y @ p[b + "attn.o_proj.weight"] + p[b + "attn.o_proj.bias"])
        h = F.layer_norm(x, (C,), p[b + "ln2.weight"], p[b + "ln2.bias"], ref.LN_EPS)
        h = F.gelu(h @ p[b + "mlp.fc_in.weight"] + p[b + "mlp.fc_in.bias"])
        x = x + drop(h @ p[b + "mlp.fc_out.weight"] + p[b + "mlp.fc_out.bias"])
    x = F.layer_norm(x, (C,), p["ln_final.weight"], p["ln_final.bias"], ref.LN_EPS)
    return x @ p["token_embedding.weight"].T


def _fused_on_cpu():
    """Whether this PyTorch's AdamW has a fused implementation for the CPU (2.4 and later)."""
    try:
        torch.optim.AdamW([torch.zeros(1, requires_grad=True)], fused=True)
        return True
    except (RuntimeError, TypeError, ValueError):
        return False


def bench(name, device, mode, steps, warmup, sync_each=False, adamw="auto"):
    """Times steps training steps of preset name after warmup untimed ones. On a GPU each step
    is launched before the last one's loss is read (see below); with sync_each, each step is
    timed alone between two synchronizations instead, the host's launches not overlapped.
    adamw picks torch.optim.AdamW's implementation: "fused" (one fused kernel over all the
    parameters, on a GPU and, from PyTorch 2.4, on the CPU), "foreach" (multi-tensor
    operations), "loop" (one parameter at a time), "default" (what PyTorch picks when asked for
    nothing: foreach on a GPU, loop on the CPU) or "auto": fused where this PyTorch has it,
    PyTorch at its fastest (on the 16-core CPU at medium 21 ms a step against 32 with the
    default, at large 57 against 62: docs/performance.md, 2026-11-27)."""
    cfg, batch = config(name)
    state = ref.init_state(cfg, seed=1, dtype=torch.float32, device=device)
    params = {n: t.requires_grad_(True) for n, t in state.params.items()}
    decay = {s.name for s in ref.param_table(cfg) if s.decay}
    groups = [
        {"params": [t for n, t in params.items() if n in decay], "weight_decay": 0.1},
        {"params": [t for n, t in params.items() if n not in decay], "weight_decay": 0.0},
    ]
    if adamw == "auto":
        adamw = "fused" if device.startswith("cuda") or _fused_on_cpu() else "default"
    impl = {"fused": {"fused": True}, "foreach": {"foreach": True}, "loop": {"foreach": False},
            "default": {}}[adamw]
    opt = torch.optim.AdamW(groups, lr=3e-4, betas=(0.9, 0.95), eps=1e-8, **impl)
    gen = torch.Generator().manual_seed(0)

    def loss_of(rows):
        logits = forward(params, cfg, rows[:, :-1])
        return F.cross_entropy(logits.reshape(-1, ref.VOCAB), rows[:, 1:].reshape(-1))

    if mode != "eager":
        # Compile each preset afresh: after a first preset, torch.compile would compile the
        # next one's shapes as dynamic (and Inductor 2.11 failed an assertion doing so).
        torch._dynamo.reset()
    if mode == "eager":
        loss_step = loss_of
    elif mode == "compile":
        loss_step = torch.compile(loss_of)
    else:
        loss_step = torch.compile(loss_of, mode="reduce-overhead")

    def step(rows):
        opt.zero_grad(set_to_none=True)
        loss = loss_step(rows)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params.values(), 1.0)
        opt.step()
        return loss

    def sync():
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    times, losses = [], []
    if device.startswith("cuda") and not sync_each:
        # Timed as `tinygpt bench` times itself: each step is launched before the loss of the
        # one before is read back, so the host launches a step while the GPU runs the last
        # (as a training loop that logs every step's loss runs), and a step's time is the
        # interval between two reads. The batches are made on the GPU first; each step's loss
        # is copied out at once (CUDA graphs reuse their outputs).
        batches = [torch.randint(0, ref.VOCAB, (batch, cfg.ctx + 1), generator=gen).to(device)
                   for _ in range(warmup + steps + 1)]
        sync()
        prev, last = None, time.perf_counter()
        for i, rows in enumerate(batches):
            loss = step(rows).detach().clone()
            if prev is not None:
                v = prev.item()
                now = time.perf_counter()
                if i > warmup:
                    times.append((now - last) * 1e3)
                    losses.append(v)
                last = now
            prev = loss
        sync()
    else:
        for i in range(warmup + steps):
            rows = torch.randint(0, ref.VOCAB, (batch, cfg.ctx + 1), generator=gen).to(device)
            sync()
            t0 = time.perf_counter()
            loss = step(rows)
            sync()
            dt = time.perf_counter() - t0
            if i >= warmup:
                times.append(dt * 1e3)
                losses.append(loss.item())
    return {
        "preset": name, "device": device, "mode": mode, "threads": torch.get_num_threads(),
        "batch": batch, "ctx": cfg.ctx, "params": ref.num_params(cfg),
        "ms_per_step": statistics.median(times), "min_ms": min(times), "steps": steps,
        "timing": "sync-each" if sync_each or not device.startswith("cuda") else "pipelined",
        "loss": sum(losses) / len(losses), "torch": torch.__version__, "adamw": adamw,
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--presets", default="tiny,small,medium,large,xl")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--mode", default="eager", choices=["eager", "compile", "reduce-overhead"])
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0 = PyTorch's default)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--adamw", default="auto", choices=["auto", "default", "fused", "foreach", "loop"],
                    help="AdamW implementation (auto: fused where PyTorch has it)")
    ap.add_argument("--sync-each", action="store_true",
                    help="GPU: time each step alone between synchronizations (not overlapped)")
    a = ap.parse_args(argv)
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    for name in a.presets.split(","):
        r = bench(name.strip(), a.device, a.mode, a.steps, a.warmup, a.sync_each, a.adamw)
        if not math.isfinite(r["loss"]):
            sys.exit(f"{name}: loss is not finite")
        print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
