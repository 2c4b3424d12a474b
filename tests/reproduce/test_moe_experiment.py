"""The moe-mxfp4 reproduction end to end at a tiny size (--quick takes about half a minute)."""

import math

from neurips26 import reproduce
from neurips26.reproduce import moe_mxfp4 as exp_mod
from neurips26.reproduce import run_experiment

TINY = dict(archs=("mixtral", "deepseek"), pretrain_steps=5, qat_steps=3, context=16, batch=4, eval_seqs=8, rank=2,
            fractions=(1.0,), width=32, experts=4)


def test_moe_experiment_contract(monkeypatch, tmp_path):
    monkeypatch.setitem(exp_mod.SIZES, True, TINY)
    out = run_experiment(reproduce.get("moe-mxfp4"), tmp_path, seed=0, quick=True)
    per = out["metrics"]["per_arch"]
    assert set(per) == {"mixtral", "deepseek"}
    for r in per.values():
        for key in ("ppl_bf16", "ppl_rtn", "ppl_gptq", "ppl_uniform", "ppl_loadaware", "ppl_qat", "ppl_qat_replay"):
            assert math.isfinite(r[key]) and r[key] > 1
        assert 0 <= r["agree_qat"]["jaccard"] <= 1 and 0 <= r["agree_qat_replay"]["exact"] <= 1
        # equal budget: load-aware ranks sum to experts × rank in every weight
        assert all(sum(v) == 4 * 2 for v in r["loadaware_ranks"].values())
        assert all(d["measured_flip"] <= d["predicted_flip"] for d in r["margin_rtn"].values())
    assert (tmp_path / "moe-mxfp4" / "perplexity.png").exists()


def test_gptq_baseline_puts_the_experts_on_the_mxfp4_grid_and_leaves_the_rest():
    """llm-compressor's GPTQ: every routed expert weight is an MXFP4 value (our own RTN of it is
    the identity), it is not plain RTN of the original weights (GPTQ feeds the rounding error
    forward), and routers and attention are untouched."""
    import pytest
    import torch

    pytest.importorskip("llmcompressor")
    from neurips26.compression import quantize_mxfp4
    from neurips26.moe import find_moe_blocks

    model = exp_mod.build("qwen3", 32, 4, 0)
    train, calib, _ = exp_mod.text_splits(16)
    q = exp_mod.gptq_mxfp4(model, exp_mod.eval_batches(calib, 16, 8))
    differs_from_rtn = False
    for b0, b1 in zip(find_moe_blocks(model), find_moe_blocks(q)):
        for name in ("gate_up_proj", "down_proj"):
            W0, W1 = getattr(b0.experts, name).detach(), getattr(b1.experts, name).detach()
            assert torch.equal(quantize_mxfp4(W1).dequantize(torch.float32), W1)
            differs_from_rtn |= not torch.equal(quantize_mxfp4(W0).dequantize(torch.float32), W1)
        assert torch.equal(b0.gate.weight, b1.gate.weight)
    assert differs_from_rtn
    sd0, sd1 = model.state_dict(), q.state_dict()
    assert all(torch.equal(sd0[k], sd1[k]) for k in sd0 if "experts" not in k)
