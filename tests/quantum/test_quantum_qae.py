"""Amplitude estimation: the analytic outcome law against the NumPy statevector simulation of
the circuit and against qiskit-algorithms' own AmplitudeEstimation circuit; query accounting
against qiskit-algorithms' num_oracle_queries."""

import numpy as np
import pytest

from neurips26.quantum import DiscreteOracle, QueryCounter, amplitude_estimation, qae_law
from neurips26.quantum.qae import AnalyticBackend, QiskitBackend, StatevectorBackend


def _tv(a, b):
    return 0.5 * np.abs(np.asarray(a) - np.asarray(b)).sum()


def test_analytic_law_equals_statevector_simulation_m1_to_8_20_amplitudes():
    rng = np.random.default_rng(0)
    worst = 0.0
    for i in range(20):
        K = int(rng.integers(1, 9))
        probs = rng.dirichlet(np.ones(K))
        z = rng.random(K)
        if i == 0:
            z[:] = 0.0  # a = 0 and a = 1: the edges of the law
        if i == 1:
            z[:] = 1.0
        for m in range(1, 9):
            worst = max(worst, _tv(AnalyticBackend().law(probs, z, m), StatevectorBackend().law(probs, z, m)))
    assert worst < 1e-10


def test_law_is_a_distribution_peaked_at_the_amplitude():
    law = qae_law(0.3, 7)
    assert law.sum() == pytest.approx(1.0, abs=1e-12) and (law >= 0).all()
    y = np.argmax(law)
    assert abs(np.sin(np.pi * y / 128) ** 2 - 0.3) < 2 * np.pi * np.sqrt(0.3 * 0.7) / 128 + (np.pi / 128) ** 2
    # BHMT: P(|ã − a| <= 2π√(a(1−a))/M + π²/M²) >= 8/π²
    a_hat = np.sin(np.pi * np.arange(128) / 128) ** 2
    ok = np.abs(a_hat - 0.3) <= 2 * np.pi * np.sqrt(0.21) / 128 + np.pi**2 / 128**2
    assert law[ok].sum() >= 8 / np.pi**2


def test_analytic_law_equals_qiskit_algorithms_circuit_exact_probabilities():
    pytest.importorskip("qiskit_algorithms")
    rng = np.random.default_rng(1)
    for K, m in ((2, 1), (3, 3), (4, 4), (5, 5)):
        probs = rng.dirichlet(np.ones(K))
        z = rng.random(K)
        assert _tv(AnalyticBackend().law(probs, z, m), QiskitBackend().law(probs, z, m)) < 1e-10


def test_qiskit_backend_samples_and_counts_like_qiskit_algorithms():
    pytest.importorskip("qiskit_algorithms")
    from qiskit.primitives import StatevectorSampler
    from qiskit_algorithms import AmplitudeEstimation

    o = DiscreteOracle(np.array([0.1, 0.6, 0.9]), np.array([0.2, 0.5, 0.3]))
    m, shots = 4, 400
    backend = QiskitBackend(sampler=StatevectorSampler(default_shots=shots, seed=3))
    counter = QueryCounter()
    est, q = amplitude_estimation(o, lambda v: v[:, 0], m, shots=shots, backend=backend, rng=0, counter=counter)
    ae = AmplitudeEstimation(m, sampler=StatevectorSampler(default_shots=shots, seed=3))
    res = ae.estimate(backend.problem(o.probs, o.values[:, 0]))
    assert counter.grover == res.num_oracle_queries == shots * (2**m - 1)
    assert q == shots * (2 ** (m + 1) - 1)
    # Same seed, same circuit: the same multiset of outcomes as qiskit-algorithms reads them.
    ours = {}
    for a in np.round(est, 7):
        ours[a] = ours.get(a, 0) + 1 / shots
    assert set(ours) == set(res.samples)
    for a, pr in res.samples.items():
        assert ours[a] == pytest.approx(pr, abs=1e-12)


def test_iterative_ae_query_convention_reproduced():
    pytest.importorskip("qiskit_algorithms")
    from qiskit.primitives import StatevectorSampler
    from qiskit_algorithms import IterativeAmplitudeEstimation

    o = DiscreteOracle(np.array([0.2, 0.7]), np.array([0.5, 0.5]))
    shots = 100
    iae = IterativeAmplitudeEstimation(0.02, 0.05, sampler=StatevectorSampler(default_shots=shots, seed=7))
    res = iae.estimate(QiskitBackend().problem(o.probs, o.values[:, 0]))
    # qiskit counts Grover applications × shots per round; ours charges each round's circuit
    counter = QueryCounter()
    for k in res.powers[1:]:  # powers[0] = 0 is the a-priori entry, not a circuit
        counter.charge_circuit(k, shots)
    assert counter.grover == res.num_oracle_queries
    assert counter.queries == sum(shots * (2 * k + 1) for k in res.powers[1:])
    assert abs(res.estimation - 0.45) < 0.05


def test_backends_check_their_inputs():
    with pytest.raises(ValueError, match="z"):
        AnalyticBackend().law(np.array([1.0]), np.array([1.5]), 3)
    with pytest.raises(ValueError, match="m"):
        qae_law(0.5, 0)
    with pytest.raises(ValueError, match="statevector"):
        StatevectorBackend().law(np.full(4096, 1 / 4096), np.zeros(4096), 3)
    with pytest.raises(ValueError, match="a must"):
        qae_law(1.2, 3)
