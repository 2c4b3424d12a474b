import math

import numpy as np
import pytest
import torch

from neurips26.distributed import RennalaServer, equilibrium_time, simulate_rennala
from neurips26.optim import Linf

TARGET = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)


def noisy_grad(x, worker, rng):
    return (x - TARGET) + torch.as_tensor(rng.standard_normal(3))


def minibatch_nsgd(x0, batch, steps, lr, norm, seed):
    """Synchronous minibatch NSGD, drawing gradients in the same order."""
    rng = np.random.default_rng(seed)
    x, out = x0.clone(), []
    for _ in range(steps):
        g = sum(noisy_grad(x, i, rng) for i in range(batch)) / batch
        x = x - lr * norm.lmo(g)
        out.append(x.clone())
    return out


@pytest.mark.parametrize("norm", ["l2", "linf"])
def test_equal_speeds_equal_synchronous_minibatch_nsgd(norm):
    x0 = torch.zeros(3, dtype=torch.float64)
    res = simulate_rennala(noisy_grad, x0, lambda w, rng: 1.0, n_workers=4, batch_size=4, steps=20, lr=0.1,
                           norm=norm, seed=3)
    from neurips26.optim import get_norm

    ref = minibatch_nsgd(x0, 4, 20, 0.1, get_norm(norm), seed=3)
    for a, b in zip(res.points, ref):
        assert torch.equal(a, b)
    np.testing.assert_allclose(res.times, np.arange(1, 21), atol=1e-12)
    assert res.discarded == 0


def test_one_worker_is_minibatch_nsgd():
    x0 = torch.zeros(3, dtype=torch.float64)
    res = simulate_rennala(noisy_grad, x0, lambda w, rng: 0.5, n_workers=1, batch_size=3, steps=10, lr=0.05, seed=1)
    from neurips26.optim import L2

    for a, b in zip(res.points, minibatch_nsgd(x0, 3, 10, 0.05, L2(), seed=1)):
        assert torch.equal(a, b)
    np.testing.assert_allclose(res.times, 1.5 * np.arange(1, 11), atol=1e-12)


def _min_time(taus, B):
    """The least t with Σ_i ⌊t/τ_i⌋ ≥ B: B fresh gradients need full computations."""
    cands = sorted({k * t for t in taus for k in range(1, B + 1)})
    return next(t for t in cands if sum(math.floor(t / s + 1e-12) for s in taus) >= B)


@pytest.mark.parametrize("B", [1, 3, 8])
def test_heterogeneous_step_times_lie_between_the_bounds(B):
    taus = [1.0, 1.7, 2.9, 6.0, 11.0]
    res = simulate_rennala(noisy_grad, torch.zeros(3, dtype=torch.float64), lambda w, rng: taus[w],
                           n_workers=5, batch_size=B, steps=40, lr=0.01, seed=0)
    durations = np.diff(np.concatenate([[0.0], res.times]))
    s = np.cumsum(1 / np.sort(taus))
    upper = float(np.min((B + 2 * np.arange(1, 6)) / s))
    assert durations.min() >= _min_time(taus, B) - 1e-9
    assert durations.max() <= upper + 1e-9
    assert _min_time(taus, B) <= equilibrium_time(taus, B) + 1e-12  # restarts: within t(B)


def test_equilibrium_time_closed_form_and_server_validation():
    # Equal workers: t(B) = min_m (B + m) τ / m, attained at m = n.
    assert equilibrium_time([2.0] * 4, 8) == pytest.approx((8 + 4) * 2.0 / 4)
    with pytest.raises(ValueError, match="> 0"):
        equilibrium_time([1.0, 0.0], 2)
    server = RennalaServer(torch.zeros(2), batch_size=2, lr=0.1, norm=Linf())
    assert not server.submit(torch.ones(2), 0)
    assert server.submit(torch.ones(2), 0)
    torch.testing.assert_close(server.x, torch.full((2,), -0.1))
    assert not server.submit(torch.ones(2), 0) and server.discarded == 1  # stale
    with pytest.raises(ValueError, match="batch_size"):
        RennalaServer(torch.zeros(2), batch_size=0, lr=0.1)
