"""Pairwise AUC loss benchmark: loss + gradient wall time of the exact sorted squared hinge
(neurips26.ranking, O(n log n)) against a chunked brute force over all pairs (O(n₊ n₋) time,
bounded memory) and LibAUC 2.0.1's PairwiseAUCLoss (it forms the n₊ × n₋ matrix), at
n = 10³ … 10⁶ scores with 10 % positives, float32, on this machine's threads."""

from __future__ import annotations

import argparse
import os
import platform
import time

import torch

from neurips26._atomic import atomic_write_text
from neurips26.ranking import pairwise_auc_loss
from _timing import best_of

SIZES = [10**3, 10**4, 10**5, 10**6]
BRUTE_MAX_PAIRS = 3e9  # beyond this the brute force is extrapolated from its per-pair time
LIBAUC_MAX_BYTES = 8 * 2**30  # LibAUC's pair matrix and its autograd temporaries: ~5 float32 n₊ × n₋ tensors


def data(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    s = torch.randn(n, generator=g)
    y = (torch.rand(n, generator=g) < 0.1).long()
    return s, y


def ours(s, y):
    x = s.clone().requires_grad_(True)
    pairwise_auc_loss(x, y).backward()


def brute(s, y, block=1 << 22):
    """Loss and gradient over all pairs, rows of positives at a time (no autograd graph)."""
    a, b = s[y == 1], s[y == 0]
    rows = max(1, block // b.numel())
    ga, gb, total = torch.empty_like(a), torch.zeros_like(b), torch.zeros(())
    for i in range(0, a.numel(), rows):
        h = torch.clamp(1.0 - (a[i:i + rows, None] - b[None, :]), min=0)
        total += (h * h).sum()
        ga[i:i + rows] = -2 * h.sum(1)
        gb += 2 * h.sum(0)
    return total, ga, gb


def libauc(s, y, loss):
    x = s.clone().requires_grad_(True)
    loss(x, y).backward()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="benchmarks/RESULTS_auc.md")
    args = p.parse_args()
    from libauc.losses import PairwiseAUCLoss

    lib_loss = PairwiseAUCLoss("squared_hinge", 1.0)
    rows = []
    for n in SIZES:
        s, y = data(n)
        pairs = int((y == 1).sum()) * int((y == 0).sum())
        t_ours = best_of(lambda: ours(s, y), repeats=3)
        if pairs <= BRUTE_MAX_PAIRS:
            t_brute = best_of(lambda: brute(s, y), repeats=1 if pairs > 1e8 else 3)
            brute_cell = f"{t_brute:.4g}"
        else:
            small = data(10**5)
            ps = int((small[1] == 1).sum()) * int((small[1] == 0).sum())
            t_brute = best_of(lambda: brute(*small), repeats=1) * pairs / ps
            brute_cell = f"~{t_brute:.4g} (extrapolated)"
        if pairs * 4 * 5 <= LIBAUC_MAX_BYTES:
            try:
                lib_cell = f"{best_of(lambda: libauc(s, y, lib_loss), repeats=1 if pairs > 1e7 else 3):.4g}"
            except (RuntimeError, MemoryError) as e:
                lib_cell = f"out of memory ({type(e).__name__})"
        else:
            lib_cell = f"not run: needs ~{pairs * 4 * 5 / 2**30:.0f} GiB for its pair matrices"
        rows.append((n, pairs, t_ours, brute_cell, t_brute / t_ours, lib_cell))
        print(rows[-1], flush=True)
    lines = [
        "# Pairwise AUC loss benchmark",
        "",
        f"`make bench` on {platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__} "
        f"({torch.get_num_threads()} threads), {time.strftime('%Y-%m-%d')}. Loss + gradient of the squared-hinge "
        "pairwise AUC loss (margin 1), float32 scores, 10 % positives; best of 3 (1 for the slow ones).",
        "",
        "| n | pairs | sorted, O(n log n) (s) | chunked brute force (s) | speed-up | LibAUC PairwiseAUCLoss (s) |",
        "|---|---|---|---|---|---|",
    ]
    lines += [f"| {n:.0e} | {pairs:.2e} | {t:.4g} | {b} | {r:.0f}x | {lib} |" for n, pairs, t, b, r, lib in rows]
    lines.append("")
    atomic_write_text(args.out, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
