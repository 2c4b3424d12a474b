"""plan_queries: the quantum counts are what the estimators spend, the classical ones their closed forms
(and they meet their guarantee), the crossover separates the d where each route is cheaper, bad input raises."""

import math

import numpy as np
import pytest

from neurips26.quantum import (
    HeavyTailedMean, MultivariateMean, QueryCounter, QueryPlan, classical_mean, crossover_dimension, plan_queries,
    student_t,
)
from neurips26.quantum.planner import geometric_mom_blocks, median_of_means_blocks, sample_mean_queries


def _law(p, d, K=1024):
    o = student_t(p + 0.1, K=K, d=d).shifted(np.full(d, 1.0))
    nu = max(float(o.probs @ np.abs(o.values[:, i] - o.mean[i]) ** p) for i in range(d))
    return o, nu


@pytest.mark.parametrize("p, eps, d", [(1.5, 0.5, 1), (2.0, 0.2, 2), (1.5, 1.0, 3), (1.75, 0.3, 1)])
def test_quantum_counts_are_what_the_estimators_spend(p, eps, d):
    o, nu = _law(p, d)
    plan = plan_queries(p, nu, d, eps, 0.05)
    assert dict(plan.simulable) == {"heavy_tailed_mean": True, "multivariate_mean": True}
    c = QueryCounter()
    HeavyTailedMean(p, nu, 0.05)(o, eps=eps, rng=0, counter=c)
    assert plan.queries()["heavy_tailed_mean"] == c.queries  # exact: the coordinate-wise plan is deterministic
    mv = MultivariateMean(p, d * nu, 0.05)
    mp = mv.plan(eps, d)
    fixed = mp.pre_samples + sum(mp.reps_q * (2 ** (lv.m_q + 1) - 1) for lv in mp.levels)
    for seed in range(3):
        c = QueryCounter()
        mv(o, eps=eps, rng=seed, counter=c)
        # the multivariate plan is an upper bound: its QAE part is always spent, the amplified phase estimation
        # of a level at most its worst bucket
        assert fixed <= c.queries <= plan.queries()["multivariate_mean"]
    assert plan.queries()["multivariate_mean"] == mp.queries


def test_beyond_the_simulator_the_plan_still_counts():
    # p = 1.25 at eps = 0.01 needs QAE beyond 2^32 Grover powers: the estimator refuses, the planner counts
    with pytest.raises(ValueError, match="Grover powers .* beyond 2\^32"):
        HeavyTailedMean(1.25, 1.0).plan(0.01, 1)
    plan = plan_queries(1.25, 1.0, 1, 0.01)
    assert dict(plan.simulable)["heavy_tailed_mean"] is False
    q = plan.queries()["heavy_tailed_mean"]
    assert isinstance(q, int) and q > 0
    # monotone in eps across the cap: a coarser eps within the cap costs less
    assert HeavyTailedMean(1.25, 1.0).plan(0.5, 1).queries < q


def test_classical_counts_equal_the_closed_forms():
    # p = 2, nu = 1, eps = 0.5, delta = 0.05, d = 1: Chebyshev n = nu/(delta eps^2) = 80 (c_2 = 1 < 2)
    plan = plan_queries(2.0, 1.0, 1, 0.5, 0.05)
    k = math.ceil(8 * math.log(20))  # 24
    assert plan.queries()["sample_mean"] == 80
    assert plan.queries()["median_of_means"] == k * 32  # block within 0.5 w.p. 3/4: b = 8 nu / eps^2 = 32
    assert plan.queries()["geometric_median_of_means"] == k * 50  # r = 0.4, b = 8 nu / r^2 = 50
    # a large exact count is not rounded away: d nu / (delta eps^2) = 4 / (0.05 * 1e-12) = 8e13 at p = 2
    assert plan_queries(2.0, 1.0, 4, 1e-6).queries()["sample_mean"] == 80_000_000_000_000
    # p = 1.5, nu = 2, eps = 0.3, delta = 0.1, d = 4
    p, nu, eps, delta, d = 1.5, 2.0, 0.3, 0.1, 4
    t = eps / 2
    plan = plan_queries(p, nu, d, eps, delta)
    coord = (2 * nu * d / (delta * t**p)) ** 2
    l2 = (2**p * d * nu / (delta * eps**p)) ** 2
    assert plan.queries()["sample_mean"] == math.ceil(min(coord, l2))
    assert plan.queries()["median_of_means"] == math.ceil(8 * math.log(d / delta)) * math.ceil((8 * nu / t**p) ** 2)
    assert plan.queries()["geometric_median_of_means"] == (math.ceil(8 * math.log(1 / delta))
                                                          * math.ceil((8 * 2**p * d * nu / (eps / 1.25) ** p) ** 2))
    assert plan.best_classical == min(((n, q) for n, q in plan.classical), key=lambda t_: t_[1])


@pytest.mark.parametrize("method, d", [("sample_mean", 1), ("median_of_means", 1), ("median_of_means", 4),
                                       ("geometric_median_of_means", 4)])
def test_classical_budgets_meet_their_guarantee(method, d):
    p, eps, delta = 1.5, 0.25, 0.1
    o, nu = _law(p, d, K=4096)
    if method == "sample_mean":
        n, dl = sample_mean_queries(p, nu, eps, delta, d), delta
    elif method == "median_of_means":
        k, b = median_of_means_blocks(p, nu, eps, delta, d)
        n, dl = k * b, delta / d
        assert k == math.ceil(8 * math.log(1 / dl))  # the block count classical_mean uses at delta / d
    else:
        k, b = geometric_mom_blocks(p, nu, eps, delta, d)
        n, dl = k * b, delta
    runs = 300
    fails = sum(np.linalg.norm(classical_mean(o, n, method, delta=dl, rng=s) - o.mean) > eps for s in range(runs))
    assert fails / runs <= delta + 3 * math.sqrt(delta * (1 - delta) / runs)


def test_crossover_separates_where_each_route_is_cheaper():
    p, nu, eps = 2.0, 1.0, 1e-6
    dstar, note = crossover_dimension(p, nu, eps)
    assert dstar is not None and dstar > 1, note
    assert plan_queries(p, nu, 1, eps).crossover_d == dstar
    below = [plan_queries(p, nu, d, eps).speedup for d in range(1, dstar)]
    above = [plan_queries(p, nu, d, eps).speedup for d in [*range(dstar, dstar + 20), 64, 256, 4096, 2**20]]
    assert all(s > 1 for s in below) and all(s <= 1 for s in above)
    # and the speedup falls through 1 there (the two predictions cross)
    assert below[-1] > 1 >= above[0]


def test_crossover_absent_either_way():
    # worst-case constants: at p = 2, eps = 1e-2 the classical bound is cheaper at every d
    dstar, note = crossover_dimension(2.0, 1.0, 1e-2)
    assert dstar is None and "no d" in note
    assert all(plan_queries(2.0, 1.0, d, 1e-2).speedup < 1 for d in (1, 16, 1024))
    # p = 1.5, eps = 1e-3: the quantum plan is cheaper at every d of the grid
    dstar, note = crossover_dimension(1.5, 1.0, 1e-3, d_max=2**12)
    assert dstar is None and "still cheaper" in note
    assert all(plan_queries(1.5, 1.0, d, 1e-3).speedup > 1 for d in (1, 3, 64, 4096))


def test_plan_is_frozen_and_prints_a_table():
    plan = plan_queries(2.0, 1.0, 4, 1e-6)
    assert isinstance(plan, QueryPlan)
    with pytest.raises(AttributeError):
        plan.d = 5
    text = str(plan)
    for name in ("heavy_tailed_mean", "multivariate_mean", "sample_mean", "median_of_means",
                 "geometric_median_of_means", "crossover d: 6"):
        assert name in text


@pytest.mark.parametrize("kwargs, exc, field", [
    (dict(p=1.0), ValueError, "p"), (dict(p=2.5), ValueError, "p"), (dict(p=float("nan")), ValueError, "p"),
    (dict(moment_bound=0.0), ValueError, "moment_bound"), (dict(moment_bound=float("inf")), ValueError, "moment_bound"),
    (dict(eps=-1.0), ValueError, "eps"), (dict(eps=float("inf")), ValueError, "eps"),
    (dict(delta=0.0), ValueError, "delta"), (dict(delta=1.0), ValueError, "delta"),
    (dict(d=0), ValueError, "d"), (dict(d=2.0), TypeError, "d"), (dict(d=True), TypeError, "d"),
])
def test_bad_input_raises_naming_the_argument(kwargs, exc, field):
    args = dict(p=1.5, moment_bound=1.0, d=2, eps=0.1, delta=0.05) | kwargs
    with pytest.raises(exc, match=rf"^{field}\b"):
        plan_queries(**args)


def test_max_m_lifts_only_the_cap():
    """``plan(max_m=...)`` is the same plan where the simulator's cap allows it, and goes on past it."""
    from neurips26.quantum.mean import HeavyTailedMean
    from neurips26.quantum.multivariate import MultivariateMean
    from neurips26.quantum.qae import MAX_M

    for est, d in ((HeavyTailedMean(1.5, 1.0, 0.05), 1), (MultivariateMean(2.0, 4.0, 0.05), 4)):
        assert est.plan(0.1, d, max_m=10**6) == est.plan(0.1, d)
        tiny = 1e-9 if d == 1 else 1e-12
        with pytest.raises(ValueError, match="Grover powers"):
            est.plan(tiny, d)
        assert est.plan(tiny, d, max_m=10**6).queries > est.plan(0.1, d).queries
    with pytest.raises(ValueError, match="max_m"):
        HeavyTailedMean(1.5, 1.0, 0.05).plan(0.1, max_m=0)
    assert MAX_M == 32
