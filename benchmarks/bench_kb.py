"""Time to propose a batch of Q = 8 on Hartmann-6 with n = 200 observations: randomized
kriging believer (analytic UCB, one rank-one update per pick, no refit) against BoTorch's
qLogNoisyExpectedImprovement optimized jointly with ``optimize_acqf``. Both use the same
fitted SingleTaskGP and the same optimizer budget (num_restarts, raw_samples). Best of 3
after a warm-up. Writes a Markdown table to --out.
"""

from __future__ import annotations

import argparse
import platform

import torch
from botorch.acquisition import UpperConfidenceBound
from botorch.test_functions import Hartmann

from neurips26._atomic import atomic_write_text
from neurips26.bayesopt import KrigingBeliever, QLogNEI, SearchSpace, fit_gp

from _timing import best_of


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="benchmarks/RESULTS_kb.md")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--q", type=int, default=8)
    ap.add_argument("--num-restarts", type=int, default=10)
    ap.add_argument("--raw-samples", type=int, default=512)
    args = ap.parse_args()
    f = Hartmann(dim=6, negate=True)
    gen = torch.Generator().manual_seed(0)
    X = torch.rand(args.n, 6, generator=gen, dtype=torch.float64)
    Y = f(X) + 0.01 * torch.randn(args.n, generator=gen, dtype=torch.float64)
    bounds = torch.stack([torch.zeros(6), torch.ones(6)]).double()
    model = fit_gp(X, Y, bounds)
    space = SearchSpace(bounds, num_restarts=args.num_restarts, raw_samples=args.raw_samples)
    kb = KrigingBeliever(lambda m: UpperConfidenceBound(m, beta=4.0), space, fantasy="y")
    nei = QLogNEI(space)
    t_kb = best_of(lambda: kb.propose(model, q=args.q))
    t_nei = best_of(lambda: nei.propose(model, q=args.q))
    print(f"randomized KB: {t_kb:.2f} s, qLogNEI: {t_nei:.2f} s, speed-up {t_nei / t_kb:.1f}x")
    lines = ["# Proposing a batch: randomized kriging believer vs qLogNEI", "",
             f"Measured by `make bench` on {platform.machine()}, torch {torch.__version__} ({torch.get_num_threads()} "
             f"threads); Hartmann-6, n = {args.n} observations, Q = {args.q}, optimize_acqf with "
             f"num_restarts = {args.num_restarts}, raw_samples = {args.raw_samples}; best of 3 after a warm-up.", "",
             "| method | seconds per batch |", "|---|---|",
             f"| randomized KB (UCB, rank-one updates) | {t_kb:.2f} |",
             f"| qLogNEI (BoTorch, joint q = {args.q}) | {t_nei:.2f} |", "",
             f"Speed-up: **{t_nei / t_kb:.1f}×** (goal: at least 10×).", ""]
    atomic_write_text(args.out, "\n".join(lines))


if __name__ == "__main__":
    main()
