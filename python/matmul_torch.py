"""PyTorch's own matrix products at the shapes of TinyGPT's training steps, for judging ours:
cuBLAS on the GPU (each product repeated in a CUDA graph, so that launch costs drop out) or
MKL on one CPU core (or --threads cores).

    python python/matmul_torch.py --device cuda
    python python/matmul_torch.py --device cpu          # one thread; pin it with taskset
    python python/matmul_torch.py --device cpu --threads 16
    python python/matmul_torch.py --device cuda --shapes 1536x576x192,4096x4096x4096

A shape MxNxK is C [M, N] with inner dimension K, timed in the three layouts of
backend.Layout: NN (A [M,K], B [K,N]), NT (B given as [N,K]) and TN (A given as [K,M]).
fp32 throughout (TF32 off). Prints one line per product: the best time per product over five
rounds and its GFLOP/s. Compare with `go test -bench MatMul ./backend/webgpu` and
`go test -bench MatMulVsPeak ./backend/cpu`.
"""

import argparse
import time

import needs  # noqa: F401  (stops with how to install PyTorch when it is missing)
import torch

# The training steps' products: the first twelve are BenchmarkMatMulVsPeak's (tiny to huge,
# forward, input gradient, weight gradient), then the large preset's q/k/v, up and down
# projections, and 4096³.
DEFAULT = ("512x144x48,512x48x192,48x192x512,1024x384x96,1024x96x384,96x384x1024,"
           "1536x768x192,1536x192x768,192x768x1536,2048x1024x256,2048x256x1024,256x256x2048,"
           "1536x576x192,4096x4096x4096")


def operands(M, N, K, layout, device):
    a = torch.randn(K, M, device=device) if layout == "TN" else torch.randn(M, K, device=device)
    b = torch.randn(N, K, device=device) if layout == "NT" else torch.randn(K, N, device=device)
    return (a.t() if layout == "TN" else a), (b.t() if layout == "NT" else b)


def time_cuda(A, B, C, reps):
    """Best time of one product, from five replays of a graph of reps products."""
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for _ in range(3):
            torch.mm(A, B, out=C)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(reps):
            torch.mm(A, B, out=C)
    g.replay()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        g.replay()
        end.record()
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3 / reps)
    return best


def time_cpu(A, B, C, reps):
    """Best time of one product over 30 windows of reps products."""
    best = float("inf")
    for _ in range(30):
        t = time.perf_counter()
        for _ in range(reps):
            torch.mm(A, B, out=C)
        best = min(best, (time.perf_counter() - t) / reps)
    return best


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--shapes", default=DEFAULT, help="comma-separated MxNxK")
    p.add_argument("--threads", type=int, default=1, help="CPU threads (default 1)")
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    if args.device == "cpu":
        if args.threads < 1:
            raise SystemExit("matmul_torch.py: --threads must be at least 1")
        torch.set_num_threads(args.threads)
    elif not torch.cuda.is_available():
        raise SystemExit("matmul_torch.py: no CUDA device (use --device cpu)")
    shapes = []
    for shape in args.shapes.split(","):
        try:
            M, N, K = (int(x) for x in shape.split("x"))
        except ValueError:
            raise SystemExit(f"matmul_torch.py: shape {shape!r} is not MxNxK (three integers)")
        shapes.append((M, N, K))
    for M, N, K in shapes:
        flops = 2 * M * N * K
        for layout in ("NN", "NT", "TN"):
            A, B = operands(M, N, K, layout, args.device)
            C = torch.empty(M, N, device=args.device)
            if args.device == "cuda":
                t = time_cuda(A, B, C, reps=20 if flops > 2e9 else 100)
            else:
                t = time_cpu(A, B, C, reps=max(1, int(1e8) // flops))
            print(f"{M}x{N}x{K}/{layout}  {t * 1e6:9.1f} µs  {flops / t / 1e9:9.1f} GFLOP/s")


if __name__ == "__main__":
    main()
