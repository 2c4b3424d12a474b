"""Context for PACE's neural arm (docs/pace.md, "Neural baselines"): how far POMO gets with ten times the
quick run's training steps, and a trivial constructor on the same instances.

On the quick run's TSP-50 instances (12; ATSP-50: 6; the same draws as ``neurips26 run pace --quick``, reference
the better of elkai with 5 runs and with 1 run): POMO trained at n = 20 for each of ``--steps`` (default 48, the
quick run's, and 480) steps of 32 instances (``pretrained_neural``, cached), and multi-start nearest neighbour
(from every city, the shortest of the n tours) on TSP-50 and ATSP-50. Needs the ``neural-co`` extra (rl4co).

Usage: python scripts/pace_neural_probe.py --out results/cpu/pace-neural-co-probe.json
Writes one JSON file through a temporary file and a rename.
"""

from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path

import numpy as np
import torch

from neurips26._atomic import atomic_write_text
from neurips26.combinatorial.pace import ATSPTask, TSPTask
from neurips26.combinatorial.pace.baselines import ElkaiATSP, ElkaiTSP
from neurips26.combinatorial.pace.neural import pretrained_neural
from neurips26.reproduce.pace import SIZES, EvalTask, _gap, _instance


def nearest_neighbour(D: np.ndarray) -> float:
    """The shortest of the n nearest-neighbour tours, one from each start city (D[i, j]: cost of i -> j)."""
    n = len(D)
    best = np.inf
    for start in range(n):
        tour, seen = [start], np.zeros(n, bool)
        seen[start] = True
        for _ in range(n - 1):
            row = np.where(seen, np.inf, D[tour[-1]])
            nxt = int(np.argmin(row))
            tour.append(nxt)
            seen[nxt] = True
        best = min(best, float(D[tour, np.roll(tour, -1)].sum()))
    return best


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--steps", type=int, nargs="+", default=[48, 480])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if any(s < 1 for s in args.steps):
        raise SystemExit(f"--steps must be >= 1, got {args.steps}")
    torch.set_num_threads(1)
    counts = {f: c for f, size, _, c in SIZES[True]["families"] if f in ("tsp", "atsp") and size == 50}
    insts, refs = {}, {}
    for fam, task, lkh in (("tsp", TSPTask(), ElkaiTSP), ("atsp", ATSPTask(), ElkaiATSP)):
        insts[fam] = [task.instance(_instance(EvalTask(fam, 50, i, (fam,), (), (), 0, 0, 0, 0, 0, 0, 0, args.seed)))
                      for i in range(counts[fam])]
        refs[fam] = [min(lkh(runs=5).solve(x).cost, lkh(runs=1).solve(x).cost) for x in insts[fam]]
    out = dict(settings=dict(seed=args.seed, instances=counts, train_n=20, batch=32, torch=torch.__version__,
                             machine=platform.processor() or platform.machine()), pomo={}, nearest_neighbour={})
    for steps in args.steps:
        solver, meta = pretrained_neural("tsp", 20, steps, 32, seed=args.seed)
        gaps = [_gap(solver.solve(x).cost, r) for x, r in zip(insts["tsp"], refs["tsp"])]
        out["pomo"][str(steps)] = dict(train_s=meta["train_s"], gap=float(np.mean(gaps)), gap_std=float(np.std(gaps)),
                                       gap_per_instance=gaps)
        print(f"POMO {steps} steps ({meta['train_s']:.0f} s): TSP-50 gap {np.mean(gaps):.2f} ± {np.std(gaps):.2f} %")
    for fam in ("tsp", "atsp"):
        gaps = [_gap(nearest_neighbour(x.D), r) for x, r in zip(insts[fam], refs[fam])]
        out["nearest_neighbour"][fam] = dict(gap=float(np.mean(gaps)), gap_std=float(np.std(gaps)),
                                             gap_per_instance=gaps)
        print(f"multi-start nearest neighbour, {fam.upper()}-50: gap {np.mean(gaps):.2f} ± {np.std(gaps):.2f} %")
    atomic_write_text(args.out, json.dumps(out, indent=1) + "\n")
    return out


if __name__ == "__main__":
    main()
