"""Reference solvers behind PACE's ``solve(instance, budget, seed) -> Solution`` face, so an
experiment treats every solver alike.

* :class:`ElkaiTSP`: LKH-3 through ``elkai`` (coordinates scaled to integers by ``scale``).
* :class:`ElkaiATSP`: LKH-3 through ``elkai`` on the asymmetric integer matrix (×``scale``).
* :class:`PyVRPCVRP`: PyVRP's hybrid genetic search (distances scaled to integers by ``scale``), at a
  time limit or (deterministic) an iteration budget.
* :class:`OrToolsCVRP`: OR-Tools routing, savings start and guided local search, at a time limit.
* :class:`CpSatMaxCut`: CP-SAT on the edge-linearized MaxCut model, with a time limit.
* :class:`GoemansWilliamson`: the SDP relaxation (cvxpy + SCS) and ``roundings`` random hyperplanes.
* :class:`ChilsMIS`: CHILS (``chils``) for MIS; MVC and max clique by complement.
* :class:`CpSatMIS`: OR-Tools CP-SAT on the edge (or clique-cover) formulation, with a time limit
  or a deterministic-time limit; its ``stats["optimal"]`` says whether it proved optimality.
* :class:`IlsCpSatMIS`: a deterministic MIS solver (PACE's random-ranker iterated local search,
  budgeted in rounds, polished by single-worker CP-SAT at a deterministic-time limit).

Wall-clock limits make a solver's answer depend on the machine and its load. The rankers'
teachers (:mod:`.pretrained`) therefore use only step budgets: elkai's LKH runs, PyVRP's
``MaxIterations``, CP-SAT's ``max_deterministic_time`` with one worker and a fixed seed (CP-SAT's
deterministic time counts work, not seconds, so it is the same on every machine).

Each imports its package on first use, so ``neurips26.combinatorial.pace`` imports without them.
"""

from __future__ import annotations

import time

import numpy as np

from ..._checks import check_int, check_real
from .base import Budget, Solution
from .tasks import ATSPTask, CVRPTask, MaxCutTask, MISTask, MVCTask, TSPTask
from .tasks.cvrp import canonical_routes
from .tasks.tsp import canonical_tour

__all__ = ["ElkaiTSP", "ElkaiATSP", "CpSatMaxCut", "GoemansWilliamson", "PyVRPCVRP", "OrToolsCVRP", "ChilsMIS",
           "CpSatMIS", "IlsCpSatMIS", "clique_cover", "pyvrp_model"]


def _time(budget: Budget | None, default: float) -> float:
    if budget is None or budget.time_s is None:
        return default
    return budget.time_s


def _check_deterministic(deterministic_s, workers: int):
    """``deterministic_s`` (CP-SAT's work-based limit) or None; it needs one worker: several workers
    race, and which one finds a solution first depends on the machine."""
    if deterministic_s is None:
        return None
    deterministic_s = check_real("deterministic_s", deterministic_s, low=0.0, low_open=True)
    if workers != 1:
        raise ValueError(f"deterministic_s needs workers=1 (several workers are not deterministic), got {workers}")
    return deterministic_s


def _cpsat_solver(time_s: float, deterministic_s, workers: int, seed: int):
    """A CP-SAT solver stopped by wall time ``time_s``, or, when ``deterministic_s`` is given, by
    deterministic time only (the same answer on every machine)."""
    from ortools.sat.python import cp_model

    s = cp_model.CpSolver()
    if deterministic_s is None:
        s.parameters.max_time_in_seconds = time_s
    else:
        s.parameters.max_deterministic_time = deterministic_s
    s.parameters.num_workers = workers
    s.parameters.random_seed = check_int("seed", seed, 0)
    return s


class ElkaiTSP:
    """LKH-3 (elkai) on the rounded distance matrix ×``scale``; ``runs`` LKH runs."""

    task_type = TSPTask

    def __init__(self, runs: int = 1, scale: float = 1e6):
        self.runs = check_int("runs", runs, 1)
        self.scale = check_real("scale", scale, low=0.0, low_open=True)
        self.task = self.task_type(local_search=False)

    @staticmethod
    def _orient(tour) -> np.ndarray:
        # a symmetric tour has two directions: the task's canonical one
        return canonical_tour(tour)

    def solve(self, instance, budget: Budget | None = None, seed: int = 0) -> Solution:
        import elkai

        inst = self.task.instance(instance)
        t0 = time.perf_counter()
        tour = elkai.DistanceMatrix(np.rint(inst.D * self.scale).astype(np.int64).tolist()).solve_tsp(runs=self.runs)
        tour = self._orient(tour[:-1])
        wall = time.perf_counter() - t0
        return Solution(tour, self.task.cost(inst, tour), self.task.is_feasible(inst, tour), [],
                        {"wall_s": wall, "runs": self.runs})


class ElkaiATSP(ElkaiTSP):
    """LKH-3 (elkai) on the asymmetric matrix rounded ×``scale``; ``runs`` LKH runs."""

    task_type = ATSPTask

    @staticmethod
    def _orient(tour) -> np.ndarray:
        # an asymmetric tour has one direction: only rotate it to start at city 0
        tour = np.asarray(tour, np.int64)
        return np.roll(tour, -int(np.flatnonzero(tour == 0)[0]))


def _int_distances(inst, scale: float) -> np.ndarray:
    return np.rint(inst.D * scale).astype(np.int64)


def pyvrp_model(inst, scale: float = 1e4):
    """The instance as a ``pyvrp.Model`` (integer distances ×``scale``; one vehicle type with as
    many vehicles as clients). Also the independent feasibility checker of the tests."""
    from pyvrp import Model

    m = Model()
    xy = np.rint(inst.coords * scale).astype(np.int64)
    locs = [m.add_location(x=int(a), y=int(b)) for a, b in xy]
    m.add_depot(locs[0])
    for i in range(1, inst.n + 1):
        m.add_client(locs[i], delivery=[int(inst.demands[i])])
    m.add_vehicle_type(num_available=inst.n, capacity=[int(inst.capacity)])
    D = _int_distances(inst, scale)
    for i in range(inst.n + 1):
        for j in range(inst.n + 1):
            if i != j:
                m.add_edge(locs[i], locs[j], distance=int(D[i, j]))
    return m


class PyVRPCVRP:
    """PyVRP (hybrid genetic search) for ``time_s`` seconds (``budget.time_s`` overrides), or, when
    ``iterations`` is given, for that many HGS iterations (``MaxIterations``: seeded, the same
    answer on every machine; ``time_s`` and ``budget.time_s`` are then ignored)."""

    def __init__(self, time_s: float = 1.0, scale: float = 1e4, iterations: int | None = None):
        self.time_s = check_real("time_s", time_s, low=0.0, low_open=True)
        self.scale = check_real("scale", scale, low=0.0, low_open=True)
        self.iterations = None if iterations is None else check_int("iterations", iterations, 1)
        self.task = CVRPTask(local_search=False)

    def solve(self, instance, budget: Budget | None = None, seed: int = 0) -> Solution:
        from pyvrp.stop import MaxIterations, MaxRuntime

        inst = self.task.instance(instance)
        t0 = time.perf_counter()
        stop = MaxRuntime(_time(budget, self.time_s)) if self.iterations is None else MaxIterations(self.iterations)
        res = pyvrp_model(inst, self.scale).solve(stop, seed=check_int("seed", seed, 0), display=False,
                                                  collect_stats=False)
        # pyvrp numbers the clients 0..n-1 (its own client index, depots apart); ours are 1..n
        routes = canonical_routes([[a.idx + 1 for a in r if a.is_client()] for r in res.best.routes()])
        return Solution(routes, self.task.cost(inst, routes), self.task.is_feasible(inst, routes), [],
                        {"wall_s": time.perf_counter() - t0, "pyvrp_feasible": bool(res.best.is_feasible()),
                         "iterations": int(res.num_iterations)})


class OrToolsCVRP:
    """OR-Tools routing: path-cheapest-arc start, guided local search, ``time_s`` limit."""

    def __init__(self, time_s: float = 1.0, scale: float = 1e4):
        self.time_s = check_real("time_s", time_s, low=0.0, low_open=True)
        self.scale = check_real("scale", scale, low=0.0, low_open=True)
        self.task = CVRPTask(local_search=False)

    def solve(self, instance, budget: Budget | None = None, seed: int = 0) -> Solution:
        from ortools.constraint_solver import pywrapcp, routing_enums_pb2

        inst = self.task.instance(instance)
        t0 = time.perf_counter()
        D = _int_distances(inst, self.scale)
        n1 = inst.n + 1
        mgr = pywrapcp.RoutingIndexManager(n1, inst.n, 0)
        routing = pywrapcp.RoutingModel(mgr)
        dist = routing.RegisterTransitCallback(lambda a, b: int(D[mgr.IndexToNode(a), mgr.IndexToNode(b)]))
        routing.SetArcCostEvaluatorOfAllVehicles(dist)
        dem = routing.RegisterUnaryTransitCallback(lambda a: int(inst.demands[mgr.IndexToNode(a)]))
        routing.AddDimensionWithVehicleCapacity(dem, 0, [int(inst.capacity)] * inst.n, True, "load")
        params = pywrapcp.DefaultRoutingSearchParameters()
        params.first_solution_strategy = routing_enums_pb2.FirstSolutionStrategy.PATH_CHEAPEST_ARC
        params.local_search_metaheuristic = routing_enums_pb2.LocalSearchMetaheuristic.GUIDED_LOCAL_SEARCH
        t = _time(budget, self.time_s)
        params.time_limit.seconds = int(t)
        params.time_limit.nanos = int((t - int(t)) * 1e9)
        sol = routing.SolveWithParameters(params)
        if sol is None:
            raise RuntimeError("OR-Tools routing found no solution within its time limit")
        routes = []
        for v in range(inst.n):
            i, r = routing.Start(v), []
            i = sol.Value(routing.NextVar(i))
            while not routing.IsEnd(i):
                r.append(mgr.IndexToNode(i))
                i = sol.Value(routing.NextVar(i))
            if r:
                routes.append(r)
        routes = canonical_routes(routes)
        return Solution(routes, self.task.cost(inst, routes), self.task.is_feasible(inst, routes), [],
                        {"wall_s": time.perf_counter() - t0})


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


def clique_cover(g) -> list[np.ndarray]:
    """Cliques of ``g`` (each an int array, size >= 2) that together cover every edge: each uncovered
    edge grows greedily into a maximal clique, preferring vertices with more uncovered edges into it.
    One "at most one" constraint per clique is a much tighter MIS formulation than one per edge
    (an RB graph is a union of cliques plus random edges)."""
    A = g.A
    uncovered = A.copy()
    cliques = []
    for u, v in g.edges.tolist():
        if not uncovered[u, v]:
            continue
        c = [u, v]
        cand = np.flatnonzero(A[u] & A[v])
        cand = cand[np.argsort(-uncovered[cand][:, c].sum(1), kind="stable")]
        for w in cand.tolist():
            if A[w, c].all():
                c.append(w)
        c = np.array(c, np.int64)
        uncovered[np.ix_(c, c)] = False
        cliques.append(c)
    return cliques


def _cpsat_mis(g, s, cliques: bool, hint=None):
    """CP-SAT on max Σx over ``g`` (edge or clique-cover constraints; optional solution hint);
    (independent-set mask, proved optimal)."""
    from ortools.sat.python import cp_model

    m = cp_model.CpModel()
    x = [m.NewBoolVar(f"x{v}") for v in range(g.n)]
    if cliques:
        for c in clique_cover(g):
            m.AddAtMostOne([x[i] for i in c.tolist()])
    else:
        for u, v in g.edges.tolist():
            m.AddBoolOr([x[u].Not(), x[v].Not()])
    if hint is not None:
        for v, h in enumerate(np.asarray(hint, bool).tolist()):
            m.AddHint(x[v], h)
    m.Maximize(sum(x))
    status = s.Solve(m)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return np.zeros(g.n, bool), False  # no solution in time: the empty set (feasible, worst)
    return np.array([s.Value(v) for v in x], bool), status == cp_model.OPTIMAL


class CpSatMIS:
    """CP-SAT on max Σx s.t. x_u + x_v <= 1 per edge (``cliques``: Σ_{v∈C} x_v <= 1 per clique of
    :func:`clique_cover`), ``time_s`` limit (or ``deterministic_s``, CP-SAT's work-based limit, with
    ``workers=1``: deterministic), ``workers`` search workers; ``stats["optimal"]`` is True when
    CP-SAT proved the optimum."""

    def __init__(self, time_s: float = 10.0, workers: int = 1, task=None, deterministic_s: float | None = None,
                 cliques: bool = False):
        self.time_s = check_real("time_s", time_s, low=0.0, low_open=True)
        self.workers = check_int("workers", workers, 1)
        self.deterministic_s = _check_deterministic(deterministic_s, self.workers)
        if not isinstance(cliques, bool):
            raise TypeError(f"cliques must be a bool, got {type(cliques).__name__}")
        self.cliques = cliques
        self.task = _mis_view(task)

    def solve(self, instance, budget: Budget | None = None, seed: int = 0) -> Solution:
        g = self.task.instance(instance)
        t0 = time.perf_counter()
        s = _cpsat_solver(_time(budget, self.time_s), self.deterministic_s, self.workers, seed)
        inset, optimal = _cpsat_mis(g, s, self.cliques)
        return _answer(self.task, g, inset, time.perf_counter() - t0, optimal=optimal)


class IlsCpSatMIS:
    """A deterministic MIS solver: PACE's refinement with a random ranker (an iterated local search:
    greedy min-degree closure with (1,2)-swaps, ``rounds`` destroy-and-re-edit rounds, seeded), then
    single-worker CP-SAT on the clique-cover formulation, hinted with that set, for
    ``deterministic_s`` of deterministic time. Every step is budgeted by work, not seconds, so a
    seed gives the same set on every machine. The rankers' MIS teacher (CHILS only takes a time
    limit); on 12 RB-[200-300] graphs it averaged 20.75 vertices against CHILS's 21.17 at 0.5 s."""

    def __init__(self, rounds: int = 256, deterministic_s: float = 1.0, task=None):
        self.rounds = check_int("rounds", rounds, 0)
        self.deterministic_s = check_real("deterministic_s", deterministic_s, low=0.0, low_open=True)
        self.task = _mis_view(task)

    def solve(self, instance, budget: Budget | None = None, seed: int = 0) -> Solution:
        from .ranker import RandomRanker
        from .solver import PaceSolver

        g = self.task.instance(instance)  # the graph the MIS lives on (complement for max clique)
        seed = check_int("seed", seed, 0)
        t0 = time.perf_counter()
        ils = PaceSolver(MISTask(), RandomRanker()).solve(g, Budget(depth=8, rounds=self.rounds, width=2),
                                                          seed=seed).sol
        s = _cpsat_solver(1e9, self.deterministic_s, 1, seed)
        inset, optimal = _cpsat_mis(g, s, cliques=True, hint=ils)
        if inset.sum() < ils.sum():
            inset = ils
        return _answer(self.task, g, inset, time.perf_counter() - t0, optimal=optimal,
                       ils_size=int(ils.sum()), deterministic_time=float(s.deterministic_time))


class CpSatMaxCut:
    """CP-SAT: max Σ_e y_e with y_uv <= x_u + x_v and y_uv <= 2 - x_u - x_v; ``time_s`` limit (or
    ``deterministic_s``, CP-SAT's work-based limit, with ``workers=1``: deterministic), ``workers``
    search workers; ``stats["optimal"]`` when it proved the optimum."""

    def __init__(self, time_s: float = 10.0, workers: int = 1, deterministic_s: float | None = None):
        self.time_s = check_real("time_s", time_s, low=0.0, low_open=True)
        self.workers = check_int("workers", workers, 1)
        self.deterministic_s = _check_deterministic(deterministic_s, self.workers)
        self.task = MaxCutTask()

    def solve(self, instance, budget: Budget | None = None, seed: int = 0) -> Solution:
        from ortools.sat.python import cp_model

        g = self.task.instance(instance)
        t0 = time.perf_counter()
        m = cp_model.CpModel()
        x = [m.NewBoolVar(f"x{v}") for v in range(g.n)]
        y = []
        for u, v in g.edges.tolist():
            e = m.NewBoolVar(f"y{u}_{v}")
            m.Add(e <= x[u] + x[v])
            m.Add(e <= 2 - x[u] - x[v])
            y.append(e)
        m.Add(x[0] == 0)  # the mirror of a cut is the same cut
        m.Maximize(sum(y))
        s = _cpsat_solver(_time(budget, self.time_s), self.deterministic_s, self.workers, seed)
        status = s.Solve(m)
        mask = (np.array([s.Value(v) for v in x], bool) if status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
                else np.zeros(g.n, bool))
        return Solution(mask, self.task.cost(g, mask), self.task.is_feasible(g, mask), [],
                        {"wall_s": time.perf_counter() - t0, "optimal": status == cp_model.OPTIMAL,
                         "deterministic_time": float(s.deterministic_time)})


class GoemansWilliamson:
    """Goemans–Williamson: maximize Σ_(u,v)∈E (1 − X_uv)/2 over X ⪰ 0 with diag(X) = 1 (cvxpy, SCS),
    factor X = V Vᵀ, and keep the best of ``roundings`` cuts sign(V r), r ~ N(0, I);
    ``stats["sdp_bound"]`` is the relaxation's value (an upper bound up to the solver's tolerance)."""

    def __init__(self, roundings: int = 100):
        self.roundings = check_int("roundings", roundings, 1)
        self.task = MaxCutTask()

    def solve(self, instance, budget: Budget | None = None, seed: int = 0) -> Solution:
        import cvxpy as cp

        g = self.task.instance(instance)
        t0 = time.perf_counter()
        X = cp.Variable((g.n, g.n), symmetric=True)
        u, v = g.edges[:, 0], g.edges[:, 1]
        L = np.zeros((g.n, g.n))  # the graph Laplacian: Σ_e (1 − X_uv)/2 = <L, X>/4
        np.add.at(L, (u, u), 1.0)
        np.add.at(L, (v, v), 1.0)
        np.add.at(L, (u, v), -1.0)
        np.add.at(L, (v, u), -1.0)
        prob = cp.Problem(cp.Maximize(cp.sum(cp.multiply(L, X)) / 4), [X >> 0, cp.diag(X) == 1])
        prob.solve(solver=cp.SCS)
        w, Q = np.linalg.eigh((X.value + X.value.T) / 2)
        V = Q * np.sqrt(np.clip(w, 0.0, None))
        rng = np.random.default_rng(check_int("seed", seed, 0))
        cuts = (V @ rng.standard_normal((g.n, self.roundings))) >= 0  # (n, roundings)
        sizes = (cuts[u] != cuts[v]).sum(0)
        mask = cuts[:, int(np.argmax(sizes))]
        return Solution(mask, self.task.cost(g, mask), self.task.is_feasible(g, mask), [],
                        {"wall_s": time.perf_counter() - t0, "sdp_bound": float(prob.value)})
