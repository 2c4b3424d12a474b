"""Optimizers as controlled dynamical systems: the quadruple (metric, transition, direction, lift).

Every first-order optimizer here is one loop with four exchangeable parts, each a small
object:

* ``transition`` Φ, the internal memory: ``init(p) -> state`` and ``update(g, state, step)``,
  which advances the memory with the new gradient in place (momenta, second moments).
* ``direction``, the direction field generator: ``(g, state, step) -> velocity target``.
* ``metric`` g, how that target is measured and preconditioned: ``(v, state, step) -> update``.
* ``lift`` η, the time scale: the step size and where weight decay enters (coupled, added
  to the gradient before Φ sees it; or decoupled, shrinking the parameter before the step).

One step reads: ``g ← ∇f (+ λp if coupled)``; ``Φ(g)``; ``v ← direction(g, state)``;
``u ← metric(v, state)``; ``p ← p(1 − ηλ if decoupled) − η u``.

:class:`QuadrupleOptimizer` is a ``torch.optim.Optimizer``: ``lr`` and ``weight_decay`` live
in ``param_groups`` (so schedulers and per-group settings work), the memory in ``state``
(so ``state_dict`` round-trips). ``quadruple_sgd``, ``quadruple_adam`` and ``quadruple_adamw``
build the classical instances, which follow ``torch.optim.SGD``, ``Adam`` and ``AdamW``;
``quadruple_lion`` follows the Lion paper's update and ``quadruple_shampoo`` Gupta et al.'s
Shampoo.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable

import torch

__all__ = [
    "QuadrupleOptimizer", "Lift", "NoMemory", "HeavyBall", "Moments", "Gradient", "Momentum",
    "BiasCorrectedMomentum", "LionMemory", "SignOfInterpolation", "Euclidean", "DiagonalAdaptive",
    "KroneckerFactors", "KroneckerPreconditioner",
    "quadruple_sgd", "quadruple_adam", "quadruple_adamw", "quadruple_lion", "quadruple_shampoo",
]


def _check_beta(name: str, value: float) -> None:
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {value!r}")


# --- transitions Φ: the memory -----------------------------------------------------------

class NoMemory:
    """Φ = identity: plain gradient descent keeps no state."""

    def init(self, p: torch.Tensor) -> dict:
        return {}

    def update(self, g: torch.Tensor, state: dict, step: int) -> None:
        pass


@dataclass(frozen=True)
class HeavyBall:
    """b ← μ b + (1 − τ) g, with b = g on the first step (torch.optim.SGD's buffer)."""

    momentum: float
    dampening: float = 0.0

    def __post_init__(self):
        _check_beta("momentum", self.momentum)
        if not 0.0 <= self.dampening <= 1.0:
            raise ValueError(f"dampening must be in [0, 1], got {self.dampening!r}")

    def init(self, p):
        return {"momentum_buffer": None}

    def update(self, g, state, step):
        buf = state["momentum_buffer"]
        if buf is None:
            state["momentum_buffer"] = g.detach().clone()
        else:
            buf.mul_(self.momentum).add_(g, alpha=1.0 - self.dampening)


@dataclass(frozen=True)
class Moments:
    """First and second moments, m ← β₁m + (1−β₁)g, v ← β₂v + (1−β₂)g², and with
    ``amsgrad`` the running maximum of v."""

    beta1: float = 0.9
    beta2: float = 0.999
    amsgrad: bool = False

    def __post_init__(self):
        _check_beta("beta1", self.beta1)
        _check_beta("beta2", self.beta2)

    def init(self, p):
        state = {"exp_avg": torch.zeros_like(p), "exp_avg_sq": torch.zeros_like(p)}
        if self.amsgrad:
            state["max_exp_avg_sq"] = torch.zeros_like(p)
        return state

    def update(self, g, state, step):
        state["exp_avg"].lerp_(g, 1.0 - self.beta1)
        state["exp_avg_sq"].mul_(self.beta2).addcmul_(g, g, value=1.0 - self.beta2)
        if self.amsgrad:
            torch.maximum(state["max_exp_avg_sq"], state["exp_avg_sq"], out=state["max_exp_avg_sq"])


@dataclass(frozen=True)
class LionMemory:
    """Lion's memory: the interpolation c = β₁m + (1−β₁)g is taken from the memory before
    it moves, then m ← β₂m + (1−β₂)g. c is handed to the direction field once, not kept."""

    beta1: float = 0.9
    beta2: float = 0.99

    def __post_init__(self):
        _check_beta("beta1", self.beta1)
        _check_beta("beta2", self.beta2)

    def init(self, p):
        return {"exp_avg": torch.zeros_like(p)}

    def update(self, g, state, step):
        m = state["exp_avg"]
        state["interpolation"] = m.lerp(g, 1.0 - self.beta1)
        m.lerp_(g, 1.0 - self.beta2)


@dataclass(frozen=True)
class KroneckerFactors:
    """Shampoo's memory (Gupta et al. 2018): for a matrix G, L ← L + GGᵀ and R ← R + GᵀG,
    both started at εI; for a vector g, the one factor L ← L + ggᵀ. Tensors of more than
    two dimensions are refused (reshape them into matrices first)."""

    eps: float = 1e-4

    def __post_init__(self):
        if not self.eps > 0:
            raise ValueError(f"eps must be > 0, got {self.eps!r}")

    def init(self, p):
        if p.ndim not in (1, 2):
            raise ValueError(f"Shampoo factors need a vector or a matrix, got a parameter of shape {tuple(p.shape)}")
        eye = lambda k: self.eps * torch.eye(k, dtype=p.dtype, device=p.device)
        return {"left": eye(p.shape[0])} if p.ndim == 1 else {"left": eye(p.shape[0]), "right": eye(p.shape[1])}

    def update(self, g, state, step):
        if g.ndim == 1:
            state["left"].addr_(g, g)
        else:
            state["left"].addmm_(g, g.T)
            state["right"].addmm_(g.T, g)


# --- direction fields --------------------------------------------------------------------

class Gradient:
    """v = g."""

    def __call__(self, g, state, step):
        return g


@dataclass(frozen=True)
class Momentum:
    """v = b (heavy ball) or g + μb (Nesterov), reading :class:`HeavyBall`'s buffer."""

    momentum: float
    nesterov: bool = False

    def __call__(self, g, state, step):
        buf = state["momentum_buffer"]
        return g.add(buf, alpha=self.momentum) if self.nesterov else buf


@dataclass(frozen=True)
class BiasCorrectedMomentum:
    """v = m / (1 − β₁ᵗ), reading :class:`Moments`' first moment."""

    beta1: float

    def __call__(self, g, state, step):
        return state["exp_avg"] / (1.0 - self.beta1**step)


class SignOfInterpolation:
    """v = sign(c), c the interpolation :class:`LionMemory` just formed."""

    def __call__(self, g, state, step):
        return state.pop("interpolation").sign_()


# --- metrics -----------------------------------------------------------------------------

class Euclidean:
    """u = v: the identity metric."""

    def __call__(self, v, state, step):
        return v


@dataclass(frozen=True)
class DiagonalAdaptive:
    """u = v / (√(v̂) + ε), v̂ the bias-corrected second moment (its running maximum with
    amsgrad): the diagonal metric of Adam."""

    beta2: float = 0.999
    eps: float = 1e-8
    amsgrad: bool = False

    def __post_init__(self):
        if not self.eps >= 0.0:
            raise ValueError(f"eps must be >= 0, got {self.eps!r}")

    def __call__(self, v, state, step):
        second = state["max_exp_avg_sq" if self.amsgrad else "exp_avg_sq"]
        denom = (second.sqrt() / math.sqrt(1.0 - self.beta2**step)).add_(self.eps)
        return v / denom


def _inverse_root(a: torch.Tensor, power: float) -> torch.Tensor:
    """a^(−power) of a symmetric positive definite matrix, by its eigendecomposition."""
    vals, vecs = torch.linalg.eigh(a)
    return (vecs * vals.clamp_min(torch.finfo(a.dtype).tiny).pow(-power)) @ vecs.T


class KroneckerPreconditioner:
    """u = L^(−1/4) V R^(−1/4) for a matrix, L^(−1/2) v for a vector: Shampoo's metric
    (the order-k rule, exponent 1/(2k)), reading :class:`KroneckerFactors`."""

    def __call__(self, v, state, step):
        if v.ndim == 1:
            return _inverse_root(state["left"], 0.5) @ v
        return _inverse_root(state["left"], 0.25) @ v @ _inverse_root(state["right"], 0.25)


# --- lift η ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Lift:
    """Where the weight decay of a param group enters: ``decoupled=False`` adds λp to the
    gradient before the memory sees it (L2 regularization, as torch's SGD and Adam);
    ``decoupled=True`` shrinks p by (1 − ηλ) before the step (AdamW)."""

    decoupled: bool = False


# --- the optimizer -----------------------------------------------------------------------

class QuadrupleOptimizer(torch.optim.Optimizer):
    """A ``torch.optim.Optimizer`` assembled from (metric, transition, direction, lift).

    Args:
        params: parameters or parameter groups.
        lr: the step size η (per group; schedulers change it).
        weight_decay: λ (per group); where it enters is the ``lift``'s choice.
        metric, transition, direction, lift: the four parts (see the module docstring).
    """

    def __init__(self, params: Iterable, *, metric, transition, direction, lift: Lift | None = None,
                 lr: float = 1e-3, weight_decay: float = 0.0):
        if not (isinstance(lr, (int, float)) and lr > 0 and math.isfinite(lr)):
            raise ValueError(f"lr must be a finite number > 0, got {lr!r}")
        if not (isinstance(weight_decay, (int, float)) and weight_decay >= 0):
            raise ValueError(f"weight_decay must be >= 0, got {weight_decay!r}")
        for name, part, needs in (("metric", metric, "__call__"), ("transition", transition, "update"),
                                  ("direction", direction, "__call__")):
            if not callable(getattr(part, needs, None)):
                raise TypeError(f"{name} must provide {needs}(), got {type(part).__name__}")
        self.metric, self.transition, self.direction = metric, transition, direction
        self.lift = lift or Lift()
        super().__init__(params, dict(lr=float(lr), weight_decay=float(weight_decay)))

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, wd = group["lr"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError("QuadrupleOptimizer does not support sparse gradients")
                state = self.state[p]
                if not state:
                    state.update(self.transition.init(p))
                    state["step"] = 0
                state["step"] += 1
                t = state["step"]
                g = p.grad
                if wd and not self.lift.decoupled:
                    g = g.add(p, alpha=wd)
                self.transition.update(g, state, t)
                u = self.metric(self.direction(g, state, t), state, t)
                if wd and self.lift.decoupled:
                    p.mul_(1.0 - lr * wd)
                p.add_(u, alpha=-lr)
        return loss


# --- classical instances -----------------------------------------------------------------

def quadruple_sgd(params, lr=1e-3, momentum=0.0, dampening=0.0, nesterov=False, weight_decay=0.0):
    """torch.optim.SGD as a quadruple: Euclidean metric, heavy-ball memory, coupled decay."""
    if nesterov and (momentum <= 0 or dampening != 0):
        raise ValueError("Nesterov momentum needs momentum > 0 and zero dampening")
    if momentum:
        transition, direction = HeavyBall(momentum, dampening), Momentum(momentum, nesterov)
    else:
        transition, direction = NoMemory(), Gradient()
    return QuadrupleOptimizer(params, metric=Euclidean(), transition=transition, direction=direction,
                              lift=Lift(decoupled=False), lr=lr, weight_decay=weight_decay)


def _adam_like(params, lr, betas, eps, weight_decay, amsgrad, decoupled):
    beta1, beta2 = betas
    return QuadrupleOptimizer(params, metric=DiagonalAdaptive(beta2, eps, amsgrad),
                              transition=Moments(beta1, beta2, amsgrad), direction=BiasCorrectedMomentum(beta1),
                              lift=Lift(decoupled=decoupled), lr=lr, weight_decay=weight_decay)


def quadruple_adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False):
    """torch.optim.Adam as a quadruple: diagonal adaptive metric, two moments, coupled decay."""
    return _adam_like(params, lr, betas, eps, weight_decay, amsgrad, decoupled=False)


def quadruple_lion(params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0):
    """Lion (Chen et al. 2023) as a quadruple: Euclidean metric on the sign of the
    interpolated momentum, decoupled decay."""
    return QuadrupleOptimizer(params, metric=Euclidean(), transition=LionMemory(*betas),
                              direction=SignOfInterpolation(), lift=Lift(decoupled=True), lr=lr,
                              weight_decay=weight_decay)


def quadruple_shampoo(params, lr=1e-1, eps=1e-4, weight_decay=0.0):
    """Shampoo (Gupta et al. 2018, Algorithm 1 and its order-k form) as a quadruple:
    Kronecker-factored metric, accumulated factors, the raw gradient as direction,
    coupled decay. Dense factors: for small and medium layers."""
    return QuadrupleOptimizer(params, metric=KroneckerPreconditioner(), transition=KroneckerFactors(eps),
                              direction=Gradient(), lift=Lift(decoupled=False), lr=lr, weight_decay=weight_decay)


def quadruple_adamw(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False):
    """torch.optim.AdamW as a quadruple: Adam's parts with the decay decoupled."""
    return _adam_like(params, lr, betas, eps, weight_decay, amsgrad, decoupled=True)
