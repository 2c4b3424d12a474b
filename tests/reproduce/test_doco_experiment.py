"""The D-OCO reproduction end to end at a tiny size (the --quick run takes about a minute)."""

import pytest

from neurips26 import reproduce
from neurips26.reproduce import doco_compressed_ftrl as exp_mod
from neurips26.reproduce import run_experiment


def test_doco_experiment_contract_and_determinism(monkeypatch, tmp_path):
    monkeypatch.setitem(exp_mod.SIZES, True, dict(n=6, d=10, d_bandit=3, T=64, graphs=["ring", "complete"]))
    exp = reproduce.get("doco-compressed-ftrl")
    a = run_experiment(exp, tmp_path / "a", seed=2, quick=True)
    b = run_experiment(exp, tmp_path / "b", seed=2, quick=True)
    assert a["metrics"] == b["metrics"]
    s = a["metrics"]["summary_full"]
    assert a["claims"][0]["ours"] == s["C-DFTRL top-k"]["regret"]
    assert a["claims"][0]["holds"] == (s["C-DFTRL top-k"]["regret"] <= 1.1 * s["C-DOGD top-k"]["regret"])
    # Bits are exact counts: T messages of top-k (k = 1 of d = 10) vs dense.
    assert s["C-DFTRL top-k"]["bits"] == 64 * (32 + 4)
    assert s["D-FTRL"]["bits"] == 64 * 32 * 10
    assert len(a["claims"]) == 7
    assert "D-FTRL accel. gossip (blocked)" in s
    for png in ("regret_vs_T.png", "regret_vs_bits.png", "bandit_regret_vs_T.png"):
        assert (tmp_path / "a" / "doco-compressed-ftrl" / png).exists()
