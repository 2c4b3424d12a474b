"""Cost of DAG-flow's exact regularization path against a grid of DAGMA fits (issue 33 §1).

One cell per (graph, d): a linear SEM from the reproduction's generator (``reproduce.dag_flow``:
ER2 or SF2 graph, weights ±U(0.5, 2), standard normal noise, ``--n`` samples, ``--seed``), and on it

* DAG-flow: ``DagFlow("dagma").fit(X)`` with its defaults (DAGMA's central path μ = 1 … 1e-4:
  the λ-path of μ = 1e-4 anchored at 12 λ on DAGMA's own μ-continuation, λ down to
  1e-4·λ_max, threshold 0.3, BIC selection);
* the ``dagma`` package's ``DagmaLinear("l2").fit(X, lambda1=λ)`` (its own defaults) at each λ
  of a geometric grid of G points over the path's λ range in DAGMA's λ₁ units (G in ``--grids``).

Reported per method: wall time (one BLAS thread, run alone), derivative evaluations (for
DAG-flow its gradients, Hessian-vector products and support Hessians; for dagma one gradient
per Adam iteration), the best SHD among its graphs and the SHD of its BIC-selected graph
(against the true DAG), and the path's wall time as a fraction of each grid's. Stability over
bootstrap resamples is the reproduction's (``neurips26 run dag-flow``), not re-measured here.

Cells are cached in ``--cells`` (JSON, one entry per measured cell, written atomically after
each), so a long sweep can be stopped and resumed; the report lists every cached cell and
names the requested cells that are not measured. Writes Markdown to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits
from tqdm import tqdm

from neurips26._atomic import atomic_write_text
from neurips26.causal import DagFlow
from neurips26.reproduce.dag_flow import count_accuracy, run_grid, score_grid, simulate_dag, simulate_sem


def measure(graph: str, d: int, n: int, seed: int, grids: list[int]) -> dict:
    rng = np.random.default_rng(seed)
    B = simulate_dag(graph, d, rng)
    X, _ = simulate_sem(B, n, rng)
    with threadpool_limits(limits=1, user_api="blas"):
        t = time.perf_counter()
        flow = DagFlow("dagma").fit(X)
        wall = time.perf_counter() - t
        best = min((count_accuracy(B, A) for A in flow.candidate_graphs()), key=lambda r: r["shd"])
        cell = {"graph": graph, "d": d, "n": n, "seed": seed, "true_edges": int(B.sum()),
                "dagflow": {"wall_s": wall, "evaluations": int(sum(flow.n_evaluations_.values())),
                            "knots": int(sum(len(p.lambdas) for p in flow.paths_)),
                            "best_shd": best["shd"], "bic_shd": count_accuracy(B, flow.adjacency_)["shd"]}}
        lam_hi, lam_lo = flow.lambda1_range_
        for G in grids:
            Ws, t_grid, e_grid = run_grid(X, np.geomspace(lam_hi, lam_lo, G))
            s = score_grid(X, B, Ws)
            cell[f"grid{G}"] = {"wall_s": t_grid, "evaluations": int(e_grid), "best_shd": s["best"]["shd"],
                                "bic_shd": s["bic"]["shd"]}
    return cell


def report(cells: list[dict], missing: list[str], grids: list[int]) -> str:
    lines = ["# DAG-flow's path against dagma grids", "",
             f"`python benchmarks/bench_dagflow.py` on {platform.processor() or platform.machine()}, "
             f"{platform.system()}, one BLAS thread per method, one method at a time. "
             "DAG-flow: `DagFlow(\"dagma\").fit(X)` with its defaults (the anchored central path, BIC). "
             "Grid: `dagma.linear.DagmaLinear(\"l2\").fit(X, lambda1=λ)` at G geometric λ over the path's "
             "range (DAGMA's λ₁ units). SHD against the true DAG: best among the method's graphs / of its BIC choice.", "",
             "| graph | d | n | true edges | method | wall (s) | evaluations | best SHD | BIC SHD | path / grid wall |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for c in cells:
        f = c["dagflow"]
        lines.append(f"| {c['graph']} | {c['d']} | {c['n']} | {c['true_edges']} | DAG-flow path "
                     f"({f['knots']} knots) | {f['wall_s']:.1f} | {f['evaluations']:,} | {f['best_shd']} | "
                     f"{f['bic_shd']} | |")
        for G in grids:
            g = c.get(f"grid{G}")
            if g is None:
                continue
            lines.append(f"| | | | | dagma, {G}-point grid | {g['wall_s']:.1f} | {g['evaluations']:,} | "
                         f"{g['best_shd']} | {g['bic_shd']} | {f['wall_s'] / g['wall_s']:.2f} |")
    if missing:
        lines += ["", "Not measured (requested, not in the cell cache): " + ", ".join(missing) + "."]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10,20,50", help="comma-separated d values")
    ap.add_argument("--graphs", default="ER2,SF2")
    ap.add_argument("--grids", default="20", help="comma-separated grid sizes G (50 adds about 40 minutes at d <= 50)")
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cells", default="benchmarks/dagflow_cells.json", help="cache of measured cells")
    ap.add_argument("--measure", action=argparse.BooleanOptionalAction, default=True,
                    help="--no-measure: only rewrite the report from the cached cells")
    ap.add_argument("--out", default="benchmarks/RESULTS_dagflow.md")
    args = ap.parse_args()
    sizes = [int(v) for v in args.sizes.split(",")]
    graphs = args.graphs.split(",")
    grids = [int(v) for v in args.grids.split(",")]
    for g in graphs:
        if g not in ("ER2", "SF2"):
            raise SystemExit(f"--graphs: unknown graph {g!r} (ER2 or SF2)")
    path = Path(args.cells)
    cells = json.loads(path.read_text()) if path.exists() else []
    key = lambda c: (c["graph"], c["d"], c["n"], c["seed"])  # noqa: E731
    todo = [(g, d) for d in sizes for g in graphs
            if not any(key(c) == (g, d, args.n, args.seed) and all(f"grid{G}" in c for G in grids) for c in cells)]
    if args.measure:
        for g, d in (bar := tqdm(todo, desc="cells", unit="cell")):
            bar.set_postfix_str(f"{g} d={d}")
            cell = measure(g, d, args.n, args.seed, grids)
            cells = [c for c in cells if key(c) != key(cell)] + [cell]
            cells.sort(key=lambda c: (c["d"], c["graph"], c["n"], c["seed"]))
            atomic_write_text(path, json.dumps(cells, indent=1))
            f = cell["dagflow"]
            bar.write(f"{g} d={d}: path {f['wall_s']:.1f} s, SHD {f['best_shd']}/{f['bic_shd']}; "
                      + ", ".join(f"grid{G} {cell[f'grid{G}']['wall_s']:.1f} s" for G in grids))
        todo = []
    missing = [f"{g} d={d}" for g, d in todo]
    wanted = [c for c in cells if c["n"] == args.n and c["seed"] == args.seed]
    atomic_write_text(args.out, report(wanted, missing, grids))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
