"""Geometry-aware candidate sampling in a VAE's latent space.

The metric. A VAE's encoder gives every latent point a posterior covariance Σ(z) (from
re-encoding decode(z), or interpolated from the training points' posteriors). Where Σ(z)
is small the encoder is certain and a step of a given Euclidean length changes the decoded
object a lot; where it is large, little. The Fisher metric of the Gaussian encoder family
in its mean parameter is G(z) = Σ(z)⁻¹, so lengths are measured as ‖δ‖²_G = δᵀ G δ.

The ball. To first order the geodesic ball of radius r around an incumbent z₀ is the
Mahalanobis ellipsoid {z₀ + δ : δᵀ G(z₀) δ ≤ r²} (the metric frozen at z₀; the error is
O(r³) for a smooth G). Candidates are drawn uniformly from it: with G = L Lᵀ (Cholesky),
δ = r · u^{1/d} · L⁻ᵀ ξ / ‖ξ‖, ξ ∼ N(0, I), u ∼ U(0, 1) (a uniform point of the unit ball,
mapped by L⁻ᵀ onto the ellipsoid, whose volume element is constant), then kept only inside
the trust-region box (rejection, so that the law stays uniform on the intersection).
The baselines: TuRBO's box (uniform in the trust region) and the isotropic Euclidean ball.
"""

from __future__ import annotations

import torch

from ._checks import check_finite, check_int, check_real

__all__ = ["interpolated_metric", "mahalanobis_ball", "isotropic_ball", "trust_region_box"]


def interpolated_metric(z: torch.Tensor, train_means: torch.Tensor, train_covs: torch.Tensor,
                        bandwidth: float = 1.0) -> torch.Tensor:
    """G(z) = Σ(z)⁻¹ with Σ(z) the kernel-weighted mean of the training posteriors'
    covariances (Gaussian weights of ``bandwidth`` on the distance to their means).
    ``train_covs`` is (n, d) diagonal or (n, d, d) full; returns (..., d, d)."""
    check_real("bandwidth", bandwidth, low=0.0, low_open=True)
    if train_means.ndim != 2 or z.shape[-1] != train_means.shape[-1]:
        raise ValueError(f"train_means must be (n, d) with d the width of z ({z.shape[-1]}), "
                         f"got shape {tuple(train_means.shape)}")
    n, d = train_means.shape
    if train_covs.shape not in ((n, d), (n, d, d)):
        raise ValueError(f"train_covs must be ({n}, {d}) (diagonal) or ({n}, {d}, {d}) (full), one per row of "
                         f"train_means, got shape {tuple(train_covs.shape)}")
    covs = torch.diag_embed(train_covs) if train_covs.ndim == 2 else train_covs
    d2 = ((z[..., None, :] - train_means) ** 2).sum(-1)
    w = torch.softmax(-0.5 * d2 / bandwidth**2, dim=-1)
    sigma = torch.einsum("...n,nij->...ij", w, covs)
    return torch.linalg.inv(sigma)


def _check_box(lower, upper, d):
    lower, upper = torch.as_tensor(lower), torch.as_tensor(upper)
    if lower.shape != (d,) or upper.shape != (d,) or not torch.all(lower < upper):
        raise ValueError(f"the trust region needs lower < upper, both of shape ({d},), got lower "
                         f"{tuple(lower.shape)} and upper {tuple(upper.shape)}")
    return lower, upper


class NotPositiveDefiniteError(ValueError, torch.linalg.LinAlgError):
    """A metric that is not symmetric positive definite: a ValueError (bad input), and the
    ``torch.linalg.LinAlgError`` that ``torch.linalg.cholesky`` raised here before."""


def _check_center(center):
    if center.ndim != 1 or len(center) == 0:
        raise ValueError(f"center must be a (d,) point with d >= 1, got shape {tuple(center.shape)}")
    return check_finite("center", center)


def _inside(points, lower, upper):
    return torch.all((points >= lower) & (points <= upper), dim=-1)


def mahalanobis_ball(center: torch.Tensor, metric: torch.Tensor, radius: float, n: int, lower=None, upper=None,
                     generator: torch.Generator | None = None, max_rounds: int = 100) -> torch.Tensor:
    """``n`` points uniform in {center + δ : δᵀ metric δ ≤ radius²}, inside [lower, upper]
    when given (rejection). ``metric`` is a symmetric positive definite (d, d) matrix."""
    _check_center(center)
    d = center.shape[-1]
    if metric.shape != (d, d):
        raise ValueError(f"metric must be ({d}, {d}), got {tuple(metric.shape)}")
    check_real("radius", radius, low=0.0, low_open=True)
    n = check_int("n", n, 0)
    check_int("max_rounds", max_rounds, 1)
    check_finite("metric", metric)
    L, info = torch.linalg.cholesky_ex(metric)
    if int(info) != 0:
        raise NotPositiveDefiniteError(f"metric must be symmetric positive definite (its Cholesky factorization "
                                       f"failed at leading minor {int(info)})")
    box = _check_box(lower, upper, d) if lower is not None else None
    out, got = [], 0
    for _ in range(max_rounds):
        xi = torch.randn(n, d, generator=generator, dtype=center.dtype)
        u = torch.rand(n, 1, generator=generator, dtype=center.dtype)
        unit = xi / xi.norm(dim=-1, keepdim=True) * u ** (1.0 / d) * radius
        delta = torch.linalg.solve_triangular(L.T, unit.T, upper=True).T  # L⁻ᵀ · unit
        pts = center + delta
        if box is not None:
            pts = pts[_inside(pts, *box)]
        out.append(pts)
        got += len(pts)
        if got >= n:
            return torch.cat(out)[:n]
    raise RuntimeError(f"only {got} of {n} candidates fell inside the trust region in {max_rounds} rounds: "
                       "the ellipsoid barely meets the box")


def isotropic_ball(center, radius, n, lower=None, upper=None, generator=None) -> torch.Tensor:
    """The Euclidean baseline: uniform in the ball of ``radius`` (the identity metric)."""
    d = center.shape[-1]
    return mahalanobis_ball(center, torch.eye(d, dtype=center.dtype), radius, n, lower, upper, generator)


def trust_region_box(center, lengths, n, lower, upper, generator=None) -> torch.Tensor:
    """TuRBO's candidates: uniform in the box of side ``lengths`` around ``center``,
    clipped to the search bounds [lower, upper]."""
    _check_center(center)
    d = center.shape[-1]
    lower, upper = _check_box(lower, upper, d)
    n = check_int("n", n, 0)
    lengths_t = torch.as_tensor(lengths)
    if lengths_t.shape not in ((), (d,)) or not bool(torch.all(torch.isfinite(lengths_t) & (lengths_t > 0))):
        raise ValueError(f"lengths must be finite and > 0, a number or ({d},), got {lengths!r}")
    lo = torch.maximum(center - lengths / 2, lower)
    hi = torch.minimum(center + lengths / 2, upper)
    return lo + (hi - lo) * torch.rand(n, d, generator=generator, dtype=center.dtype)
