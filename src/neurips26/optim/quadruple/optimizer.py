"""The quadruple as one functional object (:class:`Quadruple`), the functional step over a
list of parameters (:func:`_quadruple_step`), and the ``torch.optim.Optimizer`` shell
over it (:class:`QuadrupleOptimizer`), as ``torch.optim.AdamW`` is over
``_single_tensor_adamw``."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Iterable

import torch

from ..._checks import check_real
from .._shell import CheckedOptimizer, check_lr, check_weight_decay, collect_group
from .base import Direction, Lift, Metric, Transition

__all__ = ["Quadruple", "QuadrupleOptimizer"]

_SUMS = ("distance_sq", "weighted_distance_sq", "drift_sq", "target_sq", "velocity_sq", "grad_sq", "grad_dot_target")


@dataclass(frozen=True)
class Quadruple:
    """(metric, transition, direction, lift) as one functional object, optax's init/update
    pair for one parameter tensor:

    * ``init(p) -> state``: the transition's memory and the step counter (0);
    * ``update(g, state, step, out=None) -> (u, memory)``: advance the memory with g
      (pure without ``out``; into ``out``'s buffers with it, see :mod:`.base`) and return
      the velocity u = metric(direction(g, memory)) the step applies, ``p ← p − η u``;
    * ``apply(p, g, memory, step, alpha)``: ``p ← p + α u`` without the copies that
      composing u costs when the parts allow it (the optimizer's hot path);
    * ``target_velocity(g, memory, step)``: u at the fast memory's fixed point (NAIM).
    """

    metric: Metric
    transition: Transition
    direction: Direction
    lift: Lift = Lift()
    # Fast paths, found once: a per-shape factor on η, a direction given as (tensor,
    # scalar) when the metric is homogeneous, a metric that writes into p itself.
    _step_scale: Callable | None = field(init=False, repr=False, compare=False)
    _factored: Callable | None = field(init=False, repr=False, compare=False)
    _fused: Callable | None = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        for name, part, needs in (("metric", self.metric, "__call__"), ("transition", self.transition, "update"),
                                  ("direction", self.direction, "__call__")):
            if not callable(getattr(part, needs, None)):
                raise TypeError(f"{name} must provide {needs}(), got {type(part).__name__}")
        homogeneous = getattr(self.metric, "homogeneous", False)
        object.__setattr__(self, "_step_scale", getattr(self.metric, "step_scale", None))
        object.__setattr__(self, "_factored", getattr(self.direction, "factored", None) if homogeneous else None)
        object.__setattr__(self, "_fused", getattr(self.metric, "apply", None))

    def init(self, p: torch.Tensor) -> dict:
        return {**self.transition.init(p), "step": 0}

    def step_scale(self, shape) -> float:
        """The metric's factor on the step size for a parameter of this shape (1 if none)."""
        return self._step_scale(shape) if self._step_scale else 1.0

    def velocity(self, g: torch.Tensor, memory: dict, step: int) -> torch.Tensor:
        """u = metric(direction(g, memory), memory)."""
        return self.metric(self.direction(g, memory, step), memory, step)

    def update(self, g: torch.Tensor, state: dict, step: int, out: dict | None = None) -> tuple[torch.Tensor, dict]:
        """(u, memory): the velocity of this step and the memory after g."""
        memory = self.transition.update(g, state, step, out)
        return self.velocity(g, memory, step), memory

    def target_velocity(self, g: torch.Tensor, memory: dict, step: int) -> torch.Tensor:
        """u* = metric(direction(g, fixed point)), the fast memory at its equilibrium for g
        and the slow memory held."""
        equilibrium = getattr(self.transition, "equilibrium", None)
        fixed = {**memory, **(equilibrium(g, memory, step) if equilibrium else {})}
        return self.velocity(g, fixed, step)

    def apply(self, p: torch.Tensor, g: torch.Tensor, memory: dict, step: int, alpha: float) -> None:
        """p ← p + α · metric(direction(g)) in place: a homogeneous metric takes the
        direction's scalar factor into α, and a metric with a fused ``apply`` writes into p
        directly."""
        if self._factored is not None:
            v, c = self._factored(g, memory, step)
            alpha *= c
        else:
            v = self.direction(g, memory, step)
        if self._fused is not None:
            self._fused(p, v, memory, step, alpha)
        else:
            p.add_(self.metric(v, memory, step), alpha=alpha)


def _quadruple_step(
    params: list[torch.Tensor],
    grads: list[torch.Tensor],
    states: list[dict],
    quadruple: Quadruple,
    *,
    lr: float,
    weight_decay: float,
    sums: dict | None = None,
    trace: dict | None = None,
    maximize: bool = False,
) -> None:
    """One step of every parameter, in place on ``params`` and on the buffers of
    ``states`` (each initialized by ``quadruple.init``):

        g ← ∇f (−∇f with ``maximize``, as torch.optim) (+ λp if coupled);  memory ← Φ(g);
        p ← p(1 − ηλ if decoupled) − η r u,

    r the metric's step scale. With ``sums`` (the diagnostics of the step), u is composed
    unfused, the step's geometry is added to ``sums`` and each parameter's (u, u*) is kept
    in ``trace``; otherwise the update takes the fused path (:meth:`Quadruple.apply`).
    """
    trace = {} if trace is None else trace
    for p, g, state in zip(params, grads, states):
        _single_tensor_step(p, g, state, quadruple, lr, weight_decay, sums, trace, maximize)


def _single_tensor_step(p, g, state, quadruple, lr, weight_decay, sums, trace, maximize=False) -> None:
    # One parameter per call, so that this step's temporaries (the coupled gradient, a
    # transient memory entry, an unfused velocity) are freed before the next parameter
    # allocates its own: the allocator then reuses their memory instead of faulting in
    # fresh pages for every tensor.
    state["step"] += 1
    t = state["step"]
    if maximize:
        g = -g  # torch.optim's maximize: a new tensor, the .grad is left alone
    if weight_decay and not quadruple.lift.decoupled:
        g = g.add(p, alpha=weight_decay)
    memory = quadruple.transition.update(g, state, t, out=state)
    scale = quadruple.step_scale(p.shape)
    if weight_decay and quadruple.lift.decoupled:
        p.mul_(1.0 - lr * weight_decay)
    if sums is None:
        quadruple.apply(p, g, memory, t, -lr * scale)
    else:
        u = quadruple.velocity(g, memory, t)
        _record(sums, trace, p, u, quadruple.target_velocity(g, memory, t), g, lr, scale)
        p.add_(u, alpha=-lr * scale)


def _record(sums, trace, p, u, target, g, lr, scale):
    """Add one parameter's share of the step's geometry to ``sums`` and keep its (u, u*)
    in ``trace``; the velocities are in step units (the metric's step scale applied)."""
    if scale != 1.0:
        u, target = u * scale, target * scale
    norm = lambda x: float(torch.linalg.vector_norm(x))
    gap = norm(u - target) ** 2
    sums["distance_sq"] += gap
    sums["weighted_distance_sq"] += lr * gap
    previous = trace.get(p)
    if previous is None:
        sums["has_drift"] = False
    else:
        sums["drift_sq"] += norm(target - previous[1]) ** 2
    sums["target_sq"] += norm(target) ** 2
    sums["velocity_sq"] += norm(u) ** 2
    sums["grad_sq"] += norm(g) ** 2
    sums["grad_dot_target"] += float(torch.dot(g.reshape(-1), target.reshape(-1)))
    trace[p] = (u.detach().clone(), target)


def _check_bool(name: str, value) -> None:
    numpy_bool = type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_")
    if not (isinstance(value, bool) or numpy_bool):
        raise TypeError(f"{name} must be True or False, got {value!r} ({type(value).__name__})")


class QuadrupleOptimizer(CheckedOptimizer):
    """A ``torch.optim.Optimizer`` assembled from (metric, transition, direction, lift).

    Args:
        params: parameters or parameter groups.
        lr: the step size η (per group; schedulers change it).
        weight_decay: λ (per group); where it enters is the ``lift``'s choice.
        metric, transition, direction, lift: the four parts (see :mod:`.base`), kept as one
            :class:`Quadruple` in ``self.quadruple``.
        track_diagnostics: also compute, at every step, the target velocity of the NAIM
            family and keep the last velocity, so that :meth:`diagnostics` and
            :meth:`extended_state` can report them. Off by default: it costs one more
            metric evaluation per step and two parameter-sized buffers, and the update is
            then composed unfused (equal to the fused one up to rounding).
        maximize: ascend the objective (per group), as torch.optim's ``maximize``: the
            gradient is negated before anything else sees it.
        skip_nonfinite: what a step does with a gradient holding NaN or Inf: by default it
            raises FloatingPointError naming the parameter, its group and its shape, before
            anything moves; with True it skips the whole step (every group), parameters and
            memory untouched, and counts it in ``skipped_steps``. The check is one fused
            reduction over the gradients and one host read per step.

    Checks: ``lr`` finite and > 0 at construction (a group's own lr, given at construction
    or to ``add_param_group``, finite and >= 0), ``weight_decay`` finite and >= 0,
    ``maximize`` a bool; parameters of a real floating dtype (integer and complex ones are
    refused, which torch.optim does not do); the parts check their own settings (betas in
    [0, 1), eps > 0, ...). The groups' settings are checked again at every step (Python
    numbers, no tensor read), so that a value written into ``param_groups`` after
    construction (a scheduler, a hand edit, ``load_state_dict``) is checked too. There a
    negative lr is accepted, as torch.optim accepts one that a scheduler sets (the step then
    ascends); a non-finite lr or weight decay, which torch.optim would turn into NaN
    parameters, raises ValueError naming the group.

    ``step`` is a thin shell: it collects each group's parameters, gradients and states
    and hands them to the functional :func:`_quadruple_step`.

    The NAIM target manifold. The extended state is (x, u, memory), u = metric(direction)
    the velocity the step applies. The memory splits into a slow part (second moments,
    Kronecker factors) and a fast part (momenta, tracked velocities); each transition's
    ``equilibrium(g, state, step)`` gives the fast part's fixed point for the gradient g with
    the slow part held. The target velocity is the velocity at that fixed point,
    u*(x, slow) = metric(direction(g, fixed point)), and the target manifold at step t is
    {u = u*}: the fast state contracts onto it while x descends along it.
    """

    def __init__(self, params: Iterable, *, metric, transition, direction, lift: Lift | None = None,
                 lr: float = 1e-3, weight_decay: float = 0.0, track_diagnostics: bool = False,
                 maximize: bool = False, skip_nonfinite: bool = False):
        lr = check_real("lr", lr, low=0.0, low_open=True)
        weight_decay = check_real("weight_decay", weight_decay, low=0.0)
        _check_bool("maximize", maximize)
        self.quadruple = Quadruple(metric, transition, direction, lift or Lift())
        self.track_diagnostics = bool(track_diagnostics)
        self.skip_nonfinite = bool(skip_nonfinite)
        self.skipped_steps = 0
        self._trace: dict = {}  # param -> (velocity, target velocity) of the last step
        self._last: dict | None = None
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay, maximize=maximize))

    def check_group(self, group: dict, index: int, at_step: bool) -> None:
        check_lr(group, index, at_step)
        check_weight_decay(group, index)
        _check_bool(f"maximize (param group {index})", group.get("maximize", False))

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        for group in self.param_groups:  # a state dict saved before maximize existed
            group.setdefault("maximize", False)

    @property
    def metric(self):
        return self.quadruple.metric

    @property
    def transition(self):
        return self.quadruple.transition

    @property
    def direction(self):
        return self.quadruple.direction

    @property
    def lift(self) -> Lift:
        return self.quadruple.lift

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None):
        loss, skip = self.begin_step(closure)
        if skip:
            return loss
        sums = dict.fromkeys(_SUMS, 0.0) if self.track_diagnostics else None
        for group in self.param_groups:
            params, grads, states = collect_group(self, group, self.quadruple.init)
            _quadruple_step(params, grads, states, self.quadruple, lr=group["lr"],
                            weight_decay=group["weight_decay"], sums=sums, trace=self._trace,
                            maximize=group.get("maximize", False))
        if sums is not None:
            sums["loss"] = None if loss is None else float(loss.detach() if torch.is_tensor(loss) else loss)
            self._last = sums
        return loss

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
