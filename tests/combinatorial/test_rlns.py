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
