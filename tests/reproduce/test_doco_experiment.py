"""The D-OCO reproduction end to end at a tiny size (the --quick run takes about a minute)."""

import math

import numpy as np
import pytest

from neurips26 import reproduce
from neurips26.reproduce import doco_compressed_ftrl as exp_mod
from neurips26.reproduce import run_experiment


def test_doco_experiment_contract_and_determinism(monkeypatch, tmp_path):
    monkeypatch.setitem(exp_mod.SIZES, True, dict(n=6, d=10, d_bandit=3, T=64, graphs=["ring", "complete"], seeds=2))
    exp = reproduce.get("doco-compressed-ftrl")
    a = run_experiment(exp, tmp_path / "a", seed=2, quick=True)
    b = run_experiment(exp, tmp_path / "b", seed=2, quick=True)
    assert a["metrics"] == b["metrics"]
    assert a["config"]["run_seeds"] == [2, 3]
    m, s = a["metrics"], a["metrics"]["summary_full"]
    # per instance: one value per seed; the summary is their mean over problems, graphs and seeds
    ours = [x for p in exp_mod.PROBLEMS for g in ("complete", "ring") for x in m[f"full/{p}/{g}/C-DFTRL top-k"]["regret"]]
    base = [x for p in exp_mod.PROBLEMS for g in ("complete", "ring") for x in m[f"full/{p}/{g}/C-DOGD top-k"]["regret"]]
    assert len(ours) == 3 * 2 * 2
    assert s["C-DFTRL top-k"]["regret"] == pytest.approx(np.mean(ours))
    assert len(s["C-DFTRL top-k"]["regret_per_seed"]) == 2
    assert len(a["claims"]) == 7
    for c in a["claims"]:  # every claim decided with its interval
        assert c["verdict"] in ("holds", "does not hold", "inconclusive", "not tested")
        assert c["ci"][0] <= c["diff"] <= c["ci"][1]
    first = a["claims"][0]
    assert first["ours"] == pytest.approx(np.mean(ours)) and first["baseline"] == pytest.approx(np.mean(base))
    assert first["n"] == 12 and first["method"] == "paired t over log regret ratios"
    assert first["margin"] == pytest.approx(-math.log(1.1))
    assert first["diff"] == pytest.approx(np.mean(np.log(base) - np.log(ours)))
    lo, hi = first["ci"]
    assert first["verdict"] == ("holds" if lo > -math.log(1.1) else "does not hold" if hi < -math.log(1.1)
                                else "inconclusive")
    slope = a["claims"][2]
    assert slope["method"] == "one-sample t" and slope["baseline"] == 0.6 and slope["n"] == 12
    # Bits are exact counts: T messages of top-k (k = 1 of d = 10) vs dense.
    assert s["C-DFTRL top-k"]["bits"] == 64 * (32 + 4)
    assert s["D-FTRL"]["bits"] == 64 * 32 * 10
    assert "D-FTRL accel. gossip (blocked)" in s
    for png in ("regret_vs_T.png", "regret_vs_bits.png", "bandit_regret_vs_T.png"):
        assert (tmp_path / "a" / "doco-compressed-ftrl" / png).exists()
