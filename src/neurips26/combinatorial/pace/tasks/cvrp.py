"""CVRP in PACE's terms (Euclidean, one depot, homogeneous unlimited fleet of capacity Q).

* state: vertex-disjoint *fragments* (paths of clients), each of load <= Q; every fragment is a
  partial route (depot → fragment → depot). Any such state is feasible and extendable: every
  fragment, even a lone client, is a legal route on its own, since every demand is <= Q.
* edit (i, j): join the end i of one fragment to the end j of another when their loads sum to
  <= Q. Joining a lone client to a fragment's end appends it to that route; joining two longer
  fragments merges two routes.
* Γ_I refuses a join at an interior client, a self-loop, a join of one fragment's two ends (a
  cycle without the depot), the depot itself, and any join over capacity.
* Comp_I: Clarke and Wright's savings closure (joins in decreasing saving d(0,i) + d(0,j) − d(i,j),
  positive savings only, each taken when legal), then (``local_search=True``, the default) 2-opt
  inside each route — a deviation from a closure that only completes, documented in docs/pace.md.
* solution: a tuple of routes, each an int array of client indices (1..n), in canonical form
  (each route from its smaller end, routes sorted by their first client).

Vertices: 0 is the depot, 1..n the clients; the units that refinement frees are the clients
(unit u is client u + 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...._checks import check_int
from ..base import Features, InfeasibleEdit
from .tsp import two_opt

__all__ = ["CVRPInstance", "CVRPState", "CVRPTask", "routes_cost", "canonical_routes"]


@dataclass(frozen=True, eq=False)
class CVRPInstance:
    """``coords`` (n + 1, 2) finite floats, row 0 the depot; ``demands`` (n + 1,) integers with
    demands[0] = 0 and 1 <= demands[i] <= ``capacity`` for every client; n >= 2. Derived: the
    distance matrix ``D``, the clients' ``k`` nearest clients ``knn`` (n + 1, k) (row 0 unused),
    their undirected pairs ``knn_pairs`` and the client pairs of positive saving in decreasing
    order ``savings_pairs``."""

    coords: np.ndarray
    demands: np.ndarray
    capacity: int
    k: int = 10

    def __post_init__(self):
        c = np.asarray(self.coords)
        if c.dtype == object or not (np.issubdtype(c.dtype, np.floating) or np.issubdtype(c.dtype, np.integer)):
            raise TypeError(f"coords must be a real array, got dtype {c.dtype}")
        c = c.astype(np.float64)
        if c.ndim != 2 or c.shape[1] != 2 or c.shape[0] < 3:
            raise ValueError(f"coords must have shape (n + 1, 2) with n >= 2 clients, got {c.shape}")
        if not np.all(np.isfinite(c)):
            raise ValueError("coords must be finite (found NaN or inf)")
        d = np.asarray(self.demands)
        if not np.issubdtype(d.dtype, np.integer):
            raise TypeError(f"demands must be integers, got dtype {d.dtype}")
        if d.shape != (c.shape[0],):
            raise ValueError(f"demands must have shape ({c.shape[0]},) (depot first), got {d.shape}")
        Q = check_int("capacity", self.capacity, 1)
        if d[0] != 0:
            raise ValueError(f"demands[0] is the depot's and must be 0, got {d[0]}")
        if d[1:].min() < 1 or d[1:].max() > Q:
            raise ValueError(f"every client demand must lie in 1..capacity={Q}, got range {d[1:].min()}..{d[1:].max()}")
        n1 = c.shape[0]
        k = min(check_int("k", self.k, 1), n1 - 2)
        D = np.sqrt(((c[:, None, :] - c[None, :, :]) ** 2).sum(-1))
        Dc = D.copy()
        Dc[:, 0] = np.inf
        np.fill_diagonal(Dc, np.inf)
        knn = np.argsort(Dc, axis=1, kind="stable")[:, :k]
        i = np.repeat(np.arange(1, n1), k)
        pairs = np.unique(np.sort(np.stack([i, knn[1:].ravel()], 1), axis=1), axis=0)
        iu, ju = np.triu_indices(n1, 1)
        keep = iu > 0
        iu, ju = iu[keep], ju[keep]
        sav = D[0, iu] + D[0, ju] - D[iu, ju]
        order = np.argsort(-sav, kind="stable")
        order = order[sav[order] > 1e-12]
        rank = np.full((n1, n1), k, dtype=np.int64)
        rank[i, knn[1:].ravel()] = np.tile(np.arange(k), n1 - 1)
        object.__setattr__(self, "coords", c)
        object.__setattr__(self, "demands", d.astype(np.int64))
        object.__setattr__(self, "capacity", Q)
        object.__setattr__(self, "k", k)
        object.__setattr__(self, "D", D)
        object.__setattr__(self, "knn", knn)
        object.__setattr__(self, "knn_pairs", pairs)
        object.__setattr__(self, "savings_pairs", np.stack([iu[order], ju[order]], 1))
        object.__setattr__(self, "rank", np.minimum(rank, rank.T))
        object.__setattr__(self, "scale", float(D[np.arange(1, n1), knn[1:, 0]].mean()) or 1.0)

    @property
    def n(self) -> int:
        """The number of clients."""
        return self.coords.shape[0] - 1


@dataclass(eq=False)
class CVRPState:
    """Per vertex (row 0, the depot, unused): ``nbr`` (n + 1, 2) fragment neighbours (-1: none);
    ``deg``; ``other``: a fragment end's other end (itself when alone), -1 inside; ``load``: the
    fragment's load, kept at its ends (0 inside)."""

    inst: CVRPInstance
    nbr: np.ndarray
    deg: np.ndarray
    other: np.ndarray
    load: np.ndarray

    def copy(self) -> "CVRPState":
        return CVRPState(self.inst, self.nbr.copy(), self.deg.copy(), self.other.copy(), self.load.copy())


def canonical_routes(routes) -> tuple:
    """Each route from its smaller end, the routes sorted by their first client (one form per solution)."""
    out = []
    for r in routes:
        r = np.asarray(r, np.int64)
        if len(r) and r[-1] < r[0]:
            r = r[::-1]
        out.append(r.copy())
    return tuple(sorted(out, key=lambda r: int(r[0]) if len(r) else -1))


def routes_cost(D: np.ndarray, routes) -> float:
    """Total length: each route depot → clients → depot."""
    total = 0.0
    for r in routes:
        t = np.concatenate([[0], np.asarray(r, np.int64)])
        total += float(D[t, np.roll(t, -1)].sum())
    return total


class CVRPTask:
    """The CVRP task (see the module docstring). ``local_search``: 2-opt inside each route after the
    savings closure."""

    name = "cvrp"
    edit_arity = 2
    feature_dims = (11, 2, 4)  # node, message edge, edit

    def __init__(self, local_search: bool = True):
        self.local_search = bool(local_search)

    @staticmethod
    def instance(inst, demands=None, capacity=None, k: int = 10) -> CVRPInstance:
        """A :class:`CVRPInstance`, or one built from (coords, demands, capacity)."""
        if isinstance(inst, CVRPInstance):
            return inst
        if isinstance(inst, tuple) and len(inst) == 3 and demands is None:
            inst, demands, capacity = inst
        if demands is None or capacity is None:
            raise TypeError("a CVRP instance is a CVRPInstance or (coords, demands, capacity)")
        return CVRPInstance(inst, demands, capacity, k)

    def n_units(self, inst) -> int:
        return self.instance(inst).n

    # --- states -------------------------------------------------------------------------
    def empty_state(self, inst) -> CVRPState:
        inst = self.instance(inst)
        n1 = inst.n + 1
        other = np.arange(n1)
        other[0] = -1
        return CVRPState(inst, np.full((n1, 2), -1, np.int64), np.zeros(n1, np.int64), other, inst.demands.copy())

    def _legal(self, s: CVRPState, i, j):
        ok = (i != j) & (i > 0) & (j > 0) & (s.deg[i] < 2) & (s.deg[j] < 2) & (s.other[i] != j)
        return ok & (s.load[i] + s.load[j] <= s.inst.capacity)

    def candidates(self, s: CVRPState) -> np.ndarray:
        """(m, 2) legal joins among the kNN pairs; when none is, every legal join of fragment ends
        (none at all: the state is terminal)."""
        p = s.inst.knn_pairs
        c = p[self._legal(s, p[:, 0], p[:, 1])]
        if len(c):
            return c
        ends = np.flatnonzero(s.deg < 2)
        ends = ends[ends > 0]
        a, b = np.triu_indices(len(ends), 1)
        a, b = ends[a], ends[b]
        ok = self._legal(s, a, b)
        return np.stack([a[ok], b[ok]], 1)

    @staticmethod
    def _join(nbr, deg, other, load, i, j):
        nbr[i, deg[i]] = j
        nbr[j, deg[j]] = i
        a, b = other[i], other[j]
        tot = load[i] + load[j]
        deg[i] += 1
        deg[j] += 1
        if deg[i] == 2:
            other[i], load[i] = -1, 0
        if deg[j] == 2:
            other[j], load[j] = -1, 0
        other[a], other[b] = b, a
        load[a] = load[b] = tot

    def transition(self, s: CVRPState, edit) -> CVRPState:
        """Γ_I: a new state with the join committed; InfeasibleEdit when it is not legal."""
        i, j = (int(v) for v in np.asarray(edit).reshape(-1)[:2])
        n = s.inst.n
        if not (0 <= i <= n and 0 <= j <= n):
            raise InfeasibleEdit(f"edit {(i, j)} names a vertex outside 0..{n}")
        if not self._legal(s, np.array(i), np.array(j)):
            why = ("a self-loop" if i == j else "at the depot" if min(i, j) == 0
                   else "an interior client" if max(s.deg[i], s.deg[j]) >= 2
                   else "a cycle (both ends of one fragment)" if s.other[i] == j
                   else f"over capacity ({s.load[i]} + {s.load[j]} > {s.inst.capacity})")
            raise InfeasibleEdit(f"join {(i, j)} is {why}")
        t = s.copy()
        self._join(t.nbr, t.deg, t.other, t.load, i, j)
        return t

    def routes(self, s: CVRPState) -> tuple:
        """The state's fragments as routes (each fragment one route)."""
        n1 = s.inst.n + 1
        seen = np.zeros(n1, bool)
        out = []
        for v in range(1, n1):
            if seen[v] or s.deg[v] == 2:
                continue
            r, prev, cur = [], -1, v
            while cur >= 0:
                r.append(cur)
                seen[cur] = True
                nxt = s.nbr[cur, 0] if s.nbr[cur, 0] != prev else s.nbr[cur, 1]
                prev, cur = cur, nxt
            out.append(np.array(r, np.int64))
        return canonical_routes(out)

    def complete(self, s: CVRPState) -> tuple:
        """Comp_I: Clarke–Wright savings joins on the fragments (then 2-opt per route), as routes."""
        inst = s.inst
        t = s.copy()
        nbr, deg, other, load = t.nbr, t.deg, t.other, t.load
        Q = inst.capacity
        p = inst.savings_pairs
        p = p[(deg[p[:, 0]] < 2) & (deg[p[:, 1]] < 2)]
        for i, j in p.tolist():
            if deg[i] < 2 and deg[j] < 2 and other[i] != j and load[i] + load[j] <= Q:
                self._join(nbr, deg, other, load, i, j)
        routes = self.routes(t)
        if self.local_search:
            routes = tuple(self._two_opt(inst.D, r) for r in routes)
        return canonical_routes(routes)

    @staticmethod
    def _two_opt(D, r):
        if len(r) < 3:
            return r
        t = two_opt(D, np.concatenate([[0], r]))
        t = np.roll(t, -int(np.flatnonzero(t == 0)[0]))
        return t[1:]

    # --- solutions ----------------------------------------------------------------------
    def cost(self, inst, routes) -> float:
        return routes_cost(self.instance(inst).D, routes)

    def is_feasible(self, inst, routes) -> bool:
        inst = self.instance(inst)
        try:
            rs = [np.asarray(r) for r in routes]
        except TypeError:
            return False
        if not rs or any(r.ndim != 1 or not len(r) or not np.issubdtype(r.dtype, np.integer) for r in rs):
            return False
        allc = np.concatenate(rs)
        if not np.array_equal(np.sort(allc), np.arange(1, inst.n + 1)):
            return False
        return all(int(inst.demands[r].sum()) <= inst.capacity for r in rs)

    def key(self, routes) -> bytes:
        return b"|".join(np.asarray(r, np.int64).tobytes() for r in canonical_routes(routes))

    def solution_state(self, inst, routes) -> CVRPState:
        return self.destroy(inst, routes, np.zeros(0, np.int64))

    def destroy(self, inst, routes, units) -> CVRPState:
        """The routes as fragments, with every edge at a freed client (unit u = client u + 1) removed."""
        inst = self.instance(inst)
        if not self.is_feasible(inst, routes):
            raise ValueError("routes must be a feasible CVRP solution of the instance")
        freed = np.zeros(inst.n + 1, bool)
        freed[np.asarray(units, np.int64) + 1] = True
        s = self.empty_state(inst)
        for r in routes:
            r = np.asarray(r, np.int64)
            for a, b in zip(r[:-1].tolist(), r[1:].tolist()):
                if not (freed[a] or freed[b]):
                    self._join(s.nbr, s.deg, s.other, s.load, a, b)
        return s

    def neighbourhood(self, inst, size: int, rng: np.random.Generator) -> np.ndarray:
        """A spatial block of units: a random client and its size-1 nearest clients."""
        inst = self.instance(inst)
        size = min(size, inst.n)
        c = int(rng.integers(1, inst.n + 1))
        d = inst.D[c, 1:]
        return np.argsort(d, kind="stable")[:size]

    # --- ranker features ----------------------------------------------------------------
    def features(self, s: CVRPState, edits: np.ndarray) -> Features:
        inst = s.inst
        n1, sc, Q = inst.n + 1, inst.scale, inst.capacity
        deg, end = s.deg, s.other >= 0
        centred = (inst.coords - inst.coords[0]) / (inst.coords.std() + 1e-12)
        depot = np.zeros(n1)
        depot[0] = 1.0
        x = np.column_stack([centred, inst.demands / Q, deg == 0, deg == 1, deg == 2, end, s.load / Q,
                             inst.D[0] / sc / 10, depot, np.full(n1, deg[1:].sum() / 2 / max(inst.n, 1))])
        src = inst.knn[1:].ravel()
        dst = np.repeat(np.arange(1, n1), inst.k)
        src = np.concatenate([src, np.zeros(inst.n, np.int64), np.arange(1, n1)])  # client <-> depot messages
        dst = np.concatenate([dst, np.arange(1, n1), np.zeros(inst.n, np.int64)])
        committed = (s.nbr[dst] == src[:, None]).any(1) & (src > 0)
        edge_attr = np.column_stack([inst.D[src, dst] / sc, committed])
        i, j = edits[:, 0], edits[:, 1]
        saving = (inst.D[0, i] + inst.D[0, j] - inst.D[i, j]) / sc
        edit_attr = np.column_stack([inst.D[i, j] / sc, inst.rank[i, j] / inst.k, saving, (s.load[i] + s.load[j]) / Q])
        return Features(x.astype(np.float32), np.stack([src, dst]), edge_attr.astype(np.float32), edits,
                        edit_attr.astype(np.float32))

    def reference_targets(self, s: CVRPState, edits: np.ndarray, routes) -> np.ndarray:
        """Mask (m,) of the candidate joins that are consecutive clients of a reference route."""
        n1 = s.inst.n + 1
        adj = np.zeros((n1, n1), bool)
        for r in routes:
            r = np.asarray(r, np.int64)
            adj[r[:-1], r[1:]] = adj[r[1:], r[:-1]] = True
        return adj[edits[:, 0], edits[:, 1]]
