"""Embeddings of a SentenceTransformer before its final ``Normalize``: the length kept.

Models trained with a cosine loss usually end in a ``Normalize`` module, so ``encode``
returns unit vectors and the norm is gone. :func:`raw_embeddings` runs the model's modules
up to, not including, the trailing ``Normalize`` modules, and returns the pooled vectors
with their norms. Needs the ``nlp`` extra (``sentence-transformers``).
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np
import torch

from .._checks import check_int

__all__ = ["RawEmbeddings", "raw_embeddings", "unnormalized_modules"]


class RawEmbeddings(NamedTuple):
    """embeddings: (n, d) float32 pooled vectors; norms: (n,) their L2 norms."""

    embeddings: torch.Tensor
    norms: torch.Tensor


def unnormalized_modules(model) -> list:
    """The modules of ``model`` (a ``SentenceTransformer``) without its trailing ``Normalize``
    modules. ValueError if none of them outputs a pooled ``sentence_embedding``."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Normalize, Pooling

    if not isinstance(model, SentenceTransformer):
        raise TypeError(f"model must be a sentence_transformers.SentenceTransformer, got {type(model).__name__}")
    modules = list(model)
    while modules and isinstance(modules[-1], Normalize):
        modules.pop()
    if not any(isinstance(m, Pooling) for m in modules):
        # a custom module may still pool; the forward pass below checks for its output
        names = [type(m).__name__ for m in modules]
        if not any("pool" in n.lower() for n in names):
            raise ValueError(f"model has no pooling module before its Normalize (modules: {names}); "
                             "raw_embeddings needs a pooled sentence_embedding")
    return modules


@torch.no_grad()
def raw_embeddings(model, texts: Sequence[str], batch_size: int = 64, device=None) -> RawEmbeddings:
    """Pooled, un-normalized embeddings of ``texts`` and their norms.

    model: any ``SentenceTransformer``; texts: non-empty list of strings; batch_size: texts
    per forward pass (sorted by length, as ``encode`` does, then put back in order);
    device: where to run (default: the model's device). Returns :class:`RawEmbeddings` on the
    CPU, (n, d) and (n,), float32. ``embeddings / norms[:, None]`` equals the model's own
    normalized ``encode`` output.
    """
    from sentence_transformers.util import batch_to_device

    if isinstance(texts, str) or not isinstance(texts, Sequence):
        raise TypeError("texts must be a list of strings")
    if len(texts) == 0:
        raise ValueError("texts is empty")
    if not all(isinstance(t, str) for t in texts):
        raise TypeError("texts must all be strings")
    batch_size = check_int("batch_size", batch_size, minimum=1)
    modules = unnormalized_modules(model)
    device = torch.device(device) if device is not None else model.device
    was_training = model.training
    model.eval()
    order = np.argsort([-len(t) for t in texts], kind="stable")
    chunks = []
    try:
        for start in range(0, len(texts), batch_size):
            batch = [texts[i] for i in order[start:start + batch_size]]
            features = batch_to_device(model.preprocess(batch), device)
            for module in modules:
                features = module(features)
            if "sentence_embedding" not in features:
                raise ValueError("the model's modules before Normalize produce no 'sentence_embedding'")
            chunks.append(features["sentence_embedding"].float().cpu())
    finally:
        model.train(was_training)
    emb = torch.empty(len(texts), chunks[0].shape[-1])
    emb[torch.as_tensor(order)] = torch.cat(chunks)
    return RawEmbeddings(emb, emb.norm(dim=-1))
