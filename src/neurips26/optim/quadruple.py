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
    "KroneckerFactors", "KroneckerPreconditioner", "EMAMomentum", "PreconditionedTracking", "Interpolation",
    "Memory", "AlignedMomentum", "NewtonSchulz", "SpectralSteepest",
    "quadruple_sgd", "quadruple_adam", "quadruple_adamw", "quadruple_lion", "quadruple_shampoo", "quadruple_muon",
    "quadruple_spectral", "quadruple_tracking", "quadruple_aligned",
]


def _check_beta(name: str, value: float) -> None:
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {value!r}")


def _rms_denominator(second: torch.Tensor, beta2: float, step: int, eps: float) -> torch.Tensor:
    """√(v / (1 − β₂ᵗ)) + ε, Adam's denominator, as torch computes it (a new tensor)."""
    return second.sqrt().div_(math.sqrt(1.0 - beta2**step)).add_(eps)


# --- transitions Φ: the memory -----------------------------------------------------------

class NoMemory:
    """Φ = identity: plain gradient descent keeps no state."""

    def init(self, p: torch.Tensor) -> dict:
        return {}

    def update(self, g: torch.Tensor, state: dict, step: int) -> None:
        pass

    def equilibrium(self, g, state, step):
        return {}


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

    def equilibrium(self, g, state, step):
        # fast: the first moment, at the value whose bias correction is g; the second
        # moment is the slow memory and is held.
        return {"exp_avg": g * (1.0 - self.beta1**step)}


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

    def equilibrium(self, g, state, step):
        return {"exp_avg": g.clone(), "interpolation": g.clone()}


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

    def equilibrium(self, g, state, step):
        return {}  # the factors are slow memory; Shampoo has no fast state


@dataclass(frozen=True)
class EMAMomentum:
    """m ← βm + (1 − β)g from m = 0 (Muon's buffer; the memory of :func:`quadruple_aligned`).
    Its fixed point for a constant gradient is g."""

    beta: float

    def __post_init__(self):
        _check_beta("beta", self.beta)

    def init(self, p):
        return {"exp_avg": torch.zeros_like(p)}

    def update(self, g, state, step):
        state["exp_avg"].lerp_(g, 1.0 - self.beta)

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
        if not 0.0 < self.gain <= 1.0:
            raise ValueError(f"gain must be in (0, 1], got {self.gain!r}")
        _check_beta("beta2", self.beta2)
        if not self.eps > 0.0:
            raise ValueError(f"eps must be > 0, got {self.eps!r}")
        if self.start not in ("target", "zero"):
            raise ValueError(f"start must be 'target' or 'zero', got {self.start!r}")

    def init(self, p):
        return {"exp_avg_sq": torch.zeros_like(p), "velocity": torch.zeros_like(p)}

    def _target(self, g, state, step):
        denom = _rms_denominator(state["exp_avg_sq"], self.beta2, step, self.eps)
        return torch.div(g, denom, out=denom)

    def update(self, g, state, step):
        state["exp_avg_sq"].mul_(self.beta2).addcmul_(g, g, value=1.0 - self.beta2)
        target = self._target(g, state, step)
        if step == 1 and self.start == "target":
            state["velocity"].copy_(target)
        else:
            state["velocity"].lerp_(target, self.gain)

    def equilibrium(self, g, state, step):
        return {"velocity": self._target(g, state, step)}


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

    def factored(self, g, state, step):
        """(m, 1 / (1 − β₁ᵗ)): the direction as a memory tensor and a scalar, so that a
        homogeneous metric can fold the scalar into the step size instead of copying m."""
        return state["exp_avg"], 1.0 / (1.0 - self.beta1**step)


class SignOfInterpolation:
    """v = sign(c), c the interpolation :class:`LionMemory` just formed."""

    def __call__(self, g, state, step):
        return state.pop("interpolation").sign_()


@dataclass(frozen=True)
class Interpolation:
    """v = g + μ(m − g) = lerp(g, m, μ) (Nesterov, as torch.optim.Muon) or v = m, reading
    :class:`EMAMomentum`."""

    momentum: float
    nesterov: bool = True

    def __call__(self, g, state, step):
        m = state["exp_avg"]
        return g.lerp(m, self.momentum) if self.nesterov else m


@dataclass(frozen=True)
class Memory:
    """v = state[key]: the direction is a memory entry itself (a tracked velocity)."""

    key: str = "velocity"

    def __call__(self, g, state, step):
        return state[self.key]


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
        if not self.weight >= 0.0:
            raise ValueError(f"weight must be >= 0, got {self.weight!r}")
        if not self.ratio >= 0.0:
            raise ValueError(f"ratio must be >= 0, got {self.ratio!r}")

    def __call__(self, g, state, step):
        m = state["exp_avg"]
        gg = torch.dot(g.reshape(-1), g.reshape(-1))
        mg = torch.dot(m.reshape(-1), g.reshape(-1))
        opposed = torch.clamp(mg, max=0.0) / gg.clamp_min(torch.finfo(g.dtype).tiny)
        m_plus = m - opposed * g
        cap = self.ratio * gg.sqrt() / torch.linalg.vector_norm(m_plus).clamp_min(torch.finfo(g.dtype).tiny)
        return g + (self.weight * torch.clamp(cap, max=1.0)) * m_plus


# --- metrics -----------------------------------------------------------------------------

class Euclidean:
    """u = v: the identity metric."""

    homogeneous = True

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
        denom = self._denominator(state, step)
        return torch.div(v, denom, out=denom)

    homogeneous = True  # u(cv) = c u(v)

    def _denominator(self, state, step):
        return _rms_denominator(state["max_exp_avg_sq" if self.amsgrad else "exp_avg_sq"], self.beta2, step, self.eps)

    def apply(self, p, v, state, step, alpha):
        """p ← p + α u(v) in one fused pass (what torch's Adam does with addcdiv)."""
        p.addcdiv_(v, self._denominator(state, step), value=alpha)


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

    def __call__(self, v, state, step):
        if v.ndim == 1:
            return _inverse_root(state["left"], 0.5) @ v
        return _inverse_root(state["left"], 0.25) @ v @ _inverse_root(state["right"], 0.25)


def _as_matrix(v: torch.Tensor) -> torch.Tensor:
    return v.reshape(v.shape[0], -1) if v.ndim > 2 else v


@dataclass(frozen=True)
class NewtonSchulz:
    """u = r · NS(v): Muon's metric, the quintic Newton–Schulz orthogonalization run in
    bfloat16 exactly as ``torch.optim.Muon`` does it (normalize by the Frobenius norm
    clamped at eps, then X ← aX + (bA + cA²)X with A = XXᵀ on the wide orientation),
    scaled by r = √max(1, rows/cols) (``adjust_lr="original"``), 0.2·√max(rows, cols)
    (``"match_rms_adamw"``) or 1 (``None``). Matrices only, as torch's Muon.

    r is handed to the optimizer as ``step_scale`` and folded into the step size rather
    than multiplied into the update: in float32 the two roundings differ in the last bit,
    and the bfloat16 iteration amplifies a last-bit difference over a few hundred steps."""

    coefficients: tuple = (3.4445, -4.7750, 2.0315)
    steps: int = 5
    eps: float = 1e-7
    adjust_lr: str | None = "original"
    dtype: torch.dtype = torch.bfloat16

    def __post_init__(self):
        if self.adjust_lr not in (None, "original", "match_rms_adamw"):
            raise ValueError(f"adjust_lr must be None, 'original' or 'match_rms_adamw', got {self.adjust_lr!r}")
        if not (isinstance(self.steps, int) and 0 <= self.steps < 100):
            raise ValueError(f"steps must be an int in [0, 100), got {self.steps!r}")

    def step_scale(self, shape) -> float:
        if len(shape) != 2:
            return 1.0  # not a matrix: __call__ refuses it with a clear message
        rows, cols = shape
        if self.adjust_lr == "original":
            return math.sqrt(max(1.0, rows / cols))
        if self.adjust_lr == "match_rms_adamw":
            return 0.2 * math.sqrt(max(rows, cols))
        return 1.0

    def __call__(self, v, state, step):
        if v.ndim != 2:
            raise ValueError(f"the Newton-Schulz metric needs matrix parameters, got shape {tuple(v.shape)}; "
                             "give vectors to another optimizer (as with torch.optim.Muon)")
        a, b, c = self.coefficients
        tall = v.shape[0] > v.shape[1]
        x = v.to(self.dtype)
        x = x.T if tall else x
        x = x / x.norm().clamp(min=self.eps)
        for _ in range(self.steps):
            gram = x @ x.T
            x = torch.addmm(x, torch.addmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
        x = x.T if tall else x
        return x.to(v.dtype)


class SpectralSteepest:
    """The metric axis of the new instances: steepest descent in the spectral norm.

    For a matrix direction v = U S Vᵀ, u = argmax_{‖w‖₂ ≤ ‖v‖_*} ⟨v, w⟩ = ‖v‖_* U Vᵀ
    (‖·‖_* the nuclear norm, the spectral norm's dual): the step of the non-Euclidean
    gradient flow whose metric is the spectral norm (what Muon's orthogonalization
    approximates, but with the dual-norm length instead of a unit length, and the exact
    polar factor from an SVD). Tensors of more than two dimensions are seen as
    (shape[0], rest) matrices; vectors and scalars get the Euclidean step u = v (the
    spectral norm of a column is its ℓ2 norm).

    Descent alignment (the assumption of the UUB and PL theorems): ⟨v, u⟩ = ‖v‖_*² ≥ ‖v‖_F²
    and ‖u‖_F = ‖v‖_* √rank ≤ rank · ‖v‖_F, so with v = ∇f the field is aligned with
    constants (1, min(rows, cols)). Muon's unit-length step ‖u‖ = √rank is not bounded by
    a multiple of ‖∇f‖, which is why Muon falls outside the linear-convergence theorem.
    """

    def __call__(self, v, state, step):
        if v.ndim < 2:
            return v
        mat = _as_matrix(v)
        u, s, vh = torch.linalg.svd(mat, full_matrices=False)
        return ((u * s.sum()) @ vh).reshape(v.shape)


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
        track_diagnostics: also compute, at every step, the target velocity of the NAIM
            family and keep the last velocity, so that :meth:`diagnostics` and
            :meth:`extended_state` can report them. Off by default: it costs one more
            metric evaluation per step and two parameter-sized buffers, and the update is
            then composed unfused (equal to the fused one up to rounding).

    The NAIM target manifold. The extended state is (x, u, memory), u = metric(direction)
    the velocity the step applies. The memory splits into a slow part (second moments,
    Kronecker factors) and a fast part (momenta, tracked velocities); each transition's
    ``equilibrium(g, state, step)`` gives the fast part's fixed point for the gradient g with
    the slow part held. The target velocity is the velocity at that fixed point,
    u*(x, slow) = metric(direction(g, fixed point)), and the target manifold at step t is
    {u = u*}: the fast state contracts onto it while x descends along it.
    """

    def __init__(self, params: Iterable, *, metric, transition, direction, lift: Lift | None = None,
                 lr: float = 1e-3, weight_decay: float = 0.0, track_diagnostics: bool = False):
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
        self._step_scale = getattr(metric, "step_scale", None)  # a per-shape factor on η, if the metric has one
        self._factored = getattr(direction, "factored", None) if getattr(metric, "homogeneous", False) else None
        self._fused = getattr(metric, "apply", None)
        self.track_diagnostics = bool(track_diagnostics)
        self._trace: dict = {}  # param -> (velocity, target velocity) of the last step
        self._last: dict | None = None
        super().__init__(params, dict(lr=float(lr), weight_decay=float(weight_decay)))

    def _velocity(self, g, state, t):
        return self.metric(self.direction(g, state, t), state, t)

    def _target_velocity(self, g, state, t):
        equilibrium = getattr(self.transition, "equilibrium", None)
        fixed = {**state, **(equilibrium(g, state, t) if equilibrium else {})}
        return self._velocity(g, fixed, t)

    def _apply(self, p, g, state, t, alpha):
        """p ← p + α · metric(direction(g)), without the copies that composition costs when
        the parts allow it: a homogeneous metric takes the direction's scalar factor into α,
        and a metric with a fused ``apply`` writes into p directly."""
        if self._factored is not None:
            v, c = self._factored(g, state, t)
            alpha *= c
        else:
            v = self.direction(g, state, t)
        if self._fused is not None:
            self._fused(p, v, state, t, alpha)
        else:
            p.add_(self.metric(v, state, t), alpha=alpha)

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        sums = dict.fromkeys(("distance_sq", "weighted_distance_sq", "drift_sq", "target_sq", "velocity_sq",
                              "grad_sq", "grad_dot_target"), 0.0) if self.track_diagnostics else None
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
                scale = self._step_scale(p.shape) if self._step_scale else 1.0
                if wd and self.lift.decoupled:
                    p.mul_(1.0 - lr * wd)
                if sums is not None:
                    u = self._velocity(g, state, t)
                    self._record(sums, p, u, self._target_velocity(g, state, t), g, lr, scale)
                    p.add_(u, alpha=-lr * scale)
                else:
                    self._apply(p, g, state, t, -lr * scale)
        if sums is not None:
            sums["loss"] = None if loss is None else float(loss.detach() if torch.is_tensor(loss) else loss)
            self._last = sums
        return loss

    def _record(self, sums, p, u, target, g, lr, scale):
        """Add one parameter's share of the step's geometry to ``sums``; the velocities are
        in step units (the metric's step scale applied)."""
        if scale != 1.0:
            u, target = u * scale, target * scale
        norm = lambda x: float(torch.linalg.vector_norm(x))
        gap = norm(u - target) ** 2
        sums["distance_sq"] += gap
        sums["weighted_distance_sq"] += lr * gap
        previous = self._trace.get(p)
        if previous is None:
            sums["has_drift"] = False
        else:
            sums["drift_sq"] += norm(target - previous[1]) ** 2
        sums["target_sq"] += norm(target) ** 2
        sums["velocity_sq"] += norm(u) ** 2
        sums["grad_sq"] += norm(g) ** 2
        sums["grad_dot_target"] += float(torch.dot(g.reshape(-1), target.reshape(-1)))
        self._trace[p] = (u.detach().clone(), target)

    def diagnostics(self, loss: float | None = None, f_star: float = 0.0, coupling: float = 1.0) -> dict:
        """The geometry of the last step (needs ``track_diagnostics=True``).

        Returns a dict with
          * ``distance``: ‖u − u*‖, the velocity's distance to the target manifold;
          * ``drift``: ‖u*_t − u*_{t−1}‖, the target field's drift between consecutive
            iterates (parameters are Euclidean here, so parallel transport is the identity;
            None on the first step);
          * ``lyapunov``: V = f − f* + (κ/2) Σ_p η_p ‖u_p − u*_p‖², the backstepping function
            (κ = ``coupling``; the velocity term is weighted by the step size so that both
            terms are in units of the loss). Needs the loss at the step's point: pass it, or
            step with a closure. None when unknown;
          * ``alignment``: ⟨g, u*⟩ / (‖g‖‖u*‖), ``descent_ratio`` ⟨g, u*⟩ / ‖g‖² and
            ``growth_ratio`` ‖u*‖ / ‖g‖, the constants of the descent-alignment assumption;
          * ``velocity_norm``, ``target_norm``, ``grad_norm``.
        """
        if not self.track_diagnostics:
            raise RuntimeError("diagnostics need QuadrupleOptimizer(..., track_diagnostics=True)")
        if self._last is None:
            raise RuntimeError("no step has been taken yet")
        s = self._last
        loss = s["loss"] if loss is None else float(loss)
        gnorm, tnorm = math.sqrt(s["grad_sq"]), math.sqrt(s["target_sq"])
        ratio = lambda a, b: a / b if b > 0 else 0.0
        return {
            "distance": math.sqrt(s["distance_sq"]),
            "drift": math.sqrt(s["drift_sq"]) if s.get("has_drift", True) else None,
            "lyapunov": None if loss is None else loss - f_star + 0.5 * coupling * s["weighted_distance_sq"],
            "alignment": ratio(s["grad_dot_target"], gnorm * tnorm),
            "descent_ratio": ratio(s["grad_dot_target"], s["grad_sq"]),
            "growth_ratio": ratio(tnorm, gnorm),
            "velocity_norm": math.sqrt(s["velocity_sq"]), "target_norm": tnorm, "grad_norm": gnorm,
        }

    def extended_state(self) -> list[dict]:
        """Per parameter with state: the point x, the last velocity u, the target velocity
        u* (the target manifold {u = u*} at this state) and the memory. Velocities need
        ``track_diagnostics=True`` (they are None otherwise)."""
        out = []
        for group in self.param_groups:
            for p in group["params"]:
                if p not in self.state:
                    continue
                velocity, target = self._trace.get(p, (None, None))
                memory = {k: v for k, v in self.state[p].items() if k != "step"}
                out.append({"param": p, "velocity": velocity, "target_velocity": target, "memory": memory})
        return out


# --- classical instances -----------------------------------------------------------------

def quadruple_sgd(params, lr=1e-3, momentum=0.0, dampening=0.0, nesterov=False, weight_decay=0.0,
                  track_diagnostics=False):
    """torch.optim.SGD as a quadruple: Euclidean metric, heavy-ball memory, coupled decay."""
    if nesterov and (momentum <= 0 or dampening != 0):
        raise ValueError("Nesterov momentum needs momentum > 0 and zero dampening")
    if momentum:
        transition, direction = HeavyBall(momentum, dampening), Momentum(momentum, nesterov)
    else:
        transition, direction = NoMemory(), Gradient()
    return QuadrupleOptimizer(params, metric=Euclidean(), transition=transition, direction=direction,
                              lift=Lift(decoupled=False), lr=lr, weight_decay=weight_decay,
                              track_diagnostics=track_diagnostics)


def _adam_like(params, lr, betas, eps, weight_decay, amsgrad, decoupled, track_diagnostics):
    beta1, beta2 = betas
    return QuadrupleOptimizer(params, metric=DiagonalAdaptive(beta2, eps, amsgrad),
                              transition=Moments(beta1, beta2, amsgrad), direction=BiasCorrectedMomentum(beta1),
                              lift=Lift(decoupled=decoupled), lr=lr, weight_decay=weight_decay,
                              track_diagnostics=track_diagnostics)


def quadruple_adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False,
                   track_diagnostics=False):
    """torch.optim.Adam as a quadruple: diagonal adaptive metric, two moments, coupled decay."""
    return _adam_like(params, lr, betas, eps, weight_decay, amsgrad, False, track_diagnostics)


def quadruple_adamw(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False,
                    track_diagnostics=False):
    """torch.optim.AdamW as a quadruple: Adam's parts with the decay decoupled."""
    return _adam_like(params, lr, betas, eps, weight_decay, amsgrad, True, track_diagnostics)


def quadruple_lion(params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0, track_diagnostics=False):
    """Lion (Chen et al. 2023) as a quadruple: Euclidean metric on the sign of the
    interpolated momentum, decoupled decay."""
    return QuadrupleOptimizer(params, metric=Euclidean(), transition=LionMemory(*betas),
                              direction=SignOfInterpolation(), lift=Lift(decoupled=True), lr=lr,
                              weight_decay=weight_decay, track_diagnostics=track_diagnostics)


def quadruple_shampoo(params, lr=1e-1, eps=1e-4, weight_decay=0.0, track_diagnostics=False):
    """Shampoo (Gupta et al. 2018, Algorithm 1 and its order-k form) as a quadruple:
    Kronecker-factored metric, accumulated factors, the raw gradient as direction,
    coupled decay. Dense factors: for small and medium layers."""
    return QuadrupleOptimizer(params, metric=KroneckerPreconditioner(), transition=KroneckerFactors(eps),
                              direction=Gradient(), lift=Lift(decoupled=False), lr=lr, weight_decay=weight_decay,
                              track_diagnostics=track_diagnostics)


def quadruple_muon(params, lr=1e-3, weight_decay=0.1, momentum=0.95, nesterov=True,
                   ns_coefficients=(3.4445, -4.7750, 2.0315), eps=1e-7, ns_steps=5, adjust_lr_fn=None,
                   track_diagnostics=False):
    """torch.optim.Muon as a quadruple (same arguments and defaults): the bfloat16
    Newton–Schulz metric, an EMA momentum, a Nesterov interpolation, decoupled decay.
    Matrices only; give vectors to another optimizer."""
    return QuadrupleOptimizer(params, metric=NewtonSchulz(tuple(ns_coefficients), ns_steps, eps,
                                                          adjust_lr_fn or "original"),
                              transition=EMAMomentum(momentum), direction=Interpolation(momentum, nesterov),
                              lift=Lift(decoupled=True), lr=lr, weight_decay=weight_decay,
                              track_diagnostics=track_diagnostics)


# --- three new instances, one per design axis ----------------------------------------------

def quadruple_spectral(params, lr=1e-2, momentum=0.9, weight_decay=0.0, track_diagnostics=False):
    """Metric axis: spectral steepest descent (:class:`SpectralSteepest`) on an EMA momentum
    with a Nesterov interpolation. Satisfies descent alignment on the target manifold with
    constants (1, rank), so the UUB and PL theorems apply, which Muon's unit-length step
    does not allow."""
    return QuadrupleOptimizer(params, metric=SpectralSteepest(), transition=EMAMomentum(momentum),
                              direction=Interpolation(momentum, nesterov=True), lift=Lift(decoupled=True), lr=lr,
                              weight_decay=weight_decay, track_diagnostics=track_diagnostics)


def quadruple_tracking(params, lr=1e-3, gain=0.1, beta2=0.999, eps=1e-8, weight_decay=0.0, start="target",
                       track_diagnostics=False):
    """State axis: a velocity tracking the RMS-preconditioned gradient at the fixed gain α
    (:class:`PreconditionedTracking`), whose distance to the target manifold contracts by
    (1 − α) per step by construction. Euclidean metric on it, decoupled decay."""
    return QuadrupleOptimizer(params, metric=Euclidean(), transition=PreconditionedTracking(gain, beta2, eps, start),
                              direction=Memory("velocity"), lift=Lift(decoupled=True), lr=lr,
                              weight_decay=weight_decay, track_diagnostics=track_diagnostics)


def quadruple_aligned(params, lr=1e-2, momentum=0.9, weight=0.9, ratio=1.0, weight_decay=0.0,
                      track_diagnostics=False):
    """Direction axis: gradient plus the capped, non-opposing part of an EMA momentum
    (:class:`AlignedMomentum`), descent-aligned at every state with constants
    (1, 1 + weight·ratio). Euclidean metric, decoupled decay."""
    return QuadrupleOptimizer(params, metric=Euclidean(), transition=EMAMomentum(momentum),
                              direction=AlignedMomentum(weight, ratio), lift=Lift(decoupled=True), lr=lr,
                              weight_decay=weight_decay, track_diagnostics=track_diagnostics)
