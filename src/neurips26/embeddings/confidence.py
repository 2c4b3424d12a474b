"""A calibrated confidence for any sentence-transformers retriever, from norms it already has.

``NormConfidence.from_model(model)`` wraps a ``SentenceTransformer``: :meth:`fit` learns
P(top-1 is right) from the cosine, the top-1 − top-2 margin and the query and document norms
(:class:`~neurips26.embeddings.NormSignal`) on queries whose right document is known;
:meth:`search` returns the top hits with that probability; :meth:`save` writes the
calibrator beside the model, where ``from_model(model, path)`` finds it again.
sentence-transformers itself exposes no such signal: its ``encode`` normalizes the norm away.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple, Sequence

import numpy as np
import torch

from .._checks import check_int
from .calibration import Calibrator, NormSignal, fit_calibrator
from .raw import raw_embeddings

__all__ = ["NormConfidence", "Hits", "CALIBRATOR_FILE"]

CALIBRATOR_FILE = "norm_confidence.pkl"


class Hits(NamedTuple):
    """indices, cosines: (n_queries, k); confidence: (n_queries,) P(top-1 is right)."""

    indices: np.ndarray
    cosines: np.ndarray
    confidence: np.ndarray


class NormConfidence:
    """P(top-1 is right) for a retriever, from cosine, margin and norms. See the module doc."""

    def __init__(self, model, signal: NormSignal | None = None, calibrator: Calibrator | None = None,
                 batch_size: int = 64):
        from .raw import unnormalized_modules

        unnormalized_modules(model)  # TypeError / ValueError now rather than at the first search
        self.model = model
        self.signal = signal if signal is not None else NormSignal()
        self.calibrator = calibrator
        self.batch_size = check_int("batch_size", batch_size, minimum=1)

    @classmethod
    def from_model(cls, model, path: str | os.PathLike | None = None, **kw) -> "NormConfidence":
        """Wrap ``model``; load a calibrator saved in ``path`` (a folder, e.g. the model's) if
        it holds one."""
        cal = None
        if path is not None and (Path(path) / CALIBRATOR_FILE).is_file():
            cal = Calibrator.load(Path(path) / CALIBRATOR_FILE)
        return cls(model, calibrator=cal, **kw)

    def _top(self, queries: Sequence[str], documents: Sequence[str], k: int):
        if len(documents) < 2:
            raise ValueError("documents must hold at least 2 texts (the margin needs a runner-up)")
        q = raw_embeddings(self.model, queries, self.batch_size)
        d = raw_embeddings(self.model, documents, self.batch_size)
        qn, dn = q.embeddings / q.norms[:, None], d.embeddings / d.norms[:, None]
        vals, idx = [], []
        for start in range(0, qn.shape[0], 1024):  # bounded memory for a large corpus
            v, i = torch.topk(qn[start:start + 1024] @ dn.T, min(max(k, 2), dn.shape[0]), dim=1)
            vals.append(v)
            idx.append(i)
        v, i = torch.cat(vals).double().numpy(), torch.cat(idx).numpy()
        feats = self.signal.features(v[:, 0], q.norms.double().numpy(), d.norms.double().numpy()[i[:, 0]],
                                     extra=v[:, 0] - v[:, 1])
        return v, i, feats

    def fit(self, queries: Sequence[str], documents: Sequence[str], relevant, method: str = "logistic") -> "NormConfidence":
        """queries: n texts; documents: the corpus; relevant: (n,) index into documents of each
        query's right document. Fits the calibrator on whether the top-1 is that document."""
        rel = np.asarray(relevant)
        if rel.shape != (len(queries),) or not np.issubdtype(rel.dtype, np.integer):
            raise ValueError(f"relevant must be ({len(queries)},) integer indices into documents")
        if rel.size and (rel.min() < 0 or rel.max() >= len(documents)):
            raise ValueError("relevant has indices outside documents")
        v, i, feats = self._top(queries, documents, 2)
        self.calibrator = fit_calibrator(feats, (i[:, 0] == rel).astype(int), method=method)
        return self

    def search(self, queries: Sequence[str], documents: Sequence[str], top_k: int = 1) -> Hits:
        """The top_k documents per query and the calibrated P(top-1 is right)."""
        if self.calibrator is None:
            raise RuntimeError("no calibrator: call fit() or load one with from_model(model, path)")
        top_k = check_int("top_k", top_k, minimum=1)
        v, i, feats = self._top(queries, documents, top_k)
        return Hits(i[:, :top_k], v[:, :top_k], self.calibrator.predict(feats))

    def save(self, path: str | os.PathLike) -> Path:
        """Write the calibrator to ``path``/norm_confidence.pkl (e.g. the model's folder)."""
        if self.calibrator is None:
            raise RuntimeError("nothing to save: call fit() first")
        return self.calibrator.save(Path(path) / CALIBRATOR_FILE)
