"""MXFP4 against torchao's MX reference (FLOOR and RCEIL scales, packed E2M1 bytes) and
ml-dtypes' float4_e2m1fn rounding, plus a table of the specification's edge cases."""

import warnings

import numpy as np
import pytest
import torch

from neurips26.compression.mxfp4 import E2M1_VALUES, fake_quantize_mxfp4, quantize_mxfp4


def torchao_mx(x, mode):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torchao.prototype.mx_formats.config import ScaleCalculationMode
        from torchao.prototype.mx_formats.mx_tensor import to_mx

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


@pytest.mark.parametrize("mode", ["floor", "rceil"])
def test_scales_and_packed_bytes_equal_torchao(mode):
    for x in random_inputs():
        ours = quantize_mxfp4(x, scale_mode=mode)
        ref_scale, ref_data = torchao_mx(x, mode)
        assert torch.equal(ours.scales, ref_scale.reshape(ours.scales.shape))
        assert torch.equal(ours.packed, ref_data.reshape(ours.packed.shape))


def test_all_ones_mantissa_scale_is_read_from_the_bits():
    x = (torch.full((1, 32), 1.0).view(torch.int32) | 0x7FFFFF).view(torch.float32) * 2.0**40  # (2 − 2^−23)·2^40
    assert float(torch.floor(torch.log2(x[0, 0]))) == 41.0  # the float rounding the spec warns about
    assert int(quantize_mxfp4(x).scales[0, 0]) == 127 + 40 - 2  # ⌊log₂⌋ = 40, read from the bits


def test_element_rounding_equals_ml_dtypes():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    # values already scaled (one block with scale code 127 is x itself: amax in [4, 8))
    grid = np.linspace(-7.5, 7.5, 3001, dtype=np.float32)
    grid = np.concatenate([grid, np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25, -5.0], np.float32)])
    for start in range(0, len(grid), 31):
        chunk = grid[start: start + 31]
        block = np.concatenate([chunk, np.array([4.0], np.float32)])  # pins the scale to 2^0
        block = np.pad(block, (0, 32 - len(block)))
        q = quantize_mxfp4(torch.tensor(block)[None])
        assert int(q.scales[0, 0]) == 127
        ref = block.astype(ml_dtypes.float4_e2m1fn).astype(np.float32)
        ref = np.clip(ref, -6, 6)
        got = q.dequantize()[0].numpy()
        assert np.array_equal(got, ref), (block, got, ref)


def test_specification_edge_cases_table():
    x = torch.zeros(6, 32)
    x[1, 0] = float("nan")
    x[2, 3] = float("inf")
    x[3, :] = 1.17549421e-38  # the largest float32 subnormal: ⌊log₂⌋ = −127, code clamps to 0
    x[4, :4] = torch.tensor([6.0, -0.25, 0.75, 100.0])  # amax 100: e = 6 − 2 = 4
    x[5, :2] = torch.tensor([2.0**-149, 3.0])           # a subnormal beside a normal
    q = quantize_mxfp4(x)
    assert q.scales[:, 0].tolist() == [0, 255, 255, 0, 131, 126]
    d = q.dequantize()
    assert torch.equal(d[0], torch.zeros(32))
    assert torch.isnan(d[1]).all() and torch.isnan(d[2]).all()
    # spec: elements x·2^127 = 2·(1 − 2^−23)·... round to 2, so the block decodes to 2·2^−127
    assert torch.allclose(d[3], torch.full((32,), 2.0 * 2.0**-127), rtol=0, atol=0)
    # scale 2^4: 6/16 = 0.375 → 0.5, −0.25/16 → −0, 0.75/16 → 0, 100/16 = 6.25 → 6 (saturated)
    assert d[4, :4].tolist() == [8.0, -0.0, 0.0, 96.0]
    assert d[5, :2].tolist() == [0.0, 3.0]


def test_padding_shape_storage_and_round_trip():
    x = torch.randn(3, 5, 70)
    q = quantize_mxfp4(x)
    assert q.shape == (3, 5, 70) and q.packed.shape == (3, 5, 48) and q.scales.shape == (3, 5, 3)
    assert q.dequantize().shape == x.shape
    full = quantize_mxfp4(torch.randn(64, 1024))
    assert full.bits_per_element == 4.25
    # the error is bounded by the grid: at most 2·2^e per element (half the largest gap is 1,
    # and FLOOR's saturation cuts amax ∈ [6, 8)·2^e to 6·2^e)
    x2 = torch.randn(64, 1024, generator=torch.Generator().manual_seed(1))
    q2 = quantize_mxfp4(x2)
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
    assert len(E2M1_VALUES) == 8


@pytest.mark.parametrize("mode", ["floor", "rceil"])
def test_where_torchao_departs_from_the_specification(mode):
    """Two documented departures of torchao's reference, pinned so that a change shows:
    an Inf in a block gets code 253 (FLOOR) or 254 (RCEIL) there, the NaN code 255 here; and
    for a block of code 0 torchao divides by 2^−126 (FLOOR) or by 1 (RCEIL) instead of the
    code's 2^−127, so its elements decode 2× too small or to 0, while ours decode exactly."""
    x = torch.zeros(3, 32)
    x[0, 0] = float("nan")
    x[1, 3] = float("inf")
    x[2, :] = 1.17549421e-38  # 2^−126 − 2^−149: a subnormal-amax block
    ref_scale, ref_data = torchao_mx(x, mode)
    ours = quantize_mxfp4(x, scale_mode=mode)
    assert ours.scales[:, 0].tolist() == [255, 255, 0]
    assert ref_scale.reshape(-1).tolist() == [255, 253 if mode == "floor" else 254, 0]
    assert ours.packed[2, 0] == 0x44 and ref_data[2, 0] == (0x22 if mode == "floor" else 0x00)
    assert torch.allclose(ours.dequantize()[2], x[2], rtol=1e-6, atol=0)
