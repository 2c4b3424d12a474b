"""Asynchronous parallel BO on any ``concurrent.futures.Executor``, with a crash-safe journal,
and an event-driven simulator of the same loop for benchmarking with simulated durations.

Whenever a worker is free, the model is refitted on every finished evaluation and the
proposer is asked for one point per free worker with the still-running points as pending
(for kriging believer these are fantasised, see ``kriging_believer``). Every submission and
every result is appended to a JSON-lines journal and fsync'ed before the loop goes on, so a
finished evaluation is never lost; rerunning with the same journal resumes. An evaluation that
raises, or returns NaN/Inf, is recorded as failed and not retried; one that was running when
the driver died is resubmitted, at most ``max_attempts`` times in all.

The journal survives a crash in the middle of a write: it starts with a header line (format
name, version, the space's dimension), and on open a torn last line is cut (or, when it is a
whole record, finished with its newline), so that no record is ever glued onto another;
records that do not parse, or a result without its submit, are skipped and counted (a
``JournalWarning``, and ``AsyncResult.skipped_records``). A file that is not a journal is
refused with a ValueError naming its path; a journal of the previous version (records, no
header) is accepted and given its header. The details are in ``_Journal``.
"""

from __future__ import annotations

import json
import math
import os
import time
import warnings
from concurrent.futures import FIRST_COMPLETED, Executor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
from torch import Tensor

from ._checks import check_int, check_real
from ._gp import fit_gp
from .space import SearchSpace

__all__ = ["AsyncBayesOpt", "AsyncResult", "simulate_async", "AsyncSimulationResult", "JournalWarning"]


@dataclass
class AsyncResult:
    X: Tensor  # (n, d) successful evaluations
    Y: Tensor  # (n,)
    failed: list = field(default_factory=list)  # (x, error) of evaluations recorded as failed
    journal: Path | None = None
    skipped_records: int = 0  # journal records skipped on resume (torn by a crash, unreadable, or orphaned)

    @property
    def best(self) -> tuple[Tensor, float]:
        """(x, y) of the largest successful value. ValueError when nothing succeeded."""
        if len(self.Y) == 0:
            raise ValueError(f"AsyncResult.best: no successful evaluation ({len(self.failed)} failed"
                             + (f", the first with {self.failed[0][1]!r}" if self.failed else "") + ")")
        i = int(self.Y.argmax())
        return self.X[i], float(self.Y[i])


JOURNAL_FORMAT = "neurips26.bayesopt.AsyncBayesOpt journal"
JOURNAL_VERSION = 1


class JournalWarning(RuntimeWarning):
    """The journal was repaired on open: a record torn by a crash was cut, or records that
    cannot be read (or whose evaluation was never submitted) were skipped."""


class _Journal:
    """Append-only JSON lines; each line is written, flushed and fsync'ed before returning.

    Format (version 1): the first line is the header ``{"event": "journal", "format":
    JOURNAL_FORMAT, "version": 1, "dim": d}`` (an event like the records, so that a reader
    that filters lines by their event needs no special case), written atomically (a temporary
    file, fsync'ed, renamed) when the journal is created; then one record per line,
    ``{"event": "submit", "id", "x", "initial", "time"}`` or ``{"event": "result", "id",
    "status": "ok" | "failed", "y", "error", "time"}``.

    On open (``load``):

    * a file whose first line is neither the header nor a record is refused (ValueError naming
      the path), as is a header of a newer version or of another dimension: nothing is ever
      appended to a file that is not this journal;
    * the last line, when the file does not end with a newline (the process died mid-write),
      is kept if it is a complete record (a newline is added) and cut off otherwise, so the
      next record always starts on a line of its own;
    * lines that do not parse as a record, results without an earlier submit of their id,
      second results of an id, and resubmissions at another point are skipped and counted.

    Journals of the previous version (no header line: they start with a record) are accepted
    and upgraded in place: the header is put in front, atomically (the same repair applies).
    """

    def __init__(self, path, dim: int):
        self.path = Path(path)
        self.dim = dim
        if self.path.is_dir():
            raise ValueError(f"journal must be a file path, got a directory: {self.path}")
        if self.path.exists():
            data = self.path.read_bytes()
            self._classify(data.split(b"\n", 1)[0], data)

    def _header(self) -> bytes:
        return (json.dumps({"event": "journal", "format": JOURNAL_FORMAT, "version": JOURNAL_VERSION,
                            "dim": self.dim}) + "\n").encode()

    def _classify(self, first: bytes, data: bytes) -> str:
        """'new' (empty, or only a header or record torn by a crash), 'header' or 'legacy';
        ValueError for anything else."""
        if not data.strip():
            return "new"
        if b"\n" not in data and (self._header().startswith(data) or data.startswith(b'{"event": "')) \
                and _parse(data) is None:
            return "new"  # the first write was torn
        obj = _parse(first)
        if isinstance(obj, dict) and obj.get("format") == JOURNAL_FORMAT:
            version = obj.get("version")
            if not isinstance(version, int) or isinstance(version, bool) or version < 1:
                raise ValueError(f"journal {self.path}: its header has an invalid version {version!r}")
            if version > JOURNAL_VERSION:
                raise ValueError(f"journal {self.path} was written by a newer version of its format (version "
                                 f"{version}); this one reads version {JOURNAL_VERSION}")
            if obj.get("dim") != self.dim:
                raise ValueError(f"journal {self.path} is for a search space of dim {obj.get('dim')}, "
                                 f"this run's space has dim {self.dim}")
            return "header"
        if _record_error(obj, self.dim) is None:
            return "legacy"
        raise ValueError(f"journal {self.path} is not an AsyncBayesOpt journal: its first line is neither the "
                         f"journal header ({JOURNAL_FORMAT!r}) nor a journal record; refusing to append to it "
                         f"(pass another path)")

    def load(self) -> tuple[list[dict], int]:
        """Repair the file (see the class docstring) and return (valid records in order,
        number of records skipped). Creates the journal when the path does not exist."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = self.path.read_bytes() if self.path.exists() else b""
        kind = self._classify(data.split(b"\n", 1)[0], data)
        if kind == "new":
            self._replace(self._header())
            return [], 0
        skipped = 0
        end = data.rfind(b"\n") + 1  # everything before `end` is complete lines
        tail = data[end:]
        keep_tail = bool(tail) and _record_error(_parse(tail), self.dim) is None
        skipped += bool(tail) and not keep_tail
        body = data[:end] + (tail + b"\n" if keep_tail else b"")
        if kind == "legacy":
            self._replace(self._header() + body)
        elif keep_tail:
            self._append_bytes(b"\n")
        elif tail:
            with open(self.path, "r+b") as fh:
                fh.truncate(end)
                fh.flush()
                os.fsync(fh.fileno())
        lines = body.split(b"\n")[:-1]
        if kind == "header":
            lines = lines[1:]
        records, submitted, finished = [], {}, set()
        for line in lines:
            r = _parse(line)
            if _record_error(r, self.dim) is not None:
                skipped += 1
                continue
            i = r["id"]
            if r["event"] == "submit":
                if i in finished or (i in submitted and submitted[i] != r["x"]):
                    skipped += 1
                    continue
                submitted[i] = r["x"]
            else:
                if i not in submitted or i in finished:
                    skipped += 1
                    continue
                finished.add(i)
            records.append(r)
        return records, skipped

    def append(self, record: dict):
        self._append_bytes((json.dumps(record) + "\n").encode())

    def _append_bytes(self, data: bytes):
        with open(self.path, "ab") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())

    def _replace(self, data: bytes):
        """Write ``data`` as the whole file, atomically: a crash leaves the old or the new file."""
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        try:
            fd = os.open(self.path.parent, os.O_RDONLY)
        except OSError:  # a platform without directory handles
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _parse(line: bytes):
    try:
        return json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _record_error(r, dim: int) -> str | None:
    """Why ``r`` is not a valid journal record (None when it is)."""
    if not isinstance(r, dict) or r.get("event") not in ("submit", "result"):
        return "not a record"
    i = r.get("id")
    if not isinstance(i, int) or isinstance(i, bool) or i < 0:
        return "bad id"
    if r["event"] == "submit":
        x = r.get("x")
        if not (isinstance(x, list) and len(x) == dim and all(_is_number(v) for v in x)):
            return "bad point"
        return None
    if r.get("status") == "ok":
        return None if _is_number(r.get("y")) else "bad value"
    return None if r.get("status") == "failed" else "bad status"


def _call(objective, x: list[float]) -> float:
    return float(objective(torch.tensor(x, dtype=torch.float64)))


class AsyncBayesOpt:
    """Asynchronous BO: ``objective`` maps a (d,) tensor to a float (maximized); it runs on
    ``executor`` with at most ``n_workers`` evaluations in flight.

    ``proposer`` is any object with ``propose(model, q, pending)`` (``KrigingBeliever``,
    ``BUCB``, ...); ``model_factory(X, Y)`` builds the model (default: ``fit_gp``, warm-started).
    The first ``n_init`` points are scrambled Sobol. ``journal`` (a path) makes the run
    resumable and loss-free (module docstring: how a journal torn by a crash is repaired; a
    path holding anything else is refused). ValueError / TypeError for settings out of range
    (``n_workers``, ``max_attempts``, ``n_init`` integers >= 1) or of the wrong kind. With a ``ProcessPoolExecutor`` the
    objective must be picklable."""

    def __init__(self, objective: Callable, space: SearchSpace, proposer, executor: Executor, n_workers: int,
                 journal: str | os.PathLike | None = None, model_factory: Callable | None = None,
                 n_init: int | None = None, max_attempts: int = 2, seed: int = 0):
        if not callable(objective):
            raise TypeError(f"objective must be callable (a (d,) tensor -> float), got {type(objective).__name__}")
        if not isinstance(space, SearchSpace):
            raise TypeError(f"space must be a SearchSpace, got {type(space).__name__}")
        if not callable(getattr(proposer, "propose", None)):
            raise TypeError(f"proposer must have a propose(model, q, pending) method, got {type(proposer).__name__}")
        if not callable(getattr(executor, "submit", None)):
            raise TypeError(f"executor must be a concurrent.futures.Executor, got {type(executor).__name__}")
        if model_factory is not None and not callable(model_factory):
            raise TypeError(f"model_factory must be callable (X, Y) -> model, got {type(model_factory).__name__}")
        n_workers = check_int("n_workers", n_workers, 1)
        max_attempts = check_int("max_attempts", max_attempts, 1)
        if n_init is not None:
            n_init = check_int("n_init", n_init, 1)
        seed = check_int("seed", seed)
        self.objective, self.space, self.proposer, self.executor = objective, space, proposer, executor
        self.n_workers, self.max_attempts = n_workers, max_attempts
        self.n_init = n_init if n_init is not None else max(2 * space.dim, n_workers)
        self.journal = _Journal(journal, space.dim) if journal is not None else None
        self._state = None
        self._skipped = 0  # journal records skipped by the last run's open
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
        counting those already in the journal). ``callback(record)`` sees every result.
        A journal repaired on open (a torn last record cut, unreadable or orphaned records
        skipped) gives a ``JournalWarning``; the result counts the skipped records."""
        max_evals = check_int("max_evals", max_evals, 0)
        if callback is not None and not callable(callback):
            raise TypeError(f"callback must be callable or None, got {type(callback).__name__}")
        records: dict[int, dict] = {}
        attempts: dict[int, int] = {}
        loaded, self._skipped = self.journal.load() if self.journal else ([], 0)
        if self._skipped:
            warnings.warn(JournalWarning(f"journal {self.journal.path}: skipped {self._skipped} record(s) torn by a "
                                         "crash, unreadable, or without a matching submit; an evaluation whose result "
                                         "was among them runs again"), stacklevel=2)
        for r in loaded:
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
        return AsyncResult(X, Y, failed, self.journal.path if self.journal else None, self._skipped)


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
    if not isinstance(space, SearchSpace):
        raise TypeError(f"space must be a SearchSpace, got {type(space).__name__}")
    n_workers = check_int("n_workers", n_workers, 1)
    budget = check_int("budget", budget, 0)
    n_init = check_int("n_init", n_init, 1)
    check_real("noise_std", noise_std, low=0.0)
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
