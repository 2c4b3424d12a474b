"""The functional core of the quadruple: pure updates, the in-place form they share their
arithmetic with, and the step that the optimizer is a shell over."""

import copy

import pytest
import torch

from neurips26.optim import (quadruple_adam, quadruple_adamw, quadruple_aligned, quadruple_lion, quadruple_muon,
                             quadruple_sgd, quadruple_shampoo, quadruple_spectral, quadruple_tracking)
from neurips26.optim.quadruple import Quadruple
from neurips26.optim.quadruple.optimizer import _quadruple_step

INSTANCES = {
    "sgd": lambda p: quadruple_sgd(p, lr=0.02, momentum=0.9, nesterov=True),
    "adam": lambda p: quadruple_adam(p, lr=1e-2, amsgrad=True),
    "adamw": lambda p: quadruple_adamw(p, lr=1e-2),
    "lion": lambda p: quadruple_lion(p, lr=1e-3),
    "shampoo": lambda p: quadruple_shampoo(p, lr=0.05),
    "muon": lambda p: quadruple_muon(p, lr=0.02),
    "spectral": lambda p: quadruple_spectral(p, lr=0.02),
    "tracking": lambda p: quadruple_tracking(p, lr=1e-2),
    "aligned": lambda p: quadruple_aligned(p, lr=0.05),
}


def _snapshot(state):
    return {k: (v.clone() if torch.is_tensor(v) else v) for k, v in state.items()}


def _same(a, b):
    return a.keys() == b.keys() and all(
        torch.equal(a[k], b[k]) if torch.is_tensor(a[k]) else a[k] == b[k] for k in a)


@pytest.mark.parametrize("name", sorted(INSTANCES))
def test_pure_update_leaves_the_state_alone_and_equals_the_in_place_form(name):
    generator = torch.Generator().manual_seed(0)
    p = torch.randn(6, 4, generator=generator, dtype=torch.float64)
    quadruple: Quadruple = INSTANCES[name]([torch.nn.Parameter(p.clone())]).quadruple
    state = quadruple.init(p)
    for t in range(1, 5):
        g = torch.randn(6, 4, generator=generator, dtype=torch.float64)
        before = _snapshot(state)
        u, memory = quadruple.update(g, state, t)
        assert _same(state, before)  # pure: nothing written into the old state
        u_in_place, memory_in_place = quadruple.update(g, state, t, out=state)
        assert torch.equal(u, u_in_place)
        assert _same(memory, memory_in_place)
        # the returned memory may add transient entries (Lion's interpolation), never kept
        assert set(state) == set(quadruple.init(p))


@pytest.mark.parametrize("name", sorted(INSTANCES))
def test_the_functional_step_is_what_the_optimizer_does(name):
    generator = torch.Generator().manual_seed(1)
    params = [torch.nn.Parameter(torch.randn(5, 3, generator=generator, dtype=torch.float64)) for _ in range(2)]
    plain = [p.detach().clone() for p in params]
    opt = INSTANCES[name](params)
    states = [opt.quadruple.init(p) for p in plain]
    for _ in range(6):
        grads = [torch.randn(5, 3, generator=generator, dtype=torch.float64) for _ in params]
        for p, g in zip(params, grads):
            p.grad = g
        opt.step()
        group = opt.param_groups[0]
        _quadruple_step(plain, grads, states, opt.quadruple, lr=group["lr"], weight_decay=group["weight_decay"])
    for p, q in zip(params, plain):
        assert torch.equal(p.detach(), q)
    for p, state in zip(params, states):
        assert _same(copy.copy(opt.state[p]), state)
