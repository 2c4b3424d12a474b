"""PACE's MaxCut task: Γ_I / Comp_I under random edit sequences (cut counted by networkx), the
1-flip local optimum checked by enumeration, exact optima at n = 16 by enumeration of all 2^15
cuts (PACE and CP-SAT), Goemans–Williamson's bound and guarantee, and bad input."""

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neurips26.combinatorial.pace import Budget, Graph, InfeasibleEdit, MaxCutTask, PaceSolver, RandomRanker, ba_graph
from neurips26.combinatorial.pace.baselines import CpSatMaxCut, GoemansWilliamson
from neurips26.combinatorial.pace.tasks.maxcut import one_flip


def nx_cut(G, mask) -> int:
    return int(nx.cut_size(G, [v for v in G if mask[v]]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 25), p=st.floats(0, 0.8), seed=st.integers(0, 2**31 - 1), junk=st.floats(0, 0.5))
def test_random_edit_sequences_close_to_full_cuts(n, p, seed, junk):
    rng = np.random.default_rng(seed)
    G = nx.gnp_random_graph(n, p, seed=seed)
    g = Graph.from_networkx(G)
    task, plain = MaxCutTask(), MaxCutTask(local_search=False)
    s = task.empty_state(g)
    while True:
        if rng.random() < junk:
            e = np.array([rng.integers(0, n + 1), rng.integers(-1, 3)])
        else:
            c = task.candidates(s)
            if not len(c):
                break
            e = c[rng.integers(len(c))]
        v, sd = int(e[0]), int(e[1])
        try:
            t = task.transition(s, e)
        except InfeasibleEdit:
            assert not (0 <= v < n and sd in (0, 1) and s.side[v] < 0)
            continue
        assert t.side[v] == sd and (t.side >= 0).sum() == (s.side >= 0).sum() + 1
        # the neighbour counts agree with a direct count
        assert all(t.cnt[k, u] == sum(t.side[w] == k for w in G[u]) for k in (0, 1) for u in range(n))
        s = t
        for tk in (task, plain):
            mask = tk.complete(s)
            assert mask.shape == (n,) and mask.dtype == bool
            assert tk.cost(g, mask) == -nx_cut(G, mask)
        kept = plain.complete(s)  # without flips the closure keeps every assignment
        done = s.side >= 0
        assert np.array_equal(kept[done], s.side[done] == 1)
    assert s.terminal and not len(task.candidates(s))


def test_one_flip_is_a_local_optimum():
    rng = np.random.default_rng(0)
    for _ in range(20):
        G = nx.gnp_random_graph(15, 0.3, seed=int(rng.integers(1000)))
        g = Graph.from_networkx(G)
        m = one_flip(g.A, rng.random(15) < 0.5)
        base = nx_cut(G, m)
        for v in range(15):
            f = m.copy()
            f[v] = ~f[v]
            assert nx_cut(G, f) <= base


def brute_max_cut(g: Graph) -> int:
    n = g.n
    codes = np.arange(1 << (n - 1))  # vertex n-1 fixed on side 0: each cut once
    bits = (codes[:, None] >> np.arange(n - 1)) & 1
    sides = np.concatenate([bits, np.zeros((len(codes), 1), np.int64)], 1).astype(bool)
    return int((sides[:, g.edges[:, 0]] != sides[:, g.edges[:, 1]]).sum(1).max())


@pytest.fixture(scope="module")
def graphs16():
    rng = np.random.default_rng(16)
    out = []
    for _ in range(50):
        G = nx.gnp_random_graph(16, float(rng.uniform(0.15, 0.6)), seed=int(rng.integers(2**31)))
        g = Graph.from_networkx(G)
        out.append((G, g, brute_max_cut(g)))
    return out


def test_pace_reaches_the_enumerated_optimum(graphs16):
    solver = PaceSolver(MaxCutTask(), RandomRanker())
    hits = 0
    for k, (G, g, opt) in enumerate(graphs16):
        sol = solver.solve(g, Budget(depth=8, rounds=24, width=2), seed=k)
        cut = nx_cut(G, sol.sol)
        assert sol.feasible and -sol.cost == cut <= opt
        hits += cut == opt
    assert hits >= 45, hits


def test_cpsat_proves_and_gw_bounds_the_optimum(graphs16):
    for G, g, opt in graphs16[:10]:
        r = CpSatMaxCut(time_s=20.0).solve(g)
        assert r.stats["optimal"] and -r.cost == opt == nx_cut(G, r.sol)
    for G, g, opt in graphs16[:4]:
        r = GoemansWilliamson(roundings=100).solve(g, seed=0)
        cut = nx_cut(G, r.sol)
        assert -r.cost == cut <= opt <= r.stats["sdp_bound"] + 1e-3 * len(g.edges)
        assert cut >= 0.878 * opt  # the GW guarantee holds in expectation; the best of 100 roundings clears it


def test_keys_identify_mirror_cuts_and_targets_pick_the_orientation():
    g = ba_graph(np.random.default_rng(0), (30, 30), m=2)
    task = MaxCutTask()
    sol = task.complete(task.empty_state(g))
    assert task.key(sol) == task.key(~sol) and task.cost(g, sol) == task.cost(g, ~sol)
    s = task.destroy(g, ~sol, np.arange(10))  # the mirror, vertices 0..9 unassigned
    e = task.candidates(s)
    t = task.reference_targets(s, e, sol)     # the reference taken in the state's orientation
    assert np.array_equal(t, (~sol)[e[:, 0]] == e[:, 1].astype(bool)) and t.sum() == 10


def test_bad_maxcut_input():
    g = Graph(3, np.array([[0, 1], [1, 2]]))
    task = MaxCutTask()
    s = task.transition(task.empty_state(g), (0, 1))
    for e, why in [((0, 0), "already"), ((1, 2), "side"), ((5, 0), "outside"), ((1,), "vertex, side")]:
        with pytest.raises(InfeasibleEdit, match=why):
            task.transition(s, e)
    with pytest.raises(ValueError, match="bool"):
        task.destroy(g, np.array([0, 1, 0]), [])
    with pytest.raises(ValueError, match="n_range"):
        ba_graph(np.random.default_rng(0), (30, 20))
