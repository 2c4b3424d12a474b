"""GP-UCB stopping: the tighter bound never exceeds the classical one, smaller ε or δ never
stops earlier, and the (ε, δ) rule's returned point is ε-optimal in ≥ 1 − δ of exact GP-prior draws."""

import math

import pytest
import torch

from neurips26.bayesopt.stopping import (ChowdhuryGopalan, EIThresholdRule, RuleRace, SrinivasContinuous, bayes_opt_loop, EpsDeltaRule, FixedBudget, SrinivasFinite, UCBLCBGapRule,
                                         gp_posterior, gp_ucb, regret_bounds)


def rbf_grid(n=30, lengthscale=0.2):
    x = torch.linspace(0, 1, n, dtype=torch.float64)
    return torch.exp(-0.5 * (x[:, None] - x[None, :]) ** 2 / lengthscale**2) + 1e-9 * torch.eye(n, dtype=torch.float64)


def prior_draw(K, generator):
    return torch.linalg.cholesky(K) @ torch.randn(len(K), generator=generator, dtype=K.dtype)


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
    generator = torch.Generator().manual_seed(3)
    f = prior_draw(K, generator)
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
    generator = torch.Generator().manual_seed(7)
    good, stopped = 0, 0
    for _ in range(runs):
        f = prior_draw(K, generator)
        decision, t = gp_ucb(f, K, 0.01, EpsDeltaRule(eps, delta), delta, max_iter=100, generator=generator)
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


def test_continuous_beta_grows_with_t_and_dimension_and_matches_theorem_2():
    b = SrinivasContinuous(dim=2, delta=0.1, a=1.0, b=2.0, r=1.0)
    vals = [b(t) for t in range(1, 50)]
    assert all(x < y for x, y in zip(vals, vals[1:]))
    assert SrinivasContinuous(dim=3, delta=0.1, b=2.0)(10) > b(10)
    t = 7  # the theorem's expression, written out once by hand
    ref = 2 * math.log(2 * 49 * math.pi**2 / 0.3) + 4 * math.log(49 * 2 * 2 * math.sqrt(math.log(8 / 0.1)))
    assert math.isclose(b(t), ref, rel_tol=1e-12)


def test_rkhs_confidence_band_covers_rkhs_functions():
    """f = Σ αᵢ k(·, zᵢ) scaled to ‖f‖_k = B, R-Gaussian noise, arbitrary (random) queries:
    the Chowdhury-Gopalan band must hold at every point and step in ≥ 1 − δ of the runs."""
    K = rbf_grid(40, 0.15)
    B, R, delta = 1.0, 0.1, 0.1
    beta = ChowdhuryGopalan(B, R, delta)
    generator = torch.Generator().manual_seed(11)
    runs, covered = 100, 0
    for _ in range(runs):
        idx = torch.randint(40, (5,), generator=generator)
        alpha = torch.randn(5, generator=generator, dtype=torch.float64)
        f = K[:, idx] @ alpha
        f = f * B / math.sqrt(float(alpha @ K[idx][:, idx] @ alpha))
        obs, ys, ok = [], [], True
        for t in range(1, 31):
            mu, sd = gp_posterior(K, obs, torch.tensor(ys, dtype=K.dtype), beta.noise)
            width = math.sqrt(beta(K[obs][:, obs])) * sd
            ok &= bool(((f - mu).abs() <= width + 1e-12).all())
            x = int(torch.randint(40, (1,), generator=generator))
            obs.append(x)
            ys.append(float(f[x]) + R * float(torch.randn(1, generator=generator, dtype=K.dtype)))
        covered += ok
    assert covered / runs >= 1 - delta
    with pytest.raises(ValueError):
        ChowdhuryGopalan(-1.0, 0.1, 0.1)


def test_rule_race_stops_each_rule_where_it_stops_alone():
    K = rbf_grid()
    f = prior_draw(K, torch.Generator().manual_seed(5))
    rules = {"tight": lambda: EpsDeltaRule(0.3, 0.1), "classical": lambda: EpsDeltaRule(0.3, 0.1, tight=False),
             "gap": lambda: UCBLCBGapRule(0.3), "budget": lambda: FixedBudget(12)}
    race = RuleRace({k: v() for k, v in rules.items()})
    gp_ucb(f, K, 0.01, race, 0.1, 80, torch.Generator().manual_seed(0))
    for name, make in rules.items():
        alone, t = gp_ucb(f, K, 0.01, make(), 0.1, 80, torch.Generator().manual_seed(0))
        t_race, d_race, stopped = race.outcome(name)
        assert stopped == alone.stop and t_race == t and d_race.incumbent == alone.incumbent


def test_botorch_loop_on_a_finite_candidate_set():
    g = torch.linspace(0, 1, 12, dtype=torch.float64)
    cands = torch.cartesian_prod(g, g)
    res = bayes_opt_loop(lambda X: -((X - 0.5) ** 2).sum(-1), torch.tensor([[0.0, 0.0], [1.0, 1.0]]),
                         FixedBudget(6), n_init=4, max_iter=10, candidates=cands, noise=1e-4)
    assert res.iterations == 6 and len(res.X) == 4 + 5
    assert torch.all(torch.cdist(res.X, cands).min(1).values < 1e-12)  # only grid points evaluated
    with pytest.raises(ValueError, match="candidates"):
        bayes_opt_loop(lambda X: X.sum(-1), torch.tensor([[0.0], [1.0]]), FixedBudget(2), candidates=cands)
