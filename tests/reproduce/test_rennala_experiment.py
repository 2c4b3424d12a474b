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


def _reference_tune(scores_of, mults, max_extend):
    """The tuner as it stood before it moved into _common.tune_on_grid (the baseline)."""
    ratio = mults[-1] / mults[-2] if len(mults) > 1 else 4.0
    scores, order = {}, []

    def score(m):
        if m not in scores:
            order.append(m)
            scores[m] = scores_of(m)
        return scores[m]

    for m in mults:
        score(m)
    for _ in range(max_extend):
        best = min(scores, key=scores.get)
        if best == max(scores):
            score(best * ratio)
        elif best == min(scores):
            score(best / ratio)
        else:
            break
    return min(scores, key=scores.get), order


def test_tune_lr_makes_the_choices_of_the_tuner_it_replaced(monkeypatch):
    rng = np.random.default_rng(0)
    for trial in range(200):
        mults = tuple(sorted(rng.choice([0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0], size=rng.integers(2, 6), replace=False)))
        # ties on the time (misses: inf) broken by the final criterion, then by the order tried
        optimum, misses = float(2.0 ** rng.integers(-8, 8)), rng.random() < 0.3
        landscape = lambda lr: ((math.inf if misses else round(abs(math.log2(lr / optimum)))),  # noqa: E731
                                float(rng.integers(0, 3)))
        memo = {}

        def outcome(lr):
            if lr not in memo:
                memo[lr] = landscape(lr)
            return memo[lr]

        calls = []

        def fake_run(problem, method, lr, *args):
            calls.append(lr)
            t, final = outcome(lr)
            return t, np.array([]), np.array([final])

        monkeypatch.setattr(exp_mod, "run_method", fake_run)
        max_extend = int(rng.integers(0, 4))
        lr = exp_mod.tune_lr(lambda s: exp_mod.HeavyTailLinf(s, d=4), "rennala-sgd", "linear", 2, 2, 10, 0.1, mults,
                             seed=0, max_extend=max_extend)
        ref_best, ref_order = _reference_tune(outcome, mults, max_extend)
        assert calls == ref_order and lr == ref_best  # base step size 1.0 for SGD on this problem
