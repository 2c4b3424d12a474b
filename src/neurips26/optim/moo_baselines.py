"""Baselines of preference-guided multi-objective optimization, in the interface of
:class:`~neurips26.optim.paretom3.MultiObjectiveMethod` (``step(batch)``, ``backward_passes``):

* :class:`LinearScalarization`: descent on wᵀF (one backward pass);
* :class:`MGDA`: the min-norm common descent direction, aggregated by ``torchjd`` 0.18's
  ``MGDA`` (or ``UPGrad``) aggregator (extra ``moo``; m backward passes);
* :class:`EPO`: exact Pareto optimal search (Mahapatra & Rajan 2020), an LP over the
  Jacobian's Gram matrix solved by ``scipy.optimize.linprog``;
* :class:`PMTL`: Pareto multi-task learning (Lin et al. 2019), MGDA on the objectives and the
  active preference-region constraints;
* :class:`PNG`: Pareto navigation gradient descent (Ye & Liu 2022), the gradient of f₀
  corrected to descend every objective while far from Pareto stationarity.

EPO, PMTL and PNG have no usable package; each is written here from its paper, with its
direction rule as a functional core (``epo_weights``, ``pmtl_weights``, ``png_direction``).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .._checks import check_int, check_real
from .multiobjective import check_losses, min_norm_weights, solve_nonnegative_qp
from .paretom3 import MultiObjectiveMethod, Preference

__all__ = ["LinearScalarization", "MGDA", "EPO", "PMTL", "PNG", "epo_weights", "pmtl_weights", "png_direction"]


def _vector(name, v, m=None, positive=False):
    v = torch.as_tensor(v, dtype=torch.float64).detach().reshape(-1) if not isinstance(v, torch.Tensor) \
        else v.detach().to(torch.float64)
    if v.ndim != 1 or v.numel() == 0:
        raise ValueError(f"{name} must be a non-empty 1-D vector, got shape {tuple(v.shape)}")
    if m is not None and v.numel() != m:
        raise ValueError(f"{name} must have {m} entries (one per objective), got {v.numel()}")
    if not bool(torch.isfinite(v).all()) or bool((v < 0).any()) or (positive and not bool((v > 0).any())):
        raise ValueError(f"{name} must be finite and >= 0{' with a positive entry' if positive else ''}, "
                         f"got {v.tolist()}")
    return v


class LinearScalarization(MultiObjectiveMethod):
    """Gradient descent on Σ w_i F_i (weights w >= 0): one backward pass per step."""

    def __init__(self, model, objectives, weights, lr: float = 1e-2):
        super().__init__(model, objectives, lr)
        self.weights = _vector("weights", weights, positive=True)

    def on_first_losses(self, m):
        if self.weights.numel() != m:
            raise ValueError(f"weights must have {m} entries (one per objective), got {self.weights.numel()}")

    def step(self, batch=None):
        with torch.enable_grad():
            f = self.losses_at(self.current(), batch)
            g = self.grad(self.weights.to(f) @ f, self.params)
        self.apply(g)
        self.iterations += 1
        return f.detach()


class MGDA(MultiObjectiveMethod):
    """MGDA (Désidéri 2012; Sener & Koltun 2018) through torchjd: the Jacobian's rows
    (m backward passes) aggregated by ``torchjd.aggregation.MGDA`` (``aggregator="mgda"``) or
    ``UPGrad`` (``"upgrad"``), or any torchjd ``Aggregator`` instance."""

    def __init__(self, model, objectives, lr: float = 1e-2, aggregator="mgda"):
        super().__init__(model, objectives, lr)
        from torchjd.aggregation import MGDA as _TorchjdMGDA, Aggregator, UPGrad  # extra 'moo'

        if isinstance(aggregator, str):
            table = {"mgda": lambda: _TorchjdMGDA(epsilon=1e-6, max_iters=1000), "upgrad": UPGrad}
            if aggregator not in table:
                raise ValueError(f"aggregator must be 'mgda', 'upgrad' or a torchjd Aggregator, got {aggregator!r}")
            aggregator = table[aggregator]()
        elif not isinstance(aggregator, Aggregator):
            raise TypeError(f"aggregator must be 'mgda', 'upgrad' or a torchjd Aggregator, got {type(aggregator).__name__}")
        self.aggregator = aggregator

    def step(self, batch=None):
        with torch.enable_grad():
            f = self.losses_at(self.current(), batch)
            J = self.jacobian(f)
        self.apply(self.aggregator(J.detach()))
        self.iterations += 1
        return f.detach()


def epo_weights(losses: torch.Tensor, C: torch.Tensor, r: torch.Tensor, eps: float = 1e-4) -> torch.Tensor:
    """The EPO search direction's weights α (m,) (Mahapatra & Rajan 2020): the step is −Jᵀα.

    With l̂ = r⊙l / Σ r⊙l, the non-uniformity μ = KL(l̂ ‖ 1/m) and the adjustment
    a = r ⊙ (log(m l̂) − μ):
      * balance mode (μ > eps): maximize aᵀCα over the simplex, subject to (Cα)_j >= (Ca)_j
        for the objectives with (Ca)_j <= 0 (they may rise no faster than the balance asks)
        and (Cα)_j >= 0 for the objectives with the largest r_j l_j (they must not rise);
      * descent mode: maximize 1ᵀCα subject to Cα >= 0 (descend every objective).
    C is the Gram matrix J Jᵀ (m, m). The LP is solved by scipy's HiGHS; if it fails the
    min-norm weights are used."""
    from scipy.optimize import linprog

    l = check_losses(losses.detach().to(torch.float64), "losses")
    m = l.numel()
    C = C.detach().to(torch.float64)
    rl = (r.to(l) * l).clamp_min(1e-12)
    lhat = rl / rl.sum()
    mu = float((lhat * torch.log(m * lhat)).sum())
    Cn, rhs_rows, obj = C.numpy(), [], None
    if mu > eps:
        a = (r.to(l) * (torch.log(m * lhat) - mu)).numpy()
        Ca = Cn @ a
        obj = -Ca
        rhs = np.where(Ca > 0, -np.inf, Ca)
        rhs[np.flatnonzero(np.isclose(rl.numpy(), rl.numpy().max()))] = 0.0
        rows = np.isfinite(rhs)
        A_ub, b_ub = -Cn[rows], -rhs[rows]
    else:
        obj = -Cn.sum(0)
        A_ub, b_ub = -Cn, np.zeros(m)
    scale = max(float(np.abs(Cn).max()), 1e-300)  # an LP of O(1) numbers
    res = linprog(obj / scale, A_ub=A_ub / scale if len(A_ub) else None, b_ub=b_ub / scale if len(A_ub) else None,
                  A_eq=np.ones((1, m)), b_eq=[1.0], bounds=[(0, None)] * m, method="highs")
    if res.status != 0:
        return min_norm_weights(C, gram=True)
    return torch.as_tensor(res.x, dtype=torch.float64).clamp_min(0)


class EPO(MultiObjectiveMethod):
    """Exact Pareto optimal search (Mahapatra & Rajan 2020) for a ray r (r_i F_i equal on the
    target point): each step −lr Jᵀα with α from :func:`epo_weights` (m backward passes and
    one small LP). Losses are assumed positive (EPO's non-uniformity takes their log)."""

    def __init__(self, model, objectives, ray, lr: float = 1e-2, eps: float = 1e-4):
        super().__init__(model, objectives, lr)
        self.ray = _vector("ray", ray, positive=True)
        self.eps = check_real("eps", eps, low=0.0)

    def on_first_losses(self, m):
        if self.ray.numel() != m:
            raise ValueError(f"preference: the ray has {self.ray.numel()} entries for {m} objectives")

    def step(self, batch=None):
        with torch.enable_grad():
            f = self.losses_at(self.current(), batch)
            J = self.jacobian(f).detach()
        J64 = J.to(torch.float64)
        alpha = epo_weights(f.detach(), J64 @ J64.T, self.ray, self.eps)
        self.apply((J64.T @ alpha).to(J.dtype))
        self.iterations += 1
        return f.detach()


def pmtl_weights(losses: torch.Tensor, C: torch.Tensor, preferences: torch.Tensor, k: int, eps: float = 1e-3,
                 init: bool = False) -> torch.Tensor:
    """Pareto MTL's weights w (m,) on the objectives (Lin et al. 2019); the step is −Jᵀw.

    Sub-problem k: min F subject to G_j = (u_j − u_k)ᵀF <= 0 for j ≠ k (u: the rows of
    ``preferences``, normalized). Main phase: the min-norm combination (MGDA) of the ∇F_i and
    of the ∇G_j of the constraints with G_j >= −eps. Initial phase (``init=True``): the min-norm
    combination of the violated constraints' gradients only (to reach the region); with none
    violated, it returns zeros. C = J Jᵀ (m, m)."""
    l = losses.detach().to(torch.float64)
    U = preferences.to(torch.float64)
    U = U / U.norm(dim=1, keepdim=True)
    D = torch.cat([U[:k], U[k + 1:]]) - U[k]  # (K-1, m): G = D l
    G = D @ l
    if init:
        active = D[G > 0]
        if active.shape[0] == 0:
            return torch.zeros_like(l)
        A = active
    else:
        A = torch.cat([torch.eye(l.numel(), dtype=l.dtype), D[G >= -eps]])
    lam = min_norm_weights(A @ C.to(torch.float64) @ A.T, gram=True)
    return A.T @ lam


class PMTL(MultiObjectiveMethod):
    """Pareto MTL (Lin et al. 2019) for sub-problem ``index`` of the preference vectors
    ``preferences`` (K, m) (directions in objective space; the region of vectors whose angle is
    smallest with u_index). The first ``init_steps`` steps run the initial (feasibility) phase
    until the point lies in the region."""

    def __init__(self, model, objectives, preferences, index: int, lr: float = 1e-2, eps: float = 1e-3,
                 init_steps: int = 0):
        super().__init__(model, objectives, lr)
        P = torch.as_tensor(preferences, dtype=torch.float64)
        if P.ndim != 2 or P.shape[0] < 1 or not bool(torch.isfinite(P).all()) or bool((P.norm(dim=1) == 0).any()):
            raise ValueError("preferences must be a finite (K, m) matrix of nonzero rows")
        self.preferences = P
        self.index = check_int("index", index, minimum=0)
        if self.index >= P.shape[0]:
            raise ValueError(f"index must be < {P.shape[0]} (the number of preference vectors), got {index}")
        self.eps = check_real("eps", eps, low=0.0)
        self.init_steps = check_int("init_steps", init_steps, minimum=0)

    def on_first_losses(self, m):
        if self.preferences.shape[1] != m:
            raise ValueError(f"preference: the preference vectors have {self.preferences.shape[1]} entries "
                             f"for {m} objectives")

    def step(self, batch=None):
        with torch.enable_grad():
            f = self.losses_at(self.current(), batch)
            J = self.jacobian(f).detach()
        J64 = J.to(torch.float64)
        C = J64 @ J64.T
        w = None
        if self.iterations < self.init_steps:
            w = pmtl_weights(f, C, self.preferences, self.index, self.eps, init=True)
            if not bool(w.any()):
                w = None
        if w is None:
            w = pmtl_weights(f, C, self.preferences, self.index, self.eps)
        self.apply((J64.T @ w).to(J.dtype))
        self.iterations += 1
        return f.detach()


def png_direction(grad_f0: torch.Tensor, J: torch.Tensor, alpha: float = 0.5, e: float = 1e-3) -> torch.Tensor:
    """The PNG direction v (n,) (Ye & Liu 2022); the step is −v.

    v = argmin_v ½‖v − ∇f₀‖² subject to ∇F_iᵀv >= φ for every i, with φ = α·g, where
    g = min_{λ∈Δ} ‖Jᵀλ‖² measures Pareto stationarity, when g > e, and no constraint
    (v = ∇f₀) once g <= e. Its dual: v = ∇f₀ + Jᵀλ, λ = argmin_{λ>=0} ½λᵀJJᵀλ + λᵀ(J∇f₀ − φ1).
    While g > e every objective decreases to first order: ∇F_iᵀv >= αg > 0."""
    J64 = J.detach().to(torch.float64)
    g0 = grad_f0.detach().to(torch.float64)
    w = J64.T @ min_norm_weights(J64)
    g = float(w @ w)
    if g <= e:
        return g0
    C = J64 @ J64.T
    lam = solve_nonnegative_qp(C, J64 @ g0 - alpha * g)
    return g0 + J64.T @ lam


class PNG(MultiObjectiveMethod):
    """Pareto navigation gradient descent (Ye & Liu 2022): steps −lr·v with v from
    :func:`png_direction`, f₀ the preference (m + 1 backward passes: the Jacobian and ∇f₀)."""

    def __init__(self, model, objectives, preference, lr: float = 1e-2, alpha: float = 0.5, e: float = 1e-3):
        super().__init__(model, objectives, lr)
        if not (isinstance(preference, Preference) or callable(preference)):
            raise TypeError("preference must be a Preference or a callable (losses, params) -> scalar")
        self.preference = preference
        self.alpha = check_real("alpha", alpha, low=0.0, low_open=True)
        self.e = check_real("e", e, low=0.0)

    def on_first_losses(self, m):
        if isinstance(self.preference, Preference):
            self.preference.check(m)

    def step(self, batch=None):
        with torch.enable_grad():
            f = self.losses_at(self.current(), batch)
            J = self.jacobian(f).detach()
            g0 = self.grad(self.preference(f, self.current()).reshape(()), self.params)
        v = png_direction(g0, J, self.alpha, self.e)
        self.apply(v.to(J.dtype))
        self.iterations += 1
        return f.detach()
