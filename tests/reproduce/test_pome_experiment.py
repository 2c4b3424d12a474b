"""End-to-end check of the POME reproduction at a tiny size (the real --quick run is
~100 s and is what `make demo` runs)."""

import json

import pytest

from neurips26 import reproduce
from neurips26.reproduce import pome as pome_exp
from neurips26.reproduce import run_experiment


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setitem(
        pome_exp.SIZES, True,
        dict(hidden=32, ffn=64, layers=1, pretrain_steps=15, finetune_steps=15, batch=16, seeds=2,
             n_train=200, n_val=40, n_test=60),
    )


def test_pome_experiment_contract_and_determinism(tiny, tmp_path):
    exp = reproduce.get("pome")
    a = run_experiment(exp, tmp_path / "a", seed=1, quick=True)
    b = run_experiment(exp, tmp_path / "b", seed=1, quick=True)
    m = a["metrics"]
    for key in ("acc_finetuned", "acc_pome", "acc_truncated", "acc_dare", "acc_extrapolate", "acc_pome_all_linear"):
        assert 0.0 <= m[key] <= 1.0
        assert len(m[key + "_per_seed"]) == 2
    assert m["acc_pome"] == pytest.approx(sum(m["acc_pome_per_seed"]) / 2)
    assert m["finetune_seeds"] == [1, 2]  # ctx.seed, ctx.seed + 1
    assert len(a["claims"]) == 2
    for claim in a["claims"]:  # every claim decided over the fine-tuning seeds, with its interval
        assert claim["verdict"] in ("holds", "does not hold", "inconclusive", "not tested")
        assert claim["n"] + claim["n_capped"] == 2 and claim["method"] == "paired t"
    claim = a["claims"][0]
    assert claim["ours_seeds"] == m["acc_pome_per_seed"] and claim["baseline_seeds"] == m["acc_finetuned_per_seed"]
    assert claim["ours"] == pytest.approx(m["acc_pome"]) and claim["baseline"] == pytest.approx(m["acc_finetuned"])
    assert claim["diff"] == pytest.approx(m["acc_pome"] - m["acc_finetuned"])
    lo, hi = claim["ci"]
    assert lo <= claim["diff"] <= hi
    assert claim["verdict"] == ("holds" if lo > 0 else "does not hold" if hi < 0 else "inconclusive")
    assert a["metrics"] == b["metrics"]  # same seed, same figures
    for png in ("accuracy.png", "pome_grid.png", "loss.png"):
        assert (tmp_path / "a" / "pome" / png).exists()
    json.loads((tmp_path / "a" / "pome" / "results.json").read_text())


def test_pome_seeds_in_parallel_give_the_same_figures(tiny, tmp_path):
    """Each fine-tuning seed is one task of ctx.map; a worker process pretrains the base again itself
    and must get the same model: two processes give what one gives. A worker runs one thread with its
    kernels pinned (neurips26.reproduce._pinning), which this test process need not be: the losses may
    differ in their last bits, the accuracies and the claims not."""
    exp = reproduce.get("pome")
    one = run_experiment(exp, tmp_path / "one", seed=3, quick=True)
    two = run_experiment(exp, tmp_path / "two", seed=3, quick=True, jobs=2)
    assert one["metrics"].keys() == two["metrics"].keys()
    for key, value in one["metrics"].items():
        if key.endswith("_loss"):
            assert two["metrics"][key] == pytest.approx(value, rel=1e-6), key
        else:
            assert two["metrics"][key] == value, key
    assert one["claims"] == two["claims"]
