"""Maximum clique by complement: a clique of G is an independent set of G's complement, so
the task is MIS on the complement graph (built once per instance and cached on it), with
solutions reported as clique masks of G and cost = -|clique|."""

from __future__ import annotations

import numpy as np

from .mis import Graph, MISTask

__all__ = ["MaxCliqueTask"]


class MaxCliqueTask(MISTask):
    """``instance(G)`` returns G's complement (a :class:`Graph` marked as such); states,
    edits and closure are those of MIS on it; a solution (n,) bool is a clique of G."""

    name = "mcl"

    @staticmethod
    def instance(g) -> Graph:
        if isinstance(g, Graph) and getattr(g, "is_complement_of", None) is not None:
            return g
        base = MISTask.instance(g)
        comp = base.__dict__.get("_complement")
        if comp is None:
            comp = base.complement()
            object.__setattr__(comp, "is_complement_of", base)
            object.__setattr__(base, "_complement", comp)
        return comp

    def is_feasible(self, inst, sol) -> bool:
        """Every pair of chosen vertices adjacent in G (checked on G's own edges)."""
        g = self.instance(inst).is_complement_of
        m = np.asarray(sol)
        if m.shape != (g.n,) or m.dtype != bool:
            return False
        k = int(m.sum())
        idx = np.flatnonzero(m)
        return bool(g.A[np.ix_(idx, idx)].sum() == k * (k - 1))
