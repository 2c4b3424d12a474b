"""The minimax baselines with AdaSGDA's pair API: TiAda (time-scale adaptive AdaGrad), NeAda
(nested AdaGrad) and a GDA wrapper over any two torch optimizers."""

from __future__ import annotations

import math
from typing import Callable, Iterable

import torch

from ..._checks import check_int, check_real
from ._pair import PairOptimizer, group_sq_norm, pair_groups

__all__ = ["TiAda", "NeAda", "GDA"]


class TiAda(PairOptimizer):
    """TiAda (Li, Yang, He; ICLR 2023): per-coordinate AdaGrad for both players, x's stepsize
    shrunk by the ratio of the totals so that x never outpaces y.

    With ``s`` the per-coordinate sums of squared gradients and ``S_x = Σ s_x``, ``S_y = Σ s_y``
    their totals (updated with this step's gradients first)::

        x ← x − lr_x · ratio · g_x / (s_x^α + eps),   ratio = S_x^α / max(S_x^α, S_y^α)
        y ← y + lr_y · g_y / (s_y^β + eps)

    as the authors' published optimizer computes it (their ``TiAda`` class for x with y's as
    opponent, for y without one; both stepped after one backward). ``alpha > beta`` unless
    ``allow_any_ratio``. ``step(closure=None)`` reads ``.grad``; diagnostics as AdaSGDA's, with the
    effective stepsizes ``lr_x·ratio / max_i(s_x^α + eps)`` (the smallest coordinate's) and ``v`` the totals.
    """

    def __init__(self, min_params: Iterable, max_params: Iterable, lr_x: float = 0.1, lr_y: float = 0.1,
                 alpha: float = 0.6, beta: float = 0.4, eps: float = 1e-10, *, allow_any_ratio: bool = False,
                 skip_nonfinite: bool = False):
        check_real("lr_x", lr_x, low=0.0, low_open=True)
        check_real("lr_y", lr_y, low=0.0, low_open=True)
        check_real("alpha", alpha, low=0.0, low_open=True, high=1.0)
        check_real("beta", beta, low=0.0, low_open=True, high=1.0)
        if alpha <= beta and not allow_any_ratio:
            raise ValueError(f"alpha must be > beta (time-scale separation), got alpha={alpha}, beta={beta}; "
                             "pass allow_any_ratio=True to override")
        check_real("eps", eps, low=0.0)
        self.skip_nonfinite = bool(skip_nonfinite)
        self.skipped_steps = 0
        groups = pair_groups(min_params, max_params, min=dict(lr=lr_x, exponent=alpha),
                             max=dict(lr=lr_y, exponent=beta))
        super().__init__(groups, dict(eps=eps, total=0.0, step=0))
        self._init_diagnostics()

    def check_group(self, group: dict, index: int, at_step: bool) -> None:
        check_real(f"lr (param group {index}, {group.get('name')!r})", group["lr"],
                   low=None if at_step else 0.0, low_open=not at_step)
        check_real(f"exponent (param group {index})", group["exponent"], low=0.0, low_open=True, high=1.0)

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None):
        loss, skip = self.begin_step(closure)
        if skip:
            return loss
        totals = []
        for group in self.param_groups:
            total = torch.as_tensor(group["total"], dtype=torch.float64)
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "sum" not in state:
                    state["sum"] = torch.zeros_like(p)
                sq = p.grad * p.grad
                state["sum"] = state["sum"] + sq
                total = total.to(sq.device) + sq.sum()
            group["total"] = total
            group["step"] += 1
            totals.append(total)
        gmin, gmax = self.param_groups
        num = totals[0] ** gmin["exponent"]
        top = torch.maximum(num, totals[1] ** gmin["exponent"])
        ratio = torch.where(top > 0, num / torch.where(top > 0, top, torch.ones_like(top)), torch.ones_like(top))
        eff = {}
        for group, sign, r in ((gmin, -1.0, ratio), (gmax, 1.0, None)):
            smallest = None
            for p in group["params"]:
                if p.grad is None:
                    continue
                den = self.state[p]["sum"].pow(group["exponent"]).add_(group["eps"])
                if r is not None:
                    den = den.div_(r.to(den.dtype))
                p.addcdiv_(p.grad, den, value=sign * group["lr"])
                biggest = den.max() if den.numel() else None
                if biggest is not None:
                    smallest = biggest if smallest is None else torch.maximum(smallest, biggest)
            eff[group["name"]] = group["lr"] / smallest if smallest is not None else torch.tensor(math.nan)
        gx = [p.grad for p in gmin["params"] if p.grad is not None]
        gy = [p.grad for p in gmax["params"] if p.grad is not None]
        like = gmin["params"][0]
        self._diag = dict(eta_x=eff["min"], eta_y=eff["max"], ratio=eff["min"] / eff["max"],
                          grad_norm_x=group_sq_norm(gx, like).sqrt(), grad_norm_y=group_sq_norm(gy, like).sqrt(),
                          v_x=totals[0], v_y=totals[1])
        return loss


class NeAda(PairOptimizer):
    """NeAda (Yang, Li, Orvieto, Kiyavash, He; NeurIPS 2022) with AdaGrad in both loops: each
    outer step first runs AdaGrad ascent on y until ‖∇_y f(x_t, y)‖ ≤ ``tol0 / t`` (``inner=
    "gradient"``, the deterministic stopping rule) or for ``t`` steps (``inner="count"``, the
    stochastic rule), at most ``max_inner`` ascent steps, then takes one AdaGrad descent step on x
    with the gradient at the final y.

    AdaGrad here is torch.optim.Adagrad's update (per coordinate, accumulators kept across outer
    steps): ``s ← s + g², p ← p ∓ lr · g / (√s + eps)``.

    ``step(closure)`` needs a closure that zeroes the gradients, evaluates f (a fresh minibatch
    for a stochastic problem) and calls backward; it is called ``inner_calls + 1`` times, and
    ``gradient_calls`` counts every call so far (for same-budget comparisons).
    """

    def __init__(self, min_params: Iterable, max_params: Iterable, lr_x: float = 0.1, lr_y: float = 0.1,
                 inner: str = "gradient", tol0: float = 1.0, max_inner: int = 100, eps: float = 1e-10, *,
                 skip_nonfinite: bool = False):
        check_real("lr_x", lr_x, low=0.0, low_open=True)
        check_real("lr_y", lr_y, low=0.0, low_open=True)
        if inner not in ("gradient", "count"):
            raise ValueError(f"inner must be 'gradient' or 'count', got {inner!r}")
        check_real("tol0", tol0, low=0.0, low_open=True)
        check_int("max_inner", max_inner, minimum=0)
        check_real("eps", eps, low=0.0)
        self.skip_nonfinite = bool(skip_nonfinite)
        self.skipped_steps = 0
        self.gradient_calls = 0
        groups = pair_groups(min_params, max_params, min=dict(lr=lr_x), max=dict(lr=lr_y))
        super().__init__(groups, dict(eps=eps, step=0, inner=inner, tol0=tol0, max_inner=max_inner))
        self._init_diagnostics()
        self._diag["inner_steps"] = math.nan

    def check_group(self, group: dict, index: int, at_step: bool) -> None:
        check_real(f"lr (param group {index}, {group.get('name')!r})", group["lr"],
                   low=None if at_step else 0.0, low_open=not at_step)

    def _adagrad(self, group: dict, sign: float) -> torch.Tensor | None:
        smallest = None
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state[p]
            if "sum" not in state:
                state["sum"] = torch.zeros_like(p)
            state["sum"].addcmul_(p.grad, p.grad)
            den = state["sum"].sqrt().add_(group["eps"])
            p.addcdiv_(p.grad, den, value=sign * group["lr"])
            biggest = den.max() if den.numel() else None
            if biggest is not None:
                smallest = biggest if smallest is None else torch.maximum(smallest, biggest)
        return None if smallest is None else group["lr"] / smallest

    def _evaluate(self, closure):
        self._zero_all_grads()
        with torch.enable_grad():
            loss = closure()
        self.gradient_calls += 1
        self.check_groups()
        return loss, self.nonfinite_gradients_skip()

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None):
        if closure is None:
            raise ValueError("closure: NeAda.step needs a closure (its inner loop evaluates the gradient repeatedly)")
        gmin, gmax = self.param_groups
        t = gmin["step"] + 1
        budget = min(gmin["max_inner"], t) if gmin["inner"] == "count" else gmin["max_inner"]
        tol = gmin["tol0"] / t
        eta_y = None
        inner = 0
        while True:
            loss, skip = self._evaluate(closure)
            if skip:
                return loss
            gy = [p.grad for p in gmax["params"] if p.grad is not None]
            gy_norm = group_sq_norm(gy, gmin["params"][0]).sqrt()
            if inner >= budget or (gmin["inner"] == "gradient" and float(gy_norm) <= tol):
                break  # the stopping rule reads the norm: one host read per inner step
            eta_y = self._adagrad(gmax, 1.0)
            inner += 1
        gx = [p.grad for p in gmin["params"] if p.grad is not None]
        eta_x = self._adagrad(gmin, -1.0)
        gmin["step"] = gmax["step"] = t
        nan = torch.tensor(math.nan)
        self._diag = dict(eta_x=eta_x if eta_x is not None else nan, eta_y=eta_y if eta_y is not None else nan,
                          ratio=(eta_x / eta_y) if (eta_x is not None and eta_y is not None) else nan,
                          grad_norm_x=group_sq_norm(gx, gmin["params"][0]).sqrt(), grad_norm_y=gy_norm,
                          v_x=nan, v_y=nan, inner_steps=float(inner))
        return loss


class GDA:
    """Simultaneous gradient descent–ascent over torch optimizers: ``min_optimizer`` descends x,
    ``max_optimizer`` ascends y, both from the gradients of one backward. Either may be one
    optimizer or a sequence of them (e.g. torch.optim.Muon for x's matrices and SGD for its biases).

    ``ascent="maximize"`` (default) requires every group of the max optimizers to have
    ``maximize=True`` (torch.optim.SGD / Adam / AdamW ...); ``ascent="negate"`` is for optimizers
    without that flag (e.g. pytorch_optimizer.AdaGO, torch.optim.Muon): the wrapper negates y's
    gradients around the max optimizers' ``step()`` and restores them. The two players must not
    share a tensor.
    """

    def __init__(self, min_optimizer, max_optimizer, ascent: str = "maximize"):
        self.min_optimizers = self._optimizers("min_optimizer", min_optimizer)
        self.max_optimizers = self._optimizers("max_optimizer", max_optimizer)
        if ascent not in ("maximize", "negate"):
            raise ValueError(f"ascent must be 'maximize' or 'negate', got {ascent!r}")
        xs = [p for o in self.min_optimizers for g in o.param_groups for p in g["params"]]
        ys = [p for o in self.max_optimizers for g in o.param_groups for p in g["params"]]
        if {id(p) for p in xs} & {id(p) for p in ys}:
            raise ValueError("min_optimizer and max_optimizer share a parameter; each tensor belongs to one player")
        for name, opts, want in (("max_optimizer", self.max_optimizers, ascent == "maximize"),
                                 ("min_optimizer", self.min_optimizers, False)):
            for o in opts:
                for i, g in enumerate(o.param_groups):
                    if bool(g.get("maximize", False)) != want:
                        raise ValueError(
                            f"{name}: param group {i} of {type(o).__name__} has maximize={g.get('maximize', False)}; "
                            + ("build the max player's optimizers with maximize=True or pass ascent='negate'"
                               if want else "the min player descends (and with ascent='negate' the wrapper "
                                            "negates y's gradients itself)"))
        self.ascent = ascent
        self._xs, self._ys = xs, ys
        self._diag = {k: math.nan for k in ("eta_x", "eta_y", "ratio", "grad_norm_x", "grad_norm_y", "v_x", "v_y")}

    @staticmethod
    def _optimizers(name, value) -> list:
        opts = list(value) if isinstance(value, (list, tuple)) else [value]
        if not opts:
            raise ValueError(f"{name} is empty")
        for o in opts:
            if not isinstance(o, torch.optim.Optimizer):
                raise TypeError(f"{name} must be a torch.optim.Optimizer or a sequence of them, got {type(o).__name__}")
        return opts

    def zero_grad(self, set_to_none: bool = True) -> None:
        for o in self.min_optimizers + self.max_optimizers:
            o.zero_grad(set_to_none)

    def step(self, closure: Callable[[], float] | None = None):
        """Evaluate ``closure`` (if given), then step every optimizer once from the same gradients."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        gx = [p.grad for p in self._xs if p.grad is not None]
        gy = [p.grad for p in self._ys if p.grad is not None]
        grads = gx + gy
        if grads and not bool(torch.stack([torch.isfinite(g).all() for g in grads]).all()):  # one host read
            raise FloatingPointError("GDA: non-finite gradient; nothing was changed by this step")
        with torch.no_grad():
            like = self._xs[0]
            self._diag.update(grad_norm_x=group_sq_norm(gx, like).sqrt(), grad_norm_y=group_sq_norm(gy, like).sqrt(),
                              eta_x=float(self.min_optimizers[0].param_groups[0]["lr"]),
                              eta_y=float(self.max_optimizers[0].param_groups[0]["lr"]))
            self._diag["ratio"] = self._diag["eta_x"] / self._diag["eta_y"]
        for o in self.min_optimizers:
            o.step()
        if self.ascent == "negate":
            with torch.no_grad():
                for g in gy:
                    g.neg_()
            try:
                for o in self.max_optimizers:
                    o.step()
            finally:
                with torch.no_grad():
                    for g in gy:
                        g.neg_()
        else:
            for o in self.max_optimizers:
                o.step()
        return loss

    def diagnostics(self) -> dict[str, float]:
        """As :meth:`AdaSGDA.diagnostics`; the stepsizes are the first groups' lr."""
        return {k: float(v) for k, v in self._diag.items()}

    def state_dict(self) -> dict:
        return {"min": [o.state_dict() for o in self.min_optimizers],
                "max": [o.state_dict() for o in self.max_optimizers]}

    def load_state_dict(self, state_dict: dict) -> None:
        for opts, key in ((self.min_optimizers, "min"), (self.max_optimizers, "max")):
            if len(state_dict[key]) != len(opts):
                raise ValueError(f"state_dict[{key!r}] holds {len(state_dict[key])} optimizers, this GDA {len(opts)}")
            for o, sd in zip(opts, state_dict[key]):
                o.load_state_dict(sd)
