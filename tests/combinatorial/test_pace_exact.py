"""PACE against exact optima on tiny instances, and the reference solvers against the same optima.

TSP n = 9: Held–Karp dynamic programming (written here, independent of the library). MIS / MVC /
max clique n = 25: CP-SAT with status OPTIMAL and networkx's ``max_weight_clique``. PACE with a
large budget reaches the optimum on >= 90% of 50 instances; its ``cost`` equals the checker's on
every solution."""

import itertools

import networkx as nx
import numpy as np
import pytest

from neurips26.combinatorial.pace import (Budget, Graph, MaxCliqueTask, MISTask, MVCTask, PaceSolver, RandomRanker,
                                          TSPTask, uniform_tsp)
from neurips26.combinatorial.pace.baselines import ChilsMIS, CpSatMIS, ElkaiTSP

BIG = Budget(depth=9, rounds=24, width=2)


def held_karp(D: np.ndarray) -> float:
    """Optimal tour length by the Held–Karp recursion over subsets containing vertex 0."""
    n = len(D)
    full = 1 << (n - 1)  # subsets of 1..n-1
    dp = np.full((full, n - 1), np.inf)
    for j in range(n - 1):
        dp[1 << j, j] = D[0, j + 1]
    for mask in range(1, full):
        members = [j for j in range(n - 1) if mask >> j & 1]
        if len(members) < 2:
            continue
        for j in members:
            prev = mask ^ (1 << j)
            dp[mask, j] = min(dp[prev, k] + D[k + 1, j + 1] for k in members if k != j)
    return float(min(dp[full - 1, j] + D[j + 1, 0] for j in range(n - 1)))


def test_held_karp_matches_enumeration():
    rng = np.random.default_rng(0)
    c = uniform_tsp(7, rng)
    D = np.linalg.norm(c[:, None] - c[None], axis=-1)
    brute = min(D[0, p[0]] + sum(D[a, b] for a, b in zip(p, p[1:])) + D[p[-1], 0]
                for p in itertools.permutations(range(1, 7)))
    assert held_karp(D) == pytest.approx(brute, rel=1e-12)


@pytest.fixture(scope="module")
def tsp9():
    rng = np.random.default_rng(2026)
    out = []
    for _ in range(50):
        c = uniform_tsp(9, rng)
        D = np.linalg.norm(c[:, None] - c[None], axis=-1)
        out.append((c, held_karp(D)))
    return out


def test_pace_tsp9_reaches_held_karp_optimum(tsp9):
    task = TSPTask()
    solver = PaceSolver(task, RandomRanker())
    hits = 0
    for k, (c, opt) in enumerate(tsp9):
        sol = solver.solve(c, BIG, seed=k)
        assert sol.feasible and sorted(sol.sol.tolist()) == list(range(9))
        direct = sum(np.linalg.norm(c[sol.sol[i]] - c[sol.sol[(i + 1) % 9]]) for i in range(9))
        assert sol.cost == pytest.approx(direct, rel=1e-12) and sol.cost >= opt - 1e-9
        hits += sol.cost <= opt + 1e-9
    assert hits >= 45, hits


def test_elkai_tsp9_is_optimal(tsp9):
    ref = ElkaiTSP(runs=1)
    for c, opt in tsp9[:20]:
        assert ref.solve(c).cost == pytest.approx(opt, rel=1e-5)


@pytest.fixture(scope="module")
def graphs25():
    rng = np.random.default_rng(7)
    out = []
    for _ in range(50):
        G = nx.gnp_random_graph(25, float(rng.uniform(0.1, 0.5)), seed=int(rng.integers(2**31)))
        alpha = len(nx.max_weight_clique(nx.complement(G), weight=None)[0])
        omega = len(nx.max_weight_clique(G, weight=None)[0])
        out.append((G, Graph.from_networkx(G), alpha, omega))
    return out


def test_cpsat_proves_the_networkx_optima(graphs25):
    for G, g, alpha, omega in graphs25[:15]:
        r = CpSatMIS(time_s=20.0).solve(g)
        assert r.stats["optimal"] and -r.cost == alpha and r.feasible
        r = CpSatMIS(time_s=20.0, task=MaxCliqueTask()).solve(g)
        assert r.stats["optimal"] and -r.cost == omega and r.feasible
        r = CpSatMIS(time_s=20.0, task=MVCTask()).solve(g)
        assert r.cost == 25 - alpha and all(r.sol[u] or r.sol[v] for u, v in G.edges)


def test_chils_finds_the_optima(graphs25):
    for G, g, alpha, omega in graphs25[:10]:
        r = ChilsMIS(time_s=0.05, n_solutions=2).solve(g, seed=1)
        assert r.feasible and -r.cost == alpha
        assert not any(r.sol[u] and r.sol[v] for u, v in G.edges)


@pytest.mark.parametrize("which", ["mis", "mvc", "mcl"])
def test_pace_graph_tasks_reach_the_optimum(graphs25, which):
    task = {"mis": MISTask, "mvc": MVCTask, "mcl": MaxCliqueTask}[which]()
    solver = PaceSolver(task, RandomRanker())
    hits = 0
    for k, (G, g, alpha, omega) in enumerate(graphs25):
        sol = solver.solve(g, BIG, seed=k)
        m = sol.sol
        if which == "mis":
            ok, size, opt = not any(m[u] and m[v] for u, v in G.edges), -sol.cost, alpha
            hits += size == opt
        elif which == "mvc":
            ok, size, opt = all(m[u] or m[v] for u, v in G.edges), sol.cost, 25 - alpha
            hits += size == opt
        else:
            idx = np.flatnonzero(m)
            ok, size, opt = all(G.has_edge(int(a), int(b)) for a, b in itertools.combinations(idx, 2)), -sol.cost, omega
            hits += size == opt
        assert ok and sol.feasible and size == int(m.sum())  # cost = the checker's count
        assert (size >= opt) if which == "mvc" else (size <= opt)
    assert hits >= 45, hits
