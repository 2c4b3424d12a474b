"""Reference solvers behind PACE's ``solve(instance, budget, seed) -> Solution`` face, so an
experiment treats every solver alike.

* :class:`ElkaiTSP`: LKH-3 through ``elkai`` (coordinates scaled to integers by ``scale``).
* :class:`ChilsMIS`: CHILS (``chils``) for MIS; MVC and max clique by complement.
* :class:`CpSatMIS`: OR-Tools CP-SAT on the edge formulation, with a time limit; its
  ``stats["optimal"]`` says whether it proved optimality.

Each imports its package on first use, so ``neurips26.combinatorial.pace`` imports without them.
"""

from __future__ import annotations

import time

import numpy as np

from ..._checks import check_int, check_real
from .base import Budget, Solution
from .tasks import MISTask, MVCTask, TSPTask
from .tasks.tsp import canonical_tour

__all__ = ["ElkaiTSP", "ChilsMIS", "CpSatMIS"]


def _time(budget: Budget | None, default: float) -> float:
    if budget is None or budget.time_s is None:
        return default
    return budget.time_s


class ElkaiTSP:
    """LKH-3 (elkai) on the rounded distance matrix ×``scale``; ``runs`` LKH runs."""

    def __init__(self, runs: int = 1, scale: float = 1e6):
        self.runs = check_int("runs", runs, 1)
        self.scale = check_real("scale", scale, low=0.0, low_open=True)
        self.task = TSPTask(local_search=False)

    def solve(self, instance, budget: Budget | None = None, seed: int = 0) -> Solution:
        import elkai

        inst = self.task.instance(instance)
        t0 = time.perf_counter()
        tour = elkai.DistanceMatrix(np.rint(inst.D * self.scale).astype(np.int64).tolist()).solve_tsp(runs=self.runs)
        tour = canonical_tour(tour[:-1])
        wall = time.perf_counter() - t0
        return Solution(tour, self.task.cost(inst, tour), self.task.is_feasible(inst, tour), [],
                        {"wall_s": wall, "runs": self.runs})


def _mis_view(task):
    task = MISTask() if task is None else task
    if not isinstance(task, MISTask):
        raise TypeError(f"task must be MISTask, MVCTask or MaxCliqueTask, got {type(task).__name__}")
    return task


def _answer(task, g, inset: np.ndarray, wall: float, **stats) -> Solution:
    """The MIS mask ``inset`` (on the graph the task works on) as the task's solution."""
    sol = ~inset if isinstance(task, MVCTask) else inset
    return Solution(sol, task.cost(g, sol), task.is_feasible(g, sol), [], {"wall_s": wall, **stats})


class ChilsMIS:
    """CHILS for ``time_s`` seconds (``budget.time_s`` overrides) with ``n_solutions`` parallel
    solutions; ``task`` MISTask (default), MVCTask or MaxCliqueTask."""

    def __init__(self, time_s: float = 1.0, n_solutions: int = 8, task=None):
        self.time_s = check_real("time_s", time_s, low=0.0, low_open=True)
        self.n_solutions = check_int("n_solutions", n_solutions, 1)
        self.task = _mis_view(task)

    def solve(self, instance, budget: Budget | None = None, seed: int = 0) -> Solution:
        import chils

        g = self.task.instance(instance)
        seed = check_int("seed", seed, 0)
        t0 = time.perf_counter()
        solver = chils.CHILS()
        for _ in range(g.n):
            solver.add_vertex(1)
        for u, v in g.edges.tolist():
            solver.add_edge(u, v)
        solver.run_full(_time(budget, self.time_s), self.n_solutions, seed)
        inset = np.array([solver.get_solution_vertex_configuration(v) for v in range(g.n)], bool)
        return _answer(self.task, g, inset, time.perf_counter() - t0, found_at_s=solver.get_solution_time())


class CpSatMIS:
    """CP-SAT on max Σx s.t. x_u + x_v <= 1 per edge, ``time_s`` limit, ``workers`` search workers
    (1: deterministic); ``stats["optimal"]`` is True when CP-SAT proved the optimum."""

    def __init__(self, time_s: float = 10.0, workers: int = 1, task=None):
        self.time_s = check_real("time_s", time_s, low=0.0, low_open=True)
        self.workers = check_int("workers", workers, 1)
        self.task = _mis_view(task)

    def solve(self, instance, budget: Budget | None = None, seed: int = 0) -> Solution:
        from ortools.sat.python import cp_model

        g = self.task.instance(instance)
        t0 = time.perf_counter()
        m = cp_model.CpModel()
        x = [m.NewBoolVar(f"x{v}") for v in range(g.n)]
        for u, v in g.edges.tolist():
            m.AddBoolOr([x[u].Not(), x[v].Not()])
        m.Maximize(sum(x))
        s = cp_model.CpSolver()
        s.parameters.max_time_in_seconds = _time(budget, self.time_s)
        s.parameters.num_search_workers = self.workers
        s.parameters.random_seed = check_int("seed", seed, 0)
        status = s.Solve(m)
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            inset = np.zeros(g.n, bool)  # no solution in time: the empty set (feasible, worst)
        else:
            inset = np.array([s.Value(v) for v in x], bool)
        return _answer(self.task, g, inset, time.perf_counter() - t0, optimal=status == cp_model.OPTIMAL)
