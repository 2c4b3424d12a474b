"""MoE quantization pieces: replaying recorded routes, the router-margin consistency
diagnostic, load-aware rank allocation for low-rank compensation of the quantization
residual, and quantization-aware training of expert adapters with limited routing replay.

The MoE structure itself (finding blocks, gate weights, recording routes, load and routing
statistics) lives in :mod:`neurips26.moe`: a block's router returns (logits (T, E), top-k
weights (T, k), top-k indices (T, k)) and its fused experts hold ``gate_up_proj``
(E, 2I, H) and ``down_proj`` (E, H, I).
"""

from __future__ import annotations

import math
import numbers
import operator
from contextlib import contextmanager
from typing import Mapping, Sequence

import torch

from ..moe import MoEBlock, RouteLog, find_moe_blocks, route_weights

__all__ = ["replay_routes", "router_margins", "margin_diagnostic", "allocate_ranks", "low_rank_compensation",
           "QuantizedExpertsWithAdapter", "prepare_qat", "replay_schedule", "RouteReplay", "residual_spectra",
           "distill_adapters"]


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
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise TypeError(f"k must be an int, got {k!r} of type {type(k).__name__}")
    if not 0 < k < logits.shape[-1]:
        raise ValueError(f"need 0 < k < number of experts, got k={k}, E={logits.shape[-1]}")
    top = logits.topk(k + 1, dim=-1).values
    return top[..., k - 1] - top[..., k]


def margin_diagnostic(ref_logits: torch.Tensor, new_logits: torch.Tensor, k: int) -> dict:
    """How well the margin bound predicts routing flips between two routers' logits on the
    same tokens: ``predicted_flip`` is the fraction of tokens the bound cannot certify
    (2·max|Δs| ≥ m), ``measured_flip`` the fraction whose top-k set changed; the bound
    guarantees measured ≤ predicted. Also margin quantiles (10 %, 50 %, 90 %)."""
    if not isinstance(ref_logits, torch.Tensor) or ref_logits.ndim != 2:
        raise ValueError(f"ref_logits must be a (tokens, E) tensor, got {getattr(ref_logits, 'shape', ref_logits)!r}")
    if not isinstance(new_logits, torch.Tensor) or new_logits.shape != ref_logits.shape:
        raise ValueError(f"new_logits must have ref_logits' shape {tuple(ref_logits.shape)}, got "
                         f"{tuple(getattr(new_logits, 'shape', ()))}")
    if ref_logits.shape[0] == 0:
        raise ValueError("ref_logits and new_logits are empty (no tokens)")
    for name, t in (("ref_logits", ref_logits), ("new_logits", new_logits)):
        if not torch.isfinite(t).all():
            raise ValueError(f"{name} holds NaN or inf values")
    m = router_margins(ref_logits.float(), k)
    delta = (new_logits.float() - ref_logits.float()).abs().amax(dim=-1)
    a = ref_logits.topk(k).indices.sort(-1).values
    b = new_logits.topk(k).indices.sort(-1).values
    q = torch.quantile(m, torch.tensor([0.1, 0.5, 0.9]))
    return {"predicted_flip": float((2 * delta >= m).float().mean()),
            "measured_flip": float((a != b).any(-1).float().mean()),
            "margin_q10": float(q[0]), "margin_q50": float(q[1]), "margin_q90": float(q[2])}


def allocate_ranks(singular_values: list[torch.Tensor], loads, budget: int) -> list[int]:
    """Ranks r_e with Σ r_e = budget (or every available direction, if fewer) maximizing
    Σ_e ℓ_e Σ_{i≤r_e} σ²_{e,i}: greedily, the largest marginal gain ℓ_e σ²_{e, r_e+1} next.
    Exact because each expert's gains are non-increasing in i (σ sorted descending), so the
    optimum takes a prefix of each expert's gains: the budget's largest gains overall.

    ``singular_values[e]`` is expert e's 1-D spectrum (finite, >= 0, descending), ``loads``
    one finite load >= 0 per expert, ``budget`` an int >= 0."""
    if isinstance(budget, bool) or not isinstance(budget, numbers.Integral):
        raise TypeError(f"budget must be an int >= 0, got {budget!r} of type {type(budget).__name__}")
    if budget < 0:
        raise ValueError(f"budget must be >= 0, got {budget}")
    budget = int(budget)
    loads = torch.as_tensor(loads, dtype=torch.float64)
    if loads.ndim != 1 or len(singular_values) != len(loads):
        raise ValueError(f"loads must hold one load per expert: {len(singular_values)} experts, got loads of shape "
                         f"{tuple(loads.shape)}")
    if torch.any(loads < 0) or not torch.isfinite(loads).all():
        raise ValueError(f"loads must be finite and >= 0, got {loads.tolist()}")
    if len(singular_values) == 0:
        return []
    gains, owner = [], []
    for e, s in enumerate(singular_values):
        s = torch.as_tensor(s, dtype=torch.float64)
        if s.ndim != 1:
            raise ValueError(f"singular_values[{e}] (expert {e}) must be 1-D, got shape {tuple(s.shape)}")
        if not torch.isfinite(s).all() or torch.any(s < 0):
            raise ValueError(f"singular_values[{e}] (expert {e}) must be finite and >= 0")
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
    B = U_r diag(σ_r)^{1/2}, A = diag(σ_r)^{1/2} V_rᵀ, balanced for adapter training.
    ``residual`` is a finite (m, n) matrix, ``rank`` an int in [0, min(m, n)]."""
    if not isinstance(residual, torch.Tensor) or residual.ndim != 2 or not residual.is_floating_point():
        raise ValueError(f"residual must be a floating-point (m, n) matrix, got "
                         f"{getattr(residual, 'dtype', type(residual).__name__)} {tuple(getattr(residual, 'shape', ()))}")
    if isinstance(rank, bool) or not isinstance(rank, numbers.Integral):
        raise TypeError(f"rank must be an int, got {rank!r} of type {type(rank).__name__}")
    if not 0 <= rank <= min(residual.shape):
        raise ValueError(f"rank must be in [0, min(m, n)] = [0, {min(residual.shape)}], got {rank}")
    if not torch.isfinite(residual).all():
        raise ValueError("residual holds NaN or inf values")
    rank = int(rank)
    if rank == 0:
        return residual.new_zeros(residual.shape[0], 0), residual.new_zeros(0, residual.shape[1])
    U, S, Vh = torch.linalg.svd(residual.double(), full_matrices=False)
    root = S[:rank].sqrt()
    return (U[:, :rank] * root).to(residual.dtype), (root[:, None] * Vh[:rank]).to(residual.dtype)


# --- quantization-aware training of expert adapters -------------------------------------------

def _check_ranks(ranks, E: int, what: str = "ranks") -> list[int]:
    """One int rank >= 0 per expert."""
    try:
        items = list(ranks)
        if any(isinstance(r, bool) for r in items):
            raise TypeError
        out = [operator.index(r) for r in items]
    except TypeError:
        raise TypeError(f"{what} must be a list of {E} ints (one rank per expert), got {ranks!r}") from None
    if len(out) != E or min(out, default=0) < 0:
        raise ValueError(f"{what}: need {E} non-negative ranks, got {out}")
    return out


def _check_weight(weight, what: str = "weight") -> None:
    if not isinstance(weight, torch.Tensor) or weight.ndim != 3 or not weight.is_floating_point():
        raise ValueError(f"{what} must be a floating-point fused expert weight (E, out, in), got "
                         f"{getattr(weight, 'dtype', type(weight).__name__)} {tuple(getattr(weight, 'shape', ()))}")
    if not torch.isfinite(weight).all():
        raise ValueError(f"{what} holds NaN or inf values: its MXFP4 blocks would be NaN")


class QuantizedExpertsWithAdapter(torch.nn.Module):
    """A parametrization of a fused expert weight W (E, out, in): Q(W) + B_e A_e per expert,
    Q the MXFP4 fake quantization of the frozen W (computed once), A and B the trainable
    adapter, of rank ``ranks[e]`` for expert e (padded to the largest rank and masked).
    ``weight`` must be finite; ``init="residual"`` needs every rank <= min(out, in)."""

    def __init__(self, weight: torch.Tensor, ranks, init: str = "zeros", scale_mode: str = "floor"):
        super().__init__()
        from .mxfp4 import quantize_mxfp4

        _check_weight(weight)
        E, out, inp = weight.shape
        ranks = _check_ranks(ranks, E)
        if init not in ("zeros", "residual"):
            raise ValueError(f"init must be 'zeros' or 'residual', got {init!r}")
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
    (what the optimizer should get). Everything is checked (ranks, ``init``,
    ``scale_mode``, finite expert weights) before the model is touched: on an error it is
    left as it was."""
    from torch.nn.utils import parametrize

    blocks = find_moe_blocks(model)
    if isinstance(ranks, bool) or not isinstance(ranks, (numbers.Integral, Mapping)):
        raise TypeError(f"ranks must be an int or a dict of per-expert rank lists, got {ranks!r}")
    if init not in ("zeros", "residual"):
        raise ValueError(f"init must be 'zeros' or 'residual', got {init!r}")
    if scale_mode not in ("floor", "rceil"):
        raise ValueError(f"scale_mode must be 'floor' or 'rceil', got {scale_mode!r}")
    plan = []
    for b in blocks:
        for pname in ("gate_up_proj", "down_proj"):
            key = f"{b.name}.{pname}"
            if isinstance(ranks, numbers.Integral):
                per_expert = _check_ranks([int(ranks)] * b.num_experts, b.num_experts)
            elif key in ranks or b.name in ranks:
                per_expert = _check_ranks(ranks[key] if key in ranks else ranks[b.name], b.num_experts,
                                          f"ranks[{key if key in ranks else b.name!r}]")
            else:
                raise ValueError(f"ranks gives no ranks for {key}: give them under {key!r} or {b.name!r}")
            param = getattr(b.experts, pname)
            _check_weight(param, key)
            if init == "residual" and max(per_expert, default=0) > min(param.shape[1:]):
                raise ValueError(f"ranks for {key}: init='residual' needs ranks <= {min(param.shape[1:])}, "
                                 f"got {per_expert}")
            plan.append((b, pname, per_expert))
    for p in model.parameters():
        p.requires_grad_(False)
    adapters = []
    for b, pname, per_expert in plan:
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


def _has_adapter(experts: torch.nn.Module, pname: str) -> bool:
    from torch.nn.utils import parametrize

    return parametrize.is_parametrized(experts, pname) and any(
        isinstance(p, QuantizedExpertsWithAdapter) for p in experts.parametrizations[pname])


def residual_spectra(model: torch.nn.Module, scale_mode: str = "floor") -> dict[str, list[torch.Tensor]]:
    """The singular values of every expert's MXFP4 quantization residual W_e − Q(W_e), in
    float64 and descending: ``{"{block}.gate_up_proj": [σ_e (min(2I, H),) per expert],
    "{block}.down_proj": [...]}``, keyed as :func:`prepare_qat` reads per-expert ranks (so
    that :func:`allocate_ranks` can turn them into ranks)."""
    from .mxfp4 import fake_quantize_mxfp4

    if scale_mode not in ("floor", "rceil"):
        raise ValueError(f"scale_mode must be 'floor' or 'rceil', got {scale_mode!r}")
    out = {}
    for b in find_moe_blocks(model):
        for pname in ("gate_up_proj", "down_proj"):
            W = getattr(b.experts, pname).detach()
            out[f"{b.name}.{pname}"] = [torch.linalg.svdvals((W[e] - fake_quantize_mxfp4(W[e], scale_mode=scale_mode))
                                                             .double()) for e in range(W.shape[0])]
    return out


def distill_adapters(student: torch.nn.Module, teacher: torch.nn.Module, batches: Sequence[torch.Tensor],
                     steps: int, *, routes: RouteLog | None = None, replay_fraction: float = 1.0,
                     lr: float = 3e-3) -> list[float]:
    """Quantization-aware training of the adapters of ``student`` (a model prepared by
    :func:`prepare_qat`: only the adapters train, routers frozen) to recover ``teacher``
    (the unquantized model): Adam on KL(teacher ‖ student) between the next-token
    distributions, a distillation loss, so that QAT cannot beat the reference merely by
    training the model further.

    Args:
        student: the quantized model with trainable adapters; trained in place, left in
            eval mode.
        teacher: the reference model (called under no_grad, its mode is not changed).
        batches: token-id tensors (B, T); step t trains on ``batches[t % len(batches)]``.
        steps: the number of optimizer steps.
        routes: with limited routing replay, the teacher's routes recorded by
            :func:`~neurips26.moe.record_routes` over ``batches``, one forward per batch in
            order; during the first ``replay_fraction`` of the steps each router's top-k
            set is the recorded one (:class:`RouteReplay`, :func:`replay_schedule`).
            None: no replay.
        replay_fraction: the share of the steps with replay, in [0, 1].
        lr: Adam's learning rate.

    Returns the loss of every step.
    """
    if isinstance(steps, bool) or not (isinstance(steps, numbers.Integral) and steps >= 0):
        raise ValueError(f"steps must be an int >= 0, got {steps!r}")
    steps = int(steps)
    if len(batches) == 0:
        raise ValueError("batches is empty")
    if isinstance(lr, bool) or not isinstance(lr, numbers.Real) or not (math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a finite float > 0, got {lr!r}")
    if not 0.0 <= replay_fraction <= 1.0:
        raise ValueError(f"replay_fraction must be in [0, 1], got {replay_fraction!r}")
    blocks = find_moe_blocks(student)
    if not all(_has_adapter(b.experts, pname) for b in blocks for pname in ("gate_up_proj", "down_proj")):
        raise ValueError("student's experts carry no adapters: give them adapters with prepare_qat first")
    adapters = [p for p in student.parameters() if p.requires_grad]
    if routes is not None:
        for b in blocks:
            recorded = len(routes.indices.get(b.name, []))
            if recorded < len(batches):
                raise ValueError(f"routes holds {recorded} recorded calls of block {b.name!r}, need one per batch "
                                 f"({len(batches)})")
    with torch.no_grad():
        targets = [torch.log_softmax(teacher(ids).logits, dim=-1) for ids in batches]
    opt = torch.optim.Adam(adapters, lr=lr)
    replay = RouteReplay(blocks, routes) if routes is not None else None
    losses = []
    student.train()
    try:
        for step in range(steps):
            ids = batches[step % len(batches)]
            if replay is not None:
                replay.seek(step % len(batches))  # routes were recorded one forward per batch
                replay.active = replay_schedule(step, steps, replay_fraction)
            logp = torch.log_softmax(student(ids).logits, dim=-1)
            target = targets[step % len(batches)]
            loss = torch.nn.functional.kl_div(logp, target, log_target=True, reduction="batchmean")
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
    finally:
        if replay is not None:
            replay.remove()
    student.eval()
    return losses
