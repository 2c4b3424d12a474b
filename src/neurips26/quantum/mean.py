"""Quantum mean estimators, simulated with exact query counts.

Every estimator takes an oracle (:class:`~neurips26.quantum.oracles.DiscreteOracle`), a
target (``eps``) or a budget (``n`` queries), ``delta``, a backend, a seed and an optional
:class:`~neurips26.quantum.oracles.QueryCounter`, and returns ``Estimate(estimate, queries)``
(a named tuple: ``est, q = bounded_mean(...)`` works). ``queries`` follows the library's
convention (every use of U or U†, classical samples included; see ``oracles``).

* :func:`amplitude_estimation` — one canonical QAE (m evaluation qubits, ``2^m − 1`` Grover calls).
* :func:`bounded_mean` — Montanaro's estimator for variables in [0, 1]: QAE with M chosen from
  ``eps`` by the BHMT error bound ``2π√(a(1−a))/M + π²/M²``, median of repetitions for ``delta``.
* :class:`HeavyTailedMean` — the paper's estimator for a bounded p-th central moment
  ``E|X − μ|^p ≤ ν``, p ∈ (1, 2]: a classical median pre-estimate ``c`` (Hamoudi's first step),
  truncation of ``Y = X − c`` at ``B = (3ν'/ε)^{1/(p−1)}`` (bias ≤ ν'/B^{p−1} = ε/3), the truncated
  range cut into dyadic levels ``[0, s], (s, 2s], ..., (2^{K−1}s, 2^K s]`` (s = ν'^{1/p}), the
  positive and negative part of each level estimated by :func:`bounded_mean` at the accuracy
  its p-th-moment tail bound allows, and the levels recombined. Error ≈ ν^{1/p} n^{−2(p−1)/p}
  up to logarithms, against the classical ν^{1/p} n^{−(p−1)/p}. ``p = 2`` is Hamoudi's
  sub-Gaussian estimator (:func:`subgaussian_mean`). For d > 1 each coordinate is estimated
  (budget split evenly, ``delta/d`` and ``eps/√d`` each): a deviation from the paper's
  multivariate phase-estimation estimator, whose d-dependence it does not reach (see the docs).
* :class:`UnbiasedMLMC` — the generalized multilevel Monte Carlo wrapper: a random level
  ``J ≥ 1`` with ``P(J = j) = (1 − 2^{−r}) 2^{−r(j−1)}``, the estimate
  ``μ̂_0 + (μ̂_J − μ̂_{J−1}) / P(J = j)`` with ``μ̂_j`` the base estimator at budget ``n₀ 2^j``;
  unbiased for ``lim_j E μ̂_j``, expected cost finite for ``r > 1`` (given a cost linear in n).
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numpy as np

from .._checks import check_int, check_real
from .oracles import DiscreteOracle, QueryCounter, as_rng
from .qae import MAX_M, AnalyticBackend, get_backend, run_qae

__all__ = ["Estimate", "amplitude_estimation", "bounded_mean", "subgaussian_mean", "HeavyTailedMean",
           "UnbiasedMLMC", "median_repetitions"]

SUCCESS = 8 / math.pi**2  # BHMT: one QAE lands within the error bound with probability >= 8/π²


class Estimate(NamedTuple):
    estimate: np.ndarray | float
    queries: int


def _check_oracle(oracle) -> DiscreteOracle:
    if not isinstance(oracle, DiscreteOracle):
        raise TypeError(f"oracle must be a DiscreteOracle, got {type(oracle).__name__}")
    return oracle


def _check_delta(delta) -> float:
    return check_real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)


def _check_target(eps, n):
    if (eps is None) == (n is None):
        raise ValueError("give exactly one of eps (target accuracy) and n (query budget)")
    if eps is not None:
        return check_real("eps", eps, low=0.0, low_open=True), None
    return None, check_int("n (query budget)", n, minimum=1)


def median_repetitions(delta: float) -> int:
    """Odd r with ``P(median of r QAE runs fails) <= exp(−2r(8/π² − ½)²) <= delta`` (Hoeffding)."""
    delta = _check_delta(delta)
    r = math.ceil(math.log(1 / delta) / (2 * (SUCCESS - 0.5) ** 2))
    return r + 1 - r % 2


def _m_for(err: float, mean_bound: float) -> int:
    """Smallest m with ``2π√(ā(1−ā))/M + π²/M² <= err`` (ā = min(mean_bound, ½): the worst case
    of a ≤ mean_bound)."""
    a = min(max(mean_bound, 0.0), 0.5)
    s = 2 * math.pi * math.sqrt(a * (1 - a))
    # positive root of err M² − s M − π² = 0
    M = (s + math.sqrt(s * s + 4 * err * math.pi**2)) / (2 * err)
    return max(1, math.ceil(math.log2(M)))


def amplitude_estimation(oracle: DiscreteOracle, f, m: int, *, shots: int = 1, backend="analytic", rng=None,
                         counter: QueryCounter | None = None) -> Estimate:
    """Canonical QAE of ``a = E f(X)`` with ``m`` evaluation qubits.

    Args:
        oracle: the law of X.
        f: a callable ``values (K, d) -> (K,)`` with values in [0, 1], or the array ``(K,)`` itself.
        m: evaluation qubits (M = 2^m outcomes, 2^m − 1 Grover applications per shot).
        shots: independent runs.
    Returns ``Estimate(estimates (shots,), queries = shots (2^{m+1} − 1))``."""
    oracle = _check_oracle(oracle)
    z = np.asarray(f(oracle.values) if callable(f) else f, float).reshape(-1)
    if z.shape != (oracle.K,):
        raise ValueError(f"f must give one value per atom ({oracle.K},), got {z.shape}")
    counter = counter if counter is not None else QueryCounter()
    before = counter.queries
    est = run_qae(oracle.probs, z, m, check_int("shots", shots, minimum=1), backend, as_rng(rng), counter)
    return Estimate(est, counter.queries - before)


def _qae_median(probs, z, m, reps, backend, rng, counter) -> float:
    return float(np.median(run_qae(probs, z, m, reps, backend, rng, counter)))


def bounded_mean(oracle: DiscreteOracle, f=None, *, eps: float | None = None, n: int | None = None, delta: float = 0.05,
                 backend="analytic", rng=None, counter: QueryCounter | None = None) -> Estimate:
    """Montanaro's quantum estimator of ``E f(X)`` for ``f(X) ∈ [0, 1]`` (default f: X itself, d = 1).

    With ``eps``: M = 2^m is the smallest power of two with ``π/M + π²/M² <= eps`` and the median
    of :func:`median_repetitions` (delta) runs is returned (|error| <= eps with prob >= 1 − delta).
    With ``n``: the largest M whose r runs fit in n queries (``r (2M − 1) <= n``)."""
    oracle = _check_oracle(oracle)
    eps, n = _check_target(eps, n)
    delta = _check_delta(delta)
    if f is None:
        if oracle.d != 1:
            raise ValueError("f=None needs a 1-D oracle; give f mapping values (K, d) to [0, 1]")
        z = oracle.values[:, 0]
    else:
        z = np.asarray(f(oracle.values) if callable(f) else f, float).reshape(-1)
    if z.shape != (oracle.K,) or not np.isfinite(z).all() or z.min() < 0 or z.max() > 1:
        raise ValueError("bounded_mean needs f(X) in [0, 1] on every atom")
    r = median_repetitions(delta)
    if eps is not None:
        m = _m_for(eps, 0.5)
    else:
        m = int(math.floor(math.log2((n / r + 1) / 2))) if n >= 3 * r else 0
        if m < 1:
            raise ValueError(f"n = {n} queries is below the {3 * r} that {r} runs of the smallest QAE (m = 1) need")
    if m > MAX_M:
        raise ValueError(f"the QAE this eps / n asks for (m = {m}) is beyond the simulator's m <= {MAX_M}")
    counter = counter if counter is not None else QueryCounter()
    before = counter.queries
    est = _qae_median(oracle.probs, z, m, r, backend, as_rng(rng), counter)
    return Estimate(est, counter.queries - before)


class _Plan(NamedTuple):
    scale: float          # s
    cut: float            # B
    m: list               # evaluation qubits per level (levels 0..K)
    reps: int
    pre_samples: int
    queries: int


class HeavyTailedMean:
    """The quantum mean estimator for a bounded p-th central moment (see the module docstring).

    Args:
        p: moment order, in (1, 2].
        moment_bound: ν >= E|X_i − μ_i|^p for every coordinate i, finite and > 0.
        delta: failure probability in (0, 1).
        backend: ``"analytic"``, ``"statevector"``, ``"qiskit"`` or a backend object.

    Call ``est(oracle, eps=...)`` or ``est(oracle, n=...)`` → ``Estimate((d,) array, queries)``.
    ``plan(eps, d)`` returns the planned levels and the exact query count before running."""

    def __init__(self, p: float, moment_bound: float, delta: float = 0.05, backend="analytic"):
        self.p = check_real("p", p, low=1.0, high=2.0, low_open=True)
        self.moment_bound = check_real("moment_bound", moment_bound, low=0.0, low_open=True)
        self.delta = _check_delta(delta)
        self.backend = get_backend(backend)

    def plan(self, eps: float, d: int = 1, *, max_m: int = MAX_M) -> _Plan:
        """Levels, repetitions and the exact number of queries for accuracy ``eps`` (ℓ2 for d > 1).
        ``max_m``: the largest Grover-power exponent accepted (the simulator's ``MAX_M``; a planner
        that only counts queries may raise it)."""
        eps = check_real("eps", eps, low=0.0, low_open=True)
        d = check_int("d", d, minimum=1)
        max_m = check_int("max_m", max_m, minimum=1)
        p = self.p
        eps_c = eps / math.sqrt(d)
        delta_c = self.delta / d
        nu = 5 * 2 ** (p - 1) * self.moment_bound  # p-th moment of X − c once |c − μ| <= (4ν)^{1/p}
        s = nu ** (1 / p)
        B = max(s, (3 * nu / eps_c) ** (1 / (p - 1)))
        K = max(0, math.ceil(math.log2(B / s)))
        reps = median_repetitions(delta_c / (2 * (2 * K + 2)))
        pre = math.ceil(8 * math.log(4 / delta_c)) | 1
        err_level = (2 * eps_c / 3) / (2 * (K + 1))
        ms = []
        for k in range(K + 1):
            u = s * 2**k
            tail = 1.0 if k == 0 else min(1.0, 2.0 ** (-(k - 1) * p))  # P(|Y| > 2^{k−1}s) <= ν/(2^{k−1}s)^p
            m = _m_for(err_level / u, tail)
            if m > max_m:
                raise ValueError(f"eps = {eps:g} needs 2^{m} Grover powers at level {k}, beyond "
                                 f"2^{max_m}: ask for a larger eps (or a smaller budget)")
            ms.append(m)
        queries = d * (pre + 2 * reps * sum(2 ** (m + 1) - 1 for m in ms))
        return _Plan(s, B, ms, reps, pre, queries)

    def eps_for_budget(self, n: int, d: int = 1) -> float:
        """The smallest ``eps`` whose plan fits in ``n`` queries (bisection on log eps)."""
        n = check_int("n (query budget)", n, minimum=1)
        lo, hi = -30.0, 30.0  # log eps
        if self.plan(math.exp(hi), d).queries > n:
            raise ValueError(f"n = {n} queries is below the cheapest plan ({self.plan(math.exp(hi), d).queries})")

        def fits(log_eps):
            try:
                return self.plan(math.exp(log_eps), d).queries <= n
            except ValueError:  # beyond the simulator's largest QAE: certainly more than n can buy here
                return False

        for _ in range(60):
            mid = 0.5 * (lo + hi)
            if fits(mid):
                hi = mid
            else:
                lo = mid
        return math.exp(hi)

    def __call__(self, oracle: DiscreteOracle, *, eps: float | None = None, n: int | None = None, rng=None,
                 counter: QueryCounter | None = None) -> Estimate:
        oracle = _check_oracle(oracle)
        eps, n = _check_target(eps, n)
        if eps is None:
            eps = self.eps_for_budget(n, oracle.d)
        plan = self.plan(eps, oracle.d)
        rng = as_rng(rng)
        counter = counter if counter is not None else QueryCounter()
        before = counter.queries
        out = np.empty(oracle.d)
        for i in range(oracle.d):
            out[i] = self._coordinate(oracle, i, plan, rng, counter)
        return Estimate(out, counter.queries - before)

    def _coordinate(self, oracle, i, plan, rng, counter) -> float:
        x = oracle.values[:, i]
        # Hamoudi's first step: a classical median of a few samples as the centre.
        c = float(np.median(oracle.sample(plan.pre_samples, rng, counter)[:, i]))
        y = x - c
        ay = np.abs(y)
        K = len(plan.m) - 1
        u = plan.scale * 2.0 ** np.arange(K + 1)
        # level of each atom: 0 for |y| <= s, k for 2^{k−1}s < |y| <= 2^k s, K + 1 beyond the cut
        level = np.searchsorted(u, ay, side="left")
        analytic = isinstance(self.backend, AnalyticBackend)
        if analytic:  # the outcome law depends on the amplitude alone: one pass for every level
            inside = level <= K
            w = oracle.probs * ay / u[np.minimum(level, K)] * inside
            amp = {+1.0: np.bincount(level[inside & (y > 0)], w[inside & (y > 0)], minlength=K + 1),
                   -1.0: np.bincount(level[inside & (y < 0)], w[inside & (y < 0)], minlength=K + 1)}
        total = 0.0
        for k, m in enumerate(plan.m):
            for sign in (1.0, -1.0):
                if analytic:
                    probs, z = _ONE, np.array([min(1.0, amp[sign][k])])
                else:
                    probs, z = oracle.probs, np.where((level == k) & (sign * y > 0), ay / u[k], 0.0)
                # an empty level still runs its circuit (the estimator cannot know it is empty)
                total += sign * u[k] * _qae_median(probs, z, m, plan.reps, self.backend, rng, counter)
        return c + total


_ONE = np.ones(1)


def subgaussian_mean(oracle: DiscreteOracle, sigma: float, *, eps: float | None = None, n: int | None = None,
                     delta: float = 0.05, backend="analytic", rng=None, counter: QueryCounter | None = None) -> Estimate:
    """Hamoudi's quantum sub-Gaussian estimator (variance ≤ σ²): :class:`HeavyTailedMean` with p = 2,
    ν = σ² — dyadic truncation levels, each estimated by bounded QAE, recombined. Error ≈ σ log(1/δ)/n
    up to a log n factor."""
    sigma = check_real("sigma", sigma, low=0.0, low_open=True)
    return HeavyTailedMean(2.0, sigma**2, delta, backend)(oracle, eps=eps, n=n, rng=rng, counter=counter)


class UnbiasedMLMC:
    """Generalized multilevel Monte Carlo: an unbiased estimator of ``lim_j E base(n₀ 2^j)`` from a
    biased base estimator.

    Args:
        base: ``base(oracle, n, rng, counter) -> estimate`` (array or float) using about n queries.
        n0: the budget of level 0.
        rate: r > 1 in ``P(J = j) = (1 − 2^{−r}) 2^{−r(j−1)}``, j >= 1. The expected cost is
            ``c(n₀) + Σ_j P(j) (c(n₀2^j) + c(n₀2^{j−1}))`` (:meth:`expected_cost`), finite for r > 1
            when c is linear; the variance is finite when ``E(μ̂_j − μ̂_{j−1})² = o(2^{−rj})``.
        max_level: optional cap on J (then unbiased for ``E base(n₀ 2^{max_level})`` instead).

    The two estimates of a level are independent runs (a quantum estimator cannot be coupled
    to its own coarser run as classical MLMC couples sample paths)."""

    def __init__(self, base: Callable, n0: int, rate: float = 1.5, max_level: int | None = None):
        if not callable(base):
            raise TypeError("base must be callable (oracle, n, rng, counter) -> estimate")
        self.base = base
        self.n0 = check_int("n0", n0, minimum=1)
        self.rate = check_real("rate", rate, low=1.0, low_open=True)
        self.max_level = None if max_level is None else check_int("max_level", max_level, minimum=1)

    def level_probs(self, J: int) -> np.ndarray:
        """``P(J = j)`` for j = 1..J."""
        j = np.arange(1, J + 1)
        q = (1 - 2.0**-self.rate) * 2.0 ** (-self.rate * (j - 1))
        if self.max_level is not None and J >= self.max_level:
            q[self.max_level - 1] = 2.0 ** (-self.rate * (self.max_level - 1))  # the capped tail mass
        return q

    def draw_level(self, rng) -> int:
        j = 1 + int(rng.geometric(1 - 2.0**-self.rate)) - 1
        return j if self.max_level is None else min(j, self.max_level)

    def expected_cost(self, cost: Callable[[int], float] = lambda n: n, levels: int = 200) -> float:
        J = levels if self.max_level is None else self.max_level
        q = self.level_probs(J)
        j = np.arange(1, J + 1)
        c = np.array([cost(self.n0 * 2**int(k)) + cost(self.n0 * 2 ** int(k - 1)) for k in j])
        return float(cost(self.n0) + q @ c)

    def __call__(self, oracle, *, rng=None, counter: QueryCounter | None = None) -> Estimate:
        rng = as_rng(rng)
        counter = counter if counter is not None else QueryCounter()
        before = counter.queries
        j = self.draw_level(rng)
        pj = self.level_probs(j)[j - 1]
        mu0 = np.asarray(self.base(oracle, self.n0, rng, counter), float)
        fine = np.asarray(self.base(oracle, self.n0 * 2**j, rng, counter), float)
        coarse = np.asarray(self.base(oracle, self.n0 * 2 ** (j - 1), rng, counter), float)
        return Estimate(mu0 + (fine - coarse) / pj, counter.queries - before)
