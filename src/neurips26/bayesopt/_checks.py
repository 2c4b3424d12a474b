"""Argument checks at the bayesopt field's entry points: every message names the argument
and says what is accepted. Used in constructors, ``fit`` and ``propose`` calls, never per
step of an inner loop."""

from __future__ import annotations

import torch
from torch import Tensor

from .._checks import check_int, check_real  # the scalar checks every field shares

__all__ = ["check_int", "check_real", "check_tensor", "check_finite", "check_points", "check_box"]


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
