"""Optimizers (torch.optim.Optimizer classes over functional cores)."""

from .norms import L2, Blocks, Linf, Norm, Spectral, get_norm
from .nsgd import NSGD, nsgd_step
from .quadruple import (QuadrupleOptimizer, quadruple_adam, quadruple_adamw, quadruple_aligned, quadruple_lion,
                        quadruple_muon, quadruple_sgd, quadruple_shampoo, quadruple_spectral, quadruple_tracking)

__all__ = ["Blocks", "L2", "Linf", "Norm", "Spectral", "get_norm", "NSGD", "nsgd_step",
           "QuadrupleOptimizer", "quadruple_adam", "quadruple_adamw", "quadruple_aligned", "quadruple_lion",
           "quadruple_muon", "quadruple_sgd", "quadruple_shampoo", "quadruple_spectral", "quadruple_tracking"]
