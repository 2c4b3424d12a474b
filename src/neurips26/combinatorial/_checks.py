"""Checks of the combinatorial field's arrays at its entry points (states, labels), with
messages that name the argument; the scalar settings go through :mod:`neurips26._checks`."""

from __future__ import annotations

import numpy as np

__all__ = ["check_states", "check_feasible"]


def check_states(Y: np.ndarray, n_vars: int, name: str) -> np.ndarray:
    """Y itself, once it is 2-D with ``n_vars`` columns (ValueError naming ``name``)."""
    if Y.ndim != 2 or Y.shape[1] != n_vars:
        raise ValueError(f"{name} must have shape (chains, {n_vars}), got {Y.shape}")
    return Y


def check_feasible(problem, Y: np.ndarray, name: str) -> None:
    """Raise a ValueError naming the first infeasible row of Y and the constraint it
    breaks (the problem's ``violation``, where it has one)."""
    feasible = np.asarray(problem.is_feasible(Y))
    if not np.all(feasible):
        row = int(np.nonzero(~feasible)[0][0])
        explain = getattr(problem, "violation", None)
        why = explain(Y[row]) if explain is not None else None
        raise ValueError(f"{name} row {row} is not a feasible state of {problem!r}"
                         + (f": {why}" if why else ""))
