"""Direction fields: ``(g, memory, step) -> v``, the velocity target the metric then
measures. Each reads the memory its transition keeps (see :mod:`.transitions`)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..._checks import check_real

__all__ = ["Gradient", "Momentum", "BiasCorrectedMomentum", "SignOfInterpolation", "Interpolation", "Memory",
           "AlignedMomentum"]


class Gradient:
    """v = g."""

    def __call__(self, g, memory, step):
        return g


@dataclass(frozen=True)
class Momentum:
    """v = b (heavy ball) or g + μb (Nesterov), reading :class:`HeavyBall`'s buffer."""

    momentum: float
    nesterov: bool = False

    def __call__(self, g, memory, step):
        buf = memory["momentum_buffer"]
        return g.add(buf, alpha=self.momentum) if self.nesterov else buf


@dataclass(frozen=True)
class BiasCorrectedMomentum:
    """v = m / (1 − β₁ᵗ), reading :class:`Moments`' first moment."""

    beta1: float

    def __call__(self, g, memory, step):
        return memory["exp_avg"] / (1.0 - self.beta1**step)

    def factored(self, g, memory, step):
        """(m, 1 / (1 − β₁ᵗ)): the direction as a memory tensor and a scalar, so that a
        homogeneous metric can fold the scalar into the step size instead of copying m."""
        return memory["exp_avg"], 1.0 / (1.0 - self.beta1**step)


class SignOfInterpolation:
    """v = sign(c), c the interpolation :class:`LionMemory` formed for this step.

    The sign is taken in c's own buffer: c is a transient entry, formed afresh by every
    update and kept by nobody, so no copy is spent on it; sign is idempotent, so a second
    read of the same memory gives the same v."""

    def __call__(self, g, memory, step):
        return memory["interpolation"].sign_()


@dataclass(frozen=True)
class Interpolation:
    """v = g + μ(m − g) = lerp(g, m, μ) (Nesterov, as torch.optim.Muon) or v = m, reading
    :class:`EMAMomentum`."""

    momentum: float
    nesterov: bool = True

    def __call__(self, g, memory, step):
        m = memory["exp_avg"]
        return g.lerp(m, self.momentum) if self.nesterov else m


@dataclass(frozen=True)
class Memory:
    """v = memory[key]: the direction is a memory entry itself (a tracked velocity)."""

    key: str = "velocity"

    def __call__(self, g, memory, step):
        return memory[self.key]


@dataclass(frozen=True)
class AlignedMomentum:
    """The direction axis of the new instances: momentum that can never point against
    the gradient nor outgrow it.

    With m the momentum (:class:`EMAMomentum`): drop the part of m opposed to g,
    m₊ = m − min(0, ⟨m, g⟩/‖g‖²) g, cap it at ρ‖g‖, and add it to the gradient:
    v = g + μ · min(1, ρ‖g‖/‖m₊‖) · m₊ (per parameter tensor).

    Descent alignment (the assumption of the UUB and PL theorems), for every state, not
    only on the target manifold: ⟨m₊, g⟩ = max(0, ⟨m, g⟩) ≥ 0, hence ⟨v, g⟩ ≥ ‖g‖², and
    ‖v‖ ≤ (1 + μρ)‖g‖. Both hold per tensor, hence for the whole parameter vector (sum
    them). At g = 0 the direction is 0: stationary points stay stationary.
    """

    weight: float = 0.9
    ratio: float = 1.0

    def __post_init__(self):
        check_real("weight", self.weight, low=0.0)
        check_real("ratio", self.ratio, low=0.0)

    def __call__(self, g, memory, step):
        m = memory["exp_avg"]
        gg = torch.dot(g.reshape(-1), g.reshape(-1))
        mg = torch.dot(m.reshape(-1), g.reshape(-1))
        opposed = torch.clamp(mg, max=0.0) / gg.clamp_min(torch.finfo(g.dtype).tiny)
        m_plus = m - opposed * g
        cap = self.ratio * gg.sqrt() / torch.linalg.vector_norm(m_plus).clamp_min(torch.finfo(g.dtype).tiny)
        return g + (self.weight * torch.clamp(cap, max=1.0)) * m_plus
