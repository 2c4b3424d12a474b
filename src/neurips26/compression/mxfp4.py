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
encode neither), its elements are stored as 0, that block alone decodes to NaN, and W4A8
refuses such tensors. torchao
gives NaN the code 255 too but an Inf block code 253 (FLOOR) or 254 (RCEIL).

MXFP4's range (up to 6·2^127) exceeds float32's: an element that decodes beyond it
(possible with RCEIL scales near float32's largest value) dequantizes to ±Inf in float32
and exactly in float64. Empty inputs (a zero dimension) give empty results.

Implementation: the quantizer works on the inputs' bits (float32 and bfloat16 read as they are,
other dtypes through float32): one integer max per block gives the scale (and spots NaN/Inf).
Three paths give the same bits. The eager one scales each block and rounds with integer tricks,
op by op in cache-sized chunks (``impl="eager"``, and the fallback everywhere). The native one
runs the same arithmetic as one C pass over memory, built on first use with the system C
compiler (``neurips26._native``; the default on CPU tensors where a compiler works,
``impl="native"``): 30–60× torchao's ``to_mx`` here, at a fifth to a half of a copy's speed
(``docs/moe-mxfp4.md``). The fused one counts, per element, the
block's rounding thresholds its magnitude passes, compared as bit patterns (exact: the scaled
thresholds are float32 values); ``torch.compile`` turns it into one kernel (the default for
tensors of 2^22 elements or more off the CPU, or where no C compiler works;
``impl="compiled"``). On CPU tensors dequantization runs natively too.
``benchmarks/bench_mxfp4.py`` measures every path against a same-run ``clone()`` and torchao.
"""

from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass

import torch

from . import mxfp4_native as _native

__all__ = ["MXFP4Tensor", "quantize_mxfp4", "fake_quantize_mxfp4", "compile_available", "native_available",
           "E2M1_VALUES"]

E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
_E2M1_MAX_POW2 = 2
_NAN_SCALE = 255
_F32_MAX = torch.finfo(torch.float32).max


_DEQUANT: dict = {}


def _dequant_tables(device: torch.device, cache: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """float32 (256, 2): the two E2M1 values of each packed byte; float32 (256,): 2^(c−127) for
    each scale code c, NaN for 255 (2^−127 is a float32 subnormal, exact)."""
    key = str(device)
    cache = cache and not torch.compiler.is_compiling()
    if cache and key in _DEQUANT:
        return _DEQUANT[key]
    grid = torch.tensor(E2M1_VALUES + tuple(-v for v in E2M1_VALUES), dtype=torch.float32)
    byte = torch.arange(256)
    pair = torch.stack([grid[byte & 0xF], grid[byte >> 4]], dim=1)
    scale = torch.exp2(torch.arange(256, dtype=torch.float64) - 127).to(torch.float32)
    scale[_NAN_SCALE] = torch.nan
    tables = (pair.to(device), scale.to(device))
    if cache:  # not under tracing (storing them is a side effect dynamo refuses) nor for FakeTensors
        _DEQUANT[key] = tables
    return tables


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
        if self.packed.device != self.scales.device:
            raise ValueError(f"packed and scales must be on one device, got {self.packed.device} and "
                             f"{self.scales.device}")
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
        vals = None
        if dtype != torch.float64 and _use_native(self.packed, self.scales):
            vals = _native.dequantize(self.packed.reshape(-1, self.block // 2).contiguous(),
                                      self.scales.reshape(-1).contiguous(), self.block,
                                      dtype if dtype == torch.bfloat16 else torch.float32)
        if vals is not None:
            out = vals.reshape(*self.scales.shape[:-1], self.scales.shape[-1] * self.block)
            return out[..., : self.shape[-1]].to(dtype)
        if dtype == torch.float64:  # float64 holds every MXFP4 value (up to 6·2^127) exactly
            codes = self.codes()
            grid = torch.tensor(E2M1_VALUES, dtype=torch.float64, device=codes.device)
            mag = grid[(codes & 0x7).long()]
            vals = torch.where((codes & 0x8).bool(), -mag, mag)
            exps = self.scales.to(torch.float64) - 127.0
            scale = torch.where(self.scales == _NAN_SCALE, torch.nan, torch.exp2(exps))
        else:
            # float32 products of an E2M1 value (two significant bits) and a power of two are exact
            # down to 2^-128 and overflow to ±Inf exactly where the float64 value leaves float32's
            # range, so one rounding to ``dtype`` afterwards gives what float64 would
            # real tables serve real tensors only: a FakeTensor's tables must be made in its mode
            pair, scale_of = _dequant_tables(self.packed.device, cache=type(self.packed) is torch.Tensor)
            vals = pair[self.packed.long()]  # (..., bytes, 2): low nibble first
            scale = scale_of[self.scales.long()]
        out = (vals.reshape(*self.scales.shape, self.block) * scale[..., None]).reshape(
            *self.scales.shape[:-1], self.scales.shape[-1] * self.block)
        return out[..., : self.shape[-1]].to(dtype)


# --- the fused quantizer ------------------------------------------------------------------------
#
# Everything works on the inputs' bits. For non-negative floats the integer order of the bit
# patterns is the float order, and NaN > +Inf > every finite value, so one integer max per block
# gives amax, tells non-finite blocks apart and needs no NaN handling. The E2M1 code of an element
# is the number of rounding thresholds its magnitude passes; the thresholds, scaled by the block's
# power of two, are exact float32 values (at most three significant bits, the smallest 2^-129), so
# comparing their bit patterns with the magnitude's bits is exact.

# E2M1 rounding thresholds (midpoints between neighbours) and whether a tie rounds up: ties go to the
# even code, so 0.75 → 1.0 (code 2), 1.75 → 2.0 (4), 3.5 → 4.0 (6) round up and 0.25, 1.25, 2.5, 5.0 down
_THRESHOLDS = ((0.25, False), (0.75, True), (1.25, False), (1.75, True), (2.5, False), (3.5, True), (5.0, False))
_COMPILE_MIN_NUMEL = 1 << 22  # below this the eager path is as fast as a compile is worth
_EAGER_CHUNK = 1 << 14  # blocks per eager step: the intermediates stay in cache


def _threshold_table() -> torch.Tensor:
    """(256, 7) int32: for scale code c, the bit patterns T with |x| > T exactly when x · 2^−(c−127)
    rounds past the threshold (a tie-up threshold t gives bits(t·2^e) − 1, i.e. |x| ≥ t·2^e). Codes
    254 and 255 (never a finite block's) get the largest pattern: nothing passes."""
    e = torch.arange(256, dtype=torch.float64) - 127
    cols = []
    for t, up in _THRESHOLDS:
        bits = (t * torch.exp2(e)).to(torch.float32).view(torch.int32)  # exact: see above
        cols.append(bits - int(up))
    table = torch.stack(cols, dim=1)
    table[254:] = 0x7FFFFFFF
    return table


_TABLES: dict = {}


def _table_on(device: torch.device) -> torch.Tensor:
    key = str(device)
    if key not in _TABLES:
        _TABLES[key] = _threshold_table().to(device)
    return _TABLES[key]


def _block_codes(amax: torch.Tensor, rceil: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """E8M0 codes (int32) and a finite mask from each block's amax bit pattern (int32, ≥ 0).

    FLOOR: e = ⌊log₂ amax⌋ − 2, clamped to [−127, 127], so code = max(E − 2, 0) with E the biased
    exponent field (a subnormal amax has E = 0 and code 0). RCEIL: e = ⌈log₂(amax / 6)⌉ from the bits
    of the float32 quotient d: E_d + (mantissa ≠ 0) for a normal d; a subnormal d = m·2^−149 has
    ⌈log₂ d⌉ ≥ −126 (code 1) only when m > 2^22, else the clamp gives code 0."""
    finite = amax < 0x7F800000
    if rceil:
        d = (torch.where(finite, amax, 0).view(torch.float32) / 6.0).view(torch.int32)
        ed, md = d >> 23, d & 0x7FFFFF
        code = torch.where(ed == 0, (md > 0x400000).to(torch.int32), ed + (md != 0).to(torch.int32))
    else:
        code = ((amax >> 23) - _E2M1_MAX_POW2).clamp_min(0)
    return torch.where(finite, code, _NAN_SCALE), finite


def _fused_pairs(v: torch.Tensor, table: torch.Tensor, rceil: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The single-pass form (what ``torch.compile`` fuses): ``v`` (blocks, block/2) holds two
    elements per integer, float32 pairs as int64 or bfloat16 pairs as int32 (the even element in
    the low half, as memory holds them). Returns the packed bytes (blocks, block/2) and the scale
    codes (blocks,), both uint8; a non-finite block's elements are stored as 0."""
    half = 32 if v.dtype == torch.int64 else 16
    if half == 32:
        lo, hi = v & 0x7FFFFFFF, (v >> 32) & 0x7FFFFFFF
    else:  # a bfloat16's bits are the top half of its float32's
        lo, hi = (v & 0x7FFF) << 16, ((v >> 16) & 0x7FFF) << 16
    amax = torch.maximum(lo, hi).amax(dim=-1, keepdim=True).to(torch.int32)
    code, finite = _block_codes(amax, rceil)
    ths = table[code.squeeze(-1).long()].to(v.dtype)  # (blocks, 7)
    el_lo = (lo > ths[:, 0:1]).to(v.dtype)
    el_hi = (hi > ths[:, 0:1]).to(v.dtype)
    for k in range(1, len(_THRESHOLDS)):
        el_lo = el_lo + (lo > ths[:, k:k + 1])
        el_hi = el_hi + (hi > ths[:, k:k + 1])
    el_lo = el_lo | ((v >> (half - 4)) & 8)  # the sign bits
    el_hi = el_hi | ((v >> (2 * half - 4)) & 8)
    packed = torch.where(finite, el_lo | (el_hi << 4), 0)
    return packed.to(torch.uint8), code.squeeze(-1).to(torch.uint8)


def _eager_blocks(bits: torch.Tensor, rceil: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The eager form, equal to :func:`_fused_pairs` bit for bit and cheaper op by op: ``bits``
    (blocks, block) int32 float32 patterns or int16 bfloat16 patterns, in chunks that stay in
    cache. Each block is scaled by 2^−e (a float product, exact unless it falls below 2^−126,
    where every value rounds to 0 anyway), then rounded: below 1 by adding 2^22 (whose float32
    neighbours are 0.5 apart, so the sum rounds to the nearest half, ties to even, and its bits
    count the halves); from 1 on by rounding the bit pattern to one mantissa bit (ties to even),
    which carries into the exponent as E2M1's own encoding does; saturated at code 7."""
    nb, block = bits.shape
    packed = torch.empty(nb, block // 2, dtype=torch.uint8, device=bits.device)
    codes = torch.empty(nb, dtype=torch.uint8, device=bits.device)
    for s in range(0, nb, _EAGER_CHUNK):
        b = bits[s:s + _EAGER_CHUNK]
        if b.dtype == torch.int16:
            b = b.to(torch.int32) << 16
        mag = b & 0x7FFFFFFF
        code, finite = _block_codes(mag.amax(dim=-1), rceil)
        inv = torch.where(finite, ((254 - code).clamp_min(1) << 23).view(torch.float32), 0.0)  # 2^−e
        a = mag.view(torch.float32).mul_(inv[:, None])  # in place: mag now holds a's bits
        below = (a + 4194304.0).view(torch.int32).sub_(0x4A800000)
        above = (mag >> 22).bitwise_and_(1).add_(mag).add_(0x1FFFFF).bitwise_right_shift_(22).sub_(252)
        el = torch.where(a < 1.0, below, above).clamp_(max=7)
        el |= (b >> 28).bitwise_and_(8)
        el *= finite[:, None]
        pairs = el.to(torch.uint8).view(torch.int16)  # (even, odd) bytes, little-endian
        packed[s:s + _EAGER_CHUNK] = (pairs | (pairs >> 4)).to(torch.uint8)
        codes[s:s + _EAGER_CHUNK] = code
    return packed, codes


_COMPILED = {"fn": None, "error": None}


def _compiled_pairs():
    """``torch.compile(_fused_pairs)``, made once; None where torch.compile is unavailable or
    failed before (the eager path then gives the same results)."""
    if _COMPILED["fn"] is None and _COMPILED["error"] is None:
        try:
            if not torch._dynamo.is_dynamo_supported():
                raise RuntimeError("torch.compile is not supported on this Python / platform")
            _COMPILED["fn"] = torch.compile(_fused_pairs, fullgraph=True)
        except Exception as err:  # no compiler, unsupported platform
            _COMPILED["error"] = err
    return _COMPILED["fn"]


def native_available() -> bool:
    """Whether the C quantizer is built and loaded here (tried on first use; where it cannot
    be, e.g. no C compiler, the other paths give the same results)."""
    return _native.available()


def _use_native(*ts: torch.Tensor) -> bool:
    """The C path takes plain CPU tensors outside torch.compile's tracing (FakeTensors, meta and
    other subclasses have no memory it could read)."""
    return _native.plain_cpu(*ts) and not torch.compiler.is_compiling() and _native.available()


def compile_available() -> bool:
    """Whether the compiled quantizer can be used here (it is tried on first use; a failure makes
    every later call take the eager path, with the same results)."""
    return _compiled_pairs() is not None


def _run_compiled(v: torch.Tensor, rceil: bool):
    fn = _compiled_pairs()
    if fn is None:
        return None
    if v.shape[0] > 1:
        torch._dynamo.mark_dynamic(v, 0)  # one compile serves every number of blocks
    try:
        return fn(v, _table_on(v.device), rceil)
    except Exception as err:  # a compiler that fails at code generation
        _COMPILED["fn"], _COMPILED["error"] = None, err
        warnings.warn(f"quantize_mxfp4: torch.compile failed ({type(err).__name__}: {err}); using the eager path, "
                      "which gives the same results", RuntimeWarning, stacklevel=3)
        return None


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


_IMPLS = ("auto", "native", "compiled", "eager")


def quantize_mxfp4(x: torch.Tensor, block: int = 32, scale_mode: str = "floor", impl: str = "auto") -> MXFP4Tensor:
    """Quantize ``x`` (any float dtype, at least 1-D) to MXFP4 along its last dimension.

    Finite values beyond float32's range saturate; a NaN or ±Inf makes its block NaN (the
    scale code 255, its elements stored as 0); an empty ``x`` gives an empty result (module
    docstring). float32 and bfloat16 are read as they are, other dtypes go through float32.

    ``impl``: ``"native"`` (one C pass, CPU tensors; RuntimeError where it cannot be built),
    ``"compiled"`` (``torch.compile`` of the fused bit-level pass; RuntimeError where it cannot
    be compiled), ``"eager"`` (op by op), or ``"auto"``: native on CPU tensors where a C compiler
    works, else compiled for tensors of at least 2^22 elements where torch.compile works, else
    eager. All give the same bits."""
    block = _check_block(block)
    if scale_mode not in ("floor", "rceil"):
        raise ValueError(f"scale_mode must be 'floor' or 'rceil', got {scale_mode!r}")
    if impl not in _IMPLS:
        raise ValueError(f"impl must be one of {_IMPLS}, got {impl!r}")
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if not torch.is_floating_point(x):
        raise ValueError(f"x must be a floating-point tensor, got {x.dtype}")
    if x.ndim < 1:
        raise ValueError("x must have at least one dimension (the blocks run along the last), got a 0-d tensor")
    if impl == "native" and (x.device.type != "cpu" or type(x) is not torch.Tensor):
        raise ValueError(f"impl='native' runs on plain CPU tensors, got a {type(x).__name__} on {x.device} "
                         "(use 'auto' or 'compiled')")
    if impl == "native" and torch.compiler.is_compiling():
        raise RuntimeError("impl='native' calls C code torch.compile cannot trace; use impl='auto', which "
                           "takes a traceable path under torch.compile")
    if impl == "native" and not native_available():
        raise RuntimeError(f"impl='native': the C quantizer is unavailable here ({_native.why()})")
    if impl == "compiled" and not compile_available():
        raise RuntimeError(f"impl='compiled': torch.compile is unavailable here ({_COMPILED['error']})")
    shape = tuple(x.shape)
    n = shape[-1]
    nblocks = -(-n // block)
    if x.numel() == 0:
        empty = torch.empty(*shape[:-1], nblocks * block // 2, dtype=torch.uint8, device=x.device)
        return MXFP4Tensor(empty, torch.empty(*shape[:-1], nblocks, dtype=torch.uint8, device=x.device), shape, block)
    xf = x.detach()
    if xf.dtype not in (torch.float32, torch.bfloat16):
        xf = _to_float32(xf)
    pad = nblocks * block - n
    if pad:
        xf = torch.nn.functional.pad(xf, (0, pad))
    xf = xf.contiguous()
    rceil = scale_mode == "rceil"
    use_native = impl == "native" or (impl == "auto" and _use_native(xf))
    use_compiled = impl == "compiled" or (impl == "auto" and not use_native and xf.numel() >= _COMPILE_MIN_NUMEL
                                          and not torch.compiler.is_compiling() and compile_available())
    out = _native.quantize(xf, block, rceil) if use_native else None
    if out is None and impl == "native":
        raise RuntimeError("impl='native': the output would not be plain CPU memory (a FakeTensorMode or a "
                           "similar mode is active); use impl='auto'")
    if use_compiled:
        if xf.storage_offset() % 2:  # pairs of elements are read as one integer: align them
            xf = xf.clone()
        pairs = xf.view(torch.int64 if xf.dtype == torch.float32 else torch.int32).reshape(-1, block // 2)
        out = _run_compiled(pairs, rceil)
        if out is None and impl == "compiled":
            raise RuntimeError(f"impl='compiled': torch.compile failed here ({_COMPILED['error']})")
    if out is None:
        bits = xf.view(torch.int32 if xf.dtype == torch.float32 else torch.int16).reshape(-1, block)
        out = _eager_blocks(bits, rceil)
    packed, codes = out
    return MXFP4Tensor(packed.reshape(*shape[:-1], nblocks * block // 2), codes.reshape(*shape[:-1], nblocks),
                       shape, block)


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
