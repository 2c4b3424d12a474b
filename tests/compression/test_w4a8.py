"""W4A8: the MXFP4 → FP8 fold is exact within its range (checked against the MXFP4
dequantization), per-token FP8 activations stay within e4m3's rounding, the matmul equals
float64 arithmetic on the rounded operands, and the experts module matches the MXFP4
fake-quantized experts up to activation rounding."""

import copy

import pytest
import torch

from neurips26.compression import fake_quantize_mxfp4, quantize_mxfp4
from neurips26.moe import find_moe_blocks
from neurips26.compression.w4a8 import (W4A8Experts, grouped_fp8_matmul, grouped_matmul, mxfp4_to_fp8,
                                        quantize_fp8_rows, quantize_moe_w4a8, route_groups, w4a8_matmul)


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
    fast = W4A8Experts(block.experts, cache_fp8=True, check_inputs=True)
    lean = W4A8Experts(block.experts, cache_fp8=False, check_inputs=True)
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
        names = quantize_moe_w4a8(model, check_inputs=True)
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
    for v in ("bf16 grouped_mm", "bf16 eager", "w4a8", "w4a8 + adapters r32", "w4a8 + adapters r64", "w4a8 packed mxfp4"):
        assert f"| {v} | 1 |" in text, v
    assert "One MoE layer's experts alone" in text


# --- the grouped formulation ------------------------------------------------------------------

def per_expert_reference(module, h, idx, wts):
    """The per-expert loop the grouped forward replaced, transcribed: for each hit expert, its
    (slot, token) pairs from torch.where, one w4a8_matmul per projection, index_add_ in expert order.
    One change: an expert's rows are taken in token order (torch.where gives them slot-major). The
    CPU FP8 GEMM rounds a row by where it sits in its block of rows (last-bit differences in
    float32 between the same row at M=1 and M=9), so bit equality needs the same rows in the same order."""
    out = torch.zeros_like(h)
    mask = torch.nn.functional.one_hot(idx, num_classes=module.num_experts).permute(2, 1, 0)
    for e in torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero()[:, 0].tolist():
        pos, tokens = torch.where(mask[e])
        by_token = torch.argsort(tokens, stable=True)
        pos, tokens = pos[by_token], tokens[by_token]
        gate_up = w4a8_matmul(h[tokens], *module._weights("gate_up", e), out_dtype=module.out_dtype)
        if module.has_adapters:
            gate_up = gate_up + ((h[tokens].to(module.out_dtype) @ module.gate_up_A[e].T) @ module.gate_up_B[e].T)
        gate, up = gate_up.chunk(2, dim=-1)
        a = module.act_fn(gate) * up
        y = w4a8_matmul(a, *module._weights("down", e), out_dtype=module.out_dtype)
        if module.has_adapters:
            y = y + ((a.to(module.out_dtype) @ module.down_A[e].T) @ module.down_B[e].T)
        out.index_add_(0, tokens, (y * wts[tokens, pos, None]).to(out.dtype))
    return out


def routed(T, E, k, H, seed, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(T, H, generator=g).to(dtype)
    idx = torch.stack([torch.randperm(E, generator=g)[:k] for _ in range(T)])
    return h, idx, torch.softmax(torch.randn(T, k, generator=g), -1).to(dtype)


class FusedExperts(torch.nn.Module):
    def __init__(self, E, H, I, dtype, seed):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.gate_up_proj = torch.nn.Parameter((torch.randn(E, 2 * I, H, generator=g) * H**-0.5).to(dtype))
        self.down_proj = torch.nn.Parameter((torch.randn(E, H, I, generator=g) * I**-0.5).to(dtype))
        self.act_fn = torch.nn.SiLU()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("cache_fp8", [True, False])
def test_sorted_grouped_forward_equals_the_per_expert_loop_bit_for_bit(dtype, cache_fp8):
    E, H, I, k = 6, 64, 32, 2
    experts = FusedExperts(E, H, I, dtype, seed=5)
    m = W4A8Experts(experts, cache_fp8=cache_fp8, check_inputs=True)
    for T, seed in ((1, 0), (5, 1), (23, 2)):  # some experts unrouted at every size
        h, idx, wts = routed(T, E, k, H, seed, dtype)
        with torch.no_grad():
            assert torch.equal(m(h, idx, wts), per_expert_reference(m, h, idx, wts))


def test_adapters_run_grouped_and_equal_the_per_expert_loop():
    E, H, I, k, r = 5, 64, 32, 2, 5  # rank 5: padded with zeros to 8
    experts = FusedExperts(E, H, I, torch.bfloat16, seed=6)
    g = torch.Generator().manual_seed(7)
    adapters = {"gate_up_proj": (torch.randn(E, 2 * I, r, generator=g), torch.randn(E, r, H, generator=g) * 0.1),
                "down_proj": (torch.randn(E, H, r, generator=g), torch.randn(E, r, I, generator=g) * 0.1)}
    m = W4A8Experts(experts, adapters=adapters, check_inputs=True)
    plain = W4A8Experts(experts, check_inputs=True)
    h, idx, wts = routed(17, E, k, H, 8, torch.bfloat16)
    with torch.no_grad():
        y = m(h, idx, wts)
        assert torch.equal(y, per_expert_reference(m, h, idx, wts))
        assert not torch.equal(y, plain(h, idx, wts))  # the adapters did something
    assert m.gate_up_A.shape == (E, 8, H) and m.down_B.shape == (E, H, 8) and not m.down_B[..., r:].any()
    # the GPU's grouped_mm accepts the padded factors' layout (torch's meta checks: 16-byte strides)
    offs = torch.empty(E, dtype=torch.int32, device="meta")
    for key, width in (("gate_up", H), ("down", I)):
        A, B = getattr(m, f"{key}_A").to("meta"), getattr(m, f"{key}_B").to("meta")
        t = torch.nn.functional.grouped_mm(torch.empty(16, width, dtype=torch.bfloat16, device="meta"),
                                           A.transpose(-2, -1), offs=offs)
        torch.nn.functional.grouped_mm(t, B.transpose(-2, -1), offs=offs)
    with pytest.raises(RuntimeError, match="16 bytes"):  # an unpadded rank 5 would not be accepted
        torch.nn.functional.grouped_mm(torch.empty(16, 5, dtype=torch.bfloat16, device="meta"),
                                       B[..., :5].transpose(-2, -1), offs=offs)
    with pytest.raises(ValueError, match="B \\(E, out, r\\)"):
        W4A8Experts(experts, adapters={"gate_up_proj": adapters["gate_up_proj"],
                                       "down_proj": (adapters["down_proj"][0][:, :, :4], adapters["down_proj"][1])})
    with pytest.raises(ValueError, match="keys"):
        W4A8Experts(experts, adapters={"gate_up_proj": adapters["gate_up_proj"]})


def test_route_groups_sorts_stably_and_ends_match_a_count():
    g = torch.Generator().manual_seed(9)
    idx = torch.randint(0, 7, (40, 3), generator=g)
    order, experts, ends = route_groups(idx, 7)
    flat = idx.reshape(-1)
    assert torch.equal(experts, flat[order]) and torch.equal(order, torch.tensor(
        sorted(range(flat.numel()), key=lambda i: (int(flat[i]), i))))
    assert ends.dtype == torch.int32 and ends.tolist() == torch.bincount(flat, minlength=7).cumsum(0).tolist()


class ScaledGroupedMMEmulation:
    """torch._scaled_grouped_mm on the CPU: torch's own argument checks (the meta kernel, run on
    meta copies of exactly what the module passes), then the product group by group with
    torch._scaled_mm in bfloat16, as the CUDA kernel returns it."""

    def __init__(self, real_tolist):
        self.calls, self.real_tolist = 0, real_tolist

    def __call__(self, a, b, scale_a, scale_b, offs=None, out_dtype=None):
        self.calls += 1
        meta = [t.to("meta") for t in (a, scale_a, scale_b, offs)]
        b_meta = torch.empty_strided(b.shape, b.stride(), dtype=b.dtype, device="meta")
        torch.ops.aten._scaled_grouped_mm(meta[0], b_meta, meta[1], meta[2], offs=meta[3], out_dtype=out_dtype)
        assert out_dtype == torch.bfloat16 and offs.dtype == torch.int32
        out, start = torch.zeros(a.shape[0], b.shape[-1], dtype=out_dtype), 0
        for g, end in enumerate(self.real_tolist(offs)):
            if end > start:
                out[start:end] = torch._scaled_mm(a[start:end], b[g], scale_a=scale_a[start:end, None],
                                                  scale_b=scale_b[g][None], out_dtype=out_dtype)
            start = end
        return out


@pytest.mark.parametrize("cache_fp8", [True, False])
def test_grouped_fp8_path_passes_torchs_checks_has_no_host_sync_and_equals_the_loop(monkeypatch, cache_fp8):
    """The sm90+ path on the CPU: its _scaled_grouped_mm call passes torch's meta checks, the
    forward makes no .item() / .tolist() / nonzero() / bool() host sync, and it equals the
    per-expert loop bit for bit (bfloat16 model: the grouped kernel returns bfloat16)."""
    E, H, I, k = 6, 64, 32, 2
    experts = FusedExperts(E, H, I, torch.bfloat16, seed=10)
    loop = W4A8Experts(experts, cache_fp8=cache_fp8, grouped=False)
    fast = W4A8Experts(experts, cache_fp8=cache_fp8, grouped=True)
    h, idx, wts = routed(13, E, k, H, 11, torch.bfloat16)
    emulation = ScaledGroupedMMEmulation(torch.Tensor.tolist)
    monkeypatch.setattr(torch, "_scaled_grouped_mm", emulation, raising=False)

    def sync(*args, **kwargs):
        raise AssertionError("host sync in the grouped forward")

    with torch.no_grad():
        want = loop(h, idx, wts)
        with monkeypatch.context() as mp:
            for name in ("item", "tolist", "nonzero", "__bool__"):
                mp.setattr(torch.Tensor, name, sync)
            mp.setattr(torch, "nonzero", sync)
            got = fast(h, idx, wts)
            with pytest.raises(AssertionError, match="host sync"):
                loop(h, idx, wts)  # the guard works: the per-expert loop reads its group ends on the host
    assert emulation.calls == 2 and torch.equal(got, want)
    # and the meta check is not vacuous: a row-major B is refused
    a8 = torch.empty(8, H, dtype=torch.float8_e4m3fn, device="meta")
    b8 = torch.empty(E, H, 2 * I, dtype=torch.float8_e4m3fn, device="meta")
    with pytest.raises(RuntimeError, match="column major"):
        torch.ops.aten._scaled_grouped_mm(a8, b8, torch.ones(8, device="meta"), torch.ones(E, 2 * I, device="meta"),
                                          offs=torch.ones(E, dtype=torch.int32, device="meta"),
                                          out_dtype=torch.bfloat16)


def test_grouped_helpers_leave_empty_groups_and_trailing_rows_alone():
    g = torch.Generator().manual_seed(12)
    x = torch.randn(10, 32, generator=g).to(torch.bfloat16)
    w = torch.randn(4, 16, 32, generator=g).to(torch.bfloat16)
    ends = torch.tensor([3, 3, 8, 8], dtype=torch.int32)  # groups 1 and 3 empty, rows 8-9 unrouted
    ref = torch.zeros(10, 16, dtype=torch.bfloat16)
    ref[:3], ref[3:8] = x[:3] @ w[0].T, x[3:8] @ w[2].T
    assert torch.equal(grouped_matmul(x, w, ends), ref) and torch.equal(grouped_matmul(x, w, ends, grouped=False), ref)
    w8, ws = mxfp4_to_fp8(quantize_mxfp4(w.float()))
    x8, xs = quantize_fp8_rows(x)
    y = grouped_fp8_matmul(x8, xs, w8, ws, ends, torch.float32)
    assert torch.equal(y[8:], torch.zeros(2, 16)) and torch.equal(
        y[3:8], torch._scaled_mm(x8[3:8], w8[2].t(), scale_a=xs[3:8], scale_b=ws[2].reshape(1, -1),
                                 out_dtype=torch.float32))


def test_check_inputs_refuses_bad_routing_and_nan_activations_only_when_on():
    E, H, I = 4, 64, 32
    experts = FusedExperts(E, H, I, torch.float32, seed=13)
    checked, unchecked = W4A8Experts(experts, check_inputs=True), W4A8Experts(experts)
    h, idx, wts = routed(3, E, 2, H, 14)
    bad = h.clone()
    bad[1, 5] = float("nan")
    with torch.no_grad():
        with pytest.raises(ValueError, match="NaN"):
            checked(bad, idx, wts)
        with pytest.raises(ValueError, match="outside"):
            checked(h, idx + E, wts)
        with pytest.raises(ValueError, match="top_k_weights"):
            checked(h, idx, wts[:, :1])
        assert torch.isnan(unchecked(bad, idx, wts)[1]).all()  # off: no sync, the NaN stays in its token's row
        assert torch.isfinite(unchecked(bad, idx, wts)[[0, 2]]).all()
    with pytest.raises(TypeError, match="check_inputs"):
        W4A8Experts(experts, check_inputs=1)


def test_whole_model_with_adapters_and_zero_adapters_change_nothing():
    pytest.importorskip("transformers")
    ids = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(15))
    plain, adapted = tiny_qwen3(), tiny_qwen3()
    with torch.no_grad():
        quantize_moe_w4a8(plain, check_inputs=True)
        quantize_moe_w4a8(adapted, adapter_rank=4, check_inputs=True)
        a, b = plain(ids).logits, adapted(ids).logits
        assert torch.isfinite(b).all() and not torch.equal(a, b)
        for m in adapted.modules():
            if isinstance(m, W4A8Experts):
                m.gate_up_B.zero_()
                m.down_B.zero_()
        assert torch.equal(adapted(ids).logits, a)
    with pytest.raises(ValueError, match="adapter_rank"):
        quantize_moe_w4a8(tiny_qwen3(), adapter_rank=0)


def test_only_torchaos_kernel_load_note_is_dropped(caplog):
    import logging

    import neurips26.compression  # noqa: F401  (installs the filter)

    log = logging.getLogger("torchao")
    with caplog.at_level(logging.WARNING, logger="torchao"):
        log.warning("Failed to load /venv/site-packages/torchao/_C_mxfp8.cpython-310-x86_64-linux-gnu.so: no CUDA")
        log.warning("Failed to load the config file")  # not a kernel .so: kept
        log.warning("something else from torchao")
    assert [r.getMessage() for r in caplog.records] == ["Failed to load the config file", "something else from torchao"]
