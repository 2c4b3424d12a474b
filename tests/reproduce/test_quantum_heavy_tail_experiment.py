"""The quantum-heavy-tail reproduction end to end at a tiny size (the --quick run takes a few minutes)."""

import math

import numpy as np
import pytest

from neurips26 import reproduce
from neurips26.reproduce import quantum_heavy_tail as exp_mod
from neurips26.reproduce import run_experiment


def test_quantum_heavy_tail_contract_and_determinism(monkeypatch, tmp_path):
    monkeypatch.setitem(exp_mod.SIZES, True, dict(
        ps=[2.0], ds=[1], seeds=3, K=2**10, K_opt=2**8, n_quantum=[10**5, 10**6, 10**7, 10**8],
        n_classical=[10**3, 10**4, 10**5, 10**6], eps=[0.3, 0.25, 0.2, 0.15], opt_d=2, d_sweep=[1, 2],
        d_sweep_eps=0.2, opt_seeds=2, boot=20, cross_n=[10**9, 10**10], cross_d=[1, 16, 256], cross_seeds=3,
        cross_K=256, cvx_eps=[0.4, 0.3, 0.2, 0.15], cvx_d=2, cvx_seeds=2, K_cvx=2**8,
        cvx_logistic=True))  # the full size's logistic-regression convex sweep, at a tiny size
    exp = reproduce.get("quantum-heavy-tail")
    a = run_experiment(exp, tmp_path / "a", seed=1, quick=True)
    b = run_experiment(exp, tmp_path / "b", seed=1, quick=True)
    assert a["metrics"] == b["metrics"]
    m = a["metrics"]
    q = m["mean/p2.0/d1/quantum"]
    assert q["predicted"] == -1.0 and q["ci"][0] <= q["slope"] <= q["ci"][1]
    # the claim is decided from the slope's bootstrap interval: within the band +- tol around the prediction
    c = a["claims"][0]
    assert c["ours"] == q["slope"] and c["baseline"] == -1.0 and c["n"] == 3
    lo, hi = min(q["ci"][0], q["slope"]), max(q["ci"][1], q["slope"])
    tol = exp_mod.TOL_MEAN
    assert c["ci"][0] == pytest.approx(tol - max(abs(lo + 1.0), abs(hi + 1.0)))
    assert c["verdict"] == ("holds" if -1 - tol < lo and hi < -1 + tol else
                            "does not hold" if hi < -1 - tol or lo > -1 + tol else "inconclusive")
    for cl in a["claims"]:  # every claim decided with its interval, unless not run or capped (then said so)
        if "verdict" in cl:
            assert cl["ci"][0] <= cl["diff"] <= cl["ci"][1] and cl["method"].startswith("seed bootstrap")
            assert cl["verdict"] == ("holds" if cl["ci"][0] > 0 else "does not hold" if cl["ci"][1] < 0
                                     else "inconclusive")
        else:
            assert cl["holds"] is None and "not tested" in cl["claim"]
    assert sum("verdict" in cl for cl in a["claims"]) >= 3 + 4
    assert m["statevector_spot_check_tv"] < 1e-10
    assert m["qiskit_cross_check_tv"] < 1e-10
    assert m["multivariate_pe_fft_check_tv"] < 1e-10
    opt = m["opt/p2.0/d2/qnsgd"]
    assert opt["predicted"] == 3.0 and math.isfinite(opt["slope"])
    cr = m["cross/n1e+10"]
    assert len(cr["ratio"]) == 3 and all(r > 0 for r in cr["ratio"])
    assert (cr["d_star"] == "not on the grid") == (exp_mod.crossover([1, 16, 256], cr["ratio"]) is None)
    cross_claim = next(cl for cl in a["claims"] if cl["claim"].startswith("High-dimensional regime: the multivariate"))
    assert cross_claim["holds"] in (True, False, None)
    # convex sweep: at p = 2 both predictions are 2, so the claim made is the tie (gap within +- TOL_OPT of 0)
    cq, cc = m["convex/p2.0/d2/qpsgd"], m["convex/p2.0/d2/psgd"]
    assert cq["predicted"] == cc["predicted"] == 2.0 and len(cq["median_queries"]) == 4
    tie = [cl for cl in a["claims"] if cl["claim"].startswith("Convex, p = 2.0")]
    assert len(tie) == 1 and "no ε-speedup is predicted" in tie[0]["claim"]
    if "verdict" in tie[0]:
        assert tie[0]["ours"] == cq["slope"] and tie[0]["baseline"] == cc["slope"]
        assert tie[0]["diff"] == pytest.approx(exp_mod.TOL_OPT - abs(cq["slope"] - cc["slope"]))
    assert not any("Convex" in cl["claim"] and "not tested in this run" in cl["claim"] for cl in a["claims"])
    # the logistic sweep mirrors the quadratic's: its own metrics, the tie claim with the problem's name in it
    lq, lc = m["convex/logistic/p2.0/d2/qpsgd"], m["convex/logistic/p2.0/d2/psgd"]
    assert lq["predicted"] == lc["predicted"] == 2.0 and len(lq["median_queries"]) == 4
    ltie = [cl for cl in a["claims"] if cl["claim"].startswith("Convex, logistic regression, p = 2.0")]
    assert len(ltie) == 1 and "no ε-speedup is predicted" in ltie[0]["claim"]
    assert a["config"]["logistic"]["ridge"] == exp_mod.LOGI_RIDGE
    for png in ("mean_error_vs_queries.png", "queries_vs_inv_eps.png", "crossover_vs_d.png",
                "convex_queries_vs_inv_eps.png", "convex_logistic_queries_vs_inv_eps.png"):
        assert (tmp_path / "a" / "quantum-heavy-tail" / png).exists()


def test_fit_slope_recovers_a_power_law():
    rng = np.random.default_rng(0)
    x = [10, 100, 1000, 10000]
    samples = [np.exp(rng.normal(0, 0.01, 30)) * xi**-0.75 for xi in x]
    s, lo, hi = exp_mod.fit_slope(x, samples, exp_mod.q90, 200, rng)
    assert abs(s + 0.75) < 0.01 and lo <= s <= hi and hi - lo < 0.02


def test_within_turns_an_equivalence_band_into_a_one_sided_figure():
    # inside the band: positive low end -> holds
    d, ci = exp_mod.within(-0.98, [-1.02, -0.95], -1.0, 0.1)
    assert d == pytest.approx(0.08) and ci == [pytest.approx(0.05), pytest.approx(0.1)]
    # wholly outside on one side: negative high end -> does not hold
    d, ci = exp_mod.within(-0.7, [-0.75, -0.65], -1.0, 0.1)
    assert ci[1] == pytest.approx(-0.15) and ci[0] <= d <= ci[1]
    # straddling the band's edge: inconclusive
    d, ci = exp_mod.within(-0.9, [-0.95, -0.8], -1.0, 0.1)
    assert ci[0] < 0 < ci[1]


def test_crossover_interpolates_the_first_upward_crossing():
    assert exp_mod.crossover([1, 4, 16], [0.5, 2.0, 8.0]) == __import__("pytest").approx(2.0)
    assert exp_mod.crossover([1, 4, 16], [1.5, 2.0, 8.0]) is None
    assert exp_mod.crossover([1, 4, 16], [0.1, 0.2, 0.5]) is None


@pytest.mark.parametrize("p", [1.5, 2.0])
def test_qpsgd_mlmc_caps_its_levels_at_the_target_accuracy(p):
    from neurips26.quantum import HeavyTailedMean

    r = exp_mod.mlmc_rate(p)
    assert 1 < r < 4 * (p - 1) / p  # finite expected cost and finite variance
    est = HeavyTailedMean(p, 1.0)
    acc = 0.05
    mlmc = exp_mod.qpsgd_mlmc(est, acc, 2)
    J, n0 = mlmc.max_level, mlmc.n0
    assert n0 == est.plan(1e6, 2).queries
    # the top level reaches the accuracy (its bias bound), the level below does not
    assert est.eps_for_budget(n0 * 2**J, 2) <= acc < est.eps_for_budget(n0 * 2 ** (J - 1), 2)


def test_convex_cell_reaches_eps_and_counts_minibatches():
    t = exp_mod.ConvexTask(2.0, 2, "psgd", 0.2, 2, 2**8, 0)
    out = exp_mod.run_convex(t)
    assert all(out["reached"])
    o, _ = exp_mod._convex_problem(2, 2**8, 2.0)
    b = exp_mod.classical_batch(2.0, exp_mod._nu(o.noise, 2.0), 0.2 / (4 * exp_mod.CVX_RADIUS), 2)
    assert out["queries"] == [float(b * s) for s in out["steps"]]


def test_logistic_problem_minimizer_matches_scikit_learn_and_its_oracle_is_unbiased():
    """f* and x* of the logistic convex problem against scikit-learn (C = 1/(λ n), no intercept: the same
    objective times n), and the gradient oracle's mean against central finite differences of f."""
    sklearn = pytest.importorskip("sklearn.linear_model")
    d = 2
    A, y, w0 = exp_mod.logistic_data(d)
    assert A.shape == (exp_mod.LOGI_N, d) and set(np.unique(y)) == {-1.0, 1.0}
    o, xs, f_star, L = exp_mod._logistic_problem(d, 2**8, 1.5)
    ref = sklearn.LogisticRegression(C=1 / (exp_mod.LOGI_RIDGE * len(y)), fit_intercept=False, tol=1e-12,
                                     max_iter=10_000).fit(A, y)
    w = ref.coef_[0]
    assert np.allclose(xs, w, atol=1e-6)
    f_ref = float(np.mean(np.log1p(np.exp(-y * (A @ w)))) + 0.5 * exp_mod.LOGI_RIDGE * w @ w)
    assert f_star == pytest.approx(f_ref, abs=1e-11) and f_star <= f_ref + 1e-15
    assert np.linalg.norm(xs) < exp_mod.CVX_RADIUS  # the minimizer is inside the projection ball
    # L bounds the Hessian's spectrum over the ball (brute force on random points)
    rng = np.random.default_rng(0)
    for x in rng.uniform(-1, 1, (20, d)):
        s = 1 / (1 + np.exp(-A @ x))
        H = (A.T * (s * (1 - s))) @ A / len(y) + exp_mod.LOGI_RIDGE * np.eye(d)
        assert np.linalg.eigvalsh(H)[-1] <= L + 1e-12
    h = 1e-6
    for x in (np.zeros(d), np.array([0.3, -0.7]), xs):
        fd = np.array([(o.f(x + h * e) - o.f(x - h * e)) / (2 * h) for e in np.eye(d)])
        law = o.at(x)
        assert np.allclose(law.mean, fd, atol=1e-7)  # the oracle's mean is ∇f (the noise has mean 0)
        assert np.allclose(o.grad(x), fd, atol=1e-7)
    assert np.linalg.norm(o.grad(xs)) < 1e-12


@pytest.mark.parametrize("method", exp_mod.CONVEX_METHODS)
def test_logistic_convex_cell_reaches_eps(method):
    """One logistic cell of each method at a tiny size: every seed reaches f(x̄) − f* ≤ ε within the step cap,
    the quadratic's ConvexTask records are unchanged (the logistic cell is a record type of its own)."""
    t = exp_mod.LogisticTask(2.0, 2, method, 0.3, 2, 2**8, 0)
    out = exp_mod.run_convex(t)
    assert all(out["reached"]) and all(0 < s < exp_mod.CVX_MAX_STEPS for s in out["steps"])
    assert all(q > 0 for q in out["queries"])
    from neurips26.reproduce._tasks import task_key

    assert task_key(t) != task_key(exp_mod.ConvexTask(2.0, 2, method, 0.3, 2, 2**8, 0))
    if method == "psgd":  # the classical cell's queries are the minibatch times the steps
        o, *_ = exp_mod._logistic_problem(2, 2**8, 2.0)
        b = exp_mod.classical_batch(2.0, exp_mod._nu(o.noise, 2.0), 0.3 / (4 * exp_mod.CVX_RADIUS), 2)
        assert out["queries"] == [float(b * s) for s in out["steps"]]


def test_logistic_sweep_is_in_the_full_size_only():
    assert exp_mod.SIZES[False].get("cvx_logistic") is True
    assert "cvx_logistic" not in exp_mod.SIZES[True]
