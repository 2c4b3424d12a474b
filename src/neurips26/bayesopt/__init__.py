"""Bayesian optimization components for GPyTorch / BoTorch (extra ``bo``)."""

from .marginalized_kernel import ExpectedRBFKernel, MarginalizedQuadraticKernel, split_posterior

__all__ = ["ExpectedRBFKernel", "MarginalizedQuadraticKernel", "split_posterior"]
