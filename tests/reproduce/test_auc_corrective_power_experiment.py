"""The AUC corrective-power reproduction end to end at a tiny size (the --quick run takes about
3.5 minutes on 2 cores), and one run's determinism in process."""

import json
import math

import pytest

from neurips26 import reproduce
from neurips26.reproduce import auc_corrective_power as exp_mod
from neurips26.reproduce import run_experiment
from neurips26.reproduce._wordnet import wordnet_available

TINY = dict(tasks=["breast_cancer5"], models=["mlp"], seeds=2, epochs=2, warmup=1, lrs=[1e-2], text=["noun.animal"],
            text_n=60, text_len=8, text_layers=1, text_epochs=2, text_warmup=1, text_lrs=[2e-3], batch_size=16,
            text_encoders=["lora", "scratch", "distilbert"])


def test_auc_experiment_contract(monkeypatch, tmp_path):
    monkeypatch.setitem(exp_mod.SIZES, True, TINY)
    res = run_experiment(reproduce.get("auc-corrective-power"), tmp_path, seed=3, quick=True)
    m = res["metrics"]
    assert len(res["claims"]) == 5
    ov = m["test_auc_overall"]
    assert set(ov) == set(exp_mod.METHODS)
    a1 = res["claims"][0]
    assert a1["ours"] == pytest.approx(ov["sq_hinge"]["mean"])
    best = max(("hinge", "logistic", "exponential"), key=lambda k: ov[k]["mean"])
    assert a1["baseline"] == pytest.approx(ov[best]["mean"])
    # paired over settings × seeds (one setting here: the two seeds), verdict from the interval
    assert a1["ours_seeds"] == m["test_auc"]["breast_cancer5/mlp/sq_hinge"]["per_seed"] and a1["n"] == 2
    b1 = res["claims"][2]
    assert (b1["ours"], b1["baseline"]) == (pytest.approx(ov["ce→sq_hinge"]["mean"]), pytest.approx(ov["sq_hinge"]["mean"]))
    for c in (a1, b1):
        lo, hi = c["ci"]
        assert c["verdict"] == ("holds" if lo > 0 else "does not hold" if hi < 0 else "inconclusive")
    # (a) against AUCM + PESG: a non-inferiority margin of AUC_MARGIN, paired over the same runs
    a2 = res["claims"][1]
    assert a2["margin"] == -exp_mod.AUC_MARGIN and a2["baseline_seeds"] == m["test_auc"]["breast_cancer5/mlp/aucm_pesg"]["per_seed"]
    lo, hi = a2["ci"]
    assert a2["verdict"] == ("holds" if lo > -exp_mod.AUC_MARGIN else "does not hold" if hi < -exp_mod.AUC_MARGIN
                             else "inconclusive")
    # (b) degeneracy: per run, paired; runs without severe test pairs (or an undefined index) are left out
    b2, dg = res["claims"][3], m["diagnostics"]
    assert b2["ours_seeds"] == dg["sq_hinge"]["degeneracy_main_runs"]
    assert b2["baseline_seeds"] == dg["ce→sq_hinge"]["degeneracy_main_runs"]
    out_runs = [a < 0 or b < 0 or s <= 0 for a, b, s in zip(b2["ours_seeds"], b2["baseline_seeds"],
                                                             dg["sq_hinge"]["severe_test_runs"])]
    assert b2["n_capped"] == sum(out_runs) and b2["n"] == len(out_runs) - sum(out_runs)
    for meth, d in m["diagnostics"].items():
        assert all(0 <= v <= 1 or v == -1 for v in d["degeneracy_curve"]), meth
        assert 0 <= d["severe_end"] <= 1 and len(d["strength_end"]) == len(exp_mod.SEVERITY_BINS) - 1
    for row in m["test_auc"].values():
        assert all(0 <= v <= 1 for v in row["per_seed"]) and len(row["per_seed"]) == 2
    c = res["claims"][4]
    if wordnet_available():
        t = m["text_auc"]
        assert c["ours"] == pytest.approx(t["lora/gain"]["mean"]) and c["baseline"] == pytest.approx(t["scratch/gain"]["mean"])
        assert c["ours_seeds"] == t["lora/gain"]["per_seed"] and c["better"] == "lower"
        assert set(t) == {f"{e}/{k}" for e in TINY["text_encoders"] for k in ("sq_hinge", "ce→sq_hinge", "gain")}
        assert "| distilbert |" in (tmp_path / "auc-corrective-power" / "report.md").read_text()
        assert t["lora/gain"]["per_seed"][0] == pytest.approx(
            t["lora/ce→sq_hinge"]["per_seed"][0] - t["lora/sq_hinge"]["per_seed"][0])
    else:
        assert c["holds"] is None
    out = tmp_path / "auc-corrective-power"
    for f in ("test_auc.png", "corrective_power.png", "report.md"):
        assert (out / f).exists()
    assert json.loads((out / "results.json").read_text())["metrics"] == m


def test_auc_run_is_deterministic():
    r = exp_mod.Run("breast_cancer5", "mlp", "ce→sq_hinge", 5, 2, 1, (1e-2,), 16)
    a, b = exp_mod.run_one(r), exp_mod.run_one(r)
    assert a == b
    assert 0 <= a["test_auc"] <= 1 and a["n_pos_train"] >= 3 and len(a["curve"]) == 2
    assert all(math.isfinite(v) for v in a["losses"])


def test_text_encoders_score_a_batch():
    import torch

    x = torch.stack([torch.randint(0, 1000, (3, 8)), torch.ones(3, 8, dtype=torch.long)], 1)
    for enc in ("lora", "scratch", "distilbert"):
        torch.manual_seed(0)
        model = exp_mod._text_model(enc, 1)
        assert model(x).shape == (3, 1), enc
    with pytest.raises(ValueError, match="encoder"):
        exp_mod._text_model("qwen", 1)
