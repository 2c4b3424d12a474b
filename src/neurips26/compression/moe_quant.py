"""MoE quantization pieces: finding the experts and routers of transformers MoE models,
recording and replaying routes, the router-margin consistency diagnostic, and load-aware
rank allocation for low-rank compensation of the quantization residual.

Routers are found by structure, not by class name: a block is a module with a ``gate``
whose ``weight`` is (E, H) and ``experts`` holding fused 3-D ``gate_up_proj`` (E, 2I, H)
and ``down_proj`` (E, H, I) parameters (transformers 5's Mixtral, Qwen3-MoE and
DeepSeek-V3). Every router returns (logits, top-k weights, top-k indices).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

__all__ = ["MoEBlock", "find_moe_blocks", "route_weights", "record_routes", "replay_routes", "router_margins",
           "routing_agreement", "margin_diagnostic", "allocate_ranks", "low_rank_compensation", "QuantizedExpertsWithAdapter",
           "prepare_qat", "replay_schedule", "RouteReplay"]


@dataclass
class MoEBlock:
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
    found when there is none (an unsupported layout, e.g. per-expert nn.Linear lists)."""
    blocks = [MoEBlock(name, mod, mod.gate, mod.experts, int(getattr(mod.gate, "top_k")))
              for name, mod in model.named_modules() if _is_block(mod) and hasattr(mod.gate, "top_k")]
    if not blocks:
        looks = sorted({type(m).__name__ for n, m in model.named_modules() if "expert" in n.lower() or "moe" in n.lower()})
        raise ValueError(f"{type(model).__name__}: no MoE block found (a module with .gate.weight (E, H), .gate.top_k and "
                         f".experts.gate_up_proj (E, 2I, H) / .down_proj (E, H, I)); modules named like experts: "
                         f"{looks or 'none'}")
    return blocks


def route_weights(gate: torch.nn.Module, logits: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """The gate weights of the experts ``indices`` from the router's current ``logits``, by
    the router's own rule: softmax probabilities, renormalized over the chosen experts when
    the router does (Mixtral always, Qwen3-MoE with ``norm_topk_prob``); for DeepSeek-V3's
    sigmoid router (it has ``e_score_correction_bias``), sigmoid scores, renormalized when
    ``norm_topk_prob``, times ``routed_scaling_factor``."""
    if hasattr(gate, "e_score_correction_bias"):
        w = logits.float().sigmoid().gather(1, indices)
        if getattr(gate, "norm_topk_prob", False):
            w = w / (w.sum(dim=-1, keepdim=True) + 1e-20)
        return w * gate.routed_scaling_factor
    w = torch.softmax(logits, dim=-1, dtype=torch.float).gather(1, indices)
    if getattr(gate, "norm_topk_prob", True):
        w = w / w.sum(dim=-1, keepdim=True)
    return w.to(logits.dtype)


@dataclass
class RouteLog:
    """Per block name, the router outputs of every forward call, in order."""

    indices: dict = field(default_factory=dict)
    logits: dict = field(default_factory=dict)


@contextmanager
def record_routes(blocks: list[MoEBlock]):
    """Record each router's top-k indices (and logits) on every call while inside."""
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


class RouteReplay:
    """Replay recorded routes: while ``active``, each replayed block's router keeps its
    current logits but its top-k set is the recorded one, and its weights are recomputed
    from the current logits over that set (:func:`route_weights`). Calls must come in the
    recorded order (the same batches); ``rewind()`` starts again. ``layers`` limits the
    replay to some blocks (limited replay); ``active`` can be switched per step."""

    def __init__(self, blocks: list[MoEBlock], log: RouteLog, layers=None):
        names = [b.name for b in blocks]
        self.layers = set(names if layers is None else layers)
        unknown = self.layers - set(names)
        if unknown:
            raise ValueError(f"unknown MoE blocks {sorted(unknown)}; known: {names}")
        self.log, self.active = log, True
        self._pos = dict.fromkeys(names, 0)
        self._handles = [b.gate.register_forward_hook(self._hook(b)) for b in blocks]

    def _hook(self, block):
        def hook(mod, args, out):
            pos = self._pos[block.name]
            self._pos[block.name] = pos + 1
            if not (self.active and block.name in self.layers):
                return out
            recorded = self.log.indices[block.name]
            if pos >= len(recorded):
                raise RuntimeError(f"{block.name}: call {pos + 1} has no recorded route ({len(recorded)} recorded)")
            idx = recorded[pos]
            if idx.shape != out[2].shape:
                raise RuntimeError(f"{block.name}: recorded route shape {tuple(idx.shape)} != {tuple(out[2].shape)}; "
                                   "replay the recorded batches in order")
            return out[0], route_weights(mod, out[0], idx).to(out[1].dtype), idx
        return hook

    def rewind(self):
        self.seek(0)

    def seek(self, call: int):
        """Continue from the ``call``-th recorded call (the batch index when one forward
        per batch was recorded)."""
        self._pos = dict.fromkeys(self._pos, int(call))

    def remove(self):
        for h in self._handles:
            h.remove()


@contextmanager
def replay_routes(blocks, log, layers=None):
    replay = RouteReplay(blocks, log, layers)
    try:
        yield replay
    finally:
        replay.remove()


def router_margins(logits: torch.Tensor, k: int) -> torch.Tensor:
    """m(x) = s_(k) − s_(k+1), the gap between the k-th and (k+1)-th largest logits per token.
    Any perturbation with 2·max_i |Δs_i| < m(x) keeps the top-k set (each chosen logit falls
    by less than m/2, each other rises by less than m/2)."""
    if not 0 < k < logits.shape[-1]:
        raise ValueError(f"need 0 < k < number of experts, got k={k}, E={logits.shape[-1]}")
    top = logits.topk(k + 1, dim=-1).values
    return top[..., k - 1] - top[..., k]


def margin_diagnostic(ref_logits: torch.Tensor, new_logits: torch.Tensor, k: int) -> dict:
    """How well the margin bound predicts routing flips between two routers' logits on the
    same tokens: ``predicted_flip`` is the fraction of tokens the bound cannot certify
    (2·max|Δs| ≥ m), ``measured_flip`` the fraction whose top-k set changed; the bound
    guarantees measured ≤ predicted. Also margin quantiles (10 %, 50 %, 90 %)."""
    m = router_margins(ref_logits.float(), k)
    delta = (new_logits.float() - ref_logits.float()).abs().amax(dim=-1)
    a = ref_logits.topk(k).indices.sort(-1).values
    b = new_logits.topk(k).indices.sort(-1).values
    q = torch.quantile(m, torch.tensor([0.1, 0.5, 0.9]))
    return {"predicted_flip": float((2 * delta >= m).float().mean()),
            "measured_flip": float((a != b).any(-1).float().mean()),
            "margin_q10": float(q[0]), "margin_q50": float(q[1]), "margin_q90": float(q[2])}


def routing_agreement(ref: torch.Tensor, other: torch.Tensor) -> dict:
    """Exact top-k set match rate and mean Jaccard index between two (tokens, k) routings."""
    E = int(max(ref.max(), other.max())) + 1
    a = torch.zeros(ref.shape[0], E, dtype=torch.bool).scatter_(1, ref, True)
    b = torch.zeros(other.shape[0], E, dtype=torch.bool).scatter_(1, other, True)
    inter, union = (a & b).sum(1).float(), (a | b).sum(1).float()
    return {"exact": float((inter == union).float().mean()), "jaccard": float((inter / union).mean())}


def allocate_ranks(singular_values: list[torch.Tensor], loads, budget: int) -> list[int]:
    """Ranks r_e with Σ r_e = budget (or every available direction, if fewer) maximizing
    Σ_e ℓ_e Σ_{i≤r_e} σ²_{e,i}: greedily, the largest marginal gain ℓ_e σ²_{e, r_e+1} next.
    Exact because each expert's gains are non-increasing in i (σ sorted descending), so the
    optimum takes a prefix of each expert's gains: the budget's largest gains overall."""
    loads = torch.as_tensor(loads, dtype=torch.float64)
    if len(singular_values) != len(loads) or torch.any(loads < 0) or not torch.isfinite(loads).all():
        raise ValueError("need one non-negative finite load per expert")
    if budget < 0:
        raise ValueError(f"budget must be >= 0, got {budget}")
    gains, owner = [], []
    for e, s in enumerate(singular_values):
        s = torch.as_tensor(s, dtype=torch.float64)
        if torch.any(s[1:] > s[:-1]):
            raise ValueError(f"expert {e}: singular values must be sorted in descending order")
        gains.append(loads[e] * s**2)
        owner.append(torch.full((len(s),), e))
    gains, owner = torch.cat(gains), torch.cat(owner)
    # ties: the stable sort keeps the lower expert and the earlier (larger-σ) direction first
    order = torch.sort(-gains, stable=True).indices[:budget]
    return torch.bincount(owner[order], minlength=len(singular_values)).tolist()


def low_rank_compensation(residual: torch.Tensor, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, A) with B A the best rank-``rank`` approximation of ``residual`` (Eckart–Young):
    B = U_r diag(σ_r)^{1/2}, A = diag(σ_r)^{1/2} V_rᵀ, balanced for adapter training."""
    if rank == 0:
        return residual.new_zeros(residual.shape[0], 0), residual.new_zeros(0, residual.shape[1])
    U, S, Vh = torch.linalg.svd(residual.double(), full_matrices=False)
    root = S[:rank].sqrt()
    return (U[:, :rank] * root).to(residual.dtype), (root[:, None] * Vh[:rank]).to(residual.dtype)


# --- quantization-aware training of expert adapters -------------------------------------------

class QuantizedExpertsWithAdapter(torch.nn.Module):
    """A parametrization of a fused expert weight W (E, out, in): Q(W) + B_e A_e per expert,
    Q the MXFP4 fake quantization of the frozen W (computed once), A and B the trainable
    adapter, of rank ``ranks[e]`` for expert e (padded to the largest rank and masked)."""

    def __init__(self, weight: torch.Tensor, ranks, init: str = "zeros", scale_mode: str = "floor"):
        super().__init__()
        from .mxfp4 import quantize_mxfp4

        E, out, inp = weight.shape
        ranks = [int(r) for r in ranks]
        if len(ranks) != E or min(ranks) < 0:
            raise ValueError(f"need {E} non-negative ranks, got {ranks}")
        r = max(ranks + [1])
        with torch.no_grad():
            base = quantize_mxfp4(weight.detach(), scale_mode=scale_mode).dequantize(weight.dtype)
        self.register_buffer("base", base)
        mask = (torch.arange(r)[None, :] < torch.tensor(ranks)[:, None]).to(weight.dtype)  # (E, r)
        self.register_buffer("mask", mask)
        A = torch.zeros(E, r, inp, dtype=weight.dtype)
        B = torch.zeros(E, out, r, dtype=weight.dtype)
        if init == "residual":  # the best rank-r_e approximation of the quantization residual
            for e, re in enumerate(ranks):
                Be, Ae = low_rank_compensation((weight.detach()[e] - base[e]), re)
                B[e, :, :re], A[e, :re] = Be, Ae
        elif init == "zeros":  # LoRA's start: B = 0, A small random, so Q(W) is the start
            A.normal_(0, inp**-0.5)
        else:
            raise ValueError(f"init must be 'zeros' or 'residual', got {init!r}")
        self.A, self.B = torch.nn.Parameter(A), torch.nn.Parameter(B)

    def forward(self, weight):
        return self.base + (self.B * self.mask[:, None, :]) @ (self.A * self.mask[:, :, None])


def prepare_qat(model: torch.nn.Module, ranks: dict | int = 4, init: str = "zeros", scale_mode: str = "floor"):
    """Fake-quantize every MoE block's experts to MXFP4 and give them trainable adapters;
    freeze everything else (routers included). ``ranks``: one int for every expert, or a
    dict of per-expert rank lists (from :func:`allocate_ranks`) keyed by block name or by
    ``"{block}.gate_up_proj"`` / ``"{block}.down_proj"``. Returns the adapter parameters
    (what the optimizer should get)."""
    from torch.nn.utils import parametrize

    blocks = find_moe_blocks(model)
    for p in model.parameters():
        p.requires_grad_(False)
    adapters = []
    for b in blocks:
        for pname in ("gate_up_proj", "down_proj"):
            if isinstance(ranks, int):
                per_expert = [ranks] * b.num_experts
            elif f"{b.name}.{pname}" in ranks:
                per_expert = ranks[f"{b.name}.{pname}"]
            elif b.name in ranks:
                per_expert = ranks[b.name]
            else:
                raise KeyError(f"no ranks given for {b.name} ({pname})")
            param = getattr(b.experts, pname)
            adapter = QuantizedExpertsWithAdapter(param, per_expert, init, scale_mode)
            parametrize.register_parametrization(b.experts, pname, adapter, unsafe=True)
            adapters += [adapter.A, adapter.B]
    return adapters


def replay_schedule(step: int, steps: int, fraction: float) -> bool:
    """Limited replay over steps: replay during the first ``fraction`` of the steps."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be in [0, 1], got {fraction!r}")
    return step < round(fraction * steps)
