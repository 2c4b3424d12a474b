"""Pairwise AUC training: exact O(n log n) pairwise surrogate losses, minibatch U-statistic tools,
a class-balanced sampler, the Corrective Power diagnostic and a scikit-learn classifier.

Implements the AUC corrective-power paper (NeurIPS 2026): see docs/auc-corrective-power.md."""

from .corrective import (
    CorrectivePower, DegeneracyMonitor, UStatDecomposition, corrective_power, corrective_profile, severe_fraction,
    surrogate_derivative, ustat_components, ustat_decomposition,
)
from .losses import SURROGATES, PairwiseAUCLoss, empirical_auc, pairwise_auc_loss, split_scores
from .sampler import DualSampler

__all__ = [
    "SURROGATES", "PairwiseAUCLoss", "pairwise_auc_loss", "split_scores", "empirical_auc", "DualSampler",
    "CorrectivePower", "corrective_power", "corrective_profile", "severe_fraction", "surrogate_derivative",
    "UStatDecomposition", "ustat_components", "ustat_decomposition", "DegeneracyMonitor", "PairwiseAUCClassifier",
]


def __getattr__(name):
    # The scikit-learn estimator needs the ``ranking`` extra: imported on first use, so that the
    # losses and diagnostics work with torch alone.
    if name == "PairwiseAUCClassifier":
        from .estimator import PairwiseAUCClassifier

        return PairwiseAUCClassifier
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
