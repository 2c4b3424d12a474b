"""The MXFP4 quantizer and dequantizer as one C pass over memory (``neurips26._native``).

The arithmetic is the eager path's of :mod:`.mxfp4`, element for element, so the two give the
same bits: per block, the largest magnitude's bit pattern gives the E8M0 code (FLOOR: the
exponent field minus 2, clamped at 0; RCEIL: ⌈log₂(amax / 6)⌉ from the float32 quotient's
bits); each element is scaled by 2^−e (a float product, exact unless it falls below 2^−126,
where it rounds to 0 anyway) and rounded to E2M1, ties to even: below 1 by adding 2^22 (the
sum's bits count the halves), from 1 on by rounding the bit pattern to one mantissa bit;
saturated at code 7. A block with a NaN or ±Inf gets code 255 and zero elements.

Decoding multiplies the E2M1 value by 2^(code − 127) in float32, exact (two significant bits;
2^−127 is a subnormal), NaN for code 255; the bfloat16 output is the float32 product's top
half, exact for the same reason. Inputs are contiguous; the caller pads to whole blocks.
"""

from __future__ import annotations

import ctypes

import torch

from .._native import load, run_chunks, why_unavailable

__all__ = ["available", "why", "plain_cpu", "quantize", "dequantize"]

_NAME = "mxfp4"
_SOURCE = r"""
#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float f_of(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t u_of(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static inline int32_t block_code(uint32_t amax, int rceil) {
    if (!rceil) { int32_t c = (int32_t)(amax >> 23) - 2; return c < 0 ? 0 : c; }
    uint32_t d = u_of(f_of(amax) / 6.0f), ed = d >> 23, md = d & 0x7FFFFFu;
    return ed == 0 ? (int32_t)(md > 0x400000u) : (int32_t)(ed + (md != 0));
}

static inline uint32_t e2m1(uint32_t bits, float inv) {
    float a = f_of(bits & 0x7FFFFFFFu) * inv;
    uint32_t ab = u_of(a);
    int32_t below = (int32_t)u_of(a + 4194304.0f) - 0x4A800000;
    int32_t above = (int32_t)((((ab >> 22) & 1u) + ab + 0x1FFFFFu) >> 22) - 252;
    int32_t e = a < 1.0f ? below : above;
    return (uint32_t)(e > 7 ? 7 : e) | ((bits >> 28) & 8u);
}

#define QUANT(NAME, T, LOAD)                                                                        \
static inline void NAME##_block(const T *s, int64_t B, int rceil, uint8_t *o, uint8_t *code_out) {  \
    uint32_t amax = 0;                                                                              \
    for (int64_t i = 0; i < B; ++i) { uint32_t m = LOAD(s[i]) & 0x7FFFFFFFu; amax = m > amax ? m : amax; } \
    if (amax >= 0x7F800000u) { memset(o, 0, (size_t)(B / 2)); *code_out = 255; return; }           \
    int32_t code = block_code(amax, rceil), ie = 254 - code;                                        \
    float inv = f_of((uint32_t)(ie < 1 ? 1 : ie) << 23);                                            \
    for (int64_t i = 0; i < B; i += 32) { /* codes through a small buffer: both loops vectorize */   \
        uint32_t el[32];                                                                            \
        int64_t n = B - i < 32 ? B - i : 32;                                                        \
        for (int64_t j = 0; j < n; ++j) el[j] = e2m1(LOAD(s[i + j]), inv);                          \
        for (int64_t j = 0; j < n / 2; ++j) o[i / 2 + j] = (uint8_t)(el[2 * j] | (el[2 * j + 1] << 4)); \
    }                                                                                               \
    *code_out = (uint8_t)code;                                                                      \
}                                                                                                   \
void NAME(const T *src, int64_t nblocks, int64_t B, int rceil, uint8_t *packed, uint8_t *codes) {   \
    if (B == 32) /* the MX block: a constant trip count the compiler vectorizes */                  \
        for (int64_t k = 0; k < nblocks; ++k) {                                                     \
            /* each line of the block 2 KiB ahead: from cold caches the bf16 pass took 13.5 ms      \
               without (the hardware prefetcher did not keep up), 5.7 ms with; float32 unchanged */ \
            const char *ahead = (const char *)(src + k * 32) + 2048;                                \
            for (int64_t b = 0; b < 32 * (int64_t)sizeof(T); b += 64) __builtin_prefetch(ahead + b, 0, 0); \
            NAME##_block(src + k * 32, 32, rceil, packed + k * 16, codes + k);                      \
        }                                                                                           \
    else                                                                                            \
        for (int64_t k = 0; k < nblocks; ++k) NAME##_block(src + k * B, B, rceil, packed + k * (B / 2), codes + k); \
}

#define LOAD_F32(v) (v)
#define LOAD_BF16(v) ((uint32_t)(v) << 16)
QUANT(mxfp4_quantize_f32, uint32_t, LOAD_F32)
QUANT(mxfp4_quantize_bf16, uint16_t, LOAD_BF16)

static const float E2M1[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                               -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

static inline float scale_of(uint8_t c) {
    return c == 255 ? NAN : f_of(c == 0 ? 0x00400000u : (uint32_t)c << 23);
}

void mxfp4_dequantize_f32(const uint8_t *packed, const uint8_t *codes, int64_t nblocks, int64_t B, float *out) {
    for (int64_t k = 0; k < nblocks; ++k) {
        float sc = scale_of(codes[k]);
        const uint8_t *p = packed + k * (B / 2);
        float *o = out + k * B;
        for (int64_t i = 0; i < B / 2; ++i) { o[2 * i] = E2M1[p[i] & 15] * sc; o[2 * i + 1] = E2M1[p[i] >> 4] * sc; }
    }
}

void mxfp4_dequantize_bf16(const uint8_t *packed, const uint8_t *codes, int64_t nblocks, int64_t B, uint16_t *out) {
    for (int64_t k = 0; k < nblocks; ++k) {
        float sc = scale_of(codes[k]);
        const uint8_t *p = packed + k * (B / 2);
        uint16_t *o = out + k * B;
        for (int64_t i = 0; i < B; i += 32) { /* through a float buffer: both loops vectorize */
            float v[32];
            int64_t n = B - i < 32 ? B - i : 32;
            for (int64_t j = 0; j < n / 2; ++j) {
                v[2 * j] = E2M1[p[i / 2 + j] & 15] * sc; v[2 * j + 1] = E2M1[p[i / 2 + j] >> 4] * sc;
            }
            for (int64_t j = 0; j < n; ++j) o[i + j] = (uint16_t)(u_of(v[j]) >> 16);
        }
    }
}
"""

_MIN_CHUNK = 1 << 13  # blocks per thread: below this a second thread costs more than it saves
_QUANT_ARGS = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
_DEQUANT_ARGS = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
_SIGS = {"mxfp4_quantize_f32": _QUANT_ARGS, "mxfp4_quantize_bf16": _QUANT_ARGS,
         "mxfp4_dequantize_f32": _DEQUANT_ARGS, "mxfp4_dequantize_bf16": _DEQUANT_ARGS}


_TYPED: set = set()


def _lib():
    lib = load(_NAME, _SOURCE)
    if lib is not None and id(lib) not in _TYPED:
        for fn, args in _SIGS.items():
            getattr(lib, fn).argtypes, getattr(lib, fn).restype = args, None
        _TYPED.add(id(lib))
    return lib


def available() -> bool:
    """Whether the C kernels are built and loaded here (tried on first use)."""
    return _lib() is not None


def why() -> str:
    """Why they are not ('' where they are)."""
    return why_unavailable(_NAME)


def plain_cpu(*ts: torch.Tensor) -> bool:
    """Plain tensors in CPU memory (not a FakeTensor, meta or other subclass: their
    ``data_ptr()`` is no address the kernel may write to)."""
    return all(type(t) is torch.Tensor and t.device.type == "cpu" for t in ts)


def quantize(x: torch.Tensor, block: int, rceil: bool) -> tuple[torch.Tensor, torch.Tensor] | None:
    """``x``: a contiguous CPU float32 or bfloat16 tensor holding a whole number of blocks.
    The packed bytes (blocks, block/2) and the scale codes (blocks,), uint8; None where the
    outputs would not be plain CPU memory (a FakeTensorMode or similar is active)."""
    if not (plain_cpu(x) and x.dtype in (torch.float32, torch.bfloat16) and x.is_contiguous()):
        raise ValueError(f"x must be a contiguous plain CPU float32 or bfloat16 tensor, got {type(x).__name__} "
                         f"{x.dtype} on {x.device}, contiguous={x.is_contiguous()}")
    if block <= 0 or block % 2 or x.numel() % block:
        raise ValueError(f"x's {x.numel()} elements are not a whole number of blocks of {block} (an even size)")
    lib = _lib()
    if lib is None:
        raise RuntimeError(f"the C quantizer is unavailable here ({why()})")
    nb = x.numel() // block
    packed = torch.empty(nb, block // 2, dtype=torch.uint8, device="cpu")
    codes = torch.empty(nb, dtype=torch.uint8, device="cpu")
    if not plain_cpu(packed, codes):
        return None
    fn, width = (lib.mxfp4_quantize_f32, 4) if x.dtype == torch.float32 else (lib.mxfp4_quantize_bf16, 2)
    src, dst, cds = x.data_ptr(), packed.data_ptr(), codes.data_ptr()

    def call(start: int, count: int) -> None:
        fn(src + start * block * width, count, block, int(rceil), dst + start * (block // 2), cds + start)

    run_chunks(call, nb, _MIN_CHUNK)  # returns only when every chunk is done: x, packed, codes stay alive to here
    return packed, codes


def dequantize(packed: torch.Tensor, codes: torch.Tensor, block: int, dtype: torch.dtype) -> torch.Tensor | None:
    """``packed`` (blocks, block/2) and ``codes`` (blocks,): contiguous plain CPU uint8. The
    values (blocks, block) in ``dtype``, float32 or bfloat16; None where the output would not
    be plain CPU memory."""
    if not (plain_cpu(packed, codes) and packed.dtype == codes.dtype == torch.uint8
            and packed.is_contiguous() and codes.is_contiguous()):
        raise ValueError("packed and codes must be contiguous plain CPU uint8 tensors")
    if dtype not in (torch.float32, torch.bfloat16):
        raise ValueError(f"dtype must be torch.float32 or torch.bfloat16, got {dtype}")
    if block <= 0 or block % 2 or packed.numel() != codes.numel() * (block // 2):
        raise ValueError(f"packed holds {packed.numel()} bytes, not {block // 2} per each of {codes.numel()} blocks")
    lib = _lib()
    if lib is None:
        raise RuntimeError(f"the C quantizer is unavailable here ({why()})")
    nb = codes.numel()
    out = torch.empty(nb, block, dtype=dtype, device="cpu")
    if not plain_cpu(out):
        return None
    fn, width = (lib.mxfp4_dequantize_f32, 4) if dtype == torch.float32 else (lib.mxfp4_dequantize_bf16, 2)
    src, cds, dst = packed.data_ptr(), codes.data_ptr(), out.data_ptr()

    def call(start: int, count: int) -> None:
        fn(src + start * (block // 2), cds + start, count, block, dst + start * block * width)

    run_chunks(call, nb, _MIN_CHUNK)
    return out
