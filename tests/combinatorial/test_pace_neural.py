"""The rl4co neural baselines (POMO on TSP and CVRP, MatNet on ATSP) behind PACE's solve face.

rl4co is the optional extra ``neural-co``, not installed by ``make test``: the tests that need it skip
without it; the error that names the extra is tested everywhere."""

import builtins
import itertools
import sys

import numpy as np
import pytest

from neurips26.combinatorial.pace import tmat_atsp, uniform_cvrp, uniform_tsp
from neurips26.combinatorial.pace.neural import NeuralConstruction, neural_available, pretrained_neural

needs_rl4co = pytest.mark.skipif(not neural_available(), reason="the neural-co extra (rl4co) is not installed")


def test_missing_extra_is_named(monkeypatch):
    real_import = builtins.__import__

    def no_rl4co(name, *args, **kwargs):
        if name == "rl4co" or name.startswith("rl4co."):
            raise ImportError("No module named 'rl4co'")
        return real_import(name, *args, **kwargs)

    for mod in [m for m in sys.modules if m == "rl4co" or m.startswith("rl4co.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setattr(builtins, "__import__", no_rl4co)
    assert not neural_available()
    with pytest.raises(ImportError, match="neural-co"):
        NeuralConstruction("tsp", 10)


@pytest.mark.parametrize("kw, match", [(dict(problem="mis"), "problem"), (dict(num_loc=2), "num_loc"),
                                       (dict(lr=0.0), "lr"), (dict(seed=-1), "seed")])
def test_bad_arguments(kw, match):
    args = dict(problem="tsp", num_loc=10) | kw
    with pytest.raises(ValueError, match=match):
        NeuralConstruction(**args)


def _brute_force_tsp(D: np.ndarray) -> float:
    n = len(D)
    best = np.inf
    for perm in itertools.permutations(range(1, n)):
        tour = (0, *perm)
        best = min(best, sum(D[tour[i], tour[(i + 1) % n]] for i in range(n)))
    return best


@needs_rl4co
def test_tsp_tour_is_a_permutation_costed_as_rl4co_does_and_no_shorter_than_the_optimum():
    rng = np.random.default_rng(3)
    solver = NeuralConstruction("tsp", 10, seed=0)
    rec = solver.train(2, batch_size=8)
    assert len(rec["losses"]) == 2 and all(np.isfinite(rec["losses"])) and rec["lengths"][0] > 0
    for _ in range(3):
        coords = uniform_tsp(8, rng)
        sol = solver.solve(coords)
        assert sol.feasible and sorted(sol.sol.tolist()) == list(range(8))
        D = np.sqrt(((coords[:, None] - coords[None]) ** 2).sum(-1))
        by_hand = sum(D[sol.sol[i], sol.sol[(i + 1) % 8]] for i in range(8))
        assert sol.cost == pytest.approx(by_hand, rel=1e-12)
        # rl4co's own reward (float32) of the kept rollout is the same tour's length
        assert sol.stats["model_length"] == pytest.approx(sol.cost, rel=1e-5)
        assert sol.cost >= _brute_force_tsp(D) - 1e-12
        assert sol.stats["rollouts"] == 8 * 8  # every start node x 8 dihedral transforms


@needs_rl4co
def test_cvrp_routes_are_feasible_for_pyvrp_and_costed_as_rl4co_does():
    pyvrp = pytest.importorskip("pyvrp")
    from neurips26.combinatorial.pace.baselines import pyvrp_model

    rng = np.random.default_rng(5)
    solver = NeuralConstruction("cvrp", 10, seed=0)
    solver.train(1, batch_size=4)
    inst = uniform_cvrp(20, rng)
    sol = solver.solve(inst)
    assert sol.feasible
    assert sorted(np.concatenate(sol.sol).tolist()) == list(range(1, 21))
    assert sol.stats["model_length"] == pytest.approx(sol.cost, rel=1e-5)
    # PyVRP's own checker (its clients are numbered 0..n-1) and its distance on the x1e4 integer matrix
    checked = pyvrp.Solution(pyvrp_model(inst, 1e4).data(), [[int(c) - 1 for c in r] for r in sol.sol])
    assert checked.is_feasible() and checked.is_complete()
    assert checked.distance() / 1e4 == pytest.approx(sol.cost, abs=len(sol.sol) * 21 * 1e-4)


@needs_rl4co
def test_atsp_tour_follows_the_direction_rl4co_costs():
    rng = np.random.default_rng(7)
    solver = NeuralConstruction("atsp", 10, seed=0)
    inst = tmat_atsp(10, rng)
    sol = solver.solve(inst)
    assert sol.feasible and sol.sol[0] == 0 and sorted(sol.sol.tolist()) == list(range(10))
    t = sol.sol
    directed = sum(inst.D[t[i], t[(i + 1) % 10]] for i in range(10))
    assert sol.cost == pytest.approx(directed, rel=1e-12)
    assert sol.stats["model_length"] == pytest.approx(sol.cost, rel=1e-5)
    assert sol.stats["rollouts"] == 10  # MatNet: every start node, no augmentation
    # MatNet's column embeddings are random one-hots: seeded per solve, so the same seed gives the same tour
    assert np.array_equal(solver.solve(inst, seed=3).sol, solver.solve(inst, seed=3).sol)
    # a size other than the training size (the decoder takes it from an environment of that size)
    big = tmat_atsp(14, rng)
    other = solver.solve(big)
    assert other.feasible and sorted(other.sol.tolist()) == list(range(14))
    assert other.stats["model_length"] == pytest.approx(other.cost, rel=1e-5)


@needs_rl4co
def test_training_is_seeded_and_the_cache_round_trips(tmp_path, monkeypatch):
    monkeypatch.setenv("NEURIPS26_CACHE", str(tmp_path))
    a, meta_a = pretrained_neural("tsp", 10, steps=2, batch_size=4, seed=1)
    b = NeuralConstruction("tsp", 10, seed=1)
    rec_b = b.train(2, batch_size=4)
    assert meta_a["losses"] == rec_b["losses"]
    for (k, x), (_, y) in zip(a.policy.state_dict().items(), b.policy.state_dict().items()):
        assert (x == y).all(), k
    assert [p.name for p in tmp_path.iterdir()] == ["pace-neural-tsp-n10-s2-b4-seed1-clip.pt"]  # no temporary left
    c, meta_c = pretrained_neural("tsp", 10, steps=2, batch_size=4, seed=1)  # from the cache: no training
    assert meta_c == meta_a
    coords = uniform_tsp(9, np.random.default_rng(0))
    assert c.solve(coords).cost == a.solve(coords).cost
    with pytest.raises(ValueError, match="steps"):
        pretrained_neural("tsp", 10, steps=0)


@needs_rl4co
def test_policy_kwargs_reach_the_policy_and_typos_are_refused(tmp_path, monkeypatch):
    # MatNet takes them as policy_params: a smaller embedding must give a smaller model
    small = NeuralConstruction("atsp", 10, embed_dim=128)
    default = NeuralConstruction("atsp", 10)
    n_params = lambda s: sum(p.numel() for p in s.policy.parameters())  # noqa: E731
    assert n_params(small) < n_params(default)
    pomo = NeuralConstruction("tsp", 10, num_encoder_layers=2)
    assert n_params(pomo) < n_params(NeuralConstruction("tsp", 10))
    with pytest.raises(ValueError, match="embed_dm"):
        NeuralConstruction("tsp", 10, embed_dm=64)
    # MatNet's one-hot node embedding holds at most embed_dim nodes
    with pytest.raises(ValueError, match="embed_dim = 128"):
        small.solve(tmat_atsp(129, np.random.default_rng(0)))
    # load-only: no cached policy of this recipe is an error, not a silent training
    monkeypatch.setenv("NEURIPS26_CACHE", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="no cached tsp policy"):
        pretrained_neural("tsp", 10, steps=1, batch_size=2, train=False)
    assert not list(tmp_path.iterdir())
