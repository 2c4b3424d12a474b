"""Pin the numerics of a run, so that a quick run gives the same numbers on another x86-64 machine.

Why runs differ between machines (measured; docs/reproducibility.md has the numbers): the CPU
libraries choose their kernels, hence their summation order, from the CPU they find.

* ATen's vectorized kernels (softmax, exp, GELU, reductions) are compiled for DEFAULT, AVX2 and
  AVX512 and dispatched on the CPU's best level; ``ATEN_CPU_CAPABILITY`` caps it. Read at the first
  dispatch, so setting it after ``import torch`` but before the first kernel still works.
* oneDNN (torch's ``mkldnn``: linear layers, GELU, every bf16 matmul) picks its kernels by ISA;
  ``ONEDNN_MAX_CPU_ISA`` caps it (read when oneDNN first runs).
* MKL (torch's BLAS/LAPACK) dispatches by ISA and by CPU vendor; ``MKL_CBWR`` (conditional
  numerical reproducibility) fixes its code branch, cache sizes and reduction order (read when MKL
  initializes, at its first call).
* NumPy's and SciPy's OpenBLAS choose a core type (Haswell, SkylakeX, Zen ...) when the library
  loads; ``OPENBLAS_CORETYPE`` fixes it, but only if set before NumPy / SciPy are imported.
* Thread counts: ATen's parallel reductions split the work by thread, MKL its GEMMs; a different
  number of threads sums in a different order.

``pin_numerics()`` sets all of these to the AVX2 level (which every x86-64 CPU of the last ten years
has, and whose kernels cost nothing measurable against AVX512 here, except oneDNN's bf16 matmuls) and
a fixed thread count, and returns what it pinned; :func:`pinned_record` gives that record again for
``results.json``'s ``env``. ``NEURIPS26_THREADS=N`` changes the thread count; ``NEURIPS26_PIN=0`` in the environment turns pinning off (the machine's
fastest kernels, results that may differ in the low bits from the committed references).

What cannot be pinned from here: a different CPU vendor's MKL path (MKL promises equal results
across Intel CPUs of a branch; on other vendors only its slow ``COMPATIBLE`` branch is promised), a
different torch / NumPy / OpenBLAS / MKL version, a GPU (``torch.use_deterministic_algorithms`` makes
a CUDA run repeatable on one GPU model, not equal to a CPU run), and a Python version (moe-mxfp4
trains on the standard library's docstrings, which change between Python releases).
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["PIN_ENV", "DEFAULT_THREADS", "default_threads", "pin_numerics", "pinned_environ", "pinned_record", "pinning_enabled"]

#: environment variables that fix the kernels' ISA (each read lazily, at its library's first use)
PIN_ENV = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "MKL_CBWR": "AVX2",
    "OPENBLAS_CORETYPE": "Haswell",
}
#: the thread count of quick runs (the project's reference machine has 2 cores)
DEFAULT_THREADS = 2
_THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")

_record: dict[str, Any] | None = None


def pinning_enabled() -> bool:
    """False when the environment says ``NEURIPS26_PIN=0`` (or ``false`` / ``no`` / ``off``)."""
    return os.environ.get("NEURIPS26_PIN", "1").strip().lower() not in ("0", "false", "no", "off")


def _has_avx2() -> bool:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return " avx2 " in f" {line.split(':', 1)[1].strip()} " and " fma " in f" {line} "
    except OSError:
        pass
    import platform

    # no /proc/cpuinfo (macOS, Windows): pin only on x86-64, where torch falls back by itself if AVX2 is missing
    return platform.machine().lower() in ("x86_64", "amd64")


def _openblas_coretypes() -> list[str]:
    """The core type each loaded OpenBLAS runs (NumPy's, SciPy's), as threadpoolctl reports it."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        return []
    return sorted({str(i.get("architecture")) for i in threadpool_info() if i.get("internal_api") == "openblas"})


def default_threads() -> int:
    """The thread count of a pinned run: ``NEURIPS26_THREADS`` if set (a test worker among two on two
    cores sets 1), else :data:`DEFAULT_THREADS`."""
    raw = os.environ.get("NEURIPS26_THREADS", "").strip()
    if not raw:
        return DEFAULT_THREADS
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"NEURIPS26_THREADS must be an integer >= 1, got {raw!r}")
    return int(raw)


def pin_numerics(threads: int | None | str = "default", *, isa: bool = True) -> dict[str, Any]:
    """Pin what decides a run's low bits, and return the record of what was pinned.

    Call it before the first torch / NumPy kernel of the process (the top of ``neurips26 run``, a
    worker's initializer): ``threads`` torch / OpenMP / MKL / OpenBLAS threads (None: leave them; by
    default :func:`default_threads`: ``NEURIPS26_THREADS`` or 2),
    ``isa``: the environment of :data:`PIN_ENV` (kernels at the AVX2 level), on an x86-64 CPU with
    AVX2 only. On CUDA, ``torch.use_deterministic_algorithms(True)`` with cuBLAS's fixed workspace.
    With ``NEURIPS26_PIN=0`` in the environment nothing is pinned and the record says so.

    The record: ``pinned`` (bool), ``threads``, ``env`` (the variables set), ``torch_cpu_capability``
    and ``openblas_coretype`` (what the libraries run now: a variable set too late shows here as not
    applied), ``deterministic_algorithms``, and ``not_applied`` (what could not be pinned, and why).
    """
    global _record
    if isinstance(threads, str) and threads == "default":
        threads = default_threads()
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be an int >= 1 or None (leave the thread count alone), got {threads!r}")
    record: dict[str, Any] = {"pinned": pinning_enabled(), "threads": None, "env": {}, "not_applied": []}
    numpy_was_loaded = "numpy" in sys.modules or "scipy" in sys.modules
    if record["pinned"]:
        if isa and _has_avx2():
            for var, value in PIN_ENV.items():
                os.environ[var] = value
                record["env"][var] = value
        elif isa:
            record["not_applied"].append("ISA: this CPU has no AVX2 (or is not x86-64); its kernels run unpinned")
        if threads is not None:
            for var in _THREAD_VARS:
                os.environ[var] = str(threads)
                record["env"][var] = str(threads)
    import torch

    if record["pinned"] and threads is not None:
        torch.set_num_threads(threads)
        try:
            from threadpoolctl import threadpool_limits

            threadpool_limits(limits=threads)  # libraries loaded before this call
        except ImportError:  # pragma: no cover
            pass
    record["threads"] = torch.get_num_threads()
    # the first query fixes ATen's dispatch level for the process, from the environment set above
    record["torch_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    cores = _openblas_coretypes()
    if not cores:
        import numpy  # noqa: F401  (loads OpenBLAS, now under OPENBLAS_CORETYPE)

        cores = _openblas_coretypes()
    record["openblas_coretype"] = ",".join(cores) or None
    wanted = record["env"].get("OPENBLAS_CORETYPE")
    if wanted and cores and any(c.lower() != wanted.lower() for c in cores):
        record["not_applied"].append(
            f"OPENBLAS_CORETYPE: NumPy/SciPy were imported before the pin and run {','.join(cores)}"
            if numpy_was_loaded else f"OPENBLAS_CORETYPE: OpenBLAS runs {','.join(cores)}, not {wanted}")
    wanted_cap = record["env"].get("ATEN_CPU_CAPABILITY")
    if wanted_cap and record["torch_cpu_capability"].lower() != wanted_cap:
        record["not_applied"].append(f"ATEN_CPU_CAPABILITY: ATen dispatched to {record['torch_cpu_capability']} "
                                     "before the pin (or the CPU lacks the level)")
    record["deterministic_algorithms"] = False
    if record["pinned"] and torch.cuda.is_available():
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # read at cuBLAS's first handle
        record["env"]["CUBLAS_WORKSPACE_CONFIG"] = os.environ["CUBLAS_WORKSPACE_CONFIG"]
        torch.use_deterministic_algorithms(True, warn_only=True)
        record["deterministic_algorithms"] = True
    _record = record
    return dict(record, env=dict(record["env"]), not_applied=list(record["not_applied"]))


def pinned_environ(threads: int = DEFAULT_THREADS) -> dict[str, str]:
    """The variables :func:`pin_numerics` sets, for the environment of a child process (a script that
    starts ``neurips26 run``, a Dask worker): set before the process starts, every one of them applies,
    OpenBLAS's core type included. Empty where pinning is off (``NEURIPS26_PIN=0``); no ISA variables on
    a CPU without AVX2."""
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be an int >= 1, got {threads!r}")
    if not pinning_enabled():
        return {}
    return (dict(PIN_ENV) if _has_avx2() else {}) | {var: str(threads) for var in _THREAD_VARS}


def pinned_record() -> dict[str, Any]:
    """What :func:`pin_numerics` pinned in this process (``{"pinned": False, ...}`` if it was not called),
    with the environment's values of the variables it sets (a worker inherits them from its driver)."""
    if _record is not None:
        return dict(_record, env=dict(_record["env"]), not_applied=list(_record["not_applied"]))
    env = {v: os.environ[v] for v in (*PIN_ENV, *_THREAD_VARS) if v in os.environ}
    return {"pinned": False, "threads": None, "env": env, "not_applied": ["pin_numerics() was not called in this process"]}
