"""W4A8 for MoE experts: MXFP4 weights (4.25 bits stored), FP8 (e4m3) activations, FP8
matmuls through ``torch._scaled_mm`` (tensor cores on sm89+ GPUs, a reference kernel on CPU).

FP8 matmuls take one scale per row of each operand, while MXFP4 has one per block of 32
along the reduction dimension. The block scales are powers of two, so they fold into the
FP8 values: a weight row keeps its largest block exponent e_row as the row scale and each
element becomes e2m1 · 2^(e_block − e_row) in e4m3. E2M1 values have at most two significant
bits, so this is exact as long as e_block − e_row ≥ −8 (e4m3's smallest subnormal step is
2^-9); blocks more than 8 binades below their row's largest round to e4m3 (their elements
are then below 2^-8 of the row's magnitude). Activations are quantized per token to e4m3
with a dynamic scale amax / 448.

``W4A8Experts`` replaces a transformers-5 fused experts module (``gate_up_proj`` (E, 2I, H),
``down_proj`` (E, H, I)) and keeps its forward signature. With ``cache_fp8=True`` the
folded FP8 weights are kept (8 bits + one scale per row: the fast path); with False only
the packed MXFP4 data is kept and each hit expert is unfolded to FP8 on every call.
"""

from __future__ import annotations

import torch

from ..moe import find_moe_blocks
from .mxfp4 import MXFP4Tensor, quantize_mxfp4

__all__ = ["FP8_MAX", "mxfp4_to_fp8", "quantize_fp8_rows", "w4a8_matmul", "W4A8Experts", "quantize_moe_w4a8"]

FP8_MAX = 448.0  # largest finite float8_e4m3fn


def mxfp4_to_fp8(t: MXFP4Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(W8, row scale): W8 (…, N, K) float8_e4m3fn and a float32 (…, N, 1) power of two with
    W8 · scale equal to ``t.dequantize()`` (module docstring for the exact range)."""
    if not isinstance(t, MXFP4Tensor):
        raise TypeError(f"t must be an MXFP4Tensor, got {type(t).__name__}")
    if (t.scales == 255).any():
        raise ValueError("the MXFP4 tensor has NaN scales (code 255): its source had non-finite values")
    exps = t.scales.to(torch.int32) - 127
    row_exp = exps.amax(dim=-1, keepdim=True)
    scale = torch.exp2(row_exp.to(torch.float64))
    w = (t.dequantize(torch.float64) / scale).to(torch.float8_e4m3fn)
    return w, scale.to(torch.float32)


def quantize_fp8_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row dynamic e4m3 quantization of a 2-D ``x``: (x8, scale (M, 1) float32), x ≈ x8 · scale.
    An empty ``x`` gives an empty x8 and scales of 1; NaN or inf values are refused."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.ndim != 2:
        raise ValueError(f"x: expected a 2-D activation matrix, got shape {tuple(x.shape)}")
    if x.shape[1] == 0:
        return x.to(torch.float8_e4m3fn), torch.ones(x.shape[0], 1, dtype=torch.float32, device=x.device)
    amax = x.abs().amax(dim=1, keepdim=True).to(torch.float32)
    if not torch.isfinite(amax).all():
        raise ValueError("x (the activations) holds NaN or inf values")
    scale = torch.where(amax > 0, amax / FP8_MAX, torch.ones_like(amax))
    return (x.to(torch.float32) / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), scale


def w4a8_matmul(x: torch.Tensor, w8: torch.Tensor, w_scale: torch.Tensor,
                out_dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    """x (M, K) @ W.T for W = w8 · w_scale (N, K): x quantized per row to e4m3, one FP8 matmul."""
    if not isinstance(w8, torch.Tensor) or w8.dtype != torch.float8_e4m3fn or w8.ndim != 2:
        got = f"{w8.dtype} {tuple(w8.shape)}" if isinstance(w8, torch.Tensor) else type(w8).__name__
        raise TypeError(f"w8 must be a 2-D float8_e4m3fn tensor (N, K) (from mxfp4_to_fp8), got {got}")
    if isinstance(x, torch.Tensor) and x.ndim == 2 and x.shape[1] != w8.shape[1]:
        raise ValueError(f"x (M, K) and w8 (N, K) disagree on K: x {tuple(x.shape)}, w8 {tuple(w8.shape)}")
    if not isinstance(w_scale, torch.Tensor) or w_scale.numel() != w8.shape[0] or w_scale.dtype != torch.float32:
        got = f"{w_scale.dtype} {tuple(w_scale.shape)}" if isinstance(w_scale, torch.Tensor) else type(w_scale).__name__
        raise ValueError(f"w_scale must be float32 with one scale per row of w8 ({w8.shape[0]}, 1), got {got}")
    x8, x_scale = quantize_fp8_rows(x)
    return torch._scaled_mm(x8, w8.t(), scale_a=x_scale, scale_b=w_scale.reshape(1, -1), out_dtype=out_dtype)


class W4A8Experts(torch.nn.Module):
    """Drop-in for a fused experts module, with MXFP4 weights and FP8 activations."""

    def __init__(self, experts: torch.nn.Module, cache_fp8: bool = True, out_dtype: torch.dtype | None = None):
        super().__init__()
        if not all(isinstance(getattr(experts, n, None), torch.Tensor) for n in ("gate_up_proj", "down_proj")) \
                or not callable(getattr(experts, "act_fn", None)):
            raise TypeError(f"experts must be a fused experts module (gate_up_proj (E, 2I, H), down_proj (E, H, I), "
                            f"act_fn), got {type(experts).__name__}")
        gate_up, down = experts.gate_up_proj.detach(), experts.down_proj.detach()
        if gate_up.ndim != 3 or down.ndim != 3 or gate_up.shape[0] != down.shape[0]:
            raise ValueError(f"expected fused experts gate_up_proj (E, 2I, H) and down_proj (E, H, I), got "
                             f"{tuple(gate_up.shape)} and {tuple(down.shape)}")
        for name, w in (("gate_up_proj", gate_up), ("down_proj", down)):
            if w.shape[-1] % 32 or w.shape[-2] % 16:
                raise ValueError(f"{name} {tuple(w.shape)}: FP8 matmuls need the reduction dim a multiple of 32 "
                                 "(MXFP4 blocks) and the output dim a multiple of 16")
            if not torch.isfinite(w).all():
                raise ValueError(f"{name} holds NaN or inf values: their MXFP4 blocks would be NaN")
        self.num_experts = gate_up.shape[0]
        self.act_fn = experts.act_fn
        self.cache_fp8 = cache_fp8
        self.out_dtype = out_dtype or gate_up.dtype
        self._layout = {}
        for key, w in (("gate_up", gate_up), ("down", down)):
            t = quantize_mxfp4(w.float())
            self._layout[key] = (tuple(t.shape[1:]), t.block)
            if cache_fp8:  # keep only the folded copy the matmuls read
                w8, scale = mxfp4_to_fp8(t)
                self.register_buffer(f"{key}_w8", w8)
                self.register_buffer(f"{key}_scale", scale)
            else:
                self.register_buffer(f"{key}_packed", t.packed)
                self.register_buffer(f"{key}_codes", t.scales)

    def _weights(self, key: str, e: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.cache_fp8:
            return getattr(self, f"{key}_w8")[e], getattr(self, f"{key}_scale")[e]
        shape, block = self._layout[key]
        return mxfp4_to_fp8(MXFP4Tensor(getattr(self, f"{key}_packed")[e], getattr(self, f"{key}_codes")[e], shape, block))

    def storage_bytes(self) -> int:
        return sum(b.numel() * b.element_size() for b in self.buffers())

    def forward(self, hidden_states: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor):
        out = torch.zeros_like(hidden_states)
        with torch.no_grad():
            mask = torch.nn.functional.one_hot(top_k_index, num_classes=self.num_experts).permute(2, 1, 0)
            hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero()[:, 0].tolist()
        for e in hit:
            pos, tokens = torch.where(mask[e])
            gate_up = w4a8_matmul(hidden_states[tokens], *self._weights("gate_up", e), out_dtype=self.out_dtype)
            gate, up = gate_up.chunk(2, dim=-1)
            h = w4a8_matmul(self.act_fn(gate) * up, *self._weights("down", e), out_dtype=self.out_dtype)
            out.index_add_(0, tokens, (h * top_k_weights[tokens, pos, None]).to(out.dtype))
        return out


def quantize_moe_w4a8(model: torch.nn.Module, cache_fp8: bool = True) -> list[str]:
    """Replace every MoE block's fused experts by :class:`W4A8Experts`, in place; returns the
    block names. Routers, attention and shared experts stay in the model's precision."""
    blocks = find_moe_blocks(model)
    for b in blocks:
        b.module.experts = W4A8Experts(b.experts, cache_fp8=cache_fp8)
    return [b.name for b in blocks]
