"""Choosing one graph among candidates: BIC of the refitted linear-Gaussian SEM."""

from __future__ import annotations

import numpy as np

__all__ = ["refit_bic", "select_by_bic"]


def refit_bic(X: np.ndarray, A: np.ndarray) -> float:
    """BIC of the linear-Gaussian SEM with parents A (least squares per node, own variance):
    n Σ_j log(RSS_j / n) + log(n) · #edges."""
    X = X - X.mean(0)
    n, d = X.shape
    total = 0.0
    for j in range(d):
        pa = np.flatnonzero(A[:, j])
        r = X[:, j] - (X[:, pa] @ np.linalg.lstsq(X[:, pa], X[:, j], rcond=None)[0] if len(pa) else 0.0)
        total += n * np.log(max(float(r @ r) / n, 1e-300))
    return float(total + np.log(n) * A.sum())


def select_by_bic(X: np.ndarray, graphs) -> np.ndarray:
    """The graph (0/1 adjacency) of lowest ``refit_bic`` among ``graphs`` (the first on ties)."""
    return graphs[int(np.argmin([refit_bic(X, A) for A in graphs]))]
