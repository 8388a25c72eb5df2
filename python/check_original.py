#!/usr/bin/env python3
"""Checks reference.py against the files the ORIGINAL TinyGPT wrote.

DIR must hold expected.json, corpus.txt and {small,tiny}{,.fp16,.int4}.tinygpt
(shared/data/original/). For every file it compares the fixed-window losses
(tolerance 2e-5) and the 80-byte greedy continuation of "The ".

    python check_original.py ../../shared/data/original [--device cuda --dtype float32]
"""

import argparse
import json
import os
import sys

import needs  # noqa: F401  (stops with how to install PyTorch when it is missing)
import torch

import reference as ref


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    ap.add_argument("--tol", type=float, default=2e-5)
    args = ap.parse_args()
    dtype = {"float64": torch.float64, "float32": torch.float32}[args.dtype]

    with open(os.path.join(args.dir, "expected.json")) as f:
        exp = json.load(f)
    with open(os.path.join(args.dir, "corpus.txt"), "rb") as f:
        corpus = f.read()
    prompt = bytes(exp["greedy"]["prompt_bytes"])
    n_new = exp["greedy"]["max_new"]
    passed = failed = 0
    for name, m in exp["models"].items():
        for kind, fi in m["files"].items():
            st, _ = ref.load_tinygpt(os.path.join(args.dir, fi["file"]), dtype, args.device)
            for w in m["fixed_window_losses"]:
                got = ref.window_losses(st, corpus, [w["corpus_offset"]])[0]
                ok = abs(got - w[kind]) <= args.tol
                passed, failed = passed + ok, failed + (not ok)
                print(f"{'ok  ' if ok else 'FAIL'} {fi['file']:20s} window@{w['corpus_offset']:<5d} "
                      f"got {got:.7f} want {w[kind]:.7f} diff {abs(got - w[kind]):.1e}")
            want = bytes(m["greedy"]["from_files"][kind]["continuation_bytes"])
            got = ref.generate(st, prompt, n_new)
            ok = got == want
            passed, failed = passed + ok, failed + (not ok)
            print(f"{'ok  ' if ok else 'FAIL'} {fi['file']:20s} greedy {got.decode('latin-1')!r}")
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
