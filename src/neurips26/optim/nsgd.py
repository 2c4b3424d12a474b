"""Normalized SGD in a chosen norm (steepest descent along the LMO of a momentum of
the stochastic gradient), the optimizer analysed by the non-Euclidean minibatch SGD /
Rennala-NSGD paper:

    m ← β m + (1 − β) g,     p ← p − lr · lmo(m)       (weight decay decoupled)

With the ℓ2 norm this is normalized SGD, with ℓ∞ sign descent (signSGD with
momentum), with the spectral norm per matrix Muon's orthogonalized update.
"""

from __future__ import annotations

from typing import Callable, Iterable

import torch

from ..geometry import Norm, get_norm, nsgd_step
from ._shell import collect_group, evaluate_closure

__all__ = ["NSGD", "nsgd_step"]


class NSGD(torch.optim.Optimizer):
    """Normalized (steepest-descent) SGD with momentum in a chosen norm.

    Args:
        params: parameters or parameter groups.
        lr: step length (each step moves a parameter by exactly ``lr`` in its norm,
            before weight decay).
        beta: momentum (0 for plain normalized SGD).
        norm: ``"l2"``, ``"linf"``, ``"spectral"``, a :class:`Norm`, or a callable
            ``param -> Norm`` for per-layer mixtures (e.g. spectral for matrices, ℓ∞ for
            the rest: ``norm=lambda p: Spectral() if p.ndim >= 2 else Linf()``).
        weight_decay: decoupled, as in AdamW.
        nesterov: use the Nesterov momentum direction.

    ``state_dict`` / ``load_state_dict`` work as for any torch optimizer; to save one
    with ``torch.save``, give ``norm`` as a name or a Norm instance (a lambda does not
    pickle).
    """

    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-2,
        beta: float = 0.9,
        norm="l2",
        weight_decay: float = 0.0,
        nesterov: bool = False,
    ):
        if not lr > 0:
            raise ValueError(f"Invalid learning rate: {lr} (must be > 0)")
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"Invalid beta: {beta} (must be in [0, 1))")
        if not weight_decay >= 0.0:
            raise ValueError(f"Invalid weight_decay: {weight_decay} (must be >= 0)")
        if not callable(norm) or isinstance(norm, Norm):
            get_norm(norm)  # validate names early
        super().__init__(params, dict(lr=lr, beta=beta, norm=norm, weight_decay=weight_decay, nesterov=nesterov))

    @staticmethod
    def _norm_for(spec, p: torch.Tensor) -> Norm:
        if isinstance(spec, (str, Norm)):
            return get_norm(spec)
        return get_norm(spec(p))

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None):
        loss = evaluate_closure(closure)
        for group in self.param_groups:
            params, grads, states = collect_group(self, group, lambda p: {"momentum": torch.zeros_like(p)})
            norms = [self._norm_for(group["norm"], p) for p in params]
            nsgd_step(params, grads, [s["momentum"] for s in states], norms, lr=group["lr"], beta=group["beta"],
                      weight_decay=group["weight_decay"], nesterov=group["nesterov"])
        return loss
