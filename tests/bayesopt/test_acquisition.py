"""BUCB and local penalization as BoTorch acquisitions: on a (b, 1, d) t-batch each equals its
closed form written out here from the kernel by hand (exact GP algebra, Φ as a product), and
``optimize_acqf`` maximizes each on its own, also growing a batch through ``X_pending``."""

import math

import pytest
import torch

pytest.importorskip("botorch")
from botorch.acquisition import UpperConfidenceBound  # noqa: E402
from botorch.models import SingleTaskGP  # noqa: E402
from botorch.optim import optimize_acqf  # noqa: E402
from gpytorch.kernels import RBFKernel  # noqa: E402

from neurips26.bayesopt import BatchUpperConfidenceBound, LocallyPenalizedAcquisition  # noqa: E402

BOUNDS = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
LENGTHSCALE, NOISE, MEAN = 0.3, 0.05, 0.2
TOL = 1e-6  # GPyTorch's own posterior is within ~1e-7 of the exact algebra (its Cholesky safeguards)


def model_and_data(n=10):
    """A GP with known hyperparameters and no transforms, so that the closed forms below
    need only the RBF kernel, the noise variance and the constant mean."""
    generator = torch.Generator().manual_seed(0)
    X = torch.rand(n, 2, generator=generator, dtype=torch.float64)
    Y = torch.sin(5 * X[:, :1]) * torch.cos(3 * X[:, 1:])
    model = SingleTaskGP(X, Y, train_Yvar=torch.full_like(Y, NOISE), covar_module=RBFKernel(),
                         outcome_transform=None)
    model.covar_module.lengthscale = LENGTHSCALE
    model.mean_module.constant.data.fill_(MEAN)
    return model.eval(), X, Y[:, 0]


def k(A, B):
    return torch.exp(-0.5 * torch.cdist(A, B) ** 2 / LENGTHSCALE**2)


def posterior_by_hand(X, Y, Z, extra=None):
    """Mean (from the data X, Y) and variance (given the inputs X and ``extra``, all observed
    with noise NOISE) of the GP at Z (n, d)."""
    mean = MEAN + k(Z, X) @ torch.linalg.solve(k(X, X) + NOISE * torch.eye(len(X), dtype=X.dtype), Y - MEAN)
    A = X if extra is None else torch.cat([X, extra])
    K = k(A, A) + NOISE * torch.eye(len(A), dtype=A.dtype)
    var = 1.0 - (k(Z, A) * torch.linalg.solve(K, k(A, Z)).T).sum(-1)
    return mean, var


def grid(n=9):
    g = torch.linspace(0, 1, n, dtype=torch.float64)
    return torch.cartesian_prod(g, g)


@pytest.mark.parametrize("n_pending", [0, 1, 3])
def test_bucb_is_the_mean_plus_root_beta_times_the_sd_given_the_pending_inputs(n_pending):
    model, X, Y = model_and_data()
    P = torch.tensor([[0.5, 0.5], [0.1, 0.9], [0.8, 0.2]], dtype=torch.float64)[:n_pending]
    beta = 3.0
    acqf = BatchUpperConfidenceBound(model, beta, X_pending=P if n_pending else None)
    Z = grid()
    with torch.no_grad():
        value = acqf(Z[:, None, :])
    mean, var = posterior_by_hand(X, Y, Z, P if n_pending else None)
    assert value.shape == (len(Z),)
    assert torch.allclose(value, mean + math.sqrt(beta) * var.clamp_min(0).sqrt(), rtol=0, atol=TOL)
    if n_pending:  # the pending inputs lower the bonus near them, nowhere raise it
        with torch.no_grad():
            plain = UpperConfidenceBound(model, beta=beta)(Z[:, None, :])
        assert torch.all(value <= plain + 1e-12) and float((plain - value).max()) > 1e-3


@pytest.mark.parametrize("n_pending", [0, 1, 3])
def test_local_penalization_is_softplus_of_the_base_times_the_phis(n_pending):
    model, X, Y = model_and_data()
    centers = torch.tensor([[0.5, 0.5], [0.1, 0.9], [0.8, 0.2]], dtype=torch.float64)[:n_pending]
    beta, L, M = 2.0, 4.0, float(Y.max())
    acqf = LocallyPenalizedAcquisition(model, UpperConfidenceBound(model, beta=beta), L, M,
                                       X_pending=centers if n_pending else None)
    Z = grid()
    with torch.no_grad():
        value = acqf(Z[:, None, :])
    mean, var = posterior_by_hand(X, Y, Z)
    expected = torch.nn.functional.softplus(mean + math.sqrt(beta) * var.sqrt())
    if n_pending:
        mu_c, var_c = posterior_by_hand(X, Y, centers)
        normal = torch.distributions.Normal(torch.tensor(0.0, dtype=torch.float64), 1.0)
        for j in range(n_pending):
            r = (Z - centers[j]).norm(dim=-1)
            expected = expected * normal.cdf((L * r - M + mu_c[j]) / var_c[j].sqrt())
    assert value.shape == (len(Z),)
    assert torch.allclose(value, expected, rtol=0, atol=TOL)
    if n_pending:  # each center is penalized hardest where it sits
        with torch.no_grad():
            at_centers = acqf(centers[:, None, :])
            base = torch.nn.functional.softplus(UpperConfidenceBound(model, beta=beta)(centers[:, None, :]))
        assert torch.all(at_centers < 0.6 * base)


@pytest.mark.parametrize("kind", ["bucb", "lp"])
def test_optimize_acqf_runs_on_each_acquisition_alone_and_grows_a_batch(kind):
    model, X, Y = model_and_data()
    pending = torch.tensor([[0.5, 0.5]], dtype=torch.float64)

    def make(X_pending):
        if kind == "bucb":
            return BatchUpperConfidenceBound(model, 4.0, X_pending=X_pending)
        return LocallyPenalizedAcquisition(model, UpperConfidenceBound(model, beta=4.0), 4.0, float(Y.max()),
                                           X_pending=X_pending)

    acqf = make(pending)
    x, value = optimize_acqf(acqf, BOUNDS, q=1, num_restarts=2, raw_samples=64)
    assert x.shape == (1, 2) and torch.all((x >= 0) & (x <= 1))
    with torch.no_grad():
        assert torch.isclose(value, acqf(x[None]).squeeze())
        assert float(value) >= float(acqf(grid(5)[:, None, :]).max()) - 1e-6  # as good as a coarse grid
    batch, _ = optimize_acqf(acqf, BOUNDS, q=3, num_restarts=2, raw_samples=64, sequential=True)
    assert batch.shape == (3, 2) and float(torch.pdist(batch).min()) > 1e-3  # three distinct points
    assert torch.equal(acqf.X_pending, pending)  # optimize_acqf gives the pending points back


def test_bad_arguments_are_refused():
    model, _, _ = model_and_data()
    with pytest.raises(ValueError, match="beta"):
        BatchUpperConfidenceBound(model, -1.0)
    with pytest.raises(ValueError, match="lipschitz"):
        LocallyPenalizedAcquisition(model, UpperConfidenceBound(model, beta=1.0), 0.0, 0.0)
    with pytest.raises(AssertionError, match="q=1"):
        BatchUpperConfidenceBound(model, 1.0)(torch.rand(4, 2, 2, dtype=torch.float64))
