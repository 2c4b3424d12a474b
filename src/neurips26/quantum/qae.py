"""Canonical amplitude estimation (Brassard–Høyer–Mosca–Tapp) behind three backends.

The estimation problem: a discrete law ``(p_k)`` and a function ``z_k = f(x_k) ∈ [0, 1]``;
the state preparation is

    A |0⟩|0⟩ = Σ_k √p_k |k⟩ (√(1 − z_k) |0⟩ + √z_k |1⟩),

whose "good" amplitude (ancilla 1) has probability ``a = Σ_k p_k z_k = sin²θ``. With m
evaluation qubits (M = 2^m) the circuit applies controlled powers of the Grover operator
``Q = −A S₀ A† S_χ`` (``2^m − 1`` applications in all), an inverse QFT, and measures
``y ∈ {0..M−1}``; the estimate is ``ã = sin²(π y / M)``. Its outcome law is exactly

    P(y) = ½ [F(y/M − θ/π) + F(y/M + θ/π)],   F(Δ) = sin²(MπΔ) / (M² sin²(πΔ))   (F(0) = 1).

Backends (one interface, ``law(probs, z, m)`` and ``sample(probs, z, m, shots, rng)``):

* ``"analytic"``: the formula above (needs only ``a``); cheap, used at scale.
* ``"statevector"``: a NumPy simulation of the circuit itself — A as a unitary on the
  (index ⊗ ancilla) space, the controlled ``Q^{2^j}`` on each evaluation qubit, the inverse
  QFT — for small registers (2K ≤ 4096, m ≤ 12); the cross-check of the formula.
* ``"qiskit"``: A as a ``qiskit`` ``StatePreparation`` gate and qiskit-algorithms'
  ``AmplitudeEstimation`` circuit (its own Grover operator and QFT), sampled with
  ``qiskit.primitives.StatevectorSampler`` (or any V2 sampler, e.g. ``qiskit_aer.primitives.SamplerV2``);
  qiskit is imported only here, and only when this backend is used.

Query cost of one shot: ``2^m − 1`` Grover applications, i.e. ``2(2^m − 1) + 1 = 2^{m+1} − 1``
uses of A or A† (see :mod:`neurips26.quantum.oracles` for the convention).
"""

from __future__ import annotations

import numpy as np

from .._checks import check_int
from .oracles import QueryCounter, as_rng

__all__ = ["qae_law", "AnalyticBackend", "StatevectorBackend", "QiskitBackend", "get_backend", "estimates_from_outcomes",
           "fejer_law", "sample_fejer"]

MAX_M = 32  # the windowed analytic sampler never builds the law; float64 keeps y − Mω exact to ~1e-6 here
MAX_LAW_M = 24  # building the whole law (qae_law, statevector, qiskit): 2^24 outcomes at most


def _check_problem(probs, z):
    probs = np.asarray(probs, float)
    z = np.asarray(z, float)
    if probs.ndim != 1 or z.shape != probs.shape or probs.size == 0:
        raise ValueError(f"probs and z must be non-empty 1-D arrays of one shape, got {probs.shape} and {z.shape}")
    if not (np.isfinite(z).all() and (z >= -1e-12).all() and (z <= 1 + 1e-12).all()):
        raise ValueError("z (the function evaluated on the atoms) must lie in [0, 1]")
    return probs, np.clip(z, 0.0, 1.0)


def _check_m(m) -> int:
    m = check_int("m (evaluation qubits)", m, minimum=1)
    if m > MAX_M:
        raise ValueError(f"m (evaluation qubits) must be <= {MAX_M}, got {m}")
    return m


def qae_law(a: float, m: int) -> np.ndarray:
    """The exact outcome law ``(2^m,)`` of canonical QAE with m evaluation qubits on amplitude
    ``a = sin²θ ∈ [0, 1]`` (the formula of the module docstring)."""
    m = _check_m(m)
    if m > MAX_LAW_M:
        raise ValueError(f"m (evaluation qubits) must be <= {MAX_LAW_M} to build the whole law, got {m}")
    a = float(a)
    if not (0.0 <= a <= 1.0):
        raise ValueError(f"a must lie in [0, 1], got {a}")
    M = 2**m
    omega = np.arcsin(np.sqrt(a)) / np.pi
    y = np.arange(M) / M

    def fejer(delta):
        s = np.sin(np.pi * delta)
        num = np.sin(M * np.pi * delta)
        small = np.abs(s) < 1e-12
        return np.where(small, 1.0, num**2 / (M**2 * np.where(small, 1.0, s) ** 2))

    law = 0.5 * (fejer(y - omega) + fejer(y + omega))
    return law / law.sum()


def estimates_from_outcomes(y, m: int) -> np.ndarray:
    """``ã = sin²(π y / 2^m)``."""
    return np.sin(np.pi * np.asarray(y) / 2**m) ** 2


class AnalyticBackend:
    """Samples the exact outcome law (:func:`qae_law`); needs only ``a = Σ p z``."""

    name = "analytic"

    def law(self, probs, z, m) -> np.ndarray:
        probs, z = _check_problem(probs, z)
        return qae_law(min(1.0, max(0.0, float(probs @ z))), m)

    def sample(self, probs, z, m, shots, rng) -> np.ndarray:
        """Exact draws without building the 2^m-point law: a branch ±θ/π with probability ½ each,
        then the offset from the branch's Fejér kernel by inverse CDF over a window of 2W + 1
        outcomes around its peak; a uniform beyond the window's mass (< 1% of draws) is resolved
        on the full kernel, in the same order, so the draw is exact."""
        probs, z = _check_problem(probs, z)
        m = _check_m(m)
        shots = check_int("shots", shots, minimum=1)
        rng = as_rng(rng)
        M = 2**m
        a = min(1.0, max(0.0, float(probs @ z)))
        omega = np.arcsin(np.sqrt(a)) / np.pi
        branch = rng.random(shots) < 0.5
        u = rng.random(shots)
        out = np.empty(shots, dtype=np.int64)
        for sign, sel in ((1.0, branch), (-1.0, ~branch)):
            if sel.any():
                out[sel] = self._draw(sign * M * omega, M, u[sel])
        return out

    def _draw(self, c, M, u):
        """Inverse CDF of the Fejér kernel centred at ``c`` over outcomes ordered by rings of
        growing offset from ``floor(c)``: 0..W, then −1..−W, then the next ring of 4× the width,
        ...; only the rings the uniforms reach are computed (the tail mass beyond offset W is
        about 2/(π²W), so the expected work is O(W₀))."""
        base = int(np.floor(c))
        res = np.full(u.size, -1, dtype=np.int64)
        seen, acc, lo, W = 0, 0.0, 0, 64
        while True:
            hi = min(W, M)  # offsets in [lo, hi) on the right, (−hi, −lo] on the left (without overlap mod M)
            right = np.arange(lo, hi)
            left = -np.arange(max(lo, 1), hi)
            offs = np.concatenate([right, left])
            offs = offs[(offs >= -(M - 1) // 2) & (offs <= M // 2)] if hi * 2 > M else offs
            ys = np.mod(base + offs, M)
            cdf = acc + np.cumsum(self._kernel(ys, c, M))
            todo = res < 0
            idx = np.searchsorted(cdf, u[todo], side="right")
            hit = idx < ys.size
            if hi * 2 > M:  # the last ring: every remaining outcome is covered (rounding goes to the last)
                hit[:] = True
                idx = np.minimum(idx, ys.size - 1)
            sub = res[todo]
            sub[hit] = ys[idx[hit]]
            res[todo] = sub
            if (res >= 0).all():
                return res
            seen += ys.size
            acc = float(cdf[-1]) if cdf.size else acc
            lo, W = hi, 4 * W

    @staticmethod
    def _kernel(y, c, M):
        """F(y/M − c/M) = sin²(π(y − c)) / (M² sin²(π(y − c)/M)), 1 where the denominator vanishes."""
        d = (np.asarray(y, float) - c) / M
        s = np.sin(np.pi * d)
        small = np.abs(s) < 1e-12
        return np.where(small, 1.0, np.sin(M * np.pi * d) ** 2 / (M**2 * np.where(small, 1.0, s) ** 2))


def _householder_to(psi: np.ndarray) -> np.ndarray:
    """A real orthogonal matrix whose first column is the unit vector ``psi``."""
    e0 = np.zeros_like(psi)
    e0[0] = 1.0
    v = e0 - psi
    nv = v @ v
    if nv < 1e-30:
        return np.eye(psi.size)
    return np.eye(psi.size) - 2.0 * np.outer(v, v) / nv


class StatevectorBackend:
    """NumPy simulation of the QAE circuit: state ``(M, 2K)`` over (evaluation register) ⊗
    (index ⊗ ancilla), ancilla-major pairs ``(k, b) -> 2k + b``."""

    name = "statevector"
    max_system = 4096
    max_m = 12

    def law(self, probs, z, m) -> np.ndarray:
        probs, z = _check_problem(probs, z)
        m = _check_m(m)
        K = probs.size
        if 2 * K > self.max_system or m > self.max_m:
            raise ValueError(f"the statevector backend simulates 2K <= {self.max_system} amplitudes and m <= {self.max_m} "
                             f"evaluation qubits, got K = {K}, m = {m}")
        psi = np.empty(2 * K)
        psi[0::2] = np.sqrt(probs * (1 - z))
        psi[1::2] = np.sqrt(probs * z)
        psi /= np.linalg.norm(psi)
        A = _householder_to(psi)  # A|0> = psi
        good = np.zeros(2 * K)
        good[1::2] = 1.0
        S_chi = 1.0 - 2.0 * good  # diagonal: −1 on the good states
        S0 = np.ones(2 * K)
        S0[0] = -1.0
        Q = -(A * S0) @ A.T * S_chi[None, :]  # −A S0 A† S_chi (A real orthogonal: A† = Aᵀ)
        M = 2**m
        # Evaluation register in |+>^m, system in A|0>; controlled-Q^{2^j} on qubit j.
        state = np.tile(psi / np.sqrt(M), (M, 1)).astype(complex)
        ys = np.arange(M)
        power = Q.copy()
        for j in range(m):
            on = (ys >> j) & 1 == 1
            state[on] = state[on] @ power.T
            power = power @ power
        amp = np.fft.fft(state, axis=0) / np.sqrt(M)  # inverse QFT (e^{−2πi yz/M} convention)
        law = (np.abs(amp) ** 2).sum(axis=1)
        return law / law.sum()

    def sample(self, probs, z, m, shots, rng) -> np.ndarray:
        law = self.law(probs, z, m)
        return as_rng(rng).choice(law.size, size=check_int("shots", shots, minimum=1), p=law)


class QiskitBackend:
    """qiskit-algorithms' ``AmplitudeEstimation`` circuit on a ``StatePreparation`` A, run by a
    V2 sampler (default ``StatevectorSampler(seed=...)``). ``state_preparation``: a user's own
    A circuit (objective qubit 0) in place of the one built from ``(probs, z)``."""

    name = "qiskit"

    def __init__(self, sampler=None, state_preparation=None):
        self.sampler = sampler
        self.state_preparation = state_preparation

    def problem(self, probs, z):
        """The qiskit ``EstimationProblem`` (objective qubit 0: index = 2k + ancilla)."""
        from qiskit import QuantumCircuit
        from qiskit.circuit.library import StatePreparation
        from qiskit_algorithms import EstimationProblem

        if self.state_preparation is not None:
            return EstimationProblem(state_preparation=self.state_preparation, objective_qubits=[0])
        probs, z = _check_problem(probs, z)
        n = max(1, int(np.ceil(np.log2(probs.size))))
        psi = np.zeros(2 ** (n + 1))
        psi[0 : 2 * probs.size : 2] = np.sqrt(probs * (1 - z))
        psi[1 : 2 * probs.size : 2] = np.sqrt(probs * z)
        psi /= np.linalg.norm(psi)
        A = QuantumCircuit(n + 1)
        A.append(StatePreparation(psi), range(n + 1))
        return EstimationProblem(state_preparation=A, objective_qubits=[0])

    def circuit(self, probs, z, m, measurement=False):
        from qiskit_algorithms import AmplitudeEstimation

        ae = AmplitudeEstimation(num_eval_qubits=_check_m(m))
        return ae.construct_circuit(self.problem(probs, z), measurement=measurement)

    def law(self, probs, z, m) -> np.ndarray:
        """Exact law over y from ``qiskit.quantum_info.Statevector`` (qiskit's y: evaluation qubit 0
        is the most significant bit, as in ``AmplitudeEstimation.evaluate_measurements``)."""
        from qiskit.quantum_info import Statevector

        m = _check_m(m)
        qc = self.circuit(probs, z, m)
        probs_le = Statevector(qc).probabilities(qargs=list(range(m)))  # little-endian over eval qubits
        idx = np.arange(2**m)
        rev = np.array([int(format(i, f"0{m}b")[::-1], 2) for i in idx])
        law = np.zeros(2**m)
        law[rev] = probs_le
        return law

    def sample(self, probs, z, m, shots, rng) -> np.ndarray:
        from qiskit.primitives import StatevectorSampler

        m = _check_m(m)
        shots = check_int("shots", shots, minimum=1)
        sampler = self.sampler or StatevectorSampler(seed=int(as_rng(rng).integers(2**31)))
        qc = self.circuit(probs, z, m, measurement=True)
        res = sampler.run([(qc,)], shots=shots).result()[0]
        bits = getattr(res.data, next(iter(res.data.keys())))
        counts = bits.get_counts()
        ys = []
        for state, c in counts.items():
            ys += [int(state.replace(" ", "")[:m][::-1], 2)] * c  # qiskit-algorithms' reading of a bitstring
        return as_rng(rng).permutation(np.array(ys, dtype=np.int64))


def fejer_law(center: float, M: int) -> np.ndarray:
    """The outcome law ``(M,)`` of phase estimation on ``Z_M`` for the linear phase ``e^{2πi k c/M}``:
    ``P(y) = F(y − c) = sin²(π(y − c)) / (M² sin²(π(y − c)/M))`` (``M`` any integer >= 1, not only
    a power of two: the QFT over ``Z_M``)."""
    M = check_int("M", M, minimum=1)
    if M > 2**MAX_LAW_M:
        raise ValueError(f"M must be <= 2^{MAX_LAW_M} to build the whole law, got {M}")
    law = AnalyticBackend._kernel(np.arange(M), float(center), M)
    return law / law.sum()


def sample_fejer(centers, M: int, rng) -> np.ndarray:
    """One exact draw ``y ∈ {0..M−1}`` from :func:`fejer_law` for each centre of ``centers`` (any
    shape), vectorized. For ``M <= 128``: inverse CDF of the whole law. Otherwise the inverse CDF
    runs, for every centre at once, over the first ring of :class:`AnalyticBackend`'s sampler
    (offsets 0..63 then −1..−63 from ``floor(c)``); a uniform beyond that ring's mass (about 1% of
    the draws) is handed, unchanged, to that ring-by-ring sampler, which continues the same
    ordering, so every draw is the exact inverse CDF."""
    c = np.asarray(centers, float)
    M = check_int("M", M, minimum=1)
    if not np.isfinite(c).all():
        raise ValueError("centers must be finite")
    rng = as_rng(rng)
    flat = c.reshape(-1)
    u = rng.random(flat.size)
    if M <= 128:
        cdf = np.cumsum(AnalyticBackend._kernel(np.arange(M)[None, :], flat[:, None], M), axis=1)
        idx = np.minimum((cdf < (u * cdf[:, -1])[:, None]).sum(axis=1), M - 1)
        return idx.astype(np.int64).reshape(c.shape)
    base = np.floor(flat).astype(np.int64)
    offs = np.concatenate([np.arange(0, 64), -np.arange(1, 64)])
    ys = np.mod(base[:, None] + offs[None, :], M)
    cdf = np.cumsum(AnalyticBackend._kernel(ys, flat[:, None], M), axis=1)
    idx = (cdf < u[:, None]).sum(axis=1)
    out = np.empty(flat.size, dtype=np.int64)
    hit = idx < offs.size
    out[hit] = ys[hit, idx[hit]]
    for i in np.flatnonzero(~hit):  # rare: the draw lies beyond the first ring
        out[i] = AnalyticBackend()._draw(float(flat[i]), M, u[i : i + 1])[0]
    return out.reshape(c.shape)


_BACKENDS = {"analytic": AnalyticBackend, "statevector": StatevectorBackend, "qiskit": QiskitBackend}


def get_backend(backend):
    """A backend object from a name (``"analytic"``, ``"statevector"``, ``"qiskit"``) or an instance."""
    if isinstance(backend, str):
        if backend not in _BACKENDS:
            raise ValueError(f"backend must be one of {sorted(_BACKENDS)}, got {backend!r}")
        return _BACKENDS[backend]()
    if hasattr(backend, "sample") and hasattr(backend, "law"):
        return backend
    raise TypeError(f"backend must be a name or an object with law/sample, got {type(backend).__name__}")


def run_qae(probs, z, m: int, shots: int, backend, rng, counter: QueryCounter | None) -> np.ndarray:
    """``shots`` independent QAE estimates ``sin²(πy/M)`` of ``a = Σ p z``; charges the counter."""
    y = get_backend(backend).sample(probs, z, m, shots, rng)
    if counter is not None:
        counter.charge_circuit(2**m - 1, shots)
    return estimates_from_outcomes(y, m)
