"""Small C kernels, built on first use with the system C compiler and loaded with ctypes.

A kernel is a C99 source string. :func:`load` compiles it once per source, compiler, flags
and CPU (``-O3 -march=native``, on x86 with ``-mprefer-vector-width=512``; each set the
compiler refuses falls back to the next, down to ``-O3``) into
``cache_root()/native/NAME-KEY.so`` (written to a temporary file and renamed, so parallel
processes never load half a library) and returns the ``ctypes.CDLL``, or None where no
compiler works (no ``cc``, a failed build, ``NEURIPS26_NATIVE=0``; a flag set the compiler
refused is remembered as ``NAME-KEY.failed`` beside it and not tried again); callers then take
their pure-torch path, which gives the same results. :func:`why_unavailable` says why.

ctypes releases the GIL for the duration of a call, so :func:`run_chunks` splits one call
over ``torch.get_num_threads()`` threads, each on its own contiguous range. The threads are
started per call (tens of microseconds, against milliseconds of work) rather than pooled: no
pool state to survive a fork, to resize under a running call or to deadlock a nested call.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Callable

import torch

from ._cache import cache_root

__all__ = ["load", "why_unavailable", "run_chunks"]

# gcc and clang vectorize with 256-bit registers even where -march=native enables AVX-512; on
# the MXFP4 quantizer's bfloat16 pass 512-bit lanes were twice as fast (one thread, 16M elements:
# 20 ms -> 9.6 ms; float32 14 -> 13 ms), same bits. Asked for on x86 only, where the option exists.
_WIDE = ("-mprefer-vector-width=512",) if platform.machine().lower() in ("x86_64", "amd64") else ()
_FLAG_SETS = tuple(dict.fromkeys((("-O3", "-march=native", *_WIDE), ("-O3", "-march=native"), ("-O3",))))
_LOCK = threading.Lock()  # guards the two dicts only; a build runs outside it (a fork mid-build must not inherit it held)
_LOADED: dict[str, ctypes.CDLL | None] = {}
_ERRORS: dict[str, str] = {}


def _compiler() -> list[str] | None:
    """The C compiler's command: ``$CC`` (which may carry arguments, e.g. ``ccache gcc``), else cc, gcc, clang."""
    env = shlex.split(os.environ.get("CC", ""))
    for cand in ([env] if env else []) + [["cc"], ["gcc"], ["clang"]]:
        if shutil.which(cand[0]):
            return [shutil.which(cand[0]), *cand[1:]]
    return None


def _compiler_version(cc: list[str]) -> str:
    try:
        proc = subprocess.run([*cc, "--version"], capture_output=True, text=True, errors="replace", timeout=30)
        return proc.stdout.strip().splitlines()[0] if proc.stdout.strip() else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def _cpu_signature() -> str:
    """What -march=native depends on: the machine and, on Linux, the CPU's feature flags."""
    try:
        with open("/proc/cpuinfo") as fh:
            flags = next((line for line in fh if line.startswith(("flags", "Features"))), "")
    except OSError:
        flags = ""
    return f"{platform.machine()}|{platform.processor()}|{flags.strip()}"


def _build(name: str, source: str, cc: list[str]) -> tuple[ctypes.CDLL | None, str]:
    errors = []
    ident = [source, *cc, _compiler_version(cc), _cpu_signature()]
    for flags in _FLAG_SETS:
        key = hashlib.sha256("\0".join([*ident, *flags]).encode()).hexdigest()[:20]
        target = cache_root() / "native" / f"{name}-{key}.so"
        failed = target.with_suffix(".failed")  # this compiler refused this source with these flags before
        if not target.is_file() and failed.is_file():
            errors.append(f"{' '.join(cc)} {' '.join(flags)} (failed before; delete {failed} to retry): "
                          f"{failed.read_text(errors='replace')}")
            continue
        if not target.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
                src, out = Path(tmp) / f"{name}.c", Path(tmp) / f"{name}.so"
                src.write_text(source)
                proc = subprocess.run([*cc, *flags, "-std=c99", "-shared", "-fPIC", str(src), "-o", str(out)],
                                      capture_output=True, text=True, errors="replace", timeout=120)
                if proc.returncode != 0:
                    why = proc.stderr.strip()[-300:]
                    errors.append(f"{' '.join(cc)} {' '.join(flags)}: {why}")
                    # remembered, so that each new process does not pay the failed compile again (the
                    # key holds the compiler's version: a new compiler tries afresh)
                    marker = Path(tmp) / "failed"
                    marker.write_text(why)
                    os.replace(marker, failed)
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
        if name in _LOADED:
            return _LOADED[name]
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
    with _LOCK:  # two threads may both have built it (same file): the first result stays
        if name not in _LOADED:
            _LOADED[name], _ERRORS[name] = lib, err
        return _LOADED[name]


def why_unavailable(name: str) -> str:
    """Why :func:`load` gave None for ``name`` ('' if it loaded or was never asked for)."""
    return _ERRORS.get(name, "")


def run_chunks(call: Callable[[int, int], None], n: int, min_chunk: int) -> None:
    """``call(start, count)`` over [0, n) in at most ``torch.get_num_threads()`` contiguous
    ranges of at least ``min_chunk`` items, in parallel threads (``call`` must release the
    GIL, as a ctypes call does); the calling thread takes the first range. Returns only once
    every range has finished, even when interrupted (the ranges write into the caller's
    buffers, which must outlive them); then raises the interruption or the first error."""
    parts = max(1, min(torch.get_num_threads(), n // max(1, min_chunk)))
    if parts == 1:
        call(0, n)
        return
    bounds = [n * k // parts for k in range(parts + 1)]
    errors: list[BaseException | None] = [None] * parts

    def work(k: int) -> None:
        try:
            call(bounds[k], bounds[k + 1] - bounds[k])
        except BaseException as err:  # reported by the caller, after every range has finished
            errors[k] = err

    threads = [threading.Thread(target=work, args=(k,), name=f"neurips26-native-{k}", daemon=True)
               for k in range(1, parts)]
    interrupted = None
    try:
        for t in threads:
            t.start()
        work(0)
    except BaseException as err:  # e.g. KeyboardInterrupt while starting the threads
        interrupted = err
    finally:
        for t in threads:
            while t.is_alive():
                try:
                    t.join()
                except BaseException as err:  # an interruption must not free buffers in use
                    interrupted = interrupted or err
    if interrupted is not None:
        raise interrupted
    for err in errors:
        if err is not None:
            raise err
