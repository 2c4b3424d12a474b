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
  functions or instances of module-level classes), and a script that calls them
  needs the ``if __name__ == "__main__":`` guard (each worker re-imports it). Worker
  deaths are noticed from the process handles, and the run goes on without them
  (logged, and listed in ``RunResult.dead``); a run whose workers all die fails
  within seconds with their cause, not after ``timeout``: the server waits for the
  workers to come up while watching their processes, and during the run a small
  helper process (one more rank) wakes the server's blocked receive whenever a
  worker process ends.
* :func:`serve_torchrun` under ``torchrun --nproc_per_node=n+1 script.py``: every
  rank calls it with the same arguments; rank 0 returns the result. torchrun stops
  the whole job when a process fails, so there a crash is survived by resuming from
  the checkpoint (``resume=True``).

``steps`` is the step the run ends at: with ``resume=True`` and a checkpoint at step
k, a run takes the remaining ``steps − k`` steps, and none (with a warning) when
k ≥ steps, so the same command finishes an interrupted run.

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
import multiprocessing.connection
import os
import pickle
import threading
import time
import traceback
import warnings
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Callable

import numpy as np
import torch
import torch.distributed as dist

from .._checks import check_int, check_real
from ..geometry import Norm
from .rennala import (
    Checkpointer, GradFn, RennalaServer, Server, SimulationResult, TimeFn, load_checkpoint, worker_rngs,
)

__all__ = ["RunOptions", "RunResult", "run_distributed", "run_rennala", "serve_torchrun"]

log = logging.getLogger(__name__)

STOP, FAILED, WAKE = -1.0, -2.0, -3.0
HOST = "127.0.0.1"


@dataclass
class RunResult(SimulationResult):
    """A real run: ``times`` are seconds since the server started; ``dead`` maps each
    worker that left to the reason; ``start_step`` is where the run began (> 0 when
    resumed from a checkpoint; the run ends at step ``start_step + len(times)``)."""

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
        resume: start from ``checkpoint`` when it exists (a fresh run when it does
            not). The run's ``steps`` is then the total target: from a checkpoint at
            step k the run takes ``steps − k`` steps, none (with a UserWarning) when
            k ≥ steps. A checkpoint that cannot be used raises
            ``ValueError("checkpoint corrupt: PATH (...)")``: it is never silently
            replaced by a fresh start.
        timeout: the process group's timeout in seconds, the longest the server waits
            when no message can come from live workers; keep it above the slowest
            gradient's compute time. Workers whose processes die do not make the run
            wait for it (:func:`run_distributed`).

    Checked here: ``seed`` an integer >= 0, ``compute_time`` None or callable,
    ``checkpoint`` None or a path, ``checkpoint_every`` an integer >= 0, ``resume`` a
    bool, ``timeout`` a number in (0, 1e9] seconds (NumPy scalars accepted).
    """

    seed: int = 0
    compute_time: TimeFn | None = None
    checkpoint: str | os.PathLike | None = None
    checkpoint_every: int = 0
    resume: bool = False
    timeout: float = 120.0

    def __post_init__(self):
        set_ = object.__setattr__  # frozen: store the checked values
        set_(self, "timeout", check_real("timeout", self.timeout, low=0, low_open=True, high=1e9))
        set_(self, "seed", check_int("seed", self.seed, 0))
        set_(self, "checkpoint_every", check_int("checkpoint_every", self.checkpoint_every, 0))
        if self.compute_time is not None and not callable(self.compute_time):
            raise TypeError(f"compute_time must be None or callable (worker, rng) -> seconds, "
                            f"got {type(self.compute_time).__name__}")
        if self.checkpoint is not None and not isinstance(self.checkpoint, (str, os.PathLike)):
            raise TypeError(f"checkpoint must be a path (str or os.PathLike) or None, "
                            f"got {type(self.checkpoint).__name__}")
        if not isinstance(self.resume, (bool, np.bool_)):
            raise TypeError(f"resume must be a bool, got {self.resume!r}")
        set_(self, "resume", bool(self.resume))
        if self.resume and self.checkpoint is None:
            raise ValueError("resume=True needs the checkpoint path")
        if self.checkpoint_every and self.checkpoint is None:
            raise ValueError("checkpoint_every is set but no checkpoint path was given")

    def prepare(self, server: Server) -> Checkpointer:
        """The run's checkpointer, after loading the checkpoint into ``server`` when
        resuming from one that exists."""
        saver = Checkpointer(self.checkpoint, self.checkpoint_every)
        if self.resume and os.path.exists(self.checkpoint):
            server.load_state_dict(load_checkpoint(self.checkpoint)["server"])
            log.info("resumed from %s at step %d", self.checkpoint, server.k)
        return saver

    def remaining(self, server: Server, steps: int) -> int:
        """The steps left to reach the target ``steps`` from the server's step; 0 (with a
        UserWarning when resuming) when it is already there."""
        left = steps - server.k
        if left <= 0 and server.k > 0:
            resumed = self.resume and os.path.exists(self.checkpoint)
            where = f"the checkpoint {self.checkpoint} is" if resumed else "the server is"
            msg = (f"{where} already at step {server.k} and steps={steps} is the total target "
                   f"(not extra steps): no step to take. Pass steps > {server.k} to train further.")
            warnings.warn(msg, UserWarning, stacklevel=3)
            log.info(msg)
        return max(left, 0)


def _exact_counter_limit(dtype: torch.dtype) -> int:
    # Integers up to 2^(mantissa bits + 1) are exact in a float.
    return 2 ** (round(-math.log2(torch.finfo(dtype).eps)) + 1)


def _check_header(server: Server, remaining: int) -> None:
    last = server.k + remaining
    if last >= _exact_counter_limit(server.x.dtype):
        raise ValueError(f"step {last} does not fit exactly in a {server.x.dtype} message header; "
                         "use float64 parameters")


def _check_steps(steps) -> int:
    return check_int("steps", steps, 0)


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


def _join_group(rank: int, world_size: int, port: int, timeout_s: float) -> None:
    """Connect to the server's store, say "ready" there, then join the process group."""
    store = dist.TCPStore(HOST, port, world_size, is_master=False, timeout=timedelta(seconds=timeout_s),
                          wait_for_workers=False)
    store.set(f"ready/{rank}", "1")
    dist.init_process_group("gloo", rank=rank, world_size=world_size, store=store,
                            timeout=timedelta(seconds=timeout_s))


def _spawned_worker(worker, world_size, port, timeout_s, grad, compute_time, seed, numel, dtype, fail_after, errors):
    torch.set_num_threads(1)
    try:
        _join_group(worker + 1, world_size, port, timeout_s)
    except Exception as exc:
        errors.put((worker, f"{type(exc).__name__}: {exc}"))
        raise
    try:
        _worker_loop(worker, grad, compute_time, seed, numel, dtype, fail_after, errors)
    finally:
        with contextlib.suppress(Exception):
            dist.destroy_process_group()


def _spawned_waker(rank, world_size, port, timeout_s, numel, dtype, wakes):
    """The helper rank: sends the server a WAKE message for every item on ``wakes``
    (a worker process ended), so that a server blocked in a receive from any source
    looks at its workers again; None ends it. Gloo cannot interrupt a receive."""
    torch.set_num_threads(1)
    _join_group(rank, world_size, port, timeout_s)
    message = torch.cat([torch.tensor([WAKE], dtype=dtype), torch.zeros(numel, dtype=dtype)])
    pending = []
    while wakes.get() is not None:
        pending.append(dist.isend(message, dst=0))  # received whenever the server next listens
    os._exit(0)  # wakes the server never received need no goodbye


# --- server ------------------------------------------------------------------------------

class _ServerLoop:
    """The server side of the protocol; ``exitcode(w)`` (None: unknown) tells whether a
    worker process has ended."""

    def __init__(self, server: Server, n_workers: int, steps: int, seed: int, saver: Checkpointer,
                 exitcode: Callable[[int], int | None], errors, timeout_s: float):
        # steps: the steps of this run; a message from rank n_workers + 1 (the waker,
        # when there is one) only makes the loop look at the worker processes again
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

    def _all_left(self) -> RuntimeError:
        causes = "; ".join(f"worker {w}: {why}" for w, why in sorted(self.dead.items()))
        return RuntimeError(f"every worker has left at step {self.server.k} ({causes})"
                            + (f"; resume from {self.saver.path}" if self.saver.path else ""))

    def run(self) -> RunResult:
        x = self.server.x
        _check_header(self.server, self.steps)
        buf = torch.empty(x.numel() + 1, dtype=x.dtype)
        if not self.done:
            for w in range(self.n):
                self._give(w)
        while not self.done:
            self._check_deaths()
            if not self.outstanding:
                raise self._all_left()
            w = self._recv(buf)
            if w >= self.n:  # the waker: a worker process ended
                continue
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


def _startup_failure(w: int, code: int, errors, n_workers: int) -> str:
    """Why process w (a worker, or the waker when w == n_workers) died before joining."""
    who = f"worker {w}" if w < n_workers else "the wake-up helper process"
    text = None
    with contextlib.suppress(Exception):
        deadline = time.monotonic() + 1.0
        while text is None and time.monotonic() < deadline:
            got, reported = errors.get(timeout=max(0.0, deadline - time.monotonic()))
            text = reported if got == w else text
    msg = f"{who} exited with code {code} before joining the run"
    if text:
        return f"{msg}: {text}"
    return (f"{msg} (its traceback is on stderr). A worker process re-imports the script that started the run "
            f"(the spawn start method): a script that calls run_rennala / run_distributed at top level, without an "
            f'`if __name__ == "__main__":` guard, makes every worker fail this way, and so does a grad or '
            f"compute_time the worker cannot import or unpickle")


def _await_processes(store, procs, errors, n_workers: int, timeout_s: float) -> None:
    """Wait until every spawned process has said "ready" in the store, watching the
    processes meanwhile: one that dies first fails the run at once, with its cause."""
    keys = [f"ready/{rank}" for rank in range(1, len(procs) + 1)]
    deadline = time.monotonic() + timeout_s
    while True:
        for w, p in enumerate(procs):
            if p.exitcode is not None:
                raise RuntimeError(_startup_failure(w, p.exitcode, errors, n_workers))
        if store.check(keys):
            return
        if time.monotonic() > deadline:
            late = [w for w in range(n_workers) if not store.check([keys[w]])]
            raise TimeoutError(f"workers {late} did not start within timeout={timeout_s:g} s")
        multiprocessing.connection.wait([p.sentinel for p in procs], timeout=0.05)


def _watch_workers(procs, wakes, stop) -> None:
    """Thread body: one wake for the server whenever a worker process ends, sent once
    its exit code can be read (the server then finds it in ``_check_deaths``)."""
    pending = {p.sentinel: p for p in procs}
    while pending and not stop.is_set():
        for sentinel in multiprocessing.connection.wait(list(pending), timeout=0.2):
            proc = pending.pop(sentinel)
            deadline = time.monotonic() + 2.0
            while proc.exitcode is None and time.monotonic() < deadline:  # closed pipes precede the reaping
                time.sleep(0.005)
            wakes.put(1)


def _check_callables(grad, server=None) -> None:
    if server is not None and not isinstance(server, Server):
        raise TypeError(f"server must be a Server (RennalaServer, SynchronousServer, AsynchronousServer), "
                        f"got {type(server).__name__}")
    if not callable(grad):
        raise TypeError(f"grad must be callable (x, worker, rng) -> gradient, got {type(grad).__name__}")


def run_distributed(
    server: Server,
    grad: GradFn,
    n_workers: int,
    steps: int,
    *,
    fail_after: dict[int, int] | None = None,
    **options,
) -> RunResult:
    """Run ``server`` up to step ``steps`` with ``n_workers`` worker processes on this host.

    ``grad(x, worker, rng)`` computes one stochastic gradient in the worker process.
    ``options`` are the keyword arguments of :class:`RunOptions` (``seed``,
    ``compute_time``, ``checkpoint``, ``checkpoint_every``, ``resume``, ``timeout``).
    ``fail_after={w: n}`` is a fault drill: worker w dies abruptly after sending n
    gradients.

    ``steps`` is the total target, the step the server ends at: a fresh server takes
    ``steps`` steps; resumed (``resume=True``) from a checkpoint at step k, the run
    takes ``steps − k``, and none, with a UserWarning and an empty result
    (``start_step`` = k), when k ≥ steps.

    Failures come fast, with their cause: a worker process that dies before joining
    (a script without the ``__main__`` guard, a ``grad`` the worker cannot unpickle)
    fails the run as soon as it dies; workers whose gradients raise, or whose processes
    end mid-run, are dropped at once, and the run fails ("every worker has left",
    with each worker's exception or exit code) when none is left. ``timeout`` bounds
    only the waits on live processes.
    """
    opts = RunOptions(**options)
    _check_callables(grad, server)
    n_workers = check_int("n_workers", n_workers, 1)
    steps = _check_steps(steps)
    if not isinstance(fail_after or {}, dict):
        raise TypeError(f"fail_after must be a dict {{worker: gradients}}, got {type(fail_after).__name__}")
    fail_after = {check_int("fail_after's worker", w, 0): check_int(f"fail_after[{w}]", n, 0)
                  for w, n in dict(fail_after or {}).items()}
    if any(not 0 <= w < n_workers for w in fail_after):
        raise ValueError(f"fail_after names workers outside 0..{n_workers - 1}: {sorted(fail_after)}")
    if dist.is_initialized():
        raise RuntimeError("a default process group already exists in this process; under torchrun use "
                           "serve_torchrun, which runs on it")
    saver = opts.prepare(server)
    remaining = opts.remaining(server, steps)
    _check_header(server, remaining)
    if remaining == 0:
        return RunResult(np.zeros(0), [], server.discarded, [], start_step=server.k)
    ctx = torch.multiprocessing.get_context("spawn")
    errors, wakes = ctx.Queue(), ctx.Queue()
    world = n_workers + 2  # the server, the workers, the waker
    timeout = timedelta(seconds=opts.timeout)
    store = dist.TCPStore(HOST, 0, world, is_master=True, timeout=timeout, wait_for_workers=False)
    numel, dtype = server.x.numel(), server.x.dtype
    procs = [
        ctx.Process(target=_spawned_worker, daemon=True,
                    args=(w, world, store.port, opts.timeout, grad, opts.compute_time, opts.seed, numel, dtype,
                          fail_after.get(w), errors))
        for w in range(n_workers)
    ] + [ctx.Process(target=_spawned_waker, daemon=True,
                     args=(n_workers + 1, world, store.port, opts.timeout, numel, dtype, wakes))]
    stop = threading.Event()
    watcher = None
    finished = False
    try:
        for p in procs:
            try:
                p.start()
            except (pickle.PicklingError, AttributeError, TypeError) as exc:
                raise TypeError(f"grad and compute_time must be picklable to reach the worker processes "
                                f"(module-level functions or instances of module-level classes, not lambdas or "
                                f"local functions): {type(exc).__name__}: {exc}") from exc
        _await_processes(store, procs, errors, n_workers, opts.timeout)
        dist.init_process_group("gloo", rank=0, world_size=world, store=store, timeout=timeout)
        watcher = threading.Thread(target=_watch_workers, args=(procs[:n_workers], wakes, stop),
                                                 daemon=True)
        watcher.start()
        try:
            loop = _ServerLoop(server, n_workers, remaining, opts.seed, saver, lambda w: procs[w].exitcode, errors,
                               opts.timeout)
            result = loop.run()
            finished = True
            return result
        finally:
            with contextlib.suppress(Exception):
                dist.destroy_process_group()
    finally:
        stop.set()
        if watcher is not None:
            watcher.join(timeout=5)
        with contextlib.suppress(Exception):
            wakes.put(None)
        if finished:  # the workers were told to stop: let them leave
            for p in procs:
                if p.pid is not None:
                    p.join(timeout=10 if p is not procs[-1] else 2)
        for p in procs:  # after a failure, whoever is left waits for nothing
            if p.pid is not None and p.is_alive():
                p.terminate()
                p.join(timeout=5)
        errors.close()
        wakes.close()


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
    """Rennala-NSGD on ``n_workers`` local processes (gloo), up to step ``steps`` (the
    total target, also when resuming); keyword arguments as for :func:`run_distributed`
    (``fail_after`` and those of :class:`RunOptions`). The result's ``arrivals`` replayed
    with :func:`~neurips26.distributed.replay` give its trajectory exactly."""
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
    :class:`RunOptions`; ``steps`` is the total target as in :func:`run_distributed`.
    Initializes a gloo process group from torchrun's environment unless one exists
    (which must then be gloo). A rank that fails ends its process, and torchrun then
    stops every rank: the job fails at once with that rank's traceback."""
    opts = RunOptions(**options)
    if not callable(make_server):
        raise TypeError(f"make_server must be callable () -> Server, got {type(make_server).__name__}")
    _check_callables(grad)
    steps = _check_steps(steps)
    if not dist.is_initialized():
        dist.init_process_group("gloo", timeout=timedelta(seconds=opts.timeout))
    if dist.get_backend() != "gloo":
        raise RuntimeError(f"the server receives from any source, which needs the gloo backend, not {dist.get_backend()}")
    rank, world = dist.get_rank(), dist.get_world_size()
    if world < 2:
        raise RuntimeError("serve_torchrun needs at least 2 processes (a server and a worker)")
    server = make_server()
    if not isinstance(server, Server):
        raise TypeError(f"make_server must return a Server, got {type(server).__name__}")
    if rank == 0:
        saver = opts.prepare(server)
        remaining = opts.remaining(server, steps)
        return _ServerLoop(server, world - 1, remaining, opts.seed, saver, lambda w: None, None, opts.timeout).run()
    try:
        _worker_loop(rank - 1, grad, opts.compute_time, opts.seed, server.x.numel(), server.x.dtype, None, None)
    except Exception:
        traceback.print_exc()
        raise
    return None
