"""The multivariate (Cornelissen–Hamoudi–Jerbi-style) estimator: the product-Fejér law against the
d-dimensional FFT of the grid state, the vectorized Fejér sampler against its law, (ε, δ) coverage over
2000 seeded runs, exact query accounting on a law where every outcome is deterministic, the √d cost
scaling of the plan, bad input."""

import math

import numpy as np
import pytest
from scipy import stats

from neurips26.quantum import DiscreteOracle, QueryCounter, student_t
from neurips26.quantum.multivariate import MultivariateMean, directional_pe_law, multivariate_mean, product_fejer_law
from neurips26.quantum.qae import fejer_law, qae_law, sample_fejer


def _tv(a, b):
    return 0.5 * float(np.abs(np.asarray(a) - np.asarray(b)).sum())


def test_product_fejer_law_equals_fft_of_the_grid_state():
    rng = np.random.default_rng(0)
    worst = 0.0
    for d, G in ((1, 5), (2, 3), (2, 8), (3, 4), (3, 6)):
        Z = rng.normal(size=(7, d))
        Z /= np.linalg.norm(Z, axis=1).max()
        P = rng.dirichlet(np.ones(7))
        worst = max(worst, _tv(directional_pe_law(Z, P, G), product_fejer_law(G * (P @ Z) / 2, G)))
        # with β = √d/2 no direction is clipped: the built oracle is the ideal one (a proven property)
        worst = max(worst, _tv(directional_pe_law(Z, P, G, beta=math.sqrt(d) / 2), product_fejer_law(G * (P @ Z) / 2, G)))
    assert worst < 1e-12
    # the clipping the estimator idealizes exists (and is measured) beyond d = 2 ln(2/η)
    Z = rng.normal(size=(16, 8))
    Z /= np.linalg.norm(Z, axis=1)[:, None]
    P = np.full(16, 1 / 16)
    assert _tv(directional_pe_law(Z, P, 4, beta=0.3), product_fejer_law(4 * (P @ Z) / 2, 4)) > 1e-3


def test_fejer_sampler_draws_from_the_exact_law():
    for c, M, n in ((2.3, 8, 20_000), (-3.7, 100, 40_000), (517.25, 1000, 100_000), (9.5, 300, 100_000)):
        y = sample_fejer(np.full(n, c), M, rng=int(M))
        law = fejer_law(c, M)
        counts = np.bincount(y, minlength=M)
        keep = law * n >= 5
        obs = np.append(counts[keep], counts[~keep].sum())
        exp = np.append(law[keep], law[~keep].sum()) * n
        if exp[-1] == 0:
            obs, exp = obs[:-1], exp[:-1]
        assert stats.chisquare(obs, exp).pvalue > 1e-3
    assert fejer_law(3.0, 16)[3] == pytest.approx(1.0)  # an integer centre: a point mass


def test_multivariate_mean_meets_eps_delta_over_2000_runs():
    o = student_t(4.0, K=1024, d=3, seed=2).shifted([1.0, -2.0, 0.5])
    est = MultivariateMean(2.0, o.moment(2), delta=0.1)
    eps, runs = 0.3, 2000
    fails = sum(np.linalg.norm(est(o, eps=eps, rng=s).estimate - o.mean) > eps for s in range(runs))
    assert 1 - fails / runs >= 1 - 0.1 - 3 * math.sqrt(0.1 * 0.9 / runs)


def test_query_count_is_exact_on_a_deterministic_instance():
    # X ≡ μ: level 0 has q = 1 (QAE returns exactly 1), every other level q = 0 (exactly 0), the phase
    # estimation centre is 0 (outcome exactly 0): the estimate is μ and the count follows the plan's formula.
    mu = np.array([0.3, -1.2, 2.0, 0.7])
    o = DiscreteOracle(np.tile(mu, (3, 1)), np.full(3, 1 / 3))
    est = MultivariateMean(2.0, 0.5)
    plan = est.plan(0.2, 4)
    c = QueryCounter()
    res = est(o, eps=0.2, rng=0, counter=c)
    np.testing.assert_allclose(res.estimate, mu, atol=1e-12)
    b, G, A, D = plan.levels[0].buckets[0]
    expected = plan.pre_samples + sum(plan.reps_q * (2 ** (lv.m_q + 1) - 1) for lv in plan.levels) \
        + plan.reps_pe * D * (2 * A + 1)
    assert res.queries == c.queries == expected <= plan.queries
    assert qae_law(1.0, 5)[16] == pytest.approx(1.0)  # the premise: QAE of a = 1 is deterministic


def test_budget_mode_fits_and_cost_grows_as_sqrt_d():
    o = student_t(4.0, K=512, d=8, seed=0)
    est = MultivariateMean(2.0, o.moment(2))
    for s in range(20):
        assert est(o, n=10**8, rng=s).queries <= 10**8
    # cost ∝ √d at a fixed per-direction scale (tr Σ fixed; β is capped beyond d = 6): ×4 in d → ×2, up to
    # the log d in the median repetitions
    r = est.plan(0.05, 64).queries / est.plan(0.05, 16).queries
    assert 1.9 < r < 2.5


@pytest.mark.parametrize("call, match", [
    (lambda: MultivariateMean(2.5, 1.0), "p must"),
    (lambda: MultivariateMean(2.0, 0.0), "moment_bound"),
    (lambda: MultivariateMean(2.0, 1.0, delta=0.0), "delta"),
    (lambda: MultivariateMean(2.0, 1.0, eta=1.0), "eta"),
    (lambda: MultivariateMean(2.0, 1.0).plan(-1.0, 2), "eps"),
    (lambda: multivariate_mean(student_t(3.0, K=64), 1.0, eps=0.1, n=10), "exactly one"),
    (lambda: multivariate_mean(student_t(3.0, K=64), 1.0, n=10), "n = 10"),
    (lambda: directional_pe_law(np.ones((2, 4)), np.full(2, 0.5), 64), "2\\^22"),
    (lambda: sample_fejer([np.nan], 8, 0), "finite"),
])
def test_bad_input_names_the_field(call, match):
    with pytest.raises(ValueError, match=match):
        call()
