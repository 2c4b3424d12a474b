"""Timing shared by the benchmark scripts (run as `python benchmarks/NAME.py`, so this
module is importable beside them)."""

from __future__ import annotations

import time


def best_of(fn, repeats: int = 3) -> float:
    """The best wall time of ``repeats`` calls of ``fn``, after one warm-up call."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best
