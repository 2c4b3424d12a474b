"""LSBO: the VAE learns to reconstruct, the codec round-trips and reports invalid decodes,
the loop spends exactly its budget, improves on its start, and survives an objective that
fails on some objects; the robot task's fitness matches a hand computation."""

import math

import numpy as np
import pytest
import torch

pytest.importorskip("botorch")
from neurips26.bayesopt.design_tasks import (ARM_MAX_TOKENS, ARM_VOCAB, arm_fitness, arm_from_tokens,  # noqa: E402
                                             arm_tokens, random_arms)
from neurips26.bayesopt.lsbo import LatentSpaceBO  # noqa: E402
from neurips26.bayesopt.vae import SequenceVAE, TokenCodec, load_vae, save_vae, train_vae  # noqa: E402


@pytest.fixture(scope="module")
def arm_codec():
    torch.manual_seed(0)
    designs = random_arms(600, np.random.default_rng(0))
    codec = TokenCodec(ARM_VOCAB, ARM_MAX_TOKENS + 1, arm_tokens, arm_from_tokens,
                       vae=SequenceVAE(len(ARM_VOCAB) + 3, latent_dim=4, embed_dim=16, hidden=48))
    losses = train_vae(codec.vae, codec.tensorize(designs), epochs=25, batch_size=64, lr=3e-3, beta=0.05)
    return codec, designs, losses


def test_vae_training_reduces_the_loss_and_reconstructs(arm_codec):
    codec, designs, losses = arm_codec
    assert losses[-1] < 0.6 * losses[0]
    m, v = codec.encode(designs[:50])
    assert m.shape == v.shape == (50, 4) and torch.all(v > 0)
    decoded = codec.decode(m)
    tokens_right = np.mean([sum(a == b for a, b in zip(arm_tokens(d), arm_tokens(r))) / len(arm_tokens(d))
                            for d, r in zip(designs[:50], decoded) if r is not None])
    assert tokens_right > 0.3  # well above chance (1/36) after a short training


def test_codec_refuses_bad_objects_and_marks_invalid_decodes():
    codec = TokenCodec(ARM_VOCAB, ARM_MAX_TOKENS + 1, arm_tokens, arm_from_tokens)
    with pytest.raises(ValueError, match="not a sequence"):
        codec.tensorize(["L9x"])
    with pytest.raises(ValueError, match="at most"):
        codec.tensorize(["L10" * 9])
    assert arm_from_tokens(["L10"]) is None  # one segment is not a design
    out = TokenCodec(["a", "b"], 4, list, lambda t: None).decode(torch.zeros(3, 16))
    assert out == [None, None, None]


def test_save_and_load_give_the_same_encoder(arm_codec, tmp_path):
    codec, designs, _ = arm_codec
    save_vae(codec, tmp_path / "vae.pt", {"task": "robot"})
    loaded, meta = load_vae(tmp_path / "vae.pt", arm_tokens, arm_from_tokens)
    assert meta == {"task": "robot"} and not list(tmp_path.glob(".vae.pt.*"))
    assert torch.equal(codec.encode(designs[:5])[0], loaded.encode(designs[:5])[0])


def test_arm_fitness_by_hand():
    # two links of 0.5 along x then a 90° left turn: joints (0,0) → (0.5,0) → (0.5,0.5)
    design = "L24L28"
    tip = np.array([0.5, 0.5])
    # obstacle (0.9, 0.7), r = 0.35: no collision for these links (nearest points (0.5, 0) and (0.5, 0.5))
    expected = -np.linalg.norm(tip - np.array([1.2, 1.6])) - 0.05 * 1.0 - 0.02 * 2
    assert math.isclose(arm_fitness(design), expected, rel_tol=1e-12)
    # one link of 1.0 straight at 45° up-right ends at (0.707, 0.707), 0.21 from the obstacle's centre
    hit = "L46L24"  # L46: length 1.0 at 6·22.5 − 90 = 45°; L24: 0.5 straight on, through the obstacle
    u = np.array([np.cos(np.radians(45.0)), np.sin(np.radians(45.0))])
    joints = np.array([[0.0, 0.0], u, 1.5 * u])
    def dist(p, a, b):
        t = np.clip(np.dot(p - a, b - a) / np.dot(b - a, b - a), 0, 1)
        return np.linalg.norm(a + t * (b - a) - p)
    pen = sum(max(0.0, 0.35 - dist(np.array([0.9, 0.7]), joints[i], joints[i + 1])) for i in range(2))
    expected = -np.linalg.norm(joints[-1] - np.array([1.2, 1.6])) - 2 * pen - 0.05 * 1.5 - 0.02 * 2
    assert pen > 0.1 and math.isclose(arm_fitness(hit), expected, rel_tol=1e-12)


@pytest.mark.parametrize("kernel,sampler", [("marginalized", "geometry"), ("rbf", "turbo"),
                                            ("expected-rbf", "isotropic")])
def test_loop_spends_its_budget_and_improves(arm_codec, kernel, sampler):
    codec, designs, _ = arm_codec
    calls = []

    def objective(design):
        calls.append(design)
        if design.startswith("L4"):
            raise RuntimeError("simulator failure")  # must be counted, not fatal
        return arm_fitness(design)

    init = designs[:20]
    bo = LatentSpaceBO(codec, objective, kernel=kernel, sampler=sampler, batch_size=5, n_candidates=64, seed=0,
                       finetune_every=2, finetune_epochs=1)
    res = bo.run(init, budget=15)
    assert len(calls) == 20 + 15  # exactly the budget, no object evaluated twice
    assert res.n_evaluations == 15
    assert len(set(calls)) == len(calls)
    assert res.n_proposed >= 15 and len(res.scores) == len(res.objects) <= 35
    start = max(arm_fitness(d) for d in init if not d.startswith("L4"))
    assert res.best[1] >= start and res.best_curve == sorted(res.best_curve)


def test_a_run_that_decodes_nothing_new_stops_and_says_how_much_it_spent(arm_codec):
    codec, designs, _ = arm_codec
    init = designs[:20]

    class Stuck:  # a codec whose every decode is an object already evaluated
        latent_dim = codec.latent_dim

        def encode(self, objects):
            return codec.encode(objects)

        def decode(self, z):
            return [init[0]] * len(z)

        def fits(self, obj):
            return True

    for moves in (0, 3):
        calls = []
        bo = LatentSpaceBO(Stuck(), lambda d: calls.append(d) or arm_fitness(d), batch_size=5, n_candidates=16,
                           seed=0, finetune_every=0, moves=moves)
        res = bo.run(init, budget=15)
        assert res.n_evaluations == 0 and len(calls) == 20  # stopped: nothing new to evaluate, nothing spent
        # ten stalled rounds of 16 candidates around each of 1 + moves centres, then the stop
        assert res.n_duplicates == (1 + moves) * 10 * 16


def test_an_exhausted_neighbourhood_moves_the_trust_region_to_the_next_best_object(arm_codec):
    """Around the best initial object nothing new decodes; around the others it does: with moves the run
    goes on from the second best and spends its budget, without it stops at once."""
    codec, designs, _ = arm_codec
    init = designs[:20]
    top = max(init, key=arm_fitness)
    m_top = codec.encode([top])[0][0]
    centres = []  # per round: was the trust region centred on the best object?

    class Recording(LatentSpaceBO):
        def _candidates(self, center, center_var, length):
            centres.append(bool(torch.allclose(center, m_top, atol=1e-6)))
            return super()._candidates(center, center_var, length)

    class OneDeadEnd:
        latent_dim = codec.latent_dim

        def __init__(self):
            self.fresh = iter(designs[20:])

        def encode(self, objects):
            return codec.encode(objects)

        def decode(self, z):
            return [top] * len(z) if centres[-1] else [next(self.fresh) for _ in range(len(z))]

        def fits(self, obj):
            return True

    kw = dict(kernel="rbf", sampler="isotropic", batch_size=5, n_candidates=8, seed=0)
    res0 = Recording(OneDeadEnd(), arm_fitness, moves=0, **kw).run(init, budget=10)
    assert res0.n_evaluations == 0 and centres == [True] * 10
    centres.clear()
    res = Recording(OneDeadEnd(), arm_fitness, moves=1, **kw).run(init, budget=10)
    assert res.n_evaluations == 10 and centres[:10] == [True] * 10 and not any(centres[10:])
    with pytest.raises(ValueError, match="moves"):
        LatentSpaceBO(OneDeadEnd(), arm_fitness, moves=-1)
