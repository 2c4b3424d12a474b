"""Convex decision sets with Euclidean projection, vectorized over rows (nodes)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._checks import check_real

__all__ = ["Ball", "Box", "Simplex"]


@dataclass(frozen=True)
class Ball:
    """{x : ‖x‖₂ ≤ radius}, radius finite and > 0."""

    radius: float = 1.0

    def __post_init__(self):
        check_real("radius", self.radius, low=0.0, low_open=True)

    def project(self, x: np.ndarray) -> np.ndarray:
        norm = np.linalg.norm(x, axis=-1, keepdims=True)
        return x * np.minimum(1.0, self.radius / np.maximum(norm, 1e-300))

    def shrink(self, alpha: float) -> "Ball":
        """The ball scaled by 1 − α, α in [0, 1)."""
        _check_alpha(alpha)
        return Ball(self.radius * (1.0 - alpha))

    @property
    def inner_radius(self) -> float:
        return self.radius

    def center(self, d: int) -> np.ndarray:
        return np.zeros(d)


@dataclass(frozen=True)
class Box:
    """{x : low ≤ x_i ≤ high}, low < high both finite."""

    low: float = -1.0
    high: float = 1.0

    def __post_init__(self):
        low, high = check_real("low", self.low), check_real("high", self.high)
        if not low < high:
            raise ValueError(f"a box needs low < high, got low={low}, high={high}")

    def project(self, x: np.ndarray) -> np.ndarray:
        return np.clip(x, self.low, self.high)

    def shrink(self, alpha: float) -> "Box":
        """The box scaled by 1 − α about its centre, α in [0, 1)."""
        _check_alpha(alpha)
        c, h = (self.low + self.high) / 2, (self.high - self.low) / 2 * (1.0 - alpha)
        return Box(c - h, c + h)

    @property
    def inner_radius(self) -> float:
        return (self.high - self.low) / 2

    def center(self, d: int) -> np.ndarray:
        return np.full(d, (self.low + self.high) / 2)


@dataclass(frozen=True)
class Simplex:
    """{x : x ≥ 0, Σ x_i = total} — projection by the sort-based algorithm
    (Held et al.; Duchi et al., 2008); total finite and > 0."""

    total: float = 1.0

    def __post_init__(self):
        check_real("total", self.total, low=0.0, low_open=True)

    def project(self, x: np.ndarray) -> np.ndarray:
        x = np.atleast_2d(x)
        d = x.shape[-1]
        u = -np.sort(-x, axis=-1)
        css = np.cumsum(u, axis=-1) - self.total
        ks = np.arange(1, d + 1)
        cond = u - css / ks > 0
        rho = d - 1 - np.argmax(cond[..., ::-1], axis=-1)
        theta = np.take_along_axis(css, rho[..., None], axis=-1) / (rho[..., None] + 1)
        return np.maximum(x - theta, 0.0)

    def shrink(self, alpha: float):
        raise ValueError("the simplex has empty interior in R^d; bandit feedback needs a full-dimensional domain")

    def center(self, d: int) -> np.ndarray:
        return np.full(d, self.total / d)


def _check_alpha(alpha) -> None:
    if not 0 <= check_real("alpha", alpha) < 1:
        raise ValueError(f"the shrink factor alpha must be in [0, 1), got {alpha}")
