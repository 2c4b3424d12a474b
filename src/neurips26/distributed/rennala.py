"""Rennala-NSGD: semi-asynchronous normalized SGD (Rennala SGD of Tyurin & Richtárik,
with the step taken along the LMO of a chosen norm).

The server keeps the current point x_k. Every worker computes a stochastic gradient at
the point it was last given; when one finishes, the server keeps the gradient only if it
was computed at the current x_k (a stale one is discarded), and hands the worker the
current point again. Once B gradients at x_k are in, the server averages them, steps
``x_{k+1} = x_k − lr · lmo(ḡ)`` and the iteration counter moves on; workers are not
interrupted, so a computation under way at x_k becomes stale.

:class:`RennalaServer` is the algorithm alone (no clock, no transport), so the
simulated-time driver here and a real ``torch.distributed`` runner can share it.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

from ..optim.norms import Norm, get_norm

__all__ = ["RennalaServer", "SimulationResult", "simulate_rennala", "equilibrium_time"]


class RennalaServer:
    """The server's state machine: ``point()`` to hand out, ``submit(g, k)`` for a
    gradient computed at iteration k; returns True when it completed a step."""

    def __init__(self, x0: torch.Tensor, batch_size: int, lr: float, norm: str | Norm = "l2"):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not lr > 0:
            raise ValueError(f"lr must be > 0, got {lr}")
        self.x = x0.detach().clone()
        self.B = batch_size
        self.lr = lr
        self.norm = get_norm(norm)
        self.k = 0
        self._sum = torch.zeros_like(self.x)
        self._count = 0
        self.discarded = 0

    def point(self) -> tuple[torch.Tensor, int]:
        return self.x, self.k

    def submit(self, g: torch.Tensor, k: int) -> bool:
        if k != self.k:
            self.discarded += 1
            return False
        self._sum += g
        self._count += 1
        if self._count < self.B:
            return False
        self.x = self.x - self.lr * self.norm.lmo(self._sum / self.B)
        self.k += 1
        self._sum.zero_()
        self._count = 0
        return True


@dataclass
class SimulationResult:
    """Per server step: the simulated wall-clock time and the point after it."""

    times: np.ndarray
    points: list[torch.Tensor] = field(repr=False)
    discarded: int = 0


def simulate_rennala(
    grad: Callable[[torch.Tensor, int, np.random.Generator], torch.Tensor],
    x0: torch.Tensor,
    compute_time: Callable[[int, np.random.Generator], float],
    n_workers: int,
    batch_size: int,
    steps: int,
    lr: float,
    norm: str | Norm = "l2",
    seed: int = 0,
) -> SimulationResult:
    """Run Rennala-NSGD in simulated time.

    ``grad(x, worker, rng)`` is one stochastic gradient; ``compute_time(worker, rng)``
    the time it takes (a constant for deterministic workers). Events are processed in
    time order, ties by worker index, so the run is reproducible.
    """
    if n_workers < 1:
        raise ValueError(f"n_workers must be >= 1, got {n_workers}")
    rng = np.random.default_rng(seed)
    server = RennalaServer(x0, batch_size, lr, norm)
    events: list[tuple[float, int, int, torch.Tensor]] = []

    def start(worker: int, now: float) -> None:
        x, k = server.point()
        # The gradient is drawn when the work starts, at the point the worker was given.
        g = grad(x, worker, rng)
        heapq.heappush(events, (now + float(compute_time(worker, rng)), worker, k, g))

    for w in range(n_workers):
        start(w, 0.0)
    times, points = [], []
    while len(times) < steps:
        # Gradients that arrive at the same instant are all submitted before any of
        # those workers is handed a new point (equal-speed workers then act in lockstep).
        now = events[0][0]
        done = []
        while events and events[0][0] == now:
            _, w, k, g = heapq.heappop(events)
            if server.submit(g, k) and len(times) < steps:
                times.append(now)
                points.append(server.x.clone())
            done.append(w)
        for w in done:
            start(w, now)
    return SimulationResult(np.array(times), points, server.discarded)


def equilibrium_time(taus, batch_size: int) -> float:
    """t(B) = min_m (B + m) / Σ_{i≤m} 1/τ_i over the m fastest workers (Tyurin &
    Richtárik's time per Rennala iteration, up to a constant). With deterministic
    times and workers restarted at each new point, the m fastest finish at least
    t·Σ 1/τ_i − m gradients by time t, so B of them take at most t(B). Here workers
    are not interrupted, and a computation under way at a step boundary is wasted: the
    same argument gives at most (B + 2m)/Σ_{i≤m} 1/τ_i per step."""
    taus = np.sort(np.asarray(taus, float))
    if (taus <= 0).any():
        raise ValueError("compute times must be > 0")
    m = np.arange(1, len(taus) + 1)
    return float(np.min((batch_size + m) / np.cumsum(1.0 / taus)))
