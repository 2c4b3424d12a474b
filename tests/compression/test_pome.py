import re

import pytest
import torch

from neurips26.compression import apply_pome, pome_delta, resolve_rank


def _delta(m=48, n=32, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(m, n, generator=g, dtype=dtype) @ torch.diag(torch.logspace(0, -2, n, dtype=dtype))


@pytest.mark.parametrize("rank_ratio", [0.1, 0.25, 0.5, 1.0])
def test_pome_delta_has_k_equal_singular_values_on_top_subspaces(rank_ratio):
    d = _delta()
    k = resolve_rank(d.shape, None, rank_ratio)
    out = pome_delta(d, rank_ratio=rank_ratio, scale="spectral")
    s = torch.linalg.svdvals(out)
    sigma = torch.linalg.svdvals(d)
    torch.testing.assert_close(s[:k], torch.full((k,), sigma[0].item(), dtype=d.dtype), atol=1e-10, rtol=0)
    assert k == len(s) or s[k:].abs().max() < 1e-10
    # Same top-k singular subspaces as delta: out = sigma_1 * U_k V_k^T exactly.
    u, _, vh = torch.linalg.svd(d, full_matrices=False)
    torch.testing.assert_close(out, sigma[0] * u[:, :k] @ vh[:k], atol=1e-10, rtol=0)


def test_fro_mode_preserves_truncated_energy_and_is_idempotent():
    d = _delta()
    k = 8
    out = pome_delta(d, rank=k, scale="fro")
    sigma = torch.linalg.svdvals(d)
    torch.testing.assert_close(torch.linalg.matrix_norm(out), sigma[:k].norm(), atol=1e-12, rtol=0)
    torch.testing.assert_close(pome_delta(out, rank=k, scale="fro"), out, atol=1e-12, rtol=0)


def test_float_scale_gain_and_rank_deficient_delta():
    d = _delta()
    out = pome_delta(d, rank=4, scale=0.3, gain=2.0)
    torch.testing.assert_close(torch.linalg.svdvals(out)[:4], torch.full((4,), 0.6, dtype=d.dtype))
    low = d[:, :3] @ torch.randn(3, 32, dtype=d.dtype)  # rank 3 < k
    s = torch.linalg.svdvals(pome_delta(low, rank=10))
    assert (s > 1e-8).sum() == 3  # null directions are not inflated
    assert torch.equal(pome_delta(torch.zeros(6, 4)), torch.zeros(6, 4))


def test_pome_delta_batched_equals_per_matrix():
    d = torch.stack([_delta(seed=i) for i in range(3)])
    out = pome_delta(d, rank=5)
    for i in range(3):
        torch.testing.assert_close(out[i], pome_delta(d[i], rank=5), atol=1e-12, rtol=0)


def test_pome_delta_validation():
    with pytest.raises(ValueError, match="NaN or Inf"):
        pome_delta(torch.tensor([[1.0, float("nan")], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="rank_ratio"):
        pome_delta(_delta(), rank_ratio=1.5)
    with pytest.raises(ValueError, match="scale"):
        pome_delta(_delta(), scale="nuclear")
    with pytest.raises(ValueError, match="matrix"):
        pome_delta(torch.ones(4))


def _pair(dtype=torch.float32):
    g = torch.Generator().manual_seed(3)
    pre = {
        "model.layers.0.mlp.up_proj.weight": torch.randn(32, 16, generator=g),
        "model.layers.0.mlp.down_proj.weight": torch.randn(16, 32, generator=g),
        "model.layers.0.mlp.up_proj.bias": torch.randn(32, generator=g),
        "model.norm.weight": torch.ones(16),
    }
    pre = {k: v.to(dtype) for k, v in pre.items()}
    ft = {k: v + 0.01 * torch.randn(v.shape, generator=g).to(dtype) for k, v in pre.items()}
    return pre, ft


def test_apply_pome_edits_only_targets_and_keeps_the_rest_identical():
    pre, ft = _pair()
    out, report = apply_pome(pre, ft, rank_ratio=0.25, return_report=True)
    assert list(report.edited) == ["model.layers.0.mlp.up_proj.weight"]
    for name in ft:
        if name not in report.edited:
            assert out[name] is ft[name]
    name = "model.layers.0.mlp.up_proj.weight"
    expected = pre[name] + pome_delta(ft[name] - pre[name], rank_ratio=0.25)
    torch.testing.assert_close(out[name], expected, atol=1e-6, rtol=0)
    # Idempotence: POME of the POME'd model changes nothing (up to float32 round-off).
    again = apply_pome(pre, out, rank_ratio=0.25)
    torch.testing.assert_close(again[name], out[name], atol=1e-6, rtol=0)


def test_apply_pome_target_selection():
    pre, ft = _pair()
    _, rep = apply_pome(pre, ft, targets=re.compile(r"down_proj"), return_report=True)
    assert list(rep.edited) == ["model.layers.0.mlp.down_proj.weight"]
    _, rep = apply_pome(pre, ft, targets="*mlp*", return_report=True)
    assert set(rep.edited) == {"model.layers.0.mlp.up_proj.weight", "model.layers.0.mlp.down_proj.weight"}
    assert "model.layers.0.mlp.up_proj.bias" in rep.skipped
    with pytest.raises(ValueError, match="no tensor matched"):
        apply_pome(pre, ft, targets="*attn*")


def test_apply_pome_bf16_keeps_dtype():
    pre, ft = _pair(torch.bfloat16)
    out = apply_pome(pre, ft)
    assert all(v.dtype == torch.bfloat16 for v in out.values())


def test_apply_pome_mismatches_name_the_key():
    pre, ft = _pair()
    bad = dict(ft)
    bad["model.layers.0.mlp.up_proj.weight"] = torch.zeros(31, 16)
    with pytest.raises(ValueError, match="up_proj.weight.*shapes differ"):
        apply_pome(pre, bad)
    bad = dict(ft)
    bad["model.norm.weight"] = bad["model.norm.weight"].double()
    with pytest.raises(ValueError, match="norm.weight.*dtypes differ"):
        apply_pome(pre, bad)
    bad = dict(ft)
    bad.pop("model.norm.weight")
    with pytest.raises(ValueError, match="only in pretrained: \\['model.norm.weight'\\]"):
        apply_pome(pre, bad)


def test_targets_mixing_globs_and_regexes():
    from neurips26.compression import match_targets

    pred = match_targets(["*up_proj.weight", re.compile(r"layers\.1\..*q_proj")])
    assert pred("model.layers.0.mlp.up_proj.weight")
    assert pred("model.layers.1.self_attn.q_proj.weight")
    assert not pred("model.layers.0.self_attn.q_proj.weight")
    with pytest.raises(TypeError, match="targets"):
        match_targets([3])
