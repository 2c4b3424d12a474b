"""The marginalized quadratic kernel and the expected RBF against Monte Carlo, their
Gram matrices' PSD-ness and rank, the S → 0 limit, and GPyTorch's kernel test case."""

import math
import unittest

import pytest
import torch
from gpytorch.test.base_kernel_test_case import BaseKernelTestCase

from neurips26.bayesopt import ExpectedRBFKernel, MarginalizedQuadraticKernel


def random_posteriors(n, d, full, generator, scale=1.0):
    m = torch.randn(n, d, generator=generator, dtype=torch.float64)
    if full:
        L = torch.randn(n, d, d, generator=generator, dtype=torch.float64) * 0.5 * scale
        S = L @ L.transpose(-1, -2) + 0.05 * torch.eye(d, dtype=torch.float64)
        return m, S, torch.cat([m, S.flatten(-2)], -1)
    s = torch.rand(n, d, generator=generator, dtype=torch.float64) * scale + 0.01
    return m, s, torch.cat([m, s], -1)


def sample(m, S, full, count, generator):
    eps = torch.randn(count, m.shape[-1], generator=generator, dtype=torch.float64)
    return m + (eps @ torch.linalg.cholesky(S).T if full else eps * S.sqrt())


@pytest.mark.parametrize("full", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_closed_form_matches_monte_carlo_within_3_standard_errors(full, seed):
    generator = torch.Generator().manual_seed(seed)
    d = 3
    (m1, S1, x1), (m2, S2, x2) = random_posteriors(1, d, full, generator), random_posteriors(1, d, full, generator)
    k = MarginalizedQuadraticKernel("full" if full else "diag", latent_dims=d).double()
    ell = torch.rand(1, d, generator=generator, dtype=torch.float64) + 0.5
    c = float(torch.rand(1, generator=generator)) * 2
    k.lengthscale, k.offset = ell, c
    with torch.no_grad():
        closed = float(k(x1, x2).to_dense())
    n = 100_000
    z1, z2 = sample(m1[0], S1[0], full, n, generator) / ell, sample(m2[0], S2[0], full, n, generator) / ell
    vals = ((z1 * z2).sum(-1) + c) ** 2
    se = float(vals.std()) / math.sqrt(n)
    assert abs(closed - float(vals.mean())) < 3 * se


def test_expected_rbf_matches_monte_carlo():
    generator = torch.Generator().manual_seed(7)
    (m1, s1, x1), (m2, s2, x2) = random_posteriors(1, 3, False, generator), random_posteriors(1, 3, False, generator)
    k = ExpectedRBFKernel(latent_dims=3).double()
    ell = torch.tensor([[0.7, 1.2, 2.0]], dtype=torch.float64)
    k.lengthscale = ell
    n = 100_000
    z1, z2 = sample(m1[0], s1[0], False, n, generator), sample(m2[0], s2[0], False, n, generator)
    vals = torch.exp(-0.5 * (((z1 - z2) / ell) ** 2).sum(-1))
    with torch.no_grad():
        closed = float(k(x1, x2).to_dense())
    assert abs(closed - float(vals.mean())) < 3 * float(vals.std()) / math.sqrt(n)


@pytest.mark.parametrize("full", [False, True])
def test_gram_is_psd_with_the_feature_space_rank(full):
    generator = torch.Generator().manual_seed(11)
    d, n = 3, 40
    _, _, x = random_posteriors(n, d, full, generator)
    k = MarginalizedQuadraticKernel("full" if full else "diag").double()
    k.offset = 0.7
    K = k(x).to_dense()
    eig = torch.linalg.eigvalsh(K)
    assert float(eig.min()) >= -1e-8 * float(K.diagonal().sum())
    assert int(torch.linalg.matrix_rank(K, rtol=1e-10)) <= d * (d + 1) // 2 + d + 1
    assert torch.allclose(k(x, diag=True), K.diagonal())


def test_vanishing_covariance_gives_the_quadratic_kernel_on_means():
    generator = torch.Generator().manual_seed(12)
    m = torch.randn(6, 4, generator=generator, dtype=torch.float64)
    x = torch.cat([m, torch.zeros(6, 4, dtype=torch.float64)], -1)
    k = MarginalizedQuadraticKernel(latent_dims=4).double()
    ell = torch.tensor([[0.5, 1.0, 1.5, 2.0]], dtype=torch.float64)
    k.lengthscale, k.offset = ell, 1.3
    mm = (m / ell) @ (m / ell).T
    assert torch.allclose(k(x).to_dense(), (mm + 1.3) ** 2)
    # and the full layout agrees with the diagonal one on diagonal S
    s = torch.rand(6, 4, generator=generator, dtype=torch.float64)
    full = MarginalizedQuadraticKernel("full", latent_dims=4).double()
    full.lengthscale, full.offset = ell, 1.3
    xf = torch.cat([m, torch.diag_embed(s).flatten(-2)], -1)
    xd = torch.cat([m, s], -1)
    assert torch.allclose(full(xf).to_dense(), k(xd).to_dense())


def test_bad_layouts_are_refused():
    with pytest.raises(ValueError, match="even width"):
        MarginalizedQuadraticKernel()(torch.randn(3, 5)).to_dense()
    with pytest.raises(ValueError, match="d \\+ d²"):
        MarginalizedQuadraticKernel("full")(torch.randn(3, 5)).to_dense()
    with pytest.raises(ValueError, match="covariance"):
        MarginalizedQuadraticKernel("block")


class TestMarginalizedQuadraticKernel(unittest.TestCase, BaseKernelTestCase):
    def create_kernel_no_ard(self, **kwargs):
        return MarginalizedQuadraticKernel(**kwargs)

    def create_kernel_ard(self, num_dims, **kwargs):
        return MarginalizedQuadraticKernel(latent_dims=num_dims // 2, **kwargs)


class TestExpectedRBFKernel(unittest.TestCase, BaseKernelTestCase):
    def create_kernel_no_ard(self, **kwargs):
        return ExpectedRBFKernel(**kwargs)

    def create_kernel_ard(self, num_dims, **kwargs):
        return ExpectedRBFKernel(latent_dims=num_dims // 2, **kwargs)

    def create_data_no_batch(self):
        return torch.rand(50, 10)  # variances must be >= 0 for the RBF's square roots

    def create_data_single_batch(self):
        return torch.rand(2, 50, 2)

    def create_data_double_batch(self):
        return torch.rand(3, 2, 50, 2)
