"""The RLNS reproduction end to end at a tiny size (--quick takes about a minute)."""

import math

from neurips26 import reproduce
from neurips26.reproduce import rlns as exp_mod
from neurips26.reproduce import run_experiment

TINY = dict(vsp_tasks=8, vsp_train=3, vsp_test=2, vsp_epochs=1, vsp_chains=2, tv_samples=(200, 10, 2), ks_train=20, ks_test=10, gap_size=(3, 6), gap_train=6, gap_test=4, epochs=2,
            gap_epochs=1, scaling=((3, 6), (4, 8)), time_limit=5.0, gap_large=(3, 7), gap_large_train=3, gap_large_test=2, seeds=(0,), rlns_steps=2, chains=4, pfy_samples=2)


def test_rlns_experiment_contract(monkeypatch, tmp_path):
    monkeypatch.setitem(exp_mod.SIZES, True, TINY)
    out = run_experiment(reproduce.get("rlns"), tmp_path, seed=0, quick=True)
    m = out["metrics"]
    assert set(m["learning"]) == {"k-subset", "gap", "vsp"}
    for task in m["learning"].values():
        assert set(task) == set(exp_mod.METHODS)
        assert task["rlns-fy"]["global_solver_calls"] == 0
        assert task["two-stage"]["global_solver_calls"] == 0
    # PyEPO's loss calls the exact solver once per perturbation sample per instance and step
    ks = m["learning"]["k-subset"]["pfy-exact"]["global_solver_calls"]
    assert ks == TINY["epochs"] * TINY["ks_train"] * TINY["pfy_samples"]
    for check in m["exactness"].values():
        assert check["irreducible"] and check["stationarity_residual"] < 1e-12
    assert out["claims"][0]["holds"]
    for claim in out["claims"]:
        assert math.isfinite(claim["ours"]) and math.isfinite(claim["baseline"])
    # "learns as well" is paired over the test instances, non-inferiority within the stated tolerance
    as_well = [c for c in out["claims"] if "learns as well" in c["claim"]]
    assert len(as_well) == 3
    for c, task in zip(as_well, ("k-subset", "gap", "vsp")):
        run = m["learning_runs"][task][0]
        n_test = {"k-subset": TINY["ks_test"], "gap": TINY["gap_test"], "vsp": TINY["vsp_test"]}[task]
        assert c["ours_seeds"] == run["rlns-fy"]["regrets"] and len(c["ours_seeds"]) == n_test == c["n"]
        assert c["baseline_seeds"] == run["pfy-exact"]["regrets"]
        assert math.isclose(c["ours"], m["learning"][task]["rlns-fy"]["regret"], rel_tol=1e-9, abs_tol=1e-12)
        tol = max(0.1 * m["learning"][task]["pfy-exact"]["regret"], 0.005)
        assert math.isclose(c["margin"], -tol) and c["better"] == "lower"
        lo, hi = c["ci"]
        assert c["verdict"] == ("holds" if lo > -tol else "does not hold" if hi < -tol else "inconclusive")
    for png in ("regret.png", "scaling.png"):
        assert (tmp_path / "rlns" / png).exists()


def test_vsp_true_cost_propagates_delays_along_routes():
    import numpy as np

    inst = exp_mod.VspInstance(np.random.default_rng(1), n_tasks=6, scenarios=5)
    y = inst.optimal
    assert inst.problem.is_feasible(y[None])[0]
    # one vehicle per task: no propagation, cost = vehicles + depot travel + own delays
    solo = inst.problem.random_feasible(np.random.default_rng(0), 1)[0]
    assert abs(inst.true_cost(solo) - (6 * 110 + 6 * 10 + 2 * inst.delays.sum(1).mean())) < 1e-9
    # propagated delays only add cost: a route's true cost is at least its linear part's fixed share
    assert inst.true_cost(y) >= float(inst.travel[y.astype(bool)].sum()) + 2 * inst.delays.sum(1).mean() - 1e-9


def test_gap_instances_are_type_d_and_the_milp_is_optimal():
    import itertools

    import numpy as np

    inst = exp_mod.GapInstance(np.random.default_rng(0), 3, 5)
    assert np.all((inst.w >= 1) & (inst.w <= 100))
    assert np.allclose(inst.cap, np.floor(0.8 * inst.w.sum(1) / 3))
    y = inst.solve(inst.cost.reshape(-1))
    assert inst.problem.is_feasible(y[None])[0]
    # brute force over all 3^5 assignments
    best = min(sum(inst.cost[j, a[j]] for j in range(5)) for a in itertools.product(range(3), repeat=5)
               if np.all(inst.problem.loads(np.array(a)) <= inst.cap))
    assert abs(float(inst.cost.reshape(-1) @ y) - best) < 1e-6
