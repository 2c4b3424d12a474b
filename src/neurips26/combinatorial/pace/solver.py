"""PaceSolver: ranked edits on feasible partial states, closure at every depth, and budgeted
destroy-and-re-edit refinement with an elite pool.

One trajectory from a state: at each of ``depth`` steps the ranker scores the state's candidate
edits; the top ``width`` are expanded (each child is closed by Comp_I and offered to the elite
pool) and the top-1 is committed through Γ_I. The state before the first edit is closed too,
so a trajectory of depth D yields closures at depths 0..D. Round 0 starts from the empty state
(or from ``init``); each refinement round starts from an elite (the best, or with probability
``explore`` a random member), frees a neighbourhood of its units (the task's local block or
rlns's ``RandomBlock``) and re-edits.

Nondegradation, exactly: (i) the best cost never increases along a run (the pool only admits
better solutions), so it is non-increasing in ``rounds`` (a run with more rounds extends the
same run); (ii) the committed edit never depends on ``width`` or ``depth`` limits, so with
``rounds=0`` a larger width or depth closes a superset of the same states. With rounds > 0 a
different depth or width changes which elite later rounds start from, so only (i) is exact there.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from ..._checks import check_int, check_real
from ..rlns import RandomBlock
from .base import Budget, ElitePool, Solution

__all__ = ["PaceSolver"]


class _Units:
    """What rlns's RandomBlock asks of a problem: its number of units."""

    def __init__(self, n_units: int):
        self.n_units = n_units


class PaceSolver:
    """``PaceSolver(task, ranker).solve(instance, budget, seed)`` → :class:`Solution`.

    task: a :class:`~neurips26.combinatorial.pace.base.Task`; ranker: anything with
    ``scores(features, rng) -> (m,)`` (an :class:`EditRanker`, :class:`RandomRanker`);
    elite: pool size k; destroy: fraction of the units freed per refinement round (at least 2);
    neighbourhood: "local" (the task's block) or "random" (rlns.RandomBlock); explore:
    probability of starting a round from a random elite instead of the best; temperature: 0 commits
    the top-ranked edit, T > 0 draws the committed edit from softmax(scores / T) (the expanded
    ``width`` are the drawn edit and the best-ranked others), so refinement rounds that restart from
    the same elite do not repeat the same trajectory."""

    def __init__(self, task, ranker, elite: int = 4, destroy: float = 0.2, neighbourhood: str = "local",
                 explore: float = 0.2, temperature: float = 0.0):
        if not hasattr(ranker, "scores"):
            raise TypeError(f"ranker must have a scores(features, rng) method, got {type(ranker).__name__}")
        for attr in ("empty_state", "candidates", "transition", "complete", "cost", "is_feasible", "destroy"):
            if not hasattr(task, attr):
                raise TypeError(f"task lacks {attr}(): not a PACE Task")
        if neighbourhood not in ("local", "random"):
            raise ValueError(f"neighbourhood must be 'local' or 'random', got {neighbourhood!r}")
        self.task, self.ranker = task, ranker
        self.elite = check_int("elite", elite, 1)
        self.destroy = check_real("destroy", destroy, low=0.0, low_open=True, high=1.0)
        self.explore = check_real("explore", explore, low=0.0, high=1.0)
        self.temperature = check_real("temperature", temperature, low=0.0)
        self.neighbourhood = neighbourhood

    def solve(self, instance, budget: Budget | None = None, seed: int = 0, init: Any = None,
              callback: Callable[[Solution], None] | None = None) -> Solution:
        """Best solution found within ``budget`` (default ``Budget()``). ``init``: a feasible
        solution to refine (round 0 then destroys it instead of building from empty);
        ``callback(solution)`` on each improvement of the best. On ``KeyboardInterrupt`` or when
        ``budget.time_s`` runs out, the best so far is returned (``stats["stopped"]`` says why)."""
        budget = Budget() if budget is None else budget
        if not isinstance(budget, Budget):
            raise TypeError(f"budget must be a Budget, got {type(budget).__name__}")
        seed = check_int("seed", seed, 0)
        task = self.task
        inst = task.instance(instance) if hasattr(task, "instance") else instance
        if init is not None and not task.is_feasible(inst, init):
            raise ValueError("init must be a feasible solution of the instance")
        t0 = time.perf_counter()
        deadline = None if budget.time_s is None else t0 + budget.time_s
        pool = ElitePool(self.elite)
        trace: list[dict] = []
        stats = {"closures": 0, "edits": 0, "rounds_done": 0, "round_best": [], "round_time_s": [], "stopped": "budget"}
        n_units = task.n_units(inst)
        size = max(2, int(round(self.destroy * n_units)))

        def offer(sol, rnd, depth):
            stats["closures"] += 1
            c = task.cost(inst, sol)
            if pool.offer(c, task.key(sol), sol):
                trace.append({"round": rnd, "depth": depth, "cost": c, "time_s": time.perf_counter() - t0})
                if callback is not None:
                    callback(Solution(sol, c, True, list(trace)))

        def out_of_time():
            return deadline is not None and time.perf_counter() > deadline

        def trajectory(state, rnd, rng):
            offer(task.complete(state), rnd, 0)
            for d in range(1, budget.depth + 1):
                if out_of_time():
                    raise TimeoutError
                edits = task.candidates(state)
                if not len(edits):
                    break
                s = self.ranker.scores(task.features(state, edits), rng)
                order = np.argsort(-s, kind="stable")
                if self.temperature > 0:  # one draw per step, whatever the width: nondegradation in width holds
                    z = np.exp((s - s.max()) / self.temperature)
                    pick = int(rng.choice(len(s), p=z / z.sum()))
                    order = np.concatenate([[pick], order[order != pick]])
                order = order[: budget.width]
                children = [task.transition(state, edits[k]) for k in order]
                stats["edits"] += len(children)
                for child in children:
                    offer(task.complete(child), rnd, d)
                state = children[0]

        try:
            try:
                for rnd in range(budget.rounds + 1):
                    rng = np.random.default_rng([seed, rnd])
                    if rnd == 0 and init is None:
                        state = task.empty_state(inst)
                    else:
                        if rnd == 0:
                            start = init
                            offer(init, 0, 0)
                        else:
                            m = pool.members
                            start = m[int(rng.integers(len(m)))][3] if rng.random() < self.explore else m[0][3]
                        if self.neighbourhood == "random":
                            units = RandomBlock(min(size, n_units)).sample(_Units(n_units), 1, rng)[0]
                        else:
                            units = task.neighbourhood(inst, size, rng)
                        state = task.destroy(inst, start, units)
                    trajectory(state, rnd, rng)
                    stats["rounds_done"] = rnd + 1
                    stats["round_best"].append(pool.best[0])
                    stats["round_time_s"].append(time.perf_counter() - t0)
                    if out_of_time():
                        raise TimeoutError
            except TimeoutError:
                stats["stopped"] = "time"
        except KeyboardInterrupt:
            stats["stopped"] = "interrupt"
        if pool.best is None:  # stopped before the first closure: close the empty state (always feasible)
            offer(task.complete(task.empty_state(inst)) if init is None else init, 0, 0)
        cost, _, _, sol = pool.best
        feasible = bool(task.is_feasible(inst, sol))
        if not feasible:  # Γ_I and Comp_I guarantee feasibility; a broken task must not go unnoticed
            raise AssertionError(f"{type(task).__name__} produced an infeasible solution")
        stats["wall_s"] = time.perf_counter() - t0
        stats["elite_costs"] = [m[0] for m in pool.members]
        return Solution(sol, cost, feasible, trace, stats)
