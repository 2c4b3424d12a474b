"""Small C kernels, built on first use with the system C compiler and loaded with ctypes.

A kernel is a C99 source string. :func:`load` compiles it once per source, compiler, flags
and CPU (``-O3 -march=native``, where the compiler takes it, else ``-O3``) into
``cache_root()/native/NAME-KEY.so`` (written to a temporary file and renamed, so parallel
processes never load half a library) and returns the ``ctypes.CDLL``, or None where no
compiler works (no ``cc``, a failed build, ``NEURIPS26_NATIVE=0``); callers then take
their pure-torch path, which gives the same results. :func:`why_unavailable` says why.

ctypes releases the GIL for the duration of a call, so :func:`run_chunks` splits one call
over ``torch.get_num_threads()`` Python threads, each on its own contiguous range.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

import torch

from ._cache import cache_root

__all__ = ["load", "why_unavailable", "run_chunks"]

_FLAG_SETS = (("-O3", "-march=native"), ("-O3",))
_LOCK = threading.Lock()
_LOADED: dict[str, ctypes.CDLL | None] = {}
_ERRORS: dict[str, str] = {}


def _compiler() -> str | None:
    for cand in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if cand and shutil.which(cand):
            return shutil.which(cand)
    return None


def _cpu_signature() -> str:
    """What -march=native depends on: the machine and, on Linux, the CPU's feature flags."""
    try:
        with open("/proc/cpuinfo") as fh:
            flags = next((line for line in fh if line.startswith(("flags", "Features"))), "")
    except OSError:
        flags = ""
    return f"{platform.machine()}|{platform.processor()}|{flags.strip()}"


def _build(name: str, source: str, cc: str) -> tuple[ctypes.CDLL | None, str]:
    errors = []
    for flags in _FLAG_SETS:
        key = hashlib.sha256("\0".join([source, cc, *flags, _cpu_signature()]).encode()).hexdigest()[:20]
        target = cache_root() / "native" / f"{name}-{key}.so"
        if not target.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
                src, out = Path(tmp) / f"{name}.c", Path(tmp) / f"{name}.so"
                src.write_text(source)
                proc = subprocess.run([cc, *flags, "-std=c99", "-shared", "-fPIC", str(src), "-o", str(out)],
                                      capture_output=True, text=True, timeout=120)
                if proc.returncode != 0:
                    errors.append(f"{cc} {' '.join(flags)}: {proc.stderr.strip()[-300:]}")
                    continue
                os.replace(out, target)  # atomic: a parallel build of the same key writes the same bytes
        try:
            return ctypes.CDLL(str(target)), ""
        except OSError as err:
            errors.append(f"loading {target}: {err}")
    return None, "; ".join(errors)


def load(name: str, source: str) -> ctypes.CDLL | None:
    """The compiled ``source`` as a ``ctypes.CDLL`` (built once, cached), or None where it
    cannot be built here (:func:`why_unavailable` then says why)."""
    with _LOCK:
        if name not in _LOADED:
            lib, err = None, ""
            if os.environ.get("NEURIPS26_NATIVE", "1") == "0":
                err = "disabled by NEURIPS26_NATIVE=0"
            elif (cc := _compiler()) is None:
                err = "no C compiler found (cc, gcc, clang or $CC)"
            else:
                try:
                    lib, err = _build(name, source, cc)
                except (OSError, subprocess.SubprocessError) as exc:
                    lib, err = None, f"{type(exc).__name__}: {exc}"
            _LOADED[name], _ERRORS[name] = lib, err
        return _LOADED[name]


def why_unavailable(name: str) -> str:
    """Why :func:`load` gave None for ``name`` ('' if it loaded or was never asked for)."""
    return _ERRORS.get(name, "")


_POOL: dict = {"pool": None, "pid": None, "size": 0}


def _pool(size: int) -> ThreadPoolExecutor:
    # a forked child inherits the pool object but not its threads: make a fresh one there
    if _POOL["pool"] is None or _POOL["pid"] != os.getpid() or _POOL["size"] < size:
        if _POOL["pool"] is not None and _POOL["pid"] == os.getpid():
            _POOL["pool"].shutdown(wait=False)
        _POOL.update(pool=ThreadPoolExecutor(max_workers=size, thread_name_prefix="neurips26-native"),
                     pid=os.getpid(), size=size)
    return _POOL["pool"]


def run_chunks(call: Callable[[int, int], None], n: int, min_chunk: int) -> None:
    """``call(start, count)`` over [0, n) in at most ``torch.get_num_threads()`` contiguous
    ranges of at least ``min_chunk`` items, in parallel threads (``call`` must release the
    GIL, as a ctypes call does); the first exception is raised."""
    parts = max(1, min(torch.get_num_threads(), n // max(1, min_chunk)))
    if parts == 1:
        call(0, n)
        return
    bounds = [n * k // parts for k in range(parts + 1)]
    with _LOCK:
        pool = _pool(parts)
    futures = [pool.submit(call, a, b - a) for a, b in zip(bounds[:-1], bounds[1:])]
    for f in futures:
        f.result()
