"""The named instances: the classical optimizers (following ``torch.optim.SGD``, ``Adam``,
``AdamW`` and ``Muon``, Lion's paper and Gupta et al.'s Shampoo) and three new ones, one per
design axis, each a :class:`QuadrupleOptimizer` built from its four parts.

Every instance takes ``skip_nonfinite`` (keyword only): by default a step whose gradients
hold NaN or Inf raises FloatingPointError naming the parameter, before anything moves;
with True it is skipped, parameters and memory untouched. The instances that follow a
torch.optim optimizer with ``maximize`` (SGD, Adam, AdamW; torch.optim.Muon has none) take
``maximize`` too, keyword only as there. Settings are checked when the instance is built
(``lr``, ``weight_decay`` and the group settings by :class:`QuadrupleOptimizer`, the rest by
the parts); see :class:`QuadrupleOptimizer` for the checks at every step."""

from __future__ import annotations

from ..._checks import check_real
from ...linalg import MUON_COEFFICIENTS
from .base import Lift, check_beta, check_betas
from .directions import (AlignedMomentum, BiasCorrectedMomentum, Gradient, Interpolation, Memory, Momentum,
                         SignOfInterpolation)
from .metrics import DiagonalAdaptive, Euclidean, KroneckerPreconditioner, NewtonSchulz, SpectralSteepest
from .optimizer import QuadrupleOptimizer
from .transitions import (EMAMomentum, HeavyBall, KroneckerFactors, LionMemory, Moments, NoMemory,
                          PreconditionedTracking)

__all__ = ["quadruple_sgd", "quadruple_adam", "quadruple_adamw", "quadruple_lion", "quadruple_shampoo",
           "quadruple_muon", "quadruple_spectral", "quadruple_tracking", "quadruple_aligned"]


# --- classical instances -----------------------------------------------------------------

def quadruple_sgd(params, lr=1e-3, momentum=0.0, dampening=0.0, nesterov=False, weight_decay=0.0,
                  track_diagnostics=False, *, maximize=False, skip_nonfinite=False):
    """torch.optim.SGD as a quadruple: Euclidean metric, heavy-ball memory, coupled decay.
    ``momentum`` in [0, 1), ``dampening`` in [0, 1]."""
    momentum = check_beta("momentum", momentum)
    dampening = check_real("dampening", dampening, low=0.0, high=1.0)
    if nesterov and (momentum <= 0 or dampening != 0):
        raise ValueError("Nesterov momentum needs momentum > 0 and zero dampening")
    if momentum:
        transition, direction = HeavyBall(momentum, dampening), Momentum(momentum, nesterov)
    else:
        transition, direction = NoMemory(), Gradient()
    return QuadrupleOptimizer(params, metric=Euclidean(), transition=transition, direction=direction,
                              lift=Lift(decoupled=False), lr=lr, weight_decay=weight_decay,
                              track_diagnostics=track_diagnostics, maximize=maximize, skip_nonfinite=skip_nonfinite)


def _adam_like(params, lr, betas, eps, weight_decay, amsgrad, decoupled, track_diagnostics, maximize,
               skip_nonfinite):
    beta1, beta2 = check_betas(betas)
    return QuadrupleOptimizer(params, metric=DiagonalAdaptive(beta2, eps, amsgrad),
                              transition=Moments(beta1, beta2, amsgrad), direction=BiasCorrectedMomentum(beta1),
                              lift=Lift(decoupled=decoupled), lr=lr, weight_decay=weight_decay,
                              track_diagnostics=track_diagnostics, maximize=maximize, skip_nonfinite=skip_nonfinite)


def quadruple_adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False,
                   track_diagnostics=False, *, maximize=False, skip_nonfinite=False):
    """torch.optim.Adam as a quadruple: diagonal adaptive metric, two moments, coupled decay.
    ``betas`` a pair in [0, 1); ``eps`` finite and > 0 (torch.optim.Adam accepts eps = 0,
    which makes 0/0 = NaN of every coordinate whose gradient has been exactly zero)."""
    return _adam_like(params, lr, betas, eps, weight_decay, amsgrad, False, track_diagnostics, maximize,
                      skip_nonfinite)


def quadruple_adamw(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False,
                    track_diagnostics=False, *, maximize=False, skip_nonfinite=False):
    """torch.optim.AdamW as a quadruple: Adam's parts with the decay decoupled (the same
    checks as :func:`quadruple_adam`)."""
    return _adam_like(params, lr, betas, eps, weight_decay, amsgrad, True, track_diagnostics, maximize,
                      skip_nonfinite)


def quadruple_lion(params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0, track_diagnostics=False, *,
                   skip_nonfinite=False):
    """Lion (Chen et al. 2023) as a quadruple: Euclidean metric on the sign of the
    interpolated momentum, decoupled decay. ``betas`` a pair in [0, 1)."""
    return QuadrupleOptimizer(params, metric=Euclidean(), transition=LionMemory(*check_betas(betas)),
                              direction=SignOfInterpolation(), lift=Lift(decoupled=True), lr=lr,
                              weight_decay=weight_decay, track_diagnostics=track_diagnostics,
                              skip_nonfinite=skip_nonfinite)


def quadruple_shampoo(params, lr=1e-1, eps=1e-4, weight_decay=0.0, track_diagnostics=False, *,
                      skip_nonfinite=False):
    """Shampoo (Gupta et al. 2018, Algorithm 1 and its order-k form) as a quadruple:
    Kronecker-factored metric, accumulated factors, the raw gradient as direction,
    coupled decay. Dense factors: for small and medium layers."""
    return QuadrupleOptimizer(params, metric=KroneckerPreconditioner(), transition=KroneckerFactors(eps),
                              direction=Gradient(), lift=Lift(decoupled=False), lr=lr, weight_decay=weight_decay,
                              track_diagnostics=track_diagnostics, skip_nonfinite=skip_nonfinite)


def quadruple_muon(params, lr=1e-3, weight_decay=0.1, momentum=0.95, nesterov=True,
                   ns_coefficients=MUON_COEFFICIENTS, eps=1e-7, ns_steps=5, adjust_lr_fn=None,
                   track_diagnostics=False, *, skip_nonfinite=False):
    """torch.optim.Muon as a quadruple (same arguments and defaults): the bfloat16
    Newton–Schulz metric, an EMA momentum, a Nesterov interpolation, decoupled decay.
    Matrices only; give vectors to another optimizer. ``momentum`` in [0, 1) (torch's Muon
    checks only >= 0), ``eps`` finite and > 0, ``ns_steps`` an integer in [0, 100),
    ``ns_coefficients`` three finite numbers."""
    momentum = check_beta("momentum", momentum)
    return QuadrupleOptimizer(params, metric=NewtonSchulz(ns_coefficients, ns_steps, eps,
                                                          adjust_lr_fn or "original"),
                              transition=EMAMomentum(momentum), direction=Interpolation(momentum, nesterov),
                              lift=Lift(decoupled=True), lr=lr, weight_decay=weight_decay,
                              track_diagnostics=track_diagnostics, skip_nonfinite=skip_nonfinite)


# --- three new instances, one per design axis ----------------------------------------------

def quadruple_spectral(params, lr=1e-2, momentum=0.9, weight_decay=0.0, track_diagnostics=False, *,
                       skip_nonfinite=False):
    """Metric axis: spectral steepest descent (:class:`SpectralSteepest`) on an EMA momentum
    with a Nesterov interpolation. Satisfies descent alignment on the target manifold with
    constants (1, rank), so the UUB and PL theorems apply, which Muon's unit-length step
    does not allow."""
    momentum = check_beta("momentum", momentum)
    return QuadrupleOptimizer(params, metric=SpectralSteepest(), transition=EMAMomentum(momentum),
                              direction=Interpolation(momentum, nesterov=True), lift=Lift(decoupled=True), lr=lr,
                              weight_decay=weight_decay, track_diagnostics=track_diagnostics,
                              skip_nonfinite=skip_nonfinite)


def quadruple_tracking(params, lr=1e-3, gain=0.1, beta2=0.999, eps=1e-8, weight_decay=0.0, start="target",
                       track_diagnostics=False, *, skip_nonfinite=False):
    """State axis: a velocity tracking the RMS-preconditioned gradient at the fixed gain α
    (:class:`PreconditionedTracking`), whose distance to the target manifold contracts by
    (1 − α) per step by construction. Euclidean metric on it, decoupled decay."""
    return QuadrupleOptimizer(params, metric=Euclidean(), transition=PreconditionedTracking(gain, beta2, eps, start),
                              direction=Memory("velocity"), lift=Lift(decoupled=True), lr=lr,
                              weight_decay=weight_decay, track_diagnostics=track_diagnostics,
                              skip_nonfinite=skip_nonfinite)


def quadruple_aligned(params, lr=1e-2, momentum=0.9, weight=0.9, ratio=1.0, weight_decay=0.0,
                      track_diagnostics=False, *, skip_nonfinite=False):
    """Direction axis: gradient plus the capped, non-opposing part of an EMA momentum
    (:class:`AlignedMomentum`), descent-aligned at every state with constants
    (1, 1 + weight·ratio). Euclidean metric, decoupled decay. ``momentum`` in [0, 1),
    ``weight`` and ``ratio`` finite and >= 0."""
    momentum = check_beta("momentum", momentum)
    return QuadrupleOptimizer(params, metric=Euclidean(), transition=EMAMomentum(momentum),
                              direction=AlignedMomentum(weight, ratio), lift=Lift(decoupled=True), lr=lr,
                              weight_decay=weight_decay, track_diagnostics=track_diagnostics,
                              skip_nonfinite=skip_nonfinite)
