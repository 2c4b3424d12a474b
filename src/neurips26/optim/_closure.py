"""What every optimizer's ``step(closure)`` does first."""

from __future__ import annotations

from typing import Callable

import torch

__all__ = ["evaluate_closure"]


def evaluate_closure(closure: Callable[[], float] | None):
    """The loss that ``closure`` returns, evaluated with gradients enabled (``step`` runs
    under ``torch.no_grad``), or None without a closure: torch.optim's convention."""
    if closure is None:
        return None
    with torch.enable_grad():
        return closure()
