"""Optimizers (torch.optim.Optimizer classes over functional cores)."""

from .norms import L2, Linf, Norm, Spectral, get_norm
from .nsgd import NSGD, nsgd_step

__all__ = ["L2", "Linf", "Norm", "Spectral", "get_norm", "NSGD", "nsgd_step"]
