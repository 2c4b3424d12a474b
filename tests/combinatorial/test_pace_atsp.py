"""PACE's ATSP task: Γ_I / Comp_I under random arc sequences (independent networkx checker),
Or-opt against an enumeration of every segment move, exact optima at n = 9 by Held–Karp on the
asymmetric matrix (PACE and elkai), the "tmat" generator's triangle inequality, and bad input."""

import itertools

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neurips26.combinatorial.pace import (ATSPInstance, ATSPTask, Budget, InfeasibleEdit, PaceSolver, RandomRanker,
                                          tmat_atsp)
from neurips26.combinatorial.pace.baselines import ElkaiATSP
from neurips26.combinatorial.pace.tasks.atsp import or_opt


def arcs_of(s):
    return {(v, int(s.succ[v])) for v in range(s.inst.n) if s.succ[v] >= 0}


def state_ok(s) -> bool:
    """Directed vertex-disjoint paths (or the one Hamiltonian cycle), pred consistent with succ."""
    n = s.inst.n
    G = nx.DiGraph()
    G.add_nodes_from(range(n))
    G.add_edges_from(arcs_of(s))
    if any(s.pred[j] != i for i, j in G.edges) or sum(s.pred >= 0) != G.number_of_edges():
        return False
    if any(d > 1 for _, d in G.in_degree()) or any(d > 1 for _, d in G.out_degree()):
        return False
    if G.number_of_edges() == n:
        return nx.is_strongly_connected(G)
    return nx.is_directed_acyclic_graph(G)


def tour_arcs(t):
    t = list(t)
    return set(zip(t, t[1:] + t[:1]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(3, 13), seed=st.integers(0, 2**31 - 1), junk=st.floats(0, 0.6))
def test_random_arc_sequences_stay_feasible_and_close(n, seed, junk):
    rng = np.random.default_rng(seed)
    inst = ATSPInstance(rng.random((n, n)))
    task, plain = ATSPTask(), ATSPTask(local_search=False)
    s = task.empty_state(inst)
    for _ in range(2 * n):
        if rng.random() < junk:
            e = rng.integers(0, n, 2)
        else:
            c = task.candidates(s)
            if not len(c):
                assert s.terminal
                break
            e = c[rng.integers(len(c))]
        i, j = int(e[0]), int(e[1])
        try:
            t = task.transition(s, e)
        except InfeasibleEdit:
            G = nx.DiGraph(list(arcs_of(s)))
            G.add_nodes_from(range(n))
            legal = i != j and s.succ[i] < 0 and s.pred[j] < 0 and (s.n_arcs == n - 1 or not nx.has_path(G, j, i))
            assert not legal
            continue
        assert state_ok(t) and arcs_of(t) == arcs_of(s) | {(i, j)}
        s = t
        tour = task.complete(s)
        assert sorted(tour.tolist()) == list(range(n)) and tour[0] == 0
        closed = plain.complete(s)
        assert arcs_of(s) <= tour_arcs(closed)  # without Or-opt the closure keeps every arc
        assert task.cost(inst, tour) <= task.cost(inst, closed) + 1e-12  # Or-opt never lengthens
    if not s.terminal:
        assert len(task.candidates(s))


def test_or_opt_reaches_a_local_optimum_of_every_segment_move():
    rng = np.random.default_rng(0)
    for _ in range(20):
        n = int(rng.integers(5, 10))
        D = rng.random((n, n))
        t = or_opt(D, rng.permutation(n))
        base = D[t, np.roll(t, -1)].sum()
        for L in (1, 2, 3):
            for i in range(n):  # every move of the segment starting at position i (enumerated)
                seg = [t[(i + a) % n] for a in range(L)]
                rest = [t[(i + L + a) % n] for a in range(n - L)]
                for k in range(len(rest)):
                    new = np.array(rest[: k + 1] + seg + rest[k + 1:])
                    assert D[new, np.roll(new, -1)].sum() >= base - 1e-9


def held_karp(D: np.ndarray) -> float:
    """Optimal directed tour length by the Held–Karp recursion (subsets of 1..n-1, start 0)."""
    n = len(D)
    full = 1 << (n - 1)
    dp = np.full((full, n - 1), np.inf)
    for j in range(n - 1):
        dp[1 << j, j] = D[0, j + 1]
    for mask in range(1, full):
        members = [j for j in range(n - 1) if mask >> j & 1]
        for j in members if len(members) > 1 else []:
            prev = mask ^ (1 << j)
            dp[mask, j] = min(dp[prev, k] + D[k + 1, j + 1] for k in members if k != j)
    return float(min(dp[full - 1, j] + D[j + 1, 0] for j in range(n - 1)))


def test_held_karp_matches_enumeration_on_an_asymmetric_matrix():
    D = np.random.default_rng(1).random((7, 7))
    brute = min(D[0, p[0]] + sum(D[a, b] for a, b in zip(p, p[1:])) + D[p[-1], 0]
                for p in itertools.permutations(range(1, 7)))
    assert held_karp(D) == pytest.approx(brute, rel=1e-12)


@pytest.fixture(scope="module")
def atsp9():
    rng = np.random.default_rng(9)
    out = []
    for _ in range(50):
        inst = tmat_atsp(9, rng)
        out.append((inst, held_karp(inst.D)))
    return out


def test_pace_and_elkai_reach_the_held_karp_optimum(atsp9):
    solver = PaceSolver(ATSPTask(), RandomRanker())
    hits = 0
    for k, (inst, opt) in enumerate(atsp9):
        sol = solver.solve(inst, Budget(depth=9, rounds=24, width=2), seed=k)
        t = sol.sol
        assert sorted(t.tolist()) == list(range(9))
        assert sol.cost == pytest.approx(sum(inst.D[t[a], t[(a + 1) % 9]] for a in range(9)), rel=1e-12)
        assert sol.cost >= opt - 1e-9
        hits += sol.cost <= opt + 1e-9
        if k < 15:
            assert ElkaiATSP().solve(inst).cost == pytest.approx(opt, abs=1e-5)
    assert hits >= 45, hits


def test_tmat_satisfies_the_triangle_inequality_and_is_asymmetric():
    D = tmat_atsp(30, np.random.default_rng(0)).D
    assert np.all(D[:, :, None] <= D[:, None, :].transpose(0, 2, 1) + D[None, :, :] + 1e-12)  # d_ik <= d_ij + d_jk
    assert np.abs(D - D.T).max() > 0.1 and (np.diag(D) == 0).all()


def test_destroy_keeps_the_arcs_away_from_freed_vertices():
    rng = np.random.default_rng(5)
    inst = tmat_atsp(20, rng)
    task = ATSPTask()
    tour = rng.permutation(20)
    units = np.array([3, 4, 11])
    s = task.destroy(inst, tour, units)
    freed = {3, 4, 11}
    assert state_ok(s) and arcs_of(s) == {(a, b) for a, b in tour_arcs(tour) if a not in freed and b not in freed}
    assert task.key(task.complete(task.solution_state(inst, tour))) != b""  # a full tour state closes
    while not s.terminal:
        s = task.transition(s, task.candidates(s)[0])
    assert state_ok(s)


def test_bad_atsp_input():
    with pytest.raises(ValueError, match="finite"):
        ATSPInstance(np.array([[0, 1, np.nan], [1, 0, 1], [1, 1, 0]]))
    with pytest.raises(ValueError, match="square"):
        ATSPInstance(np.ones((3, 4)))
    with pytest.raises(ValueError, match="non-negative"):
        ATSPInstance(-np.ones((4, 4)))
    with pytest.raises(TypeError, match="real"):
        ATSPInstance(np.array([["a"] * 3] * 3))
    task = ATSPTask()
    s = task.transition(task.empty_state(ATSPInstance(np.ones((4, 4)))), (0, 1))
    for e, why in [((2, 2), "self-loop"), ((0, 2), "successor"), ((2, 1), "predecessor"), ((1, 0), "sub-tour")]:
        with pytest.raises(InfeasibleEdit, match=why):
            task.transition(s, e)
