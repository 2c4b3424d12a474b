"""Test problems for minimax optimizers with closed forms (kept apart from the methods)."""

from __future__ import annotations

import math

import torch

from ..._checks import check_int, check_real

__all__ = ["LogBilinearGame"]


class LogBilinearGame:
    """The nonconvex–strongly-concave game

        f(X, Y) = c · Σ_ij log(1 + X_ij²) + tr(Xᵀ B Y) − (μ/2) ‖Y‖_F²,   X, Y ∈ R^{m×n}, B ∈ R^{m×m},

    with ``y*(X) = BᵀX / μ``, ``Φ(X) = max_Y f = c Σ log(1 + X²) + ‖BᵀX‖²/(2μ)`` and
    ``∇Φ(X) = 2cX/(1 + X²) + B BᵀX / μ`` in closed form. ``B`` is Gaussian with entries of
    variance ``1/m`` drawn from ``seed`` (so ``‖B‖_2 ≈ 2``); ``c < 0`` makes Φ nonconvex with
    several stationary points, ``c > 0`` nonconvex only away from the origin.

    Stochastic gradients add independent Gaussian noise of standard deviation ``noise`` per
    entry (``gradients(..., generator)``); a "minibatch" is one noise draw, so the same draw at
    two points gives the exact gradient difference (what a STORM estimator relies on).
    """

    def __init__(self, m: int = 20, n: int = 10, c: float = 1.0, mu: float = 1.0, seed: int = 0,
                 dtype: torch.dtype = torch.float64):
        self.m, self.n = check_int("m", m, minimum=1), check_int("n", n, minimum=1)
        self.c = check_real("c", c)
        self.mu = check_real("mu", mu, low=0.0, low_open=True)
        check_int("seed", seed, minimum=0)
        if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
            raise TypeError(f"dtype must be a floating-point torch.dtype, got {dtype!r}")
        gen = torch.Generator().manual_seed(int(seed))
        self.B = torch.randn(m, m, generator=gen, dtype=torch.float64).div_(math.sqrt(m)).to(dtype)
        self.dtype = dtype

    def initial_point(self, seed: int = 0, scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
        """(X₀, Y₀): X₀ Gaussian with entries of standard deviation ``scale``, Y₀ = 0."""
        gen = torch.Generator().manual_seed(int(seed))
        X = (scale * torch.randn(self.m, self.n, generator=gen, dtype=torch.float64)).to(self.dtype)
        return X, torch.zeros(self.m, self.n, dtype=self.dtype)

    def value(self, X: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
        return (self.c * torch.log1p(X * X).sum() + (X * (self.B @ Y)).sum() - 0.5 * self.mu * (Y * Y).sum())

    def gradients(self, X: torch.Tensor, Y: torch.Tensor, noise: float = 0.0,
                  generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(∇_X f, ∇_Y f) at (X, Y), each plus N(0, noise²) entries when ``noise > 0``."""
        gx = 2 * self.c * X / (1 + X * X) + self.B @ Y
        gy = self.B.T @ X - self.mu * Y
        if noise > 0:
            gx = gx + noise * torch.randn(gx.shape, generator=generator, dtype=gx.dtype)
            gy = gy + noise * torch.randn(gy.shape, generator=generator, dtype=gy.dtype)
        return gx, gy

    def y_star(self, X: torch.Tensor) -> torch.Tensor:
        return self.B.T @ X / self.mu

    def phi(self, X: torch.Tensor) -> torch.Tensor:
        return self.c * torch.log1p(X * X).sum() + 0.5 * ((self.B.T @ X) ** 2).sum() / self.mu

    def grad_phi(self, X: torch.Tensor) -> torch.Tensor:
        return 2 * self.c * X / (1 + X * X) + self.B @ (self.B.T @ X) / self.mu
