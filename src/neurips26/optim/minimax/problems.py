"""Test problems for minimax optimizers with closed forms (kept apart from the methods)."""

from __future__ import annotations

import math
from typing import Callable, Sequence

import torch

from ..._checks import check_int, check_real

__all__ = ["LogBilinearGame", "sensitivity"]


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


def sensitivity(problem, method: Callable[[list, list, float, float], object], grid_x: Sequence[float],
                grid_y: Sequence[float], *, steps: int = 1000, noise: float = 0.0, seed: int = 0,
                init_seed: int = 0) -> torch.Tensor:
    """The 2-D initial-stepsize map of a minimax optimizer: the final ‖∇Φ(X)‖ after ``steps``
    optimizer steps from the same start, for every pair (η_x, η_y) of ``grid_x × grid_y``.

    Args:
        problem: a game with closed-form stationarity, e.g. :class:`LogBilinearGame` (it needs
            ``initial_point(seed)``, ``gradients(X, Y, noise, generator)`` and ``grad_phi(X)``).
        method: ``(min_params, max_params, lr_x, lr_y) -> optimizer`` with the pair API
            (``step(closure)``; :class:`AdaSGDA`, :class:`AdaSGDAVR`, :class:`TiAda`, :class:`NeAda`,
            or a :class:`GDA` over two torch optimizers), e.g. ``lambda xs, ys, a, b: AdaSGDA(xs, ys, a, b)``.
        grid_x, grid_y: initial stepsizes (finite, > 0) of the min and of the max player.
        steps: optimizer steps per cell (a VR step evaluates the gradient twice, a NeAda step more).
        noise: standard deviation of the Gaussian gradient noise; one draw per step, reused by every
            closure call within that step (so a STORM estimator sees one minibatch).
        seed, init_seed: the noise stream's seed, the start's seed (the same in every cell).

    Returns: a float64 tensor ``(len(grid_x), len(grid_y))``; ``inf`` where the run diverged
    (a non-finite iterate or gradient). What no anchor gives, and what a practitioner checks before
    trusting "parameter-free": how wide the region of good (η_x, η_y) is."""
    for name, grid in (("grid_x", grid_x), ("grid_y", grid_y)):
        try:
            vals = [] if isinstance(grid, (str, bytes)) else list(grid)
        except TypeError:
            raise TypeError(f"{name} must be a sequence of stepsizes, got {type(grid).__name__}") from None
        if not vals:
            raise ValueError(f"{name} must be a non-empty sequence of stepsizes")
        for v in vals:
            check_real(name, v, low=0.0, low_open=True)
    if not callable(method):
        raise TypeError(f"method must be a callable (min_params, max_params, lr_x, lr_y) -> optimizer, "
                        f"got {type(method).__name__}")
    for attr in ("initial_point", "gradients", "grad_phi"):
        if not callable(getattr(problem, attr, None)):
            raise TypeError(f"problem must have a callable {attr!r} (see LogBilinearGame), got {type(problem).__name__}")
    check_int("steps", steps, minimum=1)
    check_real("noise", noise, low=0.0)
    check_int("seed", seed, minimum=0)
    check_int("init_seed", init_seed, minimum=0)
    out = torch.full((len(grid_x), len(grid_y)), math.inf, dtype=torch.float64)
    for i, ex in enumerate(grid_x):
        for j, ey in enumerate(grid_y):
            X, Y = (t.clone() for t in problem.initial_point(seed=init_seed))
            opt = method([X], [Y], float(ex), float(ey))
            gen = torch.Generator().manual_seed(int(seed))
            draw = {}

            def closure():
                X.grad, Y.grad = problem.gradients(X, Y)
                if noise > 0:
                    X.grad = X.grad + noise * draw["x"]
                    Y.grad = Y.grad + noise * draw["y"]
                return 0.0

            ok = True
            for _ in range(steps):
                if noise > 0:
                    draw["x"] = torch.randn(X.shape, generator=gen, dtype=X.dtype)
                    draw["y"] = torch.randn(Y.shape, generator=gen, dtype=Y.dtype)
                try:
                    opt.step(closure)
                except FloatingPointError:
                    ok = False
                    break
            if ok:
                g = torch.linalg.vector_norm(problem.grad_phi(X)).to(torch.float64)
                out[i, j] = g if bool(torch.isfinite(g)) and bool(torch.isfinite(Y).all()) else math.inf
    return out
