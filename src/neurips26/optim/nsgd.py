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

from .._checks import check_real
from ..geometry import Norm, get_norm, nsgd_step
from ._shell import CheckedOptimizer, check_lr, check_weight_decay, collect_group

__all__ = ["NSGD", "nsgd_step"]


class NSGD(CheckedOptimizer):
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
        skip_nonfinite: what a step does with a gradient holding NaN or Inf: by default it
            raises FloatingPointError naming the parameter (before anything moves); with
            True it skips the whole step, parameters and momenta untouched, and counts it
            in ``skipped_steps``.

    Checks: ``lr`` finite and > 0 at construction (a group's own lr, given at construction
    or to ``add_param_group``, finite and >= 0), ``beta`` in [0, 1), ``weight_decay``
    finite and >= 0; parameters of a real floating dtype. The groups' settings are checked
    again at every step (Python numbers, no tensor read), so that a value written into
    ``param_groups`` later is checked too; there a negative lr is accepted, as torch.optim
    accepts one that a scheduler sets (the step then ascends).

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
        *,
        skip_nonfinite: bool = False,
    ):
        check_real("lr (the learning rate)", lr, low=0.0, low_open=True)
        check_real("beta", beta, low=0.0, high=1.0, high_open=True)
        check_real("weight_decay", weight_decay, low=0.0)
        self.skip_nonfinite = bool(skip_nonfinite)
        self.skipped_steps = 0
        super().__init__(params, dict(lr=lr, beta=beta, norm=norm, weight_decay=weight_decay, nesterov=nesterov))

    def check_group(self, group: dict, index: int, at_step: bool) -> None:
        check_lr(group, index, at_step)
        check_real(f"beta (param group {index})", group["beta"], low=0.0, high=1.0, high_open=True)
        check_weight_decay(group, index)
        norm = group["norm"]
        if not at_step and (not callable(norm) or isinstance(norm, Norm)):
            try:
                get_norm(norm)  # validate names early
            except ValueError as e:
                raise ValueError(f"{e} (param group {index})") from None

    @staticmethod
    def _norm_for(spec, p: torch.Tensor) -> Norm:
        if isinstance(spec, (str, Norm)):
            return get_norm(spec)
        return get_norm(spec(p))

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None):
        loss, skip = self.begin_step(closure)
        if skip:
            return loss
        for group in self.param_groups:
            params, grads, states = collect_group(self, group, lambda p: {"momentum": torch.zeros_like(p)})
            norms = [self._norm_for(group["norm"], p) for p in params]
            nsgd_step(params, grads, [s["momentum"] for s in states], norms, lr=group["lr"], beta=group["beta"],
                      weight_decay=group["weight_decay"], nesterov=group["nesterov"])
        return loss
