"""Validation of the public entry points' settings (objectives, ``follow_path``, ``DagFlow``):
each check names the argument and says what is accepted. Called once at the boundary, never
inside the path tracer's loop."""

from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = ["check_integer", "check_real", "check_square"]


def check_real(name: str, value, *, positive: bool = False, nonnegative: bool = False, finite: bool = True) -> float:
    """``value`` as a float: a real number (not bool), not NaN, finite unless ``finite=False``,
    and > 0 (``positive``) or >= 0 (``nonnegative``)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r} ({type(value).__name__})")
    value = float(value)
    bound = " > 0" if positive else " >= 0" if nonnegative else ""
    if math.isnan(value) or (finite and math.isinf(value)):
        raise ValueError(f"{name} must be a finite number{bound}, got {value}")
    if (positive and not value > 0) or (nonnegative and not value >= 0):
        raise ValueError(f"{name} must be{bound}, got {value}")
    return value


def check_integer(name: str, value, minimum: int | None = None) -> int:
    """``value`` as an int: Python or numpy integers (not bool), at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_square(name: str, value, d: int | None = None, finite: bool = True) -> np.ndarray:
    """A real (d, d) array (any d >= 1 when ``d`` is None), finite unless ``finite=False``."""
    a = np.asarray(value)
    if a.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be a real square matrix, got dtype {a.dtype}")
    if a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape[0] == 0 or (d is not None and a.shape[0] != d):
        want = f"({d}, {d})" if d is not None else "a non-empty square (d, d) matrix"
        raise ValueError(f"{name} must be {want}, got shape {a.shape}")
    if finite and a.dtype.kind == "f" and not np.isfinite(a).all():
        i, j = np.argwhere(~np.isfinite(a))[0]
        raise ValueError(f"{name} has NaN or inf entries (first at [{i}, {j}]: {a[i, j]})")
    return a
