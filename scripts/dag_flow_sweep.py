"""A mid-size DAG-flow sweep between ``neurips26 run dag-flow --quick`` (one SEM) and the full
size (d up to 50, 3 seeds, 100-point grids: many hours on 2 cores): ER2 and SF2 SEMs at
d ∈ {10, 20} and n ∈ {200, 1000}, one seed, the dagma and NOTEARS grids at 20 λ, GOLEM at
4 λ × 10⁴ Adam steps, 3 bootstrap resamples. Each setting goes through the experiment's
own ``evaluate``; the results are rewritten (atomically) after every setting.

    python scripts/dag_flow_sweep.py [--out dag_flow_sweep.json] [--d 10 20] [--n 200 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from neurips26.reproduce import dag_flow as E


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="dag_flow_sweep.json")
    ap.add_argument("--graphs", nargs="+", default=["ER2", "SF2"])
    ap.add_argument("--d", type=int, nargs="+", default=[10, 20])
    ap.add_argument("--n", type=int, nargs="+", default=[200, 1000])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    cfg = dict(grids=(20,), bootstrap=3, bootstrap_grid=5, golem_grid=4, golem_iter=10_000)
    out = {}
    for g in args.graphs:
        for d in args.d:
            for n in args.n:
                name = f"{g} d={d} n={n}"
                rng = np.random.default_rng(args.seed)
                B = E.simulate_dag(g, d, rng)
                X, _ = E.simulate_sem(B, n, rng)
                t = time.perf_counter()
                r = E.evaluate(None, name, X, B, args.seed, cfg)
                r["total_s"] = time.perf_counter() - t
                out[name] = r
                tmp = args.out + ".tmp"
                with open(tmp, "w") as f:
                    json.dump(out, f, default=float, indent=1)
                os.replace(tmp, args.out)
                f_, gr, nt, go = r["dagflow"], r["grid20"], r["notears20"], r["golem4"]
                print(f"{name}: DAG-flow best SHD {f_['best']['shd']} (BIC {f_['bic']['shd']}) {f_['wall_s']:.1f} s | "
                      f"dagma 20 λ {gr['best']['shd']} {gr['wall_s']:.1f} s | NOTEARS {nt['best']['shd']} "
                      f"{nt['wall_s']:.1f} s | GOLEM {go['best']['shd']} {go['wall_s']:.1f} s | Jaccard "
                      f"{r['stability']['dagflow']:.2f} vs {r['stability']['grid5']:.2f}", flush=True)


if __name__ == "__main__":
    main()
