"""Optimizers (torch.optim.Optimizer classes over functional cores)."""

from ..geometry import L2, Blocks, Linf, Norm, Spectral, get_norm, nsgd_step
from .diagnostics import InstabilityMonitor
from .hyperball import HyperballMuon
from .hyperp import HyperPScaler, apply_hyperp, fit_power_law, hyperp_param_groups, optimal_lr
from .minimax import GDA, AdaSGDA, AdaSGDAVR, LogBilinearGame, NeAda, TiAda
from .nsgd import NSGD
from .quadruple import (QuadrupleOptimizer, quadruple_adam, quadruple_adamw, quadruple_aligned, quadruple_lion,
                        quadruple_muon, quadruple_sgd, quadruple_shampoo, quadruple_spectral, quadruple_tracking)

__all__ = ["Blocks", "L2", "Linf", "Norm", "Spectral", "get_norm", "NSGD", "nsgd_step",
           "QuadrupleOptimizer", "quadruple_adam", "quadruple_adamw", "quadruple_aligned", "quadruple_lion",
           "quadruple_muon", "quadruple_sgd", "quadruple_shampoo", "quadruple_spectral", "quadruple_tracking",
           "HyperballMuon", "HyperPScaler", "apply_hyperp", "hyperp_param_groups", "optimal_lr", "fit_power_law", "InstabilityMonitor",
           "AdaSGDA", "AdaSGDAVR", "TiAda", "NeAda", "GDA", "LogBilinearGame"]
