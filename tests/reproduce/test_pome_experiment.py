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
    claim = a["claims"][0]
    assert claim["ours"] == m["acc_pome"] and claim["baseline"] == m["acc_finetuned"]
    assert claim["holds"] == (m["acc_pome"] > m["acc_finetuned"])
    assert a["metrics"] == b["metrics"]  # same seed, same figures
    for png in ("accuracy.png", "pome_grid.png", "loss.png"):
        assert (tmp_path / "a" / "pome" / png).exists()
    json.loads((tmp_path / "a" / "pome" / "results.json").read_text())
