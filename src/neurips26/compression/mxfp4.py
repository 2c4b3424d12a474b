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

Inputs are converted to float32 first (the specification's conversion, like torchao's
reference, starts from FP32 or BF16). A float64 input may hold finite values beyond
float32's range (|x| > (2 − 2^−23)·2^127 ≈ 3.4e38); an IEEE cast would make them ±Inf and
their block NaN. They saturate instead, to ±float32's largest value, as the specification
has every conversion into E2M1 (which has no Inf) clamp to the largest magnitude: such a
block gets the largest scale a float32 block can get and its element saturates at ±6
(FLOOR: 6·2^125 ≈ 2.6e38). Non-finite inputs are not errors: a NaN or ±Inf makes its
block's scale the NaN code 255 (the specification's rule for MXFP4, whose elements
encode neither), that block alone decodes to NaN, and W4A8 refuses such tensors. torchao
gives NaN the code 255 too but an Inf block code 253 (FLOOR) or 254 (RCEIL).

MXFP4's range (up to 6·2^127) exceeds float32's: an element that decodes beyond it
(possible with RCEIL scales near float32's largest value) dequantizes to ±Inf in float32
and exactly in float64. Empty inputs (a zero dimension) give empty results.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import torch

__all__ = ["MXFP4Tensor", "quantize_mxfp4", "fake_quantize_mxfp4", "E2M1_VALUES"]

E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
_E2M1_MAX_POW2 = 2
_NAN_SCALE = 255
_F32_MAX = torch.finfo(torch.float32).max


@dataclass(frozen=True)
class MXFP4Tensor:
    """Packed MXFP4 data: ``packed`` uint8 (..., padded/2), ``scales`` uint8 E8M0 codes
    (..., padded/block), the original ``shape`` and ``block``."""

    packed: torch.Tensor
    scales: torch.Tensor
    shape: tuple
    block: int = 32

    def __post_init__(self):
        block = _check_block(self.block)
        for name in ("packed", "scales"):
            t = getattr(self, name)
            if not isinstance(t, torch.Tensor) or t.dtype != torch.uint8:
                got = t.dtype if isinstance(t, torch.Tensor) else type(t).__name__
                raise TypeError(f"{name} must be a uint8 torch.Tensor, got {got}")
        try:
            shape = tuple(int(s) for s in self.shape)
        except (TypeError, ValueError):
            raise TypeError(f"shape must be a tuple of ints, got {self.shape!r}") from None
        if not shape or min(shape) < 0:
            raise ValueError(f"shape must hold at least one dimension, none negative, got {shape}")
        blocks = -(-shape[-1] // block)
        for name, last in (("packed", blocks * block // 2), ("scales", blocks)):
            want = (*shape[:-1], last)
            if tuple(getattr(self, name).shape) != want:
                raise ValueError(f"{name} has shape {tuple(getattr(self, name).shape)}, but shape {shape} in blocks "
                                 f"of {block} needs {want}")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "block", block)

    @property
    def bits_per_element(self) -> float:
        """Storage bits per original element (4.25 for blocks of 32 without padding)."""
        n = math.prod(self.shape)
        if n == 0:
            raise ValueError(f"an empty MXFP4Tensor (shape {self.shape}) has no bits per element")
        return 8.0 * (self.packed.numel() + self.scales.numel()) / n

    def codes(self) -> torch.Tensor:
        """The unpacked 4-bit element codes (..., padded) as uint8."""
        low, high = self.packed & 0x0F, self.packed >> 4
        return torch.stack([low, high], dim=-1).reshape(*self.packed.shape[:-1], 2 * self.packed.shape[-1])

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The decoded values (``shape``) in ``dtype`` (a floating-point dtype): NaN for the
        elements of a block with the NaN scale code 255."""
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating-point torch.dtype, got {dtype!r}")
        codes = self.codes()
        grid = torch.tensor(E2M1_VALUES, dtype=torch.float64, device=codes.device)
        mag = grid[(codes & 0x7).long()]
        vals = torch.where((codes & 0x8).bool(), -mag, mag)
        exps = self.scales.to(torch.float64) - 127.0
        scale = torch.where(self.scales == _NAN_SCALE, torch.nan, torch.exp2(exps))
        out = (vals.reshape(*vals.shape[:-1], self.scales.shape[-1], self.block) * scale[..., None]).reshape(vals.shape)
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
    if not (isinstance(block, numbers.Integral) and not isinstance(block, bool) and block > 0 and block % 2 == 0):
        raise ValueError(f"block must be a positive even int (MX uses 32), got {block!r}")
    return int(block)


def _to_float32(x: torch.Tensor) -> torch.Tensor:
    """x in float32, finite values beyond float32's range saturated to ±its largest value
    (the plain cast, kept for every value within range, would make them ±Inf)."""
    if x.dtype != torch.float32 and torch.finfo(x.dtype).max > _F32_MAX:
        x = torch.where(torch.isfinite(x), x.clamp(-_F32_MAX, _F32_MAX), x)
    return x.to(torch.float32)


def quantize_mxfp4(x: torch.Tensor, block: int = 32, scale_mode: str = "floor") -> MXFP4Tensor:
    """Quantize ``x`` (any float dtype, at least 1-D) to MXFP4 along its last dimension.

    Finite values beyond float32's range saturate; a NaN or ±Inf makes its block NaN (the
    scale code 255); an empty ``x`` gives an empty result (module docstring)."""
    block = _check_block(block)
    if scale_mode not in ("floor", "rceil"):
        raise ValueError(f"scale_mode must be 'floor' or 'rceil', got {scale_mode!r}")
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if not torch.is_floating_point(x):
        raise ValueError(f"x must be a floating-point tensor, got {x.dtype}")
    if x.ndim < 1:
        raise ValueError("x must have at least one dimension (the blocks run along the last), got a 0-d tensor")
    shape = tuple(x.shape)
    n = shape[-1]
    pad = (-n) % block
    xf = _to_float32(x.detach())
    if pad:
        xf = torch.nn.functional.pad(xf, (0, pad))
    blocks = xf.reshape(*shape[:-1], (n + pad) // block, block)
    amax = blocks.abs().amax(dim=-1)
    # amax is NaN when a NaN is in the block (amax propagates NaN)
    codes = _scale_codes(amax, scale_mode)
    # x · 2^−e by exponent arithmetic: exact in float32 unless the result underflows below
    # 2^−126, and every such value rounds to the code 0 anyway
    e = codes.to(torch.int32) - 127
    q = torch.ldexp(blocks, (-e)[..., None].to(torch.float32))
    elems = _round_e2m1(q).reshape(*shape[:-1], n + pad)
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
