"""Minimum vertex cover by complement: a cover is the complement of an independent set, so
the MVC task is the MIS task's states, edits, Γ_I and Comp_I, with the solution reported as
the complement mask and cost = |cover|."""

from __future__ import annotations

import numpy as np

from .mis import MISState, MISTask

__all__ = ["MVCTask"]


class MVCTask(MISTask):
    """States are independent sets (the cover's complement); solutions are cover masks (n,)."""

    name = "mvc"

    def complete(self, s) -> np.ndarray:
        return ~super().complete(s)

    def cost(self, inst, sol) -> float:
        return float(np.asarray(sol, bool).sum())

    def is_feasible(self, inst, sol) -> bool:
        g = self.instance(inst)
        m = np.asarray(sol)
        if m.shape != (g.n,) or m.dtype != bool:
            return False
        return bool(np.all(m[g.edges[:, 0]] | m[g.edges[:, 1]]))

    def destroy(self, inst, sol, units):
        """The cover with ``units`` added back (its independent complement loses them)."""
        if not self.is_feasible(inst, sol):
            raise ValueError("sol must be a vertex cover of the instance (a bool mask)")
        g = self.instance(inst)
        inset = ~np.asarray(sol, bool)
        inset[np.asarray(units, np.int64)] = False
        return MISState(g, inset, g.A[inset].sum(0).astype(np.int64))

    def reference_targets(self, s, edits, ref) -> np.ndarray:
        return ~np.asarray(ref, bool)[edits[:, 0]]
