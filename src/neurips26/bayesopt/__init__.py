"""Bayesian optimization components for GPyTorch / BoTorch (extra ``bo``)."""

from .geometry import interpolated_metric, isotropic_ball, mahalanobis_ball, trust_region_box
from .stopping import (BOResult, EIThresholdRule, EpsDeltaRule, FixedBudget, SrinivasFinite, StopDecision, UCBLCBGapRule,
                       bayes_opt_loop, gp_posterior, gp_ucb, regret_bounds)
from .marginalized_kernel import ExpectedRBFKernel, MarginalizedQuadraticKernel, split_posterior

__all__ = ["ExpectedRBFKernel", "MarginalizedQuadraticKernel", "split_posterior", "interpolated_metric",
           "mahalanobis_ball", "isotropic_ball", "trust_region_box", "EIThresholdRule", "EpsDeltaRule", "FixedBudget",
           "SrinivasFinite", "StopDecision", "UCBLCBGapRule", "gp_posterior", "gp_ucb", "regret_bounds", "BOResult",
           "bayes_opt_loop"]
