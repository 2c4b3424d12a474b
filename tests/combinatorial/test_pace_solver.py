"""PaceSolver: elite-pool nondegradation (exact), seeded determinism, warm start, callbacks,
time-out and interrupt, and bad input at the boundary."""

import math

import networkx as nx
import numpy as np
import pytest

from neurips26.combinatorial.pace import (ATSPTask, Budget, CVRPTask, ElitePool, Graph, MaxCliqueTask, MaxCutTask,
                                          MISTask, MVCTask, PaceSolver, RandomRanker, TSPTask, ba_graph, rb_graph,
                                          tmat_atsp, uniform_cvrp, uniform_tsp)
from neurips26.combinatorial.pace.tasks import TSPState


@pytest.fixture(scope="module")
def tsp40():
    return uniform_tsp(40, np.random.default_rng(11))


@pytest.fixture(scope="module")
def rb():
    return rb_graph(np.random.default_rng(5), "small")


def _plain(task_cls):
    return task_cls(local_search=False)  # weaker closure: more room for the budget to matter


@pytest.mark.parametrize("which", ["tsp", "atsp", "cvrp", "mis", "maxcut"])
def test_best_cost_is_non_increasing_in_rounds_depth_and_width(which, tsp40):
    if which == "tsp":
        task, inst = _plain(TSPTask), tsp40
    elif which == "atsp":
        task, inst = _plain(ATSPTask), tmat_atsp(40, np.random.default_rng(4))
    elif which == "cvrp":
        task, inst = _plain(CVRPTask), uniform_cvrp(50, np.random.default_rng(2))
    elif which == "maxcut":
        task, inst = _plain(MaxCutTask), ba_graph(np.random.default_rng(6), (120, 120))
    else:  # a sparse random graph: greedy is far from optimal there (on RB-small it is often optimal already)
        task, inst = _plain(MISTask), Graph.from_networkx(nx.gnp_random_graph(150, 0.05, seed=1))
    solver = PaceSolver(task, RandomRanker())
    # rounds: a run with more rounds extends the same run (exact, any depth/width)
    by_rounds = [solver.solve(inst, Budget(depth=4, rounds=r, width=2), seed=3).cost for r in (0, 1, 2, 4, 8, 16)]
    assert all(b <= a for a, b in zip(by_rounds, by_rounds[1:])), by_rounds
    run = solver.solve(inst, Budget(depth=4, rounds=16, width=2), seed=3)
    assert all(b <= a for a, b in zip(run.stats["round_best"], run.stats["round_best"][1:]))
    assert run.stats["round_best"][:5] == [solver.solve(inst, Budget(4, r, 2), seed=3).cost for r in range(5)]
    # depth and width with rounds = 0: the same committed trajectory, more closures
    by_depth = [solver.solve(inst, Budget(depth=d, rounds=0, width=2), seed=3).cost for d in (0, 1, 2, 4, 8, 16)]
    assert all(b <= a for a, b in zip(by_depth, by_depth[1:])), by_depth
    by_width = [solver.solve(inst, Budget(depth=8, rounds=0, width=w), seed=3).cost for w in (1, 2, 4, 8)]
    assert all(b <= a for a, b in zip(by_width, by_width[1:])), by_width
    assert by_rounds[-1] < by_rounds[0] or by_depth[-1] < by_depth[0]  # the budget does buy something here


def test_trace_is_strictly_improving_and_ends_at_the_answer(tsp40):
    seen = []
    sol = PaceSolver(TSPTask(), RandomRanker()).solve(tsp40, Budget(6, 10, 2), seed=0, callback=seen.append)
    costs = [t["cost"] for t in sol.trace]
    assert all(b < a for a, b in zip(costs, costs[1:])) and costs[-1] == sol.cost
    assert [s.cost for s in seen] == costs and all(s.feasible for s in seen)


def test_elite_pool_keeps_the_k_best_distinct():
    pool = ElitePool(3)
    assert pool.offer(5.0, b"a", "a") and not pool.offer(5.0, b"a", "a")  # duplicate refused
    assert pool.offer(4.0, b"b", "b") and not pool.offer(6.0, b"c", "c") and not pool.offer(4.5, b"d", "d")
    assert [m[0] for m in pool.members] == [4.0, 4.5, 5.0]
    assert not pool.offer(7.0, b"e", "e") and [m[0] for m in pool.members] == [4.0, 4.5, 5.0]
    assert pool.offer(1.0, b"f", "f") and [m[0] for m in pool.members] == [1.0, 4.0, 4.5]


@pytest.mark.parametrize("which", ["tsp", "atsp", "cvrp", "mis", "mvc", "mcl", "maxcut"])
def test_seeded_determinism(which, tsp40, rb):
    task = {"tsp": TSPTask, "atsp": ATSPTask, "cvrp": CVRPTask, "mis": MISTask, "mvc": MVCTask,
            "mcl": MaxCliqueTask, "maxcut": MaxCutTask}[which]()
    inst = {"tsp": tsp40, "atsp": tmat_atsp(25, np.random.default_rng(3)),
            "cvrp": uniform_cvrp(20, np.random.default_rng(1))}.get(which, rb)
    s = PaceSolver(task, RandomRanker())
    a, b = s.solve(inst, Budget(4, 6, 2), seed=9), s.solve(inst, Budget(4, 6, 2), seed=9)
    assert a.cost == b.cost and task.key(a.sol) == task.key(b.sol) and a.stats["closures"] == b.stats["closures"]


def test_warm_start_refines_a_bad_tour_and_keeps_feasibility(tsp40):
    rng = np.random.default_rng(0)
    init = rng.permutation(40)
    task = TSPTask(local_search=False)
    start = task.cost(tsp40, init)
    seen = []
    sol = PaceSolver(task, RandomRanker()).solve(tsp40, Budget(4, 30, 1), seed=0, init=init, callback=seen.append)
    assert sol.trace[0]["cost"] == pytest.approx(start) and sol.cost < 0.7 * start
    assert all(task.is_feasible(tsp40, s.sol) for s in seen)
    with pytest.raises(ValueError, match="init"):
        PaceSolver(task, RandomRanker()).solve(tsp40, Budget(1, 1), init=np.zeros(40, np.int64))


def test_time_out_and_interrupt_return_the_best_so_far(tsp40):
    solver = PaceSolver(TSPTask(), RandomRanker())
    sol = solver.solve(tsp40, Budget(depth=40, rounds=10**6, width=4, time_s=0.3), seed=0)
    assert sol.stats["stopped"] == "time" and sol.feasible and sol.stats["wall_s"] < 3.0

    calls = []

    def stop(s):
        calls.append(s.cost)
        if len(calls) == 3:
            raise KeyboardInterrupt

    sol = solver.solve(tsp40, Budget(depth=10, rounds=50, width=2), seed=0, callback=stop)
    assert sol.stats["stopped"] == "interrupt" and sol.cost == calls[-1] and sol.feasible


def test_random_neighbourhood_from_rlns_also_works(rb):
    sol = PaceSolver(MISTask(), RandomRanker(), neighbourhood="random").solve(rb, Budget(3, 5, 1), seed=0)
    assert sol.feasible and sol.stats["rounds_done"] == 6


# --- bad input ------------------------------------------------------------------------------------
def test_bad_input_is_refused_with_a_reason():
    c = uniform_tsp(6, np.random.default_rng(0))
    c[2, 1] = np.nan
    with pytest.raises(ValueError, match="finite"):
        TSPTask.instance(c)
    with pytest.raises(ValueError, match="shape"):
        TSPTask.instance(np.zeros((2, 2)))
    with pytest.raises(TypeError, match="real"):
        TSPTask.instance(np.array([["a", "b"]] * 4))
    with pytest.raises(ValueError, match="self-loop"):
        Graph(3, np.array([[0, 1], [2, 2]]))
    with pytest.raises(ValueError, match="vertices"):
        Graph(3, np.array([[0, 3]]))
    with pytest.raises(TypeError, match="integer"):
        Graph(3, np.array([[0.0, 1.0]]))
    with pytest.raises(ValueError, match="self-loop"):
        MISTask.instance(nx.Graph([(0, 1), (1, 1)]))
    for bad in (dict(depth=-1), dict(rounds=-2), dict(width=0), dict(time_s=0.0), dict(time_s=math.nan)):
        with pytest.raises(ValueError):
            Budget(**bad)
    with pytest.raises(TypeError, match="scores"):
        PaceSolver(TSPTask(), object())
    with pytest.raises(ValueError, match="neighbourhood"):
        PaceSolver(TSPTask(), RandomRanker(), neighbourhood="ring")
    with pytest.raises(TypeError, match="Budget"):
        PaceSolver(TSPTask(), RandomRanker()).solve(uniform_tsp(5, np.random.default_rng(0)), budget=(1, 2, 3))
    with pytest.raises(ValueError, match="seed"):
        PaceSolver(TSPTask(), RandomRanker()).solve(uniform_tsp(5, np.random.default_rng(0)), seed=-1)
    with pytest.raises(ValueError, match="size"):
        rb_graph(np.random.default_rng(0), "huge")


def test_tsp_state_is_a_plain_record():
    s = TSPTask().empty_state(uniform_tsp(4, np.random.default_rng(0)))
    assert isinstance(s, TSPState) and s.n_edges == 0 and (s.other == np.arange(4)).all()


def test_sampled_commits_are_seeded_and_keep_width_nondegradation(tsp40):
    task = _plain(TSPTask)
    solver = PaceSolver(task, _ByLength(), temperature=0.5)
    a, b = solver.solve(tsp40, Budget(6, 4, 2), seed=2), solver.solve(tsp40, Budget(6, 4, 2), seed=2)
    assert a.cost == b.cost and task.key(a.sol) == task.key(b.sol)
    by_width = [solver.solve(tsp40, Budget(depth=10, rounds=0, width=w), seed=1).cost for w in (1, 2, 4)]
    assert all(y <= x for x, y in zip(by_width, by_width[1:]))
    # T -> 0 is the top-ranked edit; a large T spreads the commits (other trajectories than argmax)
    cold = PaceSolver(task, _ByLength(), temperature=1e-9).solve(tsp40, Budget(10, 3, 1), seed=0)
    arg = PaceSolver(task, _ByLength()).solve(tsp40, Budget(10, 3, 1), seed=0)
    assert task.key(cold.sol) == task.key(arg.sol)
    with pytest.raises(ValueError, match="temperature"):
        PaceSolver(task, _ByLength(), temperature=-1.0)


class _ByLength:
    """A hand ranker: shorter joins first (scores in units of the mean nearest-neighbour distance)."""

    def scores(self, f, rng=None):
        return -f.edit_attr[:, 0].astype(np.float64)
