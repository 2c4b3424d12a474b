"""The gpucb-stopping reproduction end to end at a tiny size, and its shipped HPO table."""

import math

import numpy as np
import pytest
from scipy import stats

pytest.importorskip("botorch")
from neurips26 import reproduce  # noqa: E402
from neurips26.reproduce import gpucb_stopping as exp_mod  # noqa: E402
from neurips26.reproduce import run_experiment  # noqa: E402

TINY = dict(gp_runs=6, gp_iters=60, synth=("branin",), synth_seeds=(0, 1), synth_iters=4, hpo_seeds=(0, 1),
            hpo_iters=4)


def test_gpucb_experiment_contract(monkeypatch, tmp_path):
    monkeypatch.setitem(exp_mod.SIZES, True, TINY)
    out = run_experiment(reproduce.get("gpucb-stopping"), tmp_path, seed=0, quick=True)
    s = out["metrics"]["summary"]
    assert set(s) == {"gp-prior", "branin", "hpo-svm"}
    for prob in s.values():
        for rule in exp_mod.RULES:
            v = prob[rule]
            assert 0 <= v["ci_low"] <= v["eps_optimal_fraction"] <= v["ci_high"] <= 1
            assert v["simple_regret"] >= -1e-9
        assert prob["fixed budget"]["stopped_fraction"] in (0.0, 1.0)
    # the paired comparison is a property of the bounds: it must hold on every run
    assert s["gp-prior"]["tight_no_later_fraction"] == 1.0
    stops = [c for c in out["claims"] if "stops no later" in c["claim"]]
    assert len(stops) == 3
    for claim in out["claims"]:
        assert math.isfinite(claim["ours"]) and math.isfinite(claim["baseline"])
    for claim in stops:
        p = claim["claim"].split(":")[0]
        runs = s[p]["eps-delta tight"]["runs"]
        assert claim["n"] + claim["n_capped"] == runs == len(claim["ours_seeds"])
        assert claim["ours"] == pytest.approx(s[p]["eps-delta tight"]["stop_iteration"])
        # runs where both rules ran into the budget are left out; with fewer than 2 left: not tested, never holding
        capped = [t == b == budget for t, b, budget in
                  zip(claim["ours_seeds"], claim["baseline_seeds"], [60 if p == "gp-prior" else 4] * runs)]
        assert claim["n_capped"] <= sum(capped)
        if claim["n"] < 2:
            assert claim["verdict"] == "not tested" and claim["holds"] is None
        else:
            keep = [i for i in range(runs) if not capped[i]] if claim["n_capped"] == sum(capped) else None
            if keep is not None and len(keep) == claim["n"]:
                d = [claim["baseline_seeds"][i] - claim["ours_seeds"][i] for i in keep]
                if len(set(d)) > 1:
                    ci = stats.ttest_1samp(d, 0.0).confidence_interval(0.95)
                    assert claim["ci"] == [pytest.approx(ci.low), pytest.approx(ci.high)]
            assert claim["verdict"] == ("holds" if claim["ci"][0] > 0 else "does not hold" if claim["ci"][1] < 0
                                        else "inconclusive")
    assert [c["verdict"] for c in stops if c["claim"].startswith(("branin", "hpo-svm"))] == ["not tested"] * 2
    # every claim is decided with its uncertainty; coverage from the Clopper-Pearson interval of the fraction
    assert all("verdict" in c for c in out["claims"])
    coverage = [c for c in out["claims"] if "eps-optimal" in c["claim"]]
    assert coverage, "the tiny run should stop at least once on the GP prior"
    for c in coverage:
        p = c["claim"].split(":")[0]
        v = s[p]["eps-delta tight"]
        assert c["method"] == "Clopper-Pearson" and c["n"] == v["runs"]
        assert c["ci"] == [pytest.approx(v["ci_low"] - 0.9), pytest.approx(v["ci_high"] - 0.9)]
        assert c["verdict"] == ("holds" if v["ci_low"] > 0.9 else "does not hold" if v["ci_high"] < 0.9
                                else "inconclusive")
    assert (tmp_path / "gpucb-stopping" / "stopping.png").exists()


def test_hpo_table_is_a_full_grid_of_accuracies():
    t = exp_mod.load_hpo_table()
    assert t.shape == (225, 4)
    assert len(np.unique(t[:, 0])) == 15 and len(np.unique(t[:, 1])) == 15
    assert np.all((t[:, 2] > 0) & (t[:, 2] <= 1)) and np.all(t[:, 3] >= 0)
    assert t[:, 2].max() > 0.97  # a tuned RBF SVM on digits is ~98-99 % accurate
    assert t[:, 2].min() < 0.5  # and the grid reaches badly tuned corners


def test_clopper_pearson_brackets_the_estimate():
    lo, hi = exp_mod.clopper_pearson(90, 100)
    assert lo < 0.9 < hi and math.isclose(lo, 0.8238, abs_tol=2e-3)
    assert exp_mod.clopper_pearson(0, 10)[0] == 0.0 and exp_mod.clopper_pearson(10, 10)[1] == 1.0
