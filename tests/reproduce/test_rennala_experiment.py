"""The Rennala-NSGD reproduction end to end at a tiny size (the --quick run takes about three minutes)."""

import math

import numpy as np

from neurips26 import reproduce
from neurips26.reproduce import rennala_nsgd as exp_mod
from neurips26.reproduce import run_experiment

TINY = dict(n_workers=3, batch=3, linf_d=8, spec_n=3, seeds=3, mlp_steps=25, synth_steps=40, dims=[4, 8],
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
    assert m["time_to_eps_seeds"]["digits-mlp"]["linear"]["async-sgd"].__len__() == 3  # one value per test seed
    # Every claim is decided over the seeds, with its interval (or not tested, with its reason).
    assert len(a["claims"]) == 10
    for claim in a["claims"]:
        assert claim["verdict"] in ("holds", "does not hold", "inconclusive", "not tested")
        assert math.isfinite(claim["ours"]) and math.isfinite(claim["baseline"])
        if claim["verdict"] != "not tested":
            lo, hi = claim["ci"]
            assert lo <= claim["diff"] <= hi
    # The first claim is the per-seed median of the per-(problem, setting, norm) speed-ups it reports,
    # against 1.
    first = a["claims"][0]
    assert first["baseline"] == 1.0 and first["method"] == "one-sample t"
    per_seed = list(zip(*m["speedup_vs_sync"].values()))
    medians = [float(np.median([v for v in row if v != -1.0])) for row in per_seed]
    assert first["ours_seeds"] == medians
    # The best-vs-best claims pair the seeds reported under best_vs_best_baseline.
    for key, b in m["best_vs_best_baseline"].items():
        pname, setting = key.split("/")
        (c,) = [c for c in a["claims"] if c["claim"].startswith(f"{pname}, τ {setting}:")]
        assert c["ours_seeds"] == b["rennala_nsgd_seeds"] and c["baseline_seeds"] == b["best_baseline_seeds"]
    # t(B) column is the closed form for τ_i = i.
    assert m["workers_sweep"]["t_B"] == [exp_mod.equilibrium_time(np.arange(1, k + 1.0), 3) for k in (2, 3, 4)]
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


def _r(t, end):
    return {"t": t, "end": end, "times": [], "curve": []}


def test_censored_times_count_a_miss_at_its_end_and_a_divergence_at_the_latest_end():
    runs = [_r(5.0, 5.0), _r(None, 9.0), _r(None, None), _r(None, 12.0)]
    assert exp_mod._censored(runs) == [5.0, 9.0, 12.0, 12.0]


def test_summary_speedups_and_capped_pairs():
    # two seeds; heavy-tail-linf only, one speed setting, one norm pair plus the baselines
    runs = {"heavy-tail-linf": {"linear": {
        "sync-nsgd-linf": [_r(20.0, 20.0), _r(None, 30.0)],
        "async-sgd": [_r(8.0, 8.0), _r(None, 25.0)],
        "rennala-nsgd-linf": [_r(10.0, 10.0), _r(None, 40.0)]}}}
    cfg = dict(dims=[4, 8], mats=[2, 3])
    dimension = {(p, m): [[_r(1.0 * d, 1.0 * d), _r(2.0 * d, 2.0 * d)] for d in dims]
                 for p, dims, ms in exp_mod._dimension_sweeps(cfg) for m in ms}
    workers = [{"n": n, "rennala": [_r(float(n), 1.0), _r(float(n), 1.0)], "sync": [_r(1.0, 1.0)] * 2,
                "t_B": float(n), "per_step": 1.0} for n in (2, 3, 4)]
    raw = {"runs": runs, "seeds": [0, 1], "workers": workers, "dimension": dimension, "lrs": {}}
    s = exp_mod.summarize(raw, cfg)
    # seed 0: 20 / 10 = 2; seed 1: neither reached, left out (NaN), so no median on that seed
    assert s["speedups"][0][3][0] == 2.0 and math.isnan(s["speedups"][0][3][1])
    assert s["median_speedup"][0] == 2.0 and math.isnan(s["median_speedup"][1])
    b = s["best"]["heavy-tail-linf/linear"]
    assert b["ours_method"] == "rennala-nsgd-linf" and b["baseline_method"] == "async-sgd"
    assert b["ours"] == [10.0, 40.0] and b["baseline"] == [8.0, 25.0]  # misses at their end times
    assert b["ours_reached"] == [True, False] and b["baseline_reached"] == [True, False]
    assert s["corr"] == [1.0, 1.0]  # time to ε = t(B) exactly
    # time ∝ d on the vector problem (slope 1), ∝ n = sqrt(parameters) on the matrix one (slope 1/2)
    assert np.allclose(s["slopes"]["heavy-tail-linf/rennala-nsgd-linf"], [1.0, 1.0])
    assert np.allclose(s["slopes"]["heavy-tail-spectral/rennala-sgd"], [0.5, 0.5])
