"""Compression operators for communication, applied row-wise to an (..., n, d) array (one
message per node, leading dims batch independent runs), each with its contraction parameter ω and the bits it sends.

A compressor Q is ω-contracting when E‖Q(x) − x‖² ≤ (1 − ω)‖x‖² for every x
(Koloskova et al., 2019); ω = 1 is exact communication.
"""

from __future__ import annotations

import abc
import math
from dataclasses import dataclass

import numpy as np

from ._checks import check_int

__all__ = ["Compressor", "Identity", "TopK", "RandomK", "ScaledSign", "QSGD"]

FLOAT_BITS = 32


class Compressor(abc.ABC):
    """``q = Q(x, rng)`` on rows of x; ``bits(d)`` is the length of one message."""

    name = "compressor"

    @abc.abstractmethod
    def __call__(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Compress each row of x (n, d)."""

    @abc.abstractmethod
    def omega(self, d: int) -> float:
        """The contraction parameter ω in (0, 1] for messages of dimension d."""

    @abc.abstractmethod
    def bits(self, d: int) -> int:
        """Bits in one compressed message of dimension d (``run_doco`` asks this first, so a
        setting that does not fit d, such as top-k with k > d, is refused there)."""


@dataclass(frozen=True)
class Identity(Compressor):
    name = "identity"

    def __call__(self, x, rng):
        return x.copy()

    def omega(self, d):
        return 1.0

    def bits(self, d):
        return FLOAT_BITS * d


def _check_k(k: int, d: int) -> int:
    if not 1 <= k <= d:
        raise ValueError(f"k must be in [1, d] = [1, {d}] for messages of dimension d = {d}, got k = {k}")
    return k


def _keep(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """x with every entry outside ``idx`` (per row, last axis) set to zero."""
    out = np.zeros_like(x)
    np.put_along_axis(out, idx, np.take_along_axis(x, idx, axis=-1), axis=-1)
    return out


@dataclass(frozen=True)
class TopK(Compressor):
    """Keep the k entries of largest magnitude: ‖Q(x) − x‖² ≤ (1 − k/d)‖x‖²
    deterministically. Sends k values and their indices."""

    k: int
    name = "top-k"

    def __post_init__(self):
        check_int("k", self.k, minimum=1)

    def __call__(self, x, rng):
        k = _check_k(self.k, x.shape[-1])
        return _keep(x, np.argpartition(-np.abs(x), k - 1, axis=-1)[..., :k])

    def omega(self, d):
        return _check_k(self.k, d) / d

    def bits(self, d):
        return _check_k(self.k, d) * (FLOAT_BITS + math.ceil(math.log2(d)))


@dataclass(frozen=True)
class RandomK(Compressor):
    """Keep k entries chosen uniformly at random (unscaled, so contracting with ω = k/d
    in expectation). Indices come from a seed shared with the receiver: k values and
    one 32-bit seed are sent."""

    k: int
    name = "random-k"

    def __post_init__(self):
        check_int("k", self.k, minimum=1)

    def __call__(self, x, rng):
        k = _check_k(self.k, x.shape[-1])
        return _keep(x, np.argsort(rng.random(x.shape), axis=-1)[..., :k])

    def omega(self, d):
        return _check_k(self.k, d) / d

    def bits(self, d):
        return _check_k(self.k, d) * FLOAT_BITS + 32


@dataclass(frozen=True)
class ScaledSign(Compressor):
    """Q(x) = (‖x‖₁ / d) · sign(x): ‖Q(x) − x‖² = ‖x‖² − ‖x‖₁²/d, so ω = ‖x‖₁²/(d‖x‖²)
    ≥ 1/d. Sends d sign bits and one float."""

    name = "scaled-sign"

    def __call__(self, x, rng):
        d = x.shape[-1]
        return np.abs(x).sum(-1, keepdims=True) / d * np.sign(x)

    def omega(self, d):
        return 1.0 / d  # worst case (a 1-sparse vector)

    def bits(self, d):
        return d + FLOAT_BITS


@dataclass(frozen=True)
class QSGD(Compressor):
    """Stochastic quantization to s levels (Alistarh et al., 2017), rescaled to be
    contracting: Q(x) = q_s(x) / (1 + β) with β = min(d/s², √d/s) the variance bound
    of the unbiased q_s, which gives ω = 1/(1 + β). Sends the norm, d signs and d
    level indices of ⌈log₂(s + 1)⌉ bits."""

    s: int = 4
    name = "qsgd"

    def __post_init__(self):
        check_int("s (QSGD's number of levels)", self.s, minimum=1)

    def beta(self, d: int) -> float:
        return min(d / self.s**2, math.sqrt(d) / self.s)

    def __call__(self, x, rng):
        d = x.shape[-1]
        norm = np.linalg.norm(x, axis=-1, keepdims=True)
        safe = np.where(norm > 0, norm, 1.0)
        level = np.abs(x) / safe * self.s
        low = np.floor(level)
        up = rng.random(x.shape) < (level - low)
        q = norm * np.sign(x) * (low + up) / self.s
        return q / (1.0 + self.beta(d))

    def omega(self, d):
        return 1.0 / (1.0 + self.beta(d))

    def bits(self, d):
        return FLOAT_BITS + d * (1 + math.ceil(math.log2(self.s + 1)))
