"""Classical mean estimators, the baselines of the quantum ones (one sample = one query).

Each function takes samples ``x`` (``(n,)`` or ``(n, d)``) and returns the estimate;
:func:`classical_mean` draws the n samples from an oracle and charges the counter.

* :func:`sample_mean`; :func:`trimmed_mean` (as ``scipy.stats.trim_mean``: a fraction cut at
  each end per coordinate); :func:`median_of_means` (coordinate-wise); :func:`catoni`
  (Catoni's M-estimator with his influence function ψ(x) = sign(x) log(1 + |x| + x²/2), the
  scale α set from a variance bound, solved by bisection); for vectors
  :func:`geometric_median_of_means` (Minsker; Weiszfeld iterations) and
  :func:`directional_median_of_means`, the practical relaxation of the Lugosi–Mendelson estimator.

**Which relaxation.** Lugosi–Mendelson's estimator is a point x that, for *every* unit direction u, is
within r of the median-of-means of ``⟨u, X⟩`` with r as small as possible (the min–max form of their
median-of-means tournament); the sub-Gaussian rate needs all directions, which is what makes it
intractable (Hopkins' SDP and Cherapanamjeri et al.'s descent are the polynomial-time versions). Here
the max runs over a *finite sample* of directions (the ±coordinate axes plus ``n_directions`` uniform
random unit vectors): ``argmin_x max_j |⟨u_j, x⟩ − MoM_k(⟨u_j, X⟩)|``, a linear program solved exactly
with ``scipy.optimize.linprog`` (HiGHS). With finitely many directions the guarantee holds in those
directions only; no SDP, no tournament over pairs of points.
"""

from __future__ import annotations

import math

import numpy as np

from .._checks import check_int, check_real
from .oracles import DiscreteOracle, QueryCounter, as_rng

__all__ = ["sample_mean", "trimmed_mean", "median_of_means", "catoni", "geometric_median_of_means",
           "directional_median_of_means", "directional_mom_objective", "classical_mean", "CLASSICAL"]


def _samples(x) -> np.ndarray:
    x = np.asarray(x, float)
    if x.ndim not in (1, 2) or x.shape[0] == 0:
        raise ValueError(f"x must be a non-empty (n,) or (n, d) array of samples, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("x must be finite (found NaN or inf)")
    return x


def _blocks(x: np.ndarray, k: int) -> np.ndarray:
    """Means of k blocks ``(k, ...)`` (the first ``k⌊n/k⌋`` samples)."""
    k = check_int("k (blocks)", k, minimum=1)
    if k > x.shape[0]:
        raise ValueError(f"k (blocks) must be <= the number of samples {x.shape[0]}, got {k}")
    b = x.shape[0] // k
    return x[: k * b].reshape(k, b, *x.shape[1:]).mean(axis=1)


def sample_mean(x) -> np.ndarray | float:
    return _samples(x).mean(axis=0)


def trimmed_mean(x, proportion: float = 0.1):
    """Mean after cutting ``⌊proportion·n⌋`` samples at each end (per coordinate), as scipy's."""
    x = _samples(x)
    proportion = check_real("proportion", proportion, low=0.0, high=0.5, high_open=True)
    n = x.shape[0]
    cut = int(proportion * n)
    s = np.partition(x, (cut, n - cut - 1), axis=0) if n - 2 * cut > 0 and cut > 0 else np.sort(x, axis=0)
    return s[cut : n - cut].mean(axis=0)


def median_of_means(x, k: int):
    """Coordinate-wise median of the means of k equal blocks."""
    return np.median(_blocks(_samples(x), k), axis=0)


def catoni(x, variance: float, delta: float = 0.05, iters: int = 100):
    """Catoni's M-estimator (per coordinate): the root θ of ``Σ ψ(α (x_i − θ)) = 0`` with
    ``α = √(2 log(1/δ) / (n (v + 2v log(1/δ)/(n − 2 log(1/δ)))))`` (v: a variance bound; for heavy
    tails pass an upper bound of the spread you expect)."""
    x = _samples(x)
    v = check_real("variance", variance, low=0.0, low_open=True)
    delta = check_real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    n = x.shape[0]
    L = math.log(1 / delta)
    denom = n * (v + (2 * v * L / (n - 2 * L) if n > 2 * L else v))
    alpha = math.sqrt(2 * L / denom)
    xs = x if x.ndim == 2 else x[:, None]

    def psi_sum(theta):
        u = alpha * (xs - theta)
        return (np.sign(u) * np.log1p(np.abs(u) + u * u / 2)).sum(axis=0)

    lo, hi = xs.min(axis=0), xs.max(axis=0)  # ψ-sum is decreasing in θ: positive at lo, negative at hi
    for _ in range(check_int("iters", iters, minimum=1)):
        mid = 0.5 * (lo + hi)
        pos = psi_sum(mid) > 0
        lo, hi = np.where(pos, mid, lo), np.where(pos, hi, mid)
    out = 0.5 * (lo + hi)
    return out if x.ndim == 2 else float(out[0])


def geometric_median_of_means(x, k: int, iters: int = 200, tol: float = 1e-10) -> np.ndarray:
    """The geometric median (Weiszfeld) of the means of k blocks of ``(n, d)`` samples."""
    x = _samples(x)
    z = _blocks(x if x.ndim == 2 else x[:, None], k)
    y = np.median(z, axis=0)
    for _ in range(check_int("iters", iters, minimum=1)):
        w = 1.0 / np.maximum(np.linalg.norm(z - y, axis=1), 1e-300)
        y_new = (w @ z) / w.sum()
        if np.linalg.norm(y_new - y) <= tol * (1 + np.linalg.norm(y)):
            y = y_new
            break
        y = y_new
    return y


def _directions(d: int, directions, n_directions: int, rng) -> np.ndarray:
    if directions is not None:
        u = np.asarray(directions, float)
        if u.ndim != 2 or u.shape[1] != d or u.shape[0] == 0 or not np.isfinite(u).all():
            raise ValueError(f"directions must be a finite non-empty (m, {d}) array, got shape {u.shape}")
        norms = np.linalg.norm(u, axis=1)
        if (norms == 0).any():
            raise ValueError("directions must be non-zero")
        return u / norms[:, None]
    n_directions = check_int("n_directions", n_directions, minimum=0)
    g = as_rng(rng).standard_normal((n_directions, d))
    return np.vstack([np.eye(d), g / np.linalg.norm(g, axis=1, keepdims=True)])


def directional_mom_objective(y, blocks: np.ndarray, directions: np.ndarray) -> float:
    """``max_j |⟨u_j, y⟩ − median_i ⟨u_j, Z_i⟩|`` for block means ``Z (k, d)`` and unit directions ``u (m, d)``:
    what :func:`directional_median_of_means` minimizes (exposed for checking it)."""
    m = np.median(blocks @ directions.T, axis=0)
    return float(np.abs(directions @ np.asarray(y, float) - m).max())


def directional_median_of_means(x, k: int, *, directions=None, n_directions: int = 64, rng=None) -> np.ndarray:
    """The min–max relaxation of the Lugosi–Mendelson estimator (module docstring):
    ``argmin_y max_j |⟨u_j, y⟩ − MoM_k(⟨u_j, X⟩)|`` over the given unit ``directions (m, d)`` (normalized
    here) or the ±axes plus ``n_directions`` random ones (seeded by ``rng``). The median-of-means of the
    projections is the median of the projected block means (projection is linear). Solved as the LP
    ``min t  s.t.  −t ≤ ⟨u_j, y⟩ − m_j ≤ t``. For d = 1 it is :func:`median_of_means`."""
    from scipy.optimize import linprog

    x = _samples(x)
    z = _blocks(x if x.ndim == 2 else x[:, None], k)
    d = z.shape[1]
    u = _directions(d, directions, n_directions, rng)
    m = np.median(z @ u.T, axis=0)
    # variables (y_1..y_d, t): minimize t; u y − t <= m and −u y − t <= −m
    ones = np.ones((u.shape[0], 1))
    A = np.vstack([np.hstack([u, -ones]), np.hstack([-u, -ones])])
    b = np.concatenate([m, -m])
    c = np.zeros(d + 1)
    c[-1] = 1.0
    res = linprog(c, A_ub=A, b_ub=b, bounds=[(None, None)] * d + [(0, None)], method="highs")
    if res.status != 0:
        raise RuntimeError(f"the directional median-of-means LP did not solve: {res.message}")
    return res.x[:d]


CLASSICAL = ("sample_mean", "trimmed_mean", "median_of_means", "geometric_median_of_means")


def classical_mean(oracle: DiscreteOracle, n: int, method: str = "median_of_means", *, delta: float = 0.05, rng=None,
                   counter: QueryCounter | None = None) -> np.ndarray:
    """Draw n samples (n queries) and apply ``method`` (one of :data:`CLASSICAL`); the block count
    of the median-of-means methods is ``⌈8 log(1/δ)⌉`` (capped at n), the trimmed mean cuts
    ``min(0.25, log(1/δ)/n)`` per end."""
    if not isinstance(oracle, DiscreteOracle):
        raise TypeError(f"oracle must be a DiscreteOracle, got {type(oracle).__name__}")
    n = check_int("n", n, minimum=1)
    delta = check_real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    if method not in CLASSICAL:
        raise ValueError(f"method must be one of {CLASSICAL}, got {method!r}")
    rng = as_rng(rng)
    k = min(n, math.ceil(8 * math.log(1 / delta)))
    if n > 4 * oracle.K and method in ("sample_mean", "median_of_means", "geometric_median_of_means"):
        # Block means from multinomial atom counts: the same law as n draws, at O(kK) cost.
        if counter is not None:
            counter.charge_samples(n)
        b = n if method == "sample_mean" else n // k
        sums = np.stack([rng.multinomial(b, oracle.probs) @ oracle.values for _ in range(1 if b == n else k)]) / b
        if method == "sample_mean":
            return sums[0]
        return np.median(sums, axis=0) if method == "median_of_means" else geometric_median_of_means(sums, k)
    x = oracle.sample(n, rng, counter)
    if method == "sample_mean":
        return x.mean(axis=0)
    if method == "trimmed_mean":
        return np.atleast_1d(trimmed_mean(x, min(0.25, math.log(1 / delta) / n)))
    if method == "median_of_means":
        return median_of_means(x, k)
    return geometric_median_of_means(x, k)
