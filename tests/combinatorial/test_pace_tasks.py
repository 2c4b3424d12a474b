"""PACE's Γ_I (transition) and Comp_I (complete) for TSP, MIS, MVC and max clique.

Random edit sequences (hypothesis): every accepted edit leaves a feasible, extendable state
(checked by an independent networkx checker, not by the task), every refused edit is one the
checker calls illegal, and Comp_I from every reached state returns a solution the independent
checker accepts (permutation check for tours, edge checks for sets)."""

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neurips26.combinatorial.pace import Graph, InfeasibleEdit, MaxCliqueTask, MISTask, MVCTask, TSPTask, uniform_tsp

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- independent checkers ------------------------------------------------------------------------
def tsp_state_ok(s) -> bool:
    """The state's edges form vertex-disjoint simple paths (or the one Hamiltonian cycle)."""
    n = s.inst.n
    G = nx.MultiGraph()
    G.add_nodes_from(range(n))
    for v in range(n):
        for u in s.nbr[v]:
            if u >= 0 and u > v:
                G.add_edge(v, int(u))
            elif u >= 0 and u == v:
                return False
    if G.number_of_edges() != s.n_edges or any(d > 2 for _, d in G.degree()):
        return False
    if s.n_edges == n:
        return nx.is_connected(G) and all(d == 2 for _, d in G.degree())
    return nx.is_forest(nx.Graph(G)) and G.number_of_edges() == nx.Graph(G).number_of_edges()


def tsp_state_edges(s) -> set:
    return {(min(v, int(u)), max(v, int(u))) for v in range(s.inst.n) for u in s.nbr[v] if u >= 0}


def tour_ok(n, tour) -> bool:
    t = np.asarray(tour)
    return t.shape == (n,) and sorted(t.tolist()) == list(range(n))


def tour_edges(tour) -> set:
    t = list(tour)
    return {(min(a, b), max(a, b)) for a, b in zip(t, t[1:] + t[:1])}


def independent(G: nx.Graph, mask) -> bool:
    return not any(mask[u] and mask[v] for u, v in G.edges)


def is_cover(G: nx.Graph, mask) -> bool:
    return all(mask[u] or mask[v] for u, v in G.edges)


def is_clique(G: nx.Graph, mask) -> bool:
    idx = np.flatnonzero(mask)
    return all(G.has_edge(int(a), int(b)) for i, a in enumerate(idx) for b in idx[i + 1:])


# --- TSP -----------------------------------------------------------------------------------------
@SETTINGS
@given(n=st.integers(3, 14), seed=st.integers(0, 2**31 - 1), steps=st.integers(0, 30), junk=st.floats(0, 0.6))
def test_tsp_random_edit_sequences_stay_feasible_and_close(n, seed, steps, junk):
    rng = np.random.default_rng(seed)
    task, plain = TSPTask(), TSPTask(local_search=False)
    s = task.empty_state(uniform_tsp(n, rng))
    for _ in range(steps):
        before = (s.nbr.copy(), s.deg.copy(), s.other.copy(), s.n_edges)
        if rng.random() < junk:  # an arbitrary pair, legal or not
            e = rng.integers(0, n, 2)
        else:
            c = task.candidates(s)
            if not len(c):
                assert s.terminal
                break
            e = c[rng.integers(len(c))]
        try:
            t = task.transition(s, e)
        except InfeasibleEdit:
            # the checker agrees that the join is illegal: self-loop, interior end, or a premature sub-tour
            i, j = int(e[0]), int(e[1])
            legal = i != j and s.deg[i] < 2 and s.deg[j] < 2 and (
                s.n_edges == n - 1 or not nx.has_path(_path_graph(s), i, j))
            assert not legal
            assert (s.nbr == before[0]).all() and (s.deg == before[1]).all() and s.n_edges == before[3]
            continue
        assert tsp_state_ok(t)
        assert tsp_state_edges(t) == tsp_state_edges(s) | {(min(map(int, e)), max(map(int, e)))}
        s = t
        tour = task.complete(s)
        assert tour_ok(n, tour)
        closed = plain.complete(s)  # without 2-opt the closure extends the state: it keeps every edge
        assert tour_ok(n, closed) and tsp_state_edges(s) <= tour_edges(closed)
    if not s.terminal:
        assert len(task.candidates(s)) >= 1  # a non-terminal state always has an edit


def _path_graph(s):
    G = nx.Graph()
    G.add_nodes_from(range(s.inst.n))
    G.add_edges_from(tsp_state_edges(s))
    return G


def test_tsp_candidates_are_all_accepted_and_cost_matches_geometry():
    rng = np.random.default_rng(3)
    task = TSPTask()
    coords = uniform_tsp(30, rng)
    s = task.empty_state(coords)
    for _ in range(20):
        c = task.candidates(s)
        for e in c:
            task.transition(s, e)  # never raises
        s = task.transition(s, c[rng.integers(len(c))])
    tour = task.complete(s)
    direct = sum(np.linalg.norm(coords[tour[k]] - coords[tour[(k + 1) % 30]]) for k in range(30))
    assert task.cost(coords, tour) == pytest.approx(direct, rel=1e-12)


@pytest.mark.parametrize("n, frac", [(12, 0.0), (12, 0.3), (25, 0.5), (25, 1.0)])
def test_tsp_destroy_keeps_exactly_the_edges_away_from_the_freed_vertices(n, frac):
    rng = np.random.default_rng(n)
    task = TSPTask()
    coords = uniform_tsp(n, rng)
    tour = rng.permutation(n)
    units = np.flatnonzero(rng.random(n) < frac)
    s = task.destroy(coords, tour, units)
    assert tsp_state_ok(s)
    freed = set(units.tolist())
    assert tsp_state_edges(s) == {e for e in tour_edges(tour) if not (set(e) & freed)}
    # the destroyed state is a legal Γ_I state: re-joining goes on from it
    while not s.terminal:
        s = task.transition(s, task.candidates(s)[0])
    assert tour_ok(n, task.complete(s))


# --- MIS / MVC / max clique --------------------------------------------------------------------------
def _graph(n, p, rng):
    G = nx.gnp_random_graph(n, p, seed=int(rng.integers(2**31)))
    return G, Graph.from_networkx(G)


@SETTINGS
@given(n=st.integers(1, 30), p=st.floats(0.0, 0.9), seed=st.integers(0, 2**31 - 1), junk=st.floats(0, 0.6),
       which=st.sampled_from(["mis", "mvc", "mcl"]))
def test_graph_tasks_random_edit_sequences_stay_feasible_and_close(n, p, seed, junk, which):
    rng = np.random.default_rng(seed)
    G, g = _graph(n, p, rng)
    task = {"mis": MISTask, "mvc": MVCTask, "mcl": MaxCliqueTask}[which]()
    plain = type(task)(local_search=False)
    work = nx.complement(G) if which == "mcl" else G  # the graph the states are independent sets of
    check = {"mis": lambda m: independent(G, m), "mvc": lambda m: is_cover(G, m),
             "mcl": lambda m: is_clique(G, m)}[which]
    s = task.empty_state(task.instance(g))
    while True:
        if rng.random() < junk:
            e = np.array([rng.integers(0, n)])
        else:
            c = task.candidates(s)
            if not len(c):
                break
            e = c[rng.integers(len(c))]
        v = int(e[0])
        try:
            t = task.transition(s, e)
        except InfeasibleEdit:
            assert s.inset[v] or any(s.inset[u] for u in work.neighbors(v))
            continue
        assert independent(work, t.inset) and t.inset.sum() == s.inset.sum() + 1
        s = t
        sol = task.complete(s)
        assert sol.dtype == bool and check(sol) and task.is_feasible(task.instance(g), sol)
        closed = plain.complete(s)
        chosen = ~closed if which == "mvc" else closed
        assert check(closed) and (chosen >= s.inset).all()  # the closure keeps the state's vertices
        # maximal: no vertex can be added to the independent set
        assert all(chosen[v] or any(chosen[u] for u in work.neighbors(v)) for v in range(n))
    assert not task.candidates(s).size and s.terminal


def test_mis_cost_mvc_complement_and_clique_of_complement():
    rng = np.random.default_rng(0)
    G, g = _graph(40, 0.15, rng)
    mis, mvc, mcl = MISTask(), MVCTask(), MaxCliqueTask()
    s = mis.empty_state(g)
    a = mis.complete(s)
    c = mvc.complete(mvc.empty_state(g))
    assert np.array_equal(c, ~a) and mvc.cost(g, c) == 40 + mis.cost(g, a) and is_cover(G, c)
    k = mcl.complete(mcl.empty_state(g))
    assert is_clique(G, k) and mcl.cost(g, k) == -k.sum()
    # destroy round-trips: freeing nothing gives back the solution's state
    assert np.array_equal(mvc.solution_state(g, c).inset, a)
    st_ = mvc.destroy(g, c, np.array([0, 1, 2]))
    assert independent(G, st_.inset) and not st_.inset[[0, 1, 2]].any()


def test_mis_refuses_bad_edits_with_reasons():
    g = Graph(3, np.array([[0, 1]]))
    task = MISTask()
    s = task.transition(task.empty_state(g), 0)
    for v, why in [(0, "already"), (1, "neighbour"), (5, "outside")]:
        with pytest.raises(InfeasibleEdit, match=why):
            task.transition(s, v)


def test_tsp_refuses_bad_edits_with_reasons():
    task = TSPTask()
    s = task.empty_state(uniform_tsp(5, np.random.default_rng(0)))
    s = task.transition(s, (0, 1))
    s = task.transition(s, (1, 2))
    for e, why in [((3, 3), "self-loop"), ((1, 3), "interior"), ((0, 2), "sub-tour"), ((0, 9), "outside")]:
        with pytest.raises(InfeasibleEdit, match=why):
            task.transition(s, e)
