"""TSP in PACE's terms (Euclidean, symmetric).

* state: a set of undirected edges that form vertex-disjoint paths (every vertex of degree
  <= 2, no cycle unless it is the whole Hamiltonian cycle). Any such state is extendable: the
  path fragments can always be joined end to end into one tour.
* edit (i, j): join the end i of one fragment to the end j of another (an isolated vertex is a
  fragment with both ends at itself); the last edit closes the single Hamiltonian path.
* Γ_I refuses a join at an interior vertex, a self-loop and a join of a fragment's two ends
  (a sub-tour) before all n vertices are on it.
* Comp_I: greedy-edge closure (shortest legal joins first, one pass over the sorted pairs),
  then (``local_search=True``, the default) 2-opt to a local optimum — a deviation from a
  closure that only joins, documented in docs/pace.md.
* solution: a tour, the permutation ``(n,)`` of the vertices starting at 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...._checks import check_int
from ..base import Features, InfeasibleEdit

__all__ = ["TSPInstance", "TSPState", "TSPTask", "tour_length", "two_opt", "canonical_tour"]


@dataclass(frozen=True, eq=False)
class TSPInstance:
    """n cities in the plane: ``coords`` (n, 2) finite floats, n >= 3. Derived once: the
    distance matrix ``D`` (n, n), each city's ``k`` nearest neighbours ``knn`` (n, k), the
    undirected kNN pairs ``knn_pairs`` (p, 2) and every pair sorted by length ``sorted_pairs``."""

    coords: np.ndarray
    k: int = 10

    def __post_init__(self):
        c = np.asarray(self.coords)
        if c.dtype == object or not (np.issubdtype(c.dtype, np.floating) or np.issubdtype(c.dtype, np.integer)):
            raise TypeError(f"coords must be a real array, got dtype {c.dtype}")
        c = c.astype(np.float64)
        if c.ndim != 2 or c.shape[1] != 2 or c.shape[0] < 3:
            raise ValueError(f"coords must have shape (n, 2) with n >= 3, got {c.shape}")
        if not np.all(np.isfinite(c)):
            raise ValueError("coords must be finite (found NaN or inf)")
        n = c.shape[0]
        k = min(check_int("k", self.k, 1), n - 1)
        D = np.sqrt(((c[:, None, :] - c[None, :, :]) ** 2).sum(-1))
        order = np.argsort(D + np.diag(np.full(n, np.inf)), axis=1, kind="stable")
        knn = order[:, :k]
        i = np.repeat(np.arange(n), k)
        pairs = np.unique(np.sort(np.stack([i, knn.ravel()], 1), axis=1), axis=0)
        iu, ju = np.triu_indices(n, 1)
        srt = np.argsort(D[iu, ju], kind="stable")
        rank = np.full((n, n), k, dtype=np.int64)  # rank of j among i's neighbours (k: beyond)
        rank[i, knn.ravel()] = np.tile(np.arange(k), n)
        object.__setattr__(self, "coords", c)
        object.__setattr__(self, "k", k)
        object.__setattr__(self, "D", D)
        object.__setattr__(self, "knn", knn)
        object.__setattr__(self, "knn_pairs", pairs)
        object.__setattr__(self, "sorted_pairs", np.stack([iu[srt], ju[srt]], 1))
        object.__setattr__(self, "rank", np.minimum(rank, rank.T))
        object.__setattr__(self, "scale", float(D[np.arange(n), knn[:, 0]].mean()) or 1.0)

    @property
    def n(self) -> int:
        return self.coords.shape[0]


@dataclass(eq=False)
class TSPState:
    """``nbr`` (n, 2): each vertex's path neighbours (-1: none); ``deg`` (n,); ``other`` (n,): for a
    fragment end, the fragment's other end (itself when isolated), -1 for interior vertices;
    ``n_edges``."""

    inst: TSPInstance
    nbr: np.ndarray
    deg: np.ndarray
    other: np.ndarray
    n_edges: int

    def copy(self) -> "TSPState":
        return TSPState(self.inst, self.nbr.copy(), self.deg.copy(), self.other.copy(), self.n_edges)

    @property
    def terminal(self) -> bool:
        return self.n_edges == self.inst.n


def tour_length(D: np.ndarray, tour: np.ndarray) -> float:
    """Length of the closed tour (n,) under the distance matrix D (n, n)."""
    return float(D[tour, np.roll(tour, -1)].sum())


def canonical_tour(tour) -> np.ndarray:
    """The tour (n,) from vertex 0, towards its smaller-index neighbour (one form per cycle)."""
    t = np.asarray(tour, np.int64)
    t = np.roll(t, -int(np.flatnonzero(t == 0)[0]))
    if len(t) > 2 and t[-1] < t[1]:
        t = np.concatenate([[0], t[1:][::-1]])
    return t


def two_opt(D: np.ndarray, tour: np.ndarray, max_iter: int = 10_000) -> np.ndarray:
    """Best-improvement 2-opt until no move shortens the tour by more than 1e-12 (each sweep
    scores every pair of edges at once)."""
    t = np.array(tour)
    n = len(t)
    if n < 4:
        return t
    iu, ju = np.triu_indices(n, 2)
    keep = ~((iu == 0) & (ju == n - 1))  # the two edges share a vertex
    iu, ju = iu[keep], ju[keep]
    for _ in range(max_iter):
        a, b = t[iu], t[(iu + 1) % n]
        c, d = t[ju], t[(ju + 1) % n]
        delta = D[a, c] + D[b, d] - D[a, b] - D[c, d]
        m = int(np.argmin(delta))
        if delta[m] >= -1e-12:
            break
        i, j = iu[m], ju[m]
        t[i + 1: j + 1] = t[i + 1: j + 1][::-1]
    return t


class TSPTask:
    """The TSP task (see the module docstring). ``local_search``: 2-opt after the greedy closure."""

    name = "tsp"
    edit_arity = 2
    feature_dims = (9, 2, 3)  # node, message edge, edit

    def __init__(self, local_search: bool = True):
        self.local_search = bool(local_search)

    # --- instances ----------------------------------------------------------------------
    @staticmethod
    def instance(coords, k: int = 10) -> TSPInstance:
        return coords if isinstance(coords, TSPInstance) else TSPInstance(coords, k)

    def n_units(self, inst: TSPInstance) -> int:
        return inst.n

    # --- states -------------------------------------------------------------------------
    def empty_state(self, inst) -> TSPState:
        inst = self.instance(inst)
        n = inst.n
        return TSPState(inst, np.full((n, 2), -1, np.int64), np.zeros(n, np.int64), np.arange(n), 0)

    def _legal(self, s: TSPState, i, j):
        """Mask of legal joins among pairs (i, j) (arrays)."""
        closing = s.n_edges == s.inst.n - 1
        ok = (i != j) & (s.deg[i] < 2) & (s.deg[j] < 2)
        return ok & ((s.other[i] != j) | closing)

    def candidates(self, s: TSPState) -> np.ndarray:
        """(m, 2) legal joins: those among the kNN pairs; when none is legal, every legal join
        of fragment ends (so a non-terminal state always has a candidate)."""
        if s.terminal:
            return np.zeros((0, 2), np.int64)
        p = s.inst.knn_pairs
        c = p[self._legal(s, p[:, 0], p[:, 1])]
        if len(c):
            return c
        ends = np.flatnonzero(s.deg < 2)
        a, b = np.triu_indices(len(ends), 1)
        a, b = ends[a], ends[b]
        ok = self._legal(s, a, b)
        return np.stack([a[ok], b[ok]], 1)

    def transition(self, s: TSPState, edit) -> TSPState:
        """Γ_I: a new state with the join committed; InfeasibleEdit when it is not legal."""
        i, j = (int(v) for v in np.asarray(edit).reshape(-1)[:2])
        n = s.inst.n
        if not (0 <= i < n and 0 <= j < n):
            raise InfeasibleEdit(f"edit {(i, j)} names a vertex outside 0..{n - 1}")
        if not self._legal(s, np.array(i), np.array(j)):
            why = ("a self-loop" if i == j else "an interior vertex" if max(s.deg[i], s.deg[j]) >= 2
                   else "a sub-tour (both ends of one fragment)")
            raise InfeasibleEdit(f"join {(i, j)} is {why}")
        t = s.copy()
        t.nbr[i, t.deg[i]] = j
        t.nbr[j, t.deg[j]] = i
        a, b = t.other[i], t.other[j]
        t.deg[i] += 1
        t.deg[j] += 1
        t.n_edges += 1
        if t.deg[i] == 2:
            t.other[i] = -1
        if t.deg[j] == 2:
            t.other[j] = -1
        if t.n_edges < n:
            t.other[a], t.other[b] = b, a
        return t

    def complete(self, s: TSPState) -> np.ndarray:
        """Comp_I: the greedy-edge closure of the fragments (then 2-opt), as a tour."""
        t = s.copy()
        inst = s.inst
        n = inst.n
        if not t.terminal:
            p = inst.sorted_pairs
            p = p[(t.deg[p[:, 0]] < 2) & (t.deg[p[:, 1]] < 2)]  # joins at interior vertices never become legal
            nbr, deg, other = t.nbr, t.deg, t.other
            for i, j in p.tolist():
                if deg[i] < 2 and deg[j] < 2 and other[i] != j:
                    nbr[i, deg[i]] = j
                    nbr[j, deg[j]] = i
                    a, b = other[i], other[j]
                    deg[i] += 1
                    deg[j] += 1
                    if deg[i] == 2:
                        other[i] = -1
                    if deg[j] == 2:
                        other[j] = -1
                    other[a], other[b] = b, a
                    t.n_edges += 1
                    if t.n_edges == n - 1:
                        break
            ends = np.flatnonzero(deg < 2)  # the Hamiltonian path's two ends (or one isolated vertex, n=1)
            if t.n_edges == n - 1:
                i, j = ends
                nbr[i, deg[i]] = j
                nbr[j, deg[j]] = i
                deg[i] += 1
                deg[j] += 1
                t.n_edges += 1
        tour = self._walk(t.nbr, n)
        if self.local_search:
            tour = two_opt(inst.D, tour)
        return canonical_tour(tour)

    @staticmethod
    def _walk(nbr: np.ndarray, n: int) -> np.ndarray:
        tour = np.empty(n, np.int64)
        prev, cur = -1, 0
        for k in range(n):
            tour[k] = cur
            nxt = nbr[cur, 0] if nbr[cur, 0] != prev else nbr[cur, 1]
            prev, cur = cur, nxt
        return tour


    # --- solutions ----------------------------------------------------------------------
    def cost(self, inst, tour) -> float:
        inst = self.instance(inst)
        return tour_length(inst.D, np.asarray(tour))

    def is_feasible(self, inst, tour) -> bool:
        inst = self.instance(inst)
        t = np.asarray(tour)
        return t.ndim == 1 and len(t) == inst.n and np.issubdtype(t.dtype, np.integer) and \
            np.array_equal(np.sort(t), np.arange(inst.n))

    def key(self, tour) -> bytes:
        return np.asarray(tour, np.int64).tobytes()

    def solution_state(self, inst, tour) -> TSPState:
        return self.destroy(inst, tour, np.zeros(0, np.int64))

    def destroy(self, inst, tour, units) -> TSPState:
        """The tour with every edge at a vertex of ``units`` removed: vertex-disjoint paths."""
        inst = self.instance(inst)
        if not self.is_feasible(inst, tour):
            raise ValueError("tour must be a permutation of the instance's vertices")
        t = np.asarray(tour, np.int64)
        n = inst.n
        nxt = np.roll(t, -1)
        freed = np.zeros(n, bool)
        freed[np.asarray(units, np.int64)] = True
        keep = ~(freed[t] | freed[nxt])  # edge t[k] -> t[k+1]
        if keep.all():
            s = self.empty_state(inst)
            pos = np.empty(n, np.int64)
            pos[t] = np.arange(n)
            s.nbr[t, 0], s.nbr[t, 1] = np.roll(t, 1)[pos[t]], nxt
            s.deg[:] = 2
            s.other[:] = -1
            s.n_edges = n
            return s
        # Rotate so that the cycle starts just after a removed edge: the kept edges are runs.
        start = (int(np.flatnonzero(~keep)[0]) + 1) % n
        t, keep = np.roll(t, -start), np.roll(keep, -start)
        nxt = np.roll(t, -1)
        s = self.empty_state(inst)
        u, v = t[keep], nxt[keep]
        s.deg = np.bincount(np.concatenate([u, v]), minlength=n).astype(np.int64)
        fwd = np.full(n, -1, np.int64)
        bwd = np.full(n, -1, np.int64)
        fwd[u], bwd[v] = v, u
        s.nbr[:, 0] = np.where(bwd >= 0, bwd, fwd)  # slot 0 is filled first, as transition does
        s.nbr[:, 1] = np.where(bwd >= 0, fwd, -1)
        s.n_edges = int(keep.sum())
        # Fragment ends: runs of kept edges in cycle order; each run's first and last vertex.
        run_id = np.cumsum(np.concatenate([[1], ~keep[:-1]]))  # vertex k's run (cut before k when edge k-1 is removed)
        first = np.flatnonzero(np.concatenate([[True], run_id[1:] != run_id[:-1]]))
        last = np.concatenate([first[1:] - 1, [n - 1]])
        s.other[:] = -1
        s.other[t[first]] = t[last]
        s.other[t[last]] = t[first]
        return s

    def neighbourhood(self, inst, size: int, rng: np.random.Generator) -> np.ndarray:
        """A spatial block: a random city and its size-1 nearest cities."""
        inst = self.instance(inst)
        size = min(size, inst.n)
        c = int(rng.integers(inst.n))
        return np.argsort(inst.D[c], kind="stable")[:size]

    # --- ranker features ----------------------------------------------------------------
    def features(self, s: TSPState, edits: np.ndarray) -> Features:
        inst = s.inst
        n, sc = inst.n, inst.scale
        deg = s.deg
        end = s.other >= 0
        far = np.where(end, inst.D[np.arange(n), np.maximum(s.other, 0)] / sc, 0.0)
        centred = (inst.coords - inst.coords.mean(0)) / (inst.coords.std() + 1e-12)
        x = np.column_stack([centred, deg == 0, deg == 1, deg == 2, end, far,
                             inst.D[np.arange(n), inst.knn[:, 0]] / sc, np.full(n, s.n_edges / n)])
        src = inst.knn.ravel()
        dst = np.repeat(np.arange(n), inst.k)
        committed = (s.nbr[dst] == src[:, None]).any(1)
        edge_attr = np.column_stack([inst.D[src, dst] / sc, committed])
        i, j = edits[:, 0], edits[:, 1]
        edit_attr = np.column_stack([inst.D[i, j] / sc, inst.rank[i, j] / inst.k, s.other[i] == s.other[j]])
        return Features(x.astype(np.float32), np.stack([src, dst]), edge_attr.astype(np.float32), edits,
                        edit_attr.astype(np.float32))

    def reference_targets(self, s: TSPState, edits: np.ndarray, ref_tour: np.ndarray) -> np.ndarray:
        """Mask (m,) of the candidate joins that are edges of the reference tour."""
        ref = np.asarray(ref_tour)
        n = len(ref)
        pos = np.empty(n, np.int64)
        pos[ref] = np.arange(n)
        gap = np.abs(pos[edits[:, 0]] - pos[edits[:, 1]])
        return (gap == 1) | (gap == n - 1)
