"""Validation of the public entry points' settings (objectives, ``follow_path``, ``DagFlow``):
each check names the argument and says what is accepted. Called once at the boundary, never
inside the path tracer's loop."""

from __future__ import annotations

import numpy as np

from .._checks import check_int, check_real  # the scalar checks every field shares

__all__ = ["check_int", "check_real", "check_square"]


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
