"""The objects every PACE task and solver share: the ``Task`` protocol, the budget, the
returned solution, the elite pool, and the error Γ_I raises for an edit it refuses.

PACE (Partial-state Amortized Constraint Editing) works on *feasible partial states*: a state
is a partial solution that breaks no constraint and can still be completed (extendable).
``Task.transition`` is Γ_I: it commits an edit only when the new state is again feasible and
extendable; ``Task.complete`` is Comp_I: it maps any such state to a feasible terminal solution.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..._checks import check_int, check_real

__all__ = ["InfeasibleEdit", "Task", "Budget", "Solution", "ElitePool", "Features"]


class InfeasibleEdit(ValueError):
    """Γ_I refused an edit: committing it would break a constraint or leave a state that no
    completion can finish."""


@dataclass(frozen=True)
class Features:
    """What a ranker sees of one state and its candidate edits (NumPy arrays).

    x: (n, Fx) node features; edge_index: (2, E) directed message edges (source, target);
    edge_attr: (E, Fe); edits: (m, a) node indices of each candidate edit (a = 1 for node
    edits, 2 for pair edits); edit_attr: (m, Fa) features of each edit itself."""

    x: np.ndarray
    edge_index: np.ndarray
    edge_attr: np.ndarray
    edits: np.ndarray
    edit_attr: np.ndarray


@runtime_checkable
class Task(Protocol):
    """One combinatorial problem in PACE's terms. Costs are minimized (maximization problems
    report the negated objective, e.g. ``-|independent set|``)."""

    name: str

    def empty_state(self, inst) -> Any: ...
    def candidates(self, state) -> np.ndarray: ...           # (m, a) int edits, all accepted by transition
    def transition(self, state, edit) -> Any: ...            # Γ_I: a new state, or InfeasibleEdit
    def complete(self, state) -> Any: ...                    # Comp_I: a feasible terminal solution
    def cost(self, inst, sol) -> float: ...
    def is_feasible(self, inst, sol) -> bool: ...
    def solution_state(self, inst, sol) -> Any: ...          # the terminal state of a solution
    def destroy(self, inst, sol, units: np.ndarray) -> Any: ...  # an extendable state: sol with units freed
    def neighbourhood(self, inst, size: int, rng: np.random.Generator) -> np.ndarray: ...
    def features(self, state, edits: np.ndarray) -> Features: ...
    def n_units(self, inst) -> int: ...
    def key(self, sol) -> bytes: ...                          # identity of a solution (elite pool dedup)


@dataclass(frozen=True)
class Budget:
    """Inference-time compute of one ``PaceSolver.solve``.

    depth: ranker edits per trajectory before closure (closure also runs at every smaller
    depth of the trajectory, so any depth ends in a feasible solution); rounds: destroy-and-re-edit
    refinement rounds after the construction; width: candidate edits expanded (each closed and
    offered to the elite pool) per step; time_s: wall-clock cap (None: none)."""

    depth: int = 8
    rounds: int = 16
    width: int = 1
    time_s: float | None = None

    def __post_init__(self):
        object.__setattr__(self, "depth", check_int("depth", self.depth, 0))
        object.__setattr__(self, "rounds", check_int("rounds", self.rounds, 0))
        object.__setattr__(self, "width", check_int("width", self.width, 1))
        if self.time_s is not None:
            object.__setattr__(self, "time_s", check_real("time_s", self.time_s, low=0.0, low_open=True))


@dataclass
class Solution:
    """A solver's answer: ``sol`` (task-native: a tour, a vertex mask ...), its ``cost``,
    ``feasible`` (checked by the task's own checker), and ``trace``: one dict per improvement
    of the best (round, depth, cost, time_s), in order, plus ``stats``."""

    sol: Any
    cost: float
    feasible: bool
    trace: list[dict] = field(default_factory=list)
    stats: dict = field(default_factory=dict)


class ElitePool:
    """The k best distinct complete solutions seen so far (by cost, ties by arrival).

    The pool only ever admits a solution that beats its worst member (or fills a free slot),
    so its best cost never increases: elite-pool nondegradation."""

    def __init__(self, k: int):
        self.k = check_int("elite", k, 1)
        self.members: list[tuple[float, int, bytes, Any]] = []
        self._arrivals = 0

    @property
    def best(self):
        return self.members[0] if self.members else None

    def offer(self, cost: float, key: bytes, sol) -> bool:
        """Add ``sol`` if it is new and good enough; True when it became the (strict) best."""
        if any(m[2] == key for m in self.members):
            return False
        if len(self.members) == self.k and cost >= self.members[-1][0]:
            return False
        improved = not self.members or cost < self.members[0][0]
        self.members.append((cost, self._arrivals, key, sol))
        self._arrivals += 1
        self.members.sort(key=lambda m: (m[0], m[1]))
        del self.members[self.k:]
        return improved
