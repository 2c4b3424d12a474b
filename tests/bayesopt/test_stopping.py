"""GP-UCB stopping: the tighter bound never exceeds the classical one, smaller ε or δ never
stops earlier, and the (ε, δ) rule's returned point is ε-optimal in ≥ 1 − δ of exact GP-prior draws."""

import math

import pytest
import torch

from neurips26.bayesopt.stopping import (EIThresholdRule, EpsDeltaRule, FixedBudget, SrinivasFinite, UCBLCBGapRule,
                                         gp_posterior, gp_ucb, regret_bounds)


def rbf_grid(n=30, lengthscale=0.2):
    x = torch.linspace(0, 1, n, dtype=torch.float64)
    return torch.exp(-0.5 * (x[:, None] - x[None, :]) ** 2 / lengthscale**2) + 1e-9 * torch.eye(n, dtype=torch.float64)


def prior_draw(K, gen):
    return torch.linalg.cholesky(K) @ torch.randn(len(K), generator=gen, dtype=K.dtype)


def test_tighter_bound_never_exceeds_the_classical_one():
    for size in (1, 10, 1000):
        for delta in (0.01, 0.1, 0.5):
            beta = SrinivasFinite(size, delta)
            for t in range(1, 200):
                classical, tighter = regret_bounds(t, 0.37, beta(t), delta)
                assert tighter <= classical + 1e-12
                if size >= 2:
                    assert tighter < classical


def test_posterior_matches_the_textbook_formulas():
    K = rbf_grid(8)
    obs = [1, 5]
    y = torch.tensor([0.3, -0.2], dtype=torch.float64)
    mu, sd = gp_posterior(K, obs, y, 0.01)
    Koo = K[obs][:, obs] + 0.01 * torch.eye(2, dtype=torch.float64)
    mu_ref = K[:, obs] @ torch.linalg.solve(Koo, y)
    var_ref = K.diagonal() - (K[:, obs] @ torch.linalg.solve(Koo, K[obs, :])).diagonal()
    assert torch.allclose(mu, mu_ref) and torch.allclose(sd**2, var_ref.clamp_min(0), atol=1e-12)


def test_smaller_eps_or_delta_never_stops_earlier():
    K = rbf_grid()
    gen = torch.Generator().manual_seed(3)
    f = prior_draw(K, gen)
    stops = []
    for eps in (1.0, 0.5, 0.2, 0.1):
        _, t = gp_ucb(f, K, 0.01, EpsDeltaRule(eps, 0.1), delta=0.1, max_iter=80,
                      generator=torch.Generator().manual_seed(0))
        stops.append(t)
    assert stops == sorted(stops) and stops[0] < stops[-1]
    stops = [gp_ucb(f, K, 0.01, EpsDeltaRule(0.3, d), delta=0.1, max_iter=80,
                    generator=torch.Generator().manual_seed(0))[1] for d in (0.5, 0.1, 0.01)]
    assert stops == sorted(stops)
    # the tighter bound stops no later than the classical one at equal (ε, δ)
    tight = gp_ucb(f, K, 0.01, EpsDeltaRule(0.3, 0.1), 0.1, 80, torch.Generator().manual_seed(0))[1]
    classical = gp_ucb(f, K, 0.01, EpsDeltaRule(0.3, 0.1, tight=False), 0.1, 80, torch.Generator().manual_seed(0))[1]
    assert tight <= classical


def clopper_pearson_lower(k, n, alpha=0.05):
    from scipy.stats import beta

    return 0.0 if k == 0 else float(beta.ppf(alpha / 2, k, n - k + 1))


def test_eps_delta_rule_covers_gp_prior_draws():
    K = rbf_grid()
    eps, delta, runs = 0.25, 0.1, 200
    gen = torch.Generator().manual_seed(7)
    good, stopped = 0, 0
    for _ in range(runs):
        f = prior_draw(K, gen)
        decision, t = gp_ucb(f, K, 0.01, EpsDeltaRule(eps, delta), delta, max_iter=100, generator=gen)
        stopped += decision.stop
        good += float(f.max() - f[decision.incumbent]) <= eps
    assert stopped >= 0.9 * runs  # the rule does stop on this problem
    assert good / runs >= 1 - delta
    print(f"eps-optimal in {good}/{runs} runs; 95% CI lower {clopper_pearson_lower(good, runs):.3f}")


def test_other_rules_decide_sensibly():
    K = rbf_grid()
    f = prior_draw(K, torch.Generator().manual_seed(9))
    d, t = gp_ucb(f, K, 0.01, FixedBudget(12), 0.1, 100)
    assert d.stop and t == 12
    d, _ = gp_ucb(f, K, 0.01, UCBLCBGapRule(0.5), 0.1, 100, torch.Generator().manual_seed(0))
    assert d.stop and float(f.max() - f[d.incumbent]) <= 0.5
    d, _ = gp_ucb(f, K, 0.01, EIThresholdRule(1e-2), 0.1, 100, torch.Generator().manual_seed(0))
    assert d.stop and 0 <= d.incumbent < 30
    with pytest.raises(ValueError, match="eps"):
        EpsDeltaRule(0.0, 0.1)
    assert math.isfinite(SrinivasFinite(30, 0.1)(5))


def test_botorch_loop_stops_and_returns_a_good_point():
    from neurips26.bayesopt import bayes_opt_loop

    def objective(X):  # a smooth 2-d bump, maximum 1 at (0.3, 0.7)
        return torch.exp(-8 * ((X - torch.tensor([0.3, 0.7], dtype=X.dtype)) ** 2).sum(-1))

    bounds = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    res = bayes_opt_loop(objective, bounds, UCBLCBGapRule(0.2), n_init=5, max_iter=25, n_candidates=256,
                         noise=1e-4)
    assert res.decision.stop and res.iterations < 25
    assert len(res.X) == len(res.Y) == 5 + res.iterations - 1
    assert float(objective(res.incumbent[None])[0]) > 0.8
    budget = bayes_opt_loop(objective, bounds, FixedBudget(3), n_init=4, max_iter=10, n_candidates=64, noise=1e-4)
    assert budget.iterations == 3 and len(budget.X) == 6
    with pytest.raises(ValueError, match="bounds"):
        bayes_opt_loop(objective, torch.tensor([[1.0, 0.0], [0.0, 1.0]]), FixedBudget(1))
    with pytest.raises(ValueError, match="NaN"):
        bayes_opt_loop(lambda X: torch.full((len(X),), float("nan")), bounds, FixedBudget(1))
