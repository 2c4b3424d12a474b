"""Seeded instance generators of the PACE benchmarks.

* ``uniform_tsp(n, rng)``: n cities uniform in the unit square.
* ``tmat_atsp(n, rng)``: MatNet's "tmat" ATSP: integer distances uniform in [1, 10^6), made
  to satisfy the triangle inequality by their shortest-path closure (Floyd–Warshall), scaled by 10^-6.
* ``uniform_cvrp(n, rng)``: Kool et al.'s CVRP: depot and n clients uniform in the unit square,
  demands uniform in {1..9}, capacity 20 / 30 / 40 / 50 for n = 10 / 20 / 50 / 100 (else ``capacity``).
* ``ba_graph(rng, n_range)``: a Barabási–Albert graph (networkx, 4 edges per new vertex) on n
  uniform in ``n_range`` (default 200-300) vertices, the MaxCut benchmark.
* ``rb_graph(rng, n_range, k_range)``: a random RB-model graph as in the GFlowNet-CombOpt
  benchmark (Xu et al.'s model RB): ``n`` cliques (the CSP's variables) of ``k`` vertices (its
  domain values), p ~ U[0.3, 1], a = ln k / ln n, r = -a / ln(1 - p); ⌊r n ln n⌋ - 1 times
  two distinct cliques are drawn and ⌊p n^{2a}⌋ random vertex pairs across them become edges
  (incompatible values). RB-small: n in [20, 25], k in [5, 12], kept when 200-300 vertices;
  RB-large: n in [40, 55], k in [20, 25], kept when 800-1200 vertices. The maximum independent
  set has at most n vertices (one per clique).
"""

from __future__ import annotations

import math

import numpy as np

from ..._checks import check_int
from .tasks.atsp import ATSPInstance
from .tasks.cvrp import CVRPInstance
from .tasks.mis import Graph

__all__ = ["uniform_tsp", "tmat_atsp", "uniform_cvrp", "rb_graph", "ba_graph", "RB_SIZES", "KOOL_CAPACITY"]

KOOL_CAPACITY = {10: 20, 20: 30, 50: 40, 100: 50}

RB_SIZES = {"small": ((20, 25), (5, 12), (200, 300)), "large": ((40, 55), (20, 25), (800, 1200))}


def uniform_tsp(n: int, rng: np.random.Generator) -> np.ndarray:
    """(n, 2) coordinates uniform in [0, 1)²."""
    return rng.random((check_int("n", n, 3), 2))


def tmat_atsp(n: int, rng: np.random.Generator) -> ATSPInstance:
    """An (n, n) "tmat" ATSP instance: asymmetric, triangle inequality by shortest-path closure."""
    n = check_int("n", n, 3)
    D = rng.integers(1, 1_000_000, size=(n, n)).astype(np.int64)
    np.fill_diagonal(D, 0)
    for k in range(n):  # Floyd–Warshall, one vectorized relaxation per intermediate vertex
        D = np.minimum(D, D[:, k:k + 1] + D[k:k + 1, :])
    return ATSPInstance(D / 1e6)


def uniform_cvrp(n: int, rng: np.random.Generator, capacity: int | None = None) -> CVRPInstance:
    """A CVRP instance with n clients (Kool et al.'s rule; ``capacity`` required for other n)."""
    n = check_int("n", n, 2)
    if capacity is None:
        if n not in KOOL_CAPACITY:
            raise ValueError(f"capacity must be given for n = {n} (Kool et al. define n in {sorted(KOOL_CAPACITY)})")
        capacity = KOOL_CAPACITY[n]
    capacity = check_int("capacity", capacity, 9)
    coords = rng.random((n + 1, 2))
    demands = np.concatenate([[0], rng.integers(1, 10, n)])
    return CVRPInstance(coords, demands, capacity)


def _rb_once(n: int, k: int, p: float, rng: np.random.Generator) -> Graph:
    a = math.log(k) / math.log(n)
    r = -a / math.log(1 - p)
    s = int(p * n ** (2 * a))
    iterations = int(r * n * math.log(n) - 1)
    parts = np.arange(n * k).reshape(n, k)
    iu, ju = np.triu_indices(k, 1)
    edges = [np.stack([parts[:, iu].ravel(), parts[:, ju].ravel()], 1)]  # the n cliques
    cross = set()
    for _ in range(iterations):
        i, j = rng.choice(n, 2, replace=False)
        flat = rng.choice(k * k, size=min(s, k * k), replace=False)
        for f in flat.tolist():
            cross.add((int(parts[i, f // k]), int(parts[j, f % k])))
    if cross:
        edges.append(np.array(sorted(cross), np.int64))
    return Graph(n * k, np.concatenate(edges))


def rb_graph(rng: np.random.Generator, size: str = "small") -> Graph:
    """One RB graph of the named size ("small": 200-300 vertices, "large": 800-1200)."""
    if size not in RB_SIZES:
        raise ValueError(f"size must be one of {sorted(RB_SIZES)}, got {size!r}")
    (n_lo, n_hi), (k_lo, k_hi), (v_lo, v_hi) = RB_SIZES[size]
    while True:
        n = int(rng.integers(n_lo, n_hi + 1))
        k = int(rng.integers(k_lo, k_hi + 1))
        if not v_lo <= n * k <= v_hi:
            continue
        p = float(rng.uniform(0.3, 1.0))
        return _rb_once(n, k, p, rng)


def ba_graph(rng: np.random.Generator, n_range: tuple[int, int] = (200, 300), m: int = 4) -> Graph:
    """A Barabási–Albert graph with n ~ U{n_range} vertices, ``m`` edges per new vertex."""
    import networkx as nx

    lo, hi = (check_int("n_range", v, 2) for v in n_range)
    if lo > hi:
        raise ValueError(f"n_range must be (low, high) with low <= high, got {n_range}")
    n = int(rng.integers(lo, hi + 1))
    m = check_int("m", m, 1)
    if m >= n:
        raise ValueError(f"m must be below the number of vertices {n}, got {m}")
    return Graph.from_networkx(nx.barabasi_albert_graph(n, m, seed=int(rng.integers(2**31))))
