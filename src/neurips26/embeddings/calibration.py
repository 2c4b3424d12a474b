"""Norms as a free confidence signal for retrieval, its calibrators and the calibration error.

A retriever scores a query against documents by cosine; whether its top-1 is right is
better predicted when the lengths of the query's and the document's un-normalized
embeddings are also looked at (:class:`NormSignal`). A calibrator (scikit-learn's logistic
regression or isotonic regression, :func:`fit_calibrator`) maps the features to a
probability of being right; :func:`ece` and :func:`reliability_diagram` measure how well.
"""

from __future__ import annotations

import json
import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Sequence

import numpy as np

from .._checks import check_int, check_real

__all__ = ["NormSignal", "Calibrator", "fit_calibrator", "ece", "reliability_diagram", "ReliabilityDiagram"]


def _vector(name: str, x, n: int | None = None) -> np.ndarray:
    try:
        a = np.asarray(x.detach().cpu().numpy() if hasattr(x, "detach") else x, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a 1-D array of numbers") from None
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {a.shape}")
    if a.size == 0:
        raise ValueError(f"{name} is empty")
    if n is not None and a.size != n:
        raise ValueError(f"{name} has {a.size} entries, expected {n}")
    if not np.isfinite(a).all():
        raise ValueError(f"{name} has NaN or inf entries")
    return a


def _binary(name: str, y, n: int) -> np.ndarray:
    a = _vector(name, y, n)
    if not np.isin(a, (0.0, 1.0)).all():
        raise ValueError(f"{name} must hold only 0/1 (or booleans)")
    return a


@dataclass(frozen=True)
class NormSignal:
    """Confidence features for a retrieved (query, document) pair.

    Columns of :meth:`features`, in order: the cosine, any ``extra`` baseline columns (e.g. the
    top-1 − top-2 margin), then, as switched on, log query norm, log document norm, log of
    their product, and the cosine times the log product (norm and similarity combined).
    """

    query: bool = True
    document: bool = True
    product: bool = True
    interaction: bool = True

    def names(self, extra: Sequence[str] = ()) -> list[str]:
        return (["cosine", *extra] + ["log_query_norm"] * self.query + ["log_doc_norm"] * self.document
                + ["log_norm_product"] * self.product + ["cosine_x_log_norm_product"] * self.interaction)

    def features(self, cosine, query_norm, doc_norm, extra=None) -> np.ndarray:
        """cosine, query_norm, doc_norm: (n,); extra: (n, k) or None. Returns (n, 1 + k + m)."""
        c = _vector("cosine", cosine)
        q = _vector("query_norm", query_norm, c.size)
        d = _vector("doc_norm", doc_norm, c.size)
        if (q <= 0).any() or (d <= 0).any():
            raise ValueError("norms must be positive")
        cols = [c[:, None]]
        if extra is not None:
            e = np.asarray(extra, dtype=np.float64)
            e = e[:, None] if e.ndim == 1 else e
            if e.ndim != 2 or e.shape[0] != c.size or not np.isfinite(e).all():
                raise ValueError(f"extra must be finite, (n,) or (n, k) with n = {c.size}")
            cols.append(e)
        lq, ld = np.log(q), np.log(d)
        cols += [lq[:, None]] * self.query + [ld[:, None]] * self.document
        cols += [(lq + ld)[:, None]] * self.product + [(c * (lq + ld))[:, None]] * self.interaction
        return np.concatenate(cols, axis=1)


class Calibrator:
    """A fitted map from confidence features to P(correct). Use :func:`fit_calibrator`."""

    def __init__(self, method: str, model, n_features: int):
        self.method, self.model, self.n_features = method, model, n_features

    def predict(self, features) -> np.ndarray:
        """features: (n, k) (or (n,) for one feature). Returns (n,) probabilities."""
        X = _features(features)
        if X.shape[1] != self.n_features:
            raise ValueError(f"features has {X.shape[1]} columns, the calibrator was fit on {self.n_features}")
        if self.method == "isotonic":
            return np.clip(self.model.predict(X[:, 0]), 0.0, 1.0)
        return self.model.predict_proba(X)[:, 1]

    def save(self, path: str | os.PathLike) -> Path:
        """Pickle the calibrator (scikit-learn objects) to ``path``; a JSON note beside it says
        what it is."""
        from .._atomic import atomic_open, atomic_write_text

        path = Path(path)
        with atomic_open(path) as fh:
            pickle.dump(self, fh)
        atomic_write_text(path.with_suffix(".json"), json.dumps({"method": self.method, "n_features": self.n_features}))
        return path

    @staticmethod
    def load(path: str | os.PathLike) -> "Calibrator":
        """Load a calibrator written by :meth:`save` (a pickle: load only files you wrote)."""
        with open(path, "rb") as fh:
            obj = pickle.load(fh)
        if not isinstance(obj, Calibrator):
            raise TypeError(f"{path} does not hold a Calibrator")
        return obj


def _features(features) -> np.ndarray:
    X = np.asarray(features, dtype=np.float64)
    X = X[:, None] if X.ndim == 1 else X
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"features must be (n, k) and non-empty, got shape {X.shape}")
    if not np.isfinite(X).all():
        raise ValueError("features has NaN or inf entries")
    return X


def fit_calibrator(features, correct, method: str = "logistic", C: float = 1.0) -> Calibrator:
    """Fit P(correct | features).

    features: (n, k) (or (n,)); correct: (n,) 0/1; method: "logistic" (standardized features,
    scikit-learn's ``LogisticRegression`` with inverse regularization ``C``) or "isotonic"
    (``IsotonicRegression`` on a single feature, increasing). Both classes must occur.
    """
    X = _features(features)
    y = _binary("correct", correct, X.shape[0])
    if y.min() == y.max():
        raise ValueError("correct must contain both 0 and 1 to fit a calibrator")
    if method == "logistic":
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        C = check_real("C", C, low=0.0, low_open=True)
        model = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=1000)).fit(X, y.astype(int))
    elif method == "isotonic":
        from sklearn.isotonic import IsotonicRegression

        if X.shape[1] != 1:
            raise ValueError(f"isotonic calibration takes one feature, got {X.shape[1]}")
        model = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip").fit(X[:, 0], y)
    else:
        raise ValueError(f"method must be 'logistic' or 'isotonic', got {method!r}")
    return Calibrator(method, model, X.shape[1])


class ReliabilityDiagram(NamedTuple):
    """Per bin (n_bins,): edges (n_bins + 1,), mean confidence, accuracy and count (empty
    bins: confidence and accuracy NaN, count 0)."""

    edges: np.ndarray
    confidence: np.ndarray
    accuracy: np.ndarray
    count: np.ndarray


def reliability_diagram(prob, correct, n_bins: int = 15) -> ReliabilityDiagram:
    """Equal-width bins on [0, 1]: bin k holds edges[k] <= p < edges[k+1], the last bin also
    p = 1 (TorchMetrics' binning, except that p = 1 is not a bin of its own)."""
    p = _vector("prob", prob)
    y = _binary("correct", correct, p.size)
    if (p < 0).any() or (p > 1).any():
        raise ValueError("prob must lie in [0, 1]")
    n_bins = check_int("n_bins", n_bins, minimum=1)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    idx = np.minimum(np.searchsorted(edges, p, side="right") - 1, n_bins - 1)
    count = np.bincount(idx, minlength=n_bins).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        conf = np.bincount(idx, weights=p, minlength=n_bins) / count
        acc = np.bincount(idx, weights=y, minlength=n_bins) / count
    return ReliabilityDiagram(edges, conf, acc, count)


def ece(prob, correct, n_bins: int = 15) -> float:
    """Expected calibration error: sum over bins of (bin share) × |accuracy − mean confidence|.

    prob: (n,) predicted P(correct) in [0, 1]; correct: (n,) 0/1; n_bins: equal-width bins.
    """
    d = reliability_diagram(prob, correct, n_bins)
    full = d.count > 0
    return float(np.sum(d.count[full] / d.count.sum() * np.abs(d.accuracy[full] - d.confidence[full])))
