"""What the two-player (min, max) optimizers share: building the two named param groups from
``min_params`` / ``max_params`` with their checks, the per-tensor update directions
(orthogonalized for matrices, normalized for vectors), and the per-step diagnostics."""

from __future__ import annotations

import math
from typing import Iterable

import torch

from ...linalg import msign, polar
from .._shell import CheckedOptimizer

__all__ = ["PairOptimizer", "pair_groups", "direction", "ORTHO_MODES", "DIAGNOSTIC_KEYS"]

ORTHO_MODES = ("ns", "exact", "none")
DIAGNOSTIC_KEYS = ("eta_x", "eta_y", "ratio", "grad_norm_x", "grad_norm_y", "v_x", "v_y")


def _as_param_list(name: str, params) -> list[torch.Tensor]:
    if isinstance(params, torch.Tensor):
        params = [params]
    try:
        params = list(params)
    except TypeError:
        raise TypeError(f"{name} must be an iterable of tensors, got {type(params).__name__}") from None
    if not params:
        raise ValueError(f"{name} is empty: each player needs at least one parameter")
    for i, p in enumerate(params):
        if not isinstance(p, torch.Tensor):
            raise TypeError(f"{name}[{i}] must be a torch.Tensor, got {type(p).__name__}")
    return params


def pair_groups(min_params: Iterable, max_params: Iterable, **settings) -> list[dict]:
    """The two param groups ``[{"name": "min", ...}, {"name": "max", ...}]``; ValueError for an
    empty player or for a tensor that both players hold (one cannot descend and ascend it)."""
    xs = _as_param_list("min_params", min_params)
    ys = _as_param_list("max_params", max_params)
    shared = {id(p) for p in xs} & {id(p) for p in ys}
    if shared:
        idx = [i for i, p in enumerate(xs) if id(p) in shared]
        raise ValueError(f"min_params and max_params overlap: min_params{idx} also appear in max_params; "
                         "each tensor belongs to exactly one player")
    return [dict(params=xs, name="min", **settings.get("min", {})), dict(params=ys, name="max", **settings.get("max", {}))]


def direction(g: torch.Tensor, ortho: str, *, ns_steps: int = 5, ns_coefficients=None,
              ns_dtype: torch.dtype | None = None) -> torch.Tensor:
    """The unit update direction of one tensor's (momentum of the) gradient ``g``.

    * matrices (``g.ndim >= 2``, viewed as ``(shape[0], -1)`` as Muon does): the spectral-norm LMO
      up to sign, i.e. the polar factor ``U Vᵀ`` of ``g = U S Vᵀ`` (``ortho="exact"``: by an SVD,
      ``⟨g, d⟩ = ‖g‖_*`` and ``‖d‖_2 = 1``; ``"ns"``: Muon's quintic Newton–Schulz, approximate),
      or ``g/‖g‖_F`` with ``ortho="none"``;
    * vectors and scalars: ``g/‖g‖_2`` whatever ``ortho``.

    A zero gradient gives a zero direction. ``ns_dtype`` (e.g. bfloat16) runs Newton–Schulz as
    torch.optim.Muon and pytorch_optimizer do (iterate in that dtype, ``max(‖g‖, eps)``
    normalization, fused steps); None iterates in ``g``'s dtype.
    Shape: same as ``g``."""
    if g.ndim < 2 or ortho == "none" or g.numel() == 0:
        norm = torch.linalg.vector_norm(g)
        return g / torch.where(norm > 0, norm, torch.ones_like(norm))
    m = g.reshape(g.shape[0], -1)
    if ortho == "exact":
        d = polar(m)
    else:
        kw = {} if ns_coefficients is None else {"coefficients": ns_coefficients}
        if ns_dtype is not None:
            kw.update(dtype=ns_dtype, eps_mode="clamp", fused=True)
        d = msign(m, steps=ns_steps, check_finite=False, **kw)
    return d.reshape(g.shape)


class PairOptimizer(CheckedOptimizer):
    """A ``torch.optim.Optimizer`` over two players: ``param_groups[0]`` (``name="min"``) is
    descended, ``param_groups[1]`` (``name="max"``) ascended, both from the gradients of one
    objective ``f(x, y)``. Subclasses implement ``step``; :meth:`diagnostics` reads what the last
    step recorded (one host read, when called)."""

    def _init_diagnostics(self) -> None:
        self._diag: dict[str, torch.Tensor | float] = {k: math.nan for k in DIAGNOSTIC_KEYS}

    def add_param_group(self, param_group: dict) -> None:
        if len(self.param_groups) >= 2:
            raise ValueError(f"{type(self).__name__} holds exactly two param groups ('min' and 'max'); "
                             "put extra tensors into min_params or max_params")
        super().add_param_group(param_group)

    @property
    def min_group(self) -> dict:
        return self.param_groups[0]

    @property
    def max_group(self) -> dict:
        return self.param_groups[1]

    def diagnostics(self) -> dict[str, float]:
        """The last step's time-scale diagnostics, as floats: ``eta_x`` / ``eta_y`` (the effective
        stepsizes, the factor in front of ``‖g‖·d``), their ``ratio`` ``eta_x / eta_y``,
        ``grad_norm_x`` / ``grad_norm_y`` (‖∇_x f‖, ‖∇_y f‖: the latter is the tracking-error proxy
        ‖∇_y f(x_t, y_t)‖ ≥ μ‖y_t − y*(x_t)‖), and the accumulators ``v_x`` / ``v_y``. NaN for what
        a method does not have; all NaN before the first step."""
        return {k: float(v) for k, v in self._diag.items()}

    def _zero_all_grads(self) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                p.grad = None


def group_sq_norm(grads: list[torch.Tensor], like: torch.Tensor) -> torch.Tensor:
    """Σ‖g‖² over a player's gradients as a 0-d tensor (zero for none), without a host read."""
    if not grads:
        return torch.zeros((), dtype=like.dtype, device=like.device)
    return torch.stack([torch.linalg.vector_norm(g) ** 2 for g in grads]).sum()
