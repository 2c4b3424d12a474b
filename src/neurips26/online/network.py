"""Communication networks for decentralized optimization: gossip matrices and their
spectral gap."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._checks import check_int, nonfinite_where

__all__ = ["GossipMatrix", "gossip_matrix", "graph_adjacency", "second_eigenvalue_modulus"]


def second_eigenvalue_modulus(W: np.ndarray) -> float:
    """max(|λ₂|, |λ_n|) of a symmetric mixing matrix (0 for a single node)."""
    eig = np.sort(np.abs(np.linalg.eigvalsh(W)))[::-1]
    return float(eig[1]) if len(eig) > 1 else 0.0


@dataclass(frozen=True)
class GossipMatrix:
    """A symmetric, doubly stochastic mixing matrix W (n × n) of a connected graph.

    ``spectral_gap`` is δ = 1 − max(|λ₂|, |λ_n|): one gossip step ``x ← W x``
    contracts the distance to the average by (1 − δ).

    The constructor checks each property, to an absolute tolerance ``TOL`` = 1e-9 on the
    entries, and says which one fails: W a finite real square matrix, symmetric,
    non-negative, doubly stochastic (rows, hence columns, summing to 1), with a spectral gap
    δ > ``GAP_TOL`` = 1e-10 (a connected graph; a gap of 0 is also a periodic W, such as
    [[0, 1], [1, 0]], on which gossip oscillates instead of averaging).
    """

    W: np.ndarray
    name: str

    TOL = 1e-9
    GAP_TOL = 1e-10

    def __post_init__(self):
        W = np.asarray(self.W)
        if W.dtype.kind not in "biuf":
            raise TypeError(f"W must be a real (n, n) matrix, got {type(self.W).__name__} of dtype {W.dtype}")
        if W.ndim != 2 or W.shape[0] != W.shape[1]:
            raise ValueError(f"W must be a square (n, n) matrix, got shape {W.shape}")
        if W.shape[0] == 0:
            raise ValueError("W is empty (shape (0, 0)): a gossip matrix needs at least one node")
        W = W.astype(float, copy=False)
        if not np.isfinite(W).all():
            raise ValueError(f"W has NaN or inf entries ({nonfinite_where(W)})")
        if not isinstance(self.name, str):
            raise TypeError(f"name must be a str, got {self.name!r}")
        asym = float(np.abs(W - W.T).max())
        if asym > self.TOL:
            raise ValueError(f"W is not symmetric: max |W - Wᵀ| = {asym:.3g} (tolerance {self.TOL:g})")
        if W.min() < -self.TOL:
            i, j = np.unravel_index(np.argmin(W), W.shape)
            raise ValueError(f"W has negative entries: W[{i}, {j}] = {W[i, j]:.6g}; a gossip matrix is non-negative")
        rows = W.sum(1)
        if np.abs(rows - 1).max() > self.TOL:
            raise ValueError(f"W is not doubly stochastic: its row sums range over [{rows.min():.12g}, "
                             f"{rows.max():.12g}], they must all be 1 (tolerance {self.TOL:g})")
        gap = 1.0 - second_eigenvalue_modulus(W)
        if not gap > self.GAP_TOL:
            raise ValueError(f"W has spectral gap {gap:.3g} (needs > 0): its graph is not connected, or W is "
                             "periodic (e.g. bipartite with a zero diagonal), and gossip never reaches consensus")
        object.__setattr__(self, "W", W)

    @property
    def n(self) -> int:
        return self.W.shape[0]

    @property
    def spectral_gap(self) -> float:
        return 1.0 - second_eigenvalue_modulus(self.W)


def graph_adjacency(graph, n: int | None = None, p: float = 0.3, seed: int = 0) -> tuple[np.ndarray, str]:
    """A 0/1 symmetric adjacency matrix (no self loops) from a name, a networkx graph,
    or an array. Names: ``ring``, ``grid`` (rows × cols = n with rows the largest
    divisor of n not above √n), ``erdos_renyi`` (edge probability p, redrawn until
    connected), ``complete``."""
    if isinstance(graph, str):
        if n is None:
            raise ValueError(f"a named graph needs n >= 2 nodes, got n={n}")
        n = check_int("n", n)
        if n < 2:
            raise ValueError(f"a named graph needs n >= 2 nodes, got n={n}")
        if graph == "ring":
            a = np.zeros((n, n))
            idx = np.arange(n)
            a[idx, (idx + 1) % n] = a[(idx + 1) % n, idx] = 1
        elif graph == "complete":
            a = np.ones((n, n)) - np.eye(n)
        elif graph == "grid":
            rows = int(np.floor(np.sqrt(n)))
            while n % rows:
                rows -= 1
            cols = n // rows
            a = np.zeros((n, n))
            for r in range(rows):
                for c in range(cols):
                    i = r * cols + c
                    if c + 1 < cols:
                        a[i, i + 1] = a[i + 1, i] = 1
                    if r + 1 < rows:
                        a[i, i + cols] = a[i + cols, i] = 1
        elif graph in ("erdos_renyi", "er"):
            if isinstance(p, bool) or not isinstance(p, (int, float, np.number)) or not 0 < p <= 1:
                raise ValueError(f"edge probability p must be in (0, 1], got {p}")
            rng = np.random.default_rng(seed)
            for _ in range(1000):
                upper = np.triu(rng.random((n, n)) < p, 1)
                a = (upper | upper.T).astype(float)
                if _connected(a):
                    break
            else:
                raise ValueError(f"no connected Erdős–Rényi graph with n={n}, p={p} in 1000 draws; raise p")
            graph = f"erdos_renyi(p={p})"
        else:
            raise ValueError(f"unknown graph {graph!r}; use 'ring', 'grid', 'erdos_renyi', 'complete' or a networkx graph")
        return a, graph
    if hasattr(graph, "nodes") and hasattr(graph, "edges"):  # a networkx graph
        nodes = list(graph.nodes)
        index = {v: i for i, v in enumerate(nodes)}
        a = np.zeros((len(nodes), len(nodes)))
        for u, v in graph.edges:
            if u != v:
                a[index[u], index[v]] = a[index[v], index[u]] = 1
        return a, f"networkx({len(nodes)} nodes)"
    a = np.asarray(graph)
    if a.dtype.kind not in "biuf":
        raise TypeError(f"graph must be a name, a networkx graph or a real adjacency matrix, got {graph!r}")
    a = a.astype(float)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"an adjacency matrix must be square, got shape {a.shape}")
    if a.shape[0] == 0:
        raise ValueError("the adjacency matrix is empty (shape (0, 0)): a graph needs at least one node")
    if not np.isfinite(a).all():
        raise ValueError(f"the adjacency matrix has NaN or inf entries ({nonfinite_where(a)})")
    if not np.allclose(a, a.T):
        raise ValueError("the adjacency matrix must be symmetric (an undirected graph)")
    a = (a != 0).astype(float)
    np.fill_diagonal(a, 0)
    return a, f"adjacency({a.shape[0]} nodes)"


def _connected(a: np.ndarray) -> bool:
    seen = np.zeros(len(a), bool)
    seen[0] = True
    frontier = seen.copy()
    while frontier.any():
        frontier = (a[frontier].sum(0) > 0) & ~seen
        seen |= frontier
    return bool(seen.all())


def gossip_matrix(graph, n: int | None = None, weights: str = "metropolis", **kwargs) -> GossipMatrix:
    """The gossip matrix of a connected graph.

    ``weights="metropolis"``: W_ij = 1 / (1 + max(d_i, d_j)) on edges, W_ii = 1 − Σ_j W_ij
    (Metropolis–Hastings; symmetric and doubly stochastic for any graph).
    ``weights="laplacian"``: W = I − L / (d_max + 1).
    """
    a, name = graph_adjacency(graph, n, **kwargs)
    if not _connected(a):
        raise ValueError(f"graph {name} is not connected: gossip cannot reach consensus")
    deg = a.sum(1)
    if weights == "metropolis":
        w = a / (1.0 + np.maximum(deg[:, None], deg[None, :]))
    elif weights == "laplacian":
        w = a / (deg.max() + 1.0)
    else:
        raise ValueError(f"weights must be 'metropolis' or 'laplacian', got {weights!r}")
    w[np.diag_indices_from(w)] = 1.0 - w.sum(1)
    return GossipMatrix(w, name)
