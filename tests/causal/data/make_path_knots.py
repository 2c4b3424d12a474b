"""Write path_knots_v1.json: the knots of the path code of commit f0201ff (before the chord
corrector) on small instances, the reference of test_path_reference.py. Run from the repository
root at that commit: python tests/causal/data/make_path_knots.py tests/causal/data/path_knots_v1.json"""
import json, sys
import numpy as np
from neurips26.reproduce.dag_flow import simulate_dag, simulate_sem
from neurips26.causal.objectives import DagmaObjective, NotearsObjective, GolemObjective
from neurips26.causal.path import follow_path
out = {}
cases = [("dagma-ER2-d8-mu1", "ER2", 8, 200, lambda X: DagmaObjective(X, mu=1.0)),
         ("dagma-ER2-d8-mu0.01", "ER2", 8, 200, lambda X: DagmaObjective(X, mu=0.01)),
         ("dagma-SF2-d10-mu0.1", "SF2", 10, 500, lambda X: DagmaObjective(X, mu=0.1)),
         ("notears-ER2-d5", "ER2", 5, 200, lambda X: NotearsObjective(X, rho=1.0)),
         ("golem-ER2-d5", "ER2", 5, 200, lambda X: GolemObjective(X, lambda2=5.0))]
for name, kind, d, n, make in cases:
    rng = np.random.default_rng(1)
    B = simulate_dag(kind, d, rng); X, _ = simulate_sem(B, n, rng)
    p = follow_path(make(X), lambda_min_ratio=1e-3, threshold=0.3)
    out[name] = {"graph": kind, "d": d, "n": n, "seed": 1,
                 "lambdas": p.lambdas.tolist(), "stopped": p.stopped,
                 "events": [[e.kind, float(e.lam), None if e.edge is None else list(e.edge)] for e in p.events],
                 "final_W": p.weights[-1].tolist()}
    print(name, len(p.lambdas), p.stopped, len(p.events), file=sys.stderr)
json.dump(out, open(sys.argv[1], "w"))
