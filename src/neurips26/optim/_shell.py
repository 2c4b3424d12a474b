"""What the ``torch.optim.Optimizer`` shells share: evaluating the closure and collecting
a param group's tensors for their functional cores."""

from __future__ import annotations

from typing import Callable

import torch

__all__ = ["evaluate_closure", "collect_group"]


def evaluate_closure(closure: Callable[[], float] | None):
    """The loss that ``closure`` returns, evaluated with gradients enabled (``step`` runs
    under ``torch.no_grad``), or None without a closure: torch.optim's convention."""
    if closure is None:
        return None
    with torch.enable_grad():
        return closure()


def collect_group(optimizer: torch.optim.Optimizer, group: dict,
                  init: Callable[[torch.Tensor], dict]) -> tuple[list, list, list]:
    """(params, grads, states) of the parameters of ``group`` that have a gradient, in
    order; an empty state is filled with ``init(p)`` first (torch.optim's ``_init_group``).
    Sparse gradients are refused with a RuntimeError naming the optimizer."""
    params, grads, states = [], [], []
    for p in group["params"]:
        if p.grad is None:
            continue
        if p.grad.is_sparse:
            raise RuntimeError(f"{type(optimizer).__name__} does not support sparse gradients")
        state = optimizer.state[p]
        if not state:
            state.update(init(p))
        params.append(p)
        grads.append(p.grad)
        states.append(state)
    return params, grads, states
