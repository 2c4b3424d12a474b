"""Per-step cost of the quadruple optimizer against torch.optim on a 10M-parameter model.

Times ``optimizer.step()`` alone (gradients are fixed random tensors, so the backward pass
does not dilute the comparison) on a transformer-like stack of matrices and vectors with
~10M parameters, float32. Writes a Markdown table to --out.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch

from neurips26._atomic import atomic_write_text
from neurips26.optim import quadruple_adam, quadruple_adamw, quadruple_sgd


def make_params(total: int = 10_000_000, width: int = 512, seed: int = 0) -> list[torch.nn.Parameter]:
    """Blocks of (4 w×w attention, w×4w and 4w×w MLP, two norms of w), as many as come
    closest to ``total``."""
    gen = torch.Generator().manual_seed(seed)
    block = [(width, width)] * 4 + [(4 * width, width), (width, 4 * width), (width,), (width,)]
    per_block = sum(torch.Size(s).numel() for s in block)
    shapes = block * max(1, round(total / per_block))
    params = [torch.nn.Parameter(torch.randn(s, generator=gen) * 0.02) for s in shapes]
    for p in params:
        p.grad = torch.randn(p.shape, generator=gen) * 1e-3
    return params


def time_pair(a, b, steps: int, warmup: int = 3) -> tuple[float, float, float]:
    """Median step times of two optimizers and the median of their per-step ratios b/a,
    their steps interleaved (and the order alternated) so that both see the same load."""
    for _ in range(warmup):
        a.step()
        b.step()
    ta, tb = [], []
    for k in range(steps):
        pair = ((a, ta), (b, tb)) if k % 2 == 0 else ((b, tb), (a, ta))
        for opt, times in pair:
            t = time.perf_counter()
            opt.step()
            times.append(time.perf_counter() - t)
    return statistics.median(ta), statistics.median(tb), statistics.median(y / x for x, y in zip(ta, tb))


CASES = [
    ("AdamW", lambda p: torch.optim.AdamW(p, lr=1e-3, foreach=True), lambda p: quadruple_adamw(p, lr=1e-3)),
    ("AdamW (torch for-loop)", lambda p: torch.optim.AdamW(p, lr=1e-3, foreach=False), lambda p: quadruple_adamw(p, lr=1e-3)),
    ("Adam", lambda p: torch.optim.Adam(p, lr=1e-3, foreach=True), lambda p: quadruple_adam(p, lr=1e-3)),
    ("SGD momentum", lambda p: torch.optim.SGD(p, lr=1e-2, momentum=0.9, foreach=True),
     lambda p: quadruple_sgd(p, lr=1e-2, momentum=0.9)),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="benchmarks/RESULTS_quadruple.md")
    ap.add_argument("--params", type=int, default=10_000_000)
    ap.add_argument("--steps", type=int, default=100)
    args = ap.parse_args()
    params = make_params(args.params)
    n = sum(p.numel() for p in params)
    rows = []
    for name, torch_opt, ours in CASES:
        t_ref, t_ours, ratio = time_pair(torch_opt(params), ours(params), args.steps)
        rows.append((name, t_ref * 1e3, t_ours * 1e3, ratio))
        print(f"{name}: torch {t_ref * 1e3:.1f} ms, quadruple {t_ours * 1e3:.1f} ms, ratio {ratio:.2f}")
    lines = [
        "# Quadruple optimizer: per-step overhead",
        "",
        f"Measured by `make bench` on {platform.machine()}, torch {torch.__version__} "
        f"({torch.get_num_threads()} threads), {n / 1e6:.1f}M float32 parameters in {len(params)} tensors; "
        f"median of {args.steps} `step()` calls each after 3 warm-up steps, the two optimizers' steps interleaved in alternating order; the ratio is the median of the per-step ratios. Goal: ≤ 1.2× torch's foreach step. torch runs with foreach=True unless the row says otherwise.",
        "",
        "| optimizer | torch.optim, ms | QuadrupleOptimizer, ms | ratio (ours / torch) |",
        "|---|---|---|---|",
        *[f"| {name} | {a:.1f} | {b:.1f} | {r:.2f}× |" for name, a, b, r in rows],
        "",
    ]
    atomic_write_text(args.out, "\n".join(lines))


if __name__ == "__main__":
    main()
