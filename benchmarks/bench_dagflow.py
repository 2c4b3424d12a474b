"""Cost of DAG-flow's exact regularization path against a grid of DAGMA fits (issue 33 §1).

One cell per (graph, d, seed): a linear SEM from the reproduction's generator
(``reproduce.dag_flow``: ER2 or SF2 graph, weights ±U(0.5, 2), standard normal noise, ``--n``
samples; one SEM per seed of ``--seeds``), and on it

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
Where a (graph, d) has several seeds, a second table gives the means over them and counts the
seeds on which the path's best SHD is lower, equal or higher than each grid's.

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
from neurips26.causal import DAGMA_S, DagFlow
from neurips26.reproduce.dag_flow import count_accuracy, run_grid, score_grid, simulate_dag, simulate_sem


PATHS = {"dagflow": ("DAG-flow path", {}), "dagflow_s": ("DAG-flow path, s = DAGMA_S", {"s": DAGMA_S})}


def measure(graph: str, d: int, n: int, seed: int, parts: list[str], cell: dict | None = None) -> dict:
    """The ``parts`` of one cell (``PATHS`` keys, ``grid<G>``) measured on its SEM, added to ``cell``
    (the cached entry, or a new one); the grids span the default path's λ range."""
    rng = np.random.default_rng(seed)
    B = simulate_dag(graph, d, rng)
    X, _ = simulate_sem(B, n, rng)
    cell = dict(cell or {"graph": graph, "d": d, "n": n, "seed": seed, "true_edges": int(B.sum())})
    grids = [int(p[4:]) for p in parts if p.startswith("grid")]
    with threadpool_limits(limits=1, user_api="blas"):
        # a grid spans the default path's λ range: that path is run first where the cell lacks it
        for name in [p for p in PATHS if p in parts or (p == "dagflow" and grids and "lambda1_range" not in cell)]:
            t = time.perf_counter()
            flow = DagFlow("dagma", **PATHS[name][1]).fit(X)
            wall = time.perf_counter() - t
            best = min((count_accuracy(B, A) for A in flow.candidate_graphs()), key=lambda r: r["shd"])
            cell[name] = {"wall_s": wall, "evaluations": int(sum(flow.n_evaluations_.values())),
                          "knots": int(sum(len(p.lambdas) for p in flow.paths_)),
                          "best_shd": best["shd"], "bic_shd": count_accuracy(B, flow.adjacency_)["shd"]}
            if name == "dagflow":
                cell["lambda1_range"] = list(flow.lambda1_range_)
        for G in grids:
            Ws, t_grid, e_grid = run_grid(X, np.geomspace(*cell["lambda1_range"], G))
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
             "| graph | d | n | seed | true edges | method | wall (s) | evaluations | best SHD | BIC SHD | path / grid wall "
             f"({', '.join(f'{G}-grid' for G in grids)}) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in cells:
        first = True
        for name, (label, _) in PATHS.items():
            f = c.get(name)
            if f is None:
                continue
            vs = ", ".join(f"{f['wall_s'] / c[f'grid{G}']['wall_s']:.2f}" for G in grids if f"grid{G}" in c)
            lead = f"| {c['graph']} | {c['d']} | {c['n']} | {c['seed']} | {c['true_edges']} |" if first else "| | | | | |"
            first = False
            lines.append(f"{lead} {label} ({f['knots']} knots) | {f['wall_s']:.1f} | {f['evaluations']:,} | "
                         f"{f['best_shd']} | {f['bic_shd']} | {vs} |")
        for G in grids:
            g = c.get(f"grid{G}")
            if g is None:
                continue
            lines.append(f"| | | | | | dagma, {G}-point grid | {g['wall_s']:.1f} | {g['evaluations']:,} | "
                         f"{g['best_shd']} | {g['bic_shd']} | |")
    lines += _over_seeds(cells, grids)
    if missing:
        lines += ["", "Not measured (requested, not in the cell cache): " + ", ".join(missing) + "."]
    return "\n".join(lines) + "\n"


def _over_seeds(cells: list[dict], grids: list[int]) -> list[str]:
    """Per (graph, d, n) measured on more than one seed: the means over the seeds, and how the
    path's best SHD compares with each grid's seed by seed (one seed's edge or two is noise)."""
    groups: dict[tuple, list[dict]] = {}
    for c in cells:
        groups.setdefault((c["graph"], c["d"], c["n"]), []).append(c)
    rows = []
    for (graph, d, n), cs in groups.items():
        for name, (label, _) in PATHS.items():
            for G in grids:
                both = [c for c in cs if f"grid{G}" in c and name in c]
                if len(both) < 2:
                    continue
                path = np.array([c[name]["best_shd"] for c in both])
                grid = np.array([c[f"grid{G}"]["best_shd"] for c in both])
                ratio = np.array([c[name]["wall_s"] / c[f"grid{G}"]["wall_s"] for c in both])
                seeds = ", ".join(str(c["seed"]) for c in both)
                rows.append(f"| {graph} | {d} | {n} | {label} | {G} | {seeds} | {path.mean():.1f} ± "
                            f"{path.std(ddof=1):.1f} | {grid.mean():.1f} ± {grid.std(ddof=1):.1f} | "
                            f"{(path < grid).sum()} / {(path == grid).sum()} / {(path > grid).sum()} | "
                            f"{ratio.mean():.2f} (max {ratio.max():.2f}) |")
    if not rows:
        return []
    return ["", "Over seeds (each seed its own SEM): best SHD mean ± sd, and the seeds where the path's best SHD is "
            "lower / equal / higher than the grid's.", "",
            "| graph | d | n | path | grid G | seeds | path best SHD | grid best SHD | path lower / equal / higher | "
            "path / grid wall, mean |", "|---|---|---|---|---|---|---|---|---|---|"] + rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10,20,50", help="comma-separated d values")
    ap.add_argument("--graphs", default="ER2,SF2")
    ap.add_argument("--grids", default="20", help="comma-separated grid sizes G (50 adds about 40 minutes at d <= 50)")
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--seeds", default="0", help="comma-separated seeds, one SEM each (the report adds means over them)")
    ap.add_argument("--s-schedule-sizes", default="10,20",
                    help="the d at which DagFlow(s=DAGMA_S) is measured too ('' for none; at d = 50 about 7 minutes on SF2)")
    ap.add_argument("--cells", default="benchmarks/dagflow_cells.json", help="cache of measured cells")
    ap.add_argument("--measure", action=argparse.BooleanOptionalAction, default=True,
                    help="--no-measure: only rewrite the report from the cached cells")
    ap.add_argument("--out", default="benchmarks/RESULTS_dagflow.md")
    args = ap.parse_args()
    sizes = [int(v) for v in args.sizes.split(",")]
    graphs = args.graphs.split(",")
    grids = [int(v) for v in args.grids.split(",")]
    seeds = [int(v) for v in args.seeds.split(",")]
    for g in graphs:
        if g not in ("ER2", "SF2"):
            raise SystemExit(f"--graphs: unknown graph {g!r} (ER2 or SF2)")
    path = Path(args.cells)
    cells = json.loads(path.read_text()) if path.exists() else []
    s_sizes = {int(v) for v in args.s_schedule_sizes.split(",") if v}
    key = lambda c: (c["graph"], c["d"], c["n"], c["seed"])  # noqa: E731
    cached = {key(c): c for c in cells}

    def parts(g, d, seed):
        want = ["dagflow"] + (["dagflow_s"] if d in s_sizes else []) + [f"grid{G}" for G in grids]
        return [p for p in want if p not in cached.get((g, d, args.n, seed), {})]

    todo = [(g, d, seed) for seed in seeds for d in sizes for g in graphs if parts(g, d, seed)]
    if args.measure:
        for g, d, seed in (bar := tqdm(todo, desc="cells", unit="cell")):
            bar.set_postfix_str(f"{g} d={d} seed {seed}")
            cell = measure(g, d, args.n, seed, parts(g, d, seed), cached.get((g, d, args.n, seed)))
            cached[key(cell)] = cell
            cells = sorted(cached.values(), key=lambda c: (c["d"], c["graph"], c["n"], c["seed"]))
            atomic_write_text(path, json.dumps(cells, indent=1))
            bar.write(f"{g} d={d} seed {seed}: " + ", ".join(
                f"{p} {cell[p]['wall_s']:.1f} s, SHD {cell[p]['best_shd']}/{cell[p]['bic_shd']}"
                for p in list(PATHS) + [f"grid{G}" for G in grids] if p in cell))
        todo = []
    missing = [f"{g} d={d} seed {seed}" for g, d, seed in todo]
    wanted = [c for c in cells if c["n"] == args.n and c["seed"] in seeds]
    atomic_write_text(args.out, report(wanted, missing, grids))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
