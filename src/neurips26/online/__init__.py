"""Decentralized online convex optimization with compressed communication.

Modules: ``problems`` (loss sequences and their comparators), ``domains``, ``network``
(gossip matrices), ``compressors``, ``gossip`` (consensus rounds), ``algorithms`` (D-FTRL,
D-OGD and their compressed forms, each a pure init / decide / update triple) and ``driver``
(``run_doco``)."""

from .algorithms import (
    DFTRL,
    DOGD,
    AcceleratedDFTRL,
    AcceleratedFTRLState,
    CompressedDFTRL,
    CompressedDOGD,
    CompressedFTRLState,
    CompressedOGDState,
    DOCOAlgorithm,
    FTRLState,
    OGDState,
)
from .compressors import QSGD, Compressor, Identity, RandomK, ScaledSign, TopK
from .domains import Ball, Box, Simplex
from .driver import DOCOResult, run_doco
from .gossip import accelerated_gossip, acceleration_theta, choco_gossip
from .network import GossipMatrix, gossip_matrix
from .problems import LeastSquaresLosses, LinearLosses, LogisticLosses, OnlineProblem, quadratic_min_on_ball

__all__ = [
    "Ball", "Box", "Simplex", "Compressor", "Identity", "TopK", "RandomK", "ScaledSign", "QSGD",
    "GossipMatrix", "gossip_matrix", "DFTRL", "AcceleratedDFTRL", "accelerated_gossip", "DOGD", "CompressedDFTRL", "CompressedDOGD",
    "DOCOResult", "LinearLosses", "LeastSquaresLosses", "LogisticLosses", "choco_gossip", "quadratic_min_on_ball", "run_doco",
    "acceleration_theta", "OnlineProblem", "DOCOAlgorithm", "FTRLState", "CompressedFTRLState", "AcceleratedFTRLState",
    "OGDState", "CompressedOGDState",
]
