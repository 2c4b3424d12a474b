"""The paretom3 reproduction end to end at a tiny size (the --quick run takes a few minutes)."""

import math

import numpy as np

from neurips26 import reproduce
from neurips26.reproduce import paretom3 as exp_mod
from neurips26.reproduce import run_experiment

TINY = dict(seeds=1, rays_b=3, rays_digits=2, budget_a=400, budget_b=120, budget_digits=40, n_train=200,
            n_test=100, cost_steps=2, problems=["zdt1", "fonseca-fleming"], nsga_pop=12, nsga_gen=5)


def test_paretom3_contract(monkeypatch, tmp_path):
    monkeypatch.setitem(exp_mod.SIZES, True, TINY)
    exp = reproduce.get("paretom3")
    a = run_experiment(exp, tmp_path / "a", seed=1, quick=True)
    m = a["metrics"]
    assert set(m["convex"]) == set(exp_mod.A_METHODS)
    for p in TINY["problems"]:
        for meth in exp_mod.B_METHODS + ("NSGA-II",):
            row = m["fronts"][p][meth]
            assert len(row["points_seed0"]) == TINY["rays_b"] and 0.0 <= row["hv"] <= 1.21
        assert 0.0 < m["fronts"][p]["front_hv"] <= 1.21
    for meth in exp_mod.DIGIT_METHODS:
        assert len(m["digits"][meth]) == TINY["rays_digits"]
        for row in m["digits"][meth]:
            assert all(0.0 <= acc <= 1.0 for acc in row["acc"]) and -1.0 <= row["alignment"] <= 1.0
    assert set(m["cost_s_per_iteration"]) == {"2", "5", "10"}
    claims = a["claims"]
    assert len(claims) == 7
    for c in claims:
        assert math.isfinite(c["ours"]) and math.isfinite(c["baseline"]) and c["holds"] in (True, False, None)
    # the verdicts are the stated rules applied to the recorded numbers
    pm = m["convex"]["ParetoM3"]
    assert claims[0]["ours"] == pm["dist"] and claims[0]["holds"] == (pm["dist"] <= 1e-2)
    assert claims[2]["ours"] == pm["merit"] and claims[2]["holds"] == (pm["merit"] <= 1e-3)
    r = m["cost_ratio_m10_over_m2"]["ParetoM3"]
    assert claims[-1]["ours"] == r and claims[-1]["holds"] == (r <= 1.5)
    out = tmp_path / "a" / "paretom3"
    for png in ("fronts.png", "digits_losses.png"):
        assert (out / png).exists()


def test_preferred_point_lies_on_the_ray_and_the_front():
    front = exp_mod._front("zdt1")
    for r in exp_mod._rays(5):
        q = exp_mod._preferred(front, r)
        # on the ray: r_1 F_1 = r_2 F_2
        assert abs(r[0] * q[0] - r[1] * q[1]) < 1e-3
        # on ZDT1's front F_2 = 1 - sqrt(F_1)
        assert abs(q[1] - (1 - np.sqrt(q[0]))) < 1e-3
