#!/usr/bin/env python3
"""Writes the PyTorch fixtures the Go tests compare against (testdata/pytorch/).

Everything is computed in float64 on the CPU with reference.py:

1. init (seed 1234) a 2-layer, d_model 32, 2-head, ctx 16, d_mlp 128 model and
   take 20 AdamW steps (lr 1e-2, clip 1.0, batch 4) on FIXTURE_TEXT, so that
   LayerNorm params and biases are non-trivial; save the full state (step 20,
   w, m, v as float32) to model.tinygpt with the original's header keys.
2. reload that file and from exactly those float32 values (widened to float64):
   - logits.f32: float32 LE [B, ctx, 256] logits of the fixture batch,
   - grads.f32: float32 LE raw (unclipped) gradient of the mean loss, all
     parameters flat in manifest order and stored layout,
   - a 10-step AdamW trajectory (lr 3e-3) continuing from the file's m, v and
     step (bias correction t = 21..30), with per-step losses and pre-clip norms,
     and the weights after it (trajectory_final.f32, same layout as grads.f32),
   - fixture.json describing it all.

Run:  python make_fixtures.py [--out ../testdata/pytorch]
"""

import argparse
import json
import math
import os

import needs  # noqa: F401  (stops with how to install PyTorch when it is missing)
import torch

import reference as ref

FIXTURE_TEXT = (
    "The lighthouse keeper climbed the stairs every evening at dusk. "
    "He counted the steps out loud, one hundred and twelve, and at the top he "
    "wiped the glass until it shone. Ships passed far out on the grey water, "
    "and some of them blinked their lamps back at him. In winter the wind "
    "pushed hard against the door, and snow piled up on the rocks below. "
    "In summer children came from the village with bread, apples and news. "
    "They asked him whether he was lonely, and he always said the same thing: "
    "the sea talks all night, so a keeper is never alone for long. Then he "
    "lit the lamp, poured a cup of tea, and wrote the weather in his book.\n"
)

CFG = ref.Config(ctx=16, layers=2, d_model=32, heads=2, d_mlp=128)
BATCH = 4
INIT_SEED = 1234
PRETRAIN_STEPS, PRETRAIN_LR, PRETRAIN_CLIP, PRETRAIN_DATA_SEED = 20, 1e-2, 1.0, 1
FIXTURE_BATCH_SEED = 2
TRAJ_STEPS, TRAJ_LR, TRAJ_DATA_SEED = 10, 3e-3, 3
BETA1, BETA2, EPS, WD = 0.9, 0.95, 1e-8, 0.1
SAVED_AT = "2026-01-01T00:00:00.000Z"   # fixed so the file is reproducible


def draw_rows(gen, data, n):
    """n windows of ctx+1 bytes at uniformly drawn offsets into data."""
    offs = torch.randint(0, len(data) - CFG.ctx, (n,), generator=gen).tolist()
    return [list(data[o:o + CFG.ctx + 1]) for o in offs]


def as_tensor(rows):
    return torch.tensor(rows, dtype=torch.long)


def flat_f32(tensors):
    return b"".join(ref._f32_bytes(t) for t in tensors.values())


def run_trajectory(start, batches, clip):
    st = start.clone()
    losses, norms = [], []
    for rows in batches:
        loss, grads = ref.loss_and_grads(st, as_tensor(rows))
        losses.append(float(loss))
        norms.append(ref.adamw_step(st, grads, lr=TRAJ_LR, grad_clip=clip, beta1=BETA1,
                                    beta2=BETA2, eps=EPS, weight_decay=WD))
    return st, losses, norms


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(here, "..", "testdata", "pytorch"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)   # float64 CPU; one thread keeps reductions in a fixed order

    text = FIXTURE_TEXT.encode("ascii")
    n_train = int(len(text) * 0.9)
    train, val = text[:n_train], text[n_train:]
    P = ref.num_params(CFG)
    print(f"text {len(text)} bytes (train {len(train)}, val {len(val)}); params {P}")

    # 1. init + 20 AdamW steps in float64, then save as float32 full state.
    st = ref.init_state(CFG, INIT_SEED, torch.float64, "cpu")
    gen = torch.Generator().manual_seed(PRETRAIN_DATA_SEED)
    history, pre_losses = [], []
    for i in range(PRETRAIN_STEPS):
        loss, grads = ref.loss_and_grads(st, as_tensor(draw_rows(gen, train, BATCH)))
        ref.adamw_step(st, grads, lr=PRETRAIN_LR, grad_clip=PRETRAIN_CLIP, beta1=BETA1,
                       beta2=BETA2, eps=EPS, weight_decay=WD)
        pre_losses.append(float(loss))
        history.append({"step": i + 1, "train": round(float(loss), 4), "val": None})
    val_offsets = list(range(0, len(val) - CFG.ctx, CFG.ctx))
    val_loss = sum(ref.window_losses(st, val, val_offsets)) / len(val_offsets)
    history[-1]["val"] = round(val_loss, 4)
    sample = ref.generate(st, b"The ", 32).decode("utf-8", errors="replace")
    print("pretrain losses:", " ".join(f"{x:.4f}" for x in pre_losses))
    print(f"val loss {val_loss:.4f}; sample {sample!r}")

    model_path = os.path.join(args.out, "model.tinygpt")
    ref.save_tinygpt(model_path, st, corpus=FIXTURE_TEXT, batch_size=BATCH,
                     learning_rate=PRETRAIN_LR, grad_clip=PRETRAIN_CLIP, max_steps=PRETRAIN_STEPS,
                     eval_every=PRETRAIN_STEPS, seed=INIT_SEED, backend="pytorch",
                     loss_history=history,
                     final_loss={"step": PRETRAIN_STEPS, "train": pre_losses[-1], "val": val_loss},
                     sample=sample, best_val={"loss": val_loss, "step": PRETRAIN_STEPS},
                     saved_at=SAVED_AT)

    # 2. Reload: everything below starts from the file's float32 values.
    st, header = ref.load_tinygpt(model_path, torch.float64, "cpu")
    assert st.step == PRETRAIN_STEPS and st.m is not None
    assert len(ref.read_header(model_path)[1]) == 4 + 12 * P

    gen = torch.Generator().manual_seed(FIXTURE_BATCH_SEED)
    rows = draw_rows(gen, train, BATCH)
    batch = as_tensor(rows)
    loss, grads = ref.loss_and_grads(st, batch)
    grad_norm = float(ref.global_norm(grads))
    with torch.no_grad():
        logits = ref.forward(st.params, CFG, batch[:, :-1])
    assert logits.shape == (BATCH, CFG.ctx, 256)
    with open(os.path.join(args.out, "logits.f32"), "wb") as f:
        f.write(ref._f32_bytes(logits))
    with open(os.path.join(args.out, "grads.f32"), "wb") as f:
        f.write(flat_f32(grads))
    grad_index, off = [], 0
    for s in ref.param_table(CFG):
        n = math.prod(s.shape)
        grad_index.append({"name": s.name, "offset": off, "size": n, "shape": list(s.shape)})
        off += n
    assert off == P

    # float32 sanity: the same batch through the float32 model
    with torch.no_grad():
        l32 = float(ref.loss_fn(st.to(torch.float32).params, CFG, batch))
        print(f"fixture batch loss float64 {float(loss):.10f}  float32 {l32:.10f}  "
              f"diff {abs(l32 - float(loss)):.2e}")
        if torch.cuda.is_available():
            lc = float(ref.loss_fn(st.to(torch.float32, "cuda").params, CFG, batch.cuda()))
            print(f"  cuda float32 {lc:.10f}  diff {abs(lc - float(loss)):.2e}")
    print(f"grad norm {grad_norm:.10f}")

    # 3. Trajectory from the loaded state (its m, v and step: t = 21..30).
    gen = torch.Generator().manual_seed(TRAJ_DATA_SEED)
    batches = [draw_rows(gen, train, BATCH) for _ in range(TRAJ_STEPS)]
    # Use clip 1.0 if at least two steps clip there; else the largest lower clip
    # at which some steps (>= 2) clip and some do not, so Go tests both branches.
    fallback = None
    for clip in (1.0, 0.9, 0.8, 0.75, 0.7, 0.65, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1):
        final, t_losses, t_norms = run_trajectory(st, batches, clip)
        n_clipped = sum(x > clip for x in t_norms)
        print(f"trajectory clip {clip}: {n_clipped}/{TRAJ_STEPS} steps clip")
        if n_clipped >= 2 and fallback is None:
            fallback = clip
        if 2 <= n_clipped < TRAJ_STEPS or (clip == 1.0 and n_clipped >= 2):
            break
    else:
        clip = fallback
        final, t_losses, t_norms = run_trajectory(st, batches, clip)
    assert final.step == PRETRAIN_STEPS + TRAJ_STEPS
    with open(os.path.join(args.out, "trajectory_final.f32"), "wb") as f:
        f.write(flat_f32(final.params))
    print("trajectory losses:", " ".join(f"{x:.6f}" for x in t_losses))
    print("trajectory norms: ", " ".join(f"{x:.4f}" for x in t_norms))

    fixture = {
        "description": "PyTorch float64 reference fixtures (python/make_fixtures.py); "
                       "model.tinygpt is the float32 full state everything starts from",
        "config": {"vocab": 256, "ctx": CFG.ctx, "layers": CFG.layers, "heads": CFG.heads,
                   "dModel": CFG.d_model, "dMlp": CFG.d_mlp, "batchSize": BATCH},
        "model_file": "model.tinygpt",
        "params": P,
        "step": st.step,
        "tokens": rows,
        "loss": float(loss),
        "loss_float32": l32,
        "grad_norm": grad_norm,
        "logits_file": "logits.f32",
        "logits_shape": [BATCH, CFG.ctx, 256],
        "grads_file": "grads.f32",
        "grads": grad_index,
        "trajectory": {
            "lr": TRAJ_LR, "grad_clip": clip, "beta1": BETA1, "beta2": BETA2, "eps": EPS,
            "weight_decay": WD, "start_step": PRETRAIN_STEPS,
            "batches": batches, "losses": t_losses, "grad_norms": t_norms,
            "clipped": [x > clip for x in t_norms],
            "final_step": final.step, "final_weights_file": "trajectory_final.f32",
        },
        "pretrain": {"seed": INIT_SEED, "steps": PRETRAIN_STEPS, "lr": PRETRAIN_LR,
                     "grad_clip": PRETRAIN_CLIP, "losses": pre_losses, "val_loss": val_loss},
        "dtype": "float64",
        "torch_version": torch.__version__,
    }
    with open(os.path.join(args.out, "fixture.json"), "w") as f:
        json.dump(fixture, f, indent=1)
        f.write("\n")
    total = sum(os.path.getsize(os.path.join(args.out, n)) for n in os.listdir(args.out))
    print(f"wrote {args.out}: {sorted(os.listdir(args.out))}, {total} bytes")


if __name__ == "__main__":
    main()
