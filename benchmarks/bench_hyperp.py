"""Per-step cost of HyperballMuon (HyperP: Muon on the Frobenius sphere) against torch.optim.Muon
on a ~10M-parameter stack of transformer matrices.

Times ``optimizer.step()`` alone (gradients are fixed random tensors, so the backward pass does
not dilute the comparison), float32 parameters, the Newton–Schulz iteration in bfloat16 in both
(torch's default). The two optimizers' steps are interleaved in alternating order so that both
see the same load. Goal (issue 24): ≤ 1.1× torch's step. Writes a Markdown table to --out.
Usage: python benchmarks/bench_hyperp.py [--out benchmarks/RESULTS_hyperp.md] [--steps 20]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch

from neurips26._atomic import atomic_write_text
from neurips26.optim import HyperballMuon


def make_matrices(total: int = 10_000_000, width: int = 512, seed: int = 0) -> list[torch.nn.Parameter]:
    """Blocks of (4 w×w attention, w×4w and 4w×w MLP) matrices, as many as come closest to ``total``."""
    gen = torch.Generator().manual_seed(seed)
    block = [(width, width)] * 4 + [(4 * width, width), (width, 4 * width)]
    shapes = block * max(1, round(total / sum(a * b for a, b in block)))
    params = [torch.nn.Parameter(torch.randn(s, generator=gen) * 0.02) for s in shapes]
    for p in params:
        p.grad = torch.randn(p.shape, generator=gen) * 1e-3
    return params


def time_pair(a, b, steps: int, warmup: int = 2) -> tuple[float, float, float]:
    """Median step times of two optimizers and the median of their per-step ratios b/a."""
    for _ in range(warmup):
        a.step()
        b.step()
    ta, tb = [], []
    for k in range(steps):
        for opt, times in (((a, ta), (b, tb)) if k % 2 == 0 else ((b, tb), (a, ta))):
            t = time.perf_counter()
            opt.step()
            times.append(time.perf_counter() - t)
    return statistics.median(ta), statistics.median(tb), statistics.median(y / x for x, y in zip(ta, tb))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="benchmarks/RESULTS_hyperp.md")
    ap.add_argument("--params", type=int, default=10_000_000)
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    rows = []
    for name, kw in (("HyperballMuon (Frobenius sphere)", {}), ("HyperballMuon (sphere off)", {"sphere": False}),
                     ("HyperballMuon (column sphere)", {"norm": "column"})):
        ref_p = [torch.nn.Parameter(p.detach().to(device)) for p in make_matrices(args.params)]
        our_p = [torch.nn.Parameter(p.detach().clone()) for p in ref_p]
        for a, b in zip(ref_p, our_p):
            a.grad = torch.randn_like(a) * 1e-3
            b.grad = a.grad.clone()
        ref = torch.optim.Muon(ref_p, lr=0.02, weight_decay=0.1)
        ours = HyperballMuon(our_p, lr=0.02, weight_decay=0.1, **kw)
        t_ref, t_ours, ratio = time_pair(ref, ours, args.steps)
        rows.append((name, t_ref * 1e3, t_ours * 1e3, ratio))
        print(f"{name}: torch Muon {t_ref * 1e3:.1f} ms, ours {t_ours * 1e3:.1f} ms, ratio {ratio:.2f}", flush=True)
    n = sum(p.numel() for p in ref_p)
    lines = [
        "# HyperballMuon: per-step cost against torch.optim.Muon",
        "",
        f"Measured on {platform.machine()} ({device}), torch {torch.__version__} ({torch.get_num_threads()} threads), "
        f"{n / 1e6:.1f}M float32 parameters in {len(ref_p)} matrices; median of {args.steps} `step()` calls each "
        "after 2 warm-up steps, the two optimizers' steps interleaved in alternating order; the ratio is the "
        "median of the per-step ratios. Newton–Schulz in bfloat16 in both. Goal: ≤ 1.1× torch's step.",
        "",
        "| optimizer | torch.optim.Muon, ms | ours, ms | ratio (ours / torch) |",
        "|---|---|---|---|",
        *[f"| {name} | {a:.1f} | {b:.1f} | {r:.2f}× |" for name, a, b, r in rows],
        "",
    ]
    atomic_write_text(args.out, "\n".join(lines))


if __name__ == "__main__":
    main()
