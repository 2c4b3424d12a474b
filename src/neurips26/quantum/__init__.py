"""Quantum mean estimation under heavy tails, classically simulated with exact query counts,
and the SGD methods built on it (QNSGD, QPSGD). No quantum hardware: the numbers these
modules produce are *simulated query counts*, never seconds.

Layers: :mod:`.oracles` (sampling oracles, discretized heavy-tailed laws, the query counter),
:mod:`.qae` (canonical amplitude estimation: analytic law, NumPy statevector, qiskit),
:mod:`.mean` (bounded, sub-Gaussian, heavy-tailed estimators, unbiased MLMC),
:mod:`.multivariate` (the multivariate phase-estimation estimator, Cornelissen–Hamoudi–Jerbi style),
:mod:`.classical` (the classical baselines), :mod:`.sgd` (QNSGD, QPSGD), :mod:`.planner`
(predicted query budgets: :func:`plan_queries`). NumPy only, except the ``"qiskit"`` backend (extra ``quantum``).
"""

from .classical import (
    catoni, classical_mean, directional_median_of_means, geometric_median_of_means, median_of_means, sample_mean,
    trimmed_mean,
)
from .mean import Estimate, HeavyTailedMean, UnbiasedMLMC, amplitude_estimation, bounded_mean, median_repetitions, subgaussian_mean
from .multivariate import MultivariateMean, multivariate_mean
from .oracles import DiscreteOracle, GradientOracle, QueryCounter, student_t, symmetric_pareto
from .planner import QueryPlan, crossover_dimension, plan_queries
from .qae import AnalyticBackend, QiskitBackend, StatevectorBackend, qae_law
from .sgd import QNSGD, QPSGD, Ball, Box, Trace, clipped_sgd, minibatch_estimator, normalized_sgd, projected_sgd, qnsgd, qpsgd

__all__ = [
    "DiscreteOracle", "GradientOracle", "QueryCounter", "student_t", "symmetric_pareto",
    "qae_law", "AnalyticBackend", "StatevectorBackend", "QiskitBackend",
    "Estimate", "amplitude_estimation", "bounded_mean", "subgaussian_mean", "HeavyTailedMean", "UnbiasedMLMC",
    "median_repetitions", "MultivariateMean", "multivariate_mean",
    "sample_mean", "trimmed_mean", "median_of_means", "catoni", "geometric_median_of_means", "directional_median_of_means",
    "classical_mean",
    "plan_queries", "QueryPlan", "crossover_dimension",
    "Trace", "Ball", "Box", "clipped_sgd", "normalized_sgd", "qnsgd", "minibatch_estimator", "projected_sgd", "qpsgd", "QNSGD", "QPSGD",
]
