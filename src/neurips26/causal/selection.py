"""Choosing one graph among candidates: BIC of the refitted linear-Gaussian SEM."""

from __future__ import annotations

import numpy as np

from ._checks import check_square

__all__ = ["refit_bic", "select_by_bic"]


def refit_bic(X: np.ndarray, A: np.ndarray) -> float:
    """BIC of the linear-Gaussian SEM with parents A (least squares per node, own variance):
    n Σ_j log(RSS_j / n) + log(n) · #edges. X: a finite (n, d) array; A: (d, d)."""
    X = _check_X(X)
    check_square("A", A, X.shape[1])
    return _refit_bic(X, A)


def _check_X(X) -> np.ndarray:
    X = np.asarray(X)
    if X.dtype.kind not in "biuf":
        raise TypeError(f"X must be a real (n, d) array, got dtype {X.dtype}")
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"X must be a non-empty (n, d) array, got shape {X.shape}")
    if not np.isfinite(X).all():
        i, j = np.argwhere(~np.isfinite(X))[0]
        raise ValueError(f"X has NaN or inf values (first at row {i}, column {j})")
    return X


def _refit_bic(X, A) -> float:
    X = X - X.mean(0)
    n, d = X.shape
    total = 0.0
    for j in range(d):
        pa = np.flatnonzero(A[:, j])
        r = X[:, j] - (X[:, pa] @ np.linalg.lstsq(X[:, pa], X[:, j], rcond=None)[0] if len(pa) else 0.0)
        total += n * np.log(max(float(r @ r) / n, 1e-300))
    return float(total + np.log(n) * A.sum())


def select_by_bic(X: np.ndarray, graphs) -> np.ndarray:
    """The graph (0/1 adjacency) of lowest ``refit_bic`` among ``graphs`` (a non-empty sequence
    of (d, d) arrays; the first on ties)."""
    X = _check_X(X)
    graphs = list(graphs)
    if not graphs:
        raise ValueError("graphs is empty: select_by_bic needs at least one candidate graph")
    for k, A in enumerate(graphs):
        check_square(f"graphs[{k}]", A, X.shape[1])
    return graphs[int(np.argmin([_refit_bic(X, A) for A in graphs]))]
