"""Asynchronous parallel BO on any ``concurrent.futures.Executor``, with a crash-safe journal,
and an event-driven simulator of the same loop for benchmarking with simulated durations.

Whenever a worker is free, the model is refitted on every finished evaluation and the
proposer is asked for one point per free worker with the still-running points as pending
(for kriging believer these are fantasised, see ``kriging_believer``). Every submission and
every result is appended to a JSON-lines journal and fsync'ed before the loop goes on, so a
finished evaluation is never lost; rerunning with the same journal resumes. An evaluation that
raises, or returns NaN/Inf, is recorded as failed and not retried; one that was running when
the driver died is resubmitted, at most ``max_attempts`` times in all.
"""

from __future__ import annotations

import json
import math
import os
import time
from concurrent.futures import FIRST_COMPLETED, Executor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
from torch import Tensor

from ._gp import fit_gp
from .space import SearchSpace

__all__ = ["AsyncBayesOpt", "AsyncResult", "simulate_async", "AsyncSimulationResult"]


@dataclass
class AsyncResult:
    X: Tensor  # (n, d) successful evaluations
    Y: Tensor  # (n,)
    failed: list = field(default_factory=list)  # (x, error) of evaluations recorded as failed
    journal: Path | None = None

    @property
    def best(self) -> tuple[Tensor, float]:
        i = int(self.Y.argmax())
        return self.X[i], float(self.Y[i])


class _Journal:
    """Append-only JSON lines; each line is written, flushed and fsync'ed before returning.
    A torn last line (the process died mid-write) is skipped on load."""

    def __init__(self, path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def load(self) -> list[dict]:
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # torn write from a crash
        return out

    def append(self, record: dict):
        with open(self.path, "a") as fh:
            fh.write(json.dumps(record) + "\n")
            fh.flush()
            os.fsync(fh.fileno())


def _call(objective, x: list[float]) -> float:
    return float(objective(torch.tensor(x, dtype=torch.float64)))


class AsyncBayesOpt:
    """Asynchronous BO: ``objective`` maps a (d,) tensor to a float (maximized); it runs on
    ``executor`` with at most ``n_workers`` evaluations in flight.

    ``proposer`` is any object with ``propose(model, q, pending)`` (``KrigingBeliever``,
    ``BUCB``, ...); ``model_factory(X, Y)`` builds the model (default: ``fit_gp``, warm-started).
    The first ``n_init`` points are scrambled Sobol. ``journal`` (a path) makes the run
    resumable and loss-free. With a ``ProcessPoolExecutor`` the objective must be picklable."""

    def __init__(self, objective: Callable, space: SearchSpace, proposer, executor: Executor, n_workers: int,
                 journal: str | os.PathLike | None = None, model_factory: Callable | None = None,
                 n_init: int | None = None, max_attempts: int = 2, seed: int = 0):
        if n_workers < 1:
            raise ValueError(f"n_workers must be >= 1, got {n_workers}")
        self.objective, self.space, self.proposer, self.executor = objective, space, proposer, executor
        self.n_workers, self.max_attempts = n_workers, max_attempts
        self.n_init = n_init if n_init is not None else max(2 * space.dim, n_workers)
        self.journal = _Journal(journal) if journal is not None else None
        self._state = None
        self.model_factory = model_factory or self._default_factory
        self._sobol = torch.quasirandom.SobolEngine(space.dim, scramble=True, seed=seed)

    def _default_factory(self, X, Y):
        model = fit_gp(X, Y, self.space.bounds, state=self._state)
        self._state = model.state_dict()
        return model

    def _initial(self, k: int) -> Tensor:
        b = self.space.bounds
        return b[0] + (b[1] - b[0]) * self._sobol.draw(k, dtype=torch.float64)

    def run(self, max_evals: int, callback: Callable | None = None) -> AsyncResult:
        """Evaluate until ``max_evals`` evaluations have finished (successes and failures,
        counting those already in the journal). ``callback(record)`` sees every result."""
        records: dict[int, dict] = {}
        attempts: dict[int, int] = {}
        for r in (self.journal.load() if self.journal else []):
            if r["event"] == "submit":
                records.setdefault(r["id"], {"x": r["x"], "initial": r.get("initial", False)})
                attempts[r["id"]] = attempts.get(r["id"], 0) + 1
            else:
                records[r["id"]].update(r)
        finished = {i for i, r in records.items() if "status" in r}
        lost = [i for i in records if i not in finished]
        # Skip as many Sobol points as were drawn before, so a resumed run continues the sequence.
        n_sobol = sum(1 for r in records.values() if r.get("initial"))
        if n_sobol:
            self._sobol.fast_forward(n_sobol)
        next_id = max(records, default=-1) + 1
        running = {}

        def submit(i, x, initial=False):
            records.setdefault(i, {"x": x, "initial": initial})
            attempts[i] = attempts.get(i, 0) + 1
            if self.journal:
                self.journal.append({"event": "submit", "id": i, "x": x, "initial": initial, "time": time.time()})
            running[self.executor.submit(_call, self.objective, x)] = i

        def record(i, y=None, error=None):
            ok = error is None and y is not None and math.isfinite(y)
            if error is None and not ok:
                error = f"non-finite value {y}"
            rec = {"event": "result", "id": i, "status": "ok" if ok else "failed", "y": y if ok else None,
                   "error": error, "time": time.time()}
            records[i].update(rec)
            finished.add(i)
            if self.journal:
                self.journal.append(rec)
            if callback:
                callback(rec | {"x": records[i]["x"]})

        resubmit = []
        for i in lost:  # running when a previous driver died
            if attempts[i] >= self.max_attempts:
                record(i, error=f"lost {attempts[i]} times (driver stopped while it ran)")
            else:
                resubmit.append(i)
        while len(finished) < max_evals:
            while resubmit and len(running) < self.n_workers:
                i = resubmit.pop(0)
                submit(i, records[i]["x"])
            free = min(self.n_workers - len(running), max_evals - len(finished) - len(running))
            if free > 0:
                points, initial = self._next_points(free, records, running)
                for x in points:
                    submit(next_id, x.tolist(), initial=initial)
                    next_id += 1
            if not running:
                break
            done, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for fut in done:
                i = running.pop(fut)
                try:
                    record(i, y=fut.result())
                except Exception as exc:  # noqa: BLE001 - a failing evaluation is data, not a crash
                    record(i, error=f"{type(exc).__name__}: {exc}")
        return self._result(records)

    def _next_points(self, k: int, records, running) -> tuple[Tensor, bool]:
        """(points, whether they are initial Sobol points)."""
        ok = [r for r in records.values() if r.get("status") == "ok"]
        if len(ok) + len(running) < self.n_init:
            return self._initial(k), True
        # Running and failed points are both pending: the proposer should not pick them again.
        pend = [records[i]["x"] for i in running.values()] + [r["x"] for r in records.values()
                                                                if r.get("status") == "failed"]
        X = torch.tensor([r["x"] for r in ok], dtype=torch.float64)
        Y = torch.tensor([r["y"] for r in ok], dtype=torch.float64)
        model = self.model_factory(X, Y)
        pending = torch.tensor(pend, dtype=torch.float64) if pend else None
        return self.proposer.propose(model, q=k, pending=pending), False

    def _result(self, records) -> AsyncResult:
        ok = [r for r in records.values() if r.get("status") == "ok"]
        X = torch.tensor([r["x"] for r in ok], dtype=torch.float64).reshape(len(ok), self.space.dim)
        Y = torch.tensor([r["y"] for r in ok], dtype=torch.float64)
        failed = [(r["x"], r["error"]) for r in records.values() if r.get("status") == "failed"]
        return AsyncResult(X, Y, failed, self.journal.path if self.journal else None)


@dataclass
class AsyncSimulationResult:
    """What ``simulate_async`` returns: every evaluation in the order it finished on the
    simulated clock (the initial design first, all finishing at time 0)."""

    X: Tensor  # (n, d) in completion order
    Y: Tensor  # (n,) observed (noisy) values
    F: Tensor  # (n,) noiseless values, for regret
    finish_times: Tensor  # (n,)


def simulate_async(objective: Callable, proposer, space: SearchSpace, model_factory: Callable, n_workers: int,
                   budget: int, n_init: int, durations: Callable | None = None, noise_std: float = 0.0,
                   synchronous: bool = False, seed: int = 0) -> AsyncSimulationResult:
    """The asynchronous loop on a simulated clock. ``objective`` maps (n, d) to noiseless
    (n,) values; each evaluation takes ``durations(generator)`` time units (default
    Exp(1)) and returns value + N(0, noise_std²). ``synchronous=True`` waits for the whole
    batch of ``n_workers`` before proposing the next one (batch BO)."""
    generator = torch.Generator().manual_seed(seed)
    durations = durations or (lambda generator: float(-math.log(1 - float(torch.rand(1, generator=generator)))))
    b = space.bounds
    sobol = torch.quasirandom.SobolEngine(space.dim, scramble=True, seed=seed)
    X0 = b[0] + (b[1] - b[0]) * sobol.draw(n_init, dtype=torch.float64)
    if space.candidates is not None:  # snap to the finite domain
        X0 = space.candidates[torch.cdist(X0, space.candidates).argmin(1)]
    F0 = objective(X0)
    X, F = [X0], [F0]
    Y = [F0 + noise_std * torch.randn(len(F0), generator=generator, dtype=torch.float64)]
    times = [torch.zeros(n_init, dtype=torch.float64)]
    clock, running = 0.0, []  # (finish time, x)
    n_done = 0
    while n_done < budget:
        free = n_workers - len(running)
        if free and (not synchronous or not running):
            k = min(free, budget - n_done - len(running))
            if k > 0:
                model = model_factory(torch.cat(X), torch.cat(Y))
                pending = torch.stack([x for _, x in running]) if running else None
                for x in proposer.propose(model, q=k, pending=pending):
                    running.append((clock + durations(generator), x))
        running.sort(key=lambda r: r[0])
        batch = [running.pop(0)]
        while synchronous and running:
            batch.append(running.pop(0))
        for t, x in batch:
            clock = t
            f = objective(x[None])
            X.append(x[None])
            F.append(f)
            Y.append(f + noise_std * torch.randn(1, generator=generator, dtype=torch.float64))
            times.append(torch.tensor([t], dtype=torch.float64))
            n_done += 1
    return AsyncSimulationResult(torch.cat(X), torch.cat(Y), torch.cat(F), torch.cat(times))
