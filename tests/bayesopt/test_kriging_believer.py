"""Randomized kriging believer: the fantasised mean is a martingale for y-sampling (and not
for f-sampling), plain KB with a pure-variance acquisition reproduces BUCB's variance
sequence, and KB batches are more diverse than repeated greedy UCB."""

import math

import pytest
import torch

pytest.importorskip("botorch")
from botorch.acquisition import PosteriorStandardDeviation, UpperConfidenceBound  # noqa: E402
from botorch.models import SingleTaskGP  # noqa: E402
from botorch.models.transforms import Standardize  # noqa: E402

from neurips26.bayesopt.kriging_believer import (BUCB, BatchThompson, KrigingBeliever, LocalPenalization,  # noqa: E402
                                                 QLogNEI, RandomProposer, fantasize, irgp_beta, irgp_ucb)
from neurips26.bayesopt.space import SearchSpace  # noqa: E402

BOUNDS = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)


def toy_model(n=12, noise=0.05, seed=0, standardize=True):
    generator = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 2, generator=generator, dtype=torch.float64)
    Y = (torch.sin(5 * X[:, 0]) * torch.cos(3 * X[:, 1]))[:, None]
    kw = {"outcome_transform": Standardize(1)} if standardize else {}
    model = SingleTaskGP(X, Y, train_Yvar=torch.full_like(Y, noise), **kw)
    set_lengthscale(model, 0.3)
    model.eval()
    return model


def set_lengthscale(model, ls):
    k = model.covar_module
    (k.base_kernel if hasattr(k, "base_kernel") else k).lengthscale = ls


def grid(n=15):
    g = torch.linspace(0, 1, n, dtype=torch.float64)
    return torch.cartesian_prod(g, g)


@pytest.mark.parametrize("standardize", [False, True])
def test_y_fantasies_make_the_mean_a_martingale_and_f_fantasies_do_not(standardize):
    model = toy_model(noise=0.2, standardize=standardize)
    set_lengthscale(model, 0.3)
    xp = torch.tensor([[0.5, 0.5]], dtype=torch.float64)
    Z = torch.tensor([[0.45, 0.55], [0.6, 0.4], [0.5, 0.7]], dtype=torch.float64)
    with torch.no_grad():
        post = model.posterior(Z)
        mu, var = post.mean[:, 0], post.variance[:, 0]
        var_fant = fantasize(model, xp, "mean").posterior(Z).variance[:, 0]
    expected_var = var - var_fant  # the posterior-mean spread the real outcome would cause
    assert torch.all(expected_var > 1e-3)
    n = 3000
    for kind, should_match in (("y", True), ("f", False)):
        generator = torch.Generator().manual_seed(1)
        with torch.no_grad():
            means = fantasize(model, xp, kind, generator=generator, num_fantasies=n).posterior(Z).mean[..., 0]
            one = fantasize(model, xp, kind, generator=generator).posterior(Z).mean[:, 0]  # the unbatched path too
        assert means.shape == (n, 3) and one.shape == (3,)
        se_mean = (expected_var / n).sqrt()
        assert torch.all((means.mean(0) - mu).abs() < 4 * se_mean)  # unbiased either way
        rel = means.var(0) / expected_var
        if should_match:  # Var[μ_fant] = σ² − σ²_fant within Monte Carlo error (sd of a variance ≈ √(2/n))
            assert torch.all((rel - 1).abs() < 4 * math.sqrt(2 / n)), rel
        else:  # f-draws miss the noise: the spread shrinks by σ²(x)/(σ²(x)+σ_n²)
            assert torch.all(rel < 1 - 8 * math.sqrt(2 / n)), rel


def test_plain_kb_reproduces_bucb_variance_sequence():
    space = SearchSpace(BOUNDS, candidates=grid())
    for noise in (1e-6, 0.05):
        model = toy_model(noise=noise)
        set_lengthscale(model, 0.25)
        kb = KrigingBeliever(lambda m: PosteriorStandardDeviation(m), space, fantasy="mean")
        bucb = BUCB(space, beta=1e12)  # the mean term vanishes next to the variance: pure variance
        pending = torch.tensor([[0.2, 0.3]], dtype=torch.float64)
        xs_kb = kb.propose(model, q=6, pending=pending)
        xs_bucb = bucb.propose(model, q=6, pending=pending)
        assert torch.equal(xs_kb, xs_bucb)
        # and the hallucinated variances agree with the conditioned model's, point by point
        P = pending
        for x in xs_kb:
            with torch.no_grad():
                var_kb = fantasize(model, P, "mean").posterior(x[None]).variance[0, 0]
                acq = bucb.acquisition(model, P)
                reduction = acq.hallucinated_reduction(x[None])[0]
                var_bucb = model.posterior(x[None]).variance[0, 0] - reduction
            assert torch.isclose(var_kb, var_bucb, rtol=1e-6, atol=1e-10)
            P = torch.cat([P, x[None]])


def min_pairwise(X):
    d = torch.cdist(X, X)
    return float(d[~torch.eye(len(X), dtype=torch.bool)].min())


def test_kb_batches_are_more_diverse_than_repeated_greedy_ucb():
    model = toy_model()
    set_lengthscale(model, 0.2)
    space = SearchSpace(BOUNDS, num_restarts=2, raw_samples=64)
    ucb = lambda m: UpperConfidenceBound(m, beta=4.0)  # noqa: E731
    greedy = torch.cat([space.maximize(ucb(model)) for _ in range(4)])
    for fantasy in ("y", "mean"):
        batch = KrigingBeliever(ucb, space, fantasy=fantasy).propose(model, q=4)
        assert batch.shape == (4, 2)
        assert min_pairwise(batch) > min_pairwise(greedy) + 0.05


def test_every_proposer_returns_q_points_inside_the_domain():
    model = toy_model()
    cands = grid(9)
    for space in (SearchSpace(BOUNDS, num_restarts=2, raw_samples=32), SearchSpace(BOUNDS, candidates=cands)):
        ucb = lambda m: UpperConfidenceBound(m, beta=2.0)  # noqa: E731
        proposers = [KrigingBeliever(ucb, space), KrigingBeliever(ucb, space, fantasy="liar"),
                     KrigingBeliever(irgp_ucb(100), space), LocalPenalization(ucb, space, n_lipschitz=64),
                     BUCB(space), BatchThompson(space), QLogNEI(space, mc_samples=32), RandomProposer(space)]
        pending = torch.tensor([[0.5, 0.5]], dtype=torch.float64)
        for p in proposers:
            X = p.propose(model, q=3, pending=pending)
            assert X.shape == (3, 2), type(p).__name__
            assert torch.all((X >= 0) & (X <= 1))
            if space.candidates is not None:
                assert torch.all(torch.cdist(X, cands).min(1).values < 1e-12)


def test_local_penalization_pushes_the_next_point_away():
    model = toy_model()
    space = SearchSpace(BOUNDS, candidates=grid(21))
    lp = LocalPenalization(lambda m: UpperConfidenceBound(m, beta=2.0), space)
    X = lp.propose(model, q=2)
    first = space.maximize(UpperConfidenceBound(model, beta=2.0))
    assert torch.equal(X[:1], first) and float(torch.dist(X[0], X[1])) > 0


def test_irgp_beta_is_the_shifted_exponential():
    generator = torch.Generator().manual_seed(0)
    draws = torch.tensor([irgp_beta(1000, generator) for _ in range(20000)])
    shift = 2 * math.log(500)
    assert float(draws.min()) >= shift
    assert abs(float(draws.mean()) - (shift + 2)) < 0.06  # mean of Exp(rate 1/2) is 2
    with pytest.raises(ValueError, match="domain_size"):
        irgp_beta(1)


def test_bad_inputs_are_refused():
    model = toy_model()
    with pytest.raises(ValueError, match="fantasy"):
        fantasize(model, torch.rand(1, 2, dtype=torch.float64), "noise")
    with pytest.raises(ValueError, match="bounds"):
        SearchSpace(torch.tensor([[1.0, 0.0], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="q must"):
        KrigingBeliever(lambda m: UpperConfidenceBound(m, beta=1.0), SearchSpace(BOUNDS)).propose(model, q=0)


def test_kb_takes_any_acquisition_built_from_a_model():
    from botorch.acquisition import LogExpectedImprovement
    from botorch.acquisition.thompson_sampling import PathwiseThompsonSampling

    model = toy_model()
    space = SearchSpace(BOUNDS, candidates=grid(11))
    best = float(model.outcome_transform.untransform(model.train_targets[:, None])[0].max())  # original scale
    factories = {"logei": lambda m: LogExpectedImprovement(m, best_f=best),
                 "ts": lambda m: PathwiseThompsonSampling(m), "irgp": irgp_ucb(121, torch.Generator().manual_seed(0))}
    for name, make in factories.items():
        X = KrigingBeliever(make, space, seed=1).propose(model, q=4, pending=torch.tensor([[0.3, 0.3]]).double())
        assert X.shape == (4, 2) and torch.isfinite(X).all(), name
