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
        for key in ("ppl_bf16", "ppl_rtn", "ppl_uniform", "ppl_loadaware", "ppl_qat", "ppl_qat_replay"):
            assert math.isfinite(r[key]) and r[key] > 1
        assert 0 <= r["agree_qat"]["jaccard"] <= 1 and 0 <= r["agree_qat_replay"]["exact"] <= 1
        # equal budget: load-aware ranks sum to experts × rank in every weight
        assert all(sum(v) == 4 * 2 for v in r["loadaware_ranks"].values())
        assert all(d["measured_flip"] <= d["predicted_flip"] for d in r["margin_rtn"].values())
    assert (tmp_path / "moe-mxfp4" / "perplexity.png").exists()
