"""Instability indicators of a transformer (HyperP's "transferable stability"), as forward
hooks that work in any training or evaluation loop:

* ``block_rms``: RMS of each decoder block's output (the residual stream), mean over blocks;
* ``outlier_share``: share of block-output entries more than 5 standard deviations from
  their tensor's mean (activation outliers), mean over blocks;
* ``lm_head_z``, ``router_z``, ``attention_z``: Z-values, the mean over rows of
  logsumexp(logits)², of the LM head's logits, the MoE routers' logits and the attention
  scores (causal, per head and query).

The attention scores are not returned by the fused attention kernels, so they are recomputed
from the attention module's input: q/k projections, the optional q/k norms (Qwen3), rotary
embedding and grouped keys of the Llama family's attention (Llama, Granite, Qwen3, Mixtral),
scaled by the module's ``scaling``. Usage::

    with InstabilityMonitor(model) as mon:
        model(input_ids)
    mon.summary()   # {"block_rms": ..., "outlier_share": ..., "lm_head_z": ..., ...}

The hooks only read (detached) tensors and keep per-call 0-d tensors; :meth:`summary` does
the one host read.
"""

from __future__ import annotations

import torch

from ..moe import find_routers

__all__ = ["InstabilityMonitor", "z_value", "outlier_share", "rms", "attention_scores"]


def z_value(logits: torch.Tensor) -> torch.Tensor:
    """Mean over rows of logsumexp(logits)² over the last dimension (-inf entries are
    masked ones); a 0-d float32 tensor."""
    if not isinstance(logits, torch.Tensor) or not logits.is_floating_point() or logits.ndim < 1:
        raise TypeError(f"logits must be a floating-point tensor, got {type(logits).__name__}")
    return torch.logsumexp(logits.float(), dim=-1).square().mean()


def outlier_share(x: torch.Tensor, k: float = 5.0) -> torch.Tensor:
    """Share of the entries of ``x`` farther than ``k`` standard deviations from its mean."""
    x = x.float()
    return ((x - x.mean()).abs() > k * x.std()).float().mean()


def rms(x: torch.Tensor) -> torch.Tensor:
    return x.float().square().mean().sqrt()


def _rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


def attention_scores(attn: torch.nn.Module, hidden: torch.Tensor, position_embeddings=None) -> torch.Tensor:
    """The causal attention scores (B, heads, T, T) of a Llama-family attention module for
    its input ``hidden`` (B, T, H) and the (cos, sin) rotary ``position_embeddings``
    (masked entries -inf): their softmax is the module's attention weights."""
    B, T, _ = hidden.shape
    hd = attn.head_dim
    q = attn.q_proj(hidden).view(B, T, -1, hd)
    k = attn.k_proj(hidden).view(B, T, -1, hd)
    if hasattr(attn, "q_norm"):
        q, k = attn.q_norm(q), attn.k_norm(k)
    q, k = q.transpose(1, 2), k.transpose(1, 2)
    if position_embeddings is not None:
        cos, sin = position_embeddings
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
    k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
    scores = (q.float() @ k.float().mT) * attn.scaling
    mask = torch.ones(T, T, dtype=torch.bool, device=hidden.device).triu(1)
    return scores.masked_fill(mask, float("-inf"))


class InstabilityMonitor:
    """Forward hooks that collect the instability indicators of ``model`` while enabled.

    Args:
        model: a ``transformers`` causal LM (decoder blocks in a ``layers`` ModuleList, an
            output embedding, optionally MoE routers) or any module, with ``blocks`` /
            ``lm_head`` given.
        blocks: the modules whose outputs are the residual stream (None: every child of the
            first ModuleList named ``layers``).
        lm_head: the output projection (None: ``model.get_output_embeddings()``).
        attention: also compute the attention Z (one extra q/k projection per block).
    """

    def __init__(self, model: torch.nn.Module, blocks=None, lm_head=None, attention: bool = True):
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        if blocks is None:
            lists = [m for n, m in model.named_modules() if n.split(".")[-1] == "layers"
                     and isinstance(m, torch.nn.ModuleList)]
            if not lists:
                raise ValueError(f"{type(model).__name__}: no ModuleList named 'layers'; pass blocks=")
            blocks = list(lists[0])
        self.blocks = list(blocks)
        if lm_head is None and hasattr(model, "get_output_embeddings"):
            lm_head = model.get_output_embeddings()
        self.lm_head = lm_head
        try:
            self.routers = find_routers(model)
        except TypeError:
            self.routers = []
        self.attention = [getattr(b, "self_attn") for b in self.blocks if hasattr(b, "self_attn")] if attention else []
        self._values: dict[str, list] = {}
        self._handles: list = []

    # --- hooks --------------------------------------------------------------------------
    def _add(self, key, value):
        self._values.setdefault(key, []).append(value.detach())

    def enable(self) -> "InstabilityMonitor":
        if self._handles:
            return self

        def block_hook(mod, args, out):
            h = out[0] if isinstance(out, tuple) else out
            self._add("block_rms", rms(h))
            self._add("outlier_share", outlier_share(h))

        for b in self.blocks:
            self._handles.append(b.register_forward_hook(block_hook))
        if self.lm_head is not None:
            self._handles.append(self.lm_head.register_forward_hook(lambda m, a, out: self._add("lm_head_z", z_value(out))))
        for r in self.routers:
            self._handles.append(r.module.register_forward_hook(
                lambda m, a, out, at=r.logits_at: self._add("router_z", z_value(out[at]))))

        def attn_hook(mod, args, kwargs):
            hidden = kwargs.get("hidden_states", args[0] if args else None)
            with torch.no_grad():
                self._add("attention_z", z_value(attention_scores(mod, hidden, kwargs.get("position_embeddings"))))

        for a in self.attention:
            self._handles.append(a.register_forward_pre_hook(attn_hook, with_kwargs=True))
        return self

    def disable(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []

    def __enter__(self) -> "InstabilityMonitor":
        return self.enable()

    def __exit__(self, *exc) -> None:
        self.disable()

    def reset(self) -> None:
        self._values = {}

    def summary(self) -> dict[str, float]:
        """The mean of every indicator over the calls recorded since the last :meth:`reset`."""
        return {k: float(torch.stack(v).mean()) for k, v in self._values.items() if v}
