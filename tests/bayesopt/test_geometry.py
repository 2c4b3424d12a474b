"""Geometry-aware candidates: inside the Mahalanobis ellipsoid and the trust region, and
uniform there (the radial law of a uniform ball)."""

import pytest
import torch

from neurips26.bayesopt.geometry import interpolated_metric, isotropic_ball, mahalanobis_ball, trust_region_box


def spd(d, generator):
    A = torch.randn(d, d, generator=generator, dtype=torch.float64)
    return A @ A.T + 0.5 * torch.eye(d, dtype=torch.float64)


def test_candidates_lie_in_the_ellipsoid_and_are_uniform_in_it():
    generator = torch.Generator().manual_seed(0)
    d = 3
    G, z0 = spd(d, generator), torch.randn(d, generator=generator, dtype=torch.float64)
    pts = mahalanobis_ball(z0, G, 0.8, 20_000, generator=generator)
    q = torch.einsum("ni,ij,nj->n", pts - z0, G, pts - z0)
    assert float(q.max()) <= 0.8**2 * (1 + 1e-12)
    # uniform in a d-ball: P(‖·‖_G ≤ ρ r) = ρ^d
    for rho in (0.5, 0.8):
        frac = float((q <= (rho * 0.8) ** 2).double().mean())
        assert abs(frac - rho**d) < 0.015
    # the ellipsoid's principal axes: extent along G's eigenvectors is r / √λ
    vals, vecs = torch.linalg.eigh(G)
    extent = ((pts - z0) @ vecs).abs().amax(0)
    assert torch.allclose(extent, 0.8 / vals.sqrt(), rtol=0.05)


def test_trust_region_is_respected_and_bad_input_refused():
    generator = torch.Generator().manual_seed(1)
    d = 2
    G = torch.diag(torch.tensor([1.0, 100.0], dtype=torch.float64))
    z0 = torch.zeros(d, dtype=torch.float64)
    lower, upper = torch.tensor([-0.3, -1.0], dtype=torch.float64), torch.tensor([1.0, 1.0], dtype=torch.float64)
    pts = mahalanobis_ball(z0, G, 1.0, 500, lower, upper, generator=generator)
    assert len(pts) == 500 and torch.all((pts >= lower) & (pts <= upper))
    assert float(pts[:, 1].abs().max()) <= 0.1 + 1e-12  # the short axis: 1/√100
    iso = isotropic_ball(z0, 1.0, 500, lower, upper, generator=generator)
    assert float(iso[:, 1].abs().max()) > 0.5  # the isotropic ball ignores the metric
    box = trust_region_box(z0, torch.tensor([0.4, 0.4], dtype=torch.float64), 500, lower, upper, generator=generator)
    assert torch.all(box.abs() <= 0.2 + 1e-12)
    with pytest.raises(torch.linalg.LinAlgError):
        mahalanobis_ball(z0, -torch.eye(2, dtype=torch.float64), 1.0, 5)
    with pytest.raises(ValueError, match="lower < upper"):
        mahalanobis_ball(z0, G, 1.0, 5, upper, lower)
    with pytest.raises(RuntimeError, match="barely meets"):
        mahalanobis_ball(z0, G, 1.0, 5, torch.tensor([5.0, 5.0], dtype=torch.float64),
                         torch.tensor([6.0, 6.0], dtype=torch.float64), max_rounds=3)


def test_interpolated_metric_is_the_inverse_of_the_local_covariance():
    means = torch.tensor([[0.0, 0.0], [10.0, 10.0]], dtype=torch.float64)
    covs = torch.tensor([[0.1, 0.4], [2.0, 2.0]], dtype=torch.float64)
    G = interpolated_metric(torch.tensor([0.1, -0.1], dtype=torch.float64), means, covs)
    assert torch.allclose(G, torch.diag(1 / covs[0]), rtol=1e-6)
    Gb = interpolated_metric(torch.tensor([[10.0, 10.0], [0.0, 0.0]], dtype=torch.float64), means, covs)
    assert Gb.shape == (2, 2, 2) and torch.allclose(Gb[0], torch.diag(1 / covs[1]), rtol=1e-6)
