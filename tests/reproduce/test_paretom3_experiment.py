"""The paretom3 reproduction end to end at a tiny size (the --quick run takes a few minutes)."""

import math

import numpy as np
import pytest
from scipy import stats

from neurips26 import reproduce
from neurips26.reproduce import paretom3 as exp_mod
from neurips26.reproduce import run_experiment

TINY = dict(seeds=2, rays_b=3, rays_digits=2, budget_a=400, budget_b=120, budget_digits=40, n_train=200,
            n_test=100, cost_steps=2, problems=["zdt1", "fonseca-fleming"], nsga_pop=12, nsga_gen=5,
            a_methods=("ParetoM3", "PNG", "LS"))


def _verdict(lo, hi, margin=0.0):
    return "holds" if lo > margin else "does not hold" if hi < margin else "inconclusive"


def test_paretom3_contract(monkeypatch, tmp_path):
    monkeypatch.setitem(exp_mod.SIZES, True, TINY)
    exp = reproduce.get("paretom3")
    a = run_experiment(exp, tmp_path / "a", seed=1, quick=True)
    m = a["metrics"]
    assert m["seeds"] == [1, 2]
    assert set(m["convex"]) == {"ParetoM3", "PNG", "LS"}  # the size's methods on (a)
    assert set(exp_mod.SIZES[False]["a_methods"]) == set(exp_mod.A_METHODS)
    for row in m["convex"].values():
        assert len(row["dist"]["seeds"]) == 2 and row["lr"] in exp_mod.LR_GRID
        assert row["dist"]["mean"] == pytest.approx(np.mean(row["dist"]["seeds"]))
    for p in TINY["problems"]:
        for meth in exp_mod.B_METHODS + ("NSGA-II",):
            row = m["fronts"][p][meth]
            assert len(row["points"]) == 2 and all(len(pts) == TINY["rays_b"] for pts in row["points"])
            assert len(row["dist_instances"]) == 2 * TINY["rays_b"]
            assert all(0.0 <= h <= 1.21 for h in row["hv"]["seeds"])
        assert 0.0 < m["fronts"][p]["front_hv"] <= 1.21
    for meth in exp_mod.DIGIT_METHODS:
        assert len(m["digits"][meth]) == TINY["rays_digits"]
        for row in m["digits"][meth]:
            assert all(0.0 <= acc <= 1.0 for acc in row["acc"]) and len(row["acc_seeds"]) == 2
            assert all(-1.0 <= al <= 1.0 for al in row["alignment"]["seeds"])
    assert set(m["cost_s_per_iteration"]) == {"2", "5", "10"}
    claims = a["claims"]
    assert len(claims) == 7
    for c in claims:  # every claim decided with its uncertainty
        assert c["verdict"] in ("holds", "does not hold", "inconclusive", "not tested")
        assert math.isfinite(c["ours"]) and math.isfinite(c["baseline"])
        lo, hi = c["ci"]
        assert lo <= c["diff"] <= hi and c["verdict"] == _verdict(lo, hi, c["margin"])
    # the thresholds, decided from the per-seed values over seeds (one-sample t)
    pm = m["convex"]["ParetoM3"]
    for c, values, threshold in ((claims[0], pm["dist"]["seeds"], 1e-2), (claims[2], pm["merit"]["seeds"], 1e-3),
                                 (claims[-1], m["cost_ratio_m10_over_m2"]["ParetoM3"]["seeds"], 1.5)):
        assert c["method"] == "one-sample t" and c["ours_seeds"] == values and c["baseline"] == threshold
        d = [threshold - v for v in values]
        if len(set(d)) > 1:
            ci = stats.ttest_1samp(d, 0.0).confidence_interval(0.95)
            assert c["ci"] == [pytest.approx(ci.low), pytest.approx(ci.high)]
    # (b) paired over problem x seed x ray instances against the other method with the smallest mean distance
    b = claims[1]
    inst = {meth: [d for p in TINY["problems"] for d in m["fronts"][p][meth]["dist_instances"]]
            for meth in exp_mod.B_METHODS + ("NSGA-II",)}
    best = min((k for k in inst if k != "ParetoM3"), key=lambda k: np.mean(inst[k]))
    assert f"best other: {best};" in b["claim"] and b["n"] == 2 * 2 * TINY["rays_b"]
    assert b["ours_seeds"] == inst["ParetoM3"] and b["baseline_seeds"] == inst[best]
    # digits: paired over ray x seed (x task for accuracy), non-inferiority within one point for accuracy
    assert claims[3]["n"] == claims[5]["n"] == 2 * TINY["rays_digits"]
    assert claims[4]["n"] == 2 * 2 * TINY["rays_digits"] and claims[4]["margin"] == -0.01
    out = tmp_path / "a" / "paretom3"
    for png in ("fronts.png", "digits_losses.png"):
        assert (out / png).exists()


def test_choose_lr_takes_the_smallest_tuning_distance_per_key():
    tasks = [exp_mod.ConvexTask(meth, 0, 10, lr) for meth in ("A", "B") for lr in exp_mod.LR_GRID]
    dists = [0.5, 0.1, 0.1, 0.2, 0.3, 0.05]
    lr = exp_mod._choose_lr(tasks, [{"dist": d} for d in dists], lambda t: t.method)
    assert lr == {"A": exp_mod.LR_GRID[1], "B": exp_mod.LR_GRID[2]}


def test_preferred_point_lies_on_the_ray_and_the_front():
    front = exp_mod._front("zdt1")
    for r in exp_mod._rays(5):
        q = exp_mod._preferred(front, r)
        # on the ray: r_1 F_1 = r_2 F_2
        assert abs(r[0] * q[0] - r[1] * q[1]) < 1e-3
        # on ZDT1's front F_2 = 1 - sqrt(F_1)
        assert abs(q[1] - (1 - np.sqrt(q[0]))) < 1e-3
