"""Closed-form NOTEARS / GOLEM derivatives (``neurips26.causal.derivatives``) equal torch autograd
on the objectives' one ``_value`` definition to 1e-12 relative. The autograd reference is taken
here, from ``_value`` alone, not from the objectives' ``grad`` / ``hvp`` / ``hessian_on``: those
are to call the closed forms, and would then be compared with themselves."""

import numpy as np
import pytest
import torch

from neurips26.causal import GolemObjective, NotearsObjective, notears_h
from neurips26.causal.derivatives import (
    golem_grad, golem_hessian_on, golem_hvp, notears_grad, notears_h_hessian_on, notears_h_hvp,
    notears_h_value_grad, notears_hessian_on, notears_hvp,
)

RTOL = 1e-12
DIMS = (3, 6, 10)


@pytest.fixture(autouse=True)
def one_torch_thread():
    """The autograd reference Hessian is hundreds of tiny backward passes: run outside xdist
    (where conftest pins one thread) on a busy two-core machine, torch's thread pool slows them
    fifty-fold."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def autograd_grad(obj, W):
    W = torch.tensor(W, dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(obj._value(W), W)
    return g.fill_diagonal_(0.0).numpy()


def autograd_hvp(obj, W, V):
    W = torch.tensor(W, dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(obj._value(W), W, create_graph=True)
    (hv,) = torch.autograd.grad((g * torch.from_numpy(V)).sum(), W)
    return hv.fill_diagonal_(0.0).numpy()


def autograd_hessian_on(obj, W, support):
    W0 = torch.tensor(W, dtype=torch.float64)
    rows, cols = torch.from_numpy(support[:, 0]), torch.from_numpy(support[:, 1])
    H = torch.autograd.functional.hessian(lambda w: obj._value(W0.index_put((rows, cols), w)), W0[rows, cols])
    return H.numpy()


def relative_error(ours, reference) -> float:
    """Max-norm error relative to the reference's max norm: entrywise relative error is
    meaningless for the entries that cancel to round-off."""
    ours, reference = np.asarray(ours), np.asarray(reference)
    assert ours.shape == reference.shape
    return float(np.abs(ours - reference).max() / max(np.abs(reference).max(), 1e-300))


def instance(d, seed, scale=0.6):
    """Correlated centred-able data, W with zero diagonal and W ∘ W's row sums about scale² (so exp
    is moderate), V with zero diagonal, and three supports: every off-diagonal entry, a random
    shuffled subset, and a subset of it where W has been zeroed on some entries."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(40, d))
    X[:, 1:] += 0.7 * X[:, :-1]
    off = ~np.eye(d, dtype=bool)
    W = rng.normal(scale=scale / np.sqrt(d), size=(d, d)) * off
    V = rng.normal(size=(d, d)) * off
    full = np.argwhere(off)
    subset = rng.permutation(full)[: max(2, len(full) // 3)]
    W_sparse = W.copy()
    W_sparse[subset[::2, 0], subset[::2, 1]] = 0.0  # support entries at zero, as for entering edges
    return X, W, W_sparse, V, full, subset


def check_against_autograd(obj, W, V, support, grad, hvp, hessian_on):
    assert relative_error(grad(W), autograd_grad(obj, W)) < RTOL
    assert relative_error(hvp(W, V), autograd_hvp(obj, W, V)) < RTOL
    assert relative_error(hessian_on(W, support), autograd_hessian_on(obj, W, support)) < RTOL


@pytest.mark.parametrize("d", DIMS)
@pytest.mark.parametrize("rho, alpha, scale", [(2.0, 0.7, 0.6), (30.0, -1.5, 1.2), (0.0, 0.0, 0.6)])
def test_notears_closed_forms_equal_autograd(d, rho, alpha, scale):
    X, W, W_sparse, V, full, subset = instance(d, seed=d, scale=scale)
    obj = NotearsObjective(X, rho=rho, alpha=alpha)
    C = obj.cov.numpy()
    funcs = (lambda W: notears_grad(C, W, rho, alpha),
             lambda W, V: notears_hvp(C, W, V, rho, alpha),
             lambda W, S: notears_hessian_on(C, W, S, rho, alpha))
    check_against_autograd(obj, W, V, full, *funcs)
    check_against_autograd(obj, W_sparse, V, subset, *funcs)


@pytest.mark.parametrize("d", DIMS)
@pytest.mark.parametrize("lambda2, scale", [(5.0, 0.6), (0.3, 1.2), (0.0, 0.6)])
def test_golem_closed_forms_equal_autograd(d, lambda2, scale):
    X, W, W_sparse, V, full, subset = instance(d, seed=10 + d, scale=scale)
    obj = GolemObjective(X, lambda2=lambda2)
    C = obj.cov.numpy()
    funcs = (lambda W: golem_grad(C, W, lambda2),
             lambda W, V: golem_hvp(C, W, V, lambda2),
             lambda W, S: golem_hessian_on(C, W, S, lambda2))
    check_against_autograd(obj, W, V, full, *funcs)
    check_against_autograd(obj, W_sparse, V, subset, *funcs)


@pytest.mark.parametrize("d", DIMS)
def test_h_pieces_equal_autograd_and_expm(d):
    """h's own value, gradient, HVP and support Hessian: NOTEARS at ρ = 0, α = 1 is the least
    squares part plus h, so autograd's derivatives minus the least-squares ones are h's."""
    X, W, _, V, full, _ = instance(d, seed=20 + d, scale=1.0)
    obj = NotearsObjective(X, rho=0.0, alpha=1.0)
    C = obj.cov.numpy()
    off = ~np.eye(d, dtype=bool)
    h, grad_h, E = notears_h_value_grad(W)
    assert h == pytest.approx(float(notears_h(torch.from_numpy(W))), rel=1e-12)
    assert relative_error(grad_h * off, autograd_grad(obj, W) - (C @ W - C) * off) < RTOL
    assert relative_error(notears_h_hvp(W, V) * off, autograd_hvp(obj, W, V) - (C @ V) * off) < RTOL
    i, j = full.T
    ls_hessian = C[np.ix_(i, i)] * (j[:, None] == j[None, :])
    assert relative_error(notears_h_hessian_on(W, full, E),
                          autograd_hessian_on(obj, W, full) - ls_hessian) < RTOL


@pytest.mark.parametrize("name", ["notears", "golem"])
@pytest.mark.parametrize("d", DIMS)
def test_hessian_is_symmetric_consistent_with_hvp_and_with_sub_supports(name, d):
    X, W, _, V, full, subset = instance(d, seed=30 + d, scale=1.0)
    if name == "notears":
        C = NotearsObjective(X).cov.numpy()
        hvp = lambda W, V: notears_hvp(C, W, V, 3.0, 0.5)
        hessian_on = lambda W, S: notears_hessian_on(C, W, S, 3.0, 0.5)
    else:
        C = GolemObjective(X).cov.numpy()
        hvp = lambda W, V: golem_hvp(C, W, V, 2.0)
        hessian_on = lambda W, S: golem_hessian_on(C, W, S, 2.0)
    H = hessian_on(W, full)
    assert np.array_equal(H, H.T)
    i, j = full.T
    # on the full support, H · vec(V) is the HVP read at the support
    assert relative_error(H @ V[i, j], hvp(W, V)[i, j]) < RTOL
    # a sub-support's (shuffled) Hessian is the matching sub-block of the full one
    position = {tuple(p): a for a, p in enumerate(full)}
    rows = [position[tuple(p)] for p in subset]
    assert relative_error(hessian_on(W, subset), H[np.ix_(rows, rows)]) < RTOL
    assert hessian_on(W, np.zeros((0, 2), dtype=int)).shape == (0, 0)


def test_golem_derivatives_take_the_gram_matrix_as_well_as_the_covariance():
    X, W, _, V, full, _ = instance(6, seed=40)
    Xc = X - X.mean(0)
    C, gram = Xc.T @ Xc / len(X), Xc.T @ Xc
    assert relative_error(golem_grad(gram, W, 5.0), golem_grad(C, W, 5.0)) < RTOL
    assert relative_error(golem_hvp(gram, W, V, 5.0), golem_hvp(C, W, V, 5.0)) < RTOL
    assert relative_error(golem_hessian_on(gram, W, full, 5.0), golem_hessian_on(C, W, full, 5.0)) < RTOL


def test_gradients_and_hvps_have_zero_diagonal():
    X, W, _, V, _, _ = instance(6, seed=50)
    C = NotearsObjective(X).cov.numpy()
    for M in (notears_grad(C, W, 1.0, 0.5), notears_hvp(C, W, V, 1.0, 0.5),
              golem_grad(C, W, 5.0), golem_hvp(C, W, V, 5.0)):
        assert not np.diag(M).any()
