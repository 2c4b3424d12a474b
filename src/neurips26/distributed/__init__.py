"""Distributed training: Rennala-NSGD and its baselines as server state machines, a
simulated-time driver, and a torch.distributed runner (:mod:`.runner`)."""

from .rennala import (
    AsynchronousServer, Checkpointer, RennalaServer, Server, SimulationResult, SynchronousServer,
    equilibrium_time, load_checkpoint, replay, save_checkpoint, simulate, simulate_rennala, worker_rngs,
)
from .runner import RunOptions, RunResult, run_distributed, run_rennala, serve_torchrun

__all__ = [
    "RunOptions", "RunResult", "run_distributed", "run_rennala", "serve_torchrun",
    "Server", "AsynchronousServer", "RennalaServer", "SynchronousServer", "Checkpointer", "SimulationResult",
    "equilibrium_time", "load_checkpoint", "replay", "save_checkpoint", "simulate", "simulate_rennala",
    "worker_rngs",
]
