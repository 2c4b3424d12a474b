import math

import numpy as np
import pytest
import torch

from neurips26.distributed import (
    AsynchronousServer, RennalaServer, SynchronousServer, equilibrium_time, replay, simulate, simulate_rennala,
    worker_rngs,
)
from neurips26.optim import L2, Linf, get_norm

TARGET = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)


def noisy_grad(x, worker, rng):
    return (x - TARGET) + torch.as_tensor(rng.standard_normal(3))


def minibatch_nsgd(x0, batch, steps, lr, norm, seed, n_workers):
    """Synchronous minibatch NSGD written out directly: batch gradients per step, dealt
    round-robin to the workers, each drawing from its own generator."""
    rngs = [worker_rngs(seed, w)[0] for w in range(n_workers)]
    x, out = x0.clone(), []
    for _ in range(steps):
        g = sum(noisy_grad(x, i % n_workers, rngs[i % n_workers]) for i in range(batch)) / batch
        x = x.add(norm.lmo(g), alpha=-lr)  # one rounding, as torch.optim's steps
        out.append(x.clone())
    return out


@pytest.mark.parametrize("norm", ["l2", "linf"])
def test_equal_speeds_equal_synchronous_minibatch_nsgd(norm):
    x0 = torch.zeros(3, dtype=torch.float64)
    res = simulate_rennala(noisy_grad, x0, lambda w, rng: 1.0, n_workers=4, batch_size=4, steps=20, lr=0.1,
                           norm=norm, seed=3)
    ref = minibatch_nsgd(x0, 4, 20, 0.1, get_norm(norm), seed=3, n_workers=4)
    for a, b in zip(res.points, ref):
        assert torch.equal(a, b)
    np.testing.assert_allclose(res.times, np.arange(1, 21), atol=1e-12)
    assert res.discarded == 0


def test_one_worker_is_minibatch_nsgd():
    x0 = torch.zeros(3, dtype=torch.float64)
    res = simulate_rennala(noisy_grad, x0, lambda w, rng: 0.5, n_workers=1, batch_size=3, steps=10, lr=0.05, seed=1)
    for a, b in zip(res.points, minibatch_nsgd(x0, 3, 10, 0.05, L2(), seed=1, n_workers=1)):
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
    with pytest.raises(ValueError, match="1-D"):
        RennalaServer(torch.zeros(2, 2), batch_size=1, lr=0.1)
    with pytest.raises(ValueError, match="lr"):
        RennalaServer(torch.zeros(2), batch_size=1, lr=float("nan"))
    with pytest.raises(FloatingPointError, match="non-finite"):
        RennalaServer(torch.zeros(2), batch_size=1, lr=0.1).submit(torch.tensor([1.0, float("nan")]), 0)
    with pytest.raises(ValueError, match="compute_time"):
        simulate_rennala(noisy_grad, torch.zeros(3, dtype=torch.float64), lambda w, rng: 0.0, 2, 1, 3, 0.1)


def test_synchronous_server_waits_for_the_slowest_worker():
    taus = [1.0, 2.0, 5.0]
    x0 = torch.zeros(3, dtype=torch.float64)
    res = simulate(SynchronousServer(x0, 3, lr=0.1, norm="l2"), noisy_grad, lambda w, rng: taus[w], 3, steps=6, seed=2)
    np.testing.assert_allclose(res.times, 5.0 * np.arange(1, 7))
    for a, b in zip(res.points, minibatch_nsgd(x0, 3, 6, 0.1, L2(), seed=2, n_workers=3)):
        torch.testing.assert_close(a, b, rtol=1e-14, atol=1e-14)
    # Random times: each step lasts the maximum of the three workers' draws.
    rng_times = lambda w, rng: float(rng.exponential(taus[w])) + 1e-3
    res = simulate(SynchronousServer(x0, 3, lr=0.1), noisy_grad, rng_times, 3, steps=5, seed=4)
    draws = [[rng_times(w, worker_rngs(4, w)[1]) for _ in range(1)] for w in range(3)]
    assert res.times[0] == pytest.approx(max(d[0] for d in draws))
    server = SynchronousServer(x0, 2, lr=0.1)
    assert not server.submit(torch.ones(3, dtype=torch.float64), 0, worker=0)
    assert server.drop(1)  # the dead worker is no longer waited for
    assert server.k == 1


def test_asynchronous_server_applies_every_gradient_at_arrival():
    taus = [1.0, 3.0]
    x0 = torch.zeros(3, dtype=torch.float64)
    res = simulate(AsynchronousServer(x0, lr=0.05), noisy_grad, lambda w, rng: taus[w], 2, steps=8, seed=0)
    # Arrivals: worker 0 at t = 1, 2, 3, 3 (tie: 0 first, then 1), ...
    assert res.arrivals[:5] == [(0, 0), (0, 1), (0, 2), (1, 0), (0, 4)]
    np.testing.assert_allclose(res.times[:5], [1, 2, 3, 3, 4])
    # The direct recurrence: x ← x − lr·g(x_{k_i}) with the stale points kept.
    rngs = [worker_rngs(0, w)[0] for w in range(2)]
    xs, pts = [x0], []
    for w, k in res.arrivals[:8]:
        xs.append(xs[-1] - 0.05 * noisy_grad(xs[k], w, rngs[w]))
    for a, b in zip(res.points, xs[1:]):
        torch.testing.assert_close(a, b, rtol=1e-14, atol=1e-14)
    server = AsynchronousServer(x0, lr=0.1, max_delay=0)
    server.submit(torch.ones(3, dtype=torch.float64), 0)
    assert not server.submit(torch.ones(3, dtype=torch.float64), 0) and server.discarded == 1


@pytest.mark.parametrize("make", [
    lambda x0: RennalaServer(x0, 3, lr=0.05, norm="linf"),
    lambda x0: SynchronousServer(x0, 4, lr=0.05),
    lambda x0: AsynchronousServer(x0, lr=0.05),
], ids=["rennala", "sync", "async"])
def test_replay_of_the_arrival_order_reproduces_the_trajectory(make):
    x0 = torch.zeros(3, dtype=torch.float64)
    times = lambda w, rng: float(rng.gamma(2.0, 1.0 + w))
    res = simulate(make(x0), noisy_grad, times, 4, steps=15, seed=7)
    again = replay(make(x0), noisy_grad, res.arrivals, seed=7)
    assert len(again) == 15
    for a, b in zip(res.points, again):
        assert torch.equal(a, b)
    with pytest.raises(ValueError, match="had not reached"):
        replay(make(x0), noisy_grad, [(0, 3)], seed=7)


def test_server_state_dict_round_trip_and_mismatch():
    server = RennalaServer(torch.zeros(3, dtype=torch.float64), batch_size=1, lr=0.1, norm="linf")
    server.submit(torch.ones(3, dtype=torch.float64), 0)
    state = server.state_dict()
    other = RennalaServer(torch.zeros(3, dtype=torch.float64), batch_size=1, lr=0.1, norm="linf")
    other.load_state_dict(state)
    assert other.k == 1 and torch.equal(other.x, server.x)
    with pytest.raises(ValueError, match="batch_size=1 does not match"):
        RennalaServer(torch.zeros(3, dtype=torch.float64), batch_size=2, lr=0.1, norm="linf").load_state_dict(state)
    with pytest.raises(ValueError, match="norm"):
        RennalaServer(torch.zeros(3, dtype=torch.float64), batch_size=1, lr=0.1, norm="l2").load_state_dict(state)


def test_simulate_until_stops_at_the_first_step_that_satisfies_it():
    # `until` is checked after every step; the run is the prefix of the full run that
    # ends at the first point satisfying it, with times and points of equal length.
    x0 = torch.zeros(3, dtype=torch.float64)
    ct = lambda w, rng: float(w + 1)
    full = simulate(RennalaServer(x0, 4, 0.1, get_norm("l2")), noisy_grad, ct, 5, 60, seed=3)
    dist = [float(torch.linalg.vector_norm(p - TARGET)) for p in full.points]
    target = sorted(dist)[len(dist) // 2]
    first = next(i for i, d in enumerate(dist) if d <= target)
    cut = simulate(RennalaServer(x0, 4, 0.1, get_norm("l2")), noisy_grad, ct, 5, 60, seed=3,
                   until=lambda x: float(torch.linalg.vector_norm(x - TARGET)) <= target)
    assert len(cut.points) == len(cut.times) == first + 1
    assert np.array_equal(cut.times, full.times[: first + 1])
    assert torch.equal(cut.points[-1], full.points[first])
