"""HyperballMuon: Muon on a fixed-norm sphere (HyperP's optimizer, "MuonH").

Every matrix parameter W keeps the norm it had at its first step (or a given radius R).
One step with Muon's direction D = msign(U) of the (Nesterov) momentum U is

    W ← R · N((1 − ηλ) W − η · R · N(D)),    N(A) = A / ‖A‖,

so η is a *relative* step: each step moves W by η·R before the retraction back onto the
sphere. ``norm="frobenius"`` (HyperP) uses one radius per matrix; ``norm="column"`` one per
column (``W[:, j]``, the input-feature columns of an ``nn.Linear`` weight). The decoupled
weight decay λ is kept so that its no-op is testable: R · N((1 − ηλ)W − ηRN(D)) =
R · N(W − η/(1 − ηλ) · R N(D)), the no-decay step at lr η/(1 − ηλ) = η + η²λ + …, so decay
changes the trajectory only at second order in η (on plain Muon it is first order).

``project_tangent=True`` removes the component of the step along W first (the Riemannian
gradient of the sphere); ``direction="gradient"`` replaces msign by the raw momentum and
drops the inner normalization (W ← R·N(W − η P_W(U))), which is Riemannian SGD on the
sphere (geoopt's ``RiemannianSGD`` on ``geoopt.Sphere`` for R = 1). ``sphere=False`` is
``torch.optim.Muon`` (same arguments, bit for bit). Vectors, scalars, >2-D tensors and the
``exclude``-d matrices (embeddings, the LM head) go to an inner AdamW group (torch's own
functional AdamW, so the state keys are AdamW's).
"""

from __future__ import annotations

import math
from typing import Callable, Iterable

import torch
from torch.optim.adam import adam as _torch_adam  # torch's functional Adam(W) core

from .._checks import check_int, check_real
from ..linalg import MUON_COEFFICIENTS, check_coefficients, msign
from ._shell import CheckedOptimizer, check_lr, check_weight_decay, collect_group

__all__ = ["HyperballMuon", "sphere_norm", "muon_lr_scale"]

NORMS = ("frobenius", "column")
DIRECTIONS = ("muon", "gradient")


def sphere_norm(x: torch.Tensor, norm: str = "frobenius") -> torch.Tensor:
    """‖x‖ for the sphere ``norm``: the Frobenius norm as a 0-d tensor, or the column norms
    as a (1, n) tensor (broadcastable against the (m, n) matrix ``x``)."""
    if norm == "frobenius":
        return torch.linalg.vector_norm(x)
    if norm == "column":
        return torch.linalg.vector_norm(x, dim=0, keepdim=True)
    raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")


def muon_lr_scale(shape, adjust_lr_fn: str | None) -> float:
    """torch.optim.Muon's per-matrix lr factor: √max(1, rows/cols) (None / "original"),
    0.2·√max(rows, cols) ("match_rms_adamw")."""
    rows, cols = shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        return math.sqrt(max(1.0, rows / cols))
    if adjust_lr_fn == "match_rms_adamw":
        return 0.2 * math.sqrt(max(rows, cols))
    raise ValueError(f"adjust_lr_fn must be None, 'original' or 'match_rms_adamw', got {adjust_lr_fn!r}")


def hyperball_step(p: torch.Tensor, d: torch.Tensor, radius: torch.Tensor, *, lr: float, weight_decay: float,
                   norm: str, project_tangent: bool, normalize: bool, eps: float) -> None:
    """The sphere step in place: p ← R·N((1 − lr·wd) p − lr·s) with s = R·N(d) when
    ``normalize`` (Muon's direction) or s = d (the gradient direction); d projected onto
    the tangent space of the sphere at p first when ``project_tangent``."""
    if project_tangent:
        dims = None if norm == "frobenius" else 0
        coef = (d * p).sum(dim=dims, keepdim=dims is not None) / (p * p).sum(dim=dims, keepdim=dims is not None)
        d = d - coef * p
    step = d * (radius / sphere_norm(d, norm).clamp(min=eps)) if normalize else d
    x = p.mul(1.0 - lr * weight_decay) if weight_decay else p.clone()
    x.sub_(step, alpha=lr)
    p.copy_(x.mul_(radius / sphere_norm(x, norm).clamp(min=eps)))


class HyperballMuon(CheckedOptimizer):
    """Muon whose matrices stay on a fixed-norm sphere (Frobenius or per column), with an
    inner AdamW for everything else.

    Args:
        params: tensors or param groups. A group without ``"use_hyperball"`` is split in two:
            its 2-D tensors not in ``exclude`` (the sphere group, with the group's own settings)
            and the rest (an AdamW group with ``adamw_lr`` and ``adamw_weight_decay``).
        lr: the sphere step η (relative: each step moves W by η·R), or Muon's lr when
            ``sphere=False``.
        momentum, nesterov: Muon's EMA momentum ``buf ← lerp(buf, g, 1 − μ)`` and the
            Nesterov interpolation ``g.lerp(buf, μ)``, exactly as ``torch.optim.Muon``.
        weight_decay: decoupled decay λ of the matrices (a first-order no-op on the sphere).
        sphere: False gives plain ``torch.optim.Muon`` on the matrices.
        norm: "frobenius" (HyperP) or "column" (one radius per column).
        radius: the sphere radius (a positive number for every matrix), or None: each matrix
            keeps the norm it had at its first step (stored in the state as ``"radius"``).
        project_tangent: project the direction onto the sphere's tangent space at W.
        direction: "muon" (msign of the momentum, normalized) or "gradient" (the momentum
            itself: Riemannian SGD on the sphere).
        ns_coefficients, ns_steps, eps: Muon's Newton–Schulz settings.
        ns_dtype: dtype of the Newton–Schulz iteration (bfloat16, as torch's Muon; None: the
            parameter's own dtype, e.g. for float64 checks).
        adjust_lr_fn: torch's Muon lr factor, used only with ``sphere=False``.
        exclude: matrices that go to AdamW (embeddings, LM head).
        adamw_lr, adamw_betas, adamw_eps, adamw_weight_decay: the inner AdamW's settings
            (``adamw_lr=None``: the same lr as the sphere group).
        skip_nonfinite: skip a step whose gradients hold NaN/Inf instead of raising.
    """

    def __init__(self, params, lr: float = 0.02, momentum: float = 0.95, nesterov: bool = True,
                 weight_decay: float = 0.0, *, sphere: bool = True, norm: str = "frobenius",
                 radius: float | None = None, project_tangent: bool = False, direction: str = "muon",
                 ns_coefficients=MUON_COEFFICIENTS, ns_steps: int = 5, eps: float = 1e-7,
                 ns_dtype: torch.dtype | None = torch.bfloat16, adjust_lr_fn: str | None = None,
                 exclude: Iterable[torch.Tensor] = (), adamw_lr: float | None = None,
                 adamw_betas: tuple[float, float] = (0.9, 0.95), adamw_eps: float = 1e-8,
                 adamw_weight_decay: float = 0.0, skip_nonfinite: bool = False):
        if not isinstance(sphere, bool):
            raise TypeError(f"sphere must be a bool, got {sphere!r}")
        self.skip_nonfinite = bool(skip_nonfinite)
        check_real("lr", lr, low=0.0)
        if adamw_lr is not None:
            check_real("adamw_lr", adamw_lr, low=0.0)
        excluded = {id(t) for t in exclude}
        defaults = dict(lr=lr, momentum=momentum, nesterov=nesterov, weight_decay=weight_decay, sphere=sphere,
                        norm=norm, radius=radius, project_tangent=project_tangent, direction=direction,
                        ns_coefficients=ns_coefficients, ns_steps=ns_steps, eps=eps, ns_dtype=ns_dtype,
                        adjust_lr_fn=adjust_lr_fn, betas=adamw_betas, adam_eps=adamw_eps, use_hyperball=True)
        adamw = dict(lr=lr if adamw_lr is None else adamw_lr, weight_decay=adamw_weight_decay, use_hyperball=False)
        if isinstance(params, torch.Tensor):
            raise TypeError("params must be an iterable of tensors or of param-group dicts, got a single tensor")
        groups = list(params)
        if not groups:
            raise ValueError("params is empty: HyperballMuon got no parameters to optimize")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        split = []
        for g in groups:
            if "use_hyperball" in g:
                split.append(g)
                continue
            ps = list(g["params"])
            mats = [p for p in ps if p.ndim == 2 and id(p) not in excluded]
            rest = [p for p in ps if not (p.ndim == 2 and id(p) not in excluded)]
            extra = {k: v for k, v in g.items() if k != "params"}
            if mats:
                split.append({**extra, "params": mats, "use_hyperball": True})
            if rest:
                split.append({**{k: v for k, v in extra.items() if k not in ("lr", "weight_decay")},
                              **adamw, "params": rest})
        super().__init__(split, defaults)

    # --- checks -----------------------------------------------------------------------
    def check_group(self, group: dict, index: int, at_step: bool) -> None:
        check_lr(group, index, at_step)
        check_weight_decay(group, index)
        where = f"(param group {index})"
        b1, b2 = _pair(group["betas"], f"adamw_betas {where}")
        for name, b in (("beta1", b1), ("beta2", b2)):
            check_real(f"adamw_betas {name} {where}", b, low=0.0, high=1.0, high_open=True)
        check_real(f"adamw_eps {where}", group["adam_eps"], low=0.0, low_open=True)
        if not group["use_hyperball"]:
            return
        check_real(f"momentum {where}", group["momentum"], low=0.0, high=1.0, high_open=True)
        if group["norm"] not in NORMS:
            raise ValueError(f"norm {where} must be one of {NORMS}, got {group['norm']!r}")
        if group["direction"] not in DIRECTIONS:
            raise ValueError(f"direction {where} must be one of {DIRECTIONS}, got {group['direction']!r}")
        if group["radius"] is not None:
            check_real(f"radius {where}", group["radius"], low=0.0, low_open=True)
        check_real(f"eps {where}", group["eps"], low=0.0, low_open=True)
        if check_int(f"ns_steps {where}", group["ns_steps"], minimum=0) >= 100:
            raise ValueError(f"ns_steps {where} must be an integer in [0, 100), got {group['ns_steps']}")
        check_coefficients(group["ns_coefficients"], f"ns_coefficients {where}")
        dt = group["ns_dtype"]
        if dt is not None and not (isinstance(dt, torch.dtype) and dt.is_floating_point):
            raise TypeError(f"ns_dtype {where} must be a floating-point torch.dtype or None, got {dt!r}")
        if group["adjust_lr_fn"] not in (None, "original", "match_rms_adamw"):
            raise ValueError(f"adjust_lr_fn {where} must be None, 'original' or 'match_rms_adamw', "
                             f"got {group['adjust_lr_fn']!r}")
        for name in ("nesterov", "sphere", "project_tangent"):
            if not isinstance(group[name], bool):
                raise TypeError(f"{name} {where} must be a bool, got {group[name]!r}")
        if not at_step:
            for i, p in enumerate(group["params"]):
                if p.ndim != 2:
                    raise ValueError(f"params: parameter {i} of the sphere group {index} has shape "
                                     f"{tuple(p.shape)}; the sphere group takes matrices only (give the rest "
                                     "a group with use_hyperball=False)")

    # --- step -------------------------------------------------------------------------
    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None):
        loss, skip = self.begin_step(closure)
        if skip:
            return loss
        for group in self.param_groups:
            if group["use_hyperball"]:
                self._sphere_group(group)
            else:
                self._adamw_group(group)
        return loss

    def _sphere_group(self, group: dict) -> None:
        norm, eps = group["norm"], group["eps"]

        def init(p):
            state = {"momentum_buffer": torch.zeros_like(p)}
            if group["sphere"]:
                r = sphere_norm(p, norm) if group["radius"] is None else torch.full(
                    (1, p.shape[1]) if norm == "column" else (), float(group["radius"]), dtype=p.dtype,
                    device=p.device)
                state["radius"] = r.clone()
            return state

        params, grads, states = collect_group(self, group, init)
        lr, mu, wd = group["lr"], group["momentum"], group["weight_decay"]
        for p, g, state in zip(params, grads, states):
            buf = state["momentum_buffer"]
            buf.lerp_(g, 1 - mu)
            u = g.lerp(buf, mu) if group["nesterov"] else buf
            if group["direction"] == "muon":
                # torch.optim.Muon's iteration operation for operation (bfloat16, clamp, fused)
                d = msign(u, group["ns_steps"], tuple(group["ns_coefficients"]), eps, dtype=group["ns_dtype"],
                          eps_mode="clamp", fused=True, check_finite=False)
            else:
                d = u
            if not group["sphere"]:
                p.mul_(1 - lr * wd)
                p.add_(d, alpha=-lr * muon_lr_scale(p.shape, group["adjust_lr_fn"]))
                continue
            if "radius" not in state:  # sphere switched on after the first step
                state["radius"] = sphere_norm(p, norm).clone()
            hyperball_step(p, d, state["radius"], lr=lr, weight_decay=wd, norm=norm,
                           project_tangent=group["project_tangent"], normalize=group["direction"] == "muon",
                           eps=eps)

    def _adamw_group(self, group: dict) -> None:
        def init(p):
            return {"step": torch.tensor(0.0, dtype=torch.float32), "exp_avg": torch.zeros_like(p),
                    "exp_avg_sq": torch.zeros_like(p)}

        params, grads, states = collect_group(self, group, init)
        if not params:
            return
        beta1, beta2 = group["betas"]
        _torch_adam(params, grads, [s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states], [],
                              [s["step"] for s in states], foreach=False, decoupled_weight_decay=True,
                              amsgrad=False, beta1=beta1, beta2=beta2, lr=group["lr"],
                              weight_decay=group["weight_decay"], eps=group["adam_eps"], maximize=False)

    def radii(self) -> dict[int, torch.Tensor]:
        """The radius of every sphere parameter that has stepped, keyed by ``id(param)``."""
        return {id(p): s["radius"] for p, s in self.state.items() if "radius" in s}


def _pair(value, name):
    try:
        a, b = value
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a pair of numbers, got {value!r}") from None
    return a, b
