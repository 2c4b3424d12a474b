"""Argument checks at the bayesopt field's entry points: every message names the argument
and says what is accepted. Used in constructors, ``fit`` and ``propose`` calls, never per
step of an inner loop."""

from __future__ import annotations

import math
import numbers

import torch
from torch import Tensor


def check_int(name: str, value, minimum: int | None = None) -> int:
    """A Python or NumPy integer (not a bool) ≥ ``minimum``; returned as an int."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return value


def check_real(name: str, value, *, low: float | None = None, low_open: bool = False, high: float | None = None,
               high_open: bool = False) -> float:
    """A finite real number in the given range (``low_open``: strictly above ``low``)."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, Tensor)) or (
            isinstance(value, Tensor) and value.numel() != 1):
        raise TypeError(f"{name} must be a real number, got {value!r} ({type(value).__name__})")
    v = float(value)
    lo = "" if low is None else (f" > {low}" if low_open else f" >= {low}")
    hi = "" if high is None else (f" < {high}" if high_open else f" <= {high}")
    what = f"a finite number{lo}{' and' if lo and hi else ''}{hi}"
    if not math.isfinite(v):
        raise ValueError(f"{name} must be {what}, got {v}")
    if low is not None and (v <= low if low_open else v < low):
        raise ValueError(f"{name} must be {what}, got {v}")
    if high is not None and (v >= high if high_open else v > high):
        raise ValueError(f"{name} must be {what}, got {v}")
    return v


def check_tensor(name: str, value, shape: str = "") -> Tensor:
    """A floating-point torch tensor (no conversion: lists and integer tensors are refused)."""
    if not isinstance(value, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor{' ' + shape if shape else ''}, got {type(value).__name__}")
    if not (value.is_floating_point()):
        raise TypeError(f"{name} must be a floating-point tensor{' ' + shape if shape else ''}, "
                        f"got dtype {value.dtype}")
    return value


def check_finite(name: str, value: Tensor) -> Tensor:
    """No NaN or ±inf anywhere in ``value``; the message says what and where (first index)."""
    bad = ~torch.isfinite(value)
    if bool(bad.any()):
        idx = tuple(int(i) for i in bad.nonzero()[0])
        raise ValueError(f"{name} must be finite: it holds {int(bad.sum())} non-finite value(s) "
                         f"(NaN or inf), the first {value[idx].item()} at index {idx}")
    return value


def check_points(name: str, value, dim: int | None = None, *, allow_empty: bool = True, rows: str = "n") -> Tensor:
    """A finite floating-point tensor of shape (rows, dim)."""
    shape = f"({rows}, {dim if dim is not None else 'd'})"
    value = check_tensor(name, value, shape)
    if value.ndim != 2 or (dim is not None and value.shape[-1] != dim):
        raise ValueError(f"{name} must be {shape}, got shape {tuple(value.shape)}")
    if not allow_empty and len(value) == 0:
        raise ValueError(f"{name} must be {shape} with {rows} >= 1, got an empty tensor {tuple(value.shape)}")
    return check_finite(name, value)


def check_box(name: str, bounds, dim: int | None = None) -> Tensor:
    """A finite (2, d) tensor with lower < upper in every column (as float64 when not a tensor)."""
    b = bounds if isinstance(bounds, Tensor) else torch.as_tensor(bounds, dtype=torch.float64)
    if b.ndim != 2 or b.shape[0] != 2 or (dim is not None and b.shape[1] != dim):
        want = f"(2, {dim})" if dim is not None else "(2, d)"
        raise ValueError(f"{name} must be {want} (a row of lower and a row of upper bounds), "
                         f"got shape {tuple(b.shape)}")
    if b.shape[1] == 0:
        raise ValueError(f"{name} must have d >= 1 columns, got shape {tuple(b.shape)}")
    if not b.is_floating_point():
        b = b.to(torch.float64)
    check_finite(name, b)
    if not bool(torch.all(b[0] < b[1])):
        cols = (b[0] >= b[1]).nonzero()[:, 0].tolist()
        raise ValueError(f"{name} must have lower < upper in every column, not so in column(s) {cols}")
    return b
