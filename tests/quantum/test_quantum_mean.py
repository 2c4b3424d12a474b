"""Mean estimators: (eps, delta) coverage over 2000 seeded runs, exact query counts, MLMC
unbiasedness and cost, classical baselines against scipy / brute force, bad input."""

import math

import numpy as np
import pytest
from scipy import stats

from neurips26.quantum import (
    DiscreteOracle, HeavyTailedMean, QueryCounter, UnbiasedMLMC, amplitude_estimation, bounded_mean, catoni, qae_law,
    classical_mean, geometric_median_of_means, median_of_means, median_repetitions, student_t, subgaussian_mean,
    symmetric_pareto, trimmed_mean,
)

RUNS = 2000


def _coverage_ok(fails, delta, runs=RUNS):
    rate = fails / runs
    se = math.sqrt(delta * (1 - delta) / runs)
    return 1 - rate >= 1 - delta - 3 * se


def test_quantile_discretization_is_symmetric_with_exact_moments():
    o = student_t(3.0, K=1000)
    assert abs(o.mean[0]) < 1e-12
    x = o.values[:, 0]
    assert o.moment(2) == pytest.approx(np.mean(x**2), rel=1e-12)
    assert x.max() == pytest.approx(stats.t.ppf(1 - 0.5 / 1000, 3.0), rel=1e-9)
    par = symmetric_pareto(1.8, K=512, d=3, seed=1)
    for i in range(3):  # every marginal is the same 1-D grid, permuted
        np.testing.assert_allclose(np.sort(par.values[:, i]), np.sort(par.values[:, 0]))
    assert np.abs(par.mean).max() < 1e-12


def test_bounded_mean_meets_eps_delta_and_counts_queries_exactly():
    o = DiscreteOracle(np.array([0.0, 0.3, 1.0]), np.array([0.5, 0.3, 0.2]))
    a = float(o.mean[0])
    eps, delta = 0.02, 0.1
    r = median_repetitions(delta)
    fails = 0
    for s in range(RUNS):
        est, q = bounded_mean(o, eps=eps, delta=delta, rng=s)
        fails += abs(est - a) > eps
    M = 2 ** math.ceil(math.log2(next(M for M in 2 ** np.arange(1, 20) if math.pi / M + math.pi**2 / M**2 <= eps)))
    assert q == r * (2 * M - 1)
    assert _coverage_ok(fails, delta)


def test_subgaussian_and_heavy_tailed_meet_eps_delta():
    for est, o, delta in (
        (lambda o, s: subgaussian_mean(o, sigma=math.sqrt(o.moment(2)), eps=0.3, delta=0.1, rng=s), student_t(5.0, K=4096), 0.1),
        (lambda o, s: HeavyTailedMean(1.5, o.moment(1.5), delta=0.1)(o, eps=0.3, rng=s), symmetric_pareto(1.7, K=4096).shifted([2.0]), 0.1),
    ):
        fails = sum(abs(est(o, s).estimate[0] - o.mean[0]) > 0.3 for s in range(RUNS))
        assert _coverage_ok(fails, delta)


def test_heavy_tailed_plan_matches_the_counter_and_budget_mode_fits():
    o = student_t(2.5, K=2048, d=2)
    est = HeavyTailedMean(2.0, o.moment(2))
    plan = est.plan(0.2, d=2)
    c = QueryCounter()
    res = est(o, eps=0.2, rng=0, counter=c)
    assert res.queries == plan.queries == c.queries
    n = 10**6
    assert est(o, n=n, rng=1).queries <= n
    assert est.plan(est.eps_for_budget(n, 2), 2).queries <= n < est.plan(est.eps_for_budget(n, 2) * 0.99, 2).queries


def test_heavy_tailed_error_shrinks_faster_than_classical_rate():
    # p = 2: the quantum error falls by more than the classical √(budget ratio) = 10 over a 100x budget.
    o = student_t(2.5, K=2**14)
    est = HeavyTailedMean(2.0, o.moment(2))
    q90 = [np.quantile([abs(est(o, n=n, rng=s).estimate[0]) for s in range(30)], 0.9) for n in (10**5, 10**7)]
    assert q90[0] / q90[1] > 10


def test_analytic_sampler_draws_from_the_exact_law():
    # The windowed inverse-CDF sampler against the full law: chi-square goodness of fit, and
    # the statevector backend (which draws from its simulated law) agrees in the same test.
    o = DiscreteOracle(np.array([0.1, 0.5, 0.8]), np.array([0.3, 0.3, 0.4]))
    for m, backend in ((5, "analytic"), (5, "statevector"), (9, "analytic")):
        est = amplitude_estimation(o, lambda v: v[:, 0], m, shots=40_000, backend=backend, rng=m).estimate
        y = np.rint(np.arcsin(np.sqrt(est)) * 2**m / np.pi).astype(int)  # ã = sin²(πy/M) folds y and M − y
        law = qae_law(float(o.mean[0]), m)
        folded = law[: 2 ** (m - 1) + 1].copy()
        folded[1 : 2 ** (m - 1)] += law[2**m - 1 : 2 ** (m - 1) : -1]
        counts = np.bincount(y, minlength=folded.size)
        keep = folded * 40_000 >= 5
        obs = np.append(counts[keep], counts[~keep].sum())
        exp = np.append(folded[keep], folded[~keep].sum()) * 40_000
        assert stats.chisquare(obs, exp).pvalue > 1e-3


def test_mlmc_unbiased_and_cost_matches_formula():
    o = DiscreteOracle(np.array([0.05, 0.2, 0.9]), np.array([0.6, 0.3, 0.1]))
    a = float(o.mean[0])
    delta = 0.25
    r = median_repetitions(delta)

    def base(oracle, n, rng, counter):
        return bounded_mean(oracle, n=n, delta=delta, rng=rng, counter=counter).estimate

    def cost(n):
        return r * (2 * 2 ** math.floor(math.log2((n / r + 1) / 2)) - 1)

    mlmc = UnbiasedMLMC(base, n0=3 * r, rate=1.5, max_level=14)
    rng = np.random.default_rng(0)
    draws, costs = [], []
    for _ in range(25_000):  # 10^5 in the issue; 25k keeps the module under 30 s (SE doubles)
        c = QueryCounter()
        draws.append(mlmc(o, rng=rng, counter=c).estimate)
        costs.append(c.queries)
    draws = np.array(draws, float)
    se = draws.std() / math.sqrt(draws.size)
    assert abs(draws.mean() - a) < 4 * se
    # the test has power: the level-0 estimator alone is biased by many SE
    level0 = np.mean([base(o, 3 * r, np.random.default_rng(s), None) for s in range(2000)])
    assert abs(level0 - a) > 8 * se
    assert abs(np.mean(costs) / mlmc.expected_cost(cost) - 1) < 0.10


def test_classical_baselines_against_scipy_and_brute_force():
    rng = np.random.default_rng(0)
    x = rng.standard_t(2.0, size=(101, 3))
    for prop in (0.0, 0.1, 0.25):
        np.testing.assert_allclose(trimmed_mean(x, prop), stats.trim_mean(x, prop, axis=0), rtol=1e-12)
    blocks = x[:100].reshape(5, 20, 3).mean(1)
    np.testing.assert_allclose(median_of_means(x, 5), np.median(blocks, 0))
    gm = geometric_median_of_means(x, 5)
    obj = lambda y: np.linalg.norm(blocks - y, axis=1).sum()
    for _ in range(50):  # no perturbation does better
        assert obj(gm) <= obj(gm + 1e-3 * rng.standard_normal(3)) + 1e-12
    y = rng.standard_normal(400) + 1.0
    th = catoni(y, variance=1.0)
    u = math.sqrt(2 * math.log(20) / (400 * (1 + 2 * math.log(20) / (400 - 2 * math.log(20)))))
    psi = lambda t: np.sign(t) * np.log1p(np.abs(t) + t * t / 2)
    assert abs(psi(u * (y - th)).sum()) < 1e-6
    c = QueryCounter()
    classical_mean(student_t(2.0, K=64), 50, "trimmed_mean", rng=0, counter=c)
    assert c.queries == c.samples == 50


@pytest.mark.parametrize("call, match", [
    (lambda: DiscreteOracle([1.0, 2.0], [0.5, 0.6]), "sum to 1"),
    (lambda: DiscreteOracle([1.0, 2.0], [1.5, -0.5]), "probs must be >= 0"),
    (lambda: DiscreteOracle([1.0, np.nan], [0.5, 0.5]), "values must be finite"),
    (lambda: DiscreteOracle([1.0, 2.0], [0.5, np.nan]), "probs must be finite"),
    (lambda: DiscreteOracle([1.0, 2.0], [1.0]), "probs must have shape"),
    (lambda: HeavyTailedMean(2.5, 1.0), "p must"),
    (lambda: HeavyTailedMean(1.0, 1.0), "p must"),
    (lambda: HeavyTailedMean(1.5, -1.0), "moment_bound"),
    (lambda: HeavyTailedMean(1.5, 1.0, delta=1.0), "delta"),
    (lambda: bounded_mean(DiscreteOracle([0.5], [1.0]), eps=0.1, delta=0.0), "delta"),
    (lambda: bounded_mean(DiscreteOracle([0.5], [1.0]), eps=0.1, n=10), "exactly one"),
    (lambda: bounded_mean(DiscreteOracle([1.5], [1.0]), eps=0.1), r"\[0, 1\]"),
    (lambda: bounded_mean(DiscreteOracle([0.5], [1.0]), eps=-0.1), "eps"),
    (lambda: bounded_mean(DiscreteOracle([0.5], [1.0]), n=3), "n = 3"),
    (lambda: UnbiasedMLMC(lambda *a: 0.0, n0=4, rate=1.0), "rate"),
    (lambda: median_of_means(np.ones(3), 5), "k"),
    (lambda: trimmed_mean(np.array([1.0, np.inf]), 0.1), "finite"),
])
def test_bad_input_names_the_field(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_bad_types():
    with pytest.raises(TypeError, match="oracle"):
        bounded_mean(np.ones(3), eps=0.1)
    with pytest.raises(TypeError, match="n"):
        student_t(2.0, K=2.5)
