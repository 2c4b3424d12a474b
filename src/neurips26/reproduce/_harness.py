"""The experiment harness: a run context handed to each experiment, and the writer of
``results.json`` / ``report.md`` (the contract of DESIGN.md).

An experiment's sweep is a list of independent tasks run through :meth:`RunContext.map`;
where they run (in this process, ``--jobs N`` local processes, or a Dask cluster with
``--scheduler``) is chosen on the command line, and finished tasks are cached in
``OUT/SLUG.tasks/`` so that ``--resume`` continues an interrupted run (see ``_tasks.py``)."""

from __future__ import annotations

import base64
import json
import math
import os
import platform
import random
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence, TypeVar

from .._atomic import atomic_directory, atomic_open, atomic_write_text
from ._tasks import (
    InProcess, TaskCache, check_picklable, check_task_function, function_name, make_runner, quiet_third_party,
    task_key, task_seed,
    task_seed_for,
)

T = TypeVar("T")

__all__ = ["Experiment", "RunContext", "Claim", "PairedClaim", "run_experiment", "check_writable", "environment",
           "task_seed", "SCHEMA_KEYS", "VERDICTS", "tally", "verdict", "verdict_counts", "verdict_text",
           "paired_interval"]

SCHEMA_KEYS = ("slug", "paper", "quick", "seed", "wall_s", "env", "config", "metrics", "claims")


@dataclass(frozen=True)
class Experiment:
    """A registered reproduction. ``target`` is ``"module:function"``, imported only
    when the experiment runs, so that ``neurips26 list`` stays fast and light."""

    slug: str
    paper: str
    summary: str
    target: str

    def load(self) -> Callable[["RunContext"], None]:
        import importlib

        module, _, func = self.target.partition(":")
        return getattr(importlib.import_module(module), func)


VERDICTS = ("holds", "does not hold", "inconclusive", "not tested")
# the ``holds`` field each verdict is stored with (old readers know only True / False / None)
_HOLDS = {"holds": True, "does not hold": False, "inconclusive": None, "not tested": None}


@dataclass
class Claim:
    """A claim decided from one run (``RunContext.claim``)."""

    claim: str
    ours: float | None
    baseline: float | None
    holds: bool | None  # None: not tested (both sides hit a cap, or not measurable at this size)


@dataclass
class PairedClaim(Claim):
    """A claim decided over seeds by a paired comparison (``RunContext.compare``).

    ``ours`` / ``baseline`` are the means over all seeds; ``diff`` is the mean paired difference
    signed so that a positive value favours ours (``ours - baseline`` when higher is better,
    ``baseline - ours`` when lower is), ``ci`` its two-sided Student-t interval at ``level`` over the
    ``n`` seeds compared; ``n_capped`` seeds where both sides hit a cap are left out of the comparison.
    ``holds`` is None for an inconclusive claim too; ``verdict`` tells the two apart."""

    n: int = 0
    n_capped: int = 0
    better: str = "higher"
    margin: float = 0.0
    level: float = 0.95
    diff: float | None = None
    ci: list[float] | None = None
    verdict: str = "not tested"
    ours_seeds: list[float] = field(default_factory=list)
    baseline_seeds: list[float] = field(default_factory=list)
    # how ``ci`` was found: "paired t" (compare), "one-sample t" (bound), or what the caller of
    # ``decide`` says (e.g. "paired bootstrap" over test items)
    method: str = "paired t"


def verdict(claim: dict) -> str:
    """'holds', 'does not hold', 'inconclusive' or 'not tested' for one claim of a results.json.

    A claim decided over seeds stores its verdict; an older or single-run record has only ``holds``
    (True / False / None = not tested), from which the verdict follows."""
    stored = claim.get("verdict")
    if stored is None:
        return "not tested" if claim["holds"] is None else "holds" if claim["holds"] else "does not hold"
    if stored not in _HOLDS:
        raise ValueError(f"claim {claim.get('claim')!r}: verdict must be one of {', '.join(VERDICTS)}, got {stored!r}")
    if "holds" in claim and claim["holds"] is not _HOLDS[stored]:
        raise ValueError(f"claim {claim.get('claim')!r}: verdict {stored!r} contradicts holds={claim['holds']!r} "
                         f"(a {stored!r} claim is stored with holds={_HOLDS[stored]!r})")
    return stored


def verdict_counts(claims: Sequence[dict]) -> dict[str, int]:
    """How many claims of a results.json have each verdict, in the order of ``VERDICTS``."""
    found = [verdict(c) for c in claims]
    return {v: found.count(v) for v in VERDICTS}


def tally(claims: Sequence[dict]) -> tuple[int, int]:
    """(claims that hold, claims tested) of a results.json. Tested means holds, does not hold or
    inconclusive (an inconclusive claim was tested, and did not hold up); not tested counts in neither."""
    counts = verdict_counts(claims)
    return counts["holds"], counts["holds"] + counts["does not hold"] + counts["inconclusive"]


def paired_interval(ours: Sequence[float], baseline: Sequence[float], *, better: str = "higher",
                    level: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high) of the paired differences ``ours[i] - baseline[i]`` (``baseline[i] - ours[i]``
    when ``better="lower"``: a positive difference always favours ours), with the two-sided Student-t
    confidence interval at ``level`` on n - 1 degrees of freedom (what ``scipy.stats.ttest_rel`` gives).
    Needs n >= 2 pairs of finite numbers; differences that are all equal give an interval of zero width."""
    from scipy import stats

    if better not in ("higher", "lower"):
        raise ValueError(f"better must be 'higher' or 'lower', got {better!r}")
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise ValueError(f"level must be a number strictly between 0 and 1, got {level!r}")
    a = _finite_series("ours", ours)
    b = _finite_series("baseline", baseline)
    if len(a) != len(b):
        raise ValueError(f"ours and baseline must have one value per seed each, got {len(a)} and {len(b)} values")
    if len(a) < 2:
        raise ValueError(f"a paired comparison needs at least 2 seeds (values per side), got {len(a)}")
    d = [x - y for x, y in zip(a, b)] if better == "higher" else [y - x for x, y in zip(a, b)]
    n = len(d)
    mean = math.fsum(d) / n
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in d) / (n - 1))
    if sd == 0.0:  # every seed gave the same difference: no spread to widen the interval
        return mean, mean, mean
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


def _three_way(lo: float, hi: float, margin: float) -> str:
    """The verdict of an interval [lo, hi] of a difference that favours ours when positive."""
    return "holds" if lo > margin else "does not hold" if hi < margin else "inconclusive"


def _finite_series(name: str, values: Any) -> list[float]:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
        raise TypeError(f"{name} must be a sequence of numbers (one per seed), got {type(values).__name__}")
    try:
        values = [float(v) for v in values]  # lists, tuples, NumPy arrays, 1-d tensors
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a sequence of numbers (one per seed), got {values!r}") from None
    bad = [i for i, v in enumerate(values) if not math.isfinite(v)]
    if bad:
        raise ValueError(f"{name}[{bad[0]}] is {values[bad[0]]}: every seed's value must be finite "
                         f"(a run that diverged or hit a cap needs its own rule, e.g. capped=...)")
    return values


def _finite_number(name: str, value: Any) -> float | int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        try:
            value = float(value)  # numpy and 0-d torch scalars
        except (TypeError, ValueError):
            raise TypeError(f"{name} must be a number, got {type(value).__name__}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{name} is {value}: a result must be finite (no NaN passed on)")
    return value


def _check_json_value(name: str, value: Any) -> Any:
    """Metrics are numbers, or lists/dicts of numbers (curves, per-seed values)."""
    if isinstance(value, dict):
        return {str(k): _check_json_value(f"{name}.{k}", v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_check_json_value(f"{name}[{i}]", v) for i, v in enumerate(value)]
    if isinstance(value, str):
        return value
    return _finite_number(name, value)


class RunContext:
    """What an experiment gets: the seed, the size, a place for its outputs, and a
    progress bar. It records config, metrics, claims, tables and figures; the harness
    writes them out when the experiment returns."""

    def __init__(self, slug: str, out_dir: Path, seed: int = 0, quick: bool = False, progress=None,
                 runner=None, cache: TaskCache | None = None):
        self.slug = slug
        self.out_dir = Path(out_dir)
        self.seed = int(seed)
        self.quick = bool(quick)
        self.config: dict[str, Any] = {}
        self.metrics: dict[str, Any] = {}
        self.claims: list[Claim] = []
        self.sections: list[str] = []
        self.figures: list[str] = []
        self._progress = progress
        self._runner = runner if runner is not None else InProcess()
        self._cache = cache
        self.task_stats = {"tasks": 0, "reused": 0, "ran": 0, "task_wall_s": 0.0}

    # --- recording -------------------------------------------------------------------
    def metric(self, name: str, value: Any) -> None:
        self.metrics[name] = _check_json_value(name, value)

    def claim(self, claim: str, ours: float, baseline: float, holds: bool | None) -> None:
        """Record a claim. ``holds=None`` marks it not tested (say why in ``claim``); its numbers may
        then be NaN or None and are stored as null."""
        if holds is not None and not isinstance(holds, bool):
            raise TypeError(f"holds must be a bool or None (not tested), got {type(holds).__name__}")
        if holds is None:
            def number(name, v):
                if v is None:
                    return None
                v = float(_finite_number(name, v)) if not (isinstance(v, float) and math.isnan(v)) else None
                return v
        else:
            def number(name, v):
                return float(_finite_number(name, v))
        self.claims.append(Claim(claim, number("ours", ours), number("baseline", baseline), holds))

    def compare(self, claim: str, ours: Sequence[float], baseline: Sequence[float], *, better: str = "higher",
                margin: float = 0.0, level: float = 0.95, capped: Sequence[bool] | None = None,
                method: str = "paired t") -> str:
        """Record a claim decided over seeds by a paired comparison, and return its verdict.

        ``ours[i]`` and ``baseline[i]`` are the two sides' figures on seed (or instance) ``i``; ``better``
        says whether a higher or a lower figure is better. The claim is that ours beats the baseline by
        more than ``margin`` (in the figure's units; a negative margin states "no worse than by more
        than -margin"). With ``d`` the paired differences signed so that positive favours ours, and
        ``[lo, hi]`` the two-sided Student-t interval of their mean at ``level``:

        * ``holds`` when ``lo > margin`` (the whole interval favours ours beyond the margin);
        * ``does not hold`` when ``hi < margin`` (the whole interval is on the baseline's side);
        * ``inconclusive`` otherwise (the interval contains the margin: zero, by default).

        ``capped[i]`` True marks a seed where both sides hit a cap (budget, time-out, clipping): it says
        nothing about which is better and is left out of the comparison; with fewer than 2 seeds left
        the claim is ``not tested``. The recorded ``ours`` and ``baseline`` are the means over the
        seeds the interval uses (over every seed when all are capped); ``ours_seeds`` and
        ``baseline_seeds`` keep every seed. Needs at least 2 seeds; every value must be finite."""
        if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not math.isfinite(margin):
            raise ValueError(f"margin must be a finite number, got {margin!r}")
        a, b = _finite_series("ours", ours), _finite_series("baseline", baseline)
        if len(a) != len(b):
            raise ValueError(f"ours and baseline must have one value per seed each, got {len(a)} and {len(b)} values")
        if capped is None:
            cap = [False] * len(a)
        else:
            import numpy as np

            cap = list(capped)
            if len(cap) != len(a) or not all(isinstance(c, (bool, np.bool_)) for c in cap):
                raise ValueError(f"capped must be one bool per seed ({len(a)} of them), got {capped!r}")
            cap = [bool(c) for c in cap]
        keep = [i for i, c in enumerate(cap) if not c]
        if len(a) < 2:
            raise ValueError(f"a paired comparison needs at least 2 seeds (values per side), got {len(a)}")
        mean_of = lambda v: math.fsum(v) / len(v)  # noqa: E731
        # the means shown beside the verdict are over the pairs the interval uses: a capped seed's figure
        # (a budget, an edge of a grid) would otherwise move the shown mean where the verdict ignores it
        shown = keep or list(range(len(a)))
        record = dict(claim=claim, ours=mean_of([a[i] for i in shown]), baseline=mean_of([b[i] for i in shown]),
                      holds=None, n=len(keep),
                      n_capped=len(a) - len(keep), better=better, margin=float(margin), level=float(level),
                      ours_seeds=a, baseline_seeds=b)
        if len(keep) < 2:
            paired_interval(a, b, better=better, level=level)  # the same checks of better and level
            self.claims.append(PairedClaim(**record, verdict="not tested", method=method))
            return "not tested"
        diff, lo, hi = paired_interval([a[i] for i in keep], [b[i] for i in keep], better=better, level=level)
        v = _three_way(lo, hi, margin)
        self.claims.append(PairedClaim(**(record | dict(holds=_HOLDS[v])), diff=diff, ci=[lo, hi], verdict=v,
                                       method=method))
        return v

    def bound(self, claim: str, values: Sequence[float], threshold: float, *, better: str = "lower",
              level: float = 0.95, capped: Sequence[bool] | None = None) -> str:
        """Record a claim that a figure lies below (``better="lower"``) or above (``"higher"``) a fixed
        ``threshold``, decided over seeds from the Student-t interval of its mean: ``holds`` when the whole
        interval is on the good side of the threshold, ``does not hold`` when it is wholly on the other,
        ``inconclusive`` when it contains the threshold. For a rate, an exponent or a fraction that the
        paper bounds (a log-log slope <= 0.6, a contraction ratio < 1). The baseline column holds the
        threshold; ``capped`` is as in :meth:`compare`."""
        a = _finite_series("values", values)
        t = _finite_number("threshold", threshold)
        return self.compare(claim, a, [float(t)] * len(a), better=better, level=level, capped=capped,
                            method="one-sample t")

    def decide(self, claim: str, *, ours: float, baseline: float, diff: float, ci: Sequence[float], n: int,
               method: str, margin: float = 0.0, better: str = "higher", level: float = 0.95) -> str:
        """Record a claim whose interval was found elsewhere (a paired bootstrap over test items, the
        confidence interval of a fitted slope): ``diff`` is the estimate signed so that a positive value
        favours ours, ``ci`` = [lo, hi] its interval at ``level`` over ``n`` items, ``method`` how it was
        found. The verdict follows the rule of :meth:`compare`."""
        if better not in ("higher", "lower"):
            raise ValueError(f"better must be 'higher' or 'lower', got {better!r}")
        if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
            raise ValueError(f"level must be a number strictly between 0 and 1, got {level!r}")
        if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not math.isfinite(margin):
            raise ValueError(f"margin must be a finite number, got {margin!r}")
        if not isinstance(method, str) or not method:
            raise ValueError(f"method must say how the interval was found (a non-empty string), got {method!r}")
        if isinstance(n, bool) or not isinstance(n, int) or n < 2:
            raise ValueError(f"n must be the number of items (an int >= 2) the interval rests on, got {n!r}")
        bounds = _finite_series("ci", ci)
        if len(bounds) != 2 or bounds[0] > bounds[1]:
            raise ValueError(f"ci must be [low, high] with low <= high, got {list(ci)!r}")
        lo, hi = bounds
        d = float(_finite_number("diff", diff))
        if not lo <= d <= hi:
            raise ValueError(f"diff {d} lies outside its interval [{lo}, {hi}]")
        v = _three_way(lo, hi, margin)
        self.claims.append(PairedClaim(claim=claim, ours=float(_finite_number("ours", ours)),
                                       baseline=float(_finite_number("baseline", baseline)), holds=_HOLDS[v], n=n,
                                       better=better, margin=float(margin), level=float(level), diff=d,
                                       ci=[lo, hi], verdict=v, method=method))
        return v

    def table(self, title: str, headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
        def cell(v: Any) -> str:
            return f"{v:.4g}" if isinstance(v, float) else str(v)

        lines = [f"### {title}", "", "| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
        lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
        self.sections.append("\n".join(lines))

    def text(self, markdown: str) -> None:
        self.sections.append(markdown.strip())

    def figure(self, fig, name: str, caption: str = "") -> Path:
        """Save a matplotlib figure as ``name``.png (atomically) and reference it in the report."""
        if not name.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"figure name must be letters, digits, '-' or '_', got {name!r}")
        path = self.out_dir / f"{name}.png"
        with atomic_open(path) as fh:
            fig.savefig(fh, format="png", dpi=110, bbox_inches="tight")
        self.figures.append(path.name)
        self.sections.append(f"![{caption or name}]({path.name})" + (f"\n\n*{caption}*" if caption else ""))
        return path

    # --- progress ----------------------------------------------------------------------
    def track(self, iterable: Iterable[T], description: str, total: int | None = None) -> Iterator[T]:
        if total is None and hasattr(iterable, "__len__"):
            total = len(iterable)  # type: ignore[arg-type]
        if self._progress is None:
            yield from iterable
            return
        task = self._progress.add_task(f"{self.slug}: {description}", total=total)
        try:
            for item in iterable:
                yield item
                self._progress.advance(task)
        finally:
            self._progress.remove_task(task)

    # --- sweeps as tasks ------------------------------------------------------------------
    def map(self, fn: Callable[[Any], dict], tasks: Iterable[Any], description: str = "tasks") -> list[dict]:
        """Run ``fn(task)`` for every task; return the results in task order.

        ``fn`` is a module-level function (worker processes import it by name); each task is a
        small record of None, bool, int, float, str, tuples, lists, dicts and dataclasses of
        these, and ``fn`` returns a JSON-able dict (it comes back through JSON in every mode,
        cached or not: tuples become lists, NumPy scalars Python numbers).

        Each task runs with ``random``, NumPy and torch seeded from (run seed, task record):
        its result does not depend on where it runs, on the number of workers or on the
        order of completion (``task_seed()`` inside ``fn`` gives that seed). Where the tasks run
        is the command line's choice (``--jobs``, ``--scheduler``), never the experiment's.

        Finished tasks are cached one file each; with ``--resume`` they are not run again. A
        task that raises does not stop the others: once all have finished, the first failure
        (in task order) is raised again, with a note naming the task and its traceback file.
        """
        tasks = list(tasks)
        check_task_function(fn)
        name = function_name(fn)
        keys = []
        for i, task in enumerate(tasks):
            keys.append(task_key(task))  # TypeError for a record that is not plain data
            check_picklable(task, f"task {i} ({task!r})")
        places: dict[str, list[int]] = {}  # one run per distinct record, whatever the repeats
        for i, key in enumerate(keys):
            places.setdefault(key, []).append(i)
        results: list[dict | None] = [None] * len(tasks)
        self.task_stats["tasks"] += len(places)
        bar = self._progress.add_task(f"{self.slug}: {description}", total=len(tasks)) if self._progress else None

        def finish(key: str, result: dict) -> None:
            for j, i in enumerate(places[key]):
                results[i] = result if j == 0 else json.loads(json.dumps(result))  # no shared mutable results
            if bar is not None:
                self._progress.advance(bar, len(places[key]))

        try:
            todo = []
            for key, (i, *_) in places.items():
                entry = self._cache.load(name, key) if self._cache is not None else None
                if entry is None:
                    todo.append(i)
                else:
                    self.task_stats["reused"] += 1
                    self.task_stats["task_wall_s"] += float(entry.get("wall_s", 0.0))
                    finish(key, entry["result"])
            calls = [(tasks[i], task_seed_for(self.seed, keys[i])) for i in todo]
            failures = []
            for out in self._runner.run(fn, calls):
                i = todo[out.index]
                if out.error is not None:
                    where = self._cache.record_failure(name, keys[i], tasks[i], out.trace) if self._cache else None
                    failures.append((i, out.error, where))
                    continue
                if self._cache is not None:
                    self._cache.store(name, keys[i], tasks[i], calls[out.index][1], out.result_json, out.wall)
                self.task_stats["ran"] += 1
                self.task_stats["task_wall_s"] += out.wall
                finish(keys[i], json.loads(out.result_json))
        finally:
            if bar is not None:
                self._progress.remove_task(bar)
        if failures:
            failures.sort(key=lambda f: f[0])
            i, exc, where = failures[0]
            done = sum(r is not None for r in results)
            exc.add_note(
                f"task {i} of {len(tasks)} in {self.slug}'s {description!r} failed: {fn.__qualname__}({tasks[i]!r})"
                + (f"; traceback in {where}" if where else "")
                + (f"; {len(failures) - 1} other task(s) failed too" if len(failures) > 1 else "")
                + f"; {done} finished" + (f" and are cached in {self._cache.root} (--resume runs only the rest)"
                                          if self._cache else "")
            )
            raise exc
        return results  # type: ignore[return-value]


def _git_commit() -> str | None:
    try:
        here = Path(__file__).resolve().parent
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or None if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def environment() -> dict[str, Any]:
    import numpy

    env: dict[str, Any] = {
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "git_commit": _git_commit(),
    }
    try:
        import torch

        env["torch"] = torch.__version__
        env["torch_threads"] = torch.get_num_threads()
        # the SIMD level decides which BLAS / ATen kernels run, hence the summation order: two machines
        # with different levels give different low bits, and a training run amplifies them
        env["torch_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    except ImportError:  # pragma: no cover - torch is a hard dependency
        env["torch"] = None
    env["cpu"] = _cpu_model()
    env["packages"] = _loaded_package_versions()
    from ._pinning import pinned_record

    env["numerics"] = pinned_record()
    return env


_TRACKED_PACKAGES = ("transformers", "peft", "botorch", "gpytorch", "scikit-learn", "scipy", "torchao", "llmcompressor",
                     "dagma", "gcastle", "pyepo", "sentence-transformers", "qiskit", "torchjd", "pymoo", "geoopt",
                     "elkai", "pyvrp", "ortools")


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _loaded_package_versions() -> dict[str, str]:
    """Versions of the third-party packages a run used (those imported by now), for comparing two runs."""
    from importlib import metadata

    modules = {"scikit-learn": "sklearn", "gcastle": "castle", "sentence-transformers": "sentence_transformers"}
    out = {}
    for dist in _TRACKED_PACKAGES:
        if modules.get(dist, dist) in sys.modules:
            try:
                out[dist] = metadata.version(dist)
            except metadata.PackageNotFoundError:
                pass
    return out


def check_writable(out: Path) -> None:
    """Fail before any work if ``out`` cannot hold results."""
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".write-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise PermissionError(f"output directory {out} is not writable: {exc.strerror or exc}") from None


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % 2**32)
    except ImportError:  # pragma: no cover
        pass
    import torch

    torch.manual_seed(seed)


def run_experiment(exp: Experiment, out: Path, seed: int = 0, quick: bool = False, progress=None, *,
                   jobs: int | None = None, scheduler: str | None = None, resume: bool = False) -> dict[str, Any]:
    """Run one experiment and write ``out/slug/{results.json, report.md, *.png}``.

    Returns the results dict. Everything is written into a temporary folder beside
    ``out/slug`` that replaces it in one move once the run has finished, so the folder
    always holds one complete run: a failed or interrupted run leaves the previous
    results as they were (exceptions from the experiment propagate).

    The tasks of ``RunContext.map`` run in this process (default), on ``jobs`` local worker
    processes, or on the Dask scheduler at ``scheduler``; the metrics are the same in every
    mode. Finished tasks are cached in ``out/slug.tasks/``, beside the run folder so that
    they outlive an interrupted run; ``resume`` reuses the tasks of an earlier run with the
    same seed, size and package version, and otherwise an existing cache is moved aside
    (renamed ``slug.tasks.moved-TIMESTAMP``), never mixed with this run's.
    """
    from .. import __version__

    run_dir = Path(out) / exp.slug
    check_writable(Path(out))
    quiet_third_party()
    fn = exp.load()
    say = progress.console.print if progress is not None and hasattr(progress, "console") else (lambda msg: None)
    runner = make_runner(jobs, scheduler)
    # OUT/SLUG.error.txt says that the last attempt failed or was stopped (the report lists it so);
    # a finished run removes it
    attempt = Path(out) / f"{exp.slug}.error.txt"
    try:
        cache = TaskCache(Path(out) / f"{exp.slug}.tasks", slug=exp.slug, seed=seed, quick=quick, version=__version__,
                          resume=resume, say=say)
        with atomic_directory(run_dir, overwrite=True) as tmp_dir:
            ctx = RunContext(exp.slug, tmp_dir, seed=seed, quick=quick, progress=progress, runner=runner, cache=cache)
            _seed_everything(seed)
            start = time.perf_counter()
            fn(ctx)
            wall = time.perf_counter() - start
            results = _results(exp, ctx, seed, quick, wall, runner)
            atomic_write_text(tmp_dir / "report.md", render_markdown(results, ctx.sections))
            atomic_write_text(tmp_dir / "results.json", json.dumps(results, indent=2, allow_nan=False) + "\n")
    except BaseException as exc:
        stopped = isinstance(exc, KeyboardInterrupt)
        try:
            atomic_write_text(attempt, ("stopped" if stopped else "failed") + f" at {time.strftime('%Y-%m-%d %H:%M:%S')}\n\n"
                              + "".join(traceback.format_exception(exc)))
        except OSError:
            pass  # the run's own error is the one to report
        raise
    finally:
        runner.close()
    attempt.unlink(missing_ok=True)
    if ctx.task_stats["reused"]:
        say(f"  {ctx.task_stats['reused']} of {ctx.task_stats['tasks']} tasks reused from {cache.root}")
    return results


def _results(exp: Experiment, ctx: RunContext, seed: int, quick: bool, wall: float, runner) -> dict[str, Any]:
    env = environment()
    if ctx.task_stats["tasks"]:  # where the sweep's tasks ran, how many came from the cache, their summed time
        env["tasks"] = {"executor": runner.name} | {k: round(v, 3) if isinstance(v, float) else v
                                                     for k, v in ctx.task_stats.items()}
    return {
        "slug": exp.slug,
        "paper": exp.paper,
        "quick": quick,
        "seed": seed,
        "wall_s": round(wall, 3),
        "env": env,
        "config": _check_json_value("config", ctx.config),
        "metrics": ctx.metrics,
        "claims": [vars(c) for c in ctx.claims],
    }


def _num(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.4g}"


def verdict_text(claim: dict) -> str:
    """The verdict, and for a claim decided over seeds (or runs, or instances) its mean paired difference
    (positive favours ours) with its interval and the number of pairs: 'holds (+0.0123, 95% CI [0.004, 0.0206],
    n = 3)'."""
    v = verdict(claim)
    if claim.get("ci") is None:
        if claim.get("n_capped"):
            return v + f" ({claim['n_capped']} of {claim['n'] + claim['n_capped']} pairs capped on both sides)"
        return v
    lo, hi = claim["ci"]
    capped = f", {claim['n_capped']} capped pairs left out" if claim.get("n_capped") else ""
    margin = f", margin {claim['margin']:.4g}" if claim.get("margin") else ""
    method = claim.get("method", "paired t")
    how = "" if method == "paired t" else f", {method}"
    return (f"{v} ({claim['diff']:+.4g}, {100 * claim['level']:g}% CI [{lo:.4g}, {hi:.4g}], "
            f"n = {claim['n']}{capped}{margin}{how})")


def render_markdown(results: dict[str, Any], sections: Sequence[str]) -> str:
    counts = verdict_counts(results["claims"])
    lines = [
        f"# {results['slug']}: {results['paper']}",
        "",
        f"Seed {results['seed']}, {'quick' if results['quick'] else 'full'} size, "
        f"{results['wall_s']:.1f} s on {results['env'].get('cpu_count')} CPUs "
        f"(torch {results['env'].get('torch')}, commit {results['env'].get('git_commit') or 'n/a'}).",
        "",
        "## Claims",
        "",
        ", ".join(f"{k}: {v}" for k, v in counts.items()) + ". A claim decided over seeds shows the mean "
        "difference ours vs baseline (positive favours ours) and its confidence interval; it is inconclusive "
        "when the interval contains zero (or the stated margin).",
        "",
        "| claim | ours | baseline | verdict |",
        "|---|---|---|---|",
    ]
    for c in results["claims"]:
        v = verdict_text(c)
        if verdict(c) == "does not hold":
            v = f"**{v}**"
        lines.append(f"| {c['claim']} | {_num(c['ours'])} | {_num(c['baseline'])} | {v} |")
    if not results["claims"]:
        lines.append("| (no claim tested) | | | |")
    lines += ["", "## Results", ""]
    for s in sections:
        lines += [s, ""]
    return "\n".join(lines)


def png_data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")
