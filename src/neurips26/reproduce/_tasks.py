"""Sweeps as tasks: the pieces behind :meth:`RunContext.map`.

* **Records and keys.** A task is a small record (None, bool, int, float, str, tuples, lists,
  dicts and dataclasses of these). Its key is the SHA-256 of a canonical JSON form, so the
  same record has the same key in every process, on every machine and in every run.
* **Seeds.** Each task runs with ``random``, NumPy's global generator and torch seeded from
  :func:`task_seed_for` (run seed, task key): its numbers depend on neither the number of
  workers nor the order in which tasks finish.
* **Runners.** Where tasks run: :class:`InProcess` (the default), :class:`ProcessPool`
  (``--jobs N``: spawned processes, one BLAS / torch thread each) or :class:`DaskCluster`
  (``--scheduler ADDRESS``: a running ``distributed`` scheduler). The experiment never chooses.
* **Cache.** :class:`TaskCache` keeps each finished task as one JSON file (written atomically
  by the process that drives the run, so workers need no access to the output folder), keyed
  by the function, the task, the run seed, quick/full and the package version.
"""

from __future__ import annotations

import contextvars
import dataclasses
import hashlib
import json
import logging
import math
import os
import pickle
import random
import signal
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator, NamedTuple, Sequence

from .._atomic import atomic_write_text

__all__ = [
    "task_key", "task_seed_for", "task_seed", "check_task_function", "run_task",
    "check_picklable", "TaskCache", "Outcome", "InProcess", "ProcessPool", "DaskCluster", "make_runner",
    "quiet_third_party",
]

_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")


# --- records, keys and seeds -------------------------------------------------------------------

def _canonical(obj: Any, where: str = "task") -> Any:
    """A JSON-able form of a task record that is the same in every process (dict keys sorted,
    dataclasses by class name and fields); anything else is refused."""
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else repr(obj)
    if type(obj).__module__ == "numpy" and hasattr(obj, "item") and getattr(obj, "shape", None) == ():
        return _canonical(obj.item(), where)  # a NumPy scalar: the Python number it holds
    if isinstance(obj, (list, tuple)):
        return [_canonical(v, f"{where}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, dict):
        items = [(_canonical(k, f"{where} key"), _canonical(v, f"{where}[{k!r}]")) for k, v in obj.items()]
        return {"__dict__": sorted(items, key=lambda kv: json.dumps(kv[0], sort_keys=True))}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        cls = type(obj)
        fields = {f.name: _canonical(getattr(obj, f.name), f"{where}.{f.name}") for f in dataclasses.fields(obj)}
        return {"__dataclass__": f"{cls.__module__}.{cls.__qualname__}", "fields": fields}
    raise TypeError(
        f"{where} is a {type(obj).__name__}: a task record must be built of None, bool, int, float, str, "
        "tuples, lists, dicts and dataclasses of these (build arrays and models inside the task function)"
    )


def _digest(obj: Any) -> str:
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def task_key(task: Any) -> str:
    """The stable hash (64 hex digits) of a task record."""
    return _digest(_canonical(task))


def task_seed_for(run_seed: int, key: str) -> int:
    """The seed of one task: 63 bits of SHA-256 over (run seed, task key)."""
    digest = hashlib.sha256(f"neurips26 task seed|{int(run_seed)}|{key}".encode("ascii")).digest()
    return int.from_bytes(digest[:8], "big") >> 1


_current_seed: contextvars.ContextVar[int | None] = contextvars.ContextVar("neurips26_task_seed", default=None)


def task_seed() -> int:
    """The seed of the task running now (inside a function given to ``RunContext.map``), for a
    task that wants its own explicit generator, e.g. ``np.random.default_rng(task_seed())``."""
    seed = _current_seed.get()
    if seed is None:
        raise RuntimeError("task_seed() is only defined inside a task run by RunContext.map")
    return seed


def function_name(fn: Callable) -> str:
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', repr(fn))}"


def check_task_function(fn: Callable) -> None:
    """A task function must be importable by name (what pickle sends to a worker process):
    a module-level function, not a lambda, a closure or a bound method of a local object."""
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    resolved: Any = sys.modules.get(module) if module else None
    for part in qualname.split("."):
        resolved = getattr(resolved, part, None)
    if "<lambda>" in qualname or "<locals>" in qualname or resolved is not fn:
        raise TypeError(
            f"fn must be a module-level function (worker processes import it by name), got {function_name(fn)}; "
            "move it to the top level of its module and pass what it needs inside the task record"
        )


def _jsonable(obj: Any) -> Any:
    """json.dumps' fallback: NumPy / torch scalars and arrays become Python numbers and lists."""
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if hasattr(obj, "item"):
        return obj.item()
    raise TypeError(f"a task result must be JSON-able (numbers, str, lists, dicts), got {type(obj).__name__}")


def _limit_threads() -> None:
    """One BLAS / OpenMP / torch thread in this process: a worker among N must not take N cores."""
    for var in _THREAD_VARS:
        os.environ[var] = "1"  # for libraries loaded from now on
    import numpy  # noqa: F401  (loads its BLAS, now limited by the environment)
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    threadpool_limits(limits=1)  # for libraries loaded before


class _DropMessages(logging.Filter):
    def __init__(self, fragments: Sequence[str]):
        super().__init__()
        self.fragments = tuple(fragments)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(f in message for f in self.fragments)


# Import-time chatter of the baselines' packages that says nothing about a run.
_NOISE = {
    "torchao": ("Failed to load",),  # its optional CUDA kernels, which a CPU build cannot load
    "torch.utils._pytree": ("is an Enum subclass",),  # torch's deprecation note on torchao's enums
}


def quiet_third_party() -> None:
    """Silence the baselines' import-time noise in a run (the driver and every worker): torchao's
    kernels that a CPU build cannot load, torch's note on torchao's enums, llm-compressor's loguru
    INFO / "no accelerator" lines, gcastle's and llm-compressor's deprecation warnings. Errors
    still propagate; nothing here touches what our own code reports."""
    for name, fragments in _NOISE.items():
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropMessages) for f in logger.filters):
            logger.addFilter(_DropMessages(fragments))
    logging.getLogger("castle").setLevel(logging.WARNING)
    # llm-compressor (re)configures its loguru logger on import and reads these switches then; a user who
    # set them keeps their choice. A level, not LOG_DISABLED: disabled, it never registers the METRIC
    # level that its GPTQ pass logs at, and that pass fails
    os.environ.setdefault("LLM_COMPRESSOR_LOG_LEVEL", "ERROR")
    os.environ.setdefault("COMPRESSED_TENSORS_LOG_LEVEL", "ERROR")
    for category in (DeprecationWarning, FutureWarning, UserWarning):
        warnings.filterwarnings("ignore", category=category, module=r"(castle|llmcompressor|compressed_tensors)(\.|$)")


def _pool_worker_init() -> None:
    # Ctrl-C in a terminal reaches the whole process group: the driver alone handles it (it
    # stops the workers), so that a worker does not die half-way through sending a result.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _limit_threads()
    from ._pinning import pin_numerics

    pin_numerics(threads=1)
    quiet_third_party()


def run_task(fn: Callable, task: Any, seed: int, isolate: bool = False, single_thread: bool = False) -> tuple[str, float]:
    """Run ``fn(task)`` with ``random``, NumPy and torch seeded from ``seed``; return the result
    as JSON text and its wall time. ``isolate`` (in-process runs) puts the caller's generator
    states back afterwards, so that a map leaves the experiment's own random streams as they were."""
    import numpy as np
    import torch

    if single_thread:
        _limit_threads()
    saved = (random.getstate(), np.random.get_state(), torch.get_rng_state()) if isolate else None
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    token = _current_seed.set(seed)
    try:
        start = time.perf_counter()
        result = fn(task)
        wall = time.perf_counter() - start
        if not isinstance(result, dict):
            raise TypeError(f"{function_name(fn)} must return a dict (JSON-able), got {type(result).__name__}")
        return json.dumps(result, default=_jsonable, allow_nan=True), wall
    finally:
        _current_seed.reset(token)
        if saved is not None:
            random.setstate(saved[0])
            np.random.set_state(saved[1])
            torch.set_rng_state(saved[2])


# --- the cache -------------------------------------------------------------------------------

class TaskCache:
    """Finished tasks of one experiment, one JSON file each, in ``root`` (``OUT/SLUG.tasks/``,
    beside the run folder that a finished run replaces in one move, so that it survives an
    interrupted run).

    ``run.json`` records the run it belongs to (slug, seed, quick, version). Without ``resume``
    an existing cache is moved aside (renamed with a time stamp); with ``resume`` it is reused
    only if it was written by the same seed, size and package version, and moved aside otherwise.
    A cache is never mixed with another run's.
    """

    def __init__(self, root: str | os.PathLike, *, slug: str, seed: int, quick: bool, version: str,
                 resume: bool = False, say: Callable[[str], None] = lambda msg: None):
        self.root = Path(root)
        self.meta = {"slug": slug, "seed": int(seed), "quick": bool(quick), "version": version}
        self.say = say
        self.moved_to: Path | None = None
        if self.root.exists():
            if not resume:
                self._move_aside("pass --resume to reuse its finished tasks")
            else:
                found = self._read_json(self.root / "run.json")
                if found != self.meta:
                    differs = ", ".join(f"{k} {found.get(k)!r} (this run: {v!r})" for k, v in self.meta.items()
                                        if found.get(k) != v) if isinstance(found, dict) else "no valid run.json"
                    self._move_aside(f"not reused: written by another run ({differs})")
                else:
                    for stale in self.root.glob(".*.tmp"):  # a write cut short by SIGKILL
                        stale.unlink(missing_ok=True)

    def _move_aside(self, why: str) -> None:
        stamp = time.strftime("%Y%m%dT%H%M%S")
        target, i = self.root.with_name(f"{self.root.name}.moved-{stamp}"), 1
        while target.exists():
            i += 1
            target = self.root.with_name(f"{self.root.name}.moved-{stamp}-{i}")
        os.replace(self.root, target)
        self.moved_to = target
        self.say(f"moved the task cache {self.root} aside to {target.name}: {why}")

    @staticmethod
    def _read_json(path: Path) -> Any:
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def entry_key(self, fn_name: str, key: str) -> str:
        return _digest({"fn": fn_name, "task": key, **self.meta})[:32]

    def load(self, fn_name: str, key: str) -> dict | None:
        """The cached result of a task, or None (absent, unreadable, or written for another run)."""
        entry = self._read_json(self.root / f"{self.entry_key(fn_name, key)}.json")
        if not isinstance(entry, dict) or not isinstance(entry.get("result"), dict):
            return None
        if entry.get("fn") != fn_name or entry.get("task_key") != key or entry.get("run") != self.meta:
            return None
        return entry

    def store(self, fn_name: str, key: str, task: Any, seed: int, result_json: str, wall: float) -> None:
        if not (self.root / "run.json").exists():
            self.root.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.root / "run.json", json.dumps(self.meta, indent=2) + "\n")
        head = json.dumps({"fn": fn_name, "task_key": key, "task": _canonical(task), "run": self.meta,
                           "task_seed": seed, "wall_s": round(wall, 4)}, allow_nan=True)
        name = self.entry_key(fn_name, key)
        atomic_write_text(self.root / f"{name}.json", head[:-1] + ', "result": ' + result_json + "}\n")
        (self.root / f"{name}.error.txt").unlink(missing_ok=True)

    def record_failure(self, fn_name: str, key: str, task: Any, text: str) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / f"{self.entry_key(fn_name, key)}.error.txt"
        atomic_write_text(path, f"{fn_name}({task!r})\n\n{text}")
        return path

    def finished(self) -> list[Path]:
        return sorted(p for p in self.root.glob("*.json") if p.name != "run.json")


# --- runners ---------------------------------------------------------------------------------

class Outcome(NamedTuple):
    """One finished task: ``index`` into the submitted list, and either ``result_json`` and
    ``wall`` or ``error`` (the exception) with ``trace`` (its formatted traceback)."""

    index: int
    result_json: str | None = None
    wall: float = 0.0
    error: BaseException | None = None
    trace: str = ""


def _format(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))  # a pool's exceptions carry the worker's traceback as __cause__


class InProcess:
    """Tasks run one after the other in this process (the default)."""

    name = "in-process"

    def run(self, fn: Callable, calls: Sequence[tuple[Any, int]]) -> Iterator[Outcome]:
        for i, (task, seed) in enumerate(calls):
            try:
                text, wall = run_task(fn, task, seed, isolate=True)
            except Exception as exc:  # recorded; KeyboardInterrupt / SystemExit stop the run
                yield Outcome(i, error=exc, trace=_format(exc))
            else:
                yield Outcome(i, text, wall)

    def close(self) -> None:
        pass


class ProcessPool:
    """``--jobs N``: a ``concurrent.futures.ProcessPoolExecutor`` of N spawned processes, one
    BLAS / torch thread each. Started at the first map and kept for the run."""

    def __init__(self, jobs: int):
        if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
            raise ValueError(f"jobs must be an int >= 1, got {jobs!r}")
        self.jobs = jobs
        self.name = f"process pool, {jobs} worker{'s' * (jobs > 1)}"
        self._pool = None

    def _executor(self):
        if self._pool is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            self._pool = ProcessPoolExecutor(self.jobs, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=_pool_worker_init)
        return self._pool

    def run(self, fn: Callable, calls: Sequence[tuple[Any, int]]) -> Iterator[Outcome]:
        from concurrent.futures import as_completed

        if not calls:
            return
        pool = self._executor()
        futures = {pool.submit(run_task, fn, task, seed): i for i, (task, seed) in enumerate(calls)}
        try:
            for fut in as_completed(futures):
                exc = fut.exception()
                if exc is None:
                    yield Outcome(futures[fut], *fut.result())
                else:
                    yield Outcome(futures[fut], error=exc, trace=_format(exc))
        except BaseException:  # Ctrl-C, SIGTERM, or the caller gave up: stop the workers now
            self._terminate()
            raise

    def _terminate(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        # Python 3.14 has ProcessPoolExecutor.terminate_workers(); before it, the same by hand.
        processes = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for p in processes:
            if p.is_alive():
                p.terminate()
        for p in processes:
            p.join(timeout=10)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


class DaskCluster:
    """``--scheduler ADDRESS``: tasks go to a running Dask ``distributed`` scheduler. Its
    workers need this package (and the experiment's dependencies) installed; results come back
    to this process, which writes the cache. A worker that dies mid-task has its task rerun
    elsewhere by the scheduler."""

    def __init__(self, address: str, client=None):
        try:
            import distributed
        except ImportError:
            raise ImportError("--scheduler needs Dask's distributed package: pip install 'neurips26[cluster]'") from None
        self.address = address
        self.name = f"dask scheduler {address}"
        self._client = client if client is not None else distributed.Client(address, set_as_default=False)
        self._own_client = client is None

    def run(self, fn: Callable, calls: Sequence[tuple[Any, int]]) -> Iterator[Outcome]:
        import asyncio
        import uuid

        if not calls:
            return

        from distributed import as_completed

        run_id = uuid.uuid4().hex[:12]
        futures = [self._client.submit(run_task, fn, task, seed, False, True, key=f"neurips26-{run_id}-{i}", pure=False)
                   for i, (task, seed) in enumerate(calls)]
        index = {fut.key: i for i, fut in enumerate(futures)}
        try:
            for fut in as_completed(futures, loop=self._client.loop):  # this client's, not a default one
                i = index[fut.key]
                if fut.status == "finished":
                    yield Outcome(i, *fut.result())
                    continue
                try:
                    exc = fut.exception()
                    trace = "".join(traceback.format_exception(type(exc), exc, fut.traceback()))
                except (Exception, asyncio.CancelledError) as other:  # cancelled, or the scheduler went away
                    exc, trace = other, _format(other)
                yield Outcome(i, error=exc, trace=trace)
        except BaseException:  # Ctrl-C, SIGTERM: take the rest back from the cluster
            self._client.cancel(futures, force=True)
            raise

    def close(self) -> None:
        if self._own_client:
            self._client.close()


def make_runner(jobs: int | None = None, scheduler: str | None = None):
    """The runner the command line asked for: in-process, ``--jobs N`` or ``--scheduler ADDRESS``."""
    if jobs is not None and scheduler is not None:
        raise ValueError("give jobs or scheduler, not both")
    if scheduler is not None:
        if not isinstance(scheduler, str) or not scheduler:
            raise ValueError(f"scheduler must be an address such as 'tcp://host:8786', got {scheduler!r}")
        return DaskCluster(scheduler)
    if jobs is not None:
        return ProcessPool(jobs)
    return InProcess()


def check_picklable(task: Any, where: str) -> None:
    try:
        pickle.dumps(task)
    except Exception as exc:
        raise TypeError(f"{where} cannot be pickled (a worker process could not receive it): {exc}") from None
