"""Metrics: ``(v, memory, step) -> u``, how a direction is measured and preconditioned
(identity, Adam's diagonal, Shampoo's Kronecker factors, Muon's Newton–Schulz, the
spectral norm's steepest step)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..._checks import check_int
from ...geometry import Spectral
from ...linalg import MUON_COEFFICIENTS, check_coefficients, msign
from .base import check_positive, rms_denominator

__all__ = ["Euclidean", "DiagonalAdaptive", "KroneckerPreconditioner", "NewtonSchulz", "SpectralSteepest"]


class Euclidean:
    """u = v: the identity metric."""

    homogeneous = True

    def __call__(self, v, memory, step):
        return v


@dataclass(frozen=True)
class DiagonalAdaptive:
    """u = v / (√(v̂) + ε), v̂ the bias-corrected second moment (its running maximum with
    amsgrad): the diagonal metric of Adam."""

    beta2: float = 0.999
    eps: float = 1e-8
    amsgrad: bool = False

    def __post_init__(self):
        # eps > 0: torch.optim.Adam accepts eps = 0, which divides 0 by 0 (a NaN parameter)
        # in every coordinate whose gradient has been exactly zero so far
        check_positive("eps", self.eps)

    def __call__(self, v, memory, step):
        denom = self._denominator(memory, step)
        return torch.div(v, denom, out=denom)

    homogeneous = True  # u(cv) = c u(v)

    def _denominator(self, memory, step):
        return rms_denominator(memory["max_exp_avg_sq" if self.amsgrad else "exp_avg_sq"], self.beta2, step, self.eps)

    def apply(self, p, v, memory, step, alpha):
        """p ← p + α u(v) in one fused pass (what torch's Adam does with addcdiv)."""
        p.addcdiv_(v, self._denominator(memory, step), value=alpha)


def _inverse_root(a: torch.Tensor, power: float) -> torch.Tensor:
    """a^(−power) of a symmetric positive definite matrix, by its eigendecomposition."""
    try:
        vals, vecs = torch.linalg.eigh(a)
    except torch.linalg.LinAlgError:
        if not torch.isfinite(a).all():
            raise FloatingPointError("a Shampoo factor is not finite: the gradients held NaN or Inf "
                                     "(the step size is likely too large)") from None
        raise
    return (vecs * vals.clamp_min(torch.finfo(a.dtype).tiny).pow(-power)) @ vecs.T


class KroneckerPreconditioner:
    """u = L^(−1/4) V R^(−1/4) for a matrix, L^(−1/2) v for a vector: Shampoo's metric
    (the order-k rule, exponent 1/(2k)), reading :class:`KroneckerFactors`."""

    homogeneous = True

    def __call__(self, v, memory, step):
        if v.ndim == 1:
            return _inverse_root(memory["left"], 0.5) @ v
        return _inverse_root(memory["left"], 0.25) @ v @ _inverse_root(memory["right"], 0.25)


@dataclass(frozen=True)
class NewtonSchulz:
    """u = r · NS(v): Muon's metric, the quintic Newton–Schulz orthogonalization run in
    bfloat16 exactly as ``torch.optim.Muon`` does it (:func:`neurips26.linalg.msign` in
    its Muon form: normalize by the Frobenius norm clamped at eps, then
    X ← aX + (bA + cA²)X with A = XXᵀ on the wide orientation, each step two fused
    ``addmm``), scaled by r = √max(1, rows/cols) (``adjust_lr="original"``),
    0.2·√max(rows, cols) (``"match_rms_adamw"``) or 1 (``None``). Matrices only, as
    torch's Muon.

    r is handed to the optimizer as ``step_scale`` and folded into the step size rather
    than multiplied into the update: in float32 the two roundings differ in the last bit,
    and the bfloat16 iteration amplifies a last-bit difference over a few hundred steps."""

    coefficients: tuple = MUON_COEFFICIENTS
    steps: int = 5
    eps: float = 1e-7
    adjust_lr: str | None = "original"
    dtype: torch.dtype = torch.bfloat16

    def __post_init__(self):
        if self.adjust_lr not in (None, "original", "match_rms_adamw"):
            raise ValueError(f"adjust_lr must be None, 'original' or 'match_rms_adamw', got {self.adjust_lr!r}")
        if check_int("steps", self.steps, minimum=0) >= 100:
            raise ValueError(f"steps must be an integer in [0, 100), got {self.steps!r}")
        object.__setattr__(self, "coefficients", check_coefficients(self.coefficients))
        check_positive("eps", self.eps)

    def step_scale(self, shape) -> float:
        if len(shape) != 2:
            return 1.0  # not a matrix: __call__ refuses it with a clear message
        rows, cols = shape
        if self.adjust_lr == "original":
            return math.sqrt(max(1.0, rows / cols))
        if self.adjust_lr == "match_rms_adamw":
            return 0.2 * math.sqrt(max(rows, cols))
        return 1.0

    def __call__(self, v, memory, step):
        if v.ndim != 2:
            raise ValueError(f"the Newton-Schulz metric needs matrix parameters, got shape {tuple(v.shape)}; "
                             "give vectors to another optimizer (as with torch.optim.Muon)")
        # the optimizer has checked the gradients: no host read per parameter here
        return msign(v, self.steps, self.coefficients, self.eps, dtype=self.dtype, eps_mode="clamp", fused=True,
                     check_finite=False)


class SpectralSteepest:
    """The metric axis of the new instances: steepest descent in the spectral norm.

    For a matrix direction v = U S Vᵀ, u = argmax_{‖w‖₂ ≤ ‖v‖_*} ⟨v, w⟩ = ‖v‖_* U Vᵀ
    (‖·‖_* the nuclear norm, the spectral norm's dual): :meth:`Spectral.sharp
    <neurips26.geometry.Spectral.sharp>`, the step of the non-Euclidean gradient flow whose
    metric is the spectral norm (what Muon's orthogonalization approximates, but with the
    dual-norm length instead of a unit length, and the exact polar factor from an SVD).
    Tensors of more than two dimensions are seen as (shape[0], rest) matrices; vectors and
    scalars get the Euclidean step u = v (the spectral norm of a column is its ℓ2 norm).

    Descent alignment (the assumption of the UUB and PL theorems): ⟨v, u⟩ = ‖v‖_*² ≥ ‖v‖_F²
    and ‖u‖_F = ‖v‖_* √rank ≤ rank · ‖v‖_F, so with v = ∇f the field is aligned with
    constants (1, min(rows, cols)). Muon's unit-length step ‖u‖ = √rank is not bounded by
    a multiple of ‖∇f‖, which is why Muon falls outside the linear-convergence theorem.
    """

    norm = Spectral()

    def __call__(self, v, memory, step):
        return v if v.ndim < 2 else self.norm.sharp(v)
