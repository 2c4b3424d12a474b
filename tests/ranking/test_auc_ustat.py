"""Minibatch pairwise gradients as two-sample U-statistics: unbiasedness and the Hoeffding
variance formula by Monte Carlo, the decomposition against the explicit kernel, the 1/n vs
1/n² rates of a generic and a degenerate kernel; corrective power in closed form."""

import numpy as np
import pytest
import torch

from neurips26.ranking import (
    DegeneracyMonitor, corrective_power, pairwise_auc_loss, severe_fraction, surrogate_derivative, ustat_components,
    ustat_decomposition,
)


def _population(seed=0, n_pos=40, n_neg=60, d=3):
    g = torch.Generator().manual_seed(seed)
    Xp = torch.randn(n_pos, d, generator=g, dtype=torch.float64) + 0.3
    Xn = torch.randn(n_neg, d, generator=g, dtype=torch.float64)
    w = torch.randn(d, generator=g, dtype=torch.float64) * 0.5
    return Xp, Xn, w


def _linear(w):
    m = torch.nn.Linear(w.numel(), 1, bias=False, dtype=torch.float64)
    with torch.no_grad():
        m.weight.copy_(w[None])
    return m


def _kernel(Xp, Xn, w, surrogate="squared_hinge", margin=1.0):
    """Explicit per-pair gradient of the linear model, (n₊, n₋, d)."""
    t = (Xp @ w)[:, None] - (Xn @ w)[None, :]
    D = surrogate_derivative(t, surrogate, margin)
    return D[..., None] * (Xp[:, None, :] - Xn[None, :, :])


@pytest.mark.parametrize("surrogate", ["squared_hinge", "logistic", "hinge"])
def test_decomposition_equals_explicit_kernel(surrogate):
    Xp, Xn, w = _population(1)
    ours = ustat_decomposition(_linear(w), Xp, Xn, surrogate, 0.8)
    ref = ustat_components(_kernel(Xp, Xn, w, surrogate, 0.8))
    for a, b in ((ours.sigma1_pos, ref.sigma1_pos), (ours.sigma1_neg, ref.sigma1_neg), (ours.sigma2, ref.sigma2)):
        assert abs(a - b) <= 1e-10 * max(1.0, abs(b))
    assert torch.allclose(ours.mean, ref.mean, rtol=1e-10, atol=1e-14)
    # The mean kernel is the full-population gradient of the exact loss.
    wg = w.clone().requires_grad_(True)
    X = torch.cat([Xp, Xn])
    y = torch.cat([torch.ones(len(Xp)), torch.zeros(len(Xn))])
    full, = torch.autograd.grad(pairwise_auc_loss(X @ wg, y, surrogate, 0.8), wg)
    assert torch.allclose(ours.mean, full, rtol=1e-10, atol=1e-14)


def test_minibatch_gradient_unbiased_and_variance_formula():
    Xp, Xn, w = _population(2)
    dec = ustat_decomposition(_linear(w), Xp, Xn)
    n_pos, n_neg, B = 4, 6, 20_000
    g = torch.Generator().manual_seed(7)
    ip = torch.randint(0, len(Xp), (B, n_pos), generator=g)
    iN = torch.randint(0, len(Xn), (B, n_neg), generator=g)
    y = torch.cat([torch.ones(n_pos), torch.zeros(n_neg)])
    wg = w.clone().requires_grad_(True)
    grads = torch.empty(B, w.numel(), dtype=torch.float64)
    for b in range(B):  # the minibatch gradient of our exact loss, batch by batch
        X = torch.cat([Xp[ip[b]], Xn[iN[b]]])
        grads[b], = torch.autograd.grad(pairwise_auc_loss(X @ wg, y, check=False), wg)
    mean, se = grads.mean(0), grads.std(0) / B ** 0.5
    assert torch.all((mean - dec.mean).abs() <= 3 * se), ((mean - dec.mean) / se)
    var_mc = float(grads.var(0).sum())
    assert abs(var_mc / dec.variance(n_pos, n_neg) - 1) < 0.05, (var_mc, dec.variance(n_pos, n_neg))
    assert dec.sigma2 > 0 and 0 < dec.degeneracy(n_pos, n_neg) < 1


def _mc_variance(x, y, kernel, n, B, seed):
    # Both kernels below are sums of products, so the batch mean over the n × n pairs equals the
    # kernel applied to the batch means of x and y (exact; avoids forming B × n × n values).
    g = torch.Generator().manual_seed(seed)
    xb = x[torch.randint(0, len(x), (B, n), generator=g)].mean(1)
    yb = y[torch.randint(0, len(y), (B, n), generator=g)].mean(1)
    return float(kernel(xb, yb).var())


def test_degenerate_kernel_variance_falls_as_one_over_n_squared():
    z = torch.randn(500, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    x, y = torch.cat([z, -z]), torch.cat([z.flip(0) * 0.7, -z.flip(0) * 0.7])  # symmetric: E[h | x] = 0
    ns = [4, 8, 16, 32, 64]
    kernels = {"degenerate": lambda a, b: a * b, "generic": lambda a, b: a + b + a * b}
    slopes = {}
    for name, k in kernels.items():
        comp = ustat_components(k(x[:, None], y[None, :]))
        v = [_mc_variance(x, y, k, n, 20_000, n) for n in ns]
        slopes[name] = np.polyfit(np.log(ns), np.log(v), 1)[0]
        for n, vi in zip(ns, v):  # the Hoeffding formula, to Monte Carlo error
            assert abs(vi / comp.variance(n, n) - 1) < 0.05
        if name == "degenerate":
            assert comp.sigma1_pos < 1e-20 and comp.sigma1_neg < 1e-20 and comp.degeneracy(8, 8) == pytest.approx(1.0)
        else:
            assert comp.degeneracy(8, 8) < 0.1
    assert abs(slopes["degenerate"] + 2) < 0.1, slopes
    assert abs(slopes["generic"] + 1) < 0.1, slopes


def test_corrective_power_closed_form_linear_sgd():
    Xp, Xn, w = _population(3, 30, 50, 4)
    Pp, Pn, _ = _population(4, 25, 35, 4)
    eta, m = 0.3, 1.0
    model = _linear(w)
    opt = torch.optim.SGD(model.parameters(), lr=eta)
    X = torch.cat([Xp, Xn])
    y = torch.cat([torch.ones(len(Xp)), torch.zeros(len(Xn))])

    def update():
        opt.zero_grad()
        pairwise_auc_loss(model(X)[:, 0], y, "squared_hinge", m).backward()
        opt.step()

    edges = [-np.inf, -1.0, -0.25, 0.0, 0.25, 1.0, np.inf]
    cp = corrective_power(lambda Z: model(Z)[:, 0], update, Pp, Pn, edges)
    # Closed form in NumPy: one SGD step w' = w − η ∇L, margin change −η ∇L·(p − q).
    Wn, A, Bn, PA, PB = (t.numpy() for t in (w, Xp, Xn, Pp, Pn))
    t = (A @ Wn)[:, None] - (Bn @ Wn)[None, :]
    diff = A[:, None, :] - Bn[None, :, :]
    grad = (-2 * np.maximum(m - t, 0)[..., None] * diff).mean((0, 1))
    sev = ((PB @ Wn)[None, :] - (PA @ Wn)[:, None]).ravel()
    delta = (-eta * (PA[:, None, :] - PB[None, :, :]) @ grad).ravel()
    k = np.digitize(sev, edges[1:-1])
    for b in range(len(edges) - 1):
        sel = k == b
        assert cp.count[b] == sel.sum()
        if sel.any():
            assert cp.strength[b] == pytest.approx(delta[sel].mean(), rel=1e-10, abs=1e-14)
            assert cp.reliability[b] == pytest.approx((delta[sel] > 0).mean(), abs=1e-12)
        else:
            assert np.isnan(float(cp.strength[b]))
    assert torch.allclose(model.weight[0], torch.as_tensor(Wn - eta * grad), rtol=1e-12)


def test_severe_fraction_and_monitor():
    Xp, Xn, w = _population(5, 30, 70)
    s = torch.cat([Xp @ w, Xn @ w])
    y = torch.cat([torch.ones(30), torch.zeros(70)])
    brute = float(((Xn @ w)[None, :] - (Xp @ w)[:, None] > 0.5).double().mean())
    assert severe_fraction(s, y, 0.5) == pytest.approx(brute, abs=1e-15)
    mon = DegeneracyMonitor(_linear(w), Xp, Xn, n_pos=8, n_neg=24, every=2)
    assert mon.step() is None and mon.step() is not None and len(mon.history) == 1
    rec = mon.history[0]
    dec = ustat_decomposition(_linear(w), Xp, Xn)
    assert rec["degeneracy"] == pytest.approx(dec.degeneracy(8, 24)) and 0 <= rec["severe"] <= 1
    assert isinstance(mon.stalled, bool)


def test_bad_input():
    Xp, Xn, w = _population(6)
    with pytest.raises(ValueError, match="bins"):
        corrective_power(lambda Z: Z @ w, lambda: None, Xp, Xn, [1.0, 0.0])
    with pytest.raises(ValueError, match="probe_neg"):
        corrective_power(lambda Z: Z @ w, lambda: None, Xp, Xn[:0])
    with pytest.raises(ValueError, match="NaN"):
        corrective_power(lambda Z: Z @ w * float("nan"), lambda: None, Xp, Xn)
    with pytest.raises(ValueError, match="kernel"):
        ustat_components(torch.ones(3))
    with pytest.raises(ValueError, match="NaN"):
        ustat_components(torch.full((2, 2), float("nan")))
    with pytest.raises(ValueError, match="n_pos"):
        ustat_components(torch.ones(2, 2)).variance(0, 3)
    with pytest.raises(TypeError, match="model"):
        ustat_decomposition(lambda z: z, Xp, Xn)


def test_decomposition_of_a_batchnorm_model_in_train_mode():
    Xp, Xn, _ = _population(7)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(),
                                torch.nn.Linear(8, 1)).double()
    model(torch.cat([Xp, Xn]))  # move the running statistics off their initial values
    model.train()
    dec = ustat_decomposition(model, Xp, Xn, "logistic")
    assert model.training  # the mode is restored
    model.eval()
    X = torch.cat([Xp, Xn])
    y = torch.cat([torch.ones(len(Xp)), torch.zeros(len(Xn))])
    full = torch.autograd.grad(pairwise_auc_loss(model(X)[:, 0], y, "logistic"), list(model.parameters()))
    assert torch.allclose(dec.mean, torch.cat([g.reshape(-1) for g in full]), rtol=1e-10, atol=1e-14)
