"""Spectral-clipped tangent hypergradients and RiemannianBilevel (float64), against independent
references: dense eigendecompositions, the closed form of Han et al.'s SPD–Stiefel problem
(a Lyapunov equation solved by scipy), torchopt's implicit differentiation, pseudo-inverses."""

import math

import numpy as np
import pytest

geoopt = pytest.importorskip("geoopt")
import scipy.linalg  # noqa: E402
import torch  # noqa: E402

from neurips26.manifolds import Grassmann  # noqa: E402
from neurips26.optim.riemannian_bilevel import (  # noqa: E402
    RiemannianBilevel, cg_solve, clipped_solve, hinv_solve, neumann_solve, spectral_clip, tangent_hypergradient,
)

DT = torch.float64


def _operator(eigs, seed=0):
    g = torch.Generator().manual_seed(seed)
    n = len(eigs)
    q = torch.linalg.qr(torch.randn(n, n, dtype=DT, generator=g))[0]
    return q @ torch.diag(torch.tensor(eigs, dtype=DT)) @ q.T, torch.randn(n, dtype=DT, generator=g)


SPECTRA = {
    "zeros": [0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 0.5, 4.0],
    "negatives": [-3.0, -1.0, -0.01, 0.0, 0.2, 1.0, 5.0, 7.0, -2.5, 0.003],
    "ill-conditioned": [1e-9, 1e-6, 1e-3, 1e-1, 1.0, 10.0, 1e2, 1e3],
}


@pytest.mark.parametrize("mode", ["abs", "floor"])
@pytest.mark.parametrize("name", list(SPECTRA))
def test_clipped_solve_equals_dense_eigendecomposition(name, mode):
    H, b = _operator(SPECTRA[name])
    delta = 0.05
    lam, U = torch.linalg.eigh(H)
    ref = U @ ((U.T @ b) / spectral_clip(lam, delta, mode))
    sol = clipped_solve(lambda u: H @ u, b, delta, krylov=len(b), mode=mode)
    assert float((sol.v - ref).norm() / ref.norm()) < 1e-10
    # 1e-12, or the float64 floor of evaluating H v at all (eps·‖H‖‖v‖/‖b‖: 2.6e-12 for the spectrum up to 1e3,
    # where the dense H_δ v − b of the reference itself measures 2e-12)
    floor = torch.finfo(DT).eps * float(torch.linalg.matrix_norm(H, 2) * sol.v.norm() / b.norm())
    tol = max(1e-12, 4 * floor)
    assert sol.residual <= tol
    # The clipped count: eigenvalues the clipping moves (repeated zeros count once: Krylov sees one per eigenspace).
    moved = (spectral_clip(lam, delta, mode) != lam)
    assert sol.n_clipped == len(set(np.round(lam[moved].numpy(), 12)))
    H_delta = U @ torch.diag(spectral_clip(lam, delta, mode)) @ U.T
    assert float((H_delta @ sol.v - b).norm() / b.norm()) <= tol


def test_clipped_solve_residual_flags_a_short_krylov_space():
    H, b = _operator(SPECTRA["negatives"], seed=1)
    assert clipped_solve(lambda u: H @ u, b, 0.05, krylov=3).residual > 1e-3
    with pytest.raises(ValueError, match="delta"):
        clipped_solve(lambda u: H @ u, b, 0.0)
    with pytest.raises(ValueError, match="delta"):
        clipped_solve(lambda u: H @ u, b, float("nan"))
    with pytest.raises(ValueError, match="b has NaN"):
        clipped_solve(lambda u: H @ u, b * float("nan"), 0.1)
    with pytest.raises(ValueError, match="mode"):
        clipped_solve(lambda u: H @ u, b, 0.1, mode="square")
    with pytest.raises(TypeError, match="krylov"):
        clipped_solve(lambda u: H @ u, b, 0.1, krylov=2.5)


def test_baseline_solvers_on_a_positive_definite_operator():
    H, b = _operator([0.5, 1.0, 2.0, 3.0, 1.5])
    ref = torch.linalg.solve(H, b)
    hvp = lambda u: H @ u  # noqa: E731
    assert torch.allclose(hinv_solve(hvp, b, torch.eye(5, dtype=DT)), ref, atol=1e-12)
    assert torch.allclose(cg_solve(hvp, b, iters=20), ref, atol=1e-10)
    assert torch.allclose(neumann_solve(hvp, b, gamma=0.3, iters=400), ref, atol=1e-10)
    # A singular operator: the Hessian-inverse solve has nothing to return.
    Hs, bs = _operator(SPECTRA["zeros"])
    v = hinv_solve(lambda u: Hs @ u, bs, torch.eye(8, dtype=DT))
    assert not bool(torch.isfinite(v).all()) or float((Hs @ v - bs).norm() / bs.norm()) > 1e-3


# --- Han et al.'s SPD–Stiefel synthetic problem --------------------------------------------------

def _han_problem(n=20, d=5, r=2, lam=0.01, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, dtype=DT, generator=g)
    Y = torch.randn(n, r, dtype=DT, generator=g)
    X, Y = X / X.norm(), Y / Y.norm()
    A = X.T @ X

    def lower(W, M):
        return (M * A).sum() + (torch.linalg.inv(M) * (W @ (Y.T @ Y) @ W.T)).sum() + lam * torch.trace(torch.linalg.inv(M))

    def upper(W, M):
        return -torch.trace(M @ X.T @ Y @ W.T)

    W = torch.linalg.qr(torch.randn(d, r, dtype=DT, generator=g))[0]
    B = W @ (Y.T @ Y) @ W.T + lam * torch.eye(d, dtype=DT)
    # The lower-level minimizer M A M = B: the geometric mean A⁻¹ # B.
    a_half = scipy.linalg.sqrtm(A.numpy()).real
    a_ihalf = np.linalg.inv(a_half)
    M = torch.as_tensor(a_ihalf @ scipy.linalg.sqrtm(a_half @ B.numpy() @ a_half).real @ a_ihalf)
    M = (M + M.T) / 2
    return X, Y, A, B, W, M, lower, upper


def _han_closed_form(X, Y, A, B, W, M):
    """Hess_M g[U] = ½(UAM + MAU + UM⁻¹B + BM⁻¹U) (affine-invariant metric) solved through the
    Lyapunov equation L V + V L = 2 M^-½ b M^-½, U = M^½ V M^½, L = M^½AM^½ + M^-½BM^-½."""
    Mn = M.numpy()
    m_half = scipy.linalg.sqrtm(Mn).real
    m_ihalf = np.linalg.inv(m_half)
    fy = -(X.T @ Y @ W.T).T.numpy()
    b = Mn @ ((fy + fy.T) / 2) @ Mn
    L = m_half @ A.numpy() @ m_half + m_ihalf @ B.numpy() @ m_ihalf
    V = scipy.linalg.solve_continuous_lyapunov((L + L.T) / 2, 2 * m_ihalf @ b @ m_ihalf)
    U = m_half @ ((V + V.T) / 2) @ m_half
    Minv = np.linalg.inv(Mn)
    S = (Y.T @ Y).numpy()
    Z = -Mn @ (X.T @ Y).numpy() + 2 * Minv @ U @ Minv @ W.numpy() @ S
    Wn = W.numpy()
    return Z - Wn @ ((Wn.T @ Z + Z.T @ Wn) / 2)


def test_han_spd_stiefel_closed_form_equals_clipped_and_hinv():
    X, Y, A, B, W, M, lower, upper = _han_problem()
    ref = torch.as_tensor(_han_closed_form(X, Y, A, B, W, M))
    st, spd = geoopt.EuclideanStiefel(), geoopt.SymmetricPositiveDefinite()
    kw = dict(manifold_x=st, manifold_y=spd)
    clipped = tangent_hypergradient(upper, lower, W, M, "clipped", delta=1e-10, **kw)
    hinv = tangent_hypergradient(upper, lower, W, M, "hinv", **kw)
    scale = float(ref.norm())
    assert float((clipped.grad - ref).norm()) < 1e-8 * scale
    assert float((hinv.grad - ref).norm()) < 1e-8 * scale
    assert clipped.n_clipped == 0 and clipped.residual < 1e-10
    assert clipped.lower_grad_norm < 1e-8  # M is the lower-level minimizer
    # Stiefel tangent space: Wᵀh + hᵀW = 0.
    h = clipped.grad
    assert float((W.T @ h + h.T @ W).abs().max()) < 1e-10
    # CG with λ = 0 converges to the same; Neumann with enough terms too.
    cg = tangent_hypergradient(upper, lower, W, M, "cg", iters=200, **kw)
    assert float((cg.grad - ref).norm()) < 1e-6 * scale


def test_euclidean_case_equals_torchopt_implicit_gradient():
    torchopt = pytest.importorskip("torchopt")
    g = torch.Generator().manual_seed(4)
    P = torch.randn(6, 6, dtype=DT, generator=g)
    P = P @ P.T + 0.5 * torch.eye(6, dtype=DT)
    C = torch.randn(6, 3, dtype=DT, generator=g)
    t = torch.randn(6, dtype=DT, generator=g)

    def lower(x, y):
        return 0.5 * y @ P @ y + 0.25 * (y**4).sum() - y @ (C @ torch.sin(x)) + 0.5 * (x**2).sum() * (y**2).sum()

    def upper(x, y):
        return 0.5 * ((y - t) ** 2).sum() + 0.1 * (x**3).sum()

    x = torch.randn(3, dtype=DT, generator=g)
    y = torch.zeros(6, dtype=DT)
    for _ in range(50):  # Newton on the strongly convex lower level
        yr = y.clone().requires_grad_(True)
        (gy,) = torch.autograd.grad(lower(x, yr), yr, create_graph=True)
        Hm = torch.stack([torch.autograd.grad(gy[i], yr, retain_graph=True)[0] for i in range(6)])
        y = (y - torch.linalg.solve(Hm, gy.detach())).detach()

    def optimality(y_, x_):  # ∇_y lower, written out (torchopt differentiates it with torch.func)
        return P @ y_ + y_**3 - C @ torch.sin(x_) + (x_**2).sum() * y_

    ours = tangent_hypergradient(upper, lower, x, y, "clipped", delta=1e-12).grad
    for solve in (torchopt.linear_solve.solve_inv(), torchopt.linear_solve.solve_cg(maxiter=200, rtol=1e-14, atol=0.0)):
        @torchopt.diff.implicit.custom_root(optimality, argnums=1, solve=solve)
        def solver(y_init, x_):
            return y.clone()

        xr = x.clone().requires_grad_(True)
        ys = solver(torch.zeros(6, dtype=DT, requires_grad=True), xr)
        (ref,) = torch.autograd.grad(upper(xr, ys), xr)
        assert float((ours - ref).norm()) < 1e-8 * float(ref.norm())


def test_rank_deficient_pl_lower_level_tends_to_the_pseudo_inverse():
    """g(x, w) = ½‖Mw − tanh x‖² with M of rank 4 < 8 (PL, singular Hessian MᵀM), f(x, w) = ½‖KMw − t‖²
    (grad_w f in the Hessian's range). Reference: v = (MᵀM)⁺ grad_w f, h = sech²(x) ⊙ Mv."""
    g = torch.Generator().manual_seed(5)
    M = torch.randn(4, 8, dtype=DT, generator=g) * torch.tensor([1.0, 0.3, 0.05, 0.01], dtype=DT)[:, None]
    K = torch.randn(3, 4, dtype=DT, generator=g)
    t = torch.randn(3, dtype=DT, generator=g)
    x = torch.randn(4, dtype=DT, generator=g)
    w = torch.randn(8, dtype=DT, generator=g)

    def lower(x_, w_):
        return 0.5 * ((M @ w_ - torch.tanh(x_)) ** 2).sum()

    def upper(x_, w_):
        return 0.5 * ((K @ M @ w_ - t) ** 2).sum()

    b = M.T @ K.T @ (K @ M @ w - t)
    v = torch.linalg.pinv(M.T @ M, hermitian=True) @ b
    ref = (1 - torch.tanh(x) ** 2) * (M @ v)
    cos = {}
    for delta in (1e-1, 1e-3, 1e-6):
        h = tangent_hypergradient(upper, lower, x, w, delta=delta).grad
        cos[delta] = float(h @ ref / (h.norm() * ref.norm()))
    assert cos[1e-6] >= 0.999
    assert cos[1e-1] < cos[1e-6]  # clipping the small eigenvalues (1e-4) at 0.1 moves the hypergradient


# --- the optimizer --------------------------------------------------------------------------------

def _subspace_regression(p=12, r=3, n=40, seed=0, sampled=False):
    """x ∈ Gr(p, r), lower level w ∈ Rᵖ on the projected features A·xxᵀ (Hessian of rank ≤ r < p)."""
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(n, p, dtype=DT, generator=g)
    z = A @ torch.randn(p, dtype=DT, generator=g) + 0.1 * torch.randn(n, dtype=DT, generator=g)
    tr, va = slice(0, n // 2), slice(n // 2, n)

    def lower(X, w, idx=None):
        rows = torch.arange(n // 2) if idx is None else idx
        return 0.5 * ((A[tr][rows] @ (X @ (X.T @ w)) - z[tr][rows]) ** 2).mean()

    def upper(X, w, idx=None):
        rows = torch.arange(n - n // 2) if idx is None else idx
        return 0.5 * ((A[va][rows] @ (X @ (X.T @ w)) - z[va][rows]) ** 2).mean()

    gr = Grassmann()
    X = gr.random(p, r, dtype=DT, generator=g)
    return gr, X, lower, upper


def test_hypergradients_live_in_the_tangent_space():
    gr, X, lower, upper = _subspace_regression()
    w = torch.randn(12, dtype=DT)
    for solver in ("clipped", "hinv", "cg", "neumann", "ad"):
        h = tangent_hypergradient(upper, lower, X, w, solver, manifold_x=gr, gamma=0.5, iters=20).grad
        assert float((X.T @ h).abs().max()) < 1e-10 * max(1.0, float(h.norm()))
    st = geoopt.EuclideanStiefel()
    Xs = geoopt.ManifoldTensor(X.clone(), manifold=st)
    h = tangent_hypergradient(upper, lower, Xs, w).grad
    assert float((Xs.T @ h + h.T @ Xs).abs().max()) < 1e-10


def test_poincare_iterates_stay_in_the_open_ball():
    """The upper level pulls x towards a point outside the ball (its infimum is on the boundary);
    the lower level is PL with a singular Hessian (only y₀ + y₁ matters)."""
    ball = geoopt.PoincareBall()
    t = torch.tensor([3.0, -1.0], dtype=DT)
    a = torch.tensor([0.5, 1.0], dtype=DT)
    x = geoopt.ManifoldParameter(torch.tensor([0.1, 0.2], dtype=DT), manifold=ball)
    y = torch.zeros(2, dtype=DT)

    def lower(x_, y_):
        return 0.5 * (y_.sum() - x_ @ a) ** 2

    def upper(x_, y_):
        return -(x_ @ t) + 0.5 * y_.sum() ** 2

    opt = RiemannianBilevel(x, y, upper, lower, inner_steps=1, lr_x=0.5, lr_y=0.5, delta=1e-3)
    norms = np.empty(10_000)
    for i in range(10_000):
        opt.step()
        norms[i] = float(x.detach().norm())
    assert norms.max() < 1.0 and np.isfinite(norms).all()
    assert norms[-1] > 0.99  # it did press against the boundary


def test_memory_does_not_grow_with_inner_steps_but_ad_does():
    peaks = {}
    for solver in ("clipped", "ad"):
        for steps in (10, 200):
            gr, X, lower, upper = _subspace_regression()
            Xp = geoopt.ManifoldParameter(X, manifold=gr)
            opt = RiemannianBilevel(Xp, torch.zeros(12, dtype=DT), upper, lower, steps, 0.1, 0.2, 1e-4, solver=solver)
            peaks[solver, steps] = opt.step()["graph_bytes"]
    assert abs(peaks["clipped", 200] - peaks["clipped", 10]) <= 0.1 * peaks["clipped", 10]
    assert peaks["ad", 200] >= 10 * peaks["ad", 10]  # linear in the unrolled steps (20x here)


def _slope(xs, ys):
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


def test_deterministic_rate_averaged_squared_gradient_mapping():
    gr, X, lower, upper = _subspace_regression(seed=1)
    opt = RiemannianBilevel(geoopt.ManifoldParameter(X, manifold=gr), torch.zeros(12, dtype=DT), upper, lower,
                            inner_steps=30, lr_x=0.02, lr_y=0.3, delta=1e-4)
    sq = np.array([opt.step()["grad_mapping_norm"] ** 2 for _ in range(160)])
    Ts = [10, 20, 40, 80, 160]
    avg = [sq[:T].mean() for T in Ts]
    assert _slope(Ts, avg) <= -0.9
    assert np.mean(np.diff(sq) <= 0) >= 0.95 and sq[-1] <= 1e-3 * sq[0]
    assert max(r["residual"] for r in opt.history) < 1e-10


def test_stochastic_estimator_error_decays_as_one_over_batch():
    gr, X, lower, upper = _subspace_regression(p=8, r=2, n=400, seed=2)
    w = torch.zeros(8, dtype=DT)
    full = tangent_hypergradient(upper, lower, X, w, manifold_x=gr, delta=1e-3).grad
    gen = torch.Generator().manual_seed(0)
    Bs, mse = [32, 64, 128, 256, 512], []  # the Θ(1/B) regime (below, inverse-Wishart tails)
    for B in Bs:
        errs = []
        for _ in range(100):
            i_f, i_g = torch.randint(200, (B,), generator=gen), torch.randint(200, (B,), generator=gen)
            h = tangent_hypergradient(lambda a, b: upper(a, b, i_f), lambda a, b: lower(a, b, i_g), X, w,
                                      manifold_x=gr, delta=1e-3, residual=False).grad
            errs.append(float(((h - full) ** 2).sum()))
        mse.append(np.mean(errs))
    assert abs(_slope(Bs, mse) + 1) <= 0.15


def test_bad_input_is_refused():
    gr, X, lower, upper = _subspace_regression()
    w = torch.zeros(12, dtype=DT)
    with pytest.raises(ValueError, match="not on its manifold"):
        tangent_hypergradient(upper, lower, X * 1.01, w, manifold_x=gr)
    with pytest.raises(ValueError, match="delta"):
        RiemannianBilevel(geoopt.ManifoldParameter(X, manifold=gr), w, upper, lower, delta=0.0)
    with pytest.raises(ValueError, match="delta"):
        RiemannianBilevel(geoopt.ManifoldParameter(X, manifold=gr), w, upper, lower, delta=-1.0)
    with pytest.raises(ValueError, match="not finite"):
        tangent_hypergradient(lambda a, b: upper(a, b) * float("inf"), lower, X, w, manifold_x=gr)
    with pytest.raises(ValueError, match="not finite"):
        tangent_hypergradient(upper, lambda a, b: lower(a, b) + float("nan"), X, w, manifold_x=gr)
    with pytest.raises(ValueError, match="solver"):
        tangent_hypergradient(upper, lower, X, w, "newton", manifold_x=gr)
    with pytest.raises(ValueError, match="y has NaN"):
        tangent_hypergradient(upper, lower, X, w * float("nan"), manifold_x=gr)
    with pytest.raises(TypeError, match="floating"):
        tangent_hypergradient(upper, lower, X, torch.zeros(12, dtype=torch.int64), manifold_x=gr)
    with pytest.raises(ValueError, match="n_samples"):
        RiemannianBilevel(geoopt.ManifoldParameter(X, manifold=gr), w, upper, lower, batch=4)
    with pytest.raises(ValueError, match="lr_x"):
        RiemannianBilevel(geoopt.ManifoldParameter(X, manifold=gr), w, upper, lower, lr_x=float("nan"))
    with pytest.raises(TypeError, match="inner_steps"):
        RiemannianBilevel(geoopt.ManifoldParameter(X, manifold=gr), w, upper, lower, inner_steps=1.5)
    off = geoopt.ManifoldParameter(X.clone(), manifold=gr)
    with torch.no_grad():
        off.mul_(1.0 + 1e-5)
    with pytest.raises(ValueError, match="not on its manifold"):
        RiemannianBilevel(off, w, upper, lower)
