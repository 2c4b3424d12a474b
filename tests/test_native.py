"""neurips26._native: C kernels built once per source and CPU, cached atomically, refused with a reason
where no compiler works; run_chunks covers a range exactly once over threads, also in a forked child."""

import contextlib
import multiprocessing
import shutil
import threading

import pytest

from neurips26 import _native

ADD = "int add_one(int v) { return v + 1; }\n"
needs_cc = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NEURIPS26_CACHE", str(tmp_path))
    monkeypatch.delenv("NEURIPS26_NATIVE", raising=False)
    monkeypatch.setattr(_native, "_LOADED", {})
    monkeypatch.setattr(_native, "_ERRORS", {})
    return tmp_path


@contextlib.contextmanager
def forbid_compiles(why: str):
    """Fail the test if a build runs inside the block (other subprocesses, e.g. cc --version, pass)."""
    run = _native.subprocess.run

    def guarded(cmd, *a, **k):
        if "-shared" in cmd:
            pytest.fail(why)
        return run(cmd, *a, **k)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_native.subprocess, "run", guarded)
        yield


@needs_cc
def test_a_kernel_is_built_once_and_served_from_the_cache(cache, monkeypatch):
    lib = _native.load("t_add", ADD)
    assert lib is not None and lib.add_one(41) == 42 and _native.why_unavailable("t_add") == ""
    built = sorted((cache / "native").glob("t_add-*.so"))
    assert len(built) == 1 and not list((cache / "native").glob("tmp*"))  # no temporary left behind
    assert _native.load("t_add", ADD) is lib  # once per process
    monkeypatch.setattr(_native, "_LOADED", {})
    with forbid_compiles("rebuilt a cached kernel"):
        assert _native.load("t_add", ADD).add_one(1) == 2  # a new process reuses the file


@needs_cc
def test_a_changed_source_gets_its_own_file(cache):
    _native.load("t_two", ADD)
    _native.load("t_two2", ADD.replace("v + 1", "v + 2"))
    names = {p.name.split("-")[1] for p in (cache / "native").glob("*.so")}
    assert len(names) == 2


def test_unavailable_kernels_say_why(cache, monkeypatch):
    monkeypatch.setenv("NEURIPS26_NATIVE", "0")
    assert _native.load("t_off", ADD) is None and "NEURIPS26_NATIVE=0" in _native.why_unavailable("t_off")
    monkeypatch.delenv("NEURIPS26_NATIVE")
    monkeypatch.setattr(_native, "_compiler", lambda: None)
    assert _native.load("t_nocc", ADD) is None and "no C compiler" in _native.why_unavailable("t_nocc")


@needs_cc
def test_a_failed_build_is_reported_remembered_and_leaves_no_library(cache, monkeypatch):
    assert _native.load("t_bad", "int broken( { return ; }\n") is None
    why = _native.why_unavailable("t_bad")
    assert "error" in why and "-O3" in why
    left = list((cache / "native").glob("t_bad*"))
    assert left and all(p.suffix == ".failed" for p in left)  # no library, no temporary: one marker per flag set
    assert not list((cache / "native").glob("tmp*"))
    monkeypatch.setattr(_native, "_LOADED", {})  # a new process: the failure is not compiled again
    with forbid_compiles("recompiled a source the compiler refused before"):
        assert _native.load("t_bad", "int broken( { return ; }\n") is None
    assert "failed before" in _native.why_unavailable("t_bad") and "error" in _native.why_unavailable("t_bad")
    for p in left:  # deleting the markers retries the build
        p.unlink()
    monkeypatch.setattr(_native, "_LOADED", {})
    assert _native.load("t_bad", "int broken( { return ; }\n") is None and "failed before" not in _native.why_unavailable("t_bad")


def test_run_chunks_covers_the_range_once_in_parallel():
    parts, lock = [], threading.Lock()
    barrier = threading.Barrier(3, timeout=10)  # passes only if the three ranges run at the same time

    def call(start, count):
        barrier.wait()
        with lock:
            parts.append((start, count))

    import torch
    old = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        _native.run_chunks(call, 1000, 100)
        assert sorted(parts) == [(0, 333), (333, 333), (666, 334)]
        parts.clear()
        _native.run_chunks(lambda s, c: parts.append((s, c)), 150, 100)  # too small to split
        assert parts == [(0, 150)]

        def boom(start, count):
            raise OSError(f"chunk {start}")
        with pytest.raises(OSError, match="chunk"):
            _native.run_chunks(boom, 1000, 100)
    finally:
        torch.set_num_threads(old)


def _child(q):
    import torch
    torch.set_num_threads(2)
    out = []
    _native.run_chunks(lambda s, c: out.append((s, c)), 100, 10)
    q.put(sorted(out))


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="no fork")
def test_run_chunks_works_in_a_forked_child():
    import torch
    old = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        _native.run_chunks(lambda s, c: None, 100, 10)  # the parent's pool exists before the fork
    finally:
        torch.set_num_threads(old)
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(q,))
    p.start()
    p.join(60)
    assert p.exitcode == 0, "the child hung or failed"
    assert q.get(timeout=5) == [(0, 50), (50, 50)]


def test_an_interrupted_call_returns_only_after_every_range_finished():
    # the ranges write into the caller's buffers: run_chunks must not unwind while one still runs
    import time

    import torch
    finished = []

    def call(start, count):
        if start == 0:
            raise KeyboardInterrupt  # the calling thread's range, as a Ctrl-C would land
        time.sleep(0.3)
        finished.append(start)

    old = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with pytest.raises(KeyboardInterrupt):
            _native.run_chunks(call, 100, 10)
        assert finished == [50]
    finally:
        torch.set_num_threads(old)


def test_nested_calls_do_not_deadlock():
    import torch
    seen, lock = [], threading.Lock()

    def inner(start, count):
        with lock:
            seen.append((start, count))

    old = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        _native.run_chunks(lambda s, c: _native.run_chunks(inner, 20, 5), 20, 5)
        assert len(seen) == 4
    finally:
        torch.set_num_threads(old)


def test_cc_may_carry_arguments(monkeypatch):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    monkeypatch.setenv("CC", f"{cc} -Wall")
    assert _native._compiler() == [cc, "-Wall"]
