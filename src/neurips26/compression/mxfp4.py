"""MXFP4, exact to the OCP Microscaling (MX) v1.0 specification.

A block of 32 consecutive values along the last dimension shares one E8M0 scale (an 8-bit
biased power of two, 2^(code − 127), code 255 = NaN); each value is an FP4 E2M1 element
(sign, 2 exponent bits, 1 mantissa bit: ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}, no Inf or NaN).

Scale (``scale_mode="floor"``, the specification's rule): e = ⌊log₂ amax⌋ − 2, where 2 is
the exponent of E2M1's largest power of two (4), clamped to [−127, 127]. ⌊log₂ amax⌋ is read
from the float's bits (``torch.frexp``), not computed as ``floor(log2(amax))``, whose
rounding lands on the next integer for all-ones mantissas. A zero block gets code 0; a block
whose amax is NaN or ±Inf gets the NaN code 255 (the whole block decodes to NaN).
``scale_mode="rceil"``: the scale is amax / 6 rounded up to a power of two (no element
saturates), e = ⌈log₂(amax / 6)⌉, again from the bits.

Elements: x · 2^(−e), rounded to the nearest E2M1 value, ties to the even encoding, and
saturated at ±6. Packing: two elements per byte, the even index in the low nibble.
Last dimensions that are not a multiple of the block are zero-padded for quantization
and the padding is dropped on dequantization; nothing is truncated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = ["MXFP4Tensor", "quantize_mxfp4", "fake_quantize_mxfp4", "E2M1_VALUES"]

E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
_E2M1_MAX_POW2 = 2
_NAN_SCALE = 255


@dataclass(frozen=True)
class MXFP4Tensor:
    """Packed MXFP4 data: ``packed`` uint8 (..., padded/2), ``scales`` uint8 E8M0 codes
    (..., padded/block), the original ``shape`` and ``block``."""

    packed: torch.Tensor
    scales: torch.Tensor
    shape: tuple
    block: int = 32

    @property
    def bits_per_element(self) -> float:
        """Storage bits per original element (4.25 for blocks of 32 without padding)."""
        return 8.0 * (self.packed.numel() + self.scales.numel()) / math.prod(self.shape)

    def codes(self) -> torch.Tensor:
        """The unpacked 4-bit element codes (..., padded) as uint8."""
        low, high = self.packed & 0x0F, self.packed >> 4
        return torch.stack([low, high], dim=-1).reshape(*self.packed.shape[:-1], -1)

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        codes = self.codes()
        grid = torch.tensor(E2M1_VALUES, dtype=torch.float64, device=codes.device)
        mag = grid[(codes & 0x7).long()]
        vals = torch.where((codes & 0x8).bool(), -mag, mag)
        exps = self.scales.to(torch.float64) - 127.0
        scale = torch.where(self.scales == _NAN_SCALE, torch.nan, torch.exp2(exps))
        out = (vals.reshape(*vals.shape[:-1], -1, self.block) * scale[..., None]).reshape(vals.shape)
        return out[..., : self.shape[-1]].to(dtype)


def _floor_log2(a: torch.Tensor) -> torch.Tensor:
    """⌊log₂ a⌋ of positive finite float32 values from their bits (normal and subnormal)."""
    mantissa, exponent = torch.frexp(a)  # a = m · 2^E, m ∈ [0.5, 1)
    return exponent.to(torch.int32) - 1, mantissa


def _scale_codes(amax: torch.Tensor, mode: str) -> torch.Tensor:
    finite = torch.isfinite(amax)
    positive = finite & (amax > 0)
    safe = torch.where(positive, amax, torch.ones_like(amax))
    if mode == "floor":
        e = _floor_log2(safe)[0] - _E2M1_MAX_POW2
    else:  # rceil: ⌈log₂(amax / 6)⌉
        floor, mantissa = _floor_log2(safe / 6.0)
        e = floor + (mantissa != 0.5).to(torch.int32)
    code = (e.clamp(-127, 127) + 127).to(torch.uint8)
    code = torch.where(positive, code, torch.zeros_like(code))
    return torch.where(finite, code, torch.full_like(code, _NAN_SCALE))


def _round_e2m1(q: torch.Tensor) -> torch.Tensor:
    """4-bit codes of the nearest E2M1 values to q (ties to even), saturating at ±6.

    E2M1 is evenly spaced per binade: steps of 0.5 below 2 (codes 0–4), of 1 in [2, 4]
    (codes 4–6), of 2 above (codes 6–7). torch.round rounds half to even, and on each
    segment an even rounded value is an even code, so one round per segment is the
    specification's round-to-nearest-even."""
    a = q.abs()
    code = torch.where(a < 2, torch.round(2 * a), torch.where(a < 4, torch.round(a) + 2, torch.round(a / 2) + 4))
    code = torch.nan_to_num(code, nan=0.0).clamp_(max=7).to(torch.uint8)
    return code | (torch.signbit(q).to(torch.uint8) << 3)


def _check_block(block) -> int:
    if not (isinstance(block, int) and not isinstance(block, bool) and block > 0 and block % 2 == 0):
        raise ValueError(f"block must be a positive even int (MX uses 32), got {block!r}")
    return block


def quantize_mxfp4(x: torch.Tensor, block: int = 32, scale_mode: str = "floor") -> MXFP4Tensor:
    """Quantize ``x`` (any float dtype, at least 1-D) to MXFP4 along its last dimension."""
    _check_block(block)
    if scale_mode not in ("floor", "rceil"):
        raise ValueError(f"scale_mode must be 'floor' or 'rceil', got {scale_mode!r}")
    if not torch.is_floating_point(x) or x.ndim < 1 or x.shape[-1] == 0:
        raise ValueError(f"need a floating tensor with a non-empty last dimension, got {x.dtype} {tuple(x.shape)}")
    shape = tuple(x.shape)
    n = shape[-1]
    pad = (-n) % block
    xf = x.detach().to(torch.float32)
    if pad:
        xf = torch.nn.functional.pad(xf, (0, pad))
    blocks = xf.reshape(*shape[:-1], -1, block)
    amax = blocks.abs().amax(dim=-1)
    # amax is NaN when a NaN is in the block (amax propagates NaN)
    codes = _scale_codes(amax, scale_mode)
    # x · 2^−e by exponent arithmetic: exact in float32 unless the result underflows below
    # 2^−126, and every such value rounds to the code 0 anyway
    e = codes.to(torch.int32) - 127
    q = torch.ldexp(blocks, (-e)[..., None].to(torch.float32))
    elems = _round_e2m1(q).reshape(*shape[:-1], -1)
    packed = elems[..., 0::2] | (elems[..., 1::2] << 4)
    return MXFP4Tensor(packed.contiguous(), codes.contiguous(), shape, block)


class _FakeQuant(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, block, scale_mode):
        return quantize_mxfp4(x, block, scale_mode).dequantize(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        return grad, None, None  # straight-through


def fake_quantize_mxfp4(x: torch.Tensor, block: int = 32, scale_mode: str = "floor") -> torch.Tensor:
    """dequantize(quantize(x)) with a straight-through gradient (∂/∂x = identity), for QAT."""
    return _FakeQuant.apply(x, block, scale_mode)
