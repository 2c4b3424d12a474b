"""The moe-mxfp4 reproduction end to end at a tiny size (--quick takes about half a minute)."""

import math

import pytest

from neurips26 import reproduce
from neurips26.reproduce import moe_mxfp4 as exp_mod
from neurips26.reproduce import run_experiment

TINY = dict(archs=("mixtral", "deepseek"), seeds=2, pretrain_steps=5, qat_steps=3, context=16, batch=4, eval_seqs=8,
            rank=2, fractions=(0.5, 1.0), width=32, experts=4)


def test_moe_experiment_contract(monkeypatch, tmp_path):
    from scipy import stats

    from neurips26.reproduce._harness import verdict

    monkeypatch.setitem(exp_mod.SIZES, True, TINY)
    out = run_experiment(reproduce.get("moe-mxfp4"), tmp_path, seed=0, quick=True)
    per_seed, mean = out["metrics"]["per_seed"], out["metrics"]["mean"]
    assert set(per_seed) == set(mean) == {"mixtral", "deepseek"}
    for arch, runs in per_seed.items():
        assert len(runs) == 2
        assert runs[0]["ppl_bf16"] != runs[1]["ppl_bf16"]  # two seeds: two different models
        for r in runs:
            for key in ("ppl_bf16", "ppl_rtn", "ppl_gptq", "ppl_uniform", "ppl_loadaware", "ppl_qat", "ppl_qat_replay"):
                assert math.isfinite(r[key]) and r[key] > 1
            assert 0 <= r["agree_qat"]["jaccard"] <= 1 and 0 <= r["agree_qat_replay"]["exact"] <= 1
            # equal budget: load-aware ranks sum to experts × rank in every weight
            assert all(sum(v) == 4 * 2 for v in r["loadaware_ranks"].values())
            assert all(d["measured_flip"] <= d["predicted_flip"] for d in r["margin_rtn"].values())
            # the reported replay run is the fraction with the lowest calibration perplexity, scored on held-out text
            sweep = r["replay_sweep"]
            best = min(sweep, key=lambda f: sweep[f]["ppl_calib"])
            assert float(best) == r["replay_fraction"] and sweep[best]["ppl"] == r["ppl_qat_replay"]
        assert mean[arch]["ppl_gptq"] == sum(r["ppl_gptq"] for r in runs) / 2
    # every comparison is paired over the seeds: its interval is scipy's paired t interval of the recorded numbers
    claims = out["claims"]
    assert len(claims) == 2 * 7
    for c in claims:
        if "margin bound" in c["claim"]:
            assert "verdict" not in c and c["holds"] is True
            continue
        arch = c["claim"].split(":")[0]
        assert c["n"] == 2 and c["level"] == 0.95 and len(c["ours_seeds"]) == 2
        if "Jaccard" in c["claim"]:
            assert c["ours_seeds"] == [r["agree_qat_replay"]["jaccard"] for r in per_seed[arch]]
            a, b = c["ours_seeds"], c["baseline_seeds"]
        else:
            assert c["better"] == "lower" and all(v in [r[k] for r in per_seed[arch] for k in r if k.startswith("ppl_")]
                                                  for v in c["ours_seeds"] + c["baseline_seeds"])
            a, b = c["baseline_seeds"], c["ours_seeds"]
        ci = stats.ttest_rel(a, b).confidence_interval(0.95)
        if c["ci"][0] != c["ci"][1]:
            assert c["ci"] == [pytest.approx(ci.low), pytest.approx(ci.high)]
        assert verdict(c) == ("holds" if c["ci"][0] > 0 else "does not hold" if c["ci"][1] < 0 else "inconclusive")
    assert any("load-aware compensation (no training) beats GPTQ" in c["claim"] for c in claims)
    assert (tmp_path / "moe-mxfp4" / "perplexity.png").exists()
    assert "| mixtral | 1 |" in (tmp_path / "moe-mxfp4" / "report.md").read_text()  # the per-seed table


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
