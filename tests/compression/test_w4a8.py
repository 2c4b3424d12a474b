"""W4A8: the MXFP4 → FP8 fold is exact within its range (checked against the MXFP4
dequantization), per-token FP8 activations stay within e4m3's rounding, the matmul equals
float64 arithmetic on the rounded operands, and the experts module matches the MXFP4
fake-quantized experts up to activation rounding."""

import copy

import pytest
import torch

from neurips26.compression import fake_quantize_mxfp4, quantize_mxfp4
from neurips26.moe import find_moe_blocks
from neurips26.compression.w4a8 import (W4A8Experts, mxfp4_to_fp8, quantize_fp8_rows, quantize_moe_w4a8,
                                        w4a8_matmul)


def test_the_fold_into_fp8_is_exact_within_eight_binades_and_rounds_below():
    g = torch.Generator().manual_seed(0)
    W = torch.randn(48, 256, generator=g)
    W[:, 32:64] *= 2.0 ** -7  # a block 7 binades down: still exact
    W[5, 96:128] *= 2.0 ** -12  # 12 binades down in one row: rounds
    t = quantize_mxfp4(W)
    w8, scale = mxfp4_to_fp8(t)
    assert w8.dtype == torch.float8_e4m3fn and scale.shape == (48, 1)
    assert torch.equal(torch.log2(scale), torch.round(torch.log2(scale)))  # powers of two
    ref = t.dequantize(torch.float64)
    got = w8.to(torch.float64) * scale.to(torch.float64)
    exps = t.scales.to(torch.int64) - 127
    within = (exps - exps.amax(1, keepdim=True) >= -8).repeat_interleave(32, dim=1)  # per element
    assert within.float().mean() > 0.9 and not within.all()  # both cases occur
    assert torch.equal(got[within], ref[within])
    err = (got - ref).abs()
    assert (err[~within] <= (2.0 ** -10 * scale).expand_as(err)[~within]).all()


def test_fp8_rows_round_within_e4m3_precision_and_refuse_nan():
    x = torch.randn(6, 64, generator=torch.Generator().manual_seed(1))
    x[2] = 0.0
    x8, s = quantize_fp8_rows(x)
    back = x8.float() * s
    assert torch.all(back[2] == 0)
    big = x.abs() > x.abs().amax(1, keepdim=True) * 2.0 ** -6  # normal range of e4m3 after scaling
    assert ((back - x).abs() <= 2.0 ** -4 * x.abs() + 1e-12)[big].all()
    assert not torch.equal(back, x)
    with pytest.raises(ValueError, match="NaN"):
        quantize_fp8_rows(torch.tensor([[1.0, float("nan")]]))


def test_matmul_equals_float64_arithmetic_on_the_rounded_operands():
    g = torch.Generator().manual_seed(2)
    x, W = torch.randn(7, 128, generator=g), torch.randn(32, 128, generator=g)
    w8, ws = mxfp4_to_fp8(quantize_mxfp4(W))
    out = w4a8_matmul(x, w8, ws, out_dtype=torch.float32)
    x8, xs = quantize_fp8_rows(x)
    ref = (x8.double() * xs.double()) @ (w8.double() * ws.double()).T
    assert torch.allclose(out.double(), ref, rtol=1e-5, atol=1e-5)


def tiny_qwen3():
    import transformers as T

    cfg = T.Qwen3MoeConfig(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, num_experts=4, num_experts_per_tok=2,
                           moe_intermediate_size=64, decoder_sparse_step=1, norm_topk_prob=True)
    torch.manual_seed(0)
    return T.Qwen3MoeForCausalLM(cfg).eval()


def test_experts_match_mxfp4_fake_quantization_up_to_activation_rounding():
    pytest.importorskip("transformers")
    model = tiny_qwen3()
    block = find_moe_blocks(model)[0]
    ref = copy.deepcopy(block.experts)
    with torch.no_grad():
        ref.gate_up_proj.copy_(fake_quantize_mxfp4(ref.gate_up_proj))
        ref.down_proj.copy_(fake_quantize_mxfp4(ref.down_proj))
    g = torch.Generator().manual_seed(3)
    h = torch.randn(20, 64, generator=g)
    idx = torch.stack([torch.randperm(4, generator=g)[:2] for _ in range(20)])
    wts = torch.rand(20, 2, generator=g)
    fast, lean = W4A8Experts(block.experts, cache_fp8=True), W4A8Experts(block.experts, cache_fp8=False)
    with torch.no_grad():
        y_ref, y = ref(h, idx, wts), fast(h, idx, wts)
        assert torch.equal(y, lean(h, idx, wts))
    rel = float((y - y_ref).norm() / y_ref.norm())
    assert 0 < rel < 0.05
    # storage: the packed MXFP4 path keeps 4.25 bits per weight, the FP8 cache 8 bits + a scale per row
    n = block.experts.gate_up_proj.numel() + block.experts.down_proj.numel()
    assert abs(8 * lean.storage_bytes() / n - 4.25) < 1e-9
    assert 8 * fast.storage_bytes() / n < 8.6


def test_whole_model_w4a8_and_bad_shapes():
    pytest.importorskip("transformers")
    model = tiny_qwen3()
    ids = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(4))
    ref = copy.deepcopy(model)
    with torch.no_grad():
        for b in find_moe_blocks(ref):
            b.experts.gate_up_proj.copy_(fake_quantize_mxfp4(b.experts.gate_up_proj))
            b.experts.down_proj.copy_(fake_quantize_mxfp4(b.experts.down_proj))
        names = quantize_moe_w4a8(model)
        assert len(names) == 2
        a, b = model(ids).logits, ref(ids).logits
    assert torch.isfinite(a).all() and float((a - b).norm() / b.norm()) < 0.05

    class Odd(torch.nn.Module):
        gate_up_proj = torch.nn.Parameter(torch.zeros(2, 16, 40))
        down_proj = torch.nn.Parameter(torch.zeros(2, 40, 8))
        act_fn = torch.nn.SiLU()

    with pytest.raises(ValueError, match="multiple of 32"):
        W4A8Experts(Odd())


def test_decode_benchmark_skips_without_cuda_and_runs_its_pipeline_on_a_tiny_cpu_model(tmp_path, capsys):
    import importlib.util
    from pathlib import Path

    pytest.importorskip("transformers")
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_w4a8_decode.py"
    spec = importlib.util.spec_from_file_location("bench_w4a8_decode", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    if not torch.cuda.is_available():
        assert bench.main([]) == 0 and "skipped" in capsys.readouterr().out
    out = tmp_path / "w4a8.md"
    assert bench.main(["--tiny", "--batches", "1", "--prompt", "8", "--new-tokens", "2", "--out", str(out)]) == 0
    text = out.read_text()
    assert all(v in text for v in ("| bf16 | 1 |", "| w4a8 (fp8 cache) | 1 |", "| w4a8 (packed mxfp4) | 1 |"))
