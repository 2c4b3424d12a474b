"""MaxCut in PACE's terms (unweighted graphs).

* state: a partial side assignment ``side`` (n,) in {-1 (unassigned), 0, 1}. Every partial
  assignment is feasible and extendable (any completion is a cut).
* edit (v, s): put the unassigned vertex v on side s ∈ {0, 1}.
* Γ_I refuses a vertex outside the graph, one already assigned, and a side other than 0 / 1.
* Comp_I: greedy by gain (repeatedly the unassigned vertex with the most assigned neighbours on
  one side goes to the other side; ties to the lower index, then side 0), then
  (``local_search=True``, the default) single-vertex flips while one increases the cut — a
  deviation from a closure that only completes, documented in docs/pace.md.
* solution: a bool mask (n,) of side 1; cost = −(number of cut edges).

For the ranker an edit's "vertices" are just v (``Features.edits`` is (m, 1)); its side and
gain travel as edit features.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..base import Features, InfeasibleEdit
from .mis import Graph, MISTask

__all__ = ["MaxCutState", "MaxCutTask", "cut_size", "one_flip"]


@dataclass(eq=False)
class MaxCutState:
    """``side`` (n,) int8 in {-1, 0, 1}; ``cnt`` (2, n): each vertex's neighbours on side 0 / 1."""

    graph: Graph
    side: np.ndarray
    cnt: np.ndarray

    def copy(self) -> "MaxCutState":
        return MaxCutState(self.graph, self.side.copy(), self.cnt.copy())

    @property
    def terminal(self) -> bool:
        return bool((self.side >= 0).all())


def cut_size(g: Graph, mask) -> int:
    """Edges with their two ends on different sides of the bool mask."""
    m = np.asarray(mask, bool)
    return int((m[g.edges[:, 0]] != m[g.edges[:, 1]]).sum())


def one_flip(A: np.ndarray, mask: np.ndarray, max_iter: int = 1_000_000) -> np.ndarray:
    """Flip the vertex whose move gains the most cut edges while some flip gains (each flip adds >= 1)."""
    m = np.asarray(mask, bool).copy()
    Ai = A.astype(np.int32)
    ones = Ai @ m.astype(np.int32)   # neighbours on side 1
    deg = Ai.sum(1)
    for _ in range(max_iter):
        same = np.where(m, ones, deg - ones)
        gain = 2 * same - deg  # flipping v turns its same-side edges into cut edges and vice versa
        v = int(np.argmax(gain))
        if gain[v] <= 0:
            break
        ones += Ai[v] if not m[v] else -Ai[v]
        m[v] = ~m[v]
    return m


class MaxCutTask:
    """The MaxCut task (see the module docstring)."""

    name = "maxcut"
    edit_arity = 1
    feature_dims = (7, 1, 3)

    def __init__(self, local_search: bool = True):
        self.local_search = bool(local_search)

    instance = staticmethod(MISTask.instance)

    def n_units(self, inst) -> int:
        return self.instance(inst).n

    def empty_state(self, inst) -> MaxCutState:
        g = self.instance(inst)
        return MaxCutState(g, np.full(g.n, -1, np.int8), np.zeros((2, g.n), np.int64))

    def candidates(self, s: MaxCutState) -> np.ndarray:
        """(m, 2) edits (v, side) for every unassigned v and both sides."""
        v = np.flatnonzero(s.side < 0)
        return np.stack([np.repeat(v, 2), np.tile([0, 1], len(v))], 1)

    def transition(self, s: MaxCutState, edit) -> MaxCutState:
        """Γ_I: vertex v on side s; InfeasibleEdit unless v is unassigned and s is 0 or 1."""
        e = np.asarray(edit).reshape(-1)
        if len(e) != 2:
            raise InfeasibleEdit(f"an edit is (vertex, side), got {edit!r}")
        v, side = int(e[0]), int(e[1])
        n = s.graph.n
        if not 0 <= v < n:
            raise InfeasibleEdit(f"vertex {v} outside 0..{n - 1}")
        if side not in (0, 1):
            raise InfeasibleEdit(f"side must be 0 or 1, got {side}")
        if s.side[v] >= 0:
            raise InfeasibleEdit(f"vertex {v} is already assigned (side {s.side[v]})")
        t = s.copy()
        t.side[v] = side
        t.cnt[side] += s.graph.A[v]
        return t

    def complete(self, s: MaxCutState) -> np.ndarray:
        """Comp_I: greedy by gain to a full assignment (then 1-flip), as the side-1 mask."""
        A = s.graph.A
        side, cnt = s.side.copy(), s.cnt.copy()
        free = side < 0
        while free.any():
            f = np.flatnonzero(free)
            best = np.maximum(cnt[0, f], cnt[1, f])
            k = int(np.argmax(best))
            v = f[k]
            sd = 1 if cnt[0, v] > cnt[1, v] else 0  # opposite the larger neighbour count; ties to 0
            side[v] = sd
            cnt[sd] += A[v]
            free[v] = False
        mask = side == 1
        if self.local_search:
            mask = one_flip(A, mask)
        return mask

    def cost(self, inst, sol) -> float:
        return -float(cut_size(self.instance(inst), sol))

    def is_feasible(self, inst, sol) -> bool:
        g = self.instance(inst)
        m = np.asarray(sol)
        return m.shape == (g.n,) and m.dtype == bool

    def key(self, sol) -> bytes:
        m = np.asarray(sol, bool)
        return np.packbits(m ^ m[0]).tobytes()  # a cut and its mirror are one solution

    def solution_state(self, inst, sol) -> MaxCutState:
        return self.destroy(inst, sol, np.zeros(0, np.int64))

    def destroy(self, inst, sol, units) -> MaxCutState:
        """The full assignment ``sol`` with the vertices of ``units`` unassigned."""
        g = self.instance(inst)
        if not self.is_feasible(g, sol):
            raise ValueError("sol must be a bool side mask of shape (n,)")
        side = np.asarray(sol, bool).astype(np.int8)
        side[np.asarray(units, np.int64)] = -1
        cnt = np.stack([g.A[side == 0].sum(0), g.A[side == 1].sum(0)]).astype(np.int64)
        return MaxCutState(g, side, cnt)

    def neighbourhood(self, inst, size: int, rng: np.random.Generator) -> np.ndarray:
        """A BFS block around a random vertex (MIS's)."""
        return MISTask.neighbourhood(self, inst, size, rng)

    def features(self, s: MaxCutState, edits: np.ndarray) -> Features:
        g = s.graph
        deg = g.deg.astype(np.float64)
        dmax = max(deg.max(), 1.0)
        x = np.column_stack([s.side == 0, s.side == 1, s.side < 0, deg / dmax, s.cnt[0] / (deg + 1),
                             s.cnt[1] / (deg + 1), np.full(g.n, (s.side >= 0).mean())])
        v, sd = edits[:, 0], edits[:, 1]
        gain = s.cnt[1 - sd, v] - s.cnt[sd, v]  # cut edges gained minus those left uncut
        edit_attr = np.column_stack([sd, gain / (deg[v] + 1), s.cnt[1 - sd, v] / (deg[v] + 1)])
        return Features(x.astype(np.float32), g.arcs, np.ones((g.arcs.shape[1], 1), np.float32),
                        np.ascontiguousarray(edits[:, :1]), edit_attr.astype(np.float32))

    def reference_targets(self, s: MaxCutState, edits: np.ndarray, ref) -> np.ndarray:
        """Mask of the edits that put v on its reference side, the reference taken in the
        orientation (it or its mirror) that agrees with more of the state's assigned vertices."""
        r = np.asarray(ref, bool).astype(np.int8)
        done = s.side >= 0
        if done.any() and (s.side[done] == r[done]).mean() < 0.5:
            r = 1 - r
        elif not done.any():
            return np.ones(len(edits), bool)  # both orientations fit: no signal
        return r[edits[:, 0]] == edits[:, 1]
