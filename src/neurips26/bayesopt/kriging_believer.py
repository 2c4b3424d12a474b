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

Fast path. Each pick costs one maximisation of the acquisition and one conditioning, so the
cost per batch is Q times the cost of a step; ``KrigingBeliever`` makes the step cheap
without changing what it computes. A fitted exact GP (a ``SingleTaskGP``, say) is copied once
per batch into a ``CholeskyGP``: the Cholesky factor L of K + Σ_noise and z = L⁻¹(y − m), with
the same (frozen) hyperparameters and transforms. Its posterior at X is μ = m + vᵀz,
σ² = k(x, x) − vᵀv with v = L⁻¹k(X_train, x) (the exact GP posterior, no approximation), and
conditioning on k new points appends k rows to L and z (a rank-k update, O(n²k)) instead of
rebuilding the GP's caches. The acquisition is then maximised with all L-BFGS-B restarts in
one batched call (BoTorch's ``gen_candidates_scipy``), started from the best of ``raw_samples``
Sobol points together with the previous step's optima (warm start: the conditioned acquisition
differs from the previous one only near the last pick). The Sobol pool is drawn once per batch
and tracked by the ``CholeskyGP`` (``track``): each conditioning extends its v's by k rows,
O(nk) per point, so scoring the pool costs no O(n²) solve after the first pick. The fast
path is taken for acquisitions that only read ``model.posterior`` (BoTorch's analytic and MC
acquisitions); others (``PathwiseThompsonSampling``) run on the BoTorch model as before.

Baselines: ``LocalPenalization`` (González et al. 2016), ``BUCB`` (Desautels et al. 2014,
written from its variance formula, independent of ``condition_on_observations``), each
driving its acquisition of ``neurips26.bayesopt.acquisition``,
``BatchThompson`` (BoTorch's pathwise Thompson sampling), ``QLogNEI`` (BoTorch's
qLogNoisyExpectedImprovement optimized jointly) and ``RandomProposer``. Every proposer has
``propose(model, q, pending=None) -> (q, d)`` tensor.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import torch
from botorch.acquisition import AnalyticAcquisitionFunction, MCAcquisitionFunction
from botorch.models.model import Model
from botorch.posteriors.gpytorch import GPyTorchPosterior
from gpytorch.distributions import MultivariateNormal
from gpytorch.likelihoods import FixedNoiseGaussianLikelihood
from linear_operator.operators import DenseLinearOperator, DiagLinearOperator
from linear_operator.utils.cholesky import psd_safe_cholesky
from torch import Tensor

from ._checks import check_int, check_points, check_real
from .acquisition import BatchUpperConfidenceBound, LocallyPenalizedAcquisition
from .space import SearchSpace

__all__ = ["fantasize", "CholeskyGP", "cholesky_supported", "KrigingBeliever", "LocalPenalization", "BUCB",
           "BatchThompson", "QLogNEI", "RandomProposer", "irgp_ucb", "irgp_beta"]

FANTASIES = ("y", "f", "mean", "liar")


class _Tracked(NamedTuple):
    """A ``CholeskyGP``'s cache at tracked points (``CholeskyGP.track``)."""
    P: Tensor  # the points, original input scale (m, d)
    Pt: Tensor  # the same on the model's input scale
    V: Tensor  # L⁻¹k(X, Pt), (n, m)
    mean: Tensor  # posterior mean at Pt, transformed outcome scale, (m,)
    var: Tensor  # posterior variance at Pt, no noise, (m,)

TRACK_ENTRIES = 2**24  # largest L⁻¹k(X, pool) KrigingBeliever tracks (entries; 128 MiB in float64)


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


class _Kernel:
    """k(x1, x2) of a GPyTorch kernel as a dense tensor, with a direct formula for the kernels
    BoTorch fits by default (RBF and Matérn ν ∈ {1/2, 3/2, 5/2} with ARD lengthscales,
    optionally inside a ScaleKernel) and the kernel module itself for any other kernel.
    Hyperparameters are read once and detached (they are frozen between refits)."""

    def __init__(self, module):
        from gpytorch.kernels import MaternKernel, RBFKernel, ScaleKernel

        self.module, self.kind, self.scale = module, None, None
        base = module
        if isinstance(module, ScaleKernel):
            base = module.base_kernel
            self.scale = module.outputscale.detach()
        if (isinstance(base, (RBFKernel, MaternKernel)) and base.active_dims is None and module.active_dims is None
                and (self.scale is None or self.scale.numel() == 1) and base.lengthscale.shape[:-2] == ()):
            self.kind = "rbf" if isinstance(base, RBFKernel) else f"matern{base.nu}"
            self.lengthscale = base.lengthscale.detach().reshape(-1)

    def __call__(self, x1: Tensor, x2: Tensor) -> Tensor:
        """k(x1, x2): (a, d), (b, d) -> (a, b)."""
        if self.kind is None:
            return self.module(x1, x2).to_dense()
        c = x2.mean(0, keepdim=True).detach()  # centring, as GPyTorch does, for accurate distances
        a, b = (x1 - c) / self.lengthscale, (x2 - c) / self.lengthscale
        r2 = ((a * a).sum(-1, keepdim=True) - 2 * a @ b.T + (b * b).sum(-1)).clamp_min(0.0)
        if self.kind == "rbf":
            k = torch.exp(-0.5 * r2)
        else:
            r = r2.clamp_min(1e-30).sqrt()
            if self.kind == "matern0.5":
                k = torch.exp(-r)
            elif self.kind == "matern1.5":
                k = (1 + math.sqrt(3) * r) * torch.exp(-math.sqrt(3) * r)
            else:
                k = (1 + math.sqrt(5) * r + 5.0 / 3.0 * r2) * torch.exp(-math.sqrt(5) * r)
        return k if self.scale is None else self.scale * k

    def diag(self, x: Tensor) -> Tensor:
        """k(x_i, x_i): (a, d) -> (a,)."""
        if self.kind is None:
            return self.module(x, x, diag=True).to_dense()
        one = torch.ones(len(x), dtype=x.dtype)
        return one if self.scale is None else self.scale * one


def _mean_fn(module):
    """m(x): (a, d) -> (a,) of a GPyTorch mean (constant and zero means read directly)."""
    from gpytorch.means import ConstantMean, ZeroMean

    if isinstance(module, ConstantMean) and module.constant.numel() == 1:
        c = module.constant.detach().reshape(())
        return lambda x: c.expand(len(x))
    if isinstance(module, ZeroMean):
        return lambda x: torch.zeros(len(x), dtype=x.dtype)
    return lambda x: module(x)


def cholesky_supported(model) -> str | None:
    """Why ``CholeskyGP(model)`` cannot stand for ``model`` (a sentence), or None when it can:
    an unbatched single-output BoTorch exact GP with a Gaussian likelihood, in eval mode, with no
    input transform or a point-wise invertible one (``Normalize``, ``InputStandardize``,
    ``Log10``, ``Warp``, or a chain of these)."""
    from botorch.models.transforms.input import ChainedInputTransform, ReversibleInputTransform
    from gpytorch.likelihoods import GaussianLikelihood
    from gpytorch.models import ExactGP

    if not (isinstance(model, Model) and isinstance(model, ExactGP)):
        return f"{type(model).__name__} is not a BoTorch exact GP"
    if model.training:
        return "the model is in train mode (call model.eval())"
    if model.num_outputs != 1 or model.train_inputs[0].ndim != 2 or model.train_targets.ndim != 1:
        return "the model is batched or has several outputs"
    if not isinstance(model.likelihood, (GaussianLikelihood, FixedNoiseGaussianLikelihood)):
        return f"likelihood {type(model.likelihood).__name__} is not Gaussian"
    t = getattr(model, "input_transform", None)
    parts = list(t.values()) if isinstance(t, ChainedInputTransform) else [t]
    if not all(p is None or isinstance(p, ReversibleInputTransform) for p in parts):
        return f"input transform {type(t).__name__} is not point-wise invertible"
    return None


class CholeskyGP(Model):
    """The exact posterior of a fitted single-output GP held as a Cholesky factor, with cheap
    conditioning: what kriging believer needs at every pick.

    Built from ``model`` (a BoTorch ``SingleTaskGP`` in eval mode, or any unbatched
    single-output ExactGP with a Gaussian likelihood, see ``cholesky_supported``), whose
    hyperparameters, input transform and outcome transform it keeps frozen. With
    K = k(X, X) + Σ_noise = L Lᵀ and z = L⁻¹(y − m(X)) on the transformed scale, the posterior
    at test points x (joint over a q-batch) is

        μ(x) = m(x) + vᵀz,   Σ(x, x') = k(x, x') − vᵀv',   v = L⁻¹ k(X, x),

    the same as GPyTorch's exact prediction. ``condition_on_observations(X_new, Y_new)``
    returns a new ``CholeskyGP`` whose factor is L extended by k rows,
    [L 0; Bᵀ L₂₂] with B = L⁻¹k(X, X_new) and L₂₂ = chol(k(X_new, X_new) + Σ_new − BᵀB), and
    z extended by L₂₂⁻¹(y_new − m(X_new) − Bᵀz): O(n²k) instead of a refactorization or a
    rebuild of GPyTorch's prediction caches. The new points' noise is the likelihood's
    (homoskedastic) or, for fixed noise, ``noise`` (transformed scale) or the mean training
    noise, as in ``fantasize``.

    It is a BoTorch ``Model``: ``posterior(X, observation_noise=..., posterior_transform=...)``
    returns a ``GPyTorchPosterior`` on the outcome's original scale, so analytic and MC
    acquisitions take it. ``train_inputs`` / ``train_targets`` (transformed scale, with the
    conditioned points), ``likelihood`` and ``outcome_transform`` are there for code that reads
    them; the base model is ``base``. Conditioning is unbatched: X_new (k, d), Y_new (k, 1).

    ValueError for a model it cannot stand for (the reason from ``cholesky_supported``)."""

    def __init__(self, model):
        super().__init__()
        why = cholesky_supported(model)
        if why is not None:
            raise ValueError(f"CholeskyGP needs an unbatched single-output exact GP in eval mode: {why}")
        with torch.no_grad():
            X = model.train_inputs[0].detach()  # transformed inputs (BoTorch stores them so in eval mode)
            y = model.train_targets.detach()
            kernel, mean = _Kernel(model.covar_module), _mean_fn(model.mean_module)
            noise = model.likelihood.noise.detach().reshape(-1).expand(len(X)).clone()
            L = psd_safe_cholesky(kernel(X, X) + torch.diag_embed(noise))
            z = torch.linalg.solve_triangular(L, (y - mean(X))[:, None], upper=False)[:, 0]
        self._set(model, X, y, noise, L, z, kernel, mean)

    def _set(self, base, X, y, noise, L, z, kernel, mean, tracked=None):
        torch.nn.Module.train(self, False)  # a posterior only: always in eval mode
        object.__setattr__(self, "base", base)  # not a submodule: nothing of it is trained here
        self._X, self._y, self._noise, self._L, self._z = X, y, noise, L, z
        self._tracked = tracked  # a _Tracked, or None
        self._kernel, self._mean = kernel, mean
        self._fixed_noise = isinstance(base.likelihood, FixedNoiseGaussianLikelihood)
        self._outcome = getattr(base, "outcome_transform", None)
        self._affine_in, self._affine_out = _affine_input(base), _affine_outcome(self._outcome)
        return self

    @property
    def batch_shape(self) -> torch.Size:
        return torch.Size()

    @property
    def num_outputs(self) -> int:
        return 1

    @property
    def train_inputs(self) -> tuple:
        return (self._X,)

    @property
    def train_targets(self) -> Tensor:
        return self._y

    @property
    def likelihood(self):
        return self.base.likelihood

    @property
    def outcome_transform(self):
        """The base model's outcome transform (``train_targets`` are on its scale); absent
        (AttributeError) when the base model has none."""
        if self._outcome is None:
            raise AttributeError("the base model has no outcome_transform")
        return self._outcome

    def _to_model_scale(self, X: Tensor) -> Tensor:
        if self._affine_in is not None:  # BoTorch's Normalize, written out (its call checks and copies)
            offset, coefficient = self._affine_in
            return (X - offset) / coefficient
        return self.base.transform_inputs(X) if hasattr(self.base, "input_transform") else X

    def _new_noise(self, k: int) -> Tensor:
        """Observation noise of k new points (transformed scale)."""
        if self._fixed_noise:
            return self.base.likelihood.noise.detach().mean().expand(k)
        return self._noise[:1].expand(k)

    def _solve(self, Xt: Tensor) -> Tensor:
        """L⁻¹k(X, Xt), (n, N), for N points on the model's input scale."""
        return torch.linalg.solve_triangular(self._L, self._kernel(self._X, Xt), upper=False)

    def track(self, P: Tensor) -> "CholeskyGP":
        """This posterior, also keeping its marginals at the points ``P`` (m, d) (original input
        scale) up to date: a new ``CholeskyGP`` (this one is untouched).

        Conditioning on k points then extends V = L⁻¹k(X, P) by k rows in O(nmk), and a
        ``posterior`` call at exactly those points, as m t-batches of one ((m, 1, d), which is
        what ``acq(P[:, None, :])`` asks for) and without a gradient to them, reads mean and
        variance from there instead of paying k(X, P) and an O(n²m) triangular solve: the cost
        of evaluating one pool of start points at every pick of a batch. The values are the
        same up to rounding."""
        P = check_points("P", P, self._X.shape[-1], allow_empty=False).to(self._X)
        with torch.no_grad():
            Pt = self._to_model_scale(P)
            V = self._solve(Pt)
            mean = self._mean(Pt) + V.T @ self._z
            var = self._kernel.diag(Pt) - (V * V).sum(0)
        return self._derived(self._X, self._y, self._noise, self._L, self._z, _Tracked(P, Pt, V, mean, var))

    def _derived(self, X, y, noise, L, z, tracked) -> "CholeskyGP":
        """A new ``CholeskyGP`` on this one's base model, kernel and mean with the given state."""
        out = CholeskyGP.__new__(CholeskyGP)
        Model.__init__(out)
        return out._set(self.base, X, y, noise, L, z, self._kernel, self._mean, tracked)

    def _marginals(self, X: Tensor, Xt: Tensor) -> tuple[Tensor, Tensor]:
        """Mean and variance (transformed scale, no noise) at the points of ``X`` (…, 1, d),
        from the tracked cache when ``X`` is exactly the tracked points, else computed."""
        flat = Xt.reshape(-1, Xt.shape[-1])
        tr = self._tracked
        if (tr is not None and X.shape[-2] == 1 and flat.shape == tr.Pt.shape and X.dtype == tr.P.dtype
                and not (X.requires_grad and torch.is_grad_enabled()) and torch.equal(X.reshape(flat.shape), tr.P)):
            return tr.mean, tr.var.clamp_min(1e-12)
        V = self._solve(flat)
        return self._mean(flat) + V.T @ self._z, (self._kernel.diag(flat) - (V * V).sum(0)).clamp_min(1e-12)

    def posterior(self, X: Tensor, output_indices=None, observation_noise=False, posterior_transform=None,
                  **kwargs):
        """Posterior at X (batch..., q, d), joint over q; original outcome scale."""
        if output_indices not in (None, [0]):
            raise ValueError(f"CholeskyGP has one output; output_indices={output_indices!r}")
        Xt = self._to_model_scale(X)
        *batch, q, d = Xt.shape
        flat = Xt.reshape(-1, d)
        if q == 1:
            mean, var = self._marginals(X, Xt)
            mean, var = mean.reshape(*batch, 1), var.reshape(*batch, 1)
            cov = None
        else:
            V = self._solve(flat)
            mean = (self._mean(flat) + V.T @ self._z).reshape(*batch, q)
            Vb = V.T.reshape(-1, q, V.shape[0])  # (B, q, n)
            kqq = torch.stack([self._kernel(x, x) for x in flat.reshape(-1, q, d)])
            cov = (kqq - Vb @ Vb.transpose(-1, -2)).reshape(*batch, q, q)
        if observation_noise is not False:
            if torch.is_tensor(observation_noise):
                obs = observation_noise.to(mean).reshape(*batch, q)
            else:
                obs = self._new_noise(1).expand(*batch, q)
            if cov is None:
                var = var + obs
            else:
                cov = cov + torch.diag_embed(obs)
        if self._affine_out is not None:  # Standardize's untransform, written out
            mu, sd = self._affine_out
            mean = mu + sd * mean
            if cov is None:
                var = sd * sd * var
            else:
                cov = sd * sd * cov
        covar = DiagLinearOperator(var) if cov is None else DenseLinearOperator(cov)
        post = GPyTorchPosterior(MultivariateNormal(mean, covar))
        if self._outcome is not None and self._affine_out is None:
            post = self._outcome.untransform_posterior(post, X=Xt)
        return post if posterior_transform is None else posterior_transform(posterior=post, X=Xt)

    def condition_on_observations(self, X: Tensor, Y: Tensor, noise: Tensor | None = None, **kwargs):
        """This posterior conditioned on Y (k, 1) observed at X (k, d), original scales: a new
        ``CholeskyGP`` (this one is untouched). ``noise`` (k, 1): the new points' noise
        variance on the transformed scale (default: see the class docstring)."""
        if X.ndim != 2 or Y.shape != (len(X), 1):
            raise ValueError(f"CholeskyGP conditions on X (k, d) and Y (k, 1) only (no batches), got X "
                             f"{tuple(X.shape)} and Y {tuple(Y.shape)}")
        with torch.no_grad():
            Xt = self._to_model_scale(X)
            if self._affine_out is not None:
                Yt = (Y - self._affine_out[0]) / self._affine_out[1]
            else:
                Yt = Y if self._outcome is None else self._outcome(Y, X=Xt)[0]
            yt = Yt[:, 0].to(self._y)
            k, n = len(Xt), len(self._X)
            nz = noise.reshape(-1).to(self._y) if noise is not None else self._new_noise(k)
            B = self._solve(Xt)
            S = self._kernel(Xt, Xt) + torch.diag_embed(nz) - B.T @ B
            L22 = psd_safe_cholesky(0.5 * (S + S.T))
            L = self._L.new_zeros(n + k, n + k)
            L[:n, :n], L[n:, :n], L[n:, n:] = self._L, B.T, L22
            z2 = torch.linalg.solve_triangular(L22, (yt - self._mean(Xt) - B.T @ self._z)[:, None], upper=False)
            tracked = self._tracked
            if tracked is not None:  # the k new rows of V at the tracked points, and their effect
                W = torch.linalg.solve_triangular(L22, self._kernel(Xt, tracked.Pt) - B.T @ tracked.V,
                                                  upper=False)  # (k, m)
                tracked = tracked._replace(V=torch.cat([tracked.V, W]), mean=tracked.mean + W.T @ z2[:, 0],
                                           var=tracked.var - (W * W).sum(0))
            return self._derived(torch.cat([self._X, Xt]), torch.cat([self._y, yt]),
                                 torch.cat([self._noise, nz.expand(k)]), L, torch.cat([self._z, z2[:, 0]]), tracked)


def _affine_input(model) -> tuple[Tensor, Tensor] | None:
    """(offset, coefficient) when ``model``'s input transform is a plain BoTorch ``Normalize``
    applied in eval mode (x ↦ (x − offset) / coefficient), else None."""
    from botorch.models.transforms.input import Normalize

    t = getattr(model, "input_transform", None)
    if (type(t) is Normalize and not t.training and t.transform_on_eval and getattr(t, "indices", None) is None
            and t.offset.ndim == 2 and t.offset.shape[0] == 1):
        return t.offset.detach().reshape(-1), t.coefficient.detach().reshape(-1)
    return None


def _affine_outcome(t) -> tuple[Tensor, Tensor] | None:
    """(mean, sd) scalars when ``t`` is a plain one-output BoTorch ``Standardize`` in eval mode
    (y ↦ (y − mean) / sd), else None."""
    from botorch.models.transforms.outcome import Standardize

    if (type(t) is Standardize and not t.training and t._outputs is None and t._m == 1
            and t.means.numel() == 1 and t.stdvs.numel() == 1):
        return t.means.detach().reshape(()), t.stdvs.detach().reshape(())
    return None


class KrigingBeliever:
    """Greedy batch by (randomized) kriging believer.

    ``acquisition(model) -> AcquisitionFunction`` is called once per pick on the current
    (conditioned) model. ``fantasy`` selects the pretended outcome (``"y"``: randomized KB,
    the default; ``"f"``; ``"mean"``: plain KB; ``"liar"``: constant liar with ``lie``).

    ``fast`` (default None: when it applies) runs the picks on a ``CholeskyGP`` copy of the
    model (rank-k conditioning, exact posterior) and, in a box, maximizes each acquisition
    with all restarts in one batched L-BFGS-B call warm-started from the previous pick's
    optima (module docstring). It applies when ``cholesky_supported(model)`` and the
    acquisition is a BoTorch analytic or MC acquisition (the factory's first acquisition is
    built on the ``CholeskyGP`` to see; when it is not, the factory is called again on
    ``model``); otherwise the picks run on ``model`` itself with ``space.maximize``
    (``fast=False`` forces that; ``fast=True`` raises ValueError where the fast path does not
    apply). Both paths draw the fantasies from the same distribution and maximize the same
    acquisitions (equal to rounding); only the optimizer's start points and random streams
    differ. The optimizer budget is the space's: ``raw_samples`` Sobol points (seeded from this
    proposer's generator) and ``num_restarts`` starts per pick."""

    def __init__(self, acquisition: Callable, space: SearchSpace, fantasy: str = "y", lie: float | None = None,
                 seed: int = 0, fast: bool | None = None):
        if fantasy not in FANTASIES:
            raise ValueError(f"fantasy must be one of {FANTASIES}, got {fantasy!r}")
        if lie is not None:
            check_real("lie", lie)
        if fast not in (None, True, False):
            raise TypeError(f"fast must be None, True or False, got {fast!r}")
        self.acquisition, self.space, self.fantasy, self.lie = acquisition, space, fantasy, lie
        self.fast = fast
        self.generator = torch.Generator().manual_seed(seed)

    def propose(self, model, q: int = 1, pending: Tensor | None = None) -> Tensor:
        _check_q(q)
        pending = _check_pending(pending, self.space)
        lie = self.lie
        if self.fantasy == "liar" and lie is None:
            lie = float(_train_y(model).min())
        has_pending = pending is not None and len(pending)
        why = "fast=False" if self.fast is False else cholesky_supported(model)
        acq = pool = None
        tracked = False
        if why is None:
            current = CholeskyGP(model)
            if self.space.candidates is None:  # one pool of start points for the whole batch, tracked
                pool = self._sobol_pool()
                n_end = len(current.train_targets) + q + (len(pending) if has_pending else 0)
                tracked = len(pool) * n_end <= TRACK_ENTRIES
                if tracked:
                    current = current.track(pool)
            if has_pending:
                current = fantasize(current, pending, self.fantasy, lie, self.generator)
            acq = self.acquisition(current)
            if not isinstance(acq, (AnalyticAcquisitionFunction, MCAcquisitionFunction)):
                why, acq = f"the acquisition {type(acq).__name__} is not a BoTorch analytic or MC acquisition", None
        if why is not None:
            if self.fast:
                raise ValueError(f"fast=True but the fast path does not apply: {why}")
            current = model
            if has_pending:
                current = fantasize(current, pending, self.fantasy, lie, self.generator)
        box = why is None and pool is not None
        picks, warm = [], None
        for i in range(q):
            if acq is None:
                acq = self.acquisition(current)
            if box:
                x, warm = self._maximize_box(acq, pool, warm, tracked)
            else:
                x = self.space.maximize(acq)
            picks.append(x)
            acq = None
            if i + 1 < q:
                current = fantasize(current, x, self.fantasy, lie, self.generator)
        return torch.cat(picks)

    def _sobol_pool(self) -> Tensor:
        """``raw_samples`` scrambled Sobol points in the box (seeded from this proposer's generator)."""
        from torch.quasirandom import SobolEngine

        b, sp = self.space.bounds, self.space
        seed = int(torch.randint(2**31 - 1, (1,), generator=self.generator))
        return b[0] + (b[1] - b[0]) * SobolEngine(sp.dim, scramble=True, seed=seed).draw(sp.raw_samples,
                                                                                          dtype=torch.float64)

    def _maximize_box(self, acq, pool: Tensor, warm: Tensor | None, tracked: bool) -> tuple[Tensor, Tensor]:
        """argmax of ``acq`` over the box (1, d), and the end points of all restarts (r, d).

        Start points: ``num_restarts`` of the ``pool`` (the batch's Sobol points; when the
        model tracks them, ``tracked``, they are scored in one call at no solve) and the
        previous pick's end points ``warm``, drawn as BoTorch's ``initialize_q_batch`` does (the
        best one, then the rest with probability ∝ exp(standardized value)); then one batched
        L-BFGS-B run over all restarts (``gen_candidates_scipy``)."""
        from botorch.generation.gen import gen_candidates_scipy

        b, sp = self.space.bounds, self.space
        with torch.no_grad():  # the tracked pool in one call (a cache hit), anything else in chunks
            vals = [acq(pool[:, None, :])] if tracked else [acq(c[:, None, :]) for c in pool.split(sp.chunk)]
            if warm is not None:
                vals += [acq(c[:, None, :]) for c in warm.split(sp.chunk)]
                pool = torch.cat([pool, warm])
            vals = torch.cat(vals)
        starts = pool[_boltzmann_pick(vals, min(sp.num_restarts, len(pool)), self.generator)]
        X, v = gen_candidates_scipy(starts[:, None, :], acq, lower_bounds=b[0], upper_bounds=b[1])
        X = X.detach()[:, 0, :]
        return X[int(v.argmax())][None], X


def _boltzmann_pick(values: Tensor, k: int, generator: torch.Generator, eta: float = 1.0) -> Tensor:
    """k distinct indices into ``values``: the argmax, then k − 1 more drawn without replacement
    with weights exp(eta · standardized value) (non-finite values get a weight of 1e-300)."""
    finite = torch.isfinite(values)
    if not finite.any():
        return torch.randperm(len(values), generator=generator)[:k]
    v = torch.where(finite, values, values[finite].min())
    z = (v - v.mean()) / v.std().clamp_min(1e-12) if len(v) > 1 else v * 0
    w = torch.where(finite, torch.exp(eta * (z - z.max())), torch.zeros_like(z)).clamp_min(1e-300)
    best = int(v.argmax())
    w[best] = 0.0
    rest = torch.multinomial(w, k - 1, replacement=False, generator=generator) if k > 1 else w.new_zeros(0).long()
    return torch.cat([torch.tensor([best]), rest])


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
