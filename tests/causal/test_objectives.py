"""NOTEARS / GOLEM / DAGMA objectives: values and gradients agree with the dagma package and
closed forms to 1e-8; Hessian-vector products agree with finite differences of the gradient."""

import numpy as np
import pytest
from scipy.linalg import expm

from neurips26.causal import DagmaObjective, GolemObjective, NotearsObjective, check_data


def data(n=50, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[:, 1] += 0.9 * X[:, 0]
    X[:, 3] += 0.5 * X[:, 1] - 0.6 * X[:, 2]
    return X


def small_W(d=4, seed=1, scale=0.3):
    W = np.random.default_rng(seed).normal(scale=scale, size=(d, d))
    np.fill_diagonal(W, 0)
    return W


def test_dagma_objective_matches_the_dagma_package():
    dagma = pytest.importorskip("dagma.linear")
    X = data()
    ref = dagma.DagmaLinear("l2")
    ref.X = X - X.mean(0)
    ref.n, ref.d = X.shape
    ref.cov = ref.X.T @ ref.X / ref.n
    ref.Id = np.eye(ref.d)
    off = ~np.eye(4, dtype=bool)
    for mu, s, seed in ((1.0, 1.0, 1), (0.1, 0.9, 2), (0.01, 0.8, 3)):
        W = small_W(seed=seed)
        score, g_score = ref._score(W)
        h, g_h = ref._h(W, s)
        ours = DagmaObjective(X, mu=mu, s=s)
        assert abs(ours.value(W) - (mu * score + h)) < 1e-10
        assert np.abs(ours.grad(W)[off] - (mu * g_score + g_h)[off]).max() < 1e-10


@pytest.mark.parametrize("mu, s", [(1.0, 1.0), (0.01, 0.8)])
def test_dagma_closed_form_derivatives_equal_autograd(mu, s):
    """DagmaObjective overrides grad / hvp / hessian_on with closed forms; autograd on the one
    ``_value`` definition (the base class) is the reference."""
    from neurips26.causal import SEMObjective

    obj = DagmaObjective(data(d=5), mu=mu, s=s)
    W, V = small_W(d=5, seed=4, scale=0.25), small_W(d=5, seed=5, scale=1.0)
    support = np.argwhere(~np.eye(5, dtype=bool))[::2]
    assert np.abs(obj.grad(W) - SEMObjective._grad(obj, W)).max() < 1e-12  # the base's _grad: autograd
    assert abs(obj.value(W) - SEMObjective.value(obj, W)) < 1e-12  # the base's value: torch on _value
    assert obj.value(3.0 * np.ones((5, 5)) - 3.0 * np.eye(5)) == np.inf == SEMObjective.value(obj, 3.0 * np.ones((5, 5)))
    assert np.abs(obj.hvp(W, V) - SEMObjective.hvp(obj, W, V)).max() < 1e-12
    assert np.abs(obj.hessian_on(W, support) - SEMObjective.hessian_on(obj, W, support)).max() < 1e-12
    # a support in any order (the least-squares part is added on same-column pairs found by sorting)
    perm = np.random.default_rng(0).permutation(len(support))
    H = obj.hessian_on(W, support)
    assert np.array_equal(obj.hessian_on(W, support[perm]), H[np.ix_(perm, perm)])
    assert obj.hessian_on(W, support[:0]).shape == (0, 0)


def test_notears_value_and_gradient_closed_form():
    X = data()
    W = small_W()
    rho, alpha = 2.0, 0.7
    obj = NotearsObjective(X, rho=rho, alpha=alpha)
    Xc = X - X.mean(0)
    E = expm(W * W)
    h = np.trace(E) - 4
    ls = 0.5 / len(X) * ((Xc - Xc @ W) ** 2).sum()
    assert abs(obj.value(W) - (ls + alpha * h + 0.5 * rho * h * h)) < 1e-10
    g_ls = -Xc.T @ (Xc - Xc @ W) / len(X)
    g = g_ls + (alpha + rho * h) * E.T * 2 * W
    np.fill_diagonal(g, 0)
    assert np.abs(obj.grad(W) - g).max() < 1e-10


def test_golem_value_closed_form_and_gradient_by_finite_differences():
    X = data()
    W = small_W()
    obj = GolemObjective(X, lambda2=3.0)
    Xc = X - X.mean(0)
    ref = 2 * np.log(((Xc - Xc @ W) ** 2).sum()) - np.log(abs(np.linalg.det(np.eye(4) - W))) + 3.0 * (
        np.trace(expm(W * W)) - 4)
    assert abs(obj.value(W) - ref) < 1e-10
    g = obj.grad(W)
    eps = 1e-6
    for i, j in ((0, 1), (2, 3), (3, 0)):
        E = np.zeros((4, 4))
        E[i, j] = eps
        fd = (obj.value(W + E) - obj.value(W - E)) / (2 * eps)
        assert abs(fd - g[i, j]) < 1e-7


@pytest.mark.parametrize("make", [lambda X: NotearsObjective(X, rho=1.0, alpha=0.3), lambda X: DagmaObjective(X),
                                  lambda X: GolemObjective(X)])
def test_hvp_and_support_hessian_match_finite_differences(make):
    X = data()
    obj = make(X)
    W = small_W(scale=0.2)
    V = small_W(seed=5)
    eps = 1e-6
    fd = (obj.grad(W + eps * V) - obj.grad(W - eps * V)) / (2 * eps)
    assert np.abs(obj.hvp(W, V) - fd).max() < 1e-6
    support = np.array([(0, 1), (1, 3), (2, 3)])
    H = obj.hessian_on(W, support)
    for k, (i, j) in enumerate(support):
        E = np.zeros((4, 4))
        E[i, j] = 1.0
        assert np.abs(H[:, k] - obj.hvp(W, E)[support[:, 0], support[:, 1]]).max() < 1e-10


def test_bad_data_is_refused_with_a_reason():
    X = data()
    bad = X.copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match="NaN or inf.*row 3, column 2"):
        check_data(bad)
    const = X.copy()
    const[:, 1] = 4.0
    with pytest.raises(ValueError, match=r"constant columns \[1\]"):
        NotearsObjective(const)
    with pytest.raises(ValueError, match="shape"):
        DagmaObjective(X[:, :1])
    with pytest.raises(ValueError, match=r"\(4, 4\)"):
        NotearsObjective(X).value(np.zeros((3, 3)))


def test_dagma_domain_test_by_inverse_positivity_equals_the_spectral_radius_test():
    """in_domain decides sI − W∘W's M-matrix property from its inverse (N ≥ 0); the reference is
    the definition, spectral radius ρ(W∘W) < s, on random W scaled to ρ within ±5 % of s, on
    graphs with and without cycles (a DAG's W∘W is nilpotent: always inside) and on reducible
    ones (one strongly connected component past s, another far inside)."""
    rng = np.random.default_rng(0)
    d, s = 7, 1.0
    obj = DagmaObjective(data(d=d), s=s)
    agree = 0
    for trial in range(600):
        W = rng.normal(size=(d, d)) * (rng.random((d, d)) < rng.uniform(0.2, 0.8))
        np.fill_diagonal(W, 0)
        if trial % 3 == 1:  # reducible: the first 3 nodes never reach the others' cycle
            W[3:, :3] = 0
        rho = np.abs(np.linalg.eigvals(W * W)).max()
        if rho == 0:  # acyclic
            assert obj.in_domain(W)
            continue
        W *= np.sqrt(rng.uniform(0.95, 1.05) * s / rho)
        rho = np.abs(np.linalg.eigvals(W * W)).max()
        if abs(rho - s) < 1e-9:
            continue
        assert obj.in_domain(W) == (rho < s), (trial, rho)
        agree += 1
    assert agree > 300
