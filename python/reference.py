#!/usr/bin/env python3
"""TinyGPT reference model in PyTorch: one readable file, no torch.nn modules.

This is the executable specification the Go engine is tested against (DESIGN.md
sections 3 and 4). It is deliberately plain:

* Weights are plain tensors kept in the STORED layout of a .tinygpt file: every
  linear weight is [in, out] and a linear layer is ``y = x @ W + b``. Loading and
  saving therefore never transposes anything.
* Parameters live in an ordered dict whose order and names are the file's
  manifest order and names (token_embedding.weight, position_embedding.weight,
  ln_final.weight, ln_final.bias, then per block ln1, q/k/v/o_proj, ln2,
  mlp.fc_in, mlp.fc_out).
* Everything is device- and dtype-agnostic: float64 on the CPU for fixtures,
  float32 on CUDA for speed. No dropout, no torch.optim.

Command line:
    python reference.py eval   MODEL --text FILE [--offset N] [--windows K]
    python reference.py sample MODEL [--prompt S] [--tokens N]
    python reference.py inspect MODEL
"""

import argparse
import json
import math
import struct
import sys
from collections import OrderedDict, namedtuple
from dataclasses import dataclass

import needs  # noqa: F401  (stops with how to install PyTorch when it is missing)
import torch
import torch.nn.functional as F

VOCAB = 256            # byte-level, no special tokens
LN_EPS = 1e-5
NEWLINE = 10           # an empty prompt is a single newline byte
PROJECT_URL = "https://github.com/sarthak-fleet/tinygpt"  # the original's header value

# Heads for the preset widths (head_dim about 32); other widths: C/32, else 3, else 1.
_HEADS = {48: 3, 64: 2, 96: 3, 128: 4, 144: 3, 192: 6, 256: 8, 384: 12, 1280: 20}


def default_heads(d_model):
    if d_model in _HEADS:
        return _HEADS[d_model]
    if d_model % 32 == 0:
        return d_model // 32
    return 3 if d_model % 3 == 0 else 1


@dataclass
class Config:
    ctx: int
    layers: int
    d_model: int
    heads: int
    d_mlp: int
    vocab: int = VOCAB

    @property
    def head_dim(self):
        return self.d_model // self.heads


# ---------------------------------------------------------------------------
# Parameter table: name, stored shape, the shape the manifest lists, whether
# AdamW decays it, and its init ("ones", "zeros" or a normal std).
# ---------------------------------------------------------------------------

Spec = namedtuple("Spec", "name shape manifest_shape decay init")


def param_table(cfg):
    C, M, L = cfg.d_model, cfg.d_mlp, cfg.layers
    std, std_out = 0.02, 0.02 / math.sqrt(2 * L)
    t = [Spec("token_embedding.weight", (cfg.vocab, C), (cfg.vocab, C), True, std),
         Spec("position_embedding.weight", (cfg.ctx, C), (cfg.ctx, C), True, std),
         Spec("ln_final.weight", (C,), (C,), False, "ones"),
         Spec("ln_final.bias", (C,), (C,), False, "zeros")]
    for i in range(L):
        b = f"blocks.{i}."
        t += [Spec(b + "ln1.weight", (C,), (C,), False, "ones"),
              Spec(b + "ln1.bias", (C,), (C,), False, "zeros")]
        for proj in "qkvo":
            t += [Spec(f"{b}attn.{proj}_proj.weight", (C, C), (C, C), True,
                       std_out if proj == "o" else std),
                  Spec(f"{b}attn.{proj}_proj.bias", (C,), (C,), False, "zeros")]
        t += [Spec(b + "ln2.weight", (C,), (C,), False, "ones"),
              Spec(b + "ln2.bias", (C,), (C,), False, "zeros"),
              # stored [in, out]; the original's manifest lists [out, in]
              Spec(b + "mlp.fc_in.weight", (C, M), (M, C), True, std),
              Spec(b + "mlp.fc_in.bias", (M,), (M,), False, "zeros"),
              Spec(b + "mlp.fc_out.weight", (M, C), (C, M), True, std_out),
              Spec(b + "mlp.fc_out.bias", (C,), (C,), False, "zeros")]
    return t


def num_params(cfg):
    return sum(math.prod(s.shape) for s in param_table(cfg))


class State:
    """Weights plus AdamW state: params/m/v are ordered dicts in manifest order.

    step counts the optimizer steps taken so far (the int32 at the start of a
    file's state); m and v are None for a weights-only model.
    """

    def __init__(self, cfg, params, m=None, v=None, step=0):
        self.cfg, self.params, self.m, self.v, self.step = cfg, params, m, v, step

    def to(self, dtype=None, device=None):
        conv = (lambda d: None if d is None else
                OrderedDict((n, t.to(device=device, dtype=dtype)) for n, t in d.items()))
        return State(self.cfg, conv(self.params), conv(self.m), conv(self.v), self.step)

    def clone(self):
        conv = (lambda d: None if d is None else
                OrderedDict((n, t.detach().clone()) for n, t in d.items()))
        return State(self.cfg, conv(self.params), conv(self.m), conv(self.v), self.step)

    def zero_optimizer(self):
        self.m = OrderedDict((n, torch.zeros_like(p)) for n, p in self.params.items())
        self.v = OrderedDict((n, torch.zeros_like(p)) for n, p in self.params.items())


def init_state(cfg, seed, dtype=torch.float64, device="cpu"):
    """Init per DESIGN §3. Normals are drawn in float64 on the CPU from one
    torch.Generator in table order (tok, pos, then per layer Wq, Wk, Wv, Wo,
    fc_in, fc_out), so the draw does not depend on dtype or device."""
    g = torch.Generator().manual_seed(seed)
    params = OrderedDict()
    for s in param_table(cfg):
        if s.init == "ones":
            p = torch.ones(s.shape, dtype=torch.float64)
        elif s.init == "zeros":
            p = torch.zeros(s.shape, dtype=torch.float64)
        else:
            p = torch.randn(s.shape, generator=g, dtype=torch.float64) * s.init
        params[s.name] = p.to(device=device, dtype=dtype)
    st = State(cfg, params)
    st.zero_optimizer()
    return st


# ---------------------------------------------------------------------------
# The model (the one screen that matters)
# ---------------------------------------------------------------------------

def forward(p, cfg, idx):
    """idx: [B, T] long byte ids, T <= ctx. Returns logits [B, T, 256]."""
    B, T = idx.shape
    C, H, D = cfg.d_model, cfg.heads, cfg.head_dim
    x = p["token_embedding.weight"][idx] + p["position_embedding.weight"][:T]
    causal = torch.ones(T, T, dtype=torch.bool, device=idx.device).tril()
    for i in range(cfg.layers):
        b = f"blocks.{i}."
        # attention: x = x + o_proj(attn(LN1(x)))
        h = F.layer_norm(x, (C,), p[b + "ln1.weight"], p[b + "ln1.bias"], LN_EPS)
        q = h @ p[b + "attn.q_proj.weight"] + p[b + "attn.q_proj.bias"]
        k = h @ p[b + "attn.k_proj.weight"] + p[b + "attn.k_proj.bias"]
        v = h @ p[b + "attn.v_proj.weight"] + p[b + "attn.v_proj.bias"]
        q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in (q, k, v))  # [B,H,T,D]
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)  # max-subtracted
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + (y @ p[b + "attn.o_proj.weight"] + p[b + "attn.o_proj.bias"])
        # MLP: x = x + fc_out(GELU_erf(fc_in(LN2(x))))
        h = F.layer_norm(x, (C,), p[b + "ln2.weight"], p[b + "ln2.bias"], LN_EPS)
        h = F.gelu(h @ p[b + "mlp.fc_in.weight"] + p[b + "mlp.fc_in.bias"])  # exact erf
        x = x + (h @ p[b + "mlp.fc_out.weight"] + p[b + "mlp.fc_out.bias"])
    x = F.layer_norm(x, (C,), p["ln_final.weight"], p["ln_final.bias"], LN_EPS)
    return x @ p["token_embedding.weight"].T  # tied LM head, no bias


def loss_fn(p, cfg, rows):
    """rows: [B, T+1] long. Mean natural-log cross-entropy over all B*T positions."""
    logits = forward(p, cfg, rows[:, :-1])
    return F.cross_entropy(logits.reshape(-1, cfg.vocab), rows[:, 1:].reshape(-1))


def loss_and_grads(state, rows):
    """Returns (loss tensor, OrderedDict of raw unclipped gradients)."""
    leaves = OrderedDict((n, t.detach().requires_grad_(True)) for n, t in state.params.items())
    loss = loss_fn(leaves, state.cfg, rows)
    grads = torch.autograd.grad(loss, list(leaves.values()))
    return loss.detach(), OrderedDict(zip(leaves.keys(), grads))


def global_norm(grads):
    return torch.sqrt(sum((g * g).sum() for g in grads.values()))


# ---------------------------------------------------------------------------
# AdamW, by hand, in the parameters' dtype
# ---------------------------------------------------------------------------

@torch.no_grad()
def adamw_step(state, grads, lr, grad_clip=1.0, beta1=0.9, beta2=0.95, eps=1e-8,
               weight_decay=0.1):
    """One optimizer step; returns the pre-clip global grad norm (a float).

    Order, exactly:
      1. norm = sqrt(sum over all grads of g^2)
      2. if grad_clip > 0 and norm > grad_clip: g = g * (grad_clip / (norm + 1e-6))
      3. t = step + 1 (1-based bias correction)
      4. per parameter: m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g^2
      5. decayed params only (tok_emb, pos_emb, Wq, Wk, Wv, Wo, fc_in.W,
         fc_out.W; not biases, not LayerNorm): p = p - lr*wd*p
      6. p = p - lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
      7. step = t
    """
    if state.m is None:
        state.zero_optimizer()
    decay = {s.name: s.decay for s in param_table(state.cfg)}
    norm = float(global_norm(grads))
    scale = grad_clip / (norm + 1e-6) if (grad_clip > 0 and norm > grad_clip) else None
    t = state.step + 1
    bc1, bc2 = 1.0 - beta1 ** t, 1.0 - beta2 ** t
    for n, p in state.params.items():
        g = grads[n] if scale is None else grads[n] * scale
        m, v = state.m[n], state.v[n]
        m.mul_(beta1).add_(g, alpha=1.0 - beta1)
        v.mul_(beta2).addcmul_(g, g, value=1.0 - beta2)
        if decay[n]:
            p.sub_(p * (lr * weight_decay))
        p.sub_(lr * (m / bc1) / ((v / bc2).sqrt() + eps))
    state.step = t
    return norm


# ---------------------------------------------------------------------------
# .tinygpt v2 files: "TGPT", u32 version 2, u32 header length H, H bytes of
# UTF-8 JSON, then the state. Full state: int32 step, then per tensor in
# manifest order w[n], m[n], v[n] as float32. Weights-only: int32 step, then
# all weights (fp32, fp16, or int4 = all fp16 scales then all packed blocks).
# ---------------------------------------------------------------------------

def _le_tensor(buf, dtype):
    # a fresh bytearray is aligned and writable; hosts are little-endian (x86/arm)
    return torch.frombuffer(bytearray(buf), dtype=dtype) if len(buf) else torch.empty(0, dtype=dtype)


def _check_manifest(header, table):
    man = header.get("manifest")
    if man is None:
        return
    if len(man) != len(table):
        raise ValueError(f"manifest has {len(man)} tensors, expected {len(table)}")
    off = 0
    for e, s in zip(man, table):
        if e["name"] != s.name or tuple(e["shape"]) != s.manifest_shape or e["floatOffset"] != off:
            raise ValueError(f"manifest entry {e} does not match expected "
                             f"{s.name} {list(s.manifest_shape)} @ {off}")
        off += math.prod(s.shape)


def read_header(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"TGPT":
        raise ValueError(f"{path}: not a .tinygpt file (bad magic)")
    version, hlen = struct.unpack_from("<II", data, 4)
    if version != 2:
        raise ValueError(f"{path}: unsupported version {version}")
    header = json.loads(data[12:12 + hlen].decode("utf-8"))
    return header, data[12 + hlen:]


def config_from_header(header):
    c = header["config"]
    d = c["dModel"]
    return Config(ctx=c["ctx"], layers=c["layers"], d_model=d,
                  heads=c.get("heads") or default_heads(d), d_mlp=c.get("dMlp") or 4 * d)


def load_tinygpt(path, dtype=torch.float64, device="cpu"):
    """Reads full-state fp32, weights-only fp32, fp16 and int4 files.
    Returns (State, header). m and v are None unless the file holds them."""
    header, state = read_header(path)
    cfg = config_from_header(header)
    table = param_table(cfg)
    _check_manifest(header, table)
    sizes = [math.prod(s.shape) for s in table]
    P = sum(sizes)
    if len(state) < 4:
        raise ValueError(f"{path}: state too short")
    step = struct.unpack_from("<i", state, 0)[0]
    wdt = header.get("weightDtype", "fp32")
    params, m, v = OrderedDict(), None, None

    if wdt == "fp16":
        if len(state) != 4 + 2 * P:
            raise ValueError(f"{path}: fp16 state is {len(state)} bytes, expected {4 + 2 * P}")
        flat = _le_tensor(state[4:], torch.float16).to(torch.float32)
        off = 0
        for s, n in zip(table, sizes):
            params[s.name] = flat[off:off + n].reshape(s.shape)
            off += n
    elif wdt == "int4":
        bs = header.get("int4BlockSize", 64)
        nblocks = [-(-n // bs) for n in sizes]
        S = sum(nblocks)
        if len(state) != 4 + 2 * S + (bs // 2) * S:
            raise ValueError(f"{path}: int4 state is {len(state)} bytes, expected {4 + 2 * S + bs // 2 * S}")
        scales = _le_tensor(state[4:4 + 2 * S], torch.float16).to(torch.float32)
        packed = _le_tensor(state[4 + 2 * S:], torch.uint8)
        # low nibble = even element, high nibble = odd element; value = (nibble - 8) * scale
        q = torch.stack([packed & 15, packed >> 4], dim=-1).reshape(-1).to(torch.float32) - 8.0
        boff = 0
        for s, n, nb in zip(table, sizes, nblocks):
            blk = q[boff * bs:(boff + nb) * bs].reshape(nb, bs) * scales[boff:boff + nb, None]
            params[s.name] = blk.reshape(-1)[:n].reshape(s.shape)
            boff += nb
    elif wdt == "fp32":
        if len(state) == 4 + 12 * P:          # full state, w/m/v interleaved per tensor
            flat = _le_tensor(state[4:], torch.float32)
            m, v = OrderedDict(), OrderedDict()
            off = 0
            for s, n in zip(table, sizes):
                params[s.name] = flat[3 * off:3 * off + n].reshape(s.shape)
                m[s.name] = flat[3 * off + n:3 * off + 2 * n].reshape(s.shape)
                v[s.name] = flat[3 * off + 2 * n:3 * off + 3 * n].reshape(s.shape)
                off += n
        elif len(state) == 4 + 4 * P:         # weights only, fp32
            flat = _le_tensor(state[4:], torch.float32)
            off = 0
            for s, n in zip(table, sizes):
                params[s.name] = flat[off:off + n].reshape(s.shape)
                off += n
        else:
            raise ValueError(f"{path}: state is {len(state)} bytes; expected {4 + 12 * P} "
                             f"(full) or {4 + 4 * P} (weights only) for {P} params")
    else:
        raise ValueError(f"{path}: unknown weightDtype {wdt!r}")

    st = State(cfg, params, m, v, step).to(dtype=dtype, device=device)
    return st, header


def _f32_bytes(t):
    return t.detach().to(device="cpu", dtype=torch.float32).contiguous().numpy().tobytes()


def _js_numbers(o):
    """Write numbers as JavaScript's JSON.stringify does: 1.0 -> 1, NaN/inf -> null."""
    if isinstance(o, float):
        if not math.isfinite(o):
            return None
        return int(o) if o.is_integer() and abs(o) < 2 ** 53 else o
    if isinstance(o, dict):
        return {k: _js_numbers(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_js_numbers(v) for v in o]
    return o


def save_tinygpt(path, state, *, corpus="", batch_size=16, learning_rate=3e-4, grad_clip=1.0,
                 max_steps=0, eval_every=0, seed=0, backend="pytorch", loss_history=(),
                 final_loss=None, sample="", best_val=None, saved_at=None):
    """Writes a full-state (w, m, v; float32) v2 file with the original's header keys."""
    import datetime
    cfg = state.cfg
    table = param_table(cfg)
    if state.m is None:
        raise ValueError("save_tinygpt writes full state; the state has no m/v")
    P = num_params(cfg)
    manifest, off = [], 0
    for s in table:
        manifest.append({"name": s.name, "shape": list(s.manifest_shape), "floatOffset": off})
        off += math.prod(s.shape)
    if saved_at is None:
        now = datetime.datetime.now(datetime.timezone.utc)
        saved_at = now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"
    header = OrderedDict([
        ("version", 2),
        ("savedAt", saved_at),
        ("config", OrderedDict([
            ("ctx", cfg.ctx), ("layers", cfg.layers), ("heads", cfg.heads),
            ("dModel", cfg.d_model), ("dMlp", cfg.d_mlp), ("batchSize", batch_size),
            ("learningRate", learning_rate), ("gradClip", grad_clip), ("maxSteps", max_steps),
            ("evalEvery", eval_every), ("seed", seed), ("backend", backend)])),
        ("corpus", corpus),
        ("manifest", manifest),
        ("includesOptimizerState", True),
        ("stateByteLength", 4 + 12 * P),
        ("lossHistory", list(loss_history)),
        ("finalLoss", final_loss),
        ("sample", sample),
        ("bestVal", best_val),
        ("project", PROJECT_URL),
    ])
    hbytes = json.dumps(_js_numbers(header), separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    parts = [b"TGPT", struct.pack("<II", 2, len(hbytes)), hbytes, struct.pack("<i", state.step)]
    for s in table:
        parts += [_f32_bytes(state.params[s.name]), _f32_bytes(state.m[s.name]),
                  _f32_bytes(state.v[s.name])]
    with open(path, "wb") as f:
        f.write(b"".join(parts))


# ---------------------------------------------------------------------------
# Evaluation and greedy sampling
# ---------------------------------------------------------------------------

@torch.no_grad()
def window_losses(state, data, offsets, chunk=64):
    """Mean loss of each ctx+1-byte window of data starting at the given offsets."""
    T, dev = state.cfg.ctx, next(iter(state.params.values())).device
    out = []
    for i in range(0, len(offsets), chunk):
        rows = torch.tensor([list(data[o:o + T + 1]) for o in offsets[i:i + chunk]],
                            dtype=torch.long, device=dev)
        logits = forward(state.params, state.cfg, rows[:, :-1])
        ce = F.cross_entropy(logits.reshape(-1, VOCAB), rows[:, 1:].reshape(-1), reduction="none")
        out += ce.reshape(rows.shape[0], T).mean(dim=1).tolist()
    return out


@torch.no_grad()
def generate(state, prompt, n):
    """Greedy (argmax; ties go to the lower byte). The window is the last ctx
    tokens, placed at positions 0..ctx-1. Returns the n new bytes."""
    toks = list(prompt) or [NEWLINE]
    dev = next(iter(state.params.values())).device
    start = len(toks)
    for _ in range(n):
        window = torch.tensor([toks[-state.cfg.ctx:]], dtype=torch.long, device=dev)
        logits = forward(state.params, state.cfg, window)[0, -1]
        toks.append(int(torch.argmax(logits)))
    return bytes(toks[start:])


def _dtype(name):
    return {"float64": torch.float64, "float32": torch.float32}[name]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--device", default="cpu", help="cpu, cuda, ... (default cpu)")
    common.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("eval", parents=[common], help="mean loss over consecutive ctx+1-byte windows")
    e.add_argument("model")
    e.add_argument("--text", required=True)
    e.add_argument("--offset", type=int, default=0, help="first window's byte offset")
    e.add_argument("--windows", type=int, default=0, help="at most this many windows (0 = all)")
    s = sub.add_parser("sample", parents=[common], help="greedy continuation")
    s.add_argument("model")
    s.add_argument("--prompt", default="")
    s.add_argument("--tokens", type=int, default=80)
    i = sub.add_parser("inspect", parents=[common], help="print config, step and parameter table")
    i.add_argument("model")
    args = ap.parse_args(argv)

    state, header = load_tinygpt(args.model, _dtype(args.dtype), args.device)
    cfg = state.cfg
    if args.cmd == "eval":
        with open(args.text, "rb") as f:
            data = f.read()
        offsets = list(range(args.offset, len(data) - cfg.ctx, cfg.ctx))
        if args.windows > 0:
            offsets = offsets[:args.windows]
        if not offsets:
            sys.exit(f"text shorter than one window of {cfg.ctx + 1} bytes")
        losses = window_losses(state, data, offsets)
        print(f"loss {sum(losses) / len(losses):.7f} over {len(losses)} window(s) of {cfg.ctx + 1} bytes")
    elif args.cmd == "sample":
        out = generate(state, args.prompt.encode("utf-8"), args.tokens)
        sys.stdout.buffer.write(out + b"\n")
    else:
        print(f"config {cfg}  params {num_params(cfg)}  step {state.step}  "
              f"weightDtype {header.get('weightDtype', 'fp32')}  optimizer state {state.m is not None}")
        for s in param_table(cfg):
            p = state.params[s.name]
            print(f"  {s.name:32s} stored {list(s.shape)!s:12s} manifest {list(s.manifest_shape)!s:12s}"
                  f" decay {int(s.decay)}  rms {float(p.pow(2).mean().sqrt()):.5f}")


if __name__ == "__main__":
    main()
