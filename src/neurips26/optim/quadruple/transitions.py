"""Transitions Φ: the optimizer's memory (momenta, moments, Kronecker factors, tracked
velocities).

Each is an ``init``/``update`` pair (see :mod:`.base`): ``update(g, state, step)`` is pure
and returns the new memory; ``update(g, state, step, out=state)`` advances ``state``'s
buffers in place with the same floating-point operations, which is what the optimizer's
step does.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..._checks import check_real
from .base import check_beta, check_positive, into, rms_denominator

__all__ = ["NoMemory", "HeavyBall", "Moments", "LionMemory", "KroneckerFactors", "EMAMomentum",
           "PreconditionedTracking"]


def _new(state: dict, out: dict | None) -> dict:
    """The dict that receives the new memory: ``out`` itself, or (pure form) a shallow
    copy of ``state`` whose advanced entries are then replaced by new tensors."""
    return dict(state) if out is None else out


class NoMemory:
    """Φ = identity: plain gradient descent keeps no state."""

    def init(self, p: torch.Tensor) -> dict:
        return {}

    def update(self, g: torch.Tensor, state: dict, step: int, out: dict | None = None) -> dict:
        return state if out is None else out

    def equilibrium(self, g, state, step):
        return {}


@dataclass(frozen=True)
class HeavyBall:
    """b ← μ b + (1 − τ) g, with b = g on the first step (torch.optim.SGD's buffer)."""

    momentum: float
    dampening: float = 0.0

    def __post_init__(self):
        check_beta("momentum", self.momentum)
        check_real("dampening", self.dampening, low=0.0, high=1.0)

    def init(self, p):
        return {"momentum_buffer": None}

    def update(self, g, state, step, out=None):
        new, buf = _new(state, out), state["momentum_buffer"]
        if buf is None:
            new["momentum_buffer"] = g.detach().clone()
        else:
            new["momentum_buffer"] = torch.mul(buf, self.momentum, out=into(out, "momentum_buffer")).add_(
                g, alpha=1.0 - self.dampening)
        return new

    def equilibrium(self, g, state, step):
        # the fixed point of b = μb + (1 − τ)g
        return {"momentum_buffer": g * ((1.0 - self.dampening) / (1.0 - self.momentum))}


@dataclass(frozen=True)
class Moments:
    """First and second moments, m ← β₁m + (1−β₁)g, v ← β₂v + (1−β₂)g², and with
    ``amsgrad`` the running maximum of v."""

    beta1: float = 0.9
    beta2: float = 0.999
    amsgrad: bool = False

    def __post_init__(self):
        check_beta("beta1", self.beta1)
        check_beta("beta2", self.beta2)

    def init(self, p):
        state = {"exp_avg": torch.zeros_like(p), "exp_avg_sq": torch.zeros_like(p)}
        if self.amsgrad:
            state["max_exp_avg_sq"] = torch.zeros_like(p)
        return state

    def update(self, g, state, step, out=None):
        new = _new(state, out)
        new["exp_avg"] = torch.lerp(state["exp_avg"], g, 1.0 - self.beta1, out=into(out, "exp_avg"))
        new["exp_avg_sq"] = torch.mul(state["exp_avg_sq"], self.beta2, out=into(out, "exp_avg_sq")).addcmul_(
            g, g, value=1.0 - self.beta2)
        if self.amsgrad:
            new["max_exp_avg_sq"] = torch.maximum(state["max_exp_avg_sq"], new["exp_avg_sq"],
                                                  out=into(out, "max_exp_avg_sq"))
        return new

    def equilibrium(self, g, state, step):
        # fast: the first moment, at the value whose bias correction is g; the second
        # moment is the slow memory and is held.
        return {"exp_avg": g * (1.0 - self.beta1**step)}


@dataclass(frozen=True)
class LionMemory:
    """Lion's memory: the interpolation c = β₁m + (1−β₁)g is taken from the memory before
    it moves, then m ← β₂m + (1−β₂)g. c is a transient entry of the returned memory
    (``"interpolation"``), read by the direction field at this step and never kept."""

    beta1: float = 0.9
    beta2: float = 0.99

    def __post_init__(self):
        check_beta("beta1", self.beta1)
        check_beta("beta2", self.beta2)

    def init(self, p):
        return {"exp_avg": torch.zeros_like(p)}

    def update(self, g, state, step, out=None):
        m = state["exp_avg"]
        interpolation = m.lerp(g, 1.0 - self.beta1)
        new = _new(state, out)
        new["exp_avg"] = torch.lerp(m, g, 1.0 - self.beta2, out=into(out, "exp_avg"))
        return {**new, "interpolation": interpolation}

    def equilibrium(self, g, state, step):
        return {"exp_avg": g.clone(), "interpolation": g.clone()}


@dataclass(frozen=True)
class KroneckerFactors:
    """Shampoo's memory (Gupta et al. 2018): for a matrix G, L ← L + GGᵀ and R ← R + GᵀG,
    both started at εI; for a vector g, the one factor L ← L + ggᵀ. Tensors of more than
    two dimensions are refused (reshape them into matrices first)."""

    eps: float = 1e-4

    def __post_init__(self):
        check_positive("eps", self.eps)

    def init(self, p):
        if p.ndim not in (1, 2):
            raise ValueError(f"Shampoo factors need a vector or a matrix, got a parameter of shape {tuple(p.shape)}")
        eye = lambda k: self.eps * torch.eye(k, dtype=p.dtype, device=p.device)
        return {"left": eye(p.shape[0])} if p.ndim == 1 else {"left": eye(p.shape[0]), "right": eye(p.shape[1])}

    def update(self, g, state, step, out=None):
        new = _new(state, out)
        if g.ndim == 1:
            new["left"] = torch.addr(state["left"], g, g, out=into(out, "left"))
        else:
            new["left"] = torch.addmm(state["left"], g, g.T, out=into(out, "left"))
            new["right"] = torch.addmm(state["right"], g.T, g, out=into(out, "right"))
        return new

    def equilibrium(self, g, state, step):
        return {}  # the factors are slow memory; Shampoo has no fast state


@dataclass(frozen=True)
class EMAMomentum:
    """m ← βm + (1 − β)g from m = 0 (Muon's buffer; the memory of :func:`quadruple_aligned`).
    Its fixed point for a constant gradient is g."""

    beta: float

    def __post_init__(self):
        check_beta("beta", self.beta)

    def init(self, p):
        return {"exp_avg": torch.zeros_like(p)}

    def update(self, g, state, step, out=None):
        new = _new(state, out)
        new["exp_avg"] = torch.lerp(state["exp_avg"], g, 1.0 - self.beta, out=into(out, "exp_avg"))
        return new

    def equilibrium(self, g, state, step):
        return {"exp_avg": g.clone()}


@dataclass(frozen=True)
class PreconditionedTracking:
    """The state axis of the new instances: a fast velocity that tracks the preconditioned
    gradient with a fixed gain α, over a slow RMS memory.

    Slow memory: s ← β₂s + (1 − β₂)g², ŝ = s / (1 − β₂ᵗ). Target: d = g / (√ŝ + ε), the
    diagonal-metric gradient. Fast state: v ← v + α(d − v).

    Why the fast timescale provably contracts: the update is an exact affine contraction
    towards the current target, v_t − d_t = (1 − α)(v_{t−1} − d_t), so with
    δ_t = ‖v_t − d_t‖ (the distance to the NAIM target manifold {v = d(x, s)}) and the
    drift Δ_t = ‖d_t − d_{t−1}‖, δ_t ≤ (1 − α)(δ_{t−1} + Δ_t): geometric contraction at the
    rate 1 − α, whatever the loss, down to a neighbourhood of size (1 − α)Δ/α set by the
    drift. (Adam's m/√v̂ has no such bound: its memory is filtered before the metric,
    which moves under it, and its bias correction rescales it.) Related to RMSprop with
    momentum, which uses the undamped heavy ball μv + d in place of the convex combination.

    ``start="target"`` puts v on the manifold at the first step; ``"zero"`` starts at
    v = 0, off the manifold, to watch the contraction.
    """

    gain: float = 0.1
    beta2: float = 0.999
    eps: float = 1e-8
    start: str = "target"

    def __post_init__(self):
        check_real("gain", self.gain, low=0.0, low_open=True, high=1.0)
        check_beta("beta2", self.beta2)
        check_positive("eps", self.eps)
        if self.start not in ("target", "zero"):
            raise ValueError(f"start must be 'target' or 'zero', got {self.start!r}")

    def init(self, p):
        return {"exp_avg_sq": torch.zeros_like(p), "velocity": torch.zeros_like(p)}

    def _target(self, g, state, step):
        denom = rms_denominator(state["exp_avg_sq"], self.beta2, step, self.eps)
        return torch.div(g, denom, out=denom)

    def update(self, g, state, step, out=None):
        new = _new(state, out)
        new["exp_avg_sq"] = torch.mul(state["exp_avg_sq"], self.beta2, out=into(out, "exp_avg_sq")).addcmul_(
            g, g, value=1.0 - self.beta2)
        target = self._target(g, new, step)
        if step == 1 and self.start == "target":
            new["velocity"] = target if out is None else out["velocity"].copy_(target)
        else:
            new["velocity"] = torch.lerp(state["velocity"], target, self.gain, out=into(out, "velocity"))
        return new

    def equilibrium(self, g, state, step):
        return {"velocity": self._target(g, state, step)}
