"""neurips26.manifolds: Grassmann and the Euclidean -> Riemannian Hessian conversion against
pymanopt's manifolds (an independent implementation), float64, to 1e-10."""

import numpy as np
import pytest

geoopt = pytest.importorskip("geoopt")
pymanopt_manifolds = pytest.importorskip("pymanopt.manifolds")
import torch  # noqa: E402

from neurips26.manifolds import Grassmann, rhess, tangent_inner  # noqa: E402

DT = torch.float64
TOL = 1e-10


def _t(a):
    return torch.as_tensor(a, dtype=DT)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def test_grassmann_matches_pymanopt(rng):
    n, p = 9, 3
    ref = pymanopt_manifolds.Grassmann(n, p)
    gr = Grassmann()
    x = np.linalg.qr(rng.standard_normal((n, p)))[0]
    y = np.linalg.qr(rng.standard_normal((n, p)))[0]
    a, G, Hu = rng.standard_normal((3, n, p))
    u = ref.projection(x, a)
    assert np.allclose(gr.proju(_t(x), _t(a)).numpy(), ref.projection(x, a), atol=TOL, rtol=0)
    assert np.allclose(gr.egrad2rgrad(_t(x), _t(G)).numpy(), ref.euclidean_to_riemannian_gradient(x, G), atol=TOL, rtol=0)
    assert np.allclose(gr.retr(_t(x), _t(u)).numpy(), ref.retraction(x, u), atol=TOL, rtol=0)
    assert abs(float(gr.dist(_t(x), _t(y))) - ref.dist(x, y)) < TOL
    assert abs(float(gr.inner(_t(x), _t(u), _t(a))) - ref.inner_product(x, u, ref.projection(x, a))) < TOL
    ours = rhess(gr, _t(x), _t(G), _t(Hu), _t(u)).numpy()
    assert np.allclose(ours, ref.euclidean_to_riemannian_hessian(x, G, Hu, u), atol=TOL, rtol=0)
    # The exponential map: pymanopt re-orthonormalizes by QR, so compare the subspaces (projectors).
    e_ours, e_ref = gr.expmap(_t(x), _t(u)).numpy(), ref.exp(x, u)
    assert np.allclose(e_ours @ e_ours.T, e_ref @ e_ref.T, atol=TOL, rtol=0)
    small = 0.3 * u / np.linalg.norm(u)  # within the injectivity radius: the geodesic's length is the distance
    assert abs(float(gr.dist(_t(x), gr.expmap(_t(x), _t(small)))) - 0.3) < 1e-10


def test_grassmann_checks_and_geoopt_contract():
    gr = Grassmann()
    x = gr.random(6, 2, dtype=DT, generator=torch.Generator().manual_seed(1))
    assert gr.check_point_on_manifold(x)
    ok, _ = gr._check_point_on_manifold(2 * x, atol=1e-6, rtol=0)
    assert not ok
    u = gr.proju(x, torch.randn(6, 2, dtype=DT))
    assert gr._check_vector_on_tangent(x, u)[0] and not gr._check_vector_on_tangent(x, x)[0]
    assert not gr._check_shape((2, 6), "x")[0]
    # Invariance under the quotient: x·Q is the same point (distance 0).
    q = torch.linalg.qr(torch.randn(2, 2, dtype=DT))[0]
    assert float(gr.dist(x, x @ q)) < 1e-7
    # A geoopt optimizer runs on it.
    target = gr.random(6, 2, dtype=DT, generator=torch.Generator().manual_seed(2))
    xp = geoopt.ManifoldParameter(x.clone(), manifold=gr)
    opt = geoopt.optim.RiemannianSGD([xp], lr=0.2)
    for _ in range(200):
        opt.zero_grad()
        loss = -((target.T @ xp) ** 2).sum()  # max when span(x) = span(target)
        loss.backward()
        opt.step()
    assert float(gr.dist(xp.detach(), target)) < 1e-6


def test_rhess_stiefel_spd_poincare_sphere_match_pymanopt(rng):
    n, p = 7, 3
    # Stiefel, embedded metric.
    ref = pymanopt_manifolds.Stiefel(n, p)
    x = np.linalg.qr(rng.standard_normal((n, p)))[0]
    G, Hu, a = rng.standard_normal((3, n, p))
    u = ref.projection(x, a)
    ours = rhess(geoopt.EuclideanStiefel(), _t(x), _t(G), _t(Hu), _t(u)).numpy()
    assert np.allclose(ours, ref.euclidean_to_riemannian_hessian(x, G, Hu, u), atol=TOL, rtol=0)
    # SPD, affine-invariant metric.
    ref = pymanopt_manifolds.SymmetricPositiveDefinite(n)
    b = rng.standard_normal((n, n))
    x = b @ b.T + n * np.eye(n)
    G, Hu, a = rng.standard_normal((3, n, n))
    u = (a + a.T) / 2
    ours = rhess(geoopt.SymmetricPositiveDefinite(), _t(x), _t(G), _t(Hu), _t(u)).numpy()
    assert np.allclose(ours, ref.euclidean_to_riemannian_hessian(x, G, Hu, u), atol=TOL * 100, rtol=TOL)
    # Poincaré ball (curvature -1).
    ref = pymanopt_manifolds.PoincareBall(n)
    x = rng.standard_normal(n)
    x *= 0.7 / np.linalg.norm(x)
    G, Hu, u = rng.standard_normal((3, n))
    ours = rhess(geoopt.PoincareBall(), _t(x), _t(G), _t(Hu), _t(u)).numpy()
    assert np.allclose(ours, ref.euclidean_to_riemannian_hessian(x, G, Hu, u), atol=TOL, rtol=0)
    # Sphere.
    ref = pymanopt_manifolds.Sphere(n)
    x = rng.standard_normal(n)
    x /= np.linalg.norm(x)
    G, Hu, a = rng.standard_normal((3, n))
    u = ref.projection(x, a)
    ours = rhess(geoopt.Sphere(), _t(x), _t(G), _t(Hu), _t(u)).numpy()
    assert np.allclose(ours, ref.euclidean_to_riemannian_hessian(x, G, Hu, u), atol=TOL, rtol=0)
    assert np.allclose(rhess(geoopt.Euclidean(), _t(x), _t(G), _t(Hu), _t(u)).numpy(), Hu)


@pytest.mark.parametrize("c", [0.3, 2.0])
def test_rhess_poincare_any_curvature_is_self_adjoint(c):
    """For curvature -c (no pymanopt reference): the Riemannian Hessian of a real function is
    self-adjoint in the metric, and the second derivative along a geodesic equals ⟨Hess[u], u⟩."""
    ball = geoopt.PoincareBall(c=c)
    torch.manual_seed(3)
    A = torch.randn(4, 4, dtype=DT)

    def fn(z):
        return torch.sin(z @ A @ z) + (z ** 3).sum()

    x = 0.3 * torch.randn(4, dtype=DT)
    x = x * (0.6 / c**0.5) / x.norm()
    xr = x.clone().requires_grad_(True)
    (G,) = torch.autograd.grad(fn(xr), xr, create_graph=True)
    u, w = torch.randn(2, 4, dtype=DT)

    def hess(t):
        (eh,) = torch.autograd.grad(G, xr, t, retain_graph=True)
        return rhess(ball, x, G.detach(), eh, t)

    lhs = tangent_inner(ball, x, hess(u), w)
    rhs = tangent_inner(ball, x, u, hess(w))
    assert abs(float(lhs - rhs)) < 1e-10 * max(1.0, abs(float(lhs)))
    # d²/dt² f(exp_x(t u)) at t = 0 equals ⟨Hess f[u], u⟩_x (exact geodesic, central differences).
    h = 1e-4
    vals = [float(fn(ball.expmap(x, s * h * u))) for s in (-1, 0, 1)]
    second = (vals[0] - 2 * vals[1] + vals[2]) / h**2
    assert abs(second - float(tangent_inner(ball, x, hess(u), u))) < 1e-5 * max(1.0, abs(second))


def test_rhess_refuses_unknown_manifolds_and_bad_shapes():
    x = torch.linalg.qr(torch.randn(5, 2, dtype=DT))[0]
    z = torch.zeros_like(x)
    with pytest.raises(TypeError, match="canonical"):
        rhess(geoopt.CanonicalStiefel(), x, z, z, z)
    with pytest.raises(TypeError, match="does not know"):
        rhess(geoopt.ProductManifold((geoopt.Euclidean(1), 5)), x[:, 0], z[:, 0], z[:, 0], z[:, 0])
    with pytest.raises(ValueError, match="egrad"):
        rhess(geoopt.EuclideanStiefel(), x, z[:, :1], z, z)
