"""Minimax optimizers with one pair API (``min_params``, ``max_params``; one ``step`` descends x
and ascends y): AdaSGDA and AdaSGDA-VR (orthogonalized, parameter-free single-loop GDA) and the
baselines TiAda, NeAda and a GDA wrapper over two torch optimizers; a closed-form NC-SC test
problem and an (η_x, η_y) sensitivity map."""

from ._pair import direction
from .adasgda import AdaSGDA, AdaSGDAVR
from .baselines import GDA, NeAda, TiAda
from .problems import LogBilinearGame, sensitivity

__all__ = ["AdaSGDA", "AdaSGDAVR", "TiAda", "NeAda", "GDA", "LogBilinearGame", "direction", "sensitivity"]
