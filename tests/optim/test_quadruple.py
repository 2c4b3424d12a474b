"""The quadruple framework's classical instances against torch.optim itself."""

import copy

import numpy as np

import pytest
import torch

from neurips26.optim.quadruple import (
    Euclidean, Gradient, NoMemory, QuadrupleOptimizer, quadruple_adam, quadruple_adamw, quadruple_lion, quadruple_sgd,
    quadruple_shampoo,
)


def make_problem(seed=0):
    generator = torch.Generator().manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3)).double()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=generator, dtype=torch.float64) * 0.5)
    X = torch.randn(64, 5, generator=generator, dtype=torch.float64)
    y = torch.randn(64, 3, generator=generator, dtype=torch.float64)
    return model, X, y


def train(make_opt, steps=200, seed=0, scheduler=None):
    model, X, y = make_problem(seed)
    opt = make_opt(model.parameters())
    sched = scheduler(opt) if scheduler else None
    for k in range(steps):
        idx = slice((k * 8) % 64, (k * 8) % 64 + 8)  # a deterministic minibatch stream
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(X[idx]), y[idx]).backward()
        opt.step()
        if sched:
            sched.step()
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def rel_dev(a, b):
    return float((a - b).norm() / b.norm())


SGD_SETTINGS = [dict(lr=0.05), dict(lr=0.05, weight_decay=0.01), dict(lr=0.02, momentum=0.9),
                dict(lr=0.02, momentum=0.9, dampening=0.3, weight_decay=1e-3),
                dict(lr=0.02, momentum=0.8, nesterov=True, weight_decay=1e-2)]
ADAM_SETTINGS = [dict(lr=1e-2), dict(lr=3e-3, betas=(0.8, 0.99), eps=1e-6), dict(lr=1e-2, weight_decay=0.05),
                 dict(lr=1e-2, amsgrad=True), dict(lr=5e-3, weight_decay=0.1, amsgrad=True)]


@pytest.mark.parametrize("kw", SGD_SETTINGS)
def test_sgd_matches_torch(kw):
    ours = train(lambda p: quadruple_sgd(p, **kw))
    ref = train(lambda p: torch.optim.SGD(p, **kw))
    assert rel_dev(ours, ref) <= 1e-6
    assert rel_dev(ours, train(lambda p: torch.optim.SGD(p, lr=kw["lr"] * 1.5))) > 1e-3  # the test can fail


@pytest.mark.parametrize("kw", ADAM_SETTINGS)
def test_adam_and_adamw_match_torch(kw):
    assert rel_dev(train(lambda p: quadruple_adam(p, **kw)), train(lambda p: torch.optim.Adam(p, **kw))) <= 1e-6
    kw_w = dict(kw, weight_decay=kw.get("weight_decay", 0.01))
    ours_w = train(lambda p: quadruple_adamw(p, **kw_w))
    assert rel_dev(ours_w, train(lambda p: torch.optim.AdamW(p, **kw_w))) <= 1e-6
    # AdamW is not Adam: the decoupled decay moves the trajectory.
    assert rel_dev(ours_w, train(lambda p: torch.optim.Adam(p, **kw_w))) > 1e-6


def test_lr_scheduler_drives_the_group_lr():
    sched = lambda opt: torch.optim.lr_scheduler.StepLR(opt, step_size=20, gamma=0.5)
    ours = train(lambda p: quadruple_adamw(p, lr=1e-2), steps=80, scheduler=sched)
    ref = train(lambda p: torch.optim.AdamW(p, lr=1e-2), steps=80, scheduler=sched)
    assert rel_dev(ours, ref) <= 1e-6


def test_state_dict_round_trip_continues_the_same_trajectory():
    model, X, y = make_problem(1)
    opt = quadruple_sgd(model.parameters(), lr=0.02, momentum=0.9)

    def run(model, opt, steps):
        for _ in range(steps):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(X), y).backward()
            opt.step()

    run(model, opt, 30)
    saved_model, saved_opt = copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict())
    run(model, opt, 30)
    model2, _, _ = make_problem(1)
    model2.load_state_dict(saved_model)
    opt2 = quadruple_sgd(model2.parameters(), lr=0.02, momentum=0.9)
    opt2.load_state_dict(saved_opt)
    run(model2, opt2, 30)
    for a, b in zip(model.parameters(), model2.parameters()):
        assert torch.equal(a, b)


def test_closure_and_parameters_without_gradient():
    model, X, y = make_problem(2)
    frozen = torch.nn.Parameter(torch.ones(3, dtype=torch.float64))
    opt = quadruple_adam([{"params": model.parameters()}, {"params": [frozen], "lr": 1.0}], lr=1e-2)

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(X), y)
        loss.backward()
        return loss

    first = opt.step(closure).item()
    for _ in range(20):
        last = opt.step(closure).item()
    assert last < first
    assert torch.equal(frozen, torch.ones(3, dtype=torch.float64)) and frozen not in opt.state


def test_bad_input_is_refused_clearly():
    params = [torch.nn.Parameter(torch.zeros(2))]
    with pytest.raises(ValueError, match="lr"):
        quadruple_sgd(params, lr=-1.0)
    with pytest.raises(ValueError, match="momentum"):
        quadruple_sgd(params, lr=0.1, momentum=1.0)
    with pytest.raises(ValueError, match="Nesterov"):
        quadruple_sgd(params, lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="beta2"):
        quadruple_adam(params, betas=(0.9, 1.0))
    with pytest.raises(TypeError, match="transition"):
        QuadrupleOptimizer(params, metric=Euclidean(), transition=object(), direction=Gradient())
    QuadrupleOptimizer(params, metric=Euclidean(), transition=NoMemory(), direction=Gradient())


class ManualOptimizer:
    """A reference written out by hand: ``update(p)`` moves one parameter from its .grad."""

    def __init__(self, params, update):
        self.params, self.update = list(params), update

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self):
        for p in self.params:
            self.update(p)


def lion_paper(params, lr, betas, weight_decay):
    """Lion written out from Chen et al. 2023, Algorithm 2: c = β₁m + (1−β₁)g;
    θ ← θ − η(sign(c) + λθ); m ← β₂m + (1−β₂)g."""
    beta1, beta2 = betas
    mem = {}

    def update(p):
        m = mem.setdefault(p, torch.zeros_like(p))
        c = beta1 * m + (1 - beta1) * p.grad
        p.sub_(lr * (torch.sign(c) + weight_decay * p))
        m.copy_(beta2 * m + (1 - beta2) * p.grad)

    return ManualOptimizer(params, update)


@pytest.mark.parametrize("kw", [dict(lr=1e-3, betas=(0.9, 0.99), weight_decay=0.0),
                                dict(lr=3e-4, betas=(0.95, 0.98), weight_decay=0.1)])
def test_lion_matches_the_paper_and_lion_pytorch(kw):
    from lion_pytorch import Lion

    ours = train(lambda p: quadruple_lion(p, **kw))
    assert rel_dev(ours, train(lambda p: lion_paper(p, **kw))) <= 1e-6
    assert rel_dev(ours, train(lambda p: Lion(p, **kw))) <= 1e-6
    assert rel_dev(ours, train(lambda p: quadruple_adamw(p, lr=kw["lr"]))) > 1e-3


def shampoo_dense(params, lr, eps):
    """Shampoo written out directly: L, R from εI, L += GGᵀ, R += GᵀG,
    W −= η L^{-1/4} G R^{-1/4} (vectors: L^{-1/2} g), the powers by scipy's Schur-based
    fractional_matrix_power, not by an eigendecomposition."""
    from scipy.linalg import fractional_matrix_power as fmp

    fac = {}

    def update(p):
        G = p.grad.numpy()
        if G.ndim == 1:
            L = fac.setdefault(p, [eps * np.eye(len(G))])[0]
            L += np.outer(G, G)
            u = np.real(fmp(L, -0.5)) @ G
        else:
            L, R = fac.setdefault(p, [eps * np.eye(G.shape[0]), eps * np.eye(G.shape[1])])
            L += G @ G.T
            R += G.T @ G
            u = np.real(fmp(L, -0.25)) @ G @ np.real(fmp(R, -0.25))
        p.sub_(lr * torch.as_tensor(u))

    return ManualOptimizer(params, update)


def test_shampoo_matches_a_dense_direct_implementation():
    ours = train(lambda p: quadruple_shampoo(p, lr=0.05, eps=1e-3), steps=60)
    ref = train(lambda p: shampoo_dense(p, lr=0.05, eps=1e-3), steps=60)
    assert rel_dev(ours, ref) <= 1e-8
    with pytest.raises(ValueError, match="vector or a matrix"):
        opt = quadruple_shampoo([torch.nn.Parameter(torch.zeros(2, 2, 2))])
        opt.param_groups[0]["params"][0].grad = torch.ones(2, 2, 2)
        opt.step()
