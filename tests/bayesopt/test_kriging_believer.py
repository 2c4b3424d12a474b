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

from neurips26.bayesopt.kriging_believer import (BUCB, BatchThompson, CholeskyGP, KrigingBeliever,  # noqa: E402
                                                 LocalPenalization, QLogNEI, RandomProposer, cholesky_supported,
                                                 fantasize, irgp_beta, irgp_ucb)
from neurips26.bayesopt.space import SearchSpace  # noqa: E402

BOUNDS = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)


def toy_model(n=12, noise=0.05, seed=0, standardize=True):
    generator = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 2, generator=generator, dtype=torch.float64)
    Y = (torch.sin(5 * X[:, 0]) * torch.cos(3 * X[:, 1]))[:, None]
    kw = {"outcome_transform": Standardize(1) if standardize else None}  # BoTorch 0.18 standardizes by default
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
    # One randomized batch can cluster by chance (a high y-fantasy pulls the next pick close;
    # about 1 seed in 9 for either path), so the claim is on the median over seeds.
    model = toy_model()
    set_lengthscale(model, 0.2)
    space = SearchSpace(BOUNDS, num_restarts=2, raw_samples=64)
    ucb = lambda m: UpperConfidenceBound(m, beta=4.0)  # noqa: E731
    greedy = torch.cat([space.maximize(ucb(model)) for _ in range(4)])
    for fantasy in ("y", "mean"):
        for fast in (False, True):
            batches = [KrigingBeliever(ucb, space, fantasy=fantasy, seed=s, fast=fast).propose(model, q=4)
                       for s in range(9)]
            assert all(b.shape == (4, 2) for b in batches)
            median = torch.tensor([min_pairwise(b) for b in batches]).median()
            assert median > min_pairwise(greedy) + 0.05, (fantasy, fast)


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


# ----- the fast path: CholeskyGP (rank-k conditioning) and the batched, warm-started optimizer -----

def _gp(X, Y, kernel, noise, standardize):
    from botorch.models.transforms import Normalize
    from gpytorch.kernels import MaternKernel, ScaleKernel

    kw = {"train_Yvar": noise} if noise is not None else {}
    if kernel == "matern":
        kw["covar_module"] = ScaleKernel(MaternKernel(nu=2.5, ard_num_dims=X.shape[1]))
    kw["outcome_transform"] = Standardize(1) if standardize else None  # BoTorch's default would standardize
    box = torch.tensor([[-1.0, -1.0, 0.0], [2.0, 1.0, 3.0]], dtype=torch.float64)
    return SingleTaskGP(X, Y, input_transform=Normalize(3, bounds=box), **kw)


@pytest.mark.filterwarnings("ignore::botorch.exceptions.warnings.InputDataWarning")  # unstandardized on purpose
@pytest.mark.parametrize("kernel", ["rbf", "matern"])
@pytest.mark.parametrize("fixed_noise", [False, True])
@pytest.mark.parametrize("standardize", [False, True])
def test_rank_one_updated_posterior_equals_a_gp_refit_on_the_augmented_data(kernel, fixed_noise, standardize):
    g = torch.Generator().manual_seed(3)
    box_lo, box_w = torch.tensor([-1.0, -1.0, 0.0]), torch.tensor([3.0, 2.0, 3.0])
    pts = lambda n: (box_lo + box_w * torch.rand(n, 3, generator=g)).double()  # noqa: E731
    f = lambda X: (torch.sin(2 * X[:, :1]) + X[:, 1:2] * X[:, 2:]) * 4 + 7  # noqa: E731
    X, Xnew, Z = pts(25), pts(5), pts(8)
    Y = f(X) + 0.1 * torch.randn(25, 1, generator=g, dtype=torch.float64)
    Ynew = f(Xnew) + 0.5 * torch.randn(5, 1, generator=g, dtype=torch.float64)
    Yvar = torch.full_like(Y, 0.02) if fixed_noise else None
    base = _gp(X, Y, kernel, Yvar, standardize)
    with torch.no_grad():  # hyperparameters away from their defaults, as after a fit
        k = base.covar_module
        (k.base_kernel if hasattr(k, "base_kernel") else k).lengthscale = torch.tensor([[0.3, 0.5, 0.8]])
        if hasattr(k, "outputscale"):
            k.outputscale = 1.7
        base.mean_module.constant.fill_(0.4)
        if not fixed_noise:
            base.likelihood.noise = 0.03
    base.eval()
    assert cholesky_supported(base) is None
    fast = CholeskyGP(base)
    for i in range(3):  # three rank-one updates, then one rank-two
        fast = fast.condition_on_observations(Xnew[i:i + 1], Ynew[i:i + 1])
    fast = fast.condition_on_observations(Xnew[3:], Ynew[3:])
    # the reference: a new GP on the augmented data with the same hyperparameters, on the
    # base model's standardized scale (a new Standardize would rescale the data)
    ot = base.outcome_transform if standardize else None
    mu, sd = (ot.means.reshape(()), ot.stdvs.reshape(())) if standardize else (0, 1)
    Yall = (torch.cat([Y, Ynew]) - mu) / sd
    noise_t = base.likelihood.noise.detach().reshape(-1)
    Yvar_all = torch.cat([noise_t, noise_t.mean().expand(5)])[:, None] if fixed_noise else None
    ref = _gp(torch.cat([X, Xnew]), Yall, kernel, Yvar_all, standardize=False)
    ref.load_state_dict({k: v for k, v in base.state_dict().items()
                         if "transform" not in k and "noise_covar.noise" not in k}, strict=False)
    ref.eval()
    with torch.no_grad():
        for q in (1, 4):  # marginals and a joint q-batch
            Zq = Z.reshape(-1, q, 3)
            p_ref, p_fast = ref.posterior(Zq), fast.posterior(Zq)
            assert torch.allclose(p_fast.mean, mu + sd * p_ref.mean, rtol=0, atol=1e-8)
            cov_ref = sd**2 * p_ref.distribution.covariance_matrix
            assert torch.allclose(p_fast.distribution.covariance_matrix, cov_ref, rtol=0, atol=1e-8)
        # and the unconditioned CholeskyGP is the base model's posterior, noise included
        p0, p1 = base.posterior(Z, observation_noise=True), CholeskyGP(base).posterior(Z, observation_noise=True)
        assert torch.allclose(p0.mean, p1.mean, atol=1e-8) and torch.allclose(p0.variance, p1.variance, atol=1e-8)
    assert fast.train_inputs[0].shape == (30, 3) and fast.train_targets.shape == (30,)


@pytest.mark.parametrize("kind", ["y", "f", "mean", "liar"])
def test_fantasies_on_the_cholesky_gp_equal_those_on_the_botorch_model(kind):
    model = toy_model(noise=0.05)
    X = torch.tensor([[0.2, 0.7], [0.8, 0.1]], dtype=torch.float64)
    Z = grid(6)
    ref = fantasize(model, X, kind, generator=torch.Generator().manual_seed(5))
    fast = fantasize(CholeskyGP(model), X, kind, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        a, b = ref.posterior(Z), fast.posterior(Z)
        assert torch.allclose(a.mean, b.mean, atol=1e-8) and torch.allclose(a.variance, b.variance, atol=1e-8)
        # and on top of that, a second (sequential) fantasy
        x2 = torch.tensor([[0.5, 0.5]], dtype=torch.float64)
        a = fantasize(ref, x2, kind, generator=torch.Generator().manual_seed(6)).posterior(Z)
        b = fantasize(fast, x2, kind, generator=torch.Generator().manual_seed(6)).posterior(Z)
        assert torch.allclose(a.mean, b.mean, atol=1e-8) and torch.allclose(a.variance, b.variance, atol=1e-8)


@pytest.mark.filterwarnings("ignore::botorch.exceptions.warnings.InputDataWarning")  # unstandardized on purpose
@pytest.mark.parametrize("fixed_noise", [False, True])
def test_tracked_points_keep_the_posterior_of_a_fresh_solve_through_conditioning(fixed_noise, monkeypatch):
    g = torch.Generator().manual_seed(11)
    lo, width = torch.tensor([-1.0, -1.0, 0.0]), torch.tensor([3.0, 2.0, 3.0])
    pts = lambda n: (lo + width * torch.rand(n, 3, generator=g)).double()  # noqa: E731
    X, P = pts(20), pts(40)
    Y = X.sum(-1, keepdim=True).sin() * 3 + 0.1 * torch.randn(20, 1, generator=g, dtype=torch.float64)
    base = _gp(X, Y, "matern", torch.full_like(Y, 0.02) if fixed_noise else None, standardize=True).eval()
    plain = CholeskyGP(base)
    tracked = plain.track(P)
    for k in (1, 2, 1):  # rank-one, rank-two, rank-one updates, with the same outcomes on both
        Xn = pts(k)
        Yn = Xn.sum(-1, keepdim=True).cos() + 0.3 * torch.randn(k, 1, generator=g, dtype=torch.float64)
        plain, tracked = plain.condition_on_observations(Xn, Yn), tracked.condition_on_observations(Xn, Yn)
    with torch.no_grad():
        for noise in (False, True):
            a = plain.posterior(P[:, None], observation_noise=noise)
            b = tracked.posterior(P[:, None], observation_noise=noise)
            assert torch.allclose(a.mean, b.mean, rtol=0, atol=1e-10)
            assert torch.allclose(a.variance, b.variance, rtol=0, atol=1e-10)
    solves = []
    real = torch.linalg.solve_triangular
    monkeypatch.setattr(torch.linalg, "solve_triangular", lambda *a, **kw: solves.append(1) or real(*a, **kw))
    with torch.no_grad():
        tracked.posterior(P[:, None])
        assert solves == []  # the tracked points are read from the cache, not solved for
        tracked.posterior(P[:7, None])
        tracked.posterior(P.reshape(-1, 2, 3))  # other points and joint q-batches are solved as before
        assert len(solves) == 2
    grads = []
    for model in (plain, tracked):  # a gradient to the tracked points bypasses the cache
        x = P[:, None].clone().requires_grad_(True)
        model.posterior(x).variance.sum().backward()
        grads.append(x.grad)
    assert grads[1].abs().max() > 0 and torch.allclose(grads[0], grads[1], rtol=0, atol=1e-10)
    with pytest.raises(ValueError, match="P must be"):
        plain.track(P[:, :2])
    with pytest.raises(ValueError, match="P must be finite"):
        plain.track(torch.full((2, 3), float("nan"), dtype=torch.float64))


def test_fast_kb_runs_on_the_cholesky_gp_and_reaches_the_acquisition_maximum():
    model = toy_model()
    set_lengthscale(model, 0.2)
    space = SearchSpace(BOUNDS, num_restarts=8, raw_samples=256)
    G = grid(101)
    seen = []

    def ucb(m):
        seen.append(m)
        return UpperConfidenceBound(m, beta=4.0)

    batch = KrigingBeliever(ucb, space, seed=3).propose(model, q=5, pending=torch.tensor([[0.5, 0.5]]).double())
    assert batch.shape == (5, 2) and len(seen) == 5 and all(isinstance(m, CholeskyGP) for m in seen)
    assert [len(m.train_targets) for m in seen] == [13, 14, 15, 16, 17]  # pending, then one point per pick
    with torch.no_grad():
        for m, x in zip(seen, batch):  # every pick is the argmax of its conditioned acquisition
            acq = UpperConfidenceBound(m, beta=4.0)
            assert float(acq(x[None, None])) >= float(acq(G[:, None]).max()) - 1e-4


def test_kb_batches_are_the_same_with_the_start_pool_tracked_or_solved_for(monkeypatch):
    import neurips26.bayesopt.kriging_believer as kb

    model = toy_model(n=30)
    space = SearchSpace(BOUNDS, num_restarts=4, raw_samples=64, chunk=16)
    pending = torch.tensor([[0.3, 0.6]], dtype=torch.float64)
    ucb = lambda m: UpperConfidenceBound(m, beta=4.0)  # noqa: E731
    tracked = KrigingBeliever(ucb, space, seed=1).propose(model, q=4, pending=pending)
    monkeypatch.setattr(kb, "TRACK_ENTRIES", 0)  # too big to track: scored in chunks by fresh solves
    solved = KrigingBeliever(ucb, space, seed=1).propose(model, q=4, pending=pending)
    assert torch.allclose(tracked, solved, rtol=0, atol=1e-6)


def test_fast_path_falls_back_or_refuses_where_it_does_not_apply():
    from botorch.acquisition.thompson_sampling import PathwiseThompsonSampling

    model = toy_model()
    space = SearchSpace(BOUNDS, num_restarts=2, raw_samples=32)
    ts = lambda m: PathwiseThompsonSampling(m)  # noqa: E731
    assert KrigingBeliever(ts, space).propose(model, q=2).shape == (2, 2)  # falls back to the BoTorch model
    with pytest.raises(ValueError, match="fast path does not apply"):
        KrigingBeliever(ts, space, fast=True).propose(model, q=2)
    model.train()
    assert "train mode" in cholesky_supported(model)
    with pytest.raises(ValueError, match="train mode"):
        CholeskyGP(model)
    with pytest.raises(TypeError, match="fast"):
        KrigingBeliever(ts, space, fast="yes")
