"""PACE's CVRP task: Γ_I / Comp_I under random edit sequences with PyVRP's own ``Solution`` as the
independent feasibility checker, exact optima on n = 7 by enumeration (set partition over
subset tours), the baselines (PyVRP, OR-Tools routing) against the same optima, and bad input."""

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neurips26.combinatorial.pace import (Budget, CVRPInstance, CVRPTask, InfeasibleEdit, PaceSolver, RandomRanker,
                                          uniform_cvrp)
from neurips26.combinatorial.pace.baselines import OrToolsCVRP, PyVRPCVRP, pyvrp_model

SCALE = 1e4


def pyvrp_check(inst, routes):
    """PyVRP's verdict and distance (its clients are numbered 0..n-1)."""
    from pyvrp import Solution

    sol = Solution(pyvrp_model(inst, SCALE).data(), [[int(c) - 1 for c in r] for r in routes])
    return sol.is_feasible() and sol.is_complete(), sol.distance() / SCALE


def _instance(n, rng, capacity=None):
    cap = capacity if capacity is not None else int(rng.integers(9, 30))
    return CVRPInstance(rng.random((n + 1, 2)), np.concatenate([[0], rng.integers(1, 10, n)]), cap)


def _fragments_ok(s):
    """Independent check of a state: paths of clients, loads within capacity, ends consistent."""
    n = s.inst.n
    edges = {(min(v, int(u)), max(v, int(u))) for v in range(1, n + 1) for u in s.nbr[v] if u >= 0}
    if any(0 in e for e in edges) or any(s.deg[v] > 2 for v in range(n + 1)):
        return False
    parent = list(range(n + 1))

    def find(a):
        while parent[a] != a:
            a = parent[a]
        return a

    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra == rb:
            return False  # a cycle
        parent[ra] = rb
    groups = {}
    for v in range(1, n + 1):
        groups.setdefault(find(v), []).append(v)
    return all(s.inst.demands[g].sum() <= s.inst.capacity for g in groups.values())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(2, 14), seed=st.integers(0, 2**31 - 1), junk=st.floats(0, 0.6))
def test_random_edit_sequences_stay_feasible_and_close(n, seed, junk):
    rng = np.random.default_rng(seed)
    inst = _instance(n, rng)
    task, plain = CVRPTask(), CVRPTask(local_search=False)
    s = task.empty_state(inst)
    for _ in range(3 * n):
        if rng.random() < junk:
            e = rng.integers(0, n + 1, 2)
        else:
            c = task.candidates(s)
            if not len(c):
                break
            e = c[rng.integers(len(c))]
        try:
            t = task.transition(s, e)
        except InfeasibleEdit:
            continue
        assert _fragments_ok(t)
        s = t
        for tk in (task, plain):
            routes = tk.complete(s)
            ok, dist = pyvrp_check(inst, routes)
            assert ok and tk.is_feasible(inst, routes)
            assert tk.cost(inst, routes) == pytest.approx(dist, abs=(n + len(routes)) * 1.0 / SCALE)
        # without 2-opt the closure keeps every committed join
        closed = plain.complete(s)
        adj = {(min(a, b), max(a, b)) for r in closed for a, b in zip(r[:-1].tolist(), r[1:].tolist())}
        kept = {(min(v, int(u)), max(v, int(u))) for v in range(1, n + 1) for u in s.nbr[v] if u >= 0}
        assert kept <= adj
    # every refused join is illegal by the rules: checked on a crafted state
    if not len(task.candidates(s)):
        ends = [v for v in range(1, n + 1) if s.deg[v] < 2]
        for a, b in itertools.combinations(ends, 2):
            assert s.other[a] == b or s.load[a] + s.load[b] > inst.capacity


def test_refusals_name_their_reason():
    inst = CVRPInstance(np.random.default_rng(0).random((5, 2)), np.array([0, 5, 5, 5, 9]), 10)
    task = CVRPTask()
    s = task.transition(task.empty_state(inst), (1, 2))
    for e, why in [((3, 3), "self-loop"), ((0, 3), "depot"), ((1, 3), "capacity"), ((4, 3), "capacity"),
                   ((1, 2), "interior|cycle"), ((9, 1), "outside")]:
        with pytest.raises(InfeasibleEdit, match=why):
            task.transition(s, e)


def cvrp_optimum(inst) -> float:
    """Exact optimum by enumeration: best tour of every capacity-feasible subset, then the best
    partition of the clients into such subsets (dynamic programming over bitmasks)."""
    n, D, Q = inst.n, inst.D, inst.capacity
    full = 1 << n
    tour = np.full(full, np.inf)
    for mask in range(1, full):
        S = [i + 1 for i in range(n) if mask >> i & 1]
        if inst.demands[S].sum() > Q:
            continue
        tour[mask] = min(D[0, p[0]] + sum(D[a, b] for a, b in zip(p, p[1:])) + D[p[-1], 0]
                         for p in itertools.permutations(S) if p[0] <= p[-1] or len(p) == 1)
    best = np.full(full, np.inf)
    best[0] = 0.0
    for mask in range(1, full):
        low = mask & -mask
        sub = mask
        while sub:
            if sub & low and tour[sub] < np.inf:
                best[mask] = min(best[mask], tour[sub] + best[mask ^ sub])
            sub = (sub - 1) & mask
    return float(best[full - 1])


@pytest.fixture(scope="module")
def cvrp7():
    rng = np.random.default_rng(42)
    out = []
    for _ in range(50):
        inst = _instance(7, rng, capacity=int(rng.integers(12, 22)))
        out.append((inst, cvrp_optimum(inst)))
    return out


def test_pace_reaches_the_exact_optimum(cvrp7):
    solver = PaceSolver(CVRPTask(), RandomRanker())
    hits = 0
    for k, (inst, opt) in enumerate(cvrp7):
        sol = solver.solve(inst, Budget(depth=7, rounds=30, width=2), seed=k)
        ok, dist = pyvrp_check(inst, sol.sol)
        assert ok and sol.feasible and sol.cost >= opt - 1e-9
        assert sol.cost == pytest.approx(dist, abs=14 / SCALE)
        hits += sol.cost <= opt + 1e-9
    assert hits >= 45, hits


def test_pyvrp_and_ortools_reach_the_exact_optimum(cvrp7):
    for inst, opt in cvrp7[:8]:
        r = PyVRPCVRP(time_s=0.2).solve(inst, seed=1)
        assert r.feasible and r.stats["pyvrp_feasible"] and r.cost == pytest.approx(opt, abs=1e-3)
        r = OrToolsCVRP(time_s=0.2).solve(inst)
        assert r.feasible and r.cost == pytest.approx(opt, abs=1e-3)


def test_destroy_and_warm_start():
    rng = np.random.default_rng(3)
    inst = uniform_cvrp(20, rng)
    task = CVRPTask()
    # one route per client: always feasible (every demand <= capacity), the worst sensible start
    init = tuple(np.array([c]) for c in range(1, 21))
    sol = PaceSolver(task, RandomRanker()).solve(inst, Budget(6, 10, 2), init=init, seed=0)
    assert sol.cost < 0.6 * task.cost(inst, init) and pyvrp_check(inst, sol.sol)[0]
    s = task.destroy(inst, sol.sol, np.arange(5))  # clients 1..5 freed
    assert (s.deg[1:6] == 0).all() and _fragments_ok(s)
    assert task.key(sol.sol) == task.key(tuple(r[::-1] for r in sol.sol[::-1]))  # one key per solution
    back = task.routes(task.solution_state(inst, sol.sol))
    assert task.key(back) == task.key(sol.sol)


def test_bad_cvrp_input():
    rng = np.random.default_rng(0)
    xy = rng.random((5, 2))
    with pytest.raises(ValueError, match="demand"):
        CVRPInstance(xy, np.array([0, 3, 4, 11, 2]), 10)  # a demand above capacity
    with pytest.raises(ValueError, match="depot"):
        CVRPInstance(xy, np.array([1, 3, 4, 1, 2]), 10)
    with pytest.raises(ValueError, match="finite"):
        CVRPInstance(np.where(xy > 0.5, np.nan, xy), np.array([0, 3, 4, 1, 2]), 10)
    with pytest.raises(TypeError, match="integers"):
        CVRPInstance(xy, np.array([0, 3.5, 4, 1, 2]), 10)
    with pytest.raises(ValueError, match="capacity"):
        CVRPInstance(xy, np.array([0, 3, 4, 1, 2]), 0)
    with pytest.raises(ValueError, match="capacity"):
        uniform_cvrp(7, rng)  # not one of Kool et al.'s sizes: capacity is required
    with pytest.raises(ValueError, match="feasible"):
        CVRPTask().destroy(CVRPInstance(xy, np.array([0, 3, 4, 5, 2]), 10), (np.array([1, 2, 3, 4]),), [])
