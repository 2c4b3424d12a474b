"""Checks of scalar settings at the public entry points, shared by every field: each names
the argument and says what is accepted. Called once at a boundary (a constructor, ``fit``,
a driver's start), never inside a hot loop. Field-specific checks (arrays of a field's
shapes) stay in the field's own ``_checks`` module and build on these."""

from __future__ import annotations

import math
import numbers

__all__ = ["check_int", "check_real"]


def check_int(name: str, value, minimum: int | None = None) -> int:
    """``value`` as an int: a Python or NumPy integer (not a bool), at least ``minimum``.
    TypeError for a non-integer, ValueError for one out of range."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return value


def check_real(name: str, value, *, low: float | None = None, low_open: bool = False, high: float | None = None,
               high_open: bool = False, finite: bool = True) -> float:
    """``value`` as a float: a real number (not a bool; a one-element tensor is accepted), not
    NaN, finite unless ``finite=False``, within [low, high] (``low_open`` / ``high_open``: the
    bound excluded). TypeError for a non-number, ValueError for NaN, inf or out of range."""
    if isinstance(value, bool) or not (isinstance(value, numbers.Real) or _is_scalar_tensor(value)):
        raise TypeError(f"{name} must be a real number, got {value!r} ({type(value).__name__})")
    v = float(value)
    lo = "" if low is None else (f" > {low:g}" if low_open else f" >= {low:g}")
    hi = "" if high is None else (f" < {high:g}" if high_open else f" <= {high:g}")
    bound = f"{lo}{' and' if lo and hi else ''}{hi}"
    if math.isnan(v) or (finite and math.isinf(v)):
        raise ValueError(f"{name} must be a finite number{bound}, got {v}")
    if (low is not None and (v <= low if low_open else v < low)) or (
            high is not None and (v >= high if high_open else v > high)):
        raise ValueError(f"{name} must be{bound}, got {v}")
    return v


def _is_scalar_tensor(value) -> bool:
    numel = getattr(value, "numel", None)
    return callable(numel) and type(value).__module__.startswith("torch") and numel() == 1
