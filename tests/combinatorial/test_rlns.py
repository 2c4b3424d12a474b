"""RLNS as an exact block Gibbs sampler: transition matrices, stationarity, irreducibility,
empirical distributions and marginals against exact references."""

import itertools

import numpy as np
import pytest
import torch

from neurips26.combinatorial import (RLNS, Entropic, GeneralizedAssignment, Greedy, KSubset, Perturbed, RandomBlock,
                                     empirical_distribution, gibbs, is_irreducible, ksubset_log_partition,
                                     ksubset_marginals, tv_distance)


def gap_instance():
    """A 3-agent, 5-job generalized assignment (the issue's 5×3), loose enough to connect."""
    w = np.array([[3, 4, 2, 5, 3], [4, 2, 3, 3, 4], [2, 5, 4, 2, 3]], dtype=float)
    return GeneralizedAssignment(w, [8, 8, 8])


def brute_force_transition(states, feasible, theta, units, size, T=1.0):
    """P from the definition, independently of the library's candidate generation: pick a
    block of units uniformly; move to any feasible state equal outside the block's
    variables, with probability ∝ exp(θᵀy'/T)."""
    states = np.asarray(states)
    blocks = list(itertools.combinations(range(len(units)), size))
    P = np.zeros((len(states), len(states)))
    for i, y in enumerate(states):
        for block in blocks:
            free = np.zeros(states.shape[1], dtype=bool)
            for u in block:
                free[units[u]] = True
            same = np.all(states[:, ~free] == y[~free], axis=1) & feasible
            w = np.exp(states[same] @ theta / T)
            P[i, np.nonzero(same)[0]] += w / w.sum() / len(blocks)
    return P


@pytest.mark.parametrize("size", [2, 3])
def test_k_subset_chain_is_exact_block_gibbs(size):
    prob = KSubset(10, 3)
    theta = np.random.default_rng(0).normal(size=10) * 1.5
    states = prob.enumerate()
    assert len(states) == 120
    P = RLNS(prob, RandomBlock(size), Entropic(1.0)).transition_matrix(states, theta)
    ref = brute_force_transition(states, np.ones(120, bool), theta, [[i] for i in range(10)], size)
    assert np.abs(P - ref).max() < 1e-12
    assert is_irreducible(P)
    pi = gibbs(states, theta)
    assert np.abs(pi @ P - pi).max() < 1e-12
    assert np.abs(P.sum(axis=1) - 1).max() < 1e-12


def test_generalized_assignment_chain_is_exact_block_gibbs():
    prob = gap_instance()
    theta = np.random.default_rng(1).normal(size=prob.n_vars)
    states = prob.enumerate()
    assert np.all(prob.is_feasible(states))
    P = RLNS(prob, RandomBlock(2), Entropic(0.7)).transition_matrix(states, theta)
    units = [list(range(j * 3, j * 3 + 3)) for j in range(5)]
    ref = brute_force_transition(states, np.ones(len(states), bool), theta, units, 2, T=0.7)
    assert np.abs(P - ref).max() < 1e-12
    assert is_irreducible(P)  # checked before trusting stationarity
    pi = gibbs(states, theta, 0.7)
    assert np.abs(pi @ P - pi).max() < 1e-12


def test_disconnected_move_graphs_are_detected():
    # k-subset with one free position cannot move at all (the count is kept)
    prob = KSubset(6, 2)
    P = RLNS(prob, RandomBlock(1), Entropic()).transition_matrix(prob.enumerate(), np.zeros(6))
    assert not is_irreducible(P)
    # a tight GAP: every agent is full, single-job moves are all infeasible; pairs can swap
    tight = GeneralizedAssignment(np.full((2, 4), 2.0), [4, 4])
    states = tight.enumerate()
    assert not is_irreducible(RLNS(tight, RandomBlock(1), Entropic()).transition_matrix(states, np.zeros(8)))
    assert is_irreducible(RLNS(tight, RandomBlock(2), Entropic()).transition_matrix(states, np.zeros(8)))


def sample_many(sampler, theta, chains, burn, snapshots, spacing, seed=0):
    rng = np.random.default_rng(seed)
    Y = sampler.problem.random_feasible(rng, chains)
    Y = sampler.run(Y, theta, burn, rng)
    kept = sampler.run(Y, theta, snapshots * spacing, rng, every=spacing)
    return np.concatenate(kept)


@pytest.mark.parametrize("name", ["k-subset", "gap"])
def test_empirical_distribution_after_2e5_samples_is_within_tv_002(name):
    prob = KSubset(10, 3) if name == "k-subset" else gap_instance()
    theta = np.random.default_rng(2).normal(size=prob.n_vars)
    sampler = RLNS(prob, RandomBlock(3 if name == "k-subset" else 2), Entropic(1.0))
    samples = sample_many(sampler, theta, chains=2000, burn=60, snapshots=100, spacing=3)
    assert len(samples) == 200_000
    states = prob.enumerate()
    tv = tv_distance(empirical_distribution(samples, states), gibbs(states, theta))
    assert tv < 0.02
    # and the check can fail: the distribution of another θ is far
    assert tv_distance(empirical_distribution(samples, states), gibbs(states, -theta)) > 0.2


def test_k_subset_marginals_at_n100_k10_match_the_exact_ones():
    prob = KSubset(100, 10)
    theta = np.random.default_rng(3).normal(size=100)
    sampler = RLNS(prob, RandomBlock(4), Entropic(1.0))
    samples = sample_many(sampler, theta, chains=1000, burn=500, snapshots=60, spacing=10)
    exact = ksubset_marginals(theta, 10)
    assert abs(exact.sum() - 10) < 1e-9
    assert np.abs(samples.mean(axis=0) - exact).max() < 0.01


def test_ksubset_log_partition_and_marginals_against_enumeration():
    prob = KSubset(8, 3)
    states = prob.enumerate().astype(float)
    theta = np.random.default_rng(4).normal(size=8) * 20  # large scale: the log-space recursion must stay stable
    for T in (1.0, 3.0):
        ref = np.log(np.exp((states @ theta - (states @ theta).max()) / T).sum()) + (states @ theta).max() / T
        assert float(ksubset_log_partition(torch.tensor(theta), 3, T)) == pytest.approx(ref, abs=1e-9)
        assert np.allclose(ksubset_marginals(theta, 3, T), gibbs(states, theta, T) @ states, atol=1e-10)


def test_greedy_and_zero_noise_perturbation_find_the_top_k():
    prob = KSubset(12, 4)
    theta = np.random.default_rng(5).normal(size=12)
    best = np.zeros(12, dtype=np.int8)
    best[np.argsort(-theta)[:4]] = 1
    rng = np.random.default_rng(0)
    for reg in (Greedy(), Perturbed(scale=0.0)):
        Y = RLNS(prob, RandomBlock(2), reg).run(prob.random_feasible(rng, 50), theta, 1500, rng)
        assert np.all(Y == best)
    # with noise the perturbed chain keeps moving, and more noise spreads it further from the optimum
    at_best = []
    for scale in (0.3, 3.0):
        Y = RLNS(prob, RandomBlock(2), Perturbed(scale=scale)).run(prob.random_feasible(rng, 200), theta, 300, rng)
        assert np.all(prob.is_feasible(Y))
        at_best.append(np.mean(np.all(Y == best, axis=1)))
    assert 0 < at_best[0] < 1 and at_best[1] < at_best[0]


def test_bad_input_is_refused_clearly():
    prob = KSubset(5, 2)
    sampler = RLNS(prob, RandomBlock(2))
    good = prob.random_feasible(np.random.default_rng(0), 3)
    with pytest.raises(ValueError, match="theta must have shape"):
        sampler.run(good, np.zeros(4), 1)
    with pytest.raises(ValueError, match="NaN"):
        sampler.run(good, np.array([0, np.nan, 0, 0, 0]), 1)
    with pytest.raises(ValueError, match="feasible"):
        sampler.run(np.ones((3, 5), dtype=np.int8), np.zeros(5), 1)
    with pytest.raises(ValueError, match="exceeds"):
        RLNS(prob, RandomBlock(6)).run(good, np.zeros(5), 1)
    with pytest.raises(ValueError, match="max_candidates"):
        RLNS(KSubset(40, 5), RandomBlock(13)).run(KSubset(40, 5).random_feasible(np.random.default_rng(0), 1),
                                                 np.zeros(40), 1)
    with pytest.raises(ValueError, match="0 < k < n"):
        KSubset(3, 3)
    with pytest.raises(ValueError, match="temperature"):
        Entropic(0.0)


@pytest.mark.parametrize("name", ["k-subset", "gap"])
def test_milp_local_solver_finds_the_brute_force_block_optimum(name):
    from neurips26.combinatorial import BruteForceLocalSolver, MILPLocalSolver

    prob = KSubset(12, 4) if name == "k-subset" else gap_instance()
    rng = np.random.default_rng(7)
    Y = prob.random_feasible(rng, 30)
    S = RandomBlock(3).sample(prob, 30, rng)
    theta = rng.normal(size=(30, prob.n_vars))
    brute = BruteForceLocalSolver().argmax(prob, Y, S, theta)
    milp = MILPLocalSolver().argmax(prob, Y, S, theta)
    assert np.all(prob.is_feasible(milp))
    # the same optimal value (ties may pick different optima)
    assert np.allclose((brute * theta).sum(1), (milp * theta).sum(1), atol=1e-9)
    # outside the block nothing moved
    outside = np.ones_like(Y, dtype=bool)
    for b in range(30):
        for u in S[b]:
            outside[b, (u * prob.m + np.arange(prob.m)) if name == "gap" else u] = False
    assert np.array_equal(milp[outside], Y[outside])


def test_milp_local_solver_handles_blocks_too_large_to_enumerate():
    from neurips26.combinatorial import MILPLocalSolver

    rng = np.random.default_rng(8)
    w = rng.integers(1, 30, size=(6, 20)).astype(float)
    prob = GeneralizedAssignment(w, 0.9 * w.sum(1) / 6 + 30)
    Y = prob.random_feasible(rng, 2)
    theta = -rng.uniform(1, 10, size=prob.n_vars)
    with pytest.raises(ValueError, match="max_candidates"):
        RLNS(prob, RandomBlock(8), Greedy()).run(Y, theta, 1, rng)
    sampler = RLNS(prob, RandomBlock(8), Perturbed(0.5), local_solver=MILPLocalSolver())
    Y2 = sampler.run(Y, theta, 5, rng)
    assert np.all(prob.is_feasible(Y2))
    with pytest.raises(TypeError, match="Entropic"):
        RLNS(prob, RandomBlock(8), Entropic(), local_solver=MILPLocalSolver()).run(Y, theta, 1, rng)


def tiny_schedule():
    from neurips26.combinatorial import VehicleScheduling

    # tasks 0..4; task arcs only forward in time, a few of them
    task_arcs = [(0, 1), (0, 2), (1, 3), (2, 3), (2, 4), (3, 4), (1, 4)]
    arcs = [(-1, t) for t in range(5)] + [(t, -2) for t in range(5)] + task_arcs
    return VehicleScheduling(5, arcs)


def path_covers(prob):
    Y = ((np.arange(2 ** prob.n_vars)[:, None] >> np.arange(prob.n_vars)) & 1).astype(np.int8)
    return Y[prob.is_feasible(Y)]


def test_vehicle_scheduling_block_moves_are_exact_and_feasible():
    from neurips26.combinatorial import MILPLocalSolver, VehicleScheduling

    prob = tiny_schedule()
    covers = path_covers(prob)
    rng = np.random.default_rng(9)
    theta = rng.normal(size=prob.n_vars)
    best = (covers @ theta).max()
    # freeing every task is the global problem: the block MILP finds the enumerated optimum
    Y0 = prob.random_feasible(rng, 1)
    full = MILPLocalSolver().argmax(prob, Y0, np.arange(5)[None], theta)
    assert prob.is_feasible(full)[0] and abs(float(full[0] @ theta) - best) < 1e-9
    # a 2-task block re-optimized from many states: feasible, never worse, and equal to
    # the best cover that agrees with the state outside the freed arcs
    Y = covers[rng.integers(0, len(covers), 40)]
    S = RandomBlock(2).sample(prob, 40, rng)
    moved = MILPLocalSolver().argmax(prob, Y, S, theta)
    assert np.all(prob.is_feasible(moved))
    for b in range(40):
        free, _ = prob.block_milp(Y[b], S[b])
        fixed = np.setdiff1d(np.arange(prob.n_vars), free)
        same = np.all(covers[:, fixed] == Y[b, fixed], axis=1)
        assert abs(float(moved[b] @ theta) - (covers[same] @ theta).max()) < 1e-9
    with pytest.raises(TypeError, match="MILPLocalSolver"):
        RLNS(prob, RandomBlock(2), Entropic()).run(Y0, theta, 1)
    with pytest.raises(ValueError, match="source arc"):
        VehicleScheduling(2, [(-1, 0), (0, -2), (1, -2)])


def test_incompatible_components_are_refused_at_construction():
    from neurips26.combinatorial import BruteForceLocalSolver, IncompatibleComponentsError, MILPLocalSolver

    prob = gap_instance()
    # entropic sampling needs the enumerated completions; the MILP solver gives only the optimum
    with pytest.raises(ValueError, match="Entropic samples among the block's enumerated completions"):
        RLNS(prob, RandomBlock(2), Entropic(), local_solver=MILPLocalSolver())
    assert issubclass(IncompatibleComponentsError, ValueError)
    RLNS(prob, RandomBlock(2), Perturbed(1.0), local_solver=MILPLocalSolver())  # argmax regularizers are fine
    RLNS(prob, RandomBlock(2), Greedy(), local_solver=MILPLocalSolver())
    # a problem without enumerable completions needs the MILP solver, whatever the regularizer
    with pytest.raises(ValueError, match="MILPLocalSolver"):
        RLNS(tiny_schedule(), RandomBlock(2), Greedy())
    # blocks that do not fit the problem or the enumeration budget
    with pytest.raises(ValueError, match="exceeds the problem's 5 units"):
        RLNS(prob, RandomBlock(6))
    with pytest.raises(ValueError, match="max_candidates=10"):
        RLNS(prob, RandomBlock(3), local_solver=BruteForceLocalSolver(max_candidates=10))
    with pytest.raises(TypeError, match="regularizer"):
        RLNS(prob, RandomBlock(2), regularizer="entropic")


def test_run_takes_a_numpy_generator_as_rng_and_an_int_as_seed():
    prob = KSubset(8, 3)
    sampler = RLNS(prob, RandomBlock(2), Entropic())
    theta = np.random.default_rng(0).normal(size=8)
    Y0 = prob.random_feasible(np.random.default_rng(1), 4)
    by_seed = sampler.run(Y0, theta, 10, seed=5)
    assert np.array_equal(by_seed, sampler.run(Y0, theta, 10, np.random.default_rng(5)))
    assert np.array_equal(sampler.run(Y0, theta, 10), sampler.run(Y0, theta, 10, seed=0))
    with pytest.raises(TypeError, match="seed="):
        sampler.run(Y0, theta, 10, 5)


@pytest.mark.parametrize("name", ["k-subset", "gap", "gap-tight"])
def test_global_milp_optimum_equals_brute_force_enumeration(name):
    from neurips26.combinatorial import solve_binary_milp

    if name == "k-subset":
        prob = KSubset(9, 4)
    elif name == "gap":
        prob = gap_instance()
    else:  # capacities that bind: most assignments are infeasible
        w = np.random.default_rng(11).integers(1, 10, size=(3, 6)).astype(float)
        prob = GeneralizedAssignment(w, np.floor(w.sum(1) / 2.5))
    states = prob.enumerate()
    if name == "gap-tight":
        assert 0 < len(states) < 3**6 / 2
    rng = np.random.default_rng(12)
    for _ in range(10):
        theta = rng.normal(size=prob.n_vars)
        y = solve_binary_milp(-theta, prob.milp())
        assert y.dtype == np.int8 and prob.is_feasible(y[None])[0]
        assert abs(float(y @ theta) - float((states @ theta).max())) < 1e-9


def test_solve_binary_milp_refuses_bad_input_and_reports_infeasibility():
    from neurips26.combinatorial import solve_binary_milp

    prob = KSubset(5, 2)
    with pytest.raises(ValueError, match="finite vector"):
        solve_binary_milp(np.array([0.0, np.nan, 0, 0, 0]), prob.milp())
    with pytest.raises(ValueError, match="5 columns"):
        solve_binary_milp(np.zeros(5), [(np.ones((1, 4)), 2, 2)])
    with pytest.raises(RuntimeError, match="no feasible solution"):
        solve_binary_milp(np.zeros(5), [(np.ones((1, 5)), 6, 6)])  # six ones among five binaries
