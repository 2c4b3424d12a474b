"""Distributed runners. For now: the Rennala-NSGD server and its simulated-time driver
(the torch.distributed runner is not built yet)."""

from .rennala import RennalaServer, SimulationResult, equilibrium_time, simulate_rennala

__all__ = ["RennalaServer", "SimulationResult", "equilibrium_time", "simulate_rennala"]
