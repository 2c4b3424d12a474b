"""A query-budget planner: how many queries each mean estimator needs for ℓ2 accuracy ``eps`` with
probability ``1 − delta`` on a d-dimensional law with a bounded p-th moment, and the dimension beyond
which the quantum route stops paying off — the question to answer before building a circuit.

Every count is a *guarantee*, not a fit: the budget at which the estimator's own (ε, δ) bound holds.
No constant fitted in the quick run enters (so the numbers are worst-case, and the quick run's
measured errors at these budgets are well inside ``eps``).

**The moment bound.** ``moment_bound`` is ν ≥ E|X_i − μ_i|^p for every coordinate i (what
:class:`~neurips26.quantum.mean.HeavyTailedMean` takes). The ℓ2 bound the multivariate estimators need
is ``E‖X − μ‖₂^p ≤ d ν`` (``(Σ y_i²)^{p/2} ≤ Σ |y_i|^p`` for p ≤ 2; tight for a law that moves one
coordinate at a time; at p = 2 it is tr Σ ≤ d ν).

**Quantum** (the estimators' own plans, not re-derived):

* ``heavy_tailed_mean``: ``HeavyTailedMean(p, ν, δ).plan(eps, d).queries`` — coordinate-wise, ``eps/√d``
  and ``δ/d`` per coordinate; exactly what a call ``est(oracle, eps=eps)`` spends.
* ``multivariate_mean``: ``MultivariateMean(p, d ν, δ).plan(eps, d).queries`` — an upper bound on what a
  call spends (a level's amplification cost depends on its estimated probability; the plan takes the
  worst bucket).

The plans refuse an amplitude estimation beyond the simulator's ``2^32`` Grover powers (``qae.MAX_M``:
float64 precision of the analytic sampler, not a property of the algorithm). The planner runs the same
plans with that cap lifted (``plan(..., max_m=PLANNER_MAX_M)``), so its counts extend to accuracies the
simulator cannot run; ``QueryPlan.simulable`` says which plans the estimators would actually accept.

**Classical** (closed forms of the bounds the library's classical estimators meet, with the block counts
:func:`~neurips26.quantum.classical.classical_mean` uses):

* ``sample_mean``: Markov on the p-th moment of the error, with von Bahr–Esseen for the moment. Two valid
  bounds, the smaller one taken: coordinate-wise ``n = ⌈(2 ν d / (δ t^p))^{1/(p−1)}⌉`` with ``t = eps/√d``
  (real vBE ``E|Σ Y_j|^p ≤ 2 Σ E|Y_j|^p``, failure δ/d per coordinate; the reproduction's NSGD minibatch),
  and in ℓ2 ``n = ⌈(c_p d ν / (δ eps^p))^{1/(p−1)}⌉`` with the Hilbert-space constant ``c_p`` below.
* ``median_of_means`` (coordinate-wise): ``k = ⌈8 ln(d/δ)⌉`` blocks (``classical_mean(delta=δ/d)``), each of
  ``b = ⌈(8 ν / t^p)^{1/(p−1)}⌉`` samples so that a block mean is within ``t = eps/√d`` w.p. ≥ 3/4 (vBE +
  Markov); the median fails only if half the blocks do: ``exp(−2k/16) ≤ δ/d`` (Hoeffding). n = k b.
* ``geometric_median_of_means``: ``k = ⌈8 ln(1/δ)⌉`` blocks, each within ``r = eps/1.25`` in ℓ2 w.p. ≥ 7/8
  (``b = ⌈(8 c_p d ν / r^p)^{1/(p−1)}⌉``); Minsker's geometric-median bound with α = 3/8 (``C_α = 1.25``, the
  constant :mod:`.multivariate` uses for its centre) fails only if 3k/8 blocks do: ``exp(−2k/16) ≤ δ``.

``c_p``, the constant of ``E‖Σ Y_j‖^p ≤ c_p Σ E‖Y_j‖^p`` for independent mean-zero vectors: 1 at p = 2
(the variance identity); ``2^p`` for p < 2 (symmetrize with an independent copy, then Jensen over the
Rademacher signs and ``(Σ a_j)^{p/2} ≤ Σ a_j^{p/2}``). The jump at p = 2 is the bound's, not the law's.

**Crossover** (:func:`crossover_dimension`): the first d after the last point of the doubling grid
1, 2, 4, .. (to 2^40) at which the cheaper quantum plan undercuts the cheapest classical bound (bisected).
The d-dependence is weak either way: at p = 2 the multivariate count ``≈ √(d · dν)/eps`` and the
classical ``≈ dν/eps²`` share the power d, and the crossover comes from the logarithms (δ/d in the
phase-estimation repetitions, the phase-oracle width β) — e.g. d* = 6 at ν = 1, eps = 10⁻⁶, δ = 0.05,
and no d at all at eps ≥ 10⁻⁵, where the worst-case constants keep the quantum plan dearer. For p < 2 the
worst-case ℓ2 moment dν favours the quantum plan increasingly with d (its count grows as
``d^{1 + (2−p)/(2(p−1))}``, geometric MoM's as ``d^{1/(p−1)}``), so there is no crossover below 2^40.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .._checks import check_int, check_real
from .mean import HeavyTailedMean
from .multivariate import MultivariateMean
from .qae import MAX_M

__all__ = ["QueryPlan", "plan_queries", "crossover_dimension", "sample_mean_queries", "median_of_means_blocks",
           "geometric_mom_blocks", "hilbert_vbe_constant", "QUANTUM_ESTIMATORS", "CLASSICAL_ESTIMATORS"]

QUANTUM_ESTIMATORS = ("heavy_tailed_mean", "multivariate_mean")
CLASSICAL_ESTIMATORS = ("sample_mean", "median_of_means", "geometric_median_of_means")
D_MAX = 2**40  # the crossover search stops here (and reports "none up to D_MAX")
GEOMETRIC_MEDIAN_C = 1.25  # Minsker's C_α = (1 − α)/√(1 − 2α) at α = 3/8


def _check(p, moment_bound, eps, delta, d):
    p = check_real("p", p, low=1.0, high=2.0, low_open=True)
    nu = check_real("moment_bound", moment_bound, low=0.0, low_open=True)
    eps = check_real("eps", eps, low=0.0, low_open=True)
    delta = check_real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    d = check_int("d", d, minimum=1)
    return p, nu, eps, delta, d


def _ceil(x: float) -> int:
    """⌈x⌉ that forgives float rounding: x within 1e-12 (relative) of an integer is that integer
    (``1/(0.05·0.5²)`` must be 80, not 81)."""
    r = round(x)
    return max(1, r if abs(x - r) <= 1e-12 * max(1.0, x) else math.ceil(x))


def hilbert_vbe_constant(p: float) -> float:
    """``c_p`` with ``E‖Σ Y_j‖₂^p ≤ c_p Σ E‖Y_j‖₂^p`` (independent, mean zero): 1 at p = 2, ``2^p`` below."""
    p = check_real("p", p, low=1.0, high=2.0, low_open=True)
    return 1.0 if p == 2.0 else 2.0**p


def sample_mean_queries(p: float, moment_bound: float, eps: float, delta: float, d: int = 1) -> int:
    """Samples for ``‖mean − μ‖₂ ≤ eps`` w.p. ``1 − delta`` (the smaller of the coordinate-wise and the ℓ2
    Markov–von Bahr–Esseen bounds; see the module docstring)."""
    p, nu, eps, delta, d = _check(p, moment_bound, eps, delta, d)
    t = eps / math.sqrt(d)
    coord = (2 * nu * d / (delta * t**p)) ** (1 / (p - 1))
    l2 = (hilbert_vbe_constant(p) * d * nu / (delta * eps**p)) ** (1 / (p - 1))
    return _ceil(min(coord, l2))


def median_of_means_blocks(p: float, moment_bound: float, eps: float, delta: float, d: int = 1) -> tuple[int, int]:
    """``(k, b)`` of coordinate-wise median-of-means: k = ⌈8 ln(d/δ)⌉ blocks of b samples (n = k b)."""
    p, nu, eps, delta, d = _check(p, moment_bound, eps, delta, d)
    t = eps / math.sqrt(d)
    k = math.ceil(8 * math.log(d / delta))
    return k, _ceil((8 * nu / t**p) ** (1 / (p - 1)))


def geometric_mom_blocks(p: float, moment_bound: float, eps: float, delta: float, d: int = 1) -> tuple[int, int]:
    """``(k, b)`` of geometric median-of-means: k = ⌈8 ln(1/δ)⌉ blocks of b samples (n = k b)."""
    p, nu, eps, delta, d = _check(p, moment_bound, eps, delta, d)
    r = eps / GEOMETRIC_MEDIAN_C
    k = math.ceil(8 * math.log(1 / delta))
    return k, _ceil((8 * hilbert_vbe_constant(p) * d * nu / r**p) ** (1 / (p - 1)))


PLANNER_MAX_M = 10**6  # the planner counts queries of any size: the simulator's MAX_M does not bind it


def _quantum_plans(p, nu, eps, delta, d) -> dict:
    """Each quantum estimator's own plan, with the simulator's cap lifted."""
    return {"heavy_tailed_mean": HeavyTailedMean(p, nu, delta).plan(eps, d, max_m=PLANNER_MAX_M),
            "multivariate_mean": MultivariateMean(p, d * nu, delta).plan(eps, d, max_m=PLANNER_MAX_M)}


def _quantum(p, nu, eps, delta, d) -> dict:
    return {name: int(plan.queries) for name, plan in _quantum_plans(p, nu, eps, delta, d).items()}


def _simulable(plans: dict) -> dict:
    """Whether each estimator's own (capped) plan would accept the same (eps, d): every level's QAE
    within the simulator's 2^MAX_M Grover powers."""
    return {"heavy_tailed_mean": max(plans["heavy_tailed_mean"].m) <= MAX_M,
            "multivariate_mean": max(level.m_q for level in plans["multivariate_mean"].levels) <= MAX_M}


def _classical(p, nu, eps, delta, d) -> dict:
    k, b = median_of_means_blocks(p, nu, eps, delta, d)
    kg, bg = geometric_mom_blocks(p, nu, eps, delta, d)
    return {"sample_mean": sample_mean_queries(p, nu, eps, delta, d), "median_of_means": k * b,
            "geometric_median_of_means": kg * bg}


def _best(costs: dict):
    name = min(costs, key=costs.get)
    return name, costs[name]


def _quantum_cheaper(p, nu, eps, delta, d) -> bool:
    return _best(_quantum(p, nu, eps, delta, d))[1] < _best(_classical(p, nu, eps, delta, d))[1]


def crossover_dimension(p: float, moment_bound: float, eps: float, delta: float = 0.05,
                        d_max: int = D_MAX) -> tuple[int | None, str]:
    """The dimension beyond which the quantum route stops paying off at accuracy ``eps``: ``(d*, note)``
    with d* the first d after the *last* point of the doubling grid ``1, 2, 4, .. ≤ d_max`` at which the
    cheaper quantum plan is cheaper than the cheapest classical bound, located by bisection between that
    point and the next grid point (so the quantum route is cheaper at ``d* − 1`` and not at ``d*``).
    ``None`` when the quantum route is cheaper at no grid point, or still cheaper at ``d_max``."""
    p, nu, eps, delta, _ = _check(p, moment_bound, eps, delta, 1)
    d_max = check_int("d_max", d_max, minimum=1)
    grid = [2**i for i in range(d_max.bit_length()) if 2**i <= d_max]
    cheaper = [_quantum_cheaper(p, nu, eps, delta, d) for d in grid]
    if not any(cheaper):
        return None, f"the quantum route is cheaper at no d of the grid 1, 2, 4, .., {grid[-1]}"
    last = max(i for i, c in enumerate(cheaper) if c)
    if last == len(grid) - 1:
        return None, f"the quantum route is still cheaper at d = {grid[-1]}, the end of the search"
    lo, hi = grid[last], grid[last + 1]  # cheaper at lo, not at hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _quantum_cheaper(p, nu, eps, delta, mid):
            lo = mid
        else:
            hi = mid
    first = grid[cheaper.index(True)]
    return hi, (f"quantum cheaper at d = {lo}, not at d = {hi}" +
                ("" if first == 1 else f"; on the doubling grid it is cheaper from d = {first} on"))


@dataclass(frozen=True)
class QueryPlan:
    """The planner's answer (see :func:`plan_queries`). ``quantum`` / ``classical``: ``(name, queries)``
    pairs; ``simulable``: ``(name, bool)``, whether the quantum estimator's own plan accepts this (eps, d)
    (its QAE within the simulator's 2^32 Grover powers); ``crossover_d``: the dimension at which the quantum
    route stops paying off (``None``: see ``crossover_note``)."""

    p: float
    moment_bound: float
    d: int
    eps: float
    delta: float
    quantum: tuple
    classical: tuple
    simulable: tuple
    crossover_d: int | None
    crossover_note: str

    def queries(self) -> dict:
        """Every estimator's planned queries, by name."""
        return {**dict(self.quantum), **dict(self.classical)}

    @property
    def best_quantum(self) -> tuple:
        return _best(dict(self.quantum))

    @property
    def best_classical(self) -> tuple:
        return _best(dict(self.classical))

    @property
    def speedup(self) -> float:
        """Best classical queries / best quantum queries (> 1: the quantum route pays off at this d)."""
        return self.best_classical[1] / self.best_quantum[1]

    def table(self) -> str:
        sim = dict(self.simulable)
        rows = [(n, "quantum", q, "" if sim[n] else "  (beyond the simulator's QAE size)") for n, q in self.quantum]
        rows += [(n, "classical", q, "") for n, q in self.classical]
        w = max(len(r[0]) for r in rows)
        lines = [f"plan_queries(p={self.p:g}, moment_bound={self.moment_bound:g}, d={self.d}, eps={self.eps:g}, "
                 f"delta={self.delta:g}): queries for l2 error <= eps w.p. >= 1 - delta",
                 f"  {'estimator':<{w}}  {'kind':<9}  queries"]
        lines += [f"  {n:<{w}}  {kind:<9}  {q:.3e}{note}" for n, kind, q, note in rows]
        lines.append(f"  speedup (best classical / best quantum): {self.speedup:.3g}x")
        lines.append(f"  crossover d: {'-' if self.crossover_d is None else self.crossover_d} ({self.crossover_note})")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def plan_queries(p: float, moment_bound: float, d: int, eps: float, delta: float = 0.05) -> QueryPlan:
    """Predicted queries of each estimator for ℓ2 error ≤ ``eps`` w.p. ≥ ``1 − delta`` on a d-dimensional law
    with ``E|X_i − μ_i|^p ≤ moment_bound`` per coordinate, and the crossover dimension (module docstring).

    Args:
        p: moment order in (1, 2].
        moment_bound: ν > 0, finite (per coordinate).
        d: dimension, an integer ≥ 1.
        eps: target ℓ2 accuracy > 0, finite.
        delta: failure probability in (0, 1).
    """
    p, nu, eps, delta, d = _check(p, moment_bound, eps, delta, d)
    plans = _quantum_plans(p, nu, eps, delta, d)
    q = {name: int(plan.queries) for name, plan in plans.items()}
    c = _classical(p, nu, eps, delta, d)
    dstar, note = crossover_dimension(p, nu, eps, delta)
    return QueryPlan(p, nu, d, eps, delta, tuple(q.items()), tuple(c.items()), tuple(_simulable(plans).items()),
                     dstar, note)
