"""ParetoM³: preference-guided optimization over the weak Pareto set, on any list of torch
losses (the ParetoM³ paper).

A preference f₀ (a ray in objective space, a target point, any regularizer of the
parameters, one task) is minimized over the weak Pareto set of F = (F_1, ..., F_m) through
the penalized min-max-min (M³) problem

    min_x  f₀(x) + γ u_α(x),   u_α(x) = max_y min_{λ∈Δ} λᵀ(F(x) − F(y)) − (α/2)‖x − y‖²,

i.e. min over x of max over the shadow point y of min over the weights λ of

    L(x, y, λ) = f₀(x) + γ [λᵀ(F(x) − F(y)) − (α/2)‖x − y‖²].

ParetoM³ is single-loop: each iteration takes a gradient ascent step on y, a projected
descent step on λ and a descent step on x, from the same (x, y, λ). The gradients it needs
are those of f₀(x) + γλᵀF(x) at x and of λᵀF(y) at y: **two backward passes per iteration,
whatever the number of objectives m** (MGDA, EPO, PMTL, PNG need the m-row Jacobian).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
from torch.func import functional_call

from .._checks import check_int, check_real
from .multiobjective import check_losses, project_simplex

__all__ = ["Preference", "Ray", "TargetPoint", "Regularizer", "Objective", "ParameterVector",
           "MultiObjectiveMethod", "ParetoM3", "paretom3_lambda", "paretom3_step", "paretom3_residuals"]


# ----------------------------------------------------------------------------- preferences

class Preference:
    """A preference f₀: a scalar of the loss vector F(x) (m,) and the parameters (a dict
    name -> tensor, as ``model.named_parameters()``). Subclasses implement ``value``."""

    def value(self, losses: torch.Tensor, params: dict[str, torch.Tensor]) -> torch.Tensor:
        raise NotImplementedError

    def check(self, m: int) -> None:
        """Raise ValueError if this preference does not fit m objectives."""

    def __call__(self, losses, params):
        return self.value(losses, params)


class Ray(Preference):
    """EPO-style ray r (m,), r_i > 0: prefer the point of the front where r_i F_i are all
    equal (F ∝ 1/r). f₀ = ½ Σ_i (r_i F_i − mean_j r_j F_j)², zero on the whole ray, so the
    M³ minimizer is the point where the ray meets the weak Pareto front (no penalty bias)."""

    def __init__(self, r):
        r = torch.as_tensor(r, dtype=torch.get_default_dtype()).detach()
        if r.ndim != 1 or r.numel() == 0:
            raise ValueError(f"r (the ray) must be a non-empty 1-D vector, got shape {tuple(r.shape)}")
        if not bool(torch.isfinite(r).all()) or bool((r < 0).any()) or not bool((r > 0).any()):
            raise ValueError(f"r (the ray) must be finite and >= 0 with a positive entry, got {r.tolist()}")
        self.r = r

    def check(self, m):
        if self.r.numel() != m:
            raise ValueError(f"preference: the ray has {self.r.numel()} entries for {m} objectives")

    def value(self, losses, params):
        rl = self.r.to(losses) * losses
        return 0.5 * (rl - rl.mean()).pow(2).sum()


class TargetPoint(Preference):
    """Prefer the point closest to z: in parameter space (``space="parameters"``, f₀ = ½‖x − z‖²
    over the flattened parameters, in ``named_parameters`` order) or in objective space
    (``space="objectives"``, f₀ = ½‖F(x) − z‖²)."""

    def __init__(self, z, space: str = "parameters"):
        if space not in ("parameters", "objectives"):
            raise ValueError(f"space must be 'parameters' or 'objectives', got {space!r}")
        z = torch.as_tensor(z, dtype=torch.get_default_dtype()).detach().reshape(-1)
        if z.numel() == 0 or not bool(torch.isfinite(z).all()):
            raise ValueError("z (the target point) must be a non-empty finite vector")
        self.z, self.space = z, space

    def check(self, m):
        if self.space == "objectives" and self.z.numel() != m:
            raise ValueError(f"preference: the target point has {self.z.numel()} entries for {m} objectives")

    def value(self, losses, params):
        if self.space == "objectives":
            return 0.5 * (losses - self.z.to(losses)).pow(2).sum()
        x = torch.cat([p.reshape(-1) for p in params.values()])
        if x.numel() != self.z.numel():
            raise ValueError(f"preference: the target point has {self.z.numel()} entries for {x.numel()} parameters")
        return 0.5 * (x - self.z.to(x)).pow(2).sum()


class Regularizer(Preference):
    """Any scalar of the parameters: f₀ = fn(params) (params: dict name -> tensor)."""

    def __init__(self, fn: Callable[[dict[str, torch.Tensor]], torch.Tensor]):
        if not callable(fn):
            raise TypeError("fn must be callable: params (dict name -> tensor) -> scalar tensor")
        self.fn = fn

    def value(self, losses, params):
        v = self.fn(params)
        if not isinstance(v, torch.Tensor) or v.numel() != 1:
            raise ValueError("preference: the regularizer must return a scalar tensor")
        return v.reshape(())


class Objective(Preference):
    """One task over the Pareto set: f₀ = F_i (the best point of task i among the weakly
    Pareto optimal ones)."""

    def __init__(self, i: int):
        self.i = check_int("i (the objective index)", i, minimum=0)

    def check(self, m):
        if self.i >= m:
            raise ValueError(f"preference: objective index {self.i} out of range for {m} objectives")

    def value(self, losses, params):
        return losses[self.i]


class ParameterVector(torch.nn.Module):
    """A module that is one parameter vector (x0's dtype if floating) and returns it: plugs a plain x (n,) into the
    module-based methods (``objectives = lambda forward, batch: F(forward())``)."""

    def __init__(self, x0):
        super().__init__()
        x0 = torch.as_tensor(x0)
        if not x0.is_floating_point():
            x0 = x0.to(torch.get_default_dtype())
        self.x = torch.nn.Parameter(x0.detach().clone())

    def forward(self):
        return self.x


# ----------------------------------------------------------------------------- the shared shell

Objectives = Callable[[Callable[..., Any], Any], torch.Tensor]


class MultiObjectiveMethod:
    """The interface every method here shares: ``step(batch)`` evaluates the loss vector on
    ``batch`` and moves the model's parameters; ``backward_passes`` counts backward passes
    (one per objective for a Jacobian), the unit of the budget.

    Args:
        model: the ``torch.nn.Module`` whose trainable parameters are optimized.
        objectives: ``(forward, batch) -> losses (m,)``; ``forward(*args, **kwargs)`` runs the
            model at the parameters being evaluated (through ``torch.func.functional_call``),
            so the same function serves at x and at ParetoM³'s shadow point y.
        lr: the step size on the parameters, > 0.
    """

    def __init__(self, model: torch.nn.Module, objectives: Objectives, lr: float):
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        if not callable(objectives):
            raise TypeError("objectives must be callable: (forward, batch) -> losses (m,)")
        self.model, self.objectives = model, objectives
        self.lr = check_real("lr", lr, low=0.0, low_open=True)
        self.names = [n for n, p in model.named_parameters() if p.requires_grad]
        if not self.names:
            raise ValueError("model has no trainable parameters")
        self.params = [dict(model.named_parameters())[n] for n in self.names]
        for n, p in zip(self.names, self.params):
            if not p.is_floating_point():
                raise TypeError(f"parameter {n} must be floating point, got {p.dtype}")
        self.m: int | None = None
        self.backward_passes = 0
        self.iterations = 0

    # evaluation helpers -----------------------------------------------------------------
    def losses_at(self, params: dict[str, torch.Tensor], batch) -> torch.Tensor:
        """F at the given parameters (dict name -> tensor), checked: 1-D, finite, length m."""
        buffers = dict(self.model.named_buffers())

        def forward(*args, **kwargs):
            return functional_call(self.model, {**buffers, **params}, args, kwargs)

        losses = check_losses(self.objectives(forward, batch), "losses", self.m)
        if self.m is None:
            self.m = losses.numel()
            self.on_first_losses(self.m)
        return losses

    def on_first_losses(self, m: int) -> None:
        """Hook: check the settings against m once it is known."""

    def current(self) -> dict[str, torch.Tensor]:
        return dict(zip(self.names, self.params))

    def jacobian(self, losses: torch.Tensor) -> torch.Tensor:
        """The Jacobian (m, n) of ``losses`` in the flattened parameters: m backward passes."""
        rows = []
        for i in range(losses.numel()):
            g = torch.autograd.grad(losses[i], self.params, retain_graph=True, allow_unused=True)
            rows.append(torch.cat([(torch.zeros_like(p) if gi is None else gi).reshape(-1)
                                   for p, gi in zip(self.params, g)]))
            self.backward_passes += 1
        return torch.stack(rows)

    def grad(self, scalar: torch.Tensor, params: Sequence[torch.Tensor]) -> torch.Tensor:
        """The flattened gradient of a scalar: one backward pass."""
        g = torch.autograd.grad(scalar, list(params), allow_unused=True)
        self.backward_passes += 1
        return torch.cat([(torch.zeros_like(p) if gi is None else gi).reshape(-1) for p, gi in zip(params, g)])

    @torch.no_grad()
    def apply(self, direction: torch.Tensor, lr: float | None = None) -> None:
        """x ← x − lr · direction (flattened)."""
        lr = self.lr if lr is None else lr
        at = 0
        for p in self.params:
            k = p.numel()
            p.sub_(direction[at: at + k].view_as(p).to(p.dtype), alpha=lr)
            at += k

    def step(self, batch=None) -> torch.Tensor:
        """One iteration on ``batch``; returns the loss vector at x before the step."""
        raise NotImplementedError

    def state_dict(self) -> dict:
        return {"backward_passes": self.backward_passes, "iterations": self.iterations, "m": self.m}

    def load_state_dict(self, state: dict) -> None:
        self.backward_passes = int(state["backward_passes"])
        self.iterations = int(state["iterations"])
        self.m = state["m"]


# ----------------------------------------------------------------------------- ParetoM³

@torch.no_grad()
def paretom3_lambda(lam: torch.Tensor, losses_x: torch.Tensor, losses_y: torch.Tensor, lr_lambda: float) -> torch.Tensor:
    """ParetoM³'s step on the weights (first in each iteration; it needs only F(x), F(y)):
    λ ← Proj_Δ(λ − lr_λ (F(x) − F(y))), projected descent on L/γ in λ. Shapes (m,)."""
    return project_simplex(lam - lr_lambda * (losses_x - losses_y).to(lam))


@torch.no_grad()
def paretom3_step(x: Sequence[torch.Tensor], y: Sequence[torch.Tensor], grad_x: Sequence[torch.Tensor],
                  grad_y: Sequence[torch.Tensor], *, gamma: float, alpha: float, lr: float, lr_y: float) -> None:
    """The rest of one ParetoM³ iteration (the functional core), in place on x and y.

    One iteration from (x, y, λ): λ⁺ = :func:`paretom3_lambda` (λ, F(x), F(y)); then, with the
    two backward passes g_y = ∇[λ⁺ᵀF](y) and g_x = ∇[f₀ + γλ⁺ᵀF](x),

        y⁺ = y + lr_y (α(x − y) − g_y)                    ascent on L/γ in y
        x⁺ = x − lr (g_x − γα(x − y⁺))                     descent on L in x

    **Fixed points** (x, y, λ) of the iteration are exactly the M³ stationary points:
        (i)   α(x − y) = Jᵀ(y)λ                 (y maximizes the inner problem for λ),
        (ii)  λ ∈ argmin_{Δ} λᵀ(F(x) − F(y))     (λ only on the smallest gaps F_i(x) − F_i(y)),
        (iii) ∇f₀(x) + γ(Jᵀ(x)λ − α(x − y)) = 0,
    which :func:`paretom3_residuals` measures.

    Shapes: x, y, grad_x, grad_y lists of tensors of the parameters' shapes.
    """
    for xi, yi, gi in zip(x, y, grad_y):
        yi.add_(alpha * (xi - yi) - gi, alpha=lr_y)
    for xi, yi, gi in zip(x, y, grad_x):
        xi.sub_(gi - gamma * alpha * (xi - yi), alpha=lr)


def paretom3_residuals(x: torch.Tensor, y: torch.Tensor, lam: torch.Tensor, grad_f0_x: torch.Tensor,
                       J_x: torch.Tensor, J_y: torch.Tensor, F_x: torch.Tensor, F_y: torch.Tensor, *,
                       gamma: float, alpha: float) -> dict[str, float]:
    """The residuals of the M³ stationarity conditions (i)-(iii) of :func:`paretom3_step` at
    (x, y, λ): flattened x, y (n,), λ (m,), ∇f₀(x) (n,), Jacobians (m, n), F values (m,).
    (ii) is measured as ‖λ − Proj_Δ(λ − (F(x) − F(y)))‖."""
    r_y = torch.linalg.vector_norm(alpha * (x - y) - J_y.T @ lam)
    gap = F_x - F_y
    r_lam = torch.linalg.vector_norm(lam - project_simplex(lam - gap))
    r_x = torch.linalg.vector_norm(grad_f0_x + gamma * (J_x.T @ lam - alpha * (x - y)))
    return {"y": float(r_y), "lambda": float(r_lam), "x": float(r_x)}


class ParetoM3(MultiObjectiveMethod):
    """ParetoM³ (the ParetoM³ paper) over the parameters of ``model``.

    Args:
        model: the module whose trainable parameters are x.
        objectives: ``(forward, batch) -> losses (m,)`` (see :class:`MultiObjectiveMethod`).
        preference: a :class:`Preference` (``Ray``, ``TargetPoint``, ``Regularizer``,
            ``Objective``) or a callable ``(losses, params) -> scalar``.
        gamma: the penalty γ > 0 on the merit (larger: closer to the weak Pareto set).
        alpha: the merit's regularization α > 0 (above the objectives' smoothness for the
            nonconvex theory).
        lr, lr_y, lr_lambda: step sizes on x, on the shadow point y, on the weights λ.
        gamma_schedule: optional ``iteration -> γ_t`` (e.g. a slowly increasing penalty);
            γ is used while it is None.

    ``step(batch)`` costs two backward passes (counted in ``backward_passes``) whatever m.
    The shadow point and λ are in ``state_dict()``.
    """

    def __init__(self, model, objectives, preference, gamma: float = 10.0, alpha: float = 1.0, lr: float = 1e-2,
                 lr_y: float = 1e-1, lr_lambda: float = 1e-1, gamma_schedule: Callable[[int], float] | None = None):
        super().__init__(model, objectives, lr)
        if not (isinstance(preference, Preference) or callable(preference)):
            raise TypeError("preference must be a Preference or a callable (losses, params) -> scalar")
        self.preference = preference
        self.gamma = check_real("gamma", gamma, low=0.0, low_open=True)
        self.alpha = check_real("alpha", alpha, low=0.0, low_open=True)
        self.lr_y = check_real("lr_y", lr_y, low=0.0, low_open=True)
        self.lr_lambda = check_real("lr_lambda", lr_lambda, low=0.0, low_open=True)
        if gamma_schedule is not None and not callable(gamma_schedule):
            raise TypeError("gamma_schedule must be callable: iteration -> gamma")
        self.gamma_schedule = gamma_schedule
        self.y = [p.detach().clone() for p in self.params]
        self.lam: torch.Tensor | None = None

    def on_first_losses(self, m):
        if isinstance(self.preference, Preference):
            self.preference.check(m)
        self.lam = torch.full((m,), 1.0 / m, dtype=self.params[0].dtype, device=self.params[0].device)

    def current_gamma(self) -> float:
        if self.gamma_schedule is None:
            return self.gamma
        return check_real(f"gamma_schedule({self.iterations})", self.gamma_schedule(self.iterations),
                          low=0.0, low_open=True)

    def step(self, batch=None) -> torch.Tensor:
        gamma = self.current_gamma()
        with torch.enable_grad():
            fx = self.losses_at(self.current(), batch)
            ys = [yi.detach().requires_grad_(True) for yi in self.y]
            fy = self.losses_at(dict(zip(self.names, ys)), batch)
            # λ first (it needs only the two forward passes), then y and x at the new λ
            self.lam = paretom3_lambda(self.lam, fx.detach(), fy.detach(), self.lr_lambda)
            lam = self.lam
            gy = torch.autograd.grad(lam.to(fy) @ fy, ys, allow_unused=True)
            self.backward_passes += 1
            f0 = self.preference(fx, self.current())
            if not isinstance(f0, torch.Tensor) or f0.numel() != 1 or not bool(torch.isfinite(f0.detach())):
                raise ValueError(f"preference must give a finite scalar tensor, got {f0!r}")
            gx = torch.autograd.grad(f0.reshape(()) + gamma * (lam.to(fx) @ fx), self.params, allow_unused=True)
            self.backward_passes += 1
        gx = [torch.zeros_like(p) if g is None else g for p, g in zip(self.params, gx)]
        gy = [torch.zeros_like(p) if g is None else g for p, g in zip(self.params, gy)]
        paretom3_step([p.data for p in self.params], self.y, gx, gy, gamma=gamma, alpha=self.alpha, lr=self.lr,
                      lr_y=self.lr_y)
        self.iterations += 1
        return fx.detach()

    def state_dict(self) -> dict:
        return {**super().state_dict(), "y": [t.clone() for t in self.y],
                "lam": None if self.lam is None else self.lam.clone()}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        if len(state["y"]) != len(self.y) or any(a.shape != b.shape for a, b in zip(state["y"], self.y)):
            raise ValueError("state_dict: the shadow point y does not match the model's parameters")
        self.y = [t.clone() for t in state["y"]]
        self.lam = None if state["lam"] is None else state["lam"].clone()
