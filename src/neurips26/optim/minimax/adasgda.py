"""AdaSGDA and AdaSGDA-VR: single-loop stochastic gradient descent–ascent along orthogonalized
directions with stepsizes from accumulated gradient norms (NeurIPS 2026).

One step, after ``f(x, y).backward()`` (``g_x = ∇_x f``, ``g_y = ∇_y f``, per tensor ``p``):

    v_x ← v_x + ‖g_x‖²,   v_y ← v_y + ‖g_y‖²                      (whole player, all tensors)
    η_x = lr_x / (max(v_x, v_y)^α + eps),   η_y = lr_y / (v_y^β + eps)     (coupling="max")
    x_p ← x_p − η_x ‖g_{x,p}‖ · O(m_{x,p}),   y_p ← y_p + η_y ‖g_{y,p}‖ · O(m_{y,p})

where ``O`` is the unit direction of :func:`direction` (polar factor of a matrix, ``g/‖g‖`` of a
vector) and ``m`` the gradient's momentum (``momentum=0``: the gradient itself). The max in x's
denominator is TiAda's time-scale separation made norm-based: x never outpaces y, and α > β
makes y's stepsize decay more slowly, so y tracks y*(x) without knowing the condition number.
Scaling the unit direction by ``‖g‖`` (AdaGO's form) lets the step vanish with the gradient, so
the deterministic method converges to stationarity. With ``ortho="none"`` and
``coupling="none"`` the step is AdaGrad-norm GDA exactly.

AdaSGDA-VR replaces each gradient by a recursive-momentum (STORM) estimator
``d_t = g_t + (1 − a_t)(d_{t−1} − g̃_{t−1})`` where ``g̃_{t−1}`` is the gradient at the previous
iterate on the current minibatch (the optimizer swaps the previous parameters in and calls the
closure a second time) and ``a_t = min(1, a_scale · t^{−a_power})``.
"""

from __future__ import annotations

import math
from typing import Callable, Iterable

import torch

from ..._checks import check_int, check_real
from ...linalg import MUON_COEFFICIENTS, check_coefficients
from ._pair import ORTHO_MODES, PairOptimizer, direction, group_sq_norm, pair_groups

__all__ = ["AdaSGDA", "AdaSGDAVR"]

STEP_RULES = ("adagrad", "adago")
COUPLINGS = ("max", "none")


class AdaSGDA(PairOptimizer):
    """Orthogonalized, parameter-free single-loop stochastic GDA for min_x max_y f(x, y).

    Args:
        min_params: the tensors of x (descended); matrices get orthogonalized directions.
        max_params: the tensors of y (ascended); disjoint from ``min_params``.
        lr_x, lr_y: initial stepsizes η₀ (> 0); the method is meant to work over decades of them.
        alpha, beta: exponents of the x and y denominators; ``alpha > beta`` (time-scale
            separation) unless ``allow_any_ratio=True``; both in (0, 1].
        momentum: heavy-ball average of the gradient whose direction is taken (0: none), in [0, 1).
        ortho: ``"ns"`` (Muon's Newton–Schulz, default), ``"exact"`` (SVD polar factor) or
            ``"none"`` (plain normalized gradient: the reduction to AdaGrad-norm GDA).
        coupling: ``"max"``: x's denominator is ``max(v_x, v_y)^α`` (default); ``"none"``: ``v_x^α``.
        step_rule: ``"adagrad"`` (above) or ``"adago"``: each tensor on its own,
            ``v_p ← v_p + min(‖g_p‖², γ²)``, step ``max(lr · min(‖g_p‖, γ) / v_p, adago_eps)`` along
            ``O(m_p)``: AdaGO's rule as ``pytorch_optimizer.AdaGO`` implements it (uncoupled only; lr
            times Muon's shape factor ``sqrt(max(1, rows/cols))`` for matrices, as there).
        eps: added to each denominator (keeps the first step finite when a gradient is zero).
        v0: initial value of the accumulators (``"adago"``: of every ``v_p``, pytorch_optimizer's ``v``).
        gamma, adago_eps: AdaGO's gradient-norm cap and stepsize floor (``step_rule="adago"`` only).
        ns_steps, ns_coefficients, ns_dtype: the Newton–Schulz iteration (``ortho="ns"``); see
            :func:`direction`.
        allow_any_ratio: accept ``alpha <= beta``.
        skip_nonfinite: skip (rather than refuse) a step whose gradients hold NaN or Inf.

    ``step(closure=None)`` reads the ``.grad`` of both players (call ``f.backward()`` first, or pass a
    closure that zeroes the gradients, evaluates f and calls backward) and moves both simultaneously.
    Tensors without a gradient are left untouched. ``state_dict`` / ``load_state_dict`` round-trip
    (accumulators and step counts live in the param groups, momenta in ``state``).
    """

    def __init__(self, min_params: Iterable, max_params: Iterable, lr_x: float = 1.0, lr_y: float = 1.0,
                 alpha: float = 0.6, beta: float = 0.4, momentum: float = 0.0, ortho: str = "ns",
                 coupling: str = "max", *, step_rule: str = "adagrad", eps: float = 1e-12, v0: float = 0.0,
                 gamma: float = 10.0, adago_eps: float = 5e-4, ns_steps: int = 5,
                 ns_coefficients=MUON_COEFFICIENTS, ns_dtype: torch.dtype | None = None,
                 allow_any_ratio: bool = False, skip_nonfinite: bool = False):
        check_real("lr_x", lr_x, low=0.0, low_open=True)
        check_real("lr_y", lr_y, low=0.0, low_open=True)
        check_real("alpha", alpha, low=0.0, low_open=True, high=1.0)
        check_real("beta", beta, low=0.0, low_open=True, high=1.0)
        if alpha <= beta and not allow_any_ratio:
            raise ValueError(f"alpha must be > beta (time-scale separation: y's stepsize must decay more slowly "
                             f"than x's), got alpha={alpha}, beta={beta}; pass allow_any_ratio=True to override")
        check_real("momentum", momentum, low=0.0, high=1.0, high_open=True)
        if ortho not in ORTHO_MODES:
            raise ValueError(f"ortho must be one of {ORTHO_MODES}, got {ortho!r}")
        if coupling not in COUPLINGS:
            raise ValueError(f"coupling must be one of {COUPLINGS}, got {coupling!r}")
        if step_rule not in STEP_RULES:
            raise ValueError(f"step_rule must be one of {STEP_RULES}, got {step_rule!r}")
        if step_rule == "adago" and coupling != "none":
            raise ValueError("step_rule='adago' is AdaGO's per-tensor rule, without coupling: pass coupling='none'")
        check_real("eps", eps, low=0.0)
        check_real("v0", v0, low=0.0)
        if step_rule == "adago" and v0 <= 0:
            raise ValueError(f"v0 must be > 0 with step_rule='adago' (AdaGO divides by it), got {v0}")
        check_real("gamma", gamma, low=0.0, low_open=True)
        check_real("adago_eps", adago_eps, low=0.0)
        check_int("ns_steps", ns_steps, minimum=1)
        ns_coefficients = check_coefficients(ns_coefficients, "ns_coefficients")
        if ns_dtype is not None and not (isinstance(ns_dtype, torch.dtype) and ns_dtype.is_floating_point):
            raise TypeError(f"ns_dtype must be a floating-point torch.dtype or None, got {ns_dtype!r}")
        self.skip_nonfinite = bool(skip_nonfinite)
        self.skipped_steps = 0
        self.allow_any_ratio = bool(allow_any_ratio)
        defaults = dict(alpha=alpha, beta=beta, momentum=momentum, ortho=ortho, coupling=coupling,
                        step_rule=step_rule, eps=eps, gamma=gamma, adago_eps=adago_eps, ns_steps=ns_steps,
                        ns_coefficients=ns_coefficients, ns_dtype=ns_dtype, v=float(v0), step=0)
        groups = pair_groups(min_params, max_params, min=dict(lr=lr_x), max=dict(lr=lr_y))
        super().__init__(groups, defaults)
        self.v0 = float(v0)
        self._init_diagnostics()

    def check_group(self, group: dict, index: int, at_step: bool) -> None:
        check_real(f"lr (param group {index}, {group.get('name')!r})", group["lr"],
                   low=None if at_step else 0.0, low_open=not at_step)
        check_real(f"alpha (param group {index})", group["alpha"], low=0.0, low_open=True, high=1.0)
        check_real(f"beta (param group {index})", group["beta"], low=0.0, low_open=True, high=1.0)
        check_real(f"momentum (param group {index})", group["momentum"], low=0.0, high=1.0, high_open=True)

    # --- the step ---------------------------------------------------------------------
    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None):
        """One simultaneous descent (x) / ascent (y) step from the current ``.grad``."""
        loss, skip = self.begin_step(closure)
        if skip:
            return loss
        gx, gy = self._grads()
        self._apply(gx, gy, gx, gy)
        return loss

    def _grads(self):
        """{param: gradient} of each player, for the tensors that have one."""
        return tuple({p: p.grad for p in group["params"] if p.grad is not None} for group in self.param_groups)

    def _momenta(self, group: dict, grads: dict) -> dict:
        """{param: the tensor whose direction is taken}: the gradient, or its momentum."""
        m = group["momentum"]
        if m == 0:
            return grads
        out = {}
        for p, g in grads.items():
            state = self.state[p]
            if "momentum_buffer" not in state:
                state["momentum_buffer"] = torch.zeros_like(p)
            state["momentum_buffer"].lerp_(g, 1.0 - m)
            out[p] = state["momentum_buffer"]
        return out

    def _apply(self, gx: dict, gy: dict, ex: dict, ey: dict) -> None:
        """Move both players. ``gx``/``gy``: the gradients that feed the accumulators; ``ex``/``ey``:
        the estimates whose norm and direction make the step (the gradients themselves in AdaSGDA,
        the STORM estimators in AdaSGDA-VR)."""
        gmin, gmax = self.param_groups
        like = next(iter(gmin["params"]))
        if gmin["step_rule"] == "adago":
            self._apply_adago(gmin, ex, gx, sign=-1.0)
            self._apply_adago(gmax, ey, gy, sign=1.0)
            return
        sx = group_sq_norm(list(gx.values()), like)
        sy = group_sq_norm(list(gy.values()), like)
        v_x = torch.as_tensor(gmin["v"], dtype=sx.dtype, device=sx.device) + sx
        v_y = torch.as_tensor(gmax["v"], dtype=sy.dtype, device=sy.device) + sy
        # Out of place: a state_dict taken earlier keeps its values.
        gmin["v"], gmax["v"] = v_x, v_y
        gmin["step"] += 1
        gmax["step"] += 1
        den_x_base = torch.maximum(v_x, v_y) if gmin["coupling"] == "max" else v_x
        eta_x = gmin["lr"] / (den_x_base ** gmin["alpha"] + gmin["eps"])
        eta_y = gmax["lr"] / (v_y ** gmax["beta"] + gmax["eps"])
        for group, est, eta, sign in ((gmin, ex, eta_x, -1.0), (gmax, ey, eta_y, 1.0)):
            directions = self._momenta(group, est)
            for p, e in est.items():
                d = direction(directions[p], group["ortho"], ns_steps=group["ns_steps"],
                              ns_coefficients=group["ns_coefficients"], ns_dtype=group["ns_dtype"])
                p.addcmul_(d.to(p.dtype), (sign * eta) * torch.linalg.vector_norm(e))
        self._diag = dict(eta_x=eta_x, eta_y=eta_y, ratio=eta_x / eta_y, grad_norm_x=sx.sqrt(),
                          grad_norm_y=sy.sqrt(), v_x=v_x, v_y=v_y)

    def _apply_adago(self, group: dict, est: dict, grads: dict, sign: float) -> None:
        group["step"] += 1
        gamma = group["gamma"]
        directions = self._momenta(group, est)
        steps = []
        for p, e in est.items():
            state = self.state[p]
            if "v" not in state:
                state["v"] = torch.tensor(self.v0, dtype=p.dtype, device=p.device)
            gn = torch.linalg.vector_norm(grads[p])
            state["v"] = state["v"] + (gn * gn).clamp_max(gamma * gamma)
            # Muon's shape factor sqrt(max(1, rows/cols)) on matrices, as pytorch_optimizer applies it.
            shape_lr = group["lr"] * (math.sqrt(max(1.0, p.shape[0] / (p.numel() // p.shape[0])))
                                      if p.ndim >= 2 and p.numel() else 1.0)
            step = (shape_lr * torch.linalg.vector_norm(e).clamp_max(gamma) / state["v"]).clamp_min(
                group["adago_eps"])
            d = direction(directions[p], group["ortho"], ns_steps=group["ns_steps"],
                          ns_coefficients=group["ns_coefficients"], ns_dtype=group["ns_dtype"])
            p.addcmul_(d.to(p.dtype), sign * step)
            steps.append(step)
        key = "x" if group["name"] == "min" else "y"
        if steps:
            self._diag[f"eta_{key}"] = steps[0]
            self._diag[f"grad_norm_{key}"] = group_sq_norm(list(grads.values()), steps[0]).sqrt()
            self._diag[f"v_{key}"] = self.state[next(iter(est))]["v"]
        if key == "y" and steps:
            self._diag["ratio"] = self._diag["eta_x"] / self._diag["eta_y"]


class AdaSGDAVR(AdaSGDA):
    """AdaSGDA with recursive-momentum (STORM-type) variance reduction for both players.

    ``d_t = g_t + (1 − a_t)(d_{t−1} − g̃_{t−1})``, ``a_t = min(1, a_scale · t^{−a_power})``, where
    ``g_t`` is the minibatch gradient at the current iterate and ``g̃_{t−1}`` the gradient at the
    previous iterate on the same minibatch. The step is AdaSGDA's with ``d`` in place of ``g``
    (its norm and its direction); the accumulators still sum ``‖g_t‖²``.

    ``step(closure)`` needs the closure: it is called at the previous parameters (which the
    optimizer swaps in) and then at the current ones, with the same minibatch (sample it outside
    the closure); the optimizer clears ``.grad`` before each call. The first step calls it once.
    Gradient evaluations per step: 2 (1 on the first). Defaults ``alpha=0.4, beta=0.3`` make the
    stepsizes decay like ``t^{-0.4}``, the STORM regime in which ``a_t ∝ η_t²`` gives the ``T^{-1/3}``
    rate; other arguments as :class:`AdaSGDA`.
    """

    def __init__(self, min_params: Iterable, max_params: Iterable, lr_x: float = 1.0, lr_y: float = 1.0,
                 alpha: float = 0.4, beta: float = 0.3, momentum: float = 0.0, ortho: str = "ns",
                 coupling: str = "max", *, a_scale: float = 1.0, a_power: float = 2.0 / 3.0, **kwargs):
        check_real("a_scale", a_scale, low=0.0, low_open=True)
        check_real("a_power", a_power, low=0.0)
        super().__init__(min_params, max_params, lr_x, lr_y, alpha, beta, momentum, ortho, coupling, **kwargs)
        self.a_scale, self.a_power = float(a_scale), float(a_power)

    def state_dict(self):
        out = super().state_dict()
        out["vr"] = dict(a_scale=self.a_scale, a_power=self.a_power)
        return out

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        vr = state_dict.pop("vr", None)
        super().load_state_dict(state_dict)
        if vr is not None:
            self.a_scale, self.a_power = float(vr["a_scale"]), float(vr["a_power"])

    def _call(self, closure):
        self._zero_all_grads()
        with torch.enable_grad():
            return closure()

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None):
        """One step; calls ``closure`` at the previous and then at the current parameters."""
        if closure is None:
            raise ValueError("closure: AdaSGDAVR.step needs a closure (it evaluates the gradient at the previous "
                             "and at the current parameters on the same minibatch)")
        self.check_groups()
        t = self.param_groups[0]["step"] + 1
        params = [p for group in self.param_groups for p in group["params"]]
        have_prev = t > 1 and all("prev" in self.state[p] for p in params)
        prev_grads = {}
        if have_prev:
            current = [p.detach().clone() for p in params]
            for p in params:
                p.copy_(self.state[p]["prev"])
            self._call(closure)
            prev_grads = {p: p.grad for p in params if p.grad is not None}
            for p, c in zip(params, current):
                p.copy_(c)
        loss = self._call(closure)
        bad = [p for p, g in prev_grads.items() if not bool(torch.isfinite(g).all())] if prev_grads else []
        if bad:  # the gradient at the previous iterate: refused or skipped like the current one
            if self.skip_nonfinite:
                self.skipped_steps += 1
                return loss
            raise FloatingPointError(f"{type(self).__name__}: non-finite gradient at the previous iterate in a "
                                     f"parameter of shape {tuple(bad[0].shape)}; nothing was changed by this step")
        if self.nonfinite_gradients_skip():
            return loss
        a = min(1.0, self.a_scale * t ** (-self.a_power))
        gx, gy = self._grads()
        ex, ey = {}, {}
        for grads, est in ((gx, ex), (gy, ey)):
            for p, g in grads.items():
                state = self.state[p]
                if "d" in state and p in prev_grads:
                    d = g + (1.0 - a) * (state["d"] - prev_grads[p])
                else:
                    d = g.clone()
                state["d"] = d
                est[p] = d
        for p in params:
            self.state[p]["prev"] = p.detach().clone()
        self._apply(gx, gy, ex, ey)
        self._diag["a"] = torch.tensor(a)
        return loss
