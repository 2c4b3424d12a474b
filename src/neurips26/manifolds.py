"""Riemannian pieces that geoopt lacks, shared one level down: the Grassmann manifold as a
:class:`geoopt.Manifold`, and :func:`rhess`, the conversion of a Euclidean Hessian-vector
product into the Riemannian one for geoopt's manifolds (geoopt converts gradients only).

Needs the ``riemann`` extra (geoopt); ``import neurips26.optim`` does not import this module.

Formulas (point ``x``, Euclidean gradient ``G``, Euclidean Hessian-vector product ``H[u]``,
tangent vector ``u``; ``sym(A) = (A + Aᵀ)/2``), as in Absil, Mahony and Sepulchre (2008) and
Boumal (2023), and as pymanopt implements them:

* Euclidean: ``H[u]``.
* Sphere (unit norm over the last dimension): ``P_x(H[u]) − ⟨x, G⟩ u``.
* Stiefel with the embedded (Euclidean) metric: ``P_x(H[u] − u·sym(xᵀG))``.
* Grassmann (``n × p`` orthonormal representatives, quotient metric): ``P_x(H[u]) − u·xᵀG``.
* SPD with the affine-invariant metric: ``x·sym(H[u])·x + sym(u·sym(G)·x)``.
* Poincaré ball of curvature ``−c`` (conformal factor ``λ = 2/(1 − c‖x‖²)``):
  ``(H[u] + cλ(⟨x, G⟩u − ⟨x, u⟩G − ⟨u, G⟩x)) / λ²`` (Levi-Civita connection of a conformal metric).
"""

from __future__ import annotations

import geoopt
import torch
from geoopt.manifolds.stereographic.manifold import PoincareBall

__all__ = ["Grassmann", "rhess", "supported_manifold", "tangent_inner"]


def _sym(a: torch.Tensor) -> torch.Tensor:
    return 0.5 * (a + a.transpose(-1, -2))


def _polar(a: torch.Tensor) -> torch.Tensor:
    u, _, vh = torch.linalg.svd(a, full_matrices=False)
    return u @ vh


class Grassmann(geoopt.Manifold):
    r"""The Grassmann manifold Gr(n, p) of p-dimensional subspaces of Rⁿ, each represented by
    an ``n × p`` matrix ``x`` with orthonormal columns (any ``x·Q``, ``Q ∈ O(p)``, is the same
    point). Tangent vectors at ``x`` are horizontal: ``xᵀu = 0``; the metric is the Euclidean
    one of the embedding restricted to them.

    Batched over leading dimensions like geoopt's Stiefel. Retraction: the polar factor of
    ``x + u``; distance: the 2-norm of the principal angles; transport: projection.
    """

    name = "Grassmann"
    ndim = 2
    reversible = False

    def _check_shape(self, shape, name):
        ok, reason = super()._check_shape(shape, name)
        if not ok:
            return False, reason
        if shape[-1] > shape[-2]:
            return False, f"`{name}` should have shape[-1] <= shape[-2], got {shape[-1]} > {shape[-2]}"
        return True, None

    def _check_point_on_manifold(self, x: torch.Tensor, *, atol=1e-5, rtol=1e-5):
        xtx = x.transpose(-1, -2) @ x
        eye = torch.eye(x.shape[-1], dtype=x.dtype, device=x.device)
        if not torch.allclose(xtx, eye.expand_as(xtx), atol=atol, rtol=rtol):
            return False, f"`x^T x != I` with atol={atol}, rtol={rtol}"
        return True, None

    def _check_vector_on_tangent(self, x: torch.Tensor, u: torch.Tensor, *, atol=1e-5, rtol=1e-5):
        xtu = x.transpose(-1, -2) @ u
        if not torch.allclose(xtu, torch.zeros_like(xtu), atol=atol, rtol=rtol):
            return False, f"`x^T u != 0` with atol={atol}, rtol={rtol}"
        return True, None

    def proju(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        return u - x @ (x.transpose(-1, -2) @ u)

    egrad2rgrad = proju

    def projx(self, x: torch.Tensor) -> torch.Tensor:
        return _polar(x)

    def inner(self, x: torch.Tensor, u: torch.Tensor, v: torch.Tensor | None = None, *, keepdim=False) -> torch.Tensor:
        if v is None:
            v = u
        return (u * v).sum((-1, -2), keepdim=keepdim)

    def norm(self, x: torch.Tensor, u: torch.Tensor, *, keepdim=False) -> torch.Tensor:
        return torch.linalg.matrix_norm(u, keepdim=keepdim)

    def retr(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        return _polar(x + u)

    def expmap(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        # Edelman, Arias and Smith (1998): x V cos(S) Vᵀ + U sin(S) Vᵀ for u = U S Vᵀ.
        uu, s, vh = torch.linalg.svd(u, full_matrices=False)
        v = vh.transpose(-1, -2)
        return (x @ v) * torch.cos(s).unsqueeze(-2) @ vh + uu * torch.sin(s).unsqueeze(-2) @ vh

    def transp(self, x: torch.Tensor, y: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return self.proju(y, v)

    def dist(self, x: torch.Tensor, y: torch.Tensor, *, keepdim=False) -> torch.Tensor:
        s = torch.linalg.svdvals(x.transpose(-1, -2) @ y).clamp(max=1.0)  # cosines of the principal angles
        d = torch.linalg.vector_norm(torch.arccos(s), dim=-1)
        return d[..., None, None] if keepdim else d

    def random(self, *size, dtype=None, device=None, generator: torch.Generator | None = None) -> geoopt.ManifoldTensor:
        """A random point (the Q factor of a Gaussian matrix: uniform on the Grassmannian)."""
        self._assert_check_shape(tuple(size), "x")
        a = torch.randn(*size, dtype=dtype, device=device, generator=generator)
        return geoopt.ManifoldTensor(torch.linalg.qr(a)[0], manifold=self)

    def ehess2rhess(self, x, egrad, ehess_u, u):
        return self.proju(x, ehess_u) - u @ (x.transpose(-1, -2) @ egrad)


def supported_manifold(manifold) -> bool:
    """Whether :func:`rhess` knows ``manifold``'s Riemannian Hessian."""
    return isinstance(manifold, (geoopt.Euclidean, geoopt.Sphere, geoopt.EuclideanStiefel, Grassmann, PoincareBall,
                                 geoopt.SymmetricPositiveDefinite)) and not isinstance(manifold, geoopt.CanonicalStiefel)


def rhess(manifold, x: torch.Tensor, egrad: torch.Tensor, ehess_u: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """The Riemannian Hessian of ``f`` at ``x`` applied to the tangent vector ``u``, from the
    Euclidean gradient ``egrad = ∇f(x)`` and the Euclidean Hessian-vector product
    ``ehess_u = ∇²f(x)[u]`` (all with ``x``'s shape; formulas in the module docstring).

    ``manifold``: geoopt's ``Euclidean``, ``Sphere``, ``EuclideanStiefel`` (embedded metric),
    ``SymmetricPositiveDefinite`` (affine-invariant metric), ``PoincareBall`` (any curvature)
    or :class:`Grassmann`. Other manifolds (canonical Stiefel, products, ...) raise TypeError.
    """
    for name, t in (("egrad", egrad), ("ehess_u", ehess_u), ("u", u)):
        if not isinstance(t, torch.Tensor) or t.shape != x.shape:
            raise ValueError(f"{name} must be a tensor of x's shape {tuple(x.shape)}, got "
                             f"{tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}")
    if isinstance(manifold, Grassmann):
        return manifold.ehess2rhess(x, egrad, ehess_u, u)
    if isinstance(manifold, geoopt.CanonicalStiefel):
        raise TypeError("rhess supports Stiefel with the embedded metric (geoopt.EuclideanStiefel), not the canonical one")
    if isinstance(manifold, geoopt.EuclideanStiefel):
        return manifold.proju(x, ehess_u - u @ _sym(x.transpose(-1, -2) @ egrad))
    if isinstance(manifold, geoopt.Sphere):
        return manifold.proju(x, ehess_u) - (x * egrad).sum(-1, keepdim=True) * u
    if isinstance(manifold, geoopt.SymmetricPositiveDefinite):
        if manifold.default_metric != geoopt.manifolds.symmetric_positive_definite.SPDMetric.AIM:
            raise TypeError("rhess supports the SPD manifold with the affine-invariant metric only")
        return x @ _sym(ehess_u) @ x + _sym(u @ _sym(egrad) @ x)
    if isinstance(manifold, PoincareBall):
        c = manifold.c.to(x)
        lam = 2.0 / (1.0 - c * (x * x).sum(-1, keepdim=True))

        def dot(a, b):
            return (a * b).sum(-1, keepdim=True)

        return (ehess_u + c * lam * (dot(x, egrad) * u - dot(x, u) * egrad - dot(u, egrad) * x)) / lam**2
    if isinstance(manifold, geoopt.Euclidean):
        return ehess_u
    raise TypeError(f"rhess does not know the Riemannian Hessian of {type(manifold).__name__}; supported: Euclidean, "
                    "Sphere, EuclideanStiefel, SymmetricPositiveDefinite (AIM), PoincareBall, Grassmann")


def tangent_inner(manifold, x: torch.Tensor, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """⟨u, v⟩ in ``manifold``'s metric at ``x``, summed over every dimension of ``x`` (a product of
    copies, e.g. rows on a ``Sphere`` or geoopt's ``Euclidean(ndim=0)``, sums their inner products).
    ``u`` may carry leading batch dimensions (``(k, *x.shape)``): the result then has shape ``(k,)``."""
    ip = manifold.inner(x, u, v)
    lead = u.dim() - x.dim()
    return ip.reshape(*ip.shape[:lead], -1).sum(-1)
