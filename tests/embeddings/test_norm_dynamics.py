"""The norm-dynamics formula against simulation: an InfoNCE embedding table trained by
torch.optim in float64, the per-step identities checked directly, and predicted_norms
(which sees only the initial norms and the logged energies) against the simulated norms."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from neurips26.embeddings import NormHistory, NormRecorder, info_nce, predicted_norms, tangential_energy


def _problem(seed=0, n=24, n_ctx=12, d=8, scale=0.5):
    g = torch.Generator().manual_seed(seed)
    table = (scale * torch.randn(n, d, generator=g, dtype=torch.float64)).requires_grad_()
    ctx = torch.randn(n_ctx, d, generator=g, dtype=torch.float64)
    # each item has its own context distribution (some broad, some narrow)
    logits = 3 * torch.randn(n, n_ctx, generator=g, dtype=torch.float64)
    probs = torch.softmax(logits, 1)
    return table, ctx, probs, g


def _train(opt_factory, steps=60, seed=0, check=None, scale=0.5):
    table, ctx, probs, g = _problem(seed, scale=scale)
    opt = opt_factory([table])
    rec = NormRecorder(table, opt)
    for _ in range(steps):
        items = torch.randint(0, table.shape[0], (16,), generator=g)
        targets = torch.multinomial(probs[items], 1, generator=g)[:, 0]
        opt.zero_grad()
        info_nce(table[items], ctx, targets, temperature=0.2).backward()
        before = table.detach().clone()
        grad = table.grad.detach().clone()
        rec.step()
        if check is not None:
            check(before, grad, table.detach())
    return rec.history(), table


def test_tangential_energy_is_the_unit_vector_gradient():
    table, ctx, probs, g = _problem(1)
    targets = torch.multinomial(probs, 1, generator=g)[:, 0]
    info_nce(table, ctx, targets).backward()
    # independent: differentiate the same loss as a function of the unit vectors u
    u = F.normalize(table.detach(), dim=-1).requires_grad_()
    info_nce(u, ctx, targets).backward()
    tangent = u.grad - (u.grad * u).sum(-1, keepdim=True) * u
    torch.testing.assert_close(tangential_energy(table.detach(), table.grad), tangent.pow(2).sum(-1),
                               rtol=1e-10, atol=1e-14)
    assert (table.grad * table.detach()).sum(-1).abs().max() < 1e-14  # gradient orthogonal to x


def test_sgd_step_identity_and_monotone_norms():
    lr = 0.5
    worst = []

    def check(x, g, x_new):
        gap = x_new.pow(2).sum(-1) - x.pow(2).sum(-1) - lr ** 2 * g.pow(2).sum(-1)
        worst.append(float(gap.abs().max()))
        assert (x_new.pow(2).sum(-1) >= x.pow(2).sum(-1)).all()  # norms never decrease

    _train(lambda p: torch.optim.SGD(p, lr=lr), check=check)
    assert max(worst) <= 1e-12


def test_sgd_with_decay_identity():
    lr, wd = 0.5, 0.05
    worst = []

    def check(x, g, x_new):
        gap = x_new.pow(2).sum(-1) - (1 - lr * wd) ** 2 * x.pow(2).sum(-1) - lr ** 2 * g.pow(2).sum(-1)
        worst.append(float(gap.abs().max()))

    hist, _ = _train(lambda p: torch.optim.SGD(p, lr=lr, weight_decay=wd), check=check)
    assert max(worst) <= 1e-10
    assert (hist.sq_norms[-1] < hist.sq_norms[0]).any()  # decay does shrink some rows


@pytest.mark.parametrize("kw", [dict(), dict(weight_decay=0.05), dict(momentum=0.9), dict(momentum=0.9, weight_decay=0.05)])
def test_prediction_matches_sgd_simulation(kw):
    hist, table = _train(lambda p: torch.optim.SGD(p, lr=0.3, **kw))
    pred = predicted_norms(hist)
    assert pred.shape == (hist.steps + 1, table.shape[0])
    torch.testing.assert_close(pred, hist.sq_norms.sqrt(), rtol=0, atol=1e-8)
    torch.testing.assert_close(pred[-1], table.detach().norm(dim=-1), rtol=0, atol=1e-8)


def test_fourth_power_law_is_the_small_step_limit():
    # ||x_T||^4 = ||x_0||^4 + 2 sum eta^2 G_t + O(eta^4): the error falls as the step does
    errs = []
    for lr in (0.2, 0.05):
        hist, _ = _train(lambda p: torch.optim.SGD(p, lr=lr), steps=40)
        approx = predicted_norms(hist, exact=False)
        rel = (approx[-1] - hist.sq_norms[-1].sqrt()).abs() / hist.sq_norms[-1].sqrt()
        errs.append(float(rel.max()))
        assert (approx[-1] <= hist.sq_norms[-1].sqrt() + 1e-12).all()  # the dropped eta^4 term is >= 0
    assert errs[1] < errs[0] / 4 and errs[1] < 1e-3


@pytest.mark.parametrize("opt", ["adam", "adamw"])
def test_adam_bookkeeping_is_exact_and_the_formula_is_first_order(opt):
    from scipy.stats import spearmanr

    factory = (lambda p: torch.optim.Adam(p, lr=0.02)) if opt == "adam" else (
        lambda p: torch.optim.AdamW(p, lr=0.02, weight_decay=0.1))
    hist, table = _train(factory, steps=150, scale=0.05)
    true = table.detach().norm(dim=-1)
    # with the logged radial part the recursion is the identity
    torch.testing.assert_close(predicted_norms(hist), hist.sq_norms.sqrt(), rtol=0, atol=1e-8)
    # from the step energies alone (the formula, first order): stated tolerance, median
    # relative error <= 10% and Spearman >= 0.6, better than the initial norms' order
    pred = predicted_norms(hist, exact=False)[-1]
    rel = (pred - true).abs() / true
    rho = spearmanr(pred.numpy(), true.numpy()).statistic
    assert float(rel.median()) <= 0.10
    assert rho >= 0.6
    assert rho > spearmanr(hist.sq_norm0.numpy(), true.numpy()).statistic + 0.2
    # dropping the momentum correction (beta1 = 0) is worse: the correction is needed
    flat = NormHistory(**{**hist.__dict__, "betas": (0.0, hist.betas[1])})
    assert float(((predicted_norms(flat, exact=False)[-1] - true).abs() / true).median()) > float(rel.median())


def test_history_and_recorder_validate():
    t = torch.ones(3, 2, dtype=torch.float64)
    ok = dict(sq_norm0=torch.ones(2), tangent_sq=t, lr=torch.full((3,), 0.1))
    NormHistory(**ok)
    with pytest.raises(ValueError, match="optimizer"):
        NormHistory(**ok, optimizer="lion")
    with pytest.raises(ValueError, match="lr"):
        NormHistory(**{**ok, "lr": torch.ones(2)})
    with pytest.raises(ValueError, match="NaN"):
        NormHistory(**{**ok, "tangent_sq": torch.full((3, 2), math.nan)})
    with pytest.raises(ValueError, match="step_sq"):
        NormHistory(**ok, optimizer="adam")
    with pytest.raises(ValueError, match="positive"):
        NormHistory(**{**ok, "sq_norm0": torch.zeros(2)})
    with pytest.raises(ValueError, match="momentum"):
        NormHistory(**ok, momentum=1.0, step_sq=t)
    with pytest.raises(ValueError, match="radial"):
        predicted_norms(NormHistory(**ok, optimizer="adam", step_sq=t))
    with pytest.raises(ValueError, match="fourth-power"):
        predicted_norms(NormHistory(**ok, weight_decay=0.1), exact=False)
    with pytest.raises(TypeError):
        predicted_norms({"sq_norm0": 1})
    p = torch.zeros(3, 2, requires_grad=True)
    with pytest.raises(ValueError, match="param_groups"):
        NormRecorder(p, torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1))
    with pytest.raises(TypeError, match="optimizer"):
        NormRecorder(p, torch.optim.RMSprop([p], lr=0.1))
    with pytest.raises(ValueError, match="Nesterov"):
        NormRecorder(p, torch.optim.SGD([p], lr=0.1, momentum=0.9, nesterov=True))
    with pytest.raises(RuntimeError, match="backward"):
        NormRecorder(p, torch.optim.SGD([p], lr=0.1)).step()
    with pytest.raises(ValueError, match="share d"):
        info_nce(torch.ones(2, 3), torch.ones(4, 2), torch.zeros(2, dtype=torch.int64))
    with pytest.raises(ValueError, match="temperature"):
        info_nce(torch.ones(2, 3), torch.ones(4, 3), torch.zeros(2, dtype=torch.int64), temperature=0.0)


def test_recorder_history_across_its_storage_blocks_equals_a_hand_log():
    # 600 steps cross two of the recorder's 256-step storage blocks; every logged row must equal what the
    # step computed, in order (the history is the recorder's record, not a copy of its last block)
    tangent, sq = [], []

    def check(x, g, x_new):
        tangent.append(tangential_energy(x, g))
        sq.append(x_new.pow(2).sum(-1))

    hist, table = _train(lambda p: torch.optim.Adam(p, lr=0.01), steps=600, check=check)
    assert hist.steps == 600 and hist.tangent_sq.shape == (600, table.shape[0])
    torch.testing.assert_close(hist.tangent_sq, torch.stack(tangent), rtol=0, atol=0)
    torch.testing.assert_close(hist.sq_norms[1:], torch.stack(sq), rtol=0, atol=0)
    assert hist.step_sq.shape == hist.radial.shape == (600, table.shape[0])
