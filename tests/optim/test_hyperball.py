"""HyperballMuon against independent references: torch.optim.Muon (sphere off), geoopt's
RiemannianSGD on geoopt.Sphere (gradient direction), torch.optim.AdamW (the inner group),
and the sphere algebra (norms kept, weight decay a second-order effect)."""

import copy
import math

import numpy as np
import pytest
import torch

from neurips26.optim.hyperball import HyperballMuon


def _quadratic(m, n, dtype, seed=0):
    """f(W) = ½ vec(W)ᵀ A vec(W) + ⟨B, W⟩ with A ≻ 0: a gradient that depends on W."""
    g = torch.Generator().manual_seed(seed)
    Q = torch.randn(m * n, m * n, generator=g, dtype=dtype)
    A = Q @ Q.T / (m * n) + 0.1 * torch.eye(m * n, dtype=dtype)
    B = torch.randn(m, n, generator=g, dtype=dtype)
    return lambda W: (A @ W.reshape(-1)).reshape(W.shape) + B


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-6), (torch.float64, 1e-12)])
def test_frobenius_norm_kept_every_step(dtype, tol):
    torch.manual_seed(0)
    W = torch.randn(12, 20, dtype=dtype).requires_grad_()
    R = float(W.detach().norm())
    grad = _quadratic(12, 20, dtype)
    opt = HyperballMuon([W], lr=0.05, weight_decay=0.1, ns_dtype=None if dtype == torch.float64 else torch.bfloat16)
    worst = 0.0
    for _ in range(500):
        W.grad = grad(W.detach())
        opt.step()
        worst = max(worst, abs(float(W.detach().norm()) - R) / R)
    assert worst <= tol
    assert float(opt.state[W]["radius"]) == pytest.approx(R, rel=1e-12 if dtype == torch.float64 else 1e-7)


def test_column_variant_keeps_every_column_norm():
    torch.manual_seed(1)
    W = (torch.randn(10, 6) * torch.linspace(0.5, 3.0, 6)).requires_grad_()
    R = W.detach().norm(dim=0)
    opt = HyperballMuon([W], lr=0.1, norm="column", project_tangent=True)
    for _ in range(500):
        W.grad = torch.randn(10, 6)
        opt.step()
        assert torch.allclose(W.detach().norm(dim=0), R, rtol=1e-6, atol=0)
    assert opt.state[W]["radius"].shape == (1, 6)


def test_given_radius_and_step_length():
    # the sphere step moves W by exactly lr·R before the retraction: with project_tangent the
    # new point is R·(W/R·cos + t·sin) with tan = lr, so ⟨W, W'⟩ = R²/√(1 + lr²)
    torch.manual_seed(2)
    W = torch.randn(8, 8, dtype=torch.float64)
    W = (W / W.norm() * 3.0).requires_grad_()
    opt = HyperballMuon([W], lr=0.3, radius=3.0, project_tangent=True, momentum=0.0, ns_dtype=None)
    W0 = W.detach().clone()
    W.grad = torch.randn(8, 8, dtype=torch.float64)
    opt.step()
    assert float((W0 * W.detach()).sum()) == pytest.approx(9.0 / math.sqrt(1 + 0.3 ** 2), rel=1e-12)


def test_gradient_direction_is_geoopt_riemannian_sgd():
    geoopt = pytest.importorskip("geoopt")
    m, n = 5, 7
    grad = _quadratic(m, n, torch.float64, seed=3)
    W0 = torch.randn(m, n, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    W0 /= W0.norm()
    ours = W0.clone().requires_grad_()
    ref = geoopt.ManifoldParameter(W0.reshape(-1).clone(), manifold=geoopt.Sphere())
    o1 = HyperballMuon([ours], lr=0.05, momentum=0.0, direction="gradient", project_tangent=True, radius=1.0)
    o2 = geoopt.optim.RiemannianSGD([ref], lr=0.05)
    for _ in range(100):
        ours.grad = grad(ours.detach())
        ref.grad = grad(ref.detach().reshape(m, n)).reshape(-1)
        o1.step()
        o2.step()
    np.testing.assert_allclose(ours.detach().reshape(-1).numpy(), ref.detach().numpy(), rtol=0, atol=1e-12)


@pytest.mark.parametrize("adjust", [None, "match_rms_adamw"])
def test_sphere_off_is_torch_muon(adjust):
    torch.manual_seed(5)
    W0 = torch.randn(16, 24)
    a, b = W0.clone().requires_grad_(), W0.clone().requires_grad_()
    oa = HyperballMuon([a], lr=0.02, weight_decay=0.1, sphere=False, adjust_lr_fn=adjust)
    ob = torch.optim.Muon([b], lr=0.02, weight_decay=0.1, adjust_lr_fn=adjust)
    grad = _quadratic(16, 24, torch.float32, seed=6)
    for _ in range(50):
        g = grad(a.detach())
        a.grad, b.grad = g.clone(), grad(b.detach())
        oa.step()
        ob.step()
    torch.testing.assert_close(a.detach(), b.detach(), rtol=0, atol=1e-6)


def _run(lr, wd, steps, sphere=True, seed=7):
    W = torch.randn(6, 9, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)).requires_grad_()
    grad = _quadratic(6, 9, torch.float64, seed=seed)
    opt = HyperballMuon([W], lr=lr, weight_decay=wd, sphere=sphere, ns_dtype=None)
    for _ in range(steps):
        W.grad = grad(W.detach())
        opt.step()
    return W.detach()


def test_weight_decay_is_an_lr_rescaling_on_the_sphere():
    eta, lam = 0.05, 0.3
    with_wd = _run(eta, lam, 60)
    rescaled = _run(eta / (1 - eta * lam), 0.0, 60)
    np.testing.assert_allclose(with_wd.numpy(), rescaled.numpy(), rtol=0, atol=1e-10)


@pytest.mark.parametrize("sphere,slope", [(True, 2.0), (False, 1.0)])
def test_weight_decay_one_step_order(sphere, slope):
    etas = np.logspace(-4, -1, 7)
    dev = [float((_run(e, 0.1, 1, sphere) - _run(e, 0.0, 1, sphere)).norm()) for e in etas]
    fitted = np.polyfit(np.log(etas), np.log(dev), 1)[0]
    assert abs(fitted - slope) <= 0.2, (fitted, dev)


def test_inner_adamw_is_torch_adamw_and_exclude():
    torch.manual_seed(8)
    emb, M, v = torch.randn(10, 4), torch.randn(4, 4), torch.randn(4)
    ours = [t.clone().requires_grad_() for t in (emb, M, v)]
    ref = [t.clone().requires_grad_() for t in (emb, v)]
    opt = HyperballMuon(ours, lr=0.02, exclude=[ours[0]], adamw_lr=3e-3, adamw_betas=(0.8, 0.9),
                        adamw_eps=1e-7, adamw_weight_decay=0.05)
    ref_opt = torch.optim.AdamW(ref, lr=3e-3, betas=(0.8, 0.9), eps=1e-7, weight_decay=0.05, foreach=False)
    assert [g["use_hyperball"] for g in opt.param_groups] == [True, False]
    assert opt.param_groups[0]["params"][0] is ours[1]
    for _ in range(20):
        gs = [torch.randn_like(t) for t in ours]
        for t, g in zip(ours, gs):
            t.grad = g.clone()
        ref[0].grad, ref[1].grad = gs[0].clone(), gs[2].clone()
        opt.step()
        ref_opt.step()
    assert torch.equal(ours[0].detach(), ref[0].detach()) and torch.equal(ours[2].detach(), ref[1].detach())


def test_state_dict_round_trip_keeps_radii():
    torch.manual_seed(9)
    W, b = torch.randn(8, 5).requires_grad_(), torch.randn(5).requires_grad_()
    opt = HyperballMuon([W, b], lr=0.1)
    for _ in range(3):
        W.grad, b.grad = torch.randn(8, 5), torch.randn(5)
        opt.step()
    sd = copy.deepcopy(opt.state_dict())  # load_state_dict keeps the tensors it is given
    W2, b2 = W.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    opt2 = HyperballMuon([W2, b2], lr=0.1)
    opt2.load_state_dict(sd)
    assert torch.equal(opt2.state[W2]["radius"], opt.state[W]["radius"])
    for _ in range(5):
        gW, gb = torch.randn(8, 5), torch.randn(5)
        W.grad, b.grad, W2.grad, b2.grad = gW, gb, gW.clone(), gb.clone()
        opt.step()
        opt2.step()
    assert torch.equal(W, W2) and torch.equal(b, b2)


@pytest.mark.parametrize("kwargs,exc", [
    (dict(lr=float("nan")), ValueError), (dict(lr=-1.0), ValueError), (dict(momentum=1.0), ValueError),
    (dict(norm="spectral"), ValueError), (dict(direction="adam"), ValueError), (dict(radius=0.0), ValueError),
    (dict(weight_decay=float("inf")), ValueError), (dict(ns_steps=-1), ValueError), (dict(sphere=1), TypeError),
    (dict(adamw_betas=(0.9, 1.0)), ValueError), (dict(adamw_lr=float("nan")), ValueError),
    (dict(ns_dtype=torch.int32), TypeError), (dict(adjust_lr_fn="x"), ValueError),
])
def test_bad_settings_are_refused(kwargs, exc):
    with pytest.raises(exc):
        HyperballMuon([torch.randn(3, 3, requires_grad=True), torch.randn(3, requires_grad=True)], **kwargs)


def test_bad_params_and_nonfinite_gradient():
    with pytest.raises(ValueError):
        HyperballMuon([])
    with pytest.raises(TypeError):
        HyperballMuon([torch.zeros(3, 3, dtype=torch.int64)])
    with pytest.raises(ValueError):
        HyperballMuon([{"params": [torch.randn(3, requires_grad=True)], "use_hyperball": True}])
    W = torch.randn(4, 4, requires_grad=True)
    opt = HyperballMuon([W])
    W.grad = torch.full((4, 4), float("nan"))
    before = W.detach().clone()
    with pytest.raises(FloatingPointError):
        opt.step()
    assert torch.equal(W.detach(), before)
