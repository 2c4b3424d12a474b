"""Rennala-NSGD (and its baselines) on real processes with ``torch.distributed``.

Rank 0 is the server and drives one of the server state machines of :mod:`.rennala`;
ranks 1..n are the workers (worker w is rank w + 1). Messages are 1-D tensors in x0's
dtype: server → worker ``[k, x_k]`` (``k = -1``: stop); worker → server ``[k, g]``
(``k = -2``: the worker's gradient raised and it is leaving). The server receives from
any source (``dist.recv(buf)`` without ``src``), so the fastest workers are served
first and a worker that dies just stops sending: the others carry on.

Two ways to launch:

* :func:`run_rennala` / :func:`run_distributed` from one Python process: the server
  runs in the calling process and spawns the workers (``torch.multiprocessing``,
  ``spawn``), so ``grad`` and ``compute_time`` must be picklable (module-level
  functions or instances of module-level classes). Worker deaths are noticed from
  the process handles, and the run goes on without them (logged, and listed in
  ``RunResult.dead``).
* :func:`serve_torchrun` under ``torchrun --nproc_per_node=n+1 script.py``: every
  rank calls it with the same arguments; rank 0 returns the result. torchrun stops
  the whole job when a process fails, so there a crash is survived by resuming from
  the checkpoint (``resume=True``).

Backends: gloo (the default) supports receive-from-any-source, which the server needs;
NCCL does not, so on a GPU cluster keep ``backend="gloo"`` for these small messages
and compute the gradients on the GPU inside ``grad`` (move x to the device there).

Gloo has no way to poll a pending receive, and a receive that times out closes its
connections, so the server blocks in ``recv`` and ``timeout`` (the process group's)
is the longest it waits when no gradient can come: keep it above the slowest
gradient's compute time.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import socket
import time
import traceback
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Callable

import numpy as np
import torch
import torch.distributed as dist

from ..geometry import Norm
from ._checks import check_int
from .rennala import (
    Checkpointer, GradFn, RennalaServer, Server, SimulationResult, TimeFn, load_checkpoint, worker_rngs,
)

__all__ = ["RunOptions", "RunResult", "run_distributed", "run_rennala", "serve_torchrun"]

log = logging.getLogger(__name__)

STOP, FAILED = -1.0, -2.0


@dataclass
class RunResult(SimulationResult):
    """A real run: ``times`` are seconds since the server started; ``dead`` maps each
    worker that left to the reason; ``start_step`` is where the run began (> 0 when
    resumed from a checkpoint)."""

    dead: dict[int, str] = field(default_factory=dict)
    start_step: int = 0


@dataclass(frozen=True)
class RunOptions:
    """The keyword arguments that :func:`run_distributed` (and :func:`run_rennala`) and
    :func:`serve_torchrun` share, checked in one place.

    Attributes:
        seed: seeds the workers' generators (:func:`~neurips26.distributed.worker_rngs`).
        compute_time: ``compute_time(worker, rng)`` seconds slept after each gradient,
            to emulate slower machines (None: no sleep).
        checkpoint: path written atomically after every ``checkpoint_every``-th step
            (0: never).
        resume: start from ``checkpoint`` when it exists.
        timeout: the process group's timeout in seconds, the longest the server waits
            when no message can come; keep it above the slowest gradient's compute time.
    """

    seed: int = 0
    compute_time: TimeFn | None = None
    checkpoint: str | os.PathLike | None = None
    checkpoint_every: int = 0
    resume: bool = False
    timeout: float = 120.0

    def __post_init__(self):
        if not self.timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {self.timeout!r}")
        if self.resume and self.checkpoint is None:
            raise ValueError("resume=True needs the checkpoint path")

    def prepare(self, server: Server) -> Checkpointer:
        """The run's checkpointer, after loading the checkpoint into ``server`` when
        resuming from one that exists."""
        saver = Checkpointer(self.checkpoint, self.checkpoint_every)
        if self.resume and os.path.exists(self.checkpoint):
            server.load_state_dict(load_checkpoint(self.checkpoint)["server"])
            log.info("resumed from %s at step %d", self.checkpoint, server.k)
        return saver


def _exact_counter_limit(dtype: torch.dtype) -> int:
    # Integers up to 2^(mantissa bits + 1) are exact in a float.
    return 2 ** (round(-math.log2(torch.finfo(dtype).eps)) + 1)


def _check_header(server: Server, steps: int) -> None:
    last = server.k + steps
    if last >= _exact_counter_limit(server.x.dtype):
        raise ValueError(f"step {last} does not fit exactly in a {server.x.dtype} message header; "
                         "use float64 parameters")


def _free_port() -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- workers ---------------------------------------------------------------------------

def _worker_loop(worker: int, grad: GradFn, compute_time: TimeFn | None, seed: int, numel: int, dtype: torch.dtype,
                 fail_after: int | None, errors) -> None:
    buf = torch.empty(numel + 1, dtype=dtype)
    rngs = None
    sent = 0
    while True:
        dist.recv(buf, src=0)
        k = int(buf[0].item())
        if k < 0:
            return
        if rngs is None:
            # The first point handed out is at the server's starting step: seed from it,
            # as the simulated driver does, so a resumed run draws fresh numbers.
            rngs = worker_rngs(seed, worker, k)
        try:
            g = grad(buf[1:].clone(), worker, rngs[0])
            g = torch.as_tensor(g, dtype=dtype).reshape(-1)
            if g.numel() != numel:
                raise ValueError(f"grad returned {g.numel()} entries, x has {numel}")
            if compute_time is not None:
                time.sleep(float(compute_time(worker, rngs[1])))  # emulated slowness
        except Exception as exc:
            if errors is not None:
                errors.put((worker, f"{type(exc).__name__}: {exc}"))
            dist.send(torch.cat([torch.tensor([FAILED], dtype=dtype), torch.zeros(numel, dtype=dtype)]), dst=0)
            raise
        if fail_after is not None and sent >= fail_after:
            os._exit(17)  # fault drill: die mid-computation, without a word to the server
        dist.send(torch.cat([torch.tensor([float(k)], dtype=dtype), g]), dst=0)
        sent += 1


def _spawned_worker(worker, world_size, init_method, timeout_s, grad, compute_time, seed, numel, dtype, fail_after,
                    errors):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=worker + 1, world_size=world_size, init_method=init_method,
                            timeout=timedelta(seconds=timeout_s))
    try:
        _worker_loop(worker, grad, compute_time, seed, numel, dtype, fail_after, errors)
    finally:
        with contextlib.suppress(Exception):
            dist.destroy_process_group()


# --- server ------------------------------------------------------------------------------

class _ServerLoop:
    """The server side of the protocol; ``exitcode(w)`` (None: unknown) tells whether a
    worker process has ended."""

    def __init__(self, server: Server, n_workers: int, steps: int, seed: int, saver: Checkpointer,
                 exitcode: Callable[[int], int | None], errors, timeout_s: float):
        self.server, self.n, self.steps, self.seed = server, n_workers, steps, seed
        self.saver, self.exitcode, self.errors, self.timeout_s = saver, exitcode, errors, timeout_s
        self.alive = set(range(n_workers))
        self.outstanding: set[int] = set()
        self.idle: set[int] = set()
        self.dead: dict[int, str] = {}
        self._reported: dict[int, str] = {}
        self.times: list[float] = []
        self.points: list[torch.Tensor] = []
        self.arrivals: list[tuple[int, int]] = []
        self.start_step = server.k
        self.t0 = time.perf_counter()

    def _send(self, w: int, k: float, x: torch.Tensor) -> bool:
        try:
            dist.send(torch.cat([torch.tensor([k], dtype=x.dtype), x]), dst=w + 1)
            return True
        except RuntimeError as exc:
            self._bury(w, f"unreachable ({exc})")
            return False

    def _give(self, w: int) -> None:
        if w not in self.alive:
            return
        given = self.server.point_for(w)
        if given is None:
            self.idle.add(w)
        elif self._send(w, float(given[1]), given[0]):
            self.outstanding.add(w)

    def _bury(self, w: int, reason: str) -> None:
        if w not in self.alive:
            return
        self.alive.discard(w)
        self.outstanding.discard(w)
        self.idle.discard(w)
        self.dead[w] = reason
        log.warning("worker %d left (%s); carrying on with %d worker(s)", w, reason, len(self.alive))
        drop = getattr(self.server, "drop", None)
        if drop is not None and drop(w) and not self.done:
            self._stepped()

    def _check_deaths(self) -> None:
        for w in sorted(self.alive):
            code = self.exitcode(w)
            if code is not None:
                self._bury(w, self._error_text(w, wait=0) or f"process exited with code {code}")

    def _error_text(self, w: int, wait: float) -> str | None:
        """The exception text worker w reported, if any (waiting up to ``wait`` s)."""
        if self.errors is not None:
            deadline = time.monotonic() + wait
            while w not in self._reported:
                try:
                    got, text = self.errors.get(timeout=max(0.0, deadline - time.monotonic()))
                except Exception:  # queue.Empty, or a closed queue
                    break
                self._reported[got] = text
        text = self._reported.get(w)
        return None if text is None else f"its gradient raised {text}"

    @property
    def done(self) -> bool:
        return len(self.times) >= self.steps

    def _stepped(self) -> None:
        self.times.append(time.perf_counter() - self.t0)
        self.points.append(self.server.x.clone())
        self.saver.after_step(self.server, seed=self.seed, time=self.times[-1])
        waiting, self.idle = sorted(self.idle), set()
        for v in waiting:
            self._give(v)

    def _recv(self, buf: torch.Tensor) -> int:
        try:
            return dist.recv(buf) - 1
        except RuntimeError as exc:
            where = f"; the last checkpoint is {self.saver.path}" if self.saver.path else ""
            raise TimeoutError(
                f"no message from the workers {sorted(self.outstanding)} within {self.timeout_s:g} s at step "
                f"{self.server.k}{where} ({exc})") from None

    def run(self) -> RunResult:
        x = self.server.x
        _check_header(self.server, self.steps)
        buf = torch.empty(x.numel() + 1, dtype=x.dtype)
        for w in range(self.n):
            self._give(w)
        while not self.done:
            self._check_deaths()
            if not self.outstanding:
                raise RuntimeError(f"every worker has left at step {self.server.k} ({self.dead})"
                                   + (f"; resume from {self.saver.path}" if self.saver.path else ""))
            w = self._recv(buf)
            self.outstanding.discard(w)
            if buf[0].item() == FAILED:
                self._bury(w, self._error_text(w, wait=5) or "its gradient raised (see its stderr)")
                continue
            k = int(buf[0].item())
            self.arrivals.append((w, k))
            if self.server.submit(buf[1:].clone(), k, w):
                self._stepped()
            if not self.done:
                self._give(w)
        # Let every computation under way finish (a worker blocks until its result is
        # received), then tell everyone to stop.
        while self.outstanding:
            self._check_deaths()
            if self.outstanding:
                self.outstanding.discard(self._recv(buf))
        for w in sorted(self.alive):
            self._send(w, STOP, torch.zeros_like(x))
        return RunResult(np.array(self.times, dtype=float), self.points, self.server.discarded, self.arrivals,
                         dead=dict(self.dead), start_step=self.start_step)


def run_distributed(
    server: Server,
    grad: GradFn,
    n_workers: int,
    steps: int,
    *,
    fail_after: dict[int, int] | None = None,
    **options,
) -> RunResult:
    """Run ``server`` for ``steps`` steps with ``n_workers`` worker processes on this host.

    ``grad(x, worker, rng)`` computes one stochastic gradient in the worker process.
    ``options`` are the keyword arguments of :class:`RunOptions` (``seed``,
    ``compute_time``, ``checkpoint``, ``checkpoint_every``, ``resume``, ``timeout``).
    ``fail_after={w: n}`` is a fault drill: worker w dies abruptly after sending n
    gradients.
    """
    opts = RunOptions(**options)
    check_int("n_workers", n_workers, 1)
    check_int("steps", steps, 0)
    fail_after = dict(fail_after or {})
    if any(not 0 <= w < n_workers for w in fail_after):
        raise ValueError(f"fail_after names workers outside 0..{n_workers - 1}: {sorted(fail_after)}")
    if dist.is_initialized():
        raise RuntimeError("a default process group already exists in this process; under torchrun use "
                           "serve_torchrun, which runs on it")
    saver = opts.prepare(server)
    _check_header(server, steps)
    ctx = torch.multiprocessing.get_context("spawn")
    errors = ctx.Queue()
    init_method = f"tcp://127.0.0.1:{_free_port()}"
    world = n_workers + 1
    procs = [
        ctx.Process(target=_spawned_worker, daemon=True,
                    args=(w, world, init_method, opts.timeout, grad, opts.compute_time, opts.seed, server.x.numel(),
                          server.x.dtype, fail_after.get(w), errors))
        for w in range(n_workers)
    ]
    for p in procs:
        p.start()
    try:
        dist.init_process_group("gloo", rank=0, world_size=world, init_method=init_method,
                                timeout=timedelta(seconds=opts.timeout))
        try:
            loop = _ServerLoop(server, n_workers, steps, opts.seed, saver, lambda w: procs[w].exitcode, errors,
                               opts.timeout)
            return loop.run()
        finally:
            with contextlib.suppress(Exception):
                dist.destroy_process_group()
    finally:
        for p in procs:
            p.join(timeout=10)
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)
        errors.close()


def run_rennala(
    grad: GradFn,
    x0: torch.Tensor,
    n_workers: int,
    batch_size: int,
    steps: int,
    lr: float,
    norm: str | Norm | None = "l2",
    **kwargs,
) -> RunResult:
    """Rennala-NSGD on ``n_workers`` local processes (gloo); keyword arguments as for
    :func:`run_distributed` (``fail_after`` and those of :class:`RunOptions`). The result's ``arrivals`` replayed with
    :func:`~neurips26.distributed.replay` give its trajectory exactly."""
    return run_distributed(RennalaServer(x0, batch_size, lr, norm), grad, n_workers, steps, **kwargs)


def serve_torchrun(
    make_server: Callable[[], Server],
    grad: GradFn,
    steps: int,
    **options,
) -> RunResult | None:
    """Under ``torchrun``: every rank calls this with the same arguments. Rank 0 builds
    the server with ``make_server()`` and returns the :class:`RunResult`; the other
    ranks work and return None. ``options`` are the keyword arguments of
    :class:`RunOptions`. Initializes a gloo process group from torchrun's environment
    unless one exists (which must then be gloo)."""
    opts = RunOptions(**options)
    if not dist.is_initialized():
        dist.init_process_group("gloo", timeout=timedelta(seconds=opts.timeout))
    if dist.get_backend() != "gloo":
        raise RuntimeError(f"the server receives from any source, which needs the gloo backend, not {dist.get_backend()}")
    rank, world = dist.get_rank(), dist.get_world_size()
    if world < 2:
        raise RuntimeError("serve_torchrun needs at least 2 processes (a server and a worker)")
    server = make_server()
    if rank == 0:
        saver = opts.prepare(server)
        return _ServerLoop(server, world - 1, steps, opts.seed, saver, lambda w: None, None, opts.timeout).run()
    try:
        _worker_loop(rank - 1, grad, opts.compute_time, opts.seed, server.x.numel(), server.x.dtype, None, None)
    except Exception:
        traceback.print_exc()
        raise
    return None
