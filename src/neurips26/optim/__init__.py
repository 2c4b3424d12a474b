"""Optimizers (torch.optim.Optimizer classes over functional cores)."""

from .norms import L2, Blocks, Linf, Norm, Spectral, get_norm
from .nsgd import NSGD, nsgd_step

__all__ = ["Blocks", "L2", "Linf", "Norm", "Spectral", "get_norm", "NSGD", "nsgd_step"]
