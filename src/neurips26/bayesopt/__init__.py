"""Bayesian optimization components for GPyTorch / BoTorch (extra ``bo``)."""

from ._gp import GPFitWarning, fit_gp
from .acquisition import BatchUpperConfidenceBound, LocallyPenalizedAcquisition
from .geometry import interpolated_metric, isotropic_ball, mahalanobis_ball, trust_region_box
from .space import SearchSpace
from .stopping import (BOResult, ChowdhuryGopalan, SrinivasContinuous, EIThresholdRule, EpsDeltaRule, FixedBudget, RuleRace, SrinivasFinite, StopDecision, UCBLCBGapRule,
                       bayes_opt_loop, gp_posterior, gp_ucb, regret_bounds)
from .kriging_believer import (BUCB, BatchThompson, KrigingBeliever, LocalPenalization, QLogNEI, RandomProposer,
                               fantasize, irgp_beta, irgp_ucb)
from .async_bo import AsyncBayesOpt, AsyncResult, AsyncSimulationResult, JournalWarning, simulate_async
from .marginalized_kernel import ExpectedRBFKernel, MarginalizedQuadraticKernel, split_posterior

SimulationResult = AsyncSimulationResult  # the name before it was told apart from distributed's; kept importable

__all__ = ["ExpectedRBFKernel", "MarginalizedQuadraticKernel", "split_posterior", "interpolated_metric",
           "mahalanobis_ball", "isotropic_ball", "trust_region_box", "EIThresholdRule", "EpsDeltaRule", "FixedBudget", "RuleRace",
           "SrinivasFinite", "SrinivasContinuous", "ChowdhuryGopalan", "StopDecision", "UCBLCBGapRule", "gp_posterior", "gp_ucb", "regret_bounds", "BOResult",
           "bayes_opt_loop", "BUCB", "BatchThompson", "KrigingBeliever", "LocalPenalization", "QLogNEI", "RandomProposer",
           "SearchSpace", "fantasize", "irgp_beta", "irgp_ucb", "AsyncBayesOpt", "AsyncResult", "AsyncSimulationResult",
           "fit_gp", "simulate_async", "BatchUpperConfidenceBound", "LocallyPenalizedAcquisition",
           "GPFitWarning", "JournalWarning"]
