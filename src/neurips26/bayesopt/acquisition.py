"""Two batch acquisitions as BoTorch ``AcquisitionFunction``s: each takes the points already
chosen or still running as ``X_pending`` and scores one more point, so it works with
``optimize_acqf`` on its own (``sequential=True`` grows a batch greedily through
``set_X_pending``) as well as inside the ``BUCB`` and ``LocalPenalization`` proposers.

* ``BatchUpperConfidenceBound`` (Desautels, Krause & Burdick 2014): the mean of the real
  data plus √β times the posterior sd given the pending inputs as well (their outcomes do
  not enter the variance).
* ``LocallyPenalizedAcquisition`` (González, Dai, Hennig & Lawrence 2016): a base
  acquisition made positive by a softplus and multiplied by one penalty per pending point.
"""

from __future__ import annotations

import math

import torch
from botorch.acquisition import AcquisitionFunction
from botorch.utils.transforms import t_batch_mode_transform
from torch import Tensor

from ._checks import check_points, check_real

__all__ = ["BatchUpperConfidenceBound", "LocallyPenalizedAcquisition"]


class BatchUpperConfidenceBound(AcquisitionFunction):
    """Batch UCB, for maximization: with P the pending inputs (p, d),

        α(x) = μ(x) + β^{1/2} σ_P(x),   σ²_P(x) = σ²(x) − Σ(x, P) [Σ(P, P) + σ_n² I]⁻¹ Σ(P, x),

    μ and Σ the posterior mean and covariance of ``model`` (the real data only), σ_n² its
    observation noise. σ²_P is the variance of the model that has also seen outcomes at P,
    whatever they were; it is computed from this formula, not through
    ``condition_on_observations``, so it checks the kriging-believer code independently.
    Without pending points it is BoTorch's ``UpperConfidenceBound``."""

    def __init__(self, model, beta: float, X_pending: Tensor | None = None):
        check_real("beta", beta, low=0.0)
        super().__init__(model)
        self.beta = beta
        self.set_X_pending(X_pending)

    def set_X_pending(self, X_pending: Tensor | None = None) -> None:
        """As BoTorch's, after checking that ``X_pending`` is None or a finite (p, d) tensor."""
        _check_X_pending(X_pending)
        super().set_X_pending(X_pending)

    @t_batch_mode_transform(expected_q=1)
    def forward(self, X: Tensor) -> Tensor:
        """α at each t-batch of one point: X (b..., 1, d) → (b...)."""
        x = X[..., 0, :].reshape(-1, X.shape[-1])
        post = self.model.posterior(x)
        mu, var = post.mean[..., 0], post.variance[..., 0]
        if self.X_pending is not None:
            var = var - self.hallucinated_reduction(x)
        return (mu + math.sqrt(self.beta) * var.clamp_min(0).sqrt()).reshape(X.shape[:-2])

    def hallucinated_reduction(self, x: Tensor) -> Tensor:
        """σ²(x) − σ²_P(x) = Σ(x, P) [Σ(P, P) + σ_n² I]⁻¹ Σ(P, x) for x (b, d): (b,)."""
        P = self.X_pending
        joint = torch.cat([P.expand(len(x), *P.shape), x[:, None, :]], dim=1)  # (b, p+1, d)
        noisy = self.model.posterior(joint, observation_noise=True).distribution.covariance_matrix
        S_pp = noisy[:, :-1, :-1]  # Σ(P, P) + σ_n² I
        s_px = noisy[:, :-1, -1:]  # Σ(P, x): noise is independent, so the cross terms are noiseless
        L = torch.linalg.cholesky(S_pp)
        v = torch.linalg.solve_triangular(L, s_px, upper=False)
        return (v**2).sum((-2, -1))


class LocallyPenalizedAcquisition(AcquisitionFunction):
    """Local penalization, for maximization: with x_j the pending points (m, d),

        α̃(x) = g(α(x)) Π_j φ_j(x),   φ_j(x) = Φ((L ‖x − x_j‖ − M + μ(x_j)) / σ(x_j)),

    g = softplus (the penalties multiply, so α must be positive), α the base ``acquisition``
    (one point per t-batch), L the Lipschitz constant ``lipschitz`` of f and M = ``best_f`` the
    best value: φ_j is the probability that x lies outside the ball around x_j in which f
    cannot reach M, under the posterior of ``model`` at x_j (mean μ, sd σ). Without pending
    points the value is g(α(x))."""

    def __init__(self, model, acquisition: AcquisitionFunction, lipschitz: float, best_f: float,
                 X_pending: Tensor | None = None):
        check_real("lipschitz", lipschitz, low=0.0, low_open=True)
        check_real("best_f", best_f)
        super().__init__(model)
        self.acquisition, self.lipschitz, self.best_f = acquisition, lipschitz, best_f
        self.set_X_pending(X_pending)

    def set_X_pending(self, X_pending: Tensor | None = None) -> None:
        """Also caches the posterior mean and sd (each (m,)) at the pending points, which
        every penalty needs."""
        _check_X_pending(X_pending)
        super().set_X_pending(X_pending)
        self.mean_pending = self.sd_pending = None
        if self.X_pending is not None:
            with torch.no_grad():
                post = self.model.posterior(self.X_pending)
                self.mean_pending = post.mean[:, 0]
                self.sd_pending = post.variance[:, 0].clamp_min(1e-12).sqrt()

    @t_batch_mode_transform(expected_q=1)
    def forward(self, X: Tensor) -> Tensor:
        """α̃ at each t-batch of one point: X (b, 1, d) → (b,)."""
        if self.X_pending is None:
            return torch.nn.functional.softplus(self.acquisition(X))
        r = torch.cdist(X[..., 0, :], self.X_pending)  # (b, m)
        z = (self.lipschitz * r - self.best_f + self.mean_pending) / self.sd_pending
        log_phi = torch.special.log_ndtr(z).sum(-1)  # the product of the Φ's, in logs: no underflow
        return torch.nn.functional.softplus(self.acquisition(X)) * log_phi.exp()


def _check_X_pending(X_pending) -> None:
    if X_pending is not None:
        check_points("X_pending", X_pending, rows="p")
