"""Decentralized online convex optimization with compressed communication."""

from .compressors import QSGD, Compressor, Identity, RandomK, ScaledSign, TopK
from .doco import (
    DFTRL,
    AcceleratedDFTRL,
    accelerated_gossip,
    DOGD,
    CompressedDFTRL,
    CompressedDOGD,
    DOCOResult,
    LeastSquaresLosses,
    LinearLosses,
    LogisticLosses,
    choco_gossip,
    quadratic_min_on_ball,
    run_doco,
)
from .domains import Ball, Box, Simplex
from .network import GossipMatrix, gossip_matrix

__all__ = [
    "Ball", "Box", "Simplex", "Compressor", "Identity", "TopK", "RandomK", "ScaledSign", "QSGD",
    "GossipMatrix", "gossip_matrix", "DFTRL", "AcceleratedDFTRL", "accelerated_gossip", "DOGD", "CompressedDFTRL", "CompressedDOGD",
    "DOCOResult", "LinearLosses", "LeastSquaresLosses", "LogisticLosses", "choco_gossip", "quadratic_min_on_ball", "run_doco",
]
