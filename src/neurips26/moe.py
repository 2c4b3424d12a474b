"""Mixture-of-experts structure shared by the fields that work on MoE models (compression's
MXFP4 quantization and QAT, optimizers that act on routers): finding the MoE blocks of a
``transformers`` model, the router's gate weights, recording routes, and load and routing
statistics.

Blocks are found by structure, not by class name: a block is a module with a ``gate``
whose ``weight`` is (E, H) and that has a ``top_k``, and ``experts`` holding fused 3-D
``gate_up_proj`` (E, 2I, H) and ``down_proj`` (E, H, I) parameters (transformers 5's
Mixtral, Qwen3-MoE and DeepSeek-V3). Every router returns (logits, top-k weights, top-k
indices), each with one row per token: (T, E), (T, k), (T, k).
"""

from __future__ import annotations

import numbers
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

__all__ = ["MoEBlock", "find_moe_blocks", "route_weights", "RouteLog", "record_routes", "expert_loads",
           "routing_agreement", "Router", "find_routers", "sqrt_gate", "SqrtGate", "apply_sqrt_gate",
           "aux_load_balance_loss", "expert_load", "collect_router_outputs"]


@dataclass
class MoEBlock:
    """One MoE block of a model: its qualified ``name``, the block ``module``, its router
    ``gate``, its fused ``experts`` and the router's ``top_k``."""

    name: str
    module: torch.nn.Module
    gate: torch.nn.Module
    experts: torch.nn.Module
    top_k: int

    @property
    def num_experts(self) -> int:
        return self.gate.weight.shape[0]


def _is_block(mod) -> bool:
    gate, experts = getattr(mod, "gate", None), getattr(mod, "experts", None)
    if gate is None or experts is None or not isinstance(getattr(gate, "weight", None), torch.Tensor):
        return False
    gu, down = getattr(experts, "gate_up_proj", None), getattr(experts, "down_proj", None)
    if not (isinstance(gu, torch.Tensor) and isinstance(down, torch.Tensor) and gu.ndim == 3 and down.ndim == 3):
        return False
    E, H = gate.weight.shape
    return gu.shape[0] == E and down.shape[0] == E and gu.shape[2] == H and down.shape[1] == H \
        and gu.shape[1] == 2 * down.shape[2]


def find_moe_blocks(model: torch.nn.Module) -> list[MoEBlock]:
    """Every MoE block of ``model``, in module order. Raises a ValueError naming what was
    found when there is none (an unsupported layout, e.g. per-expert nn.Linear lists), or
    naming the block whose router's ``top_k`` is not an int in [1, E]."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    blocks = []
    for name, mod in model.named_modules():
        if not (_is_block(mod) and hasattr(mod.gate, "top_k")):
            continue
        top_k, E = mod.gate.top_k, mod.gate.weight.shape[0]
        if isinstance(top_k, bool) or not isinstance(top_k, numbers.Integral) or not 1 <= top_k <= E:
            raise ValueError(f"MoE block {name!r}: its router's top_k must be an int in [1, {E}] "
                             f"(the number of experts), got {top_k!r}")
        blocks.append(MoEBlock(name, mod, mod.gate, mod.experts, int(top_k)))
    if not blocks:
        looks = sorted({type(m).__name__ for n, m in model.named_modules() if "expert" in n.lower() or "moe" in n.lower()})
        raise ValueError(f"{type(model).__name__}: no MoE block found (a module with .gate.weight (E, H), .gate.top_k and "
                         f".experts.gate_up_proj (E, 2I, H) / .down_proj (E, H, I)); modules named like experts: "
                         f"{looks or 'none'}")
    return blocks


def route_weights(gate: torch.nn.Module, logits: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """The gate weights (T, k) of the experts ``indices`` (T, k) from the router's current
    ``logits`` (T, E), by the router's own rule: softmax probabilities, renormalized over
    the chosen experts when the router does (Mixtral always, Qwen3-MoE with
    ``norm_topk_prob``); for DeepSeek-V3's sigmoid router (it has
    ``e_score_correction_bias``), sigmoid scores, renormalized when ``norm_topk_prob``,
    times ``routed_scaling_factor``."""
    if not isinstance(logits, torch.Tensor) or logits.ndim != 2:
        raise ValueError(f"logits must be a (T, E) tensor, got {_shape(logits)}")
    if not isinstance(indices, torch.Tensor) or indices.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"indices must be an int64 (T, k) tensor of expert indices, got {_shape(indices)}")
    if indices.ndim != 2 or indices.shape[0] != logits.shape[0]:
        raise ValueError(f"indices must be (T, k) with the T = {logits.shape[0]} tokens of logits, got "
                         f"{tuple(indices.shape)}")
    if hasattr(gate, "e_score_correction_bias"):
        w = logits.float().sigmoid().gather(1, indices)
        if getattr(gate, "norm_topk_prob", False):
            w = w / (w.sum(dim=-1, keepdim=True) + 1e-20)
        return w * gate.routed_scaling_factor
    w = torch.softmax(logits, dim=-1, dtype=torch.float).gather(1, indices)
    if getattr(gate, "norm_topk_prob", True):
        w = w / w.sum(dim=-1, keepdim=True)
    return w.to(logits.dtype)


def _shape(t) -> str:
    return f"{t.dtype} {tuple(t.shape)}" if isinstance(t, torch.Tensor) else type(t).__name__


@dataclass
class RouteLog:
    """Per block name, the router outputs of every forward call, in order: ``indices``
    (T, k) and ``logits`` (T, E) tensors, one per call."""

    indices: dict = field(default_factory=dict)
    logits: dict = field(default_factory=dict)


@contextmanager
def record_routes(blocks: list[MoEBlock]):
    """Record each router's top-k indices (and logits) on every call while inside; yields
    the :class:`RouteLog` being filled."""
    log = RouteLog()
    handles = []
    for b in blocks:
        log.indices[b.name], log.logits[b.name] = [], []

        def hook(mod, args, out, name=b.name):
            log.logits[name].append(out[0].detach().clone())
            log.indices[name].append(out[2].detach().clone())

        handles.append(b.gate.register_forward_hook(hook))
    try:
        yield log
    finally:
        for h in handles:
            h.remove()


def expert_loads(indices: torch.Tensor, num_experts: int) -> torch.Tensor:
    """How many times each expert was chosen: a float64 (E,) count over the top-k
    ``indices`` (any shape, e.g. (T, k)) of one block."""
    if isinstance(num_experts, bool) or not (isinstance(num_experts, numbers.Integral) and num_experts >= 1):
        raise ValueError(f"num_experts must be an int >= 1, got {num_experts!r}")
    num_experts = int(num_experts)
    if not isinstance(indices, torch.Tensor) or indices.is_floating_point() or indices.is_complex() \
            or indices.dtype == torch.bool:
        raise TypeError(f"indices must be an integer tensor of expert indices, got {_shape(indices)}")
    if indices.numel() and (int(indices.min()) < 0 or int(indices.max()) >= num_experts):
        raise ValueError(f"indices must lie in [0, {num_experts}), got {int(indices.min())}..{int(indices.max())}")
    return torch.bincount(indices.reshape(-1), minlength=num_experts).double()


def routing_agreement(ref: torch.Tensor, other: torch.Tensor) -> dict:
    """Exact top-k set match rate and mean Jaccard index between two (tokens, k) routings
    (integer expert indices, at least one token)."""
    for name, t in (("ref", ref), ("other", other)):
        if not isinstance(t, torch.Tensor) or t.dtype not in (torch.int64, torch.int32, torch.int16, torch.int8,
                                                               torch.uint8):
            raise TypeError(f"{name} must be an integer (tokens, k) tensor of expert indices, got {_shape(t)}")
    if ref.ndim != 2 or ref.shape != other.shape:
        raise ValueError(f"need two (tokens, k) routings of one shape, got {tuple(ref.shape)} and {tuple(other.shape)}")
    if ref.numel() == 0:
        raise ValueError(f"ref and other are empty ({tuple(ref.shape)}): no routing to compare")
    for name, t in (("ref", ref), ("other", other)):
        if int(t.min()) < 0:
            raise ValueError(f"{name} holds a negative expert index ({int(t.min())})")
    ref, other = ref.long(), other.long()
    E = int(max(ref.max(), other.max())) + 1
    a = torch.zeros(ref.shape[0], E, dtype=torch.bool).scatter_(1, ref, True)
    b = torch.zeros(other.shape[0], E, dtype=torch.bool).scatter_(1, other, True)
    inter, union = (a & b).sum(1).float(), (a | b).sum(1).float()
    return {"exact": float((inter == union).float().mean()), "jaccard": float((inter / union).mean())}


# --- routers, SqrtGate and load balance (HyperP) -------------------------------------------

@dataclass
class Router:
    """One top-k softmax router of a model: its qualified ``name``, the router ``module``,
    where its (T, k) top-k weights and (T, k) indices sit in its output tuple, ``top_k`` and
    ``num_experts``. Two layouts: GraniteMoe's ``block.router`` returns (indices, weights,
    logits); Qwen3-MoE's / Mixtral's ``block.gate`` returns (logits, weights, indices)."""

    name: str
    module: torch.nn.Module
    indices_at: int
    logits_at: int
    top_k: int
    num_experts: int


def find_routers(model: torch.nn.Module) -> list[Router]:
    """Every top-k softmax router of ``model`` (GraniteMoe's ``router``, Qwen3-MoE's and
    Mixtral's ``gate``), in module order. A sigmoid router (DeepSeek-V3's, with
    ``e_score_correction_bias``) or a model with no router raises TypeError: SqrtGate is
    defined on softmax gates whose top-k weights sum to one."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    found = []
    for name, mod in model.named_modules():
        experts = getattr(mod, "experts", None)
        for attr, layout in (("router", (0, 2)), ("gate", (2, 0))):
            r = getattr(mod, attr, None)
            if experts is None or not isinstance(r, torch.nn.Module) or not hasattr(r, "top_k") \
                    or not isinstance(getattr(r, "weight", None), torch.Tensor) or r.weight.ndim != 2:
                continue
            if hasattr(r, "e_score_correction_bias"):
                raise TypeError(f"{name}.{attr}: a sigmoid router with a score-correction bias (DeepSeek-V3 "
                                "layout); SqrtGate and these statistics need a top-k softmax router")
            E = r.weight.shape[0]
            found.append(Router(f"{name}.{attr}" if name else attr, r, layout[0], layout[1], int(r.top_k), int(E)))
    if not found:
        raise TypeError(f"{type(model).__name__}: no top-k softmax router found (GraniteMoe's block.router or "
                        "Qwen3-MoE's / Mixtral's block.gate next to block.experts)")
    return found


def sqrt_gate(weights: torch.Tensor, eps: float = 1e-30) -> torch.Tensor:
    """SqrtGate: g_i = √(w_i / Σ_j w_j) over the last dimension of the (..., k) top-k gate
    weights, so that Σ g_i² = 1. With k experts whose outputs are independent with equal
    RMS, the block output then keeps that RMS for every k (√(Σ g²) = 1), where softmax
    weights (Σ w = 1) shrink it by √(Σ w²) ≈ 1/√k. Computed in float32 or wider, returned
    in ``weights``' dtype; ``eps`` keeps the square root's gradient finite at w = 0."""
    if not isinstance(weights, torch.Tensor) or not weights.is_floating_point() or weights.ndim < 1:
        raise TypeError(f"weights must be a floating-point (..., k) tensor, got {_shape(weights)}")
    w = weights.float() if weights.element_size() < 4 else weights
    g = (w / w.sum(dim=-1, keepdim=True)).clamp(min=eps).sqrt()
    return g.to(weights.dtype)


class SqrtGate:
    """The hooks that :func:`apply_sqrt_gate` put on the routers: ``routers`` lists them,
    :meth:`remove` takes them off (also on leaving a ``with`` block)."""

    def __init__(self, routers: list[Router], handles: list):
        self.routers = routers
        self._handles = handles

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []

    def __enter__(self) -> "SqrtGate":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def apply_sqrt_gate(model: torch.nn.Module) -> SqrtGate:
    """Hook every router of ``model`` (:func:`find_routers`) so that the top-k weights it
    returns become SqrtGate's g = √(w/Σw) (:func:`sqrt_gate`); router logits and the chosen
    experts are left unchanged. Returns the :class:`SqrtGate` that removes the hooks.
    Other router layouts raise TypeError."""
    routers = find_routers(model)

    def hook(mod, args, out):
        out = list(out)
        out[1] = sqrt_gate(out[1])
        return tuple(out)

    return SqrtGate(routers, [r.module.register_forward_hook(hook) for r in routers])


@contextmanager
def collect_router_outputs(model: torch.nn.Module):
    """While inside, every router call of ``model`` (:func:`find_routers`) appends its
    (T, E) logits (not detached: an auxiliary loss on them trains the routers) to
    ``out["logits"]`` and its (T, k) top-k indices to ``out["indices"]``; yields ``out``.
    (``transformers`` 5's GraniteMoe does not return its router logits.)"""
    routers = find_routers(model)
    out: dict = {"logits": [], "indices": []}

    def hook(mod, args, res, r):
        out["logits"].append(res[r.logits_at])
        out["indices"].append(res[r.indices_at].detach())

    handles = [r.module.register_forward_hook(lambda m, a, res, r=r: hook(m, a, res, r)) for r in routers]
    try:
        yield out
    finally:
        for h in handles:
            h.remove()


def aux_load_balance_loss(router_logits, top_k: int, num_experts: int | None = None) -> torch.Tensor:
    """The Switch-Transformer auxiliary load-balancing loss E · Σ_e f_e P_e, with f_e the
    share of tokens whose top-k includes expert e and P_e the mean router probability of e,
    both pooled over the layers (``transformers``' ``load_balancing_loss_func`` without a
    mask). Equals k at a perfectly uniform routing; differentiable through P.

    Args:
        router_logits: a (T, E) tensor or a sequence of them (one per MoE layer).
        top_k: experts per token, an int in [1, E].
        num_experts: E (None: read from the logits).
    """
    logits = [router_logits] if isinstance(router_logits, torch.Tensor) else list(router_logits)
    if not logits or not all(isinstance(t, torch.Tensor) and t.ndim == 2 and t.is_floating_point()
                             for t in logits):
        raise ValueError("router_logits must be a (T, E) floating-point tensor or a non-empty sequence of them")
    E = logits[0].shape[1]
    if num_experts is not None and num_experts != E:
        raise ValueError(f"num_experts = {num_experts} but the logits have E = {E} columns")
    if any(t.shape[1] != E for t in logits) or any(t.shape[0] == 0 for t in logits):
        raise ValueError(f"every layer's logits must be (T, {E}) with T >= 1, got {[tuple(t.shape) for t in logits]}")
    if isinstance(top_k, bool) or not isinstance(top_k, numbers.Integral) or not 1 <= top_k <= E:
        raise ValueError(f"top_k must be an int in [1, {E}], got {top_k!r}")
    x = torch.cat([t.float() for t in logits])
    probs = torch.softmax(x, dim=-1)
    chosen = probs.topk(int(top_k), dim=-1).indices
    f = torch.bincount(chosen.reshape(-1), minlength=E).float() / x.shape[0]
    return E * (f * probs.mean(dim=0)).sum()


def expert_load(indices: torch.Tensor, num_experts: int) -> float:
    """Max over mean of the expert loads of one routing (top-k ``indices``, any shape): 1 is
    perfectly balanced, E is every token on one expert."""
    loads = expert_loads(indices, num_experts)
    if loads.sum() == 0:
        raise ValueError("indices is empty: no load to measure")
    return float(loads.max() / loads.mean())
