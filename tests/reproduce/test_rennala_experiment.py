"""The Rennala-NSGD reproduction end to end at a tiny size (the --quick run takes about three minutes)."""

import math

import numpy as np

from neurips26 import reproduce
from neurips26.reproduce import rennala_nsgd as exp_mod
from neurips26.reproduce import run_experiment

TINY = dict(n_workers=3, batch=3, linf_d=8, spec_n=3, seeds=[0], mlp_steps=25, synth_steps=40, dims=[4, 8],
            mats=[2, 3], lr_mult=(1.0, 4.0), workers_sweep=[2, 3, 4])


def test_rennala_experiment_contract_and_consistency(monkeypatch, tmp_path):
    monkeypatch.setitem(exp_mod.SIZES, True, TINY)
    exp = reproduce.get("rennala-nsgd")
    a = run_experiment(exp, tmp_path / "a", seed=1, quick=True)
    b = run_experiment(exp, tmp_path / "b", seed=1, quick=True)
    assert a["metrics"] == b["metrics"]
    m = a["metrics"]
    assert set(m["time_to_eps"]) == {"digits-mlp", "heavy-tail-linf", "heavy-tail-spectral"}
    # ℓ∞ is not offered on the matrix problem, nor spectral on the vector one.
    assert "rennala-nsgd-linf" not in m["time_to_eps"]["heavy-tail-spectral"]["linear"]
    assert "rennala-nsgd-spectral" not in m["time_to_eps"]["heavy-tail-linf"]["linear"]
    # The first claim is the median of the per-(problem, setting, norm) speed-ups it reports.
    speedups = list(m["speedup_vs_sync"].values())
    assert a["claims"][0]["ours"] == float(np.median(speedups)) or a["claims"][0]["ours"] == -1.0
    # t(B) column is the closed form for τ_i = i.
    assert m["workers_sweep"]["t_B"] == [exp_mod.equilibrium_time(np.arange(1, k + 1.0), 3) for k in (2, 3, 4)]
    for claim in a["claims"]:
        assert math.isfinite(claim["ours"]) and math.isfinite(claim["baseline"])
    for png in ("loss_vs_time.png", "time_vs_dimension.png"):
        assert (tmp_path / "a" / "rennala-nsgd" / png).exists()


def test_tuning_grid_extends_past_its_edge(monkeypatch):
    # A method whose best step size lies below the grid gets the grid extended downwards.
    calls = []

    def fake_run(problem, method, lr, *args):  # stands in for run_method
        calls.append(lr)
        return abs(math.log(lr / 0.01)) + 1.0, np.array([1.0]), np.array([1.0])  # best at lr = 0.01

    monkeypatch.setattr(exp_mod, "run_method", fake_run)
    make = lambda s: exp_mod.HeavyTailLinf(s, d=4)
    lr = exp_mod.tune_lr(make, "rennala-sgd", "linear", 2, 2, 10, 0.1, (0.25, 1.0, 4.0), seed=0, max_extend=3)
    # base 1.0; grid 0.25, 1, 4, then 1/16, 1/64 (best so far), then 1/256 (worse): stop.
    assert calls == [0.25, 1.0, 4.0, 0.0625, 0.015625, 0.00390625]
    assert lr == 0.015625
