"""Validation of the public entry points' arguments (constructors, ``run_doco``): each check
names the argument and says what is accepted. Called once at the boundary, never per round."""

from __future__ import annotations

import numpy as np

from .._checks import check_int, check_real  # the scalar checks every field shares

__all__ = ["check_int", "check_real", "check_data", "nonfinite_where"]


def nonfinite_where(a: np.ndarray) -> str:
    """'NaN at index (i, j, ...)' or 'inf at ...' for the first non-finite entry of a."""
    index = tuple(int(i) for i in np.argwhere(~np.isfinite(a))[0])
    kind = "NaN" if np.isnan(a[index]) else "inf"
    return f"{kind} at index {index}"


def check_data(name: str, value, ndim: int, layout: str) -> np.ndarray:
    """A real, finite, non-empty array of ``ndim`` dimensions (``layout`` names them, as
    "(T, n, d)"). An ndarray of a real dtype comes back as it is (no copy, no cast)."""
    a = np.asarray(value)
    if a.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be a real numeric array of shape {layout}, got dtype {a.dtype}")
    if a.ndim != ndim:
        raise ValueError(f"{name} must have shape {layout}, got shape {a.shape}")
    if a.size == 0:
        raise ValueError(f"{name} is empty (shape {a.shape}); every axis of {layout} needs length >= 1")
    if a.dtype.kind == "f" and not np.isfinite(a).all():
        raise ValueError(f"{name} has NaN or inf entries ({nonfinite_where(a)}); the data must be finite")
    return a
