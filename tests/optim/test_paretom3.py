"""ParetoM³ (fixed points meet the M³ stationarity conditions; two backward passes whatever m;
preferences; bad input) and the baselines (EPO reaches the ray point; PNG descends every
objective while off the Pareto set; MGDA through torchjd; PMTL; linear scalarization)."""

import math

import numpy as np
import pytest
import torch

from neurips26.optim.moo_baselines import EPO, MGDA, PMTL, PNG, LinearScalarization, png_direction
from neurips26.optim.multiobjective import jacobian_of, pareto_stationarity, weak_pareto_merit
from neurips26.optim.paretom3 import (
    Objective, ParameterVector, ParetoM3, Ray, Regularizer, TargetPoint, paretom3_residuals,
)


def _quadratics(m=3, d=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, d, generator=g, dtype=torch.float64)

    def F(x):
        return ((x[None] - a) ** 2).sum(1)

    return a, F


def test_fixed_point_meets_m3_stationarity_and_is_weakly_pareto():
    a, F = _quadratics()
    z = a.mean(0) + 2.0
    mod = ParameterVector(torch.zeros(5, dtype=torch.float64))
    gamma, alpha = 10.0, 1.0
    opt = ParetoM3(mod, lambda fwd, b: F(fwd()), TargetPoint(z), gamma=gamma, alpha=alpha, lr=0.02, lr_y=0.2,
                   lr_lambda=0.05)
    for _ in range(4000):
        opt.step()
    x, y, lam = mod.x.detach(), opt.y[0], opt.lam
    Fx, Jx = jacobian_of(F, x)
    Fy, Jy = jacobian_of(F, y)
    res = paretom3_residuals(x, y, lam, x - z, Jx, Jy, Fx, Fy, gamma=gamma, alpha=alpha)
    assert max(res.values()) <= 1e-6, res
    # y is the merit's maximizer at x and λ its dual weights (the exact solver agrees).
    mr = weak_pareto_merit(F, x, alpha)
    assert torch.allclose(y, mr.y, atol=1e-6)
    # Two backward passes per iteration.
    assert opt.backward_passes == 2 * opt.iterations == 8000


def test_larger_gamma_gets_closer_to_the_preferred_point():
    cvxpy = pytest.importorskip("cvxpy")
    a, F = _quadratics()
    z = a.mean(0) + 2.0
    w = cvxpy.Variable(3)
    cvxpy.Problem(cvxpy.Minimize(cvxpy.sum_squares(a.numpy().T @ w - z.numpy())), [w >= 0, cvxpy.sum(w) == 1]).solve()
    xstar = torch.from_numpy(a.numpy().T @ w.value)
    dist = []
    for gamma in (3.0, 30.0):
        mod = ParameterVector(torch.zeros(5, dtype=torch.float64))
        opt = ParetoM3(mod, lambda fwd, b: F(fwd()), TargetPoint(z), gamma=gamma, alpha=1.0,
                       lr=0.3 / (3 * gamma), lr_y=0.2, lr_lambda=0.05)
        for _ in range(3000):
            opt.step()
        dist.append(float((mod.x.detach() - xstar).norm()))
    assert dist[1] < dist[0] / 3


def test_backward_passes_do_not_grow_with_m():
    for m in (2, 10):
        _, F = _quadratics(m=m, d=4)
        opt = ParetoM3(ParameterVector(torch.zeros(4, dtype=torch.float64)), lambda fwd, b: F(fwd()),
                       Ray(torch.ones(m)), lr=1e-2)
        mg = LinearScalarization(ParameterVector(torch.zeros(4, dtype=torch.float64)), lambda fwd, b: F(fwd()),
                                 torch.ones(m))
        for _ in range(3):
            opt.step()
            mg.step()
        assert opt.backward_passes == 6 and mg.backward_passes == 3


def test_epo_reaches_the_ray_point():
    a, F = _quadratics(m=2, d=4, seed=3)
    D = float(((a[0] - a[1]) ** 2).sum())
    for r in ((0.5, 0.5), (0.8, 0.2), (0.25, 0.75)):
        t = 1 / (1 + math.sqrt(r[0] / r[1]))  # r1 t²D = r2 (1 − t)²D on the segment
        target = torch.tensor([t * t * D, (1 - t) ** 2 * D], dtype=torch.float64)
        mod = ParameterVector(a.mean(0) + 1.5)
        opt = EPO(mod, lambda fwd, b: F(fwd()), r, lr=0.05, eps=1e-10)
        for _ in range(600):
            opt.step()
        assert torch.allclose(F(mod.x.detach()).detach(), target, atol=1e-4), (r, F(mod.x.detach()), target)
        assert opt.backward_passes == 2 * 600


def test_png_descends_every_objective_while_off_the_pareto_set():
    rng = np.random.default_rng(0)
    for _ in range(100):
        m, n = int(rng.integers(2, 5)), int(rng.integers(2, 8))
        J = torch.from_numpy(rng.standard_normal((m, n)))
        g0 = torch.from_numpy(rng.standard_normal(n))
        v = png_direction(g0, J, alpha=0.5, e=1e-6)
        g = float(pareto_stationarity(J)) ** 2
        if g > 1e-6:
            assert float((J @ v).min()) >= 0.5 * g - 1e-9
    # Along a run: every F_i decreases at every step until the Pareto set is reached.
    a, F = _quadratics(m=2, d=3, seed=1)
    mod = ParameterVector(a.mean(0) + 3.0)
    opt = PNG(mod, lambda fwd, b: F(fwd()), Objective(0), lr=0.01, alpha=0.5, e=1e-4)
    prev = F(mod.x.detach())
    for _ in range(300):
        Fx, Jx = jacobian_of(F, mod.x.detach())
        off = float(pareto_stationarity(Jx)) ** 2 > 1e-4
        opt.step()
        now = F(mod.x.detach()).detach()
        if off:
            assert (now <= prev + 1e-12).all()
        prev = now


@pytest.mark.parametrize("make", [
    lambda mod, obj: MGDA(mod, obj, lr=0.05),
    lambda mod, obj: MGDA(mod, obj, lr=0.05, aggregator="upgrad"),
    lambda mod, obj: PMTL(mod, obj, [[1.0, 0.2], [1.0, 1.0], [0.2, 1.0]], 1, lr=0.05, init_steps=50),
    lambda mod, obj: LinearScalarization(mod, obj, [1.0, 1.0], lr=0.05),
])
def test_baselines_reach_the_pareto_set(make):
    a, F = _quadratics(m=2, d=3, seed=2)
    mod = ParameterVector(a.mean(0) + 2.0)
    opt = make(mod, lambda fwd, b: F(fwd()))
    for _ in range(400):
        opt.step()
    assert weak_pareto_merit(F, mod.x.detach(), 1.0).value <= 1e-6


def test_preferences_on_a_module_and_state_dict():
    torch.manual_seed(0)
    net = torch.nn.Linear(3, 2)
    X, Y = torch.randn(32, 3), torch.randn(32, 2)

    def objectives(forward, batch):
        out = forward(batch[0])
        return ((out - batch[1]) ** 2).mean(0)

    for pref in (Ray([1.0, 2.0]), TargetPoint(torch.zeros(8)), TargetPoint([0.1, 0.1], space="objectives"),
                 Regularizer(lambda p: p["weight"].pow(2).sum()), Objective(1)):
        opt = ParetoM3(net, objectives, pref, gamma=1.0, lr=1e-2)
        f = opt.step((X, Y))
        assert f.shape == (2,)
    state = opt.state_dict()
    opt2 = ParetoM3(net, objectives, Objective(1), gamma=1.0, lr=1e-2)
    opt2.load_state_dict(state)
    assert torch.equal(opt2.lam, opt.lam) and opt2.backward_passes == opt.backward_passes


def _obj(fwd, b):
    return fwd() ** 2


@pytest.mark.parametrize("bad, match", [
    (lambda mod: ParetoM3(mod, lambda f, b: f().sum(), Ray([1.0, 1.0])).step(), "losses"),
    (lambda mod: ParetoM3(mod, lambda f, b: f().reshape(1, 2), Ray([1.0, 1.0])).step(), "losses"),
    (lambda mod: ParetoM3(mod, lambda f, b: f() * float("nan"), Ray([1.0, 1.0])).step(), "losses"),
    (lambda mod: ParetoM3(mod, _obj, Ray([1.0, 1.0, 1.0])).step(), "preference"),
    (lambda mod: ParetoM3(mod, _obj, Ray([1.0, 1.0]), alpha=0.0), "alpha"),
    (lambda mod: ParetoM3(mod, _obj, Ray([1.0, 1.0]), gamma=-1.0), "gamma"),
    (lambda mod: ParetoM3(mod, _obj, Ray([1.0, 1.0]), lr=float("nan")), "lr"),
    (lambda mod: ParetoM3(mod, _obj, Ray([1.0, -1.0])), "ray"),
    (lambda mod: ParetoM3(mod, _obj, Objective(5)).step(), "preference"),
    (lambda mod: EPO(mod, _obj, [1.0, -1.0]), "ray"),
    (lambda mod: EPO(mod, _obj, [1.0, 1.0, 1.0]).step(), "preference"),
    (lambda mod: PMTL(mod, _obj, [[1.0, 0.0]], 3), "index"),
    (lambda mod: LinearScalarization(mod, _obj, [float("inf"), 1.0]), "weights"),
    (lambda mod: MGDA(mod, _obj, aggregator="nope"), "aggregator"),
])
def test_bad_input(bad, match):
    mod = ParameterVector(torch.tensor([1.0, 2.0], dtype=torch.float64))
    with pytest.raises(ValueError, match=match):
        bad(mod)
