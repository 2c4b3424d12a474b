"""MXFP4 against torchao's MX reference (FLOOR and RCEIL scales, packed E2M1 bytes) and
ml-dtypes' float4_e2m1fn rounding, plus a table of the specification's edge cases; every
quantizer test runs on every path (eager, torch.compile's fused pass and the C pass where they work),
and all equal a float transcription of the specification on random bit patterns."""

import logging
import math
import shutil
import sys
import warnings

import numpy as np
import pytest
import torch

from neurips26.compression import mxfp4_native
from neurips26.compression.mxfp4 import (E2M1_VALUES, MXFP4Tensor, compile_available, fake_quantize_mxfp4,
                                         native_available, quantize_mxfp4)

IMPLS = ["eager",
         pytest.param("compiled", marks=pytest.mark.skipif(not compile_available(), reason="torch.compile unavailable")),
         pytest.param("native", marks=pytest.mark.skipif(not native_available(),
                                                         reason=f"C quantizer unavailable: {mxfp4_native.why()}"))]


class _DropTorchaoNoise(logging.Filter):
    """torchao logs "Failed to load ..." for its CUDA kernels on a CPU build, and torch notes its
    enum registrations; neither says anything about these tests."""

    def filter(self, record):
        msg = record.getMessage()
        return not ("Failed to load" in msg or "is an Enum subclass" in msg)


def torchao_mx(x, mode):
    drop, loggers = _DropTorchaoNoise(), [logging.getLogger(n) for n in ("torchao", "torch.utils._pytree")]
    for lg in loggers:
        lg.addFilter(drop)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from torchao.prototype.mx_formats.config import ScaleCalculationMode
            from torchao.prototype.mx_formats.mx_tensor import to_mx
    finally:
        for lg in loggers:
            lg.removeFilter(drop)

    m = ScaleCalculationMode.FLOOR if mode == "floor" else ScaleCalculationMode.RCEIL
    scale, data = to_mx(x, torch.float4_e2m1fn_x2, 32, m)
    return scale.view(torch.uint8), data.view(torch.uint8)


def random_inputs():
    generator = torch.Generator().manual_seed(0)
    yield torch.randn(16, 256, generator=generator)
    yield (torch.randn(8, 128, generator=generator) * 1e3).to(torch.bfloat16)
    yield torch.randn(4, 64, generator=generator) * torch.logspace(-30, 30, 64)  # blocks across many binades
    # all-ones mantissas: amax = (2 − 2^−23)·2^k, where floor(log2(amax)) rounds up to k + 1
    ones = torch.full((3, 32), 1.0).view(torch.int32) | 0x7FFFFF
    yield ones.view(torch.float32) * torch.tensor([[1.0], [2.0**40], [2.0**-40]])
    yield torch.cat([torch.zeros(1, 32), torch.full((1, 32), 2.0**127), torch.full((1, 32), -(2.0**127))])


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("mode", ["floor", "rceil"])
def test_scales_and_packed_bytes_equal_torchao(mode, impl):
    for x in random_inputs():
        ours = quantize_mxfp4(x, scale_mode=mode, impl=impl)
        ref_scale, ref_data = torchao_mx(x, mode)
        assert torch.equal(ours.scales, ref_scale.reshape(ours.scales.shape))
        assert torch.equal(ours.packed, ref_data.reshape(ours.packed.shape))


@pytest.mark.parametrize("impl", IMPLS)
def test_all_ones_mantissa_scale_is_read_from_the_bits(impl):
    x = (torch.full((1, 32), 1.0).view(torch.int32) | 0x7FFFFF).view(torch.float32) * 2.0**40  # (2 − 2^−23)·2^40
    assert float(torch.floor(torch.log2(x[0, 0]))) == 41.0  # the float rounding the spec warns about
    assert int(quantize_mxfp4(x, impl=impl).scales[0, 0]) == 127 + 40 - 2  # ⌊log₂⌋ = 40, read from the bits


@pytest.mark.parametrize("impl", IMPLS)
def test_element_rounding_equals_ml_dtypes(impl):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    # values already scaled (one block with scale code 127 is x itself: amax in [4, 8))
    grid = np.linspace(-7.5, 7.5, 3001, dtype=np.float32)
    grid = np.concatenate([grid, np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25, -5.0], np.float32)])
    for start in range(0, len(grid), 31):
        chunk = grid[start: start + 31]
        block = np.concatenate([chunk, np.array([4.0], np.float32)])  # pins the scale to 2^0
        block = np.pad(block, (0, 32 - len(block)))
        q = quantize_mxfp4(torch.tensor(block)[None], impl=impl)
        assert int(q.scales[0, 0]) == 127
        ref = block.astype(ml_dtypes.float4_e2m1fn).astype(np.float32)
        ref = np.clip(ref, -6, 6)
        got = q.dequantize()[0].numpy()
        assert np.array_equal(got, ref), (block, got, ref)


@pytest.mark.parametrize("impl", IMPLS)
def test_specification_edge_cases_table(impl):
    x = torch.zeros(6, 32)
    x[1, 0] = float("nan")
    x[2, 3] = float("inf")
    x[3, :] = 1.17549421e-38  # the largest float32 subnormal: ⌊log₂⌋ = −127, code clamps to 0
    x[4, :4] = torch.tensor([6.0, -0.25, 0.75, 100.0])  # amax 100: e = 6 − 2 = 4
    x[5, :2] = torch.tensor([2.0**-149, 3.0])           # a subnormal beside a normal
    q = quantize_mxfp4(x, impl=impl)
    assert q.scales[:, 0].tolist() == [0, 255, 255, 0, 131, 126]
    assert q.packed[1:3].eq(0).all()  # a NaN block's elements are stored as 0
    d = q.dequantize()
    assert torch.equal(d[0], torch.zeros(32))
    assert torch.isnan(d[1]).all() and torch.isnan(d[2]).all()
    # spec: elements x·2^127 = 2·(1 − 2^−23)·... round to 2, so the block decodes to 2·2^−127
    assert torch.allclose(d[3], torch.full((32,), 2.0 * 2.0**-127), rtol=0, atol=0)
    # scale 2^4: 6/16 = 0.375 → 0.5, −0.25/16 → −0, 0.75/16 → 0, 100/16 = 6.25 → 6 (saturated)
    assert d[4, :4].tolist() == [8.0, -0.0, 0.0, 96.0]
    assert d[5, :2].tolist() == [0.0, 3.0]


@pytest.mark.parametrize("impl", IMPLS)
def test_padding_shape_storage_and_round_trip(impl):
    x = torch.randn(3, 5, 70)
    q = quantize_mxfp4(x, impl=impl)
    assert q.shape == (3, 5, 70) and q.packed.shape == (3, 5, 48) and q.scales.shape == (3, 5, 3)
    assert q.dequantize().shape == x.shape
    full = quantize_mxfp4(torch.randn(64, 1024), impl=impl)
    assert full.bits_per_element == 4.25
    # the error is bounded by the grid: at most 2·2^e per element (half the largest gap is 1,
    # and FLOOR's saturation cuts amax ∈ [6, 8)·2^e to 6·2^e)
    x2 = torch.randn(64, 1024, generator=torch.Generator().manual_seed(1))
    q2 = quantize_mxfp4(x2, impl=impl)
    scale = torch.exp2(q2.scales.double() - 127).repeat_interleave(32, dim=-1)
    assert torch.all((q2.dequantize().double() - x2.double()).abs() <= 2 * scale)


def test_fake_quantize_has_a_straight_through_gradient():
    x = torch.randn(4, 64, requires_grad=True)
    y = fake_quantize_mxfp4(x)
    assert torch.equal(y.detach(), quantize_mxfp4(x.detach()).dequantize())
    (y * torch.arange(64.0)).sum().backward()
    assert torch.equal(x.grad, torch.arange(64.0).expand(4, 64))


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="block"):
        quantize_mxfp4(torch.randn(4, 32), block=31)
    with pytest.raises(ValueError, match="scale_mode"):
        quantize_mxfp4(torch.randn(4, 32), scale_mode="round")
    with pytest.raises(ValueError, match="floating"):
        quantize_mxfp4(torch.ones(4, 32, dtype=torch.int32))
    with pytest.raises(ValueError, match="impl"):
        quantize_mxfp4(torch.ones(4, 32), impl="fast")
    assert len(E2M1_VALUES) == 8


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("mode", ["floor", "rceil"])
def test_where_torchao_departs_from_the_specification(mode, impl):
    """Two documented departures of torchao's reference, pinned so that a change shows:
    an Inf in a block gets code 253 (FLOOR) or 254 (RCEIL) there, the NaN code 255 here; and
    for a block of code 0 torchao divides by 2^−126 (FLOOR) or by 1 (RCEIL) instead of the
    code's 2^−127, so its elements decode 2× too small or to 0, while ours decode exactly."""
    x = torch.zeros(3, 32)
    x[0, 0] = float("nan")
    x[1, 3] = float("inf")
    x[2, :] = 1.17549421e-38  # 2^−126 − 2^−149: a subnormal-amax block
    ref_scale, ref_data = torchao_mx(x, mode)
    ours = quantize_mxfp4(x, scale_mode=mode, impl=impl)
    assert ours.scales[:, 0].tolist() == [255, 255, 0]
    assert ref_scale.reshape(-1).tolist() == [255, 253 if mode == "floor" else 254, 0]
    assert ours.packed[2, 0] == 0x44 and ref_data[2, 0] == (0x22 if mode == "floor" else 0x00)
    assert torch.allclose(ours.dequantize()[2], x[2], rtol=1e-6, atol=0)


# --- both paths against a float transcription of the specification ----------------------------

def spec_reference(x, mode):
    """The specification in float arithmetic (the quantizer this module had before the bit-level
    pass): ⌊log₂ amax⌋ from frexp, x·2^−e by ldexp, E2M1 by one round-half-even per segment.
    Returns (packed, scales); a NaN block's elements are 0."""
    shape, n = x.shape, x.shape[-1]
    pad = (-n) % 32
    xf = x.detach()
    if xf.dtype == torch.float64:
        xf = torch.where(torch.isfinite(xf), xf.clamp(-3.4028234663852886e38, 3.4028234663852886e38), xf)
    xf = torch.nn.functional.pad(xf.to(torch.float32), (0, pad))
    blocks = xf.reshape(*shape[:-1], -1, 32)
    amax = blocks.abs().amax(-1)
    finite = torch.isfinite(amax)
    safe = torch.where(finite & (amax > 0), amax, torch.ones_like(amax))
    if mode == "floor":
        e = torch.frexp(safe)[1] - 1 - 2
    else:
        m, ex = torch.frexp(safe / 6.0)
        e = ex - 1 + (m != 0.5).int()
    code = (e.clamp(-127, 127) + 127).to(torch.uint8)
    code = torch.where(finite & (amax > 0), code, torch.zeros_like(code))
    code = torch.where(finite, code, torch.full_like(code, 255))
    q = torch.ldexp(blocks, -(code.int() - 127)[..., None].float())
    a = q.abs()
    el = torch.where(a < 2, torch.round(2 * a), torch.where(a < 4, torch.round(a) + 2, torch.round(a / 2) + 4))
    el = torch.nan_to_num(el, nan=0.0).clamp(max=7).to(torch.uint8) | (torch.signbit(q).to(torch.uint8) << 3)
    el = torch.where(finite[..., None], el, torch.zeros_like(el)).reshape(*shape[:-1], -1)
    return el[..., 0::2] | (el[..., 1::2] << 4), code


def bit_pattern_inputs():
    g = torch.Generator().manual_seed(20)
    # every finite float32 / bfloat16 bit pattern is equally likely: all binades, subnormals, ±0
    r32 = torch.randint(-2**31, 2**31, (512, 96), generator=g, dtype=torch.int64).to(torch.int32).view(torch.float32)
    yield torch.where(torch.isfinite(r32), r32, -0.0)
    r16 = torch.randint(-2**15, 2**15, (512, 96), generator=g, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    yield torch.where(torch.isfinite(r16), r16, 0.0)
    # narrow blocks: values near every rounding threshold at one scale, with ties exact
    t = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
    near = torch.cat([t, t.nextafter(torch.tensor(0.0)), t.nextafter(torch.tensor(9.0))])
    block = torch.cat([near, -near, torch.tensor([4.0, -0.0, 7.0, 7.5, 6.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])])[:64]
    yield torch.stack([block * 2.0**k for k in range(-140, 120, 7)])
    yield torch.randn(5, 3, 77, generator=g).to(torch.bfloat16)  # odd last dim, bf16
    yield torch.randn(2, 1, generator=g)  # one element
    yield torch.randn(8 * 64 + 1, generator=g)[1:].reshape(8, 64)  # a view at an odd storage offset
    yield torch.randn(6, 45, generator=g, dtype=torch.float64) * 1e300  # float64 beyond float32: saturates
    yield torch.randn(4, 70, generator=g).half()
    x = torch.randn(6, 64, generator=g)
    x[0, 3], x[2, 40], x[4, 0] = float("nan"), float("inf"), -float("inf")
    yield x


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("mode", ["floor", "rceil"])
def test_both_paths_equal_the_specification_in_float_arithmetic(mode, impl):
    for x in bit_pattern_inputs():
        packed, scales = spec_reference(x, mode)
        q = quantize_mxfp4(x, scale_mode=mode, impl=impl)
        assert torch.equal(q.scales, scales), (x.dtype, tuple(x.shape))
        assert torch.equal(q.packed, packed), (x.dtype, tuple(x.shape))


@pytest.mark.skipif(not compile_available(), reason="torch.compile unavailable")
def test_auto_compiles_large_tensors_with_the_eager_bits():
    x = torch.randn(1024, 4096, generator=torch.Generator().manual_seed(21))  # 2^22 elements: the compiled pass
    for t in (x, x.to(torch.bfloat16)):
        a, b = quantize_mxfp4(t), quantize_mxfp4(t, impl="eager")
        assert torch.equal(a.packed, b.packed) and torch.equal(a.scales, b.scales)


def test_dequantize_in_float32_equals_float64_rounded_once():
    g = torch.Generator().manual_seed(22)
    packed = torch.randint(0, 256, (7, 3 * 16), generator=g, dtype=torch.int32).to(torch.uint8)
    scales = torch.randint(0, 256, (7, 3), generator=g, dtype=torch.int32).to(torch.uint8)
    scales[0, 0], scales[1, 1], scales[2, 2] = 255, 254, 0  # NaN, beyond float32 (→ ±Inf), subnormal
    t = MXFP4Tensor(packed, scales, (7, 90))
    exact = t.dequantize(torch.float64)
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        got, want = t.dequantize(dtype), exact.to(dtype)
        assert got.dtype == dtype and torch.equal(got.isnan(), want.isnan())
        assert torch.equal(got.nan_to_num(0.0).view(torch.uint8),
                           want.nan_to_num(0.0).view(torch.uint8))
    assert math.isinf(float(t.dequantize()[1, 32:64].abs().max()))


@pytest.mark.skipif(not (sys.platform.startswith("linux") and shutil.which("cc")), reason="needs Linux and a C compiler")
def test_the_native_path_builds_where_a_compiler_exists():
    # a build regression would otherwise only show as skipped tests and a slower default
    assert native_available(), mxfp4_native.why()


@pytest.mark.skipif(not native_available(), reason="C quantizer unavailable")
def test_native_is_the_cpu_default_and_dequantizes_with_the_torch_bits(monkeypatch):
    g = torch.Generator().manual_seed(23)
    x = torch.randn(3, 5, 70, generator=g) * torch.logspace(-3, 3, 70)  # odd shape: padded blocks
    x[0, 0, :3] = torch.tensor([float("nan"), 1.0, 2.0])
    for t in (x, x.to(torch.bfloat16)):
        for mode in ("floor", "rceil"):
            a, b = quantize_mxfp4(t, scale_mode=mode), quantize_mxfp4(t, scale_mode=mode, impl="eager")
            assert torch.equal(a.packed, b.packed) and torch.equal(a.scales, b.scales)
            for dtype in (torch.float32, torch.bfloat16, torch.float16):
                got = a.dequantize(dtype)
                with monkeypatch.context() as m:  # the torch decoder, for the same tensor
                    m.setattr(mxfp4_native, "available", lambda: False)
                    want = a.dequantize(dtype)
                assert got.shape == want.shape == t.shape and got.dtype == dtype
                assert torch.equal(got.isnan(), want.isnan())  # NaN payloads carry nothing
                assert torch.equal(got.nan_to_num(0.0).view(torch.uint8), want.nan_to_num(0.0).view(torch.uint8))
    calls, original = [], mxfp4_native.quantize
    monkeypatch.setattr(mxfp4_native, "quantize", lambda *a: calls.append(a[1:]) or original(*a))
    quantize_mxfp4(torch.ones(4, 32))  # auto takes the native path on a CPU tensor
    assert calls == [(32, False)]


def test_native_impl_is_refused_where_it_cannot_run(monkeypatch):
    if torch.cuda.is_available():
        with pytest.raises(ValueError, match="CPU tensors"):
            quantize_mxfp4(torch.ones(4, 32, device="cuda"), impl="native")
    monkeypatch.setattr(mxfp4_native, "available", lambda: False)
    monkeypatch.setattr(mxfp4_native, "why", lambda: "no C compiler found")
    with pytest.raises(RuntimeError, match="no C compiler found"):
        quantize_mxfp4(torch.ones(4, 32), impl="native")
    a, b = quantize_mxfp4(torch.arange(64.0).reshape(2, 32)), quantize_mxfp4(torch.arange(64.0).reshape(2, 32),
                                                                             impl="eager")
    assert torch.equal(a.packed, b.packed)  # auto falls back


@pytest.mark.skipif(not native_available(), reason="C quantizer unavailable")
def test_native_outputs_stay_on_the_cpu_whatever_the_default_device():
    x = torch.randn(4, 64, generator=torch.Generator().manual_seed(24))
    want = quantize_mxfp4(x, impl="eager")
    with torch.device("meta"):  # as torch.set_default_device("cuda") in GPU code
        q = quantize_mxfp4(x)
        back = q.dequantize()
    assert q.packed.device.type == "cpu" and torch.equal(q.packed, want.packed) and torch.equal(q.scales, want.scales)
    assert back.device.type == "cpu" and torch.equal(back, want.dequantize())


def test_fake_tensors_take_a_traceable_path():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        x = torch.randn(4, 64)
        q = quantize_mxfp4(x)  # auto: never hands a FakeTensor's null data_ptr to C
        y = fake_quantize_mxfp4(x)
        assert q.packed.shape == (4, 32) and y.shape == (4, 64)
        with pytest.raises(ValueError, match="plain CPU tensors"):
            quantize_mxfp4(x, impl="native")


def test_packed_and_scales_must_share_a_device():
    with pytest.raises(ValueError, match="one device"):
        MXFP4Tensor(torch.zeros(2, 16, dtype=torch.uint8), torch.zeros(2, 1, dtype=torch.uint8, device="meta"), (2, 32))


def test_fake_quantize_compiles_from_a_cold_start(monkeypatch):
    from neurips26.compression import mxfp4 as mod
    monkeypatch.setattr(mod, "_DEQUANT", {})  # no table cached by an earlier eager call
    x = torch.randn(8, 64, generator=torch.Generator().manual_seed(25), requires_grad=True)
    torch._dynamo.reset()
    f = torch.compile(fake_quantize_mxfp4, backend="aot_eager", fullgraph=True)
    y = f(x)
    y.sum().backward()
    assert torch.equal(y, fake_quantize_mxfp4(x.detach())) and torch.equal(x.grad, torch.ones_like(x))


@pytest.mark.skipif(not native_available(), reason="C quantizer unavailable")
def test_native_wrappers_refuse_what_they_cannot_read():
    with pytest.raises(ValueError, match="float32 or bfloat16"):
        mxfp4_native.quantize(torch.ones(64, dtype=torch.float16), 32, False)
    with pytest.raises(ValueError, match="contiguous"):
        mxfp4_native.quantize(torch.ones(64, 2)[:, 0], 32, False)
    with pytest.raises(ValueError, match="whole number of blocks"):
        mxfp4_native.quantize(torch.ones(48), 32, False)
    with pytest.raises(ValueError, match="dtype"):
        mxfp4_native.dequantize(torch.zeros(2, 16, dtype=torch.uint8), torch.zeros(2, dtype=torch.uint8), 32,
                                torch.float16)
