"""The contracts of the four parts and the helpers they share.

The parts are small functional objects in the manner of optax's ``init``/``update``
pair, shaped so that the optimizer's hot path copies nothing:

* a :class:`Transition` Φ owns the memory: ``init(p) -> state`` and
  ``update(g, state, step, out=None) -> memory``. Without ``out`` it is pure: it returns
  new tensors and leaves ``state`` alone. With ``out`` (a state of the same structure,
  usually ``state`` itself) it writes the new memory into ``out``'s tensors, torch's
  ``out=`` convention, so that the optimizer advances its buffers in place. The returned
  ``memory`` is what the direction and the metric read at this step: the new state, plus
  any transient entry formed for this step only (Lion's interpolation), which is never
  written into ``out`` and so never kept. ``equilibrium(g, state, step)`` (optional) gives
  the fast memory's fixed point for the gradient g.
* a :class:`Direction` is a function ``(g, memory, step) -> v``; it may return a memory
  tensor itself, which the caller must only read. Optional ``factored(g, memory, step) ->
  (tensor, scalar)`` gives v as a tensor times a scalar, so that a homogeneous metric can
  fold the scalar into the step size instead of copying.
* a :class:`Metric` is a function ``(v, memory, step) -> u``. Optional: ``homogeneous``
  (u(cv) = c·u(v)), ``apply(p, v, memory, step, alpha)`` (p ← p + α u(v) in one fused
  pass) and ``step_scale(shape)`` (a per-shape factor on the step size).
* a :class:`Lift` says where the weight decay enters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import torch

from ..._checks import check_real

__all__ = ["Transition", "Direction", "Metric", "Lift", "check_beta", "check_betas", "check_positive",
           "rms_denominator", "into"]


class Transition(Protocol):
    """Φ, the internal memory (see the module docstring for the ``out`` convention)."""

    def init(self, p: torch.Tensor) -> dict:
        ...

    def update(self, g: torch.Tensor, state: dict, step: int, out: dict | None = None) -> dict:
        ...


class Direction(Protocol):
    """The direction field generator: ``(g, memory, step) -> v``, v of g's shape."""

    def __call__(self, g: torch.Tensor, memory: dict, step: int) -> torch.Tensor:
        ...


class Metric(Protocol):
    """How the direction is measured and preconditioned: ``(v, memory, step) -> u``."""

    def __call__(self, v: torch.Tensor, memory: dict, step: int) -> torch.Tensor:
        ...


@dataclass(frozen=True)
class Lift:
    """Where the weight decay of a param group enters: ``decoupled=False`` adds λp to the
    gradient before the memory sees it (L2 regularization, as torch's SGD and Adam);
    ``decoupled=True`` shrinks p by (1 − ηλ) before the step (AdamW)."""

    decoupled: bool = False


def check_beta(name: str, value: float) -> float:
    """A decay rate in [0, 1) as a float; a ValueError naming it outside (NaN included), a
    TypeError for a non-number."""
    return check_real(name, value, low=0.0, high=1.0, high_open=True)


def check_betas(betas, names: tuple[str, str] = ("beta1", "beta2")) -> tuple[float, float]:
    """``betas`` as a pair of decay rates in [0, 1): a TypeError for a non-sequence, a
    ValueError for a wrong length or a value out of range, each naming it."""
    try:
        values = tuple(betas)
    except TypeError:
        raise TypeError(f"betas must be a pair ({', '.join(names)}), got {betas!r} ({type(betas).__name__})") from None
    if len(values) != 2:
        raise ValueError(f"betas must be a pair ({', '.join(names)}), got {len(values)} values: {betas!r}")
    return check_beta(names[0], values[0]), check_beta(names[1], values[1])


def check_positive(name: str, value: float) -> float:
    """A finite number > 0 as a float (an eps), or a ValueError / TypeError naming it."""
    return check_real(name, value, low=0.0, low_open=True)


def rms_denominator(second: torch.Tensor, beta2: float, step: int, eps: float) -> torch.Tensor:
    """√(v / (1 − β₂ᵗ)) + ε, Adam's denominator, as torch computes it (a new tensor)."""
    return second.sqrt().div_(math.sqrt(1.0 - beta2**step)).add_(eps)


def into(out: dict | None, key: str) -> torch.Tensor | None:
    """The ``out=`` tensor for memory entry ``key``: ``out[key]`` to update in place, None
    (a new tensor) for the pure form."""
    return None if out is None else out[key]
