"""Fenchel–Young losses whose expectation comes from an RLNS sampler.

For the regularized prediction ŷ(θ) = E_p[Y], p ∝ exp(θᵀy / T) on the feasible set, the
Fenchel–Young loss L(θ; y) = T log Z(θ/T) − θᵀy has the gradient ∇_θ L = E_p[Y] − y. RLNS
estimates that expectation: chains started at the label y run K steps, and their mean
state replaces E_p[Y]. K sets what the loss is:

* K = 1 (started at the label): E over one block-Gibbs move from y, the gradient of the
  negative block pseudolikelihood E_S[−log p(y_S | y_−S)];
* K → ∞: the chains forget the label and the gradient tends to the exact MLE's, E_p[Y] − y.
"""

from __future__ import annotations

import numpy as np
import torch

from .._checks import check_int, check_real
from ._checks import check_feasible
from .exact import ksubset_log_partition

__all__ = ["FenchelYoungLoss", "exact_fenchel_young_ksubset"]


class _SampledFY(torch.autograd.Function):
    @staticmethod
    def forward(ctx, theta, y_true, y_hat):
        diff = y_hat - y_true
        ctx.save_for_backward(diff)
        # The value is θᵀ(ŷ − y), the loss linearized at θ: its gradient with ŷ held is
        # exactly the Fenchel–Young gradient estimate (log Z itself is not available).
        return (theta * diff).sum(dim=-1).mean()

    @staticmethod
    def backward(ctx, grad_out):
        (diff,) = ctx.saved_tensors
        return grad_out * diff / diff.shape[0], None, None


class FenchelYoungLoss:
    """``loss = FenchelYoungLoss(sampler, steps=K, chains=C)``; ``loss(theta, y_true)``.

    Args:
        sampler: an :class:`~neurips26.combinatorial.rlns.RLNS` chain (its regularizer sets
            the regularized prediction: Entropic is the Gibbs/MLE loss, Perturbed the
            perturbed-optimizer loss restricted to local moves).
        steps: K, the RLNS moves per estimate.
        chains: chains per instance, started at the label.
        seed: seeds the sampler's random stream (advanced at every call).

    ``theta`` (batch, n_vars) is a tensor (a model's output), ``y_true`` (batch, n_vars)
    feasible labels: a label that is not a feasible solution of the sampler's problem is
    refused with the constraint it breaks (ValueError). Returns the batch mean;
    ``.backward()`` gives (ŷ − y)/batch with ŷ the chains' mean final state. ``last_mean``
    holds ŷ of the last call. NumPy integers are accepted for ``steps``, ``chains`` and
    ``seed``.
    """

    def __init__(self, sampler, steps: int = 1, chains: int = 16, seed: int = 0):
        if not (callable(getattr(sampler, "run", None)) and hasattr(sampler, "problem")):
            raise TypeError(f"sampler must be an RLNS chain (with run() and problem), got {type(sampler).__name__}")
        steps = check_int("steps", steps, 1)
        chains = check_int("chains", chains, 1)
        seed = check_int("seed", seed, 0)
        self.sampler, self.steps, self.chains = sampler, steps, chains
        self.rng = np.random.default_rng(seed)
        self.last_mean: torch.Tensor | None = None

    def expectation(self, theta: np.ndarray, y_true: np.ndarray) -> np.ndarray:
        """ŷ (batch, n_vars): the mean over ``chains`` chains of the state after K moves."""
        batch, n = y_true.shape
        Y0 = np.repeat(y_true, self.chains, axis=0)
        th = np.repeat(theta, self.chains, axis=0)
        Y = self.sampler.run(Y0, th, self.steps, self.rng)
        return Y.reshape(batch, self.chains, n).mean(axis=1)

    def __call__(self, theta: torch.Tensor, y_true) -> torch.Tensor:
        if not isinstance(theta, torch.Tensor):
            raise TypeError(f"theta must be a torch tensor (batch, n_vars), got {type(theta).__name__}")
        if theta.ndim != 2:
            raise ValueError(f"theta must be (batch, n_vars), got shape {tuple(theta.shape)}")
        y = torch.as_tensor(np.asarray(y_true), dtype=theta.dtype, device=theta.device)
        if y.shape != theta.shape:
            raise ValueError(f"y_true must have theta's shape {tuple(theta.shape)}, got {tuple(y.shape)}")
        if not torch.isfinite(theta).all():
            raise ValueError("theta holds NaN or Inf")
        check_feasible(self.sampler.problem, y.detach().cpu().numpy(), "y_true")
        y_np = y.detach().cpu().numpy().astype(np.int8)
        mean = self.expectation(theta.detach().cpu().double().numpy(), y_np)
        self.last_mean = torch.as_tensor(mean, dtype=theta.dtype, device=theta.device)
        return _SampledFY.apply(theta, y, self.last_mean)


def exact_fenchel_young_ksubset(theta: torch.Tensor, y_true: torch.Tensor, k: int,
                                temperature: float = 1.0) -> torch.Tensor:
    """The exact Fenchel–Young loss of k-subset, T log Z(θ/T) − θᵀy (batch mean), by the
    log-space elementary symmetric polynomial recursion; ≥ 0 and differentiable.

    ``y_true`` has θ's shape and every row a feasible label (0/1 entries summing to k);
    θ is finite. Both are checked at every call (a reference, not a hot path: the checks
    read the tensors on the host)."""
    k = check_int("k", k)
    check_real("temperature", temperature, low=0, low_open=True)
    if not isinstance(theta, torch.Tensor) or not isinstance(y_true, torch.Tensor):
        raise TypeError(f"theta and y_true must be torch tensors, got {type(theta).__name__} and "
                        f"{type(y_true).__name__}")
    if y_true.shape != theta.shape:
        raise ValueError(f"y_true must have theta's shape {tuple(theta.shape)}, got {tuple(y_true.shape)}")
    if not torch.isfinite(theta).all():
        raise ValueError("theta holds NaN or Inf")
    if theta.shape[-1] and 0 < k < theta.shape[-1]:
        from .problems import KSubset

        check_feasible(KSubset(theta.shape[-1], k), y_true.detach().reshape(-1, theta.shape[-1]).cpu().numpy(),
                       "y_true")
    return (temperature * ksubset_log_partition(theta, k, temperature) - (theta * y_true).sum(-1)).mean()
