"""Bench: PACE's solve time per instance against its budget B, next to the reference solvers at the
time that matches their gap (TSP-100: elkai / LKH-3 with 1..4 runs; CVRP-100: PyVRP (HGS) with
0.02..1 s; MIS on RB-[200-300]: CHILS with 0.02..1 s). Gaps are against elkai with 10 runs (TSP),
the best of PyVRP at 5 s and every run on the instance (CVRP) and the best of every solver run
on the graph (MIS). Under each table: the fastest reference setting whose mean gap is at most
PACE's at each budget. Uses the cached rankers (trained on first use, ~1-2 min each on 2 cores).
Usage: python benchmarks/bench_pace.py [--out benchmarks/RESULTS_pace.md] [--instances 8]"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import numpy as np
import torch

from neurips26.combinatorial.pace import (Budget, CVRPTask, MISTask, PaceSolver, TSPTask, rb_graph, uniform_cvrp,
                                          uniform_tsp)
from neurips26.combinatorial.pace.baselines import ChilsMIS, ElkaiTSP, PyVRPCVRP
from neurips26.combinatorial.pace.pretrained import pretrained_ranker

BUDGETS = (1, 4, 16, 64)


def _timed(f):
    t = time.perf_counter()
    r = f()
    return r, time.perf_counter() - t


def _matching(rows, ref_name: str) -> list[str]:
    """Per PACE budget: the fastest reference setting (rows not starting with "PACE") whose mean
    gap is at most PACE's, with both times; rows are (name, gap %, s / instance)."""
    pace = [r for r in rows if r[0].startswith("PACE")]
    base = sorted((r for r in rows if not r[0].startswith("PACE")), key=lambda r: r[2])
    out = []
    for name, gap, t in pace:
        hit = next((b for b in base if b[1] <= gap + 1e-12), None)
        budget = name.split(", ")[-1]
        out.append(f"- PACE {budget} ({gap:.3f} %, {t:.3f} s): " + (
            f"{ref_name} matches it with {hit[0].split(', ')[-1]} ({hit[1]:.3f} %, {hit[2]:.3f} s; PACE takes "
            f"{t / hit[2]:.1f}x its time)" if hit else f"no {ref_name} setting here is as bad"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(Path(__file__).with_name("RESULTS_pace.md")))
    ap.add_argument("--instances", type=int, default=8)
    args = ap.parse_args()
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    lines = [f"# PACE bench ({platform.processor() or platform.machine()}, 1 thread, {args.instances} instances)", ""]

    # --- TSP-100 ------------------------------------------------------------------------------
    ranker, _ = pretrained_ranker("tsp")
    task = TSPTask()
    insts = [task.instance(uniform_tsp(100, rng)) for _ in range(args.instances)]
    refs = [ElkaiTSP(runs=10).solve(i).cost for i in insts]
    rows = []
    for B in BUDGETS:
        solver = PaceSolver(task, ranker, temperature=1.0)
        res = [_timed(lambda i=i: solver.solve(i, Budget(8, B, 2), seed=0)) for i in insts]
        rows.append((f"PACE learned (T = 1), B = {B}",
                     np.mean([100 * (r.cost / f - 1) for (r, _), f in zip(res, refs)]), np.mean([t for _, t in res])))
    for runs in (1, 2, 4):
        res = [_timed(lambda i=i: ElkaiTSP(runs=runs).solve(i)) for i in insts]
        rows.append((f"elkai (LKH-3), runs = {runs}", np.mean([100 * (r.cost / f - 1) for (r, _), f in
                                                               zip(res, refs)]), np.mean([t for _, t in res])))
    lines += ["## TSP-100 (gap to elkai, 10 runs)", "", "| solver | gap % | s / instance |", "|---|---|---|"]
    lines += [f"| {n} | {g:.3f} | {t:.3f} |" for n, g, t in rows] + [""] + _matching(rows, "elkai") + [""]

    # --- CVRP-100 -----------------------------------------------------------------------------
    ranker, _ = pretrained_ranker("cvrp")
    task = CVRPTask()
    insts = [task.instance(uniform_cvrp(100, rng)) for _ in range(args.instances)]
    long = [PyVRPCVRP(time_s=5.0).solve(i, seed=1).cost for i in insts]
    runs = []
    for B in BUDGETS:
        solver = PaceSolver(task, ranker, temperature=1.0)
        res = [_timed(lambda i=i: solver.solve(i, Budget(8, B, 2), seed=0)) for i in insts]
        runs.append((f"PACE learned (T = 1), B = {B}", res))
    for s in (0.02, 0.05, 0.1, 0.2, 0.5, 1.0):
        res = [_timed(lambda i=i: PyVRPCVRP(time_s=s).solve(i, seed=1)) for i in insts]
        runs.append((f"PyVRP (HGS), {s} s", res))
    refs = np.min([long] + [[r.cost for r, _ in res] for _, res in runs], axis=0)
    rows = [(n, np.mean([100 * (r.cost / f - 1) for (r, _), f in zip(res, refs)]), np.mean([t for _, t in res]))
            for n, res in runs]
    lines += ["## CVRP-100 (gap to the best of PyVRP 5 s and every run)", "", "| solver | gap % | s / instance |",
              "|---|---|---|"]
    lines += [f"| {n} | {g:.3f} | {t:.3f} |" for n, g, t in rows] + [""] + _matching(rows, "PyVRP") + [""]

    # --- MIS RB-small -------------------------------------------------------------------------
    ranker, _ = pretrained_ranker("mis")
    task = MISTask()
    graphs = [rb_graph(rng, "small") for _ in range(args.instances)]
    rows = []
    for B in BUDGETS:
        solver = PaceSolver(task, ranker, temperature=1.0)
        res = [_timed(lambda g=g: solver.solve(g, Budget(8, B, 2), seed=0)) for g in graphs]
        rows.append((f"PACE learned (T = 1), B = {B}", [-r.cost for r, _ in res], np.mean([t for _, t in res])))
    for s in (0.02, 0.1, 1.0):
        res = [_timed(lambda g=g: ChilsMIS(time_s=s).solve(g, seed=1)) for g in graphs]
        rows.append((f"CHILS, {s} s", [-r.cost for r, _ in res], np.mean([t for _, t in res])))
    best = np.max([r[1] for r in rows], axis=0)
    lines += ["## MIS on RB-[200-300] (drop to the best of all runs)", "", "| solver | drop % | s / instance |",
              "|---|---|---|"]
    rows = [(n, float(np.mean(100 * (best - np.array(v)) / best)), t) for n, v, t in rows]
    lines += [f"| {n} | {g:.3f} | {t:.3f} |" for n, g, t in rows] + [""] + _matching(rows, "CHILS")
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
