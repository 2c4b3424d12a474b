"""Muon and the three new quadruple instances: Muon against torch.optim.Muon, the new
parts against the properties their docstrings prove."""

import copy

import numpy as np
import pytest
import torch

from neurips26.linalg import polar
from neurips26.optim import quadruple_aligned, quadruple_muon, quadruple_spectral, quadruple_tracking
from neurips26.optim.quadruple import AlignedMomentum, SpectralSteepest

from test_quadruple import rel_dev


def train_matrices(make_opt, dtype, steps=200, seed=0, shapes=((7, 5), (3, 7))):
    """A bias-free tanh network, so that every parameter is a matrix (Muon's domain)."""
    generator = torch.Generator().manual_seed(seed)
    ws = [torch.nn.Parameter(torch.randn(s, generator=generator, dtype=dtype) * 0.5) for s in shapes]
    X = torch.randn(64, shapes[0][1], generator=generator, dtype=dtype)
    Y = torch.randn(64, shapes[-1][0], generator=generator, dtype=dtype)
    opt = make_opt(ws)
    for k in range(steps):
        idx = slice((k * 8) % 64, (k * 8) % 64 + 8)
        opt.zero_grad()
        h = X[idx]
        for i, w in enumerate(ws):
            h = h @ w.T
            h = torch.tanh(h) if i < len(ws) - 1 else h
        torch.nn.functional.mse_loss(h, Y[idx]).backward()
        opt.step()
    return torch.cat([w.detach().reshape(-1) for w in ws])


MUON_SETTINGS = [dict(lr=0.02), dict(lr=0.01, nesterov=False, weight_decay=0.0),
                 dict(lr=0.02, momentum=0.9, adjust_lr_fn="match_rms_adamw"),
                 dict(lr=0.05, ns_steps=3, weight_decay=0.01)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("kw", MUON_SETTINGS)
def test_muon_matches_torch_optim_muon(kw, dtype):
    ours = train_matrices(lambda p: quadruple_muon(p, **kw), dtype)
    ref = train_matrices(lambda p: torch.optim.Muon(p, **kw), dtype)
    assert rel_dev(ours, ref) <= 1e-6
    other = train_matrices(lambda p: torch.optim.Muon(p, **dict(kw, lr=kw["lr"] * 1.3)), dtype)
    assert rel_dev(ours, other) > 1e-3


def test_muon_refuses_vectors_clearly():
    b = torch.nn.Parameter(torch.zeros(3))
    opt = quadruple_muon([b])
    b.grad = torch.ones(3)
    with pytest.raises(ValueError, match="matrix parameters"):
        opt.step()


def test_spectral_steepest_is_the_dual_norm_scaled_polar_factor():
    generator = torch.Generator().manual_seed(3)
    metric = SpectralSteepest()
    for shape in [(6, 4), (3, 8), (5, 5)]:
        v = torch.randn(shape, generator=generator, dtype=torch.float64)
        u = metric(v, {}, 1)
        nuclear = np.linalg.norm(v.numpy(), "nuc")
        assert np.allclose(u.numpy(), nuclear * polar(v).numpy(), atol=1e-12)
        assert abs(float((u * v).sum()) - nuclear**2) < 1e-9  # <v, u> = ||v||_*^2
        # steepest: no w with ||w||_2 <= ||v||_* does better (random probes on the ball)
        for _ in range(50):
            w = torch.randn(shape, generator=generator, dtype=torch.float64)
            w *= nuclear / torch.linalg.matrix_norm(w, ord=2)
            assert float((w * v).sum()) <= float((u * v).sum()) + 1e-9
    vec = torch.randn(5, generator=generator, dtype=torch.float64)
    assert torch.equal(metric(vec, {}, 1), vec)
    assert torch.equal(metric(torch.zeros(3, 4, dtype=torch.float64), {}, 1), torch.zeros(3, 4, dtype=torch.float64))


def test_aligned_momentum_is_descent_aligned_in_every_state():
    generator = torch.Generator().manual_seed(4)
    for weight, ratio in [(0.9, 1.0), (0.5, 3.0), (1.0, 0.2)]:
        direction = AlignedMomentum(weight, ratio)
        for _ in range(200):
            g = torch.randn(12, generator=generator, dtype=torch.float64)
            m = torch.randn(12, generator=generator, dtype=torch.float64) * float(torch.rand(1, generator=generator) * 10)
            v = direction(g, {"exp_avg": m}, 1)
            gg = float(g @ g)
            assert float(v @ g) >= gg * (1 - 1e-12)
            assert float(v.norm()) <= (1 + weight * ratio) * gg**0.5 * (1 + 1e-12)
        assert torch.equal(direction(torch.zeros(4, dtype=torch.float64), {"exp_avg": torch.ones(4, dtype=torch.float64)}, 1),
                           torch.zeros(4, dtype=torch.float64))
    # momentum agreeing with g is kept (not just g)
    g = torch.tensor([1.0, 0.0], dtype=torch.float64)
    v = AlignedMomentum(0.5, 1.0)(g, {"exp_avg": torch.tensor([0.5, 0.5], dtype=torch.float64)}, 1)
    assert torch.allclose(v, torch.tensor([1.25, 0.25], dtype=torch.float64))


NEW = {"spectral": lambda p: quadruple_spectral(p, lr=0.02), "tracking": lambda p: quadruple_tracking(p, lr=1e-2),
       "aligned": lambda p: quadruple_aligned(p, lr=0.05)}


@pytest.mark.parametrize("name", sorted(NEW))
def test_new_instances_train_and_round_trip_their_state(name):
    from test_quadruple import make_problem

    model, X, y = make_problem(5)
    opt = NEW[name](model.parameters())

    def run(model, opt, steps):
        losses = []
        for _ in range(steps):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(X), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses

    losses = run(model, opt, 40)
    assert losses[-1] < 0.7 * losses[0]
    saved_model, saved_opt = copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict())
    run(model, opt, 10)
    model2, _, _ = make_problem(5)
    model2.load_state_dict(saved_model)
    opt2 = NEW[name](model2.parameters())
    opt2.load_state_dict(saved_opt)
    run(model2, opt2, 10)
    for a, b in zip(model.parameters(), model2.parameters()):
        assert torch.equal(a, b)


def test_bad_settings_of_the_new_parts_are_refused():
    p = [torch.nn.Parameter(torch.zeros(2, 2))]
    with pytest.raises(ValueError, match="gain"):
        quadruple_tracking(p, gain=0.0)
    with pytest.raises(ValueError, match="start"):
        quadruple_tracking(p, start="middle")
    with pytest.raises(ValueError, match="weight"):
        quadruple_aligned(p, weight=-1.0)
    with pytest.raises(ValueError, match="adjust_lr"):
        quadruple_muon(p, adjust_lr_fn="mine")


def test_diagnostics_leave_the_trajectory_alone_and_report_the_extended_state():
    from test_quadruple import train

    from neurips26.optim import quadruple_adam

    # the same trajectory up to rounding (with diagnostics the fused addcdiv is not used)
    assert rel_dev(train(lambda p: quadruple_adam(p, lr=1e-2, track_diagnostics=True), steps=50),
                   train(lambda p: quadruple_adam(p, lr=1e-2), steps=50)) <= 1e-13

    w = torch.nn.Parameter(torch.tensor([[1.0, -2.0], [0.5, 3.0]], dtype=torch.float64))
    opt = quadruple_adam([w], lr=0.1)
    w.grad = torch.ones_like(w)
    opt.step()
    with pytest.raises(RuntimeError, match="track_diagnostics"):
        opt.diagnostics()
    opt = quadruple_adam([w], lr=0.1, track_diagnostics=True)
    with pytest.raises(RuntimeError, match="no step"):
        opt.diagnostics()
    w.grad = torch.ones_like(w)
    opt.step()
    first = opt.diagnostics()
    assert first["drift"] is None and first["lyapunov"] is None
    # Adam's first step: m̂ = g, so the velocity is on the target manifold
    assert first["distance"] < 1e-12
    w.grad = torch.tensor([[2.0, 0.0], [0.0, -1.0]], dtype=torch.float64)
    opt.step()
    second = opt.diagnostics(loss=3.0, f_star=1.0)
    assert second["drift"] > 0 and second["distance"] > 0
    assert second["lyapunov"] == pytest.approx(2.0 + 0.5 * 0.1 * second["distance"] ** 2)
    (entry,) = opt.extended_state()
    assert entry["param"] is w and set(entry["memory"]) == {"exp_avg", "exp_avg_sq"}
    assert float((entry["velocity"] - entry["target_velocity"]).norm()) == pytest.approx(second["distance"])
