"""Rennala-NSGD: semi-asynchronous normalized SGD (Rennala SGD of Tyurin & Richtárik,
with the step taken along the LMO of a chosen norm), and the two baselines it is
measured against, as server state machines with one interface.

Rennala: the server keeps the current point x_k. Every worker computes a stochastic
gradient at the point it was last given; when one finishes, the server keeps the
gradient only if it was computed at the current x_k (a stale one is discarded), and
hands the worker the current point again. Once B gradients at x_k are in, the server
averages them, steps ``x_{k+1} = x_k − lr · lmo(ḡ)`` and the iteration counter moves
on; workers are not interrupted, so a computation under way at x_k becomes stale.

A server is the algorithm alone (no clock, no transport): ``point_for(worker)`` gives
``(x, k)`` to compute at, or None to leave the worker idle until the next step;
``submit(g, k, worker)`` returns True when it completed a step. The simulated-time
driver here and the ``torch.distributed`` runner (:mod:`.runner`) drive the same
objects, so the two modes share every line of the algorithm.

Random numbers: worker w draws its gradients from ``worker_rngs(seed, w, k0)[0]`` and
its compute times from ``[1]``, in the order it computes. Both modes do this, so a
trajectory is a function of the arrival order alone (see :func:`replay`).
"""

from __future__ import annotations

import heapq
import math
import numbers
import os
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

from .._checks import check_int, check_real
from ..geometry import Blocks, Norm, get_norm, nsgd_step

__all__ = [
    "Server", "RennalaServer", "SynchronousServer", "AsynchronousServer", "Checkpointer",
    "SimulationResult", "simulate", "simulate_rennala", "replay", "worker_rngs", "equilibrium_time",
    "save_checkpoint", "load_checkpoint", "state_problem",
]

GradFn = Callable[[torch.Tensor, int, np.random.Generator], torch.Tensor]
TimeFn = Callable[[int, np.random.Generator], float]


def worker_rngs(seed: int, worker: int, k0: int = 0) -> tuple[np.random.Generator, np.random.Generator]:
    """The gradient and compute-time generators of ``worker`` for a run (or a resumed
    run) that starts at iteration ``k0`` (all three integers >= 0)."""
    seed, worker, k0 = check_int("seed", seed, 0), check_int("worker", worker, 0), check_int("k0", k0, 0)
    return np.random.default_rng([seed, 0, worker, k0]), np.random.default_rng([seed, 1, worker, k0])


class Server:
    """The base of the parameter servers: the point ``x`` (a flat 1-D tensor), the step
    counter ``k``, the count of discarded gradients, and the step rule
    ``x ← x − lr·d(ḡ)`` with d the LMO of ``norm`` (``norm=None``: d(ḡ) = ḡ, plain SGD).

    A subclass decides when to step: ``submit(g, k, worker) -> bool`` takes a gradient
    computed at step k and returns True when it completed a step; ``point_for(worker)``
    returns ``(x, k)`` to compute at, or None to leave the worker idle. ``state_dict`` /
    ``load_state_dict`` save and restore it between steps. The simulated driver
    (:func:`simulate`) and the process runners (:mod:`.runner`) drive any Server.

    Checked at construction: x0 a finite, non-empty, 1-D floating-point tensor; lr a
    finite number > 0; a ``Blocks`` norm the size of x0. ``submit`` refuses a gradient
    that is not a tensor of x's shape (ValueError / TypeError) and a non-finite one
    (FloatingPointError, when it would be stepped with).
    """

    kind = "server"

    def __init__(self, x0: torch.Tensor, lr: float, norm: str | Norm | None):
        if not isinstance(x0, torch.Tensor):
            raise TypeError(f"x0 must be a torch tensor (the flat 1-D vector of the parameters), "
                            f"got {type(x0).__name__}")
        if x0.ndim != 1 or x0.numel() == 0:
            raise ValueError("x0 must be a non-empty 1-D tensor (flatten the parameters; "
                             "geometry.Blocks gives per-parameter geometry on the flat vector)")
        if not x0.dtype.is_floating_point:
            raise ValueError(f"x0 must be a floating-point tensor, got {x0.dtype}")
        if not torch.isfinite(x0).all():
            raise ValueError("x0 holds NaN or inf: the starting point must be finite")
        lr = check_real("lr", lr, low=0, low_open=True)
        self.x = x0.detach().clone()
        self.lr = float(lr)
        self.norm = None if norm is None else get_norm(norm)
        if isinstance(self.norm, Blocks) and self.norm.numel != x0.numel():
            raise ValueError(f"norm is a Blocks geometry over {self.norm.numel} entries, x0 has {x0.numel()}")
        self.k = 0
        self.discarded = 0

    def _check_gradient(self, g, k, worker) -> None:
        if not isinstance(g, torch.Tensor):
            raise TypeError(f"the gradient of worker {worker} (step {k}) must be a torch tensor, got {type(g).__name__}")
        if g.shape != self.x.shape:
            raise ValueError(f"the gradient of worker {worker} (step {k}) must have x's shape {tuple(self.x.shape)}, "
                             f"got {tuple(g.shape)}")

    def _step(self, g: torch.Tensor) -> None:
        if not torch.isfinite(g).all():
            raise FloatingPointError(f"non-finite gradient at step {self.k}: the server refuses to step with it")
        x = self.x.clone()  # point_for hands self.x out to workers: step a copy
        if self.norm is None:
            x.add_(g, alpha=-self.lr)
        else:
            nsgd_step([x], [g], None, [self.norm], lr=self.lr, beta=0.0, weight_decay=0.0, nesterov=False)
        self.x = x
        self.k += 1

    def point_for(self, worker: int) -> tuple[torch.Tensor, int] | None:
        return self.x, self.k

    def state_dict(self) -> dict:
        """Everything needed to resume after a completed step (partial sums are then
        empty, which is when the runners checkpoint)."""
        return {"kind": self.kind, "x": self.x.clone(), "k": self.k, "lr": self.lr, "discarded": self.discarded,
                "norm": None if self.norm is None else self.norm.name, **self._config()}

    def load_state_dict(self, state: dict) -> None:
        """Restore a :meth:`state_dict` of a server of the same kind and settings
        (ValueError naming what does not match, or what is missing or broken)."""
        if not isinstance(state, dict):
            raise TypeError(f"state_dict must be a dict from Server.state_dict(), got {type(state).__name__}")
        broken = state_problem(state)
        if broken is not None:
            raise ValueError(f"state_dict is not a server state: {broken}")
        mine = {"kind": self.kind, "norm": None if self.norm is None else self.norm.name, **self._config()}
        for key, value in mine.items():
            if state.get(key) != value:
                raise ValueError(f"checkpoint {key}={state.get(key)!r} does not match this run's {key}={value!r}")
        x = state["x"]
        if x.shape != self.x.shape or x.dtype != self.x.dtype:
            raise ValueError(f"checkpoint point has shape {tuple(x.shape)} {x.dtype}, "
                             f"this run's x0 {tuple(self.x.shape)} {self.x.dtype}")
        self.x = x.clone()
        self.k = int(state["k"])
        self.discarded = int(state["discarded"])
        self._reset_batch()

    def _config(self) -> dict:
        return {}

    def _reset_batch(self) -> None:
        pass


class RennalaServer(Server):
    """Rennala SGD's server: a step once ``batch_size`` gradients computed at the
    current point are in; gradients computed at an older point are discarded.
    ``norm`` picks the step's geometry (Rennala-NSGD); ``norm=None`` is Rennala SGD."""

    kind = "rennala"

    def __init__(self, x0: torch.Tensor, batch_size: int, lr: float, norm: str | Norm | None = "l2"):
        batch_size = check_int("batch_size", batch_size, 1)
        super().__init__(x0, lr, norm)
        self.B = batch_size
        self._reset_batch()

    def _config(self):
        return {"batch_size": self.B}

    def _reset_batch(self):
        self._sum = torch.zeros_like(self.x)
        self._count = 0

    def submit(self, g: torch.Tensor, k: int, worker: int = 0) -> bool:
        self._check_gradient(g, k, worker)
        if k != self.k:
            self.discarded += 1
            return False
        self._sum += g
        self._count += 1
        if self._count < self.B:
            return False
        self._step(self._sum / self.B)
        self._reset_batch()
        return True


class SynchronousServer(Server):
    """Synchronous minibatch (N)SGD: every step waits for one gradient from each of the
    ``n_workers`` at the current point, then averages them. A worker that has sent its
    gradient idles until the step. A worker declared dead (``drop``) is no longer waited
    for."""

    kind = "synchronous"

    def __init__(self, x0: torch.Tensor, n_workers: int, lr: float, norm: str | Norm | None = "l2"):
        n_workers = check_int("n_workers", n_workers, 1)
        super().__init__(x0, lr, norm)
        self.n_workers = n_workers
        self.alive = set(range(n_workers))
        self._reset_batch()

    def _config(self):
        return {"n_workers": self.n_workers}

    def _reset_batch(self):
        self._grads: dict[int, torch.Tensor] = {}

    def point_for(self, worker):
        return None if worker in self._grads else (self.x, self.k)

    def drop(self, worker: int) -> bool:
        """Stop waiting for ``worker``; returns True if that completed a step."""
        self.alive.discard(worker)
        self._grads.pop(worker, None)
        return self._maybe_step()

    def submit(self, g, k, worker=0):
        self._check_gradient(g, k, worker)
        if k != self.k or worker in self._grads:
            self.discarded += 1
            return False
        self._grads[worker] = g
        return self._maybe_step()

    def _maybe_step(self):
        if not self.alive or not self.alive <= set(self._grads):
            return False
        self._step(torch.stack([self._grads[w] for w in sorted(self.alive)]).mean(0))
        self._reset_batch()
        return True


class AsynchronousServer(Server):
    """Asynchronous (N)SGD: every arriving gradient is applied at once, however stale
    (the baseline Rennala improves on); ``max_delay`` discards those more than that many
    steps old (None keeps all)."""

    kind = "asynchronous"

    def __init__(self, x0: torch.Tensor, lr: float, norm: str | Norm | None = None, max_delay: int | None = None):
        if max_delay is not None:
            max_delay = check_int("max_delay", max_delay, 0)
        super().__init__(x0, lr, norm)
        self.max_delay = max_delay

    def _config(self):
        return {"max_delay": self.max_delay}

    def submit(self, g, k, worker=0):
        self._check_gradient(g, k, worker)
        if self.max_delay is not None and self.k - k > self.max_delay:
            self.discarded += 1
            return False
        self._step(g)
        return True


def save_checkpoint(path: str | os.PathLike, server: Server, **extra) -> None:
    """Write the server's state (and ``extra`` entries) to ``path`` atomically: a crash
    while writing leaves the previous checkpoint intact."""
    from .._atomic import atomic_open

    if not isinstance(server, Server):
        raise TypeError(f"server must be a Server, got {type(server).__name__}")
    with atomic_open(path) as fh:
        torch.save({"server": server.state_dict(), **extra}, fh)


def state_problem(state) -> str | None:
    """What makes ``state`` unusable as a server state (missing keys, a point that is
    not a finite 1-D float tensor, a step counter that is not an integer >= 0), in
    words; None when it is sound. Whether it matches a given server is
    :meth:`Server.load_state_dict`'s check."""
    if not isinstance(state, dict):
        return f"it is a {type(state).__name__}, not a dict"
    missing = [key for key in ("kind", "x", "k", "discarded") if key not in state]
    if missing:
        return f"it has no {', '.join(map(repr, missing))}"
    x = state["x"]
    if not (isinstance(x, torch.Tensor) and x.ndim == 1 and x.numel() > 0 and x.dtype.is_floating_point):
        what = f"shape {tuple(x.shape)} {x.dtype}" if isinstance(x, torch.Tensor) else type(x).__name__
        return f"x is not a non-empty 1-D float tensor ({what})"
    if not torch.isfinite(x).all():
        return "x holds NaN or inf"
    for key in ("k", "discarded"):
        value = state[key]
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
            return f"{key} is not an integer >= 0 (got {value!r})"
    return None


def load_checkpoint(path: str | os.PathLike) -> dict:
    """Read a checkpoint written by :func:`save_checkpoint` (``["server"]`` goes to
    ``server.load_state_dict``).

    A file that is there but cannot be used (cut short, not a torch file, not a
    neurips26.distributed checkpoint, a server state with missing or broken entries)
    raises ``ValueError("checkpoint corrupt: PATH (what is wrong)")``; a missing file
    FileNotFoundError."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise FileNotFoundError(f"no checkpoint at {path}") from None
    except (IsADirectoryError, PermissionError):
        raise
    except Exception as exc:  # a torn zip, a text file, an empty file, a pickle torch refuses
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise ValueError(f"checkpoint corrupt: {path} (torch.load cannot read it: {type(exc).__name__}"
                         f"{': ' + first if first else ''})") from exc
    if not isinstance(state, dict) or "server" not in state:
        what = "a dict without a 'server' entry" if isinstance(state, dict) else f"a {type(state).__name__}"
        raise ValueError(f"checkpoint corrupt: {path} (not a neurips26.distributed checkpoint: it holds {what})")
    broken = state_problem(state["server"])
    if broken is not None:
        raise ValueError(f"checkpoint corrupt: {path} (its server state: {broken})")
    return state


class Checkpointer:
    """The checkpoint policy of a run: ``after_step(server, **extra)`` saves the server
    (with ``extra``) to ``path`` with :func:`save_checkpoint` after every ``every``-th
    step; it never saves when ``path`` is None or ``every`` is 0."""

    def __init__(self, path, every: int):
        every = check_int("checkpoint_every", every, 0)
        if path is not None and not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"checkpoint must be a path (str or os.PathLike) or None, got {type(path).__name__}")
        if every and path is None:
            raise ValueError("checkpoint_every is set but no checkpoint path was given")
        self.path, self.every = path, every

    def after_step(self, server: Server, **extra) -> None:
        if self.path is not None and self.every and server.k % self.every == 0:
            save_checkpoint(self.path, server, **extra)


@dataclass
class SimulationResult:
    """Per server step: the wall-clock time (simulated, or seconds in a real run) and
    the point after it; ``arrivals`` lists every (worker, k) gradient the server
    received, in order, accepted or not."""

    times: np.ndarray
    points: list[torch.Tensor] = field(repr=False)
    discarded: int = 0
    arrivals: list[tuple[int, int]] = field(default_factory=list, repr=False)


def _check_time(t, worker) -> float:
    t = float(t)
    if not (math.isfinite(t) and t > 0):
        raise ValueError(f"compute_time for worker {worker} returned {t}: it must be finite and > 0")
    return t


def simulate(
    server: Server,
    grad: GradFn,
    compute_time: TimeFn,
    n_workers: int,
    steps: int,
    seed: int = 0,
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: int = 0,
    until: Callable[[torch.Tensor], bool] | None = None,
) -> SimulationResult:
    """Drive ``server`` with ``n_workers`` simulated workers until it has made ``steps``
    steps, or until ``until(x)`` is true after a step (e.g. a target loss is reached).

    ``grad(x, worker, rng)`` is one stochastic gradient at x; ``compute_time(worker,
    rng)`` the time it takes (a constant for deterministic workers). Events run in time
    order, ties by worker index, so a run is reproducible. The clock starts at 0 and
    the workers' generators at the server's step (``worker_rngs(seed, w, server.k)``),
    so a server loaded from a checkpoint resumes where it stopped. ``steps`` counts the
    steps of this call (a server loaded from a checkpoint at step k ends at k + steps;
    the process runners' ``steps`` is the total target instead, see
    :func:`~neurips26.distributed.run_distributed`).
    """
    if not isinstance(server, Server):
        raise TypeError(f"server must be a Server, got {type(server).__name__}")
    for name, fn in (("grad", grad), ("compute_time", compute_time)):
        if not callable(fn):
            raise TypeError(f"{name} must be callable, got {type(fn).__name__}")
    if until is not None and not callable(until):
        raise TypeError(f"until must be None or callable (x -> bool), got {type(until).__name__}")
    saver = Checkpointer(checkpoint, checkpoint_every)
    n_workers = check_int("n_workers", n_workers, 1)
    steps = check_int("steps", steps, 0)
    seed = check_int("seed", seed, 0)
    rngs = [worker_rngs(seed, w, server.k) for w in range(n_workers)]
    events: list[tuple[float, int, int, torch.Tensor]] = []
    idle: set[int] = set()

    def start(worker: int, now: float) -> None:
        given = server.point_for(worker)
        if given is None:
            idle.add(worker)
            return
        x, k = given
        # The gradient is drawn when the work starts, at the point the worker was given.
        g = grad(x, worker, rngs[worker][0])
        heapq.heappush(events, (now + _check_time(compute_time(worker, rngs[worker][1]), worker), worker, k, g))

    for w in range(n_workers):
        start(w, 0.0)
    times, points, arrivals = [], [], []
    reached = False
    while len(times) < steps and not reached:
        if not events:
            raise RuntimeError("every worker is idle and the server has not stepped: the server waits on nobody")
        # Gradients that arrive at the same instant are all submitted before any of
        # those workers is handed a new point (equal-speed workers then act in lockstep).
        now = events[0][0]
        done = []
        while events and events[0][0] == now and not reached:
            _, w, k, g = heapq.heappop(events)
            arrivals.append((w, k))
            if server.submit(g, k, w) and len(times) < steps:
                times.append(now)
                points.append(server.x.clone())
                saver.after_step(server, seed=seed, time=now)
                reached = reached or (until is not None and bool(until(server.x)))
            done.append(w)
        waiting = sorted(set(done) | idle)
        idle.clear()
        for w in waiting:
            start(w, now)
    return SimulationResult(np.array(times, dtype=float), points, server.discarded, arrivals)


def simulate_rennala(
    grad: GradFn,
    x0: torch.Tensor,
    compute_time: TimeFn,
    n_workers: int,
    batch_size: int,
    steps: int,
    lr: float,
    norm: str | Norm | None = "l2",
    seed: int = 0,
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: int = 0,
) -> SimulationResult:
    """Rennala-NSGD in simulated time (``norm=None``: Rennala SGD); see :func:`simulate`."""
    return simulate(RennalaServer(x0, batch_size, lr, norm), grad, compute_time, n_workers, steps, seed,
                    checkpoint, checkpoint_every)


def replay(server: Server, grad: GradFn, arrivals, seed: int = 0) -> list[torch.Tensor]:
    """The points a run's server steps through, recomputed from its arrival order alone.

    Each arrival (w, k) is worker w's next gradient from its own generator, at the point
    x_k the server held at step k. Equal to the recorded trajectory of a simulated or a
    real run with the same server, gradient and seed, whatever the timing was.
    """
    k0 = server.k
    history = [server.x.clone()]
    rngs: dict[int, np.random.Generator] = {}
    points = []
    for i, arrival in enumerate(arrivals):
        try:
            w, k = arrival
        except (TypeError, ValueError):
            raise ValueError(f"arrivals[{i}] must be a (worker, step) pair, got {arrival!r}") from None
        w, k = check_int(f"arrivals[{i}]'s worker", w, 0), check_int(f"arrivals[{i}]'s step", k, 0)
        if not k0 <= k < k0 + len(history):
            raise ValueError(f"arrival ({w}, {k}) refers to a step the server had not reached")
        if w not in rngs:
            rngs[w] = worker_rngs(seed, w, k0)[0]
        g = grad(history[k - k0], w, rngs[w])
        if server.submit(g, k, w):
            history.append(server.x.clone())
            points.append(server.x.clone())
    return points


def equilibrium_time(taus, batch_size: int) -> float:
    """t(B) = min_m (B + m) / Σ_{i≤m} 1/τ_i over the m fastest workers (Tyurin &
    Richtárik's time per Rennala iteration, up to a constant). With deterministic
    times and workers restarted at each new point, the m fastest finish at least
    t·Σ 1/τ_i − m gradients by time t, so B of them take at most t(B). Here workers
    are not interrupted, and a computation under way at a step boundary is wasted: the
    same argument gives at most (B + 2m)/Σ_{i≤m} 1/τ_i per step."""
    batch_size = check_int("batch_size", batch_size, 1)
    taus = np.sort(np.asarray(taus, float))
    if taus.size == 0 or not np.isfinite(taus).all() or (taus <= 0).any():
        raise ValueError("compute times must be finite and > 0 (and at least one)")
    m = np.arange(1, len(taus) + 1)
    return float(np.min((batch_size + m) / np.cumsum(1.0 / taus)))
