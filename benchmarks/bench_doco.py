"""D-OCO benchmark: wall time of one compressed D-FTRL run on 64 nodes, T = 10^4, and of
a batched tuning pass (15 step-size / gamma configurations in one vectorized run)."""

from __future__ import annotations

import argparse
import math
import os
import platform
import time

import numpy as np

from neurips26._atomic import atomic_write_text
from neurips26.online import Ball, CompressedDFTRL, CompressedDOGD, LeastSquaresLosses, TopK, gossip_matrix, run_doco


def problem(T, n, d, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((T, n, d)) / math.sqrt(d)
    b = A @ (0.5 * rng.standard_normal(d) / math.sqrt(d)) + 0.1 * rng.standard_normal((T, n))
    return LeastSquaresLosses(A, b)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="benchmarks/RESULTS_doco.md")
    args = p.parse_args()
    T, n, d = 10_000, 64, 20
    prob, net = problem(T, n, d), gossip_matrix("ring", n)
    rows = []
    for name, alg, fb in [
        ("C-DFTRL top-k, full information", CompressedDFTRL(0.01, Ball(1.0), TopK(2), gamma=0.5), "full"),
        ("C-DOGD top-k, full information", CompressedDOGD(0.01, Ball(1.0), TopK(2), gamma=0.5), "full"),
        ("C-DFTRL top-k, one-point bandit", CompressedDFTRL(0.001, Ball(1.0), TopK(2), gamma=0.5), "one-point"),
        ("C-DFTRL top-k, 15 configurations batched",
         CompressedDFTRL(np.repeat([0.0025, 0.005, 0.01, 0.02, 0.04], 3), Ball(1.0), TopK(2),
                         gamma=np.tile([0.2, 0.5, 1.0], 5)), "full"),
    ]:
        t = time.perf_counter()
        with np.errstate(all="ignore"):  # a tuning grid may hold diverging configurations
            run_doco(prob, net, alg, feedback=fb, delta=0.1, check_finite=False)
        rows.append((name, time.perf_counter() - t))
    lines = [
        "# D-OCO benchmark",
        "",
        f"`make bench` on {platform.machine()}, {os.cpu_count()} CPUs, numpy {np.__version__}, {time.strftime('%Y-%m-%d')}. "
        f"Online least squares, n = {n} nodes on a ring, d = {d}, T = {T}.",
        "",
        "| run | seconds |",
        "|---|---|",
    ] + [f"| {name} | {sec:.2f} |" for name, sec in rows] + [""]
    atomic_write_text(args.out, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
