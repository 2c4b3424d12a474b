"""Online problems for decentralized online convex optimization: a sequence of per-node
convex losses f_{t,i} over T rounds and n nodes, known in advance (a simulation), with
their gradients, values and the best fixed decision in hindsight (the regret's comparator).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ._checks import check_data, check_int, check_real

__all__ = ["OnlineProblem", "LinearLosses", "LeastSquaresLosses", "LogisticLosses", "quadratic_min_on_ball"]


class OnlineProblem(Protocol):
    """A sequence of per-node convex losses f_{t,i}, known in advance (for simulation)."""

    T: int
    n: int
    d: int

    def grad(self, t: int, X: np.ndarray) -> np.ndarray:
        """(..., n, d): ∇f_{t,i}(X_i) for every node i (leading dims: independent runs)."""

    def value(self, t: int, X: np.ndarray) -> np.ndarray:
        """(..., n): f_{t,i}(X_i), each node's loss at its own point (bandit feedback)."""

    def network_value(self, t: int, X: np.ndarray) -> np.ndarray:
        """(..., n): Σ_i f_{t,i}(X_j) for every j — node j's point on the global loss."""

    def best_fixed(self, t_end: int, domain) -> float:
        """min over the domain of Σ_{t < t_end} Σ_i f_{t,i}(x)."""


@dataclass
class LinearLosses:
    """f_{t,i}(x) = ⟨G[t, i], x⟩. G has shape (T, n, d): real, finite, non-empty."""

    G: np.ndarray

    def __post_init__(self):
        self.G = check_data("G", self.G, 3, "(T, n, d)")
        self.T, self.n, self.d = self.G.shape
        self._prefix = np.concatenate([np.zeros((1, self.d)), np.cumsum(self.G.sum(1), 0)])

    def grad(self, t, X):
        return self.G[t]

    def value(self, t, X):
        return np.einsum("nd,...nd->...n", self.G[t], X)

    def network_value(self, t, X):
        return X @ self.G[t].sum(0)

    def best_fixed(self, t_end, domain):
        total = self._prefix[t_end]
        # The minimizer of a linear function over a ball is -R g/|g|; in general use the
        # domain's projection of a far point along -g (exact for balls and boxes).
        x = domain.project(-1e12 * total[None, :])[0]
        return float(total @ x)


@dataclass
class LeastSquaresLosses:
    """f_{t,i}(x) = ½(A[t, i]ᵀx − b[t, i])². A: (T, n, d), b: (T, n); real, finite, non-empty."""

    A: np.ndarray
    b: np.ndarray

    def __post_init__(self):
        self.A = check_data("A", self.A, 3, "(T, n, d)")
        self.b = check_data("b", self.b, 2, "(T, n)")
        if self.b.shape != self.A.shape[:2]:
            raise ValueError(f"A must be (T, n, d) and b (T, n); got {self.A.shape} and {self.b.shape}")
        self.T, self.n, self.d = self.A.shape
        self._H = np.concatenate([np.zeros((1, self.d, self.d)), np.cumsum(np.einsum("tni,tnj->tij", self.A, self.A), 0)])
        self._c = np.concatenate([np.zeros((1, self.d)), np.cumsum(np.einsum("tni,tn->ti", self.A, self.b), 0)])
        self._bb = np.concatenate([[0.0], np.cumsum((self.b**2).sum(1))])

    def grad(self, t, X):
        r = np.einsum("nd,...nd->...n", self.A[t], X) - self.b[t]
        return r[..., None] * self.A[t]

    def value(self, t, X):
        return 0.5 * (np.einsum("nd,...nd->...n", self.A[t], X) - self.b[t]) ** 2

    def network_value(self, t, X):
        r = X @ self.A[t].T - self.b[t]  # (..., j, i): node j's point on node i's loss
        return 0.5 * (r**2).sum(-1)

    def best_fixed(self, t_end, domain):
        # Exact from the prefix sums of AᵀA, Aᵀb and b², kept since construction.
        H, c, bb = self._H[t_end], self._c[t_end], self._bb[t_end]
        x = quadratic_min_on_ball(H, c, domain.radius) if hasattr(domain, "radius") else _pgd_quadratic(H, c, domain)
        return float(0.5 * x @ H @ x - c @ x + 0.5 * bb)


@dataclass
class LogisticLosses:
    """f_{t,i}(x) = log(1 + exp(−y[t, i]·A[t, i]ᵀx)), labels y ∈ {−1, +1}. A: (T, n, d) real,
    finite, non-empty; ``comparator_iters`` ≥ 1, the FISTA iterations of the comparator."""

    A: np.ndarray
    y: np.ndarray
    comparator_iters: int = 2000

    def __post_init__(self):
        self.A = check_data("A", self.A, 3, "(T, n, d)")
        self.y = check_data("y", self.y, 2, "(T, n)")
        check_int("comparator_iters", self.comparator_iters, minimum=1)
        if self.y.shape != self.A.shape[:2]:
            raise ValueError(f"A must be (T, n, d) and y (T, n); got {self.A.shape} and {self.y.shape}")
        if not np.isin(self.y, (-1.0, 1.0)).all():
            raise ValueError("labels y must be -1 or +1")
        self.T, self.n, self.d = self.A.shape
        self._best: dict = {}

    def grad(self, t, X):
        m = self.y[t] * np.einsum("nd,...nd->...n", self.A[t], X)
        return (-self.y[t] * _sigmoid(-m))[..., None] * self.A[t]

    def value(self, t, X):
        return np.logaddexp(0.0, -self.y[t] * np.einsum("nd,...nd->...n", self.A[t], X))

    def network_value(self, t, X):
        return np.logaddexp(0.0, -(X @ self.A[t].T) * self.y[t]).sum(-1)

    def best_fixed(self, t_end, domain):
        key = (t_end, domain)
        if key not in self._best:
            self._best[key] = self._solve(t_end, domain)
        return self._best[key]

    def _solve(self, t_end, domain) -> float:
        # Projected accelerated gradient (FISTA) on the prefix's total loss; L from the
        # logistic curvature bound 1/4 times the data's squared spectral norm.
        Z = (self.A[:t_end] * self.y[:t_end, :, None]).reshape(-1, self.d)
        L = max(np.linalg.norm(Z, 2) ** 2 / 4.0, 1e-12)

        def total(x):
            return float(np.logaddexp(0.0, -Z @ x).sum())

        def grad(x):
            return -(Z.T @ _sigmoid(-Z @ x))

        x = y = domain.project(np.zeros((1, self.d)))[0]
        tk = 1.0
        for _ in range(self.comparator_iters):
            x_new = domain.project((y - grad(y) / L)[None, :])[0]
            t_new = 0.5 * (1 + math.sqrt(1 + 4 * tk * tk))
            y = x_new + (tk - 1) / t_new * (x_new - x)
            x, tk = x_new, t_new
        return total(x)


def _sigmoid(z):
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def quadratic_min_on_ball(H: np.ndarray, c: np.ndarray, radius: float) -> np.ndarray:
    """argmin ½xᵀHx − cᵀx over ‖x‖ ≤ radius (H ⪰ 0), exactly: the KKT point
    x(λ) = (H + λI)⁻¹c with λ ≥ 0 and ‖x(λ)‖ = radius when the unconstrained
    minimizer lies outside, found by bisection on the secular equation. H: (d, d), c: (d,),
    both finite; radius finite and > 0."""
    check_real("radius", radius, low=0.0, low_open=True)
    H, c = np.asarray(H), np.asarray(c)
    if H.ndim != 2 or H.shape[0] != H.shape[1]:
        raise ValueError(f"H must be a square (d, d) matrix, got shape {H.shape}")
    if c.shape != (H.shape[0],):
        raise ValueError(f"c must have shape (d,) = ({H.shape[0]},) to match H, got {c.shape}")
    if not (np.isfinite(H).all() and np.isfinite(c).all()):
        raise ValueError(f"{'H' if not np.isfinite(H).all() else 'c'} has NaN or inf entries")
    lam, Q = np.linalg.eigh(H)
    cq = Q.T @ c
    lam = np.maximum(lam, 0.0)

    def norm_at(mu):
        with np.errstate(divide="ignore", invalid="ignore"):
            y = np.where(lam + mu > 0, cq / (lam + mu), 0.0)
        return np.linalg.norm(y), y

    tiny = 1e-12 * max(1.0, lam.max(initial=0.0))
    n0, y0 = norm_at(tiny)
    if n0 <= radius and (lam > tiny).all():
        return Q @ (cq / lam)
    if n0 <= radius:  # singular H with c in its range: the minimum-norm solution is inside
        return Q @ y0
    lo, hi = 0.0, np.linalg.norm(c) / radius + 1.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if norm_at(mid)[0] > radius:
            lo = mid
        else:
            hi = mid
    return Q @ norm_at(hi)[1]


def _pgd_quadratic(H, c, domain, iters: int = 5000):
    L = max(np.linalg.eigvalsh(H).max(), 1e-12)
    x = domain.project(np.zeros((1, len(c))))[0]
    for _ in range(iters):
        x = domain.project((x - (H @ x - c) / L)[None, :])[0]
    return x
