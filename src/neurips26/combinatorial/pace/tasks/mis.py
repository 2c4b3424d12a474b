"""Maximum independent set in PACE's terms (unweighted).

* state: an independent set (a vertex mask). Every independent set is extendable (to a maximal
  one), so feasibility and extendability coincide.
* edit (v,): add a free vertex (not in the set, no neighbour in it).
* Γ_I refuses a vertex in the set or next to it.
* Comp_I: greedy minimum-degree completion (repeatedly add the free vertex with the fewest free
  neighbours, ties to the lower index) to a maximal set, then (``local_search=True``, the
  default) (1,2)-swaps (Andrade, Resende and Werneck's local search: one set vertex out, two
  in) until none applies — a deviation documented in docs/pace.md.
* solution: a boolean vertex mask (n,); cost = -|set|.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..base import Features, InfeasibleEdit

__all__ = ["Graph", "MISState", "MISTask", "one_two_swaps"]


@dataclass(frozen=True, eq=False)
class Graph:
    """An undirected simple graph on n >= 1 vertices: ``edges`` (E, 2) int pairs (no self-loops;
    duplicates and both orientations are merged). Derived: the dense adjacency ``A`` (n, n)
    bool, the degree ``deg`` and the directed edge list ``arcs`` (2, 2E)."""

    n: int
    edges: np.ndarray

    def __post_init__(self):
        if isinstance(self.n, bool) or not isinstance(self.n, (int, np.integer)) or self.n < 1:
            raise ValueError(f"n must be an integer >= 1, got {self.n!r}")
        e = np.asarray(self.edges)
        if e.size == 0:
            e = np.zeros((0, 2), np.int64)
        if not np.issubdtype(e.dtype, np.integer):
            raise TypeError(f"edges must be integer pairs, got dtype {e.dtype}")
        if e.ndim != 2 or e.shape[1] != 2:
            raise ValueError(f"edges must have shape (E, 2), got {e.shape}")
        n = int(self.n)
        if e.size and (e.min() < 0 or e.max() >= n):
            raise ValueError(f"edges must name vertices in 0..{n - 1}")
        if np.any(e[:, 0] == e[:, 1]):
            raise ValueError("edges must not contain self-loops")
        e = np.unique(np.sort(e.astype(np.int64), axis=1), axis=0)
        A = np.zeros((n, n), bool)
        A[e[:, 0], e[:, 1]] = A[e[:, 1], e[:, 0]] = True
        object.__setattr__(self, "n", n)
        object.__setattr__(self, "edges", e)
        object.__setattr__(self, "A", A)
        object.__setattr__(self, "deg", A.sum(1))
        object.__setattr__(self, "arcs", np.concatenate([e.T, e.T[::-1]], 1))

    @classmethod
    def from_networkx(cls, G) -> "Graph":
        nodes = sorted(G.nodes)
        if nodes != list(range(len(nodes))):
            raise ValueError("the networkx graph's nodes must be 0..n-1")
        return cls(len(nodes), np.array(list(G.edges), np.int64).reshape(-1, 2))

    def complement(self) -> "Graph":
        iu, ju = np.triu_indices(self.n, 1)
        keep = ~self.A[iu, ju]
        return Graph(self.n, np.stack([iu[keep], ju[keep]], 1))


@dataclass(eq=False)
class MISState:
    """``inset`` (n,) bool; ``blocked`` (n,) int: how many set neighbours each vertex has."""

    graph: Graph
    inset: np.ndarray
    blocked: np.ndarray

    def copy(self) -> "MISState":
        return MISState(self.graph, self.inset.copy(), self.blocked.copy())

    @property
    def free(self) -> np.ndarray:
        return ~self.inset & (self.blocked == 0)

    @property
    def terminal(self) -> bool:
        return not self.free.any()


def one_two_swaps(A: np.ndarray, inset: np.ndarray, max_iter: int = 100_000) -> np.ndarray:
    """(1,2)-swap local search on an independent set (mask): while some set vertex v has two
    non-adjacent outside neighbours whose only set neighbour is v, swap v out and them in, then
    add any vertex left free. Returns a maximal independent set at least as large."""
    s = inset.copy()
    Ai = A.astype(np.int32)
    for _ in range(max_iter):
        tight = Ai @ s.astype(np.int32)  # set neighbours per vertex
        free = ~s & (tight == 0)
        if free.any():  # keep the set maximal: add free vertices, fewest free neighbours first
            f = np.flatnonzero(free)
            v = f[np.argmin(A[np.ix_(f, f)].sum(1))]
            s[v] = True
            continue
        one = np.flatnonzero(~s & (tight == 1))
        if len(one) < 2:
            break
        owner = np.argmax(A[np.ix_(one, np.flatnonzero(s))], axis=1)  # the one set neighbour
        same = owner[:, None] == owner[None, :]
        pair = same & ~A[np.ix_(one, one)]
        np.fill_diagonal(pair, False)
        hit = np.argwhere(pair)
        if not len(hit):
            break
        a, b = one[hit[0, 0]], one[hit[0, 1]]
        v = np.flatnonzero(s)[owner[hit[0, 0]]]
        s[v] = False
        s[a] = s[b] = True
    return s


class MISTask:
    """The MIS task (see the module docstring)."""

    name = "mis"
    edit_arity = 1
    feature_dims = (7, 1, 1)

    def __init__(self, local_search: bool = True):
        self.local_search = bool(local_search)

    @staticmethod
    def instance(g) -> Graph:
        if isinstance(g, Graph):
            return g
        if hasattr(g, "nodes") and hasattr(g, "edges"):
            return Graph.from_networkx(g)
        raise TypeError(f"instance must be a Graph or a networkx graph, got {type(g).__name__}")

    def n_units(self, inst) -> int:
        return self.instance(inst).n

    def empty_state(self, inst) -> MISState:
        g = self.instance(inst)
        return MISState(g, np.zeros(g.n, bool), np.zeros(g.n, np.int64))

    def candidates(self, s: MISState) -> np.ndarray:
        return np.flatnonzero(s.free)[:, None]

    def transition(self, s: MISState, edit) -> MISState:
        """Γ_I: add vertex ``edit`` (an int or a (1,) array); InfeasibleEdit unless it is free."""
        v = int(np.asarray(edit).reshape(-1)[0])
        n = s.graph.n
        if not 0 <= v < n:
            raise InfeasibleEdit(f"vertex {v} outside 0..{n - 1}")
        if s.inset[v]:
            raise InfeasibleEdit(f"vertex {v} is already in the set")
        if s.blocked[v]:
            raise InfeasibleEdit(f"vertex {v} has a neighbour in the set")
        t = s.copy()
        t.inset[v] = True
        t.blocked += s.graph.A[v]
        return t

    def complete(self, s: MISState) -> np.ndarray:
        """Comp_I: greedy minimum-degree completion to a maximal set (then (1,2)-swaps)."""
        A = s.graph.A
        inset = s.inset.copy()
        free = s.free.copy()
        fdeg = A[:, free].sum(1)
        while free.any():
            f = np.flatnonzero(free)
            v = f[np.argmin(fdeg[f])]
            gone = free & (A[v] | (np.arange(len(free)) == v))
            inset[v] = True
            free &= ~gone
            fdeg -= A[:, gone].sum(1)
        if self.local_search:
            inset = one_two_swaps(A, inset)
        return inset

    def cost(self, inst, sol) -> float:
        return -float(np.asarray(sol, bool).sum())

    def is_feasible(self, inst, sol) -> bool:
        g = self.instance(inst)
        m = np.asarray(sol)
        if m.shape != (g.n,) or m.dtype != bool:
            return False
        return not np.any(m[g.edges[:, 0]] & m[g.edges[:, 1]])

    def key(self, sol) -> bytes:
        return np.packbits(np.asarray(sol, bool)).tobytes()

    def solution_state(self, inst, sol) -> MISState:
        return self.destroy(inst, sol, np.zeros(0, np.int64))

    def destroy(self, inst, sol, units) -> MISState:
        """The set with the vertices of ``units`` taken out (a subset: still independent)."""
        g = self.instance(inst)
        if not self.is_feasible(g, sol):
            raise ValueError("sol must be an independent set of the instance (a bool mask)")
        inset = np.asarray(sol, bool).copy()
        inset[np.asarray(units, np.int64)] = False
        return MISState(g, inset, g.A[inset].sum(0).astype(np.int64))

    def neighbourhood(self, inst, size: int, rng: np.random.Generator) -> np.ndarray:
        """A local block: a random vertex and the vertices nearest to it by BFS (ties by
        index), ``size`` in all."""
        g = self.instance(inst)
        size = min(size, g.n)
        seen = np.zeros(g.n, bool)
        seen[int(rng.integers(g.n))] = True
        frontier = seen.copy()
        out = [np.flatnonzero(seen)]
        count = 1
        while count < size and frontier.any():
            nxt = g.A[frontier].any(0) & ~seen
            if not nxt.any():
                break
            idx = np.flatnonzero(nxt)
            take = idx[rng.permutation(len(idx))[: size - count]]
            out.append(take)
            count += len(take)
            seen[idx] = True
            frontier = nxt
        return np.concatenate(out)

    def features(self, s: MISState, edits: np.ndarray) -> Features:
        g = s.graph
        deg = g.deg.astype(np.float64)
        free = s.free
        fdeg = g.A[:, free].sum(1)
        dmax = max(deg.max(), 1.0)
        x = np.column_stack([s.inset, free, ~s.inset & ~free, deg / dmax, fdeg / (deg + 1),
                             s.blocked / (deg + 1), np.full(g.n, s.inset.sum() / g.n)])
        ea = np.ones((g.arcs.shape[1], 1), np.float32)
        v = edits[:, 0]
        edit_attr = (fdeg[v] / (fdeg[free].max() + 1.0))[:, None]
        return Features(x.astype(np.float32), g.arcs, ea, edits, edit_attr.astype(np.float32))

    def reference_targets(self, s: MISState, edits: np.ndarray, ref: np.ndarray) -> np.ndarray:
        return np.asarray(ref, bool)[edits[:, 0]]
