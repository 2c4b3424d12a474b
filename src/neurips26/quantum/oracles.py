"""Sampling oracles, their heavy-tailed laws, and the exact query counter.

An estimator learns about a law only through its oracle. The quantum sampling oracle
of a discrete law ``(values x_k, probabilities p_k)`` is

    U |0⟩ = Σ_k √p_k |k⟩|x_k⟩,

and a classical sample is one measurement of it. **Query convention** (used by every
estimator of :mod:`neurips26.quantum`): every use of ``U`` or ``U†``, controlled or not,
is one query, and a classical sample is one query. An amplitude-estimation circuit whose
Grover operator ``Q = −A S₀ A† S_χ`` is applied ``k`` times uses ``A`` (which contains
``U`` once) ``2k + 1`` times; run with ``s`` shots it costs ``s (2k + 1)`` queries.
:class:`QueryCounter` also keeps ``grover`` = Σ shots × k, which is qiskit-algorithms'
``num_oracle_queries`` convention (it counts Grover applications only).

Continuous laws are discretized by a quantile rule (:func:`student_t`,
:func:`symmetric_pareto`): ``K`` equiprobable atoms at the quantiles ``F⁻¹((k + ½)/K)``,
which gives a law that is exactly symmetric about 0 (mean exactly 0) and whose p-th
moment is computed exactly from the atoms (:meth:`DiscreteOracle.moment`): that, not
the continuous law's moment, is the moment of the law the estimators actually face.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .._checks import check_int, check_real

__all__ = ["QueryCounter", "DiscreteOracle", "GradientOracle", "student_t", "symmetric_pareto", "as_rng"]


@dataclass
class QueryCounter:
    """Exact query accounting, shared by every call that is handed the same counter.

    ``queries``: uses of the sampling oracle ``U`` or ``U†`` (controlled or not) plus
    classical samples — the library's convention. ``grover``: applications of the Grover
    operator (qiskit-algorithms' ``num_oracle_queries``). ``samples``: classical samples
    (included in ``queries``). ``circuits``: amplitude-estimation shots run."""

    queries: int = 0
    grover: int = 0
    samples: int = 0
    circuits: int = 0

    def charge_samples(self, n: int) -> None:
        self.samples += int(n)
        self.queries += int(n)

    def charge_circuit(self, grover_applications: int, shots: int = 1) -> None:
        """One circuit ``Q^k A |0⟩`` measured ``shots`` times (k = total Grover applications of
        one shot, e.g. ``2^m − 1`` for canonical QAE with m evaluation qubits)."""
        k, s = int(grover_applications), int(shots)
        self.grover += s * k
        self.queries += s * (2 * k + 1)
        self.circuits += s

    def charge_queries(self, n: int, circuits: int = 0) -> None:
        """``n`` uses of U or U† counted directly (a circuit whose cost is not a Grover count, e.g.
        multivariate phase estimation: phase-oracle degree × amplification), in ``circuits`` shots."""
        self.queries += int(n)
        self.circuits += int(circuits)

    def snapshot(self) -> dict:
        return dict(queries=self.queries, grover=self.grover, samples=self.samples, circuits=self.circuits)


def as_rng(rng) -> np.random.Generator:
    """A NumPy Generator from None, an int seed or a Generator."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or (isinstance(rng, (int, np.integer)) and not isinstance(rng, bool)):
        return np.random.default_rng(rng)
    raise TypeError(f"rng must be None, an int seed or a numpy Generator, got {type(rng).__name__}")


class DiscreteOracle:
    """The sampling oracle of a discrete law on ``R^d``.

    Args:
        values: ``(K, d)`` atoms (a ``(K,)`` array is taken as d = 1), finite.
        probs: ``(K,)`` probabilities, >= 0, summing to 1 (to 1e-9; renormalized exactly).

    Attributes ``values`` (K, d), ``probs`` (K,), ``K``, ``d``. ``mean`` and ``moment`` are
    exact and are for *checking* estimators (an estimator that read them would be cheating;
    none of :mod:`neurips26.quantum` does)."""

    def __init__(self, values, probs):
        v = np.asarray(values, dtype=float) if not isinstance(values, np.ndarray) or values.dtype != float else values
        if v.ndim == 1:
            v = v[:, None]
        if v.ndim != 2 or v.shape[0] == 0 or v.shape[1] == 0:
            raise ValueError(f"values must be a non-empty (K, d) or (K,) array, got shape {np.shape(values)}")
        if not np.isfinite(v).all():
            raise ValueError("values must be finite (found NaN or inf)")
        p = np.asarray(probs, dtype=float)
        if p.shape != (v.shape[0],):
            raise ValueError(f"probs must have shape ({v.shape[0]},) to match values, got {p.shape}")
        if not np.isfinite(p).all():
            raise ValueError("probs must be finite (found NaN or inf)")
        if (p < 0).any():
            raise ValueError(f"probs must be >= 0, found {p.min():.3g}")
        total = p.sum()
        if abs(total - 1.0) > 1e-9:
            raise ValueError(f"probs must sum to 1, got {total:.12g}")
        self.values = v
        self.probs = p / total
        self._cdf = None

    @property
    def K(self) -> int:
        return self.values.shape[0]

    @property
    def d(self) -> int:
        return self.values.shape[1]

    @property
    def mean(self) -> np.ndarray:
        """Exact mean ``(d,)`` (for checking; not an oracle access)."""
        return self.probs @ self.values

    def moment(self, p: float, center=None) -> float:
        """Exact ``E ‖X − c‖₂^p`` (c = the mean by default) of the law as discretized."""
        p = check_real("p", p, low=0.0, low_open=True)
        c = self.mean if center is None else np.asarray(center, float)
        r = np.linalg.norm(self.values - c, axis=1)
        return float(self.probs @ r**p)

    def shifted(self, shift) -> "DiscreteOracle":
        """The law of ``X + shift`` (same probabilities)."""
        s = np.asarray(shift, float).reshape(1, -1)
        if s.shape[1] != self.d:
            raise ValueError(f"shift must have {self.d} entries, got {s.shape[1]}")
        out = DiscreteOracle.__new__(DiscreteOracle)
        out.values, out.probs, out._cdf = self.values + s, self.probs, self._cdf
        if not np.isfinite(out.values).all():
            raise ValueError("shift must be finite")
        return out

    def sample(self, n: int, rng=None, counter: QueryCounter | None = None) -> np.ndarray:
        """``n`` classical samples ``(n, d)``: ``n`` queries (inverse-CDF sampling)."""
        n = check_int("n", n, minimum=0)
        rng = as_rng(rng)
        if self._cdf is None:
            self._cdf = np.cumsum(self.probs)
        idx = np.minimum(np.searchsorted(self._cdf, rng.random(n) * self._cdf[-1], side="right"), self.K - 1)
        if counter is not None:
            counter.charge_samples(n)
        return self.values[idx]


def _quantile_law(ppf: Callable[[np.ndarray], np.ndarray], K: int, d: int, scale: float, seed: int) -> DiscreteOracle:
    u = (np.arange(K) + 0.5) / K
    q = ppf(u)
    q = 0.5 * (q - q[::-1])  # exact symmetry about 0 (removes the ppf's rounding asymmetry)
    q *= scale
    if d == 1:
        return DiscreteOracle(q[:, None], np.full(K, 1.0 / K))
    rng = np.random.default_rng(seed)
    # Each coordinate is the quantile grid in its own seeded order: every marginal is exactly
    # the 1-D discretization, the coordinates are (nearly) independent, the mean exactly 0.
    cols = np.stack([q[rng.permutation(K)] for _ in range(d)], axis=1)
    return DiscreteOracle(cols, np.full(K, 1.0 / K))


def student_t(df: float, K: int = 2**16, d: int = 1, scale: float = 1.0, seed: int = 0) -> DiscreteOracle:
    """Student-t(df) noise discretized by the quantile rule on ``K`` atoms (see the module
    docstring); for ``d > 1`` each coordinate is an independently permuted copy."""
    from scipy import stats

    check_real("df", df, low=0.0, low_open=True)
    K = check_int("K", K, minimum=2)
    d = check_int("d", d, minimum=1)
    check_real("scale", scale, low=0.0, low_open=True)
    return _quantile_law(lambda u: stats.t.ppf(u, df), K, d, scale, check_int("seed", seed, minimum=0))


def symmetric_pareto(alpha: float, K: int = 2**16, d: int = 1, scale: float = 1.0, seed: int = 0) -> DiscreteOracle:
    """Symmetric Pareto noise, density ``α/2 (1 + |x|)^{−α−1}`` (tail index α: moments of order
    < α finite), discretized by the quantile rule on ``K`` atoms."""
    check_real("alpha", alpha, low=0.0, low_open=True)
    K = check_int("K", K, minimum=2)
    d = check_int("d", d, minimum=1)
    check_real("scale", scale, low=0.0, low_open=True)

    def ppf(u):
        tail = np.minimum(u, 1 - u)  # P(|X| > x) / 2 = tail at the quantile
        return np.sign(u - 0.5) * ((2 * tail) ** (-1.0 / alpha) - 1.0)

    return _quantile_law(ppf, K, d, scale, check_int("seed", seed, minimum=0))


@dataclass
class GradientOracle:
    """The stochastic gradient oracle ``x ↦ ∇f(x) + ξ`` with ξ drawn from ``noise`` (a
    zero-mean :class:`DiscreteOracle` on R^d). ``at(x)`` is the sampling oracle of the
    gradient's law at ``x``; classical methods sample it (one sample = one query), quantum
    estimators run amplitude estimation on it. ``f`` (optional) is the objective, for traces."""

    grad_fn: Callable[[np.ndarray], np.ndarray]
    noise: DiscreteOracle
    f: Callable[[np.ndarray], float] | None = None
    _check: bool = field(default=True, repr=False)

    def __post_init__(self):
        if not callable(self.grad_fn):
            raise TypeError("grad_fn must be callable x -> gradient (d,)")
        if not isinstance(self.noise, DiscreteOracle):
            raise TypeError(f"noise must be a DiscreteOracle, got {type(self.noise).__name__}")
        if np.abs(self.noise.mean).max() > 1e-8 * (1 + np.abs(self.noise.values).max()):
            raise ValueError(f"noise must have mean 0, got {self.noise.mean}")

    @property
    def d(self) -> int:
        return self.noise.d

    def grad(self, x) -> np.ndarray:
        x = np.asarray(x, float)
        if x.shape != (self.d,) or not np.isfinite(x).all():
            raise ValueError(f"x must be a finite ({self.d},) vector, got shape {x.shape}")
        g = np.asarray(self.grad_fn(x), float)
        if g.shape != (self.d,):
            raise ValueError(f"grad_fn must return shape ({self.d},), got {g.shape}")
        return g

    def at(self, x) -> DiscreteOracle:
        """The sampling oracle of ``∇f(x) + ξ``."""
        return self.noise.shifted(self.grad(x))
