"""Kernels on Gaussian posteriors: the marginalized quadratic kernel and the expected RBF.

An input is a VAE encoder's posterior q(z | x) = N(m, S), given as one row: ``[m, diag S]``
(``covariance="diag"``, 2d columns) or ``[m, vec S]`` (``covariance="full"``, d + d²
columns). The marginalized kernel integrates the base kernel over both posteriors,

    k̄(x, x′) = E_{z∼q(·|x), z′∼q(·|x′)} [(zᵀz′ + c)²]
             = tr(SS′) + mᵀS′m + m′ᵀSm′ + (mᵀm′)² + 2c·mᵀm′ + c²,

because E[(zᵀz′)²] = E_{z′}[z′ᵀ(S + mmᵀ)z′] = tr((S + mmᵀ)(S′ + m′m′ᵀ)) for independent z, z′.
ARD: m and S are scaled by Λ^{1/2} = diag(1/ℓ) first (the base kernel on Λ^{1/2}z).

The diagonal: k̄(x, x) takes z and z′ as independent copies from the same posterior, the
same formula with x′ = x. Then k̄ is the inner product of the posteriors' mean embeddings in
the quadratic kernel's feature space, so the Gram matrix is PSD with rank at most
d(d+1)/2 + d + 1 (the feature space's dimension). The other choice, E[(zᵀz + c)²] with the
same z, adds a non-negative amount per point and breaks that rank bound.
"""

from __future__ import annotations

import math

import torch
from gpytorch.constraints import Positive
from gpytorch.kernels import Kernel

__all__ = ["MarginalizedQuadraticKernel", "ExpectedRBFKernel", "split_posterior"]


def split_posterior(x: torch.Tensor, covariance: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(m (..., n, d), S) from rows [m, diag S] (S (..., n, d)) or [m, vec S] (S (..., n, d, d))."""
    if covariance not in ("diag", "full"):
        raise ValueError(f"covariance must be 'diag' or 'full', got {covariance!r}")
    width = x.shape[-1]
    if covariance == "diag":
        if width % 2:
            raise ValueError(f"diagonal-covariance inputs are [m, diag S]: an even width, got {width}")
        d = width // 2
        return x[..., :d], x[..., d:]
    d = (math.isqrt(4 * width + 1) - 1) // 2
    if d * d + d != width:
        raise ValueError(f"full-covariance inputs are [m, vec S]: width d + d², got {width}")
    return x[..., :d], x[..., d:].reshape(*x.shape[:-1], d, d)


class _LatentScales(Kernel):
    """One positive length scale per latent dimension (``latent_dims``) or one in all.
    GPyTorch's own ARD lengthscale is not used: it checks ``ard_num_dims`` against the
    input width, which here is 2d or d + d², not the latent d."""

    def _init_scales(self, latent_dims):
        if latent_dims is not None and not (isinstance(latent_dims, int) and latent_dims >= 1):
            raise ValueError(f"latent_dims must be an int >= 1 or None, got {latent_dims!r}")
        self.latent_dims = latent_dims
        self.register_parameter("raw_lengthscale",
                                torch.nn.Parameter(torch.zeros(*self.batch_shape, 1, latent_dims or 1)))
        self.register_constraint("raw_lengthscale", Positive())

    @property
    def lengthscale(self) -> torch.Tensor:
        return self.raw_lengthscale_constraint.transform(self.raw_lengthscale)

    def _split_pair(self, x1, x2, covariance: str):
        """(m1, S1, m2, S2), after checking that x1 and x2 have the same width and that their
        latent dimension d is ``latent_dims`` (when set). Shapes only: no data is read."""
        if x1.shape[-1] != x2.shape[-1]:
            raise ValueError(f"{type(self).__name__}: x1 and x2 must have the same width, got x1 of width "
                             f"{x1.shape[-1]} and x2 of width {x2.shape[-1]}")
        m1, S1 = split_posterior(x1, covariance)
        m2, S2 = split_posterior(x2, covariance)
        d = m1.shape[-1]
        if self.latent_dims is not None and d != self.latent_dims:
            layout = "[m, diag S]" if covariance == "diag" else "[m, vec S]"
            raise ValueError(f"{type(self).__name__}: latent_dims={self.latent_dims} but the inputs have d={d} "
                             f"latent dimensions (width {x1.shape[-1]} = {layout})")
        return m1, S1, m2, S2

    @lengthscale.setter
    def lengthscale(self, value):
        value = torch.as_tensor(value, dtype=self.raw_lengthscale.dtype, device=self.raw_lengthscale.device)
        self.initialize(raw_lengthscale=self.raw_lengthscale_constraint.inverse_transform(
            value.expand_as(self.raw_lengthscale)))


class MarginalizedQuadraticKernel(_LatentScales):
    """The quadratic kernel (zᵀz′ + c)² marginalized over Gaussian posteriors (closed form).

    Args:
        covariance: ``"diag"`` or ``"full"``: how S is laid out in the inputs.
        latent_dims: d, for one length scale per latent dimension (ARD), or None for one
            scale in all.
        offset_prior: an optional prior on c (> 0, learnable).
    """

    def __init__(self, covariance: str = "diag", latent_dims: int | None = None, offset_prior=None, **kwargs):
        if covariance not in ("diag", "full"):
            raise ValueError(f"covariance must be 'diag' or 'full', got {covariance!r}")
        super().__init__(**kwargs)
        self._init_scales(latent_dims)
        self.covariance = covariance
        self.register_parameter("raw_offset", torch.nn.Parameter(torch.zeros(*self.batch_shape, 1, 1)))
        self.register_constraint("raw_offset", Positive())
        if offset_prior is not None:
            self.register_prior("offset_prior", offset_prior, lambda m: m.offset, lambda m, v: m._set_offset(v))

    @property
    def offset(self) -> torch.Tensor:
        return self.raw_offset_constraint.transform(self.raw_offset)

    @offset.setter
    def offset(self, value):
        self._set_offset(value)

    def _set_offset(self, value):
        value = torch.as_tensor(value, dtype=self.raw_offset.dtype, device=self.raw_offset.device)
        self.initialize(raw_offset=self.raw_offset_constraint.inverse_transform(value.expand_as(self.raw_offset)))

    def _scaled(self, m, S):
        inv = 1.0 / self.lengthscale  # (*batch, 1, d) or (*batch, 1, 1)
        if self.covariance == "full" and inv.shape[-1] == 1:
            inv = inv.expand(*inv.shape[:-1], m.shape[-1])
        m = m * inv
        S = S * inv**2 if self.covariance == "diag" else S * inv[..., None] * inv[..., None, :]
        return m, S

    def forward(self, x1, x2, diag: bool = False, **params):
        m1, S1, m2, S2 = self._split_pair(x1, x2, self.covariance)
        m1, S1 = self._scaled(m1, S1)
        m2, S2 = self._scaled(m2, S2)
        c = self.offset
        if diag:
            mm = (m1 * m2).sum(-1)
            if self.covariance == "diag":
                tr = (S1 * S2).sum(-1)
                cross = (m1**2 * S2).sum(-1) + (m2**2 * S1).sum(-1)
            else:
                tr = (S1 * S2.transpose(-1, -2)).sum((-1, -2))
                cross = torch.einsum("...i,...ij,...j->...", m1, S2, m1) + torch.einsum("...i,...ij,...j->...", m2, S1, m2)
            c = c[..., 0]  # (*batch, 1): one offset per batch, broadcast over the points
            return tr + cross + mm**2 + 2 * c * mm + c**2
        mm = m1 @ m2.transpose(-1, -2)
        if self.covariance == "diag":
            tr = S1 @ S2.transpose(-1, -2)
            cross = (m1**2) @ S2.transpose(-1, -2) + S1 @ (m2**2).transpose(-1, -2)
        else:
            f1, f2 = S1.flatten(-2), S2.flatten(-2)
            tr = f1 @ f2.transpose(-1, -2)  # tr(SS′) = vec(S)·vec(S′) for symmetric S′
            o1 = (m1[..., :, None] * m1[..., None, :]).flatten(-2)
            o2 = (m2[..., :, None] * m2[..., None, :]).flatten(-2)
            cross = o1 @ f2.transpose(-1, -2) + f1 @ o2.transpose(-1, -2)
        return tr + cross + mm**2 + 2 * c * mm + c**2


class ExpectedRBFKernel(_LatentScales):
    """The RBF kernel exp(−½ Σ_i (z_i − z′_i)²/ℓ_i²) marginalized over diagonal Gaussian
    posteriors (Girard et al. 2003; Dallaire et al. 2011):

        k̄ = Π_i (1 + (s_i + s′_i)/ℓ_i²)^{−1/2} · exp(−½ Σ_i (m_i − m′_i)² / (ℓ_i² + s_i + s′_i)).

    The diagonal uses independent copies, as :class:`MarginalizedQuadraticKernel` does.
    Inputs are rows [m, diag S]; ``latent_dims`` as there."""

    def __init__(self, latent_dims: int | None = None, **kwargs):
        super().__init__(**kwargs)
        self._init_scales(latent_dims)

    def forward(self, x1, x2, diag: bool = False, **params):
        m1, s1, m2, s2 = self._split_pair(x1, x2, "diag")
        l2 = self.lengthscale**2  # (*batch, 1, d)
        if diag:
            var = l2 + s1 + s2
            return torch.exp(-0.5 * ((m1 - m2) ** 2 / var).sum(-1)) * torch.rsqrt(var / l2).prod(-1)
        var = l2[..., None, :] + s1[..., :, None, :] + s2[..., None, :, :]  # (..., n1, n2, d)
        diff = m1[..., :, None, :] - m2[..., None, :, :]
        return torch.exp(-0.5 * (diff**2 / var).sum(-1)) * torch.rsqrt(var / l2[..., None, :]).prod(-1)
