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
    feasible labels. Returns the batch mean; ``.backward()`` gives (ŷ − y)/batch with ŷ the
    chains' mean final state. ``last_mean`` holds ŷ of the last call.
    """

    def __init__(self, sampler, steps: int = 1, chains: int = 16, seed: int = 0):
        if not (isinstance(steps, int) and steps >= 1 and isinstance(chains, int) and chains >= 1):
            raise ValueError(f"steps and chains must be ints >= 1, got {steps!r}, {chains!r}")
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
        if theta.ndim != 2:
            raise ValueError(f"theta must be (batch, n_vars), got shape {tuple(theta.shape)}")
        y = torch.as_tensor(np.asarray(y_true), dtype=theta.dtype, device=theta.device)
        if y.shape != theta.shape:
            raise ValueError(f"y_true must have theta's shape {tuple(theta.shape)}, got {tuple(y.shape)}")
        if not torch.isfinite(theta).all():
            raise ValueError("theta holds NaN or Inf")
        y_np = y.detach().cpu().numpy().astype(np.int8)
        mean = self.expectation(theta.detach().cpu().double().numpy(), y_np)
        self.last_mean = torch.as_tensor(mean, dtype=theta.dtype, device=theta.device)
        return _SampledFY.apply(theta, y, self.last_mean)


def exact_fenchel_young_ksubset(theta: torch.Tensor, y_true: torch.Tensor, k: int,
                                temperature: float = 1.0) -> torch.Tensor:
    """The exact Fenchel–Young loss of k-subset, T log Z(θ/T) − θᵀy (batch mean), by the
    log-space elementary symmetric polynomial recursion; ≥ 0 and differentiable."""
    return (temperature * ksubset_log_partition(theta, k, temperature) - (theta * y_true).sum(-1)).mean()
