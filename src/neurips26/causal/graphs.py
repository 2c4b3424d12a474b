"""Graph utilities on 0/1 adjacency matrices (A[i, j] = 1: edge i → j): acyclicity and
turning a weighted matrix into a DAG."""

from __future__ import annotations

import numpy as np

from ._checks import check_real, check_square

__all__ = ["is_acyclic", "make_acyclic"]


def is_acyclic(A: np.ndarray) -> bool:
    """Kahn's algorithm on the 0/1 adjacency A (A[i, j] = 1: edge i → j), a square matrix."""
    A = (check_square("A", A, finite=False) != 0).astype(int)
    np.fill_diagonal(A, 0)
    indeg = A.sum(0)
    ready = list(np.flatnonzero(indeg == 0))
    seen = 0
    while ready:
        i = ready.pop()
        seen += 1
        for j in np.flatnonzero(A[i]):
            indeg[j] -= 1
            if indeg[j] == 0:
                ready.append(j)
    return seen == len(A)


def make_acyclic(W: np.ndarray, threshold: float) -> np.ndarray:
    """0/1 adjacency {|W| > threshold}; while it has a cycle, the weakest edge lying on a
    cycle (i → j with a path j ⇝ i) is removed. W: a finite square matrix; threshold finite, >= 0."""
    W = check_square("W", W)
    threshold = check_real("threshold", threshold, low=0.0)
    A = (np.abs(W) > threshold).astype(int)
    np.fill_diagonal(A, 0)
    while True:
        reach = _closure(A)
        if not np.diagonal(reach).any():  # no node reaches itself: acyclic
            return A
        on_cycle = A.astype(bool) & reach.T
        weights = np.where(on_cycle, np.abs(W), np.inf)
        A[np.unravel_index(np.argmin(weights), W.shape)] = 0


def _closure(A: np.ndarray) -> np.ndarray:
    """reach[i, j]: a path of one or more edges i ⇝ j, by repeated squaring. The products are
    float64 BLAS matmuls of 0/1 matrices (counts up to d, exact), which an integer matmul,
    done without BLAS, made the path's graph selection cost milliseconds per knot."""
    reach = A != 0
    for _ in range(int(np.ceil(np.log2(max(len(A), 2)))) + 1):
        R = reach.astype(np.float64)
        grown = reach | (R @ R > 0)
        if np.array_equal(grown, reach):
            break
        reach = grown
    return reach
