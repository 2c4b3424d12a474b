"""PACE: Partial-state Amortized Constraint Editing.

Learned edits on feasible partial states (``Task.transition`` = Γ_I), closure of any such state
to a feasible solution (``Task.complete`` = Comp_I), and budgeted refinement with an elite pool
(:class:`PaceSolver`). Tasks: TSP, ATSP, CVRP, MIS, MVC and max clique (by complement), MaxCut.
The reference solvers (:mod:`.baselines`: elkai, PyVRP, OR-Tools routing, CHILS, CP-SAT,
Goemans–Williamson) import their packages only when used.
"""

from .base import Budget, ElitePool, Features, InfeasibleEdit, Solution, Task
from .generators import ba_graph, rb_graph, tmat_atsp, uniform_cvrp, uniform_tsp
from .ranker import EditRanker, RandomRanker, train_ranker, training_examples
from .solver import PaceSolver
from .tasks import (TASKS, ATSPInstance, ATSPTask, CVRPInstance, CVRPTask, Graph, MaxCliqueTask, MaxCutTask, MISTask,
                    MVCTask, TSPInstance, TSPTask)

__all__ = ["Budget", "ElitePool", "Features", "InfeasibleEdit", "Solution", "Task", "PaceSolver", "EditRanker",
           "RandomRanker", "train_ranker", "training_examples", "TASKS", "TSPTask", "TSPInstance", "MISTask",
           "MVCTask", "MaxCliqueTask", "Graph", "uniform_tsp", "rb_graph", "CVRPTask", "CVRPInstance", "uniform_cvrp",
           "ATSPTask", "ATSPInstance", "tmat_atsp", "MaxCutTask", "ba_graph"]
