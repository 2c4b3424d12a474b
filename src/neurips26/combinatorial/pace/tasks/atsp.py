"""ATSP in PACE's terms (asymmetric distances; a tour is a directed Hamiltonian cycle).

* state: a set of directed arcs forming vertex-disjoint directed paths (out- and in-degree <= 1,
  no cycle unless it is the whole tour). Any such state is extendable: the paths can always be
  chained end to start into one tour.
* edit (i, j): the arc i → j from the last vertex i of one path to the first vertex j of another
  (a lone vertex is a path whose first and last vertex coincide); the last edit closes the tour.
* Γ_I refuses a self-loop, an arc out of a vertex that has a successor or into one that has a
  predecessor, and an arc closing a path on itself before all n vertices are on it.
* Comp_I: greedy arc closure (shortest legal arcs first, one pass over the sorted arcs), then
  (``local_search=True``, the default) Or-opt (moving a segment of 1-3 consecutive vertices,
  without reversing it, to its best place) to a local optimum — a deviation from a closure that
  only completes, documented in docs/pace.md.
* solution: a tour, the permutation ``(n,)`` in travel order starting at 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...._checks import check_int
from ..base import Features, InfeasibleEdit

__all__ = ["ATSPInstance", "ATSPState", "ATSPTask", "or_opt", "directed_tour_length"]


@dataclass(frozen=True, eq=False)
class ATSPInstance:
    """``D`` (n, n) finite non-negative distances, n >= 3 (the diagonal is ignored). Derived: each
    vertex's ``k`` nearest successors ``knn`` (n, k), those arcs ``knn_arcs`` (n k, 2), every arc
    sorted by length ``sorted_arcs`` and the rank of j among i's successors ``rank`` (k: beyond)."""

    D: np.ndarray
    k: int = 10

    def __post_init__(self):
        D = np.asarray(self.D)
        if D.dtype == object or not (np.issubdtype(D.dtype, np.floating) or np.issubdtype(D.dtype, np.integer)):
            raise TypeError(f"D must be a real matrix, got dtype {D.dtype}")
        D = D.astype(np.float64)
        if D.ndim != 2 or D.shape[0] != D.shape[1] or D.shape[0] < 3:
            raise ValueError(f"D must be a square matrix with n >= 3, got shape {D.shape}")
        if not np.all(np.isfinite(D)):
            raise ValueError("D must be finite (found NaN or inf)")
        n = D.shape[0]
        off = ~np.eye(n, dtype=bool)
        if np.any(D[off] < 0):
            raise ValueError("D must be non-negative off the diagonal")
        D = np.where(off, D, 0.0)
        k = min(check_int("k", self.k, 1), n - 1)
        masked = D + np.diag(np.full(n, np.inf))
        knn = np.argsort(masked, axis=1, kind="stable")[:, :k]
        arcs = np.stack([np.repeat(np.arange(n), k), knn.ravel()], 1)
        ii, jj = np.nonzero(off)
        srt = np.argsort(D[ii, jj], kind="stable")
        rank = np.full((n, n), k, dtype=np.int64)
        rank[arcs[:, 0], arcs[:, 1]] = np.tile(np.arange(k), n)
        object.__setattr__(self, "D", D)
        object.__setattr__(self, "k", k)
        object.__setattr__(self, "knn", knn)
        object.__setattr__(self, "knn_arcs", arcs)
        object.__setattr__(self, "sorted_arcs", np.stack([ii[srt], jj[srt]], 1))
        object.__setattr__(self, "rank", rank)
        object.__setattr__(self, "scale", float(D[np.arange(n), knn[:, 0]].mean()) or 1.0)

    @property
    def n(self) -> int:
        return self.D.shape[0]


@dataclass(eq=False)
class ATSPState:
    """``succ`` / ``pred`` (n,): each vertex's successor / predecessor (-1: none); ``first``: for a
    path's last vertex, the path's first vertex; ``last``: for a path's first vertex, its last
    (-1 elsewhere; a lone vertex is its own first and last); ``n_arcs``."""

    inst: ATSPInstance
    succ: np.ndarray
    pred: np.ndarray
    first: np.ndarray
    last: np.ndarray
    n_arcs: int

    def copy(self) -> "ATSPState":
        return ATSPState(self.inst, self.succ.copy(), self.pred.copy(), self.first.copy(), self.last.copy(),
                         self.n_arcs)

    @property
    def terminal(self) -> bool:
        return self.n_arcs == self.inst.n


def directed_tour_length(D: np.ndarray, tour: np.ndarray) -> float:
    """Length of the directed closed tour (n,) under D."""
    t = np.asarray(tour)
    return float(D[t, np.roll(t, -1)].sum())


def canonical_directed(tour) -> np.ndarray:
    t = np.asarray(tour, np.int64)
    return np.roll(t, -int(np.flatnonzero(t == 0)[0]))


def or_opt(D: np.ndarray, tour: np.ndarray, max_len: int = 3, max_iter: int = 10_000) -> np.ndarray:
    """Best-improvement Or-opt: move a segment of 1..max_len consecutive vertices (orientation
    kept, so valid for asymmetric D) between two other consecutive vertices, while a move shortens
    the tour by more than 1e-12 (each sweep scores every segment and place at once)."""
    t = np.array(tour)
    n = len(t)
    if n < 4:
        return t
    pos = np.arange(n)
    for _ in range(max_iter):
        best = (0.0, None)
        for L in range(1, min(max_len, n - 2) + 1):
            s0, se = t, t[(pos + L - 1) % n]
            p, s = t[(pos - 1) % n], t[(pos + L) % n]
            gain = D[p, s0] + D[se, s] - D[p, s]  # (n,) removing the segment starting at position i
            a, b = t, t[(pos + 1) % n]            # (n,) the edge leaving position j
            delta = D[a[None, :], s0[:, None]] + D[se[:, None], b[None, :]] - D[a, b][None, :] - gain[:, None]
            off = (pos[None, :] - pos[:, None] + 1) % n  # edge j relative to i - 1: 0..L are the segment's
            delta[off <= L] = np.inf
            m = int(np.argmin(delta))
            if delta.flat[m] < best[0] - 1e-12:
                best = (float(delta.flat[m]), (L, m // n, m % n))
        if best[1] is None:
            break
        L, i, j = best[1]
        seg = t[(i + np.arange(L)) % n]
        rest = t[(i + L + np.arange(n - L)) % n]  # the tour without the segment, from just after it
        a = t[j]
        k = int(np.flatnonzero(rest == a)[0])
        t = np.concatenate([rest[: k + 1], seg, rest[k + 1:]])
    return t


class ATSPTask:
    """The ATSP task (see the module docstring). ``local_search``: Or-opt after the greedy closure."""

    name = "atsp"
    edit_arity = 2
    feature_dims = (9, 3, 4)  # node, message edge, edit

    def __init__(self, local_search: bool = True):
        self.local_search = bool(local_search)

    @staticmethod
    def instance(D, k: int = 10) -> ATSPInstance:
        return D if isinstance(D, ATSPInstance) else ATSPInstance(D, k)

    def n_units(self, inst) -> int:
        return self.instance(inst).n

    def empty_state(self, inst) -> ATSPState:
        inst = self.instance(inst)
        n = inst.n
        return ATSPState(inst, np.full(n, -1, np.int64), np.full(n, -1, np.int64), np.arange(n), np.arange(n), 0)

    def _legal(self, s: ATSPState, i, j):
        closing = s.n_arcs == s.inst.n - 1
        return (i != j) & (s.succ[i] < 0) & (s.pred[j] < 0) & ((s.first[i] != j) | closing)

    def candidates(self, s: ATSPState) -> np.ndarray:
        """(m, 2) legal arcs among each vertex's k nearest successors; when none is legal, every
        legal arc from a path's last vertex to another path's first."""
        if s.terminal:
            return np.zeros((0, 2), np.int64)
        a = s.inst.knn_arcs
        c = a[self._legal(s, a[:, 0], a[:, 1])]
        if len(c):
            return c
        ends, starts = np.flatnonzero(s.succ < 0), np.flatnonzero(s.pred < 0)
        i, j = np.repeat(ends, len(starts)), np.tile(starts, len(ends))
        ok = self._legal(s, i, j)
        return np.stack([i[ok], j[ok]], 1)

    @staticmethod
    def _join(succ, pred, first, last, i, j):
        succ[i], pred[j] = j, i
        f, l_ = first[i], last[j]
        first[i] = -1  # i has a successor now: no path's last vertex (a lone i stays the first)
        last[j] = -1   # j has a predecessor now: no path's first vertex (a lone j stays the last)
        last[f], first[l_] = l_, f

    def transition(self, s: ATSPState, edit) -> ATSPState:
        """Γ_I: a new state with the arc committed; InfeasibleEdit when it is not legal."""
        i, j = (int(v) for v in np.asarray(edit).reshape(-1)[:2])
        n = s.inst.n
        if not (0 <= i < n and 0 <= j < n):
            raise InfeasibleEdit(f"arc {(i, j)} names a vertex outside 0..{n - 1}")
        if not self._legal(s, np.array(i), np.array(j)):
            why = ("a self-loop" if i == j else f"out of {i}, which has a successor" if s.succ[i] >= 0
                   else f"into {j}, which has a predecessor" if s.pred[j] >= 0 else "a sub-tour (closes a path)")
            raise InfeasibleEdit(f"arc {(i, j)} is {why}")
        t = s.copy()
        if t.n_arcs == n - 1:  # the closing arc
            t.succ[i], t.pred[j] = j, i
            t.first[:] = -1
            t.last[:] = -1
        else:
            self._join(t.succ, t.pred, t.first, t.last, i, j)
        t.n_arcs += 1
        return t

    def complete(self, s: ATSPState) -> np.ndarray:
        """Comp_I: greedy shortest-arc closure of the paths (then Or-opt), as a tour."""
        t = s.copy()
        n = t.inst.n
        if not t.terminal:
            a = t.inst.sorted_arcs
            a = a[(t.succ[a[:, 0]] < 0) & (t.pred[a[:, 1]] < 0)]
            succ, pred, first, last = t.succ, t.pred, t.first, t.last
            for i, j in a.tolist():
                if t.n_arcs == n - 1:
                    break
                if succ[i] < 0 and pred[j] < 0 and first[i] != j and i != j:
                    self._join(succ, pred, first, last, i, j)
                    t.n_arcs += 1
            i, j = int(np.flatnonzero(t.succ < 0)[0]), int(np.flatnonzero(t.pred < 0)[0])
            t.succ[i], t.pred[j] = j, i
        tour = np.empty(n, np.int64)
        v = 0
        for k in range(n):
            tour[k] = v
            v = t.succ[v]
        if self.local_search:
            tour = or_opt(t.inst.D, tour)
        return canonical_directed(tour)

    def cost(self, inst, tour) -> float:
        return directed_tour_length(self.instance(inst).D, np.asarray(tour))

    def is_feasible(self, inst, tour) -> bool:
        inst = self.instance(inst)
        t = np.asarray(tour)
        return t.ndim == 1 and len(t) == inst.n and np.issubdtype(t.dtype, np.integer) and \
            np.array_equal(np.sort(t), np.arange(inst.n))

    def key(self, tour) -> bytes:
        return canonical_directed(tour).tobytes()

    def solution_state(self, inst, tour) -> ATSPState:
        return self.destroy(inst, tour, np.zeros(0, np.int64))

    def destroy(self, inst, tour, units) -> ATSPState:
        """The tour with every arc at a vertex of ``units`` removed: vertex-disjoint directed paths."""
        inst = self.instance(inst)
        if not self.is_feasible(inst, tour):
            raise ValueError("tour must be a permutation of the instance's vertices")
        t = np.asarray(tour, np.int64)
        n = inst.n
        nxt = np.roll(t, -1)
        freed = np.zeros(n, bool)
        freed[np.asarray(units, np.int64)] = True
        keep = ~(freed[t] | freed[nxt])
        s = self.empty_state(inst)
        if keep.all():
            s.succ[t], s.pred[nxt] = nxt, t
            s.first[:] = -1
            s.last[:] = -1
            s.n_arcs = n
            return s
        start = (int(np.flatnonzero(~keep)[0]) + 1) % n
        t, keep = np.roll(t, -start), np.roll(keep, -start)
        nxt = np.roll(t, -1)
        s.succ[t[keep]], s.pred[nxt[keep]] = nxt[keep], t[keep]
        s.n_arcs = int(keep.sum())
        run_id = np.cumsum(np.concatenate([[1], ~keep[:-1]]))
        firsts = np.flatnonzero(np.concatenate([[True], run_id[1:] != run_id[:-1]]))
        lasts = np.concatenate([firsts[1:] - 1, [n - 1]])
        s.first[:] = -1
        s.last[:] = -1
        s.first[t[lasts]] = t[firsts]
        s.last[t[firsts]] = t[lasts]
        return s

    def neighbourhood(self, inst, size: int, rng: np.random.Generator) -> np.ndarray:
        """A block: a random vertex and its size-1 nearest vertices (by the symmetrized distance)."""
        inst = self.instance(inst)
        size = min(size, inst.n)
        c = int(rng.integers(inst.n))
        return np.argsort(inst.D[c] + inst.D[:, c], kind="stable")[:size]

    def features(self, s: ATSPState, edits: np.ndarray) -> Features:
        inst = s.inst
        n, sc, D = inst.n, inst.scale, inst.D
        masked = D + np.diag(np.full(n, np.inf))
        x = np.column_stack([s.succ >= 0, s.pred >= 0, s.first >= 0, s.last >= 0,
                             (s.succ < 0) & (s.pred < 0), masked.min(1) / sc, masked.min(0) / sc,
                             np.where(s.first >= 0, D[np.arange(n), np.maximum(s.first, 0)] / sc, 0.0),
                             np.full(n, s.n_arcs / n)])
        src = np.repeat(np.arange(n), inst.k)
        dst = inst.knn.ravel()
        # messages both ways along each kNN arc, with its direction as a feature
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
        fwd = np.concatenate([np.ones(n * inst.k), np.zeros(n * inst.k)])
        u, v = np.where(fwd > 0, src, dst), np.where(fwd > 0, dst, src)  # the arc u -> v
        edge_attr = np.column_stack([D[u, v] / sc, s.succ[u] == v, fwd])
        i, j = edits[:, 0], edits[:, 1]
        edit_attr = np.column_stack([D[i, j] / sc, D[j, i] / sc, inst.rank[i, j] / inst.k, inst.rank[j, i] / inst.k])
        return Features(x.astype(np.float32), np.stack([src, dst]), edge_attr.astype(np.float32), edits,
                        edit_attr.astype(np.float32))

    def reference_targets(self, s: ATSPState, edits: np.ndarray, ref_tour) -> np.ndarray:
        """Mask (m,) of the candidate arcs that are arcs of the reference tour (in its direction)."""
        ref = np.asarray(ref_tour)
        nxt = np.empty(len(ref), np.int64)
        nxt[ref] = np.roll(ref, -1)
        return nxt[edits[:, 0]] == edits[:, 1]
