"""The multivariate quantum mean estimator (Cornelissen–Hamoudi–Jerbi's structure: dyadic levels in
the Euclidean norm, amplitude amplification of each level, multivariate phase estimation over a grid
of directions), simulated with exact outcome laws and exact query counts.

The estimator (:class:`MultivariateMean`, ``E‖X − μ‖₂^p ≤ ν``, p ∈ (1, 2]; p = 2 is the finite-covariance
case with ν = tr Σ):

1. **Centre.** ``c`` = the geometric median of ``k = ⌈32 ln(4/δ)⌉`` classical samples (k queries).
   Each sample is within ``r = (4ν)^{1/p}`` of μ with probability ≥ 3/4, so (Hoeffding) more than
   5/8 of them are w.p. ≥ 1 − δ/4, and then ``‖c − μ‖ ≤ 1.25 r`` (Minsker's geometric-median bound
   with α = 3/8). Hence ``E‖Y‖^p ≤ ν' = 2^{p−1}(1 + 4·1.25^p) ν`` for ``Y = X − c``.
2. **Truncation and levels.** ``s = ν'^{1/p}``, cut ``R = max(s, (3ν'/ε)^{1/(p−1)})`` (bias
   ``‖E Y 1{‖Y‖ > R}‖ ≤ ν'/R^{p−1} ≤ ε/3``), levels ``L_0 = {‖Y‖ ≤ s}``,
   ``L_k = {2^{k−1}s < ‖Y‖ ≤ 2^k s}`` up to ``u_K = 2^K s ≥ R``. ``q_k = P(Y ∈ L_k) ≤ τ_k =
   min(1, ν'/(2^{k−1}s)^p)`` (Markov), ``E Y 1{L_k} = q_k m_k`` with ``‖m_k‖ ≤ u_k = 2^k s``.
   Each level gets ℓ2 accuracy ``ε_k = (2ε/3)/(K + 1)``.
3. **Level probability.** ``q̂_k`` = median of canonical QAE runs (exact outcome law, see
   :mod:`.qae`) at accuracy ``ε_k/(2u_k)`` (the BHMT bound with ``a ≤ τ_k``), clipped to ``[0, τ_k]``.
4. **Conditional mean.** If ``q̂_k u_k ≤ ε_k/2`` the level contributes 0 (error ≤ q̂_k u_k).
   Otherwise ``q̂_k`` is rounded up to the dyadic bucket ``b = τ_k 2^{−j} ≥ q̂_k`` (so the cost
   depends on j only, and the plan bounds it exactly), the conditional law on ``L_k`` is prepared by
   exact amplitude amplification (charged ``2A + 1`` uses of U with ``A = ⌈π/(4 arcsin√(b/2)) − ½⌉``,
   enough for any q ≥ b/2), and ``m_k`` is estimated by **multivariate phase estimation** on the
   grid ``v ∈ {−G/2..G/2−1}^d / G`` with ``G = ⌈4 u_k b √d / ε_k⌉``: the directional phase oracle
   ``|v⟩ ↦ exp(iπG E⟨v, Z⟩)|v⟩`` (``Z = Y/u_k`` on the level, ``‖Z‖ ≤ 1``), then the d-dimensional
   inverse QFT over ``Z_G^d``. The phase oracle is built from the probability oracle of
   ``(1 + ⟨v, Z⟩/β)/2`` by the Jacobi–Anger / QSVT conversion (Gilyén–Arunachalam–Wiebe), charged
   its degree ``D = ⌈e t/2⌉ + ⌈ln(1/ε_ph)⌉`` with ``t = πGβ`` (uses of the conditional oracle),
   ``β = min(√(ln(2/η)/2), √d/2)``: by Hoeffding ``|⟨v, Z⟩| ≤ β`` on all but a fraction η of the grid
   directions (all of them when ``β = √d/2``, i.e. d ≤ 2 ln(2/η)). Every coordinate's outcome is
   an independent draw of the Fejér law centred at ``G m_{k,j}/(2u_k)``; a coordinate is within
   ``2u_k/G`` of ``m_{k,j}`` w.p. ≥ 8/π², and the coordinate-wise median of
   ``median_repetitions(δ/(2(K+1)d))`` runs is, w.p. ≥ 1 − δ/(2(K+1)) for all d coordinates.
   ℓ2 error of the level ≤ ``|q̂ − q| u_k + q̂ √d 2u_k/G ≤ ε_k``.

Cost: level k needs ``≈ r · (eπβ/2)(4u_k b√d/ε_k) · π/(2√(b/2))`` queries ``∝ √d u_k √τ_k / ε_k``;
for p = 2, ``u_k √τ_k ≤ 2√ν'`` and the total is ``Õ(√(d ν) / ε)`` — error ``Õ(√(d tr Σ)/n)`` at n queries,
against the classical ``√(tr Σ / n)``: the quantum estimator wins once n ≳ d.

**What is idealized (simulated as exact, charged its cost):** amplitude amplification lands exactly on
the level's conditional law; the directional phase oracle is exactly linear, ``exp(iπG⟨v, E Z⟩)``
on every grid direction (exact for d ≤ 2 ln(2/η); for larger d the true oracle clips
``⟨v, Z⟩`` at ±β on a fraction ≤ η of directions, which CHJ show phase estimation tolerates — that
perturbation is *not* simulated; :func:`directional_pe_law` computes it on small grids). Outcome laws
of both quantum subroutines are otherwise exact (QAE: :func:`~neurips26.quantum.qae.qae_law`;
phase estimation: a product of Fejér laws, checked against the d-dimensional FFT of the grid state).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .._checks import check_int, check_real
from .classical import geometric_median_of_means
from .mean import Estimate, median_repetitions
from .oracles import DiscreteOracle, QueryCounter, as_rng
from .qae import MAX_M, fejer_law, run_qae, sample_fejer

__all__ = ["MultivariateMean", "multivariate_mean", "directional_pe_law", "product_fejer_law"]

_ONE = np.ones(1)


class _Level(NamedTuple):
    u: float        # u_k
    tau: float      # τ_k (bound on q_k)
    eps: float      # ε_k
    m_q: int        # QAE evaluation qubits for q_k
    buckets: list   # (b, G, A, D) per dyadic bucket j = 0..J
    worst: int      # max over buckets of the phase-estimation queries (r_pe · D · (2A + 1))


class MultivariatePlan(NamedTuple):
    scale: float
    cut: float
    beta: float
    pre_samples: int
    reps_q: int
    reps_pe: int
    levels: list
    queries: int    # upper bound on the queries of one call (exact count comes back with the estimate)


def _m_for(err: float, mean_bound: float) -> int:
    a = min(max(mean_bound, 0.0), 0.5)
    s = 2 * math.pi * math.sqrt(a * (1 - a))
    M = (s + math.sqrt(s * s + 4 * err * math.pi**2)) / (2 * err)
    return max(1, math.ceil(math.log2(M)))


class MultivariateMean:
    """Quantum multivariate mean estimator for ``E‖X − μ‖₂^p ≤ ν`` (see the module docstring).

    Args:
        p: moment order in (1, 2] (p = 2: finite covariance, ν = tr Σ).
        moment_bound: ν ≥ E‖X − μ‖₂^p, finite and > 0.
        delta: failure probability in (0, 1) (ℓ2 error ≤ ε w.p. ≥ 1 − δ).
        eta: fraction of grid directions allowed outside ``|⟨v, Z⟩| ≤ β`` (sets β), in (0, 1).
        eps_phase: accuracy of the phase-oracle conversion (enters its degree), in (0, 1).

    ``est(oracle, eps=...)`` or ``est(oracle, n=...)`` → ``Estimate((d,) array, queries)``;
    ``plan(eps, d)`` gives the levels and an exact upper bound on the queries of one call."""

    def __init__(self, p: float, moment_bound: float, delta: float = 0.05, eta: float = 1 / 16,
                 eps_phase: float = 0.01):
        self.p = check_real("p", p, low=1.0, high=2.0, low_open=True)
        self.moment_bound = check_real("moment_bound", moment_bound, low=0.0, low_open=True)
        self.delta = check_real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
        self.eta = check_real("eta", eta, low=0.0, high=1.0, low_open=True, high_open=True)
        self.eps_phase = check_real("eps_phase", eps_phase, low=0.0, high=1.0, low_open=True, high_open=True)
        self._plans: dict = {}
        self._budgets: dict = {}

    # ---- planning ---------------------------------------------------------------------------
    def plan(self, eps: float, d: int, *, max_m: int = MAX_M) -> MultivariatePlan:
        eps = check_real("eps", eps, low=0.0, low_open=True)
        d = check_int("d", d, minimum=1)
        max_m = check_int("max_m", max_m, minimum=1)
        p = self.p
        nu = 2 ** (p - 1) * (1 + 4 * 1.25**p) * self.moment_bound
        s = nu ** (1 / p)
        R = max(s, (3 * nu / eps) ** (1 / (p - 1)))
        K = max(0, math.ceil(math.log2(R / s)))
        pre = math.ceil(32 * math.log(4 / self.delta))
        reps_q = median_repetitions(self.delta / (4 * (K + 1)))
        reps_pe = median_repetitions(self.delta / (2 * (K + 1) * d))
        beta = min(math.sqrt(math.log(2 / self.eta) / 2), math.sqrt(d) / 2)
        ln_ph = math.ceil(math.log(1 / self.eps_phase))
        eps_k = (2 * eps / 3) / (K + 1)
        levels, total = [], pre
        for k in range(K + 1):
            u = s * 2.0**k
            tau = 1.0 if k == 0 else min(1.0, nu / (s * 2.0 ** (k - 1)) ** p)
            m_q = _m_for(eps_k / (2 * u), tau)
            if m_q > max_m:
                raise ValueError(f"eps = {eps:g} needs 2^{m_q} Grover powers at level {k}, beyond "
                                 f"2^{max_m}: ask for a larger eps (or a smaller budget)")
            q_min = eps_k / (2 * u)  # below it the level is skipped
            buckets, worst, j = [], 0, 0
            while True:
                b = tau * 2.0**-j
                if b <= q_min / 2 or b <= 0:
                    break
                G = max(1, math.ceil(4 * u * b * math.sqrt(d) / eps_k))
                A = max(0, math.ceil(math.pi / (4 * math.asin(math.sqrt(b / 2))) - 0.5))
                D = math.ceil(math.e * math.pi * G * beta / 2) + ln_ph
                buckets.append((b, G, A, D))
                worst = max(worst, reps_pe * D * (2 * A + 1))
                j += 1
            levels.append(_Level(u, tau, eps_k, m_q, buckets, worst))
            total += reps_q * (2 ** (m_q + 1) - 1) + worst
        return MultivariatePlan(s, R, beta, pre, reps_q, reps_pe, levels, total)

    def eps_for_budget(self, n: int, d: int) -> float:
        """The smallest ``eps`` whose plan (an upper bound on the queries) fits in ``n``."""
        n = check_int("n (query budget)", n, minimum=1)
        d = check_int("d", d, minimum=1)
        lo, hi = -30.0, 30.0

        def fits(le):
            try:
                return self.plan(math.exp(le), d).queries <= n
            except ValueError:
                return False

        if not fits(hi):
            raise ValueError(f"n = {n} queries is below the cheapest plan ({self.plan(math.exp(hi), d).queries})")
        for _ in range(50):
            mid = 0.5 * (lo + hi)
            lo, hi = (lo, mid) if fits(mid) else (mid, hi)
        return math.exp(hi)

    # ---- running ----------------------------------------------------------------------------
    def __call__(self, oracle: DiscreteOracle, *, eps: float | None = None, n: int | None = None, rng=None,
                 counter: QueryCounter | None = None) -> Estimate:
        if not isinstance(oracle, DiscreteOracle):
            raise TypeError(f"oracle must be a DiscreteOracle, got {type(oracle).__name__}")
        if (eps is None) == (n is None):
            raise ValueError("give exactly one of eps (target accuracy) and n (query budget)")
        d = oracle.d
        if eps is None:
            if (n, d) not in self._budgets:  # deterministic in (n, d): bisected once per estimator
                self._budgets[(n, d)] = self.eps_for_budget(n, d)
            eps = self._budgets[(n, d)]
        key = (float(eps), d)
        if key not in self._plans:  # the plan depends on (eps, d) only: reused across the steps of an optimizer
            self._plans[key] = self.plan(eps, d)
        plan = self._plans[key]
        rng = as_rng(rng)
        counter = counter if counter is not None else QueryCounter()
        before = counter.queries
        pts = oracle.sample(plan.pre_samples, rng, counter)
        c = geometric_median_of_means(pts, plan.pre_samples)
        Y = oracle.values - c
        norm = np.linalg.norm(Y, axis=1)
        us = np.array([lv.u for lv in plan.levels])
        level = np.searchsorted(us, norm, side="left")  # K + 1: beyond the cut
        inside = level < len(us)
        q_all = np.bincount(level[inside], oracle.probs[inside], minlength=len(us))
        sums = np.zeros((len(us), d))
        np.add.at(sums, level[inside], oracle.probs[inside, None] * Y[inside])
        est = c.copy()
        for k, lv in enumerate(plan.levels):
            # step 3: QAE of q_k (the analytic law needs the amplitude only)
            qs = run_qae(_ONE, np.array([min(1.0, q_all[k])]), lv.m_q, plan.reps_q, "analytic", rng, counter)
            q_hat = min(float(np.median(qs)), lv.tau)
            if q_hat * lv.u <= lv.eps / 2 or not lv.buckets:
                continue
            j = min(len(lv.buckets) - 1, max(0, int(math.floor(math.log2(lv.tau / q_hat)))))
            b, G, A, D = lv.buckets[j]
            m = sums[k] / q_all[k] if q_all[k] > 0 else np.zeros(d)
            centres = G * m / (2 * lv.u)  # the Fejér peak of each coordinate, in outcome units
            y = sample_fejer(np.broadcast_to(centres, (plan.reps_pe, d)), G, rng)
            counter.charge_queries(plan.reps_pe * D * (2 * A + 1), circuits=plan.reps_pe)
            y_c = np.mod(y + G // 2, G) - G // 2  # outcomes read as centred integers in [−⌊G/2⌋, ⌈G/2⌉)
            m_hat = 2 * lv.u * np.median(y_c, axis=0) / G
            est = est + q_hat * m_hat
        return Estimate(est, counter.queries - before)


def multivariate_mean(oracle: DiscreteOracle, moment_bound: float, *, p: float = 2.0, eps: float | None = None,
                      n: int | None = None, delta: float = 0.05, rng=None, counter: QueryCounter | None = None) -> Estimate:
    """The Cornelissen–Hamoudi–Jerbi-style estimator (:class:`MultivariateMean`) in one call; for p = 2
    ``moment_bound`` is a bound on tr Σ."""
    return MultivariateMean(p, moment_bound, delta)(oracle, eps=eps, n=n, rng=rng, counter=counter)


def product_fejer_law(centres, G: int) -> np.ndarray:
    """The analytic law ``(G,)*d`` of d-dimensional phase estimation for a linear phase: the outer
    product of the one-dimensional Fejér laws (:func:`~neurips26.quantum.qae.fejer_law`)."""
    centres = np.asarray(centres, float).reshape(-1)
    law = np.ones(())
    for cj in centres:
        law = np.multiply.outer(law, fejer_law(cj, G))
    return law


def directional_pe_law(values, probs, G: int, beta: float | None = None) -> np.ndarray:
    """The outcome law ``(G,)*d`` of multivariate phase estimation, computed from the grid state
    itself: ``G^{−d/2} Σ_k exp(iπG·φ(v_k)) |k⟩`` over ``k ∈ {0..G−1}^d`` with the directions
    ``v_k = (k − ⌊G/2⌋)/G ∈ [−½, ½)^d``, then the inverse QFT over ``Z_G^d`` (``numpy.fft.fftn``).
    ``φ(v) = E⟨v, Z⟩`` (the ideal oracle; ``Z`` = ``values (K, d)`` with ``probs``), or with ``beta``
    the oracle actually built from the probability oracle of ``(1 + ⟨v, Z⟩/β)/2``:
    ``φ(v) = β E clip(⟨v, Z⟩/β, −1, 1)``. Small grids only (``G^d ≤ 2^22``): the reference for
    :func:`product_fejer_law` and the size of the clipping that :class:`MultivariateMean` idealizes."""
    Z = np.asarray(values, float)
    P = np.asarray(probs, float)
    if Z.ndim != 2 or P.shape != (Z.shape[0],):
        raise ValueError(f"values must be (K, d) and probs (K,), got {Z.shape} and {P.shape}")
    G = check_int("G", G, minimum=1)
    d = Z.shape[1]
    if G**d > 2**22:
        raise ValueError(f"G^d = {G}^{d} is beyond the 2^22 grid points this reference builds")
    grid = np.stack(np.meshgrid(*[np.arange(G)] * d, indexing="ij"), axis=-1).reshape(-1, d)
    v = (grid - G // 2) / G
    if beta is None:
        phi = v @ (P @ Z)
    else:
        beta = check_real("beta", beta, low=0.0, low_open=True)
        phi = beta * (np.clip((v @ Z.T) / beta, -1.0, 1.0) @ P)
    state = np.exp(1j * np.pi * G * phi).reshape((G,) * d) / math.sqrt(G**d)
    law = np.abs(np.fft.fftn(state, norm="ortho")) ** 2  # Σ_k e^{−2πi⟨y,k⟩/G}: the inverse QFT
    return law / law.sum()
