"""Randomized kriging believer (KB) for batch and asynchronous Bayesian optimization, with
the batch baselines it is compared against, all on BoTorch models.

Kriging believer builds a batch greedily: pick x₁ = argmax α(x | model), pretend its
outcome is known, condition the model on it (a rank-one update of the GP's caches through
``condition_on_observations``; no refit), pick x₂ from the conditioned model, and so on.
Pending (running) evaluations enter the same way before the first pick. The variants differ
only in the outcome they pretend:

* ``fantasy="y"`` (randomized KB): ỹ ~ N(μ(x), σ²(x) + σ_n²), a draw of the *observation*
  from the current posterior predictive. Then the conditioned mean is a martingale:
  E[μ_fant(z)] = μ(z) and Var[μ_fant(z)] = σ²(z) − σ²_fant(z), exactly the spread of the
  posterior mean the real outcome would cause, so the fantasised model is an honest sample
  of the model we will have once the evaluation returns.
* ``fantasy="f"``: ỹ ~ N(μ(x), σ²(x)), a draw of f without noise (then conditioned as a
  noisy observation). The mean is unbiased but under-dispersed; kept to show why the noise matters.
* ``fantasy="mean"`` (plain KB, Ginsbourger et al. 2010): ỹ = μ(x); the mean never moves,
  only the variance shrinks.
* ``fantasy="liar"`` (constant liar): ỹ = a constant, by default the worst observed value.

Any BoTorch acquisition that is built from a model can drive it: pass a factory
``model -> AcquisitionFunction`` (UCB, LogEI, ``PathwiseThompsonSampling``, ``irgp_ucb``),
because each pick needs the acquisition rebuilt on the conditioned model.

Baselines: ``LocalPenalization`` (González et al. 2016), ``BUCB`` (Desautels et al. 2014,
written from its variance formula, independent of ``condition_on_observations``), each
driving its acquisition of ``neurips26.bayesopt.acquisition``,
``BatchThompson`` (BoTorch's pathwise Thompson sampling), ``QLogNEI`` (BoTorch's
qLogNoisyExpectedImprovement optimized jointly) and ``RandomProposer``. Every proposer has
``propose(model, q, pending=None) -> (q, d)`` tensor.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import Tensor

from ._checks import check_int, check_points, check_real
from .acquisition import BatchUpperConfidenceBound, LocallyPenalizedAcquisition
from .space import SearchSpace

__all__ = ["fantasize", "KrigingBeliever", "LocalPenalization", "BUCB", "BatchThompson", "QLogNEI",
           "RandomProposer", "irgp_ucb", "irgp_beta"]

FANTASIES = ("y", "f", "mean", "liar")


def _noise_kwargs(model, n: int) -> dict:
    """Conditioning a fixed-noise model needs the noise of the new points (in the model's
    transformed outcome scale); use the mean training noise."""
    from gpytorch.likelihoods import FixedNoiseGaussianLikelihood

    if isinstance(model.likelihood, FixedNoiseGaussianLikelihood):
        return {"noise": model.likelihood.noise.mean().expand(n, 1).clone()}
    return {}


def fantasize(model, X: Tensor, fantasy: str = "y", lie: float | None = None,
              generator: torch.Generator | None = None, num_fantasies: int | None = None):
    """``model`` conditioned on one pretended outcome per row of ``X`` (n, d), drawn jointly
    according to ``fantasy`` (module docstring). Returns a new model; ``model`` is untouched.
    With ``num_fantasies`` the draws are independent and the model is batched over them
    (batch shape ``(num_fantasies,)``), one rank-n update for all."""
    if fantasy not in FANTASIES:
        raise ValueError(f"fantasy must be one of {FANTASIES}, got {fantasy!r}")
    X = torch.as_tensor(X, dtype=torch.float64)
    check_points("X", X, _model_dim(model), allow_empty=False)
    if lie is not None:
        check_real("lie", lie)
    with torch.no_grad():
        if fantasy == "liar":
            if lie is None:
                lie = float(_train_y(model).min())
            y = torch.full((len(X), 1), float(lie), dtype=X.dtype)
            model.posterior(X).mean  # conditioning needs the prediction caches a posterior call builds
        else:
            post = model.posterior(X, observation_noise=(fantasy == "y"))
            if fantasy == "mean":
                y = post.mean
            else:
                mvn = post.distribution
                L = torch.linalg.cholesky(_psd(mvn.covariance_matrix))
                shape = (len(X), 1) if num_fantasies is None else (num_fantasies, len(X), 1)
                y = post.mean + L @ torch.randn(*shape, dtype=X.dtype, generator=generator)
        if num_fantasies is not None:
            y = y.expand(num_fantasies, len(X), 1)
            X = X.expand(num_fantasies, *X.shape)
        kw = _noise_kwargs(model, len(X[-1]) if X.ndim == 3 else len(X))
        if kw and num_fantasies is not None:
            kw["noise"] = kw["noise"].expand(num_fantasies, -1, 1)
        return model.condition_on_observations(X, y, **kw)


def _model_dim(model) -> int | None:
    """d of the inputs ``model`` takes (None when it does not say)."""
    try:
        return int(model.train_inputs[0].shape[-1])
    except (AttributeError, IndexError, TypeError):
        return None


def _check_pending(pending, space: SearchSpace) -> Tensor | None:
    """``pending`` as given, after checking it is None or a finite (p, d) tensor."""
    if pending is None:
        return None
    return check_points("pending", pending, space.dim, rows="p")


def _psd(S: Tensor) -> Tensor:
    return S + 1e-10 * S.diagonal().mean().clamp_min(1e-12) * torch.eye(len(S), dtype=S.dtype)


def _train_y(model) -> Tensor:
    """Training targets on the original scale (undoing a ``Standardize``)."""
    y = model.train_targets[..., None]
    if hasattr(model, "outcome_transform"):
        y, _ = model.outcome_transform.untransform(y)
    return y


class KrigingBeliever:
    """Greedy batch by (randomized) kriging believer.

    ``acquisition(model) -> AcquisitionFunction`` is called once per pick on the current
    (conditioned) model. ``fantasy`` selects the pretended outcome (``"y"``: randomized KB,
    the default; ``"f"``; ``"mean"``: plain KB; ``"liar"``: constant liar with ``lie``)."""

    def __init__(self, acquisition: Callable, space: SearchSpace, fantasy: str = "y", lie: float | None = None,
                 seed: int = 0):
        if fantasy not in FANTASIES:
            raise ValueError(f"fantasy must be one of {FANTASIES}, got {fantasy!r}")
        if lie is not None:
            check_real("lie", lie)
        self.acquisition, self.space, self.fantasy, self.lie = acquisition, space, fantasy, lie
        self.generator = torch.Generator().manual_seed(seed)

    def propose(self, model, q: int = 1, pending: Tensor | None = None) -> Tensor:
        _check_q(q)
        pending = _check_pending(pending, self.space)
        lie = self.lie
        if self.fantasy == "liar" and lie is None:
            lie = float(_train_y(model).min())
        current = model
        if pending is not None and len(pending):
            current = fantasize(current, pending, self.fantasy, lie, self.generator)
        picks = []
        for i in range(q):
            x = self.space.maximize(self.acquisition(current))
            picks.append(x)
            if i + 1 < q:
                current = fantasize(current, x, self.fantasy, lie, self.generator)
        return torch.cat(picks)


def _check_q(q):
    check_int("q", q, 1)


class BUCB:
    """Batch UCB (Desautels, Krause & Burdick 2014): the q points one at a time, each the
    argmax of ``BatchUpperConfidenceBound`` with the pending points and those already picked
    as ``X_pending``: μ from the real data, σ from the model that has also "seen" the batch
    so far (a variance that does not depend on the outcomes)."""

    def __init__(self, space: SearchSpace, beta: float = 4.0):
        check_real("beta", beta, low=0.0)
        self.space, self.beta = space, beta

    def acquisition(self, model, P: Tensor | None) -> BatchUpperConfidenceBound:
        """The acquisition of the next pick, given the pending inputs ``P`` (p, d) or None."""
        return BatchUpperConfidenceBound(model, self.beta, X_pending=P)

    def propose(self, model, q: int = 1, pending: Tensor | None = None) -> Tensor:
        _check_q(q)
        pending = _check_pending(pending, self.space)
        P = pending if pending is not None and len(pending) else None
        picks = []
        for _ in range(q):
            x = self.space.maximize(self.acquisition(model, P))
            picks.append(x)
            P = x if P is None else torch.cat([P, x])
        return torch.cat(picks)


class LocalPenalization:
    """Local penalization (González, Dai, Hennig & Lawrence 2016), for maximization.

    Each chosen or pending point x_j excludes the ball where f cannot exceed the best value
    M given a Lipschitz constant L: the acquisition g(α(x)) is multiplied by
    φ_j(x) = Φ((L‖x − x_j‖ − M + μ(x_j)) / σ(x_j)) (``LocallyPenalizedAcquisition``).
    g = softplus makes α positive. L is the largest gradient norm of the posterior mean on
    ``n_lipschitz`` Sobol points (as in the paper), M the best observed value. The first
    pick, with nothing pending, maximizes α itself."""

    def __init__(self, acquisition: Callable, space: SearchSpace, n_lipschitz: int = 512, seed: int = 0):
        n_lipschitz = check_int("n_lipschitz", n_lipschitz, 1)
        self.acquisition, self.space, self.n_lipschitz, self.seed = acquisition, space, n_lipschitz, seed

    def lipschitz(self, model) -> float:
        from torch.quasirandom import SobolEngine

        b = self.space.bounds
        x = b[0] + (b[1] - b[0]) * SobolEngine(self.space.dim, scramble=True, seed=self.seed).draw(
            self.n_lipschitz, dtype=torch.float64)
        x.requires_grad_(True)
        mu = model.posterior(x).mean.sum()
        (g,) = torch.autograd.grad(mu, x)
        return max(float(g.norm(dim=-1).max()), 1e-7)

    def propose(self, model, q: int = 1, pending: Tensor | None = None) -> Tensor:
        _check_q(q)
        pending = _check_pending(pending, self.space)
        L = self.lipschitz(model)
        M = float(_train_y(model).max())
        base = self.acquisition(model)
        centers = pending if pending is not None and len(pending) else None
        picks = []
        for _ in range(q):
            acq = base if centers is None else LocallyPenalizedAcquisition(model, base, L, M, X_pending=centers)
            x = self.space.maximize(acq)
            picks.append(x)
            centers = x if centers is None else torch.cat([centers, x])
        return torch.cat(picks)


class BatchThompson:
    """Batch Thompson sampling: q independent pathwise posterior samples (BoTorch's
    ``PathwiseThompsonSampling``, Matheron's rule), each maximized. Pending points do not
    enter (independent samples already diversify), as in BoTorch."""

    def __init__(self, space: SearchSpace):
        self.space = space

    def propose(self, model, q: int = 1, pending: Tensor | None = None) -> Tensor:
        from botorch.acquisition.thompson_sampling import PathwiseThompsonSampling

        _check_q(q)
        if self.space.candidates is None:
            return self.space.maximize(PathwiseThompsonSampling(model), q=q)
        return torch.cat([self.space.maximize(PathwiseThompsonSampling(model)) for _ in range(q)])


class QLogNEI:
    """BoTorch's qLogNoisyExpectedImprovement over the training inputs, the q points
    optimized jointly (continuous) or sequentially-greedily (discrete), pending as X_pending."""

    def __init__(self, space: SearchSpace, mc_samples: int = 128):
        mc_samples = check_int("mc_samples", mc_samples, 1)
        self.space, self.mc_samples = space, mc_samples

    def propose(self, model, q: int = 1, pending: Tensor | None = None) -> Tensor:
        from botorch.acquisition.logei import qLogNoisyExpectedImprovement
        from botorch.sampling import SobolQMCNormalSampler

        _check_q(q)
        pending = _check_pending(pending, self.space)
        X_base = model.train_inputs[0]
        if hasattr(model, "input_transform"):
            X_base = model.input_transform.untransform(X_base)
        acqf = qLogNoisyExpectedImprovement(model, X_baseline=X_base,
                                            sampler=SobolQMCNormalSampler(torch.Size([self.mc_samples])),
                                            X_pending=pending if pending is not None and len(pending) else None)
        return self.space.maximize(acqf, q=q)


class RandomProposer:
    """Uniform points in the box (or uniform choices among the candidates)."""

    def __init__(self, space: SearchSpace, seed: int = 0):
        self.space = space
        self.generator = torch.Generator().manual_seed(seed)

    def propose(self, model, q: int = 1, pending: Tensor | None = None) -> Tensor:
        _check_q(q)
        if self.space.candidates is not None:
            return self.space.candidates[torch.randint(len(self.space.candidates), (q,), generator=self.generator)]
        b = self.space.bounds
        return b[0] + (b[1] - b[0]) * torch.rand(q, self.space.dim, generator=self.generator, dtype=torch.float64)


def irgp_beta(domain_size: int, generator: torch.Generator | None = None) -> float:
    """IRGP-UCB's confidence parameter (Takeno, Inatsu & Karasuyama 2023): a draw from the
    two-parameter exponential distribution with shift s = 2 log(|D|/2) and rate λ = 1/2. It
    does not grow with t. For a continuous domain pass the size of a discretization."""
    check_real("domain_size", domain_size, low=2.0)
    e = -2.0 * math.log(1.0 - float(torch.rand(1, generator=generator, dtype=torch.float64)))
    return max(2 * math.log(domain_size / 2), 0.0) + e


def irgp_ucb(domain_size: int, generator: torch.Generator | None = None) -> Callable:
    """A factory ``model -> UpperConfidenceBound`` with a fresh IRGP-UCB β at every call."""
    check_real("domain_size", domain_size, low=2.0)
    from botorch.acquisition import UpperConfidenceBound

    return lambda model: UpperConfidenceBound(model, beta=irgp_beta(domain_size, generator))
