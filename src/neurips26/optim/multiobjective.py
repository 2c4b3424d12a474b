"""Pieces shared by gradient-based multi-objective methods: the simplex projection, small
quadratic programs over the simplex / the nonnegative orthant, the min-norm (MGDA) weights,
Pareto stationarity, and the weak-Pareto merit function of Tanabe, Fukuda and Yamashita

    u_α(x) = max_y  min_i [F_i(x) − F_i(y)] − (α/2)‖x − y‖²,

which is >= 0 everywhere (take y = x) and zero exactly on the weak Pareto set when the F_i
are convex; for nonconvex F_i (and α above their smoothness) zero means Pareto stationary.

Everything here needs torch only. The QPs are small (m objectives, m <= ~12): they are solved
exactly by an active-set enumeration (every support's KKT system solved at once, batched);
larger m fall back to accelerated projected gradient.
"""

from __future__ import annotations

import itertools
import math
from typing import Callable, NamedTuple, Sequence

import torch

from .._checks import check_int, check_real

__all__ = ["project_simplex", "solve_simplex_qp", "solve_nonnegative_qp", "min_norm_weights",
           "pareto_stationarity", "linearized_merit", "weak_pareto_merit", "MeritResult", "jacobian_of",
           "check_losses"]

# Supports enumerated exactly up to this many objectives (2^m − 1 KKT systems of size m + 1).
_ENUMERATE_MAX = 12


def check_losses(losses, name: str = "losses", m: int | None = None) -> torch.Tensor:
    """``losses`` as a finite 1-D floating tensor of length ``m`` (if given); ValueError /
    TypeError naming ``name`` otherwise."""
    if not isinstance(losses, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape (m,), got {type(losses).__name__}")
    if losses.ndim != 1 or losses.numel() == 0:
        raise ValueError(f"{name} must be a non-empty 1-D tensor (one entry per objective), got shape "
                         f"{tuple(losses.shape)}")
    if not losses.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got {losses.dtype}")
    if m is not None and losses.numel() != m:
        raise ValueError(f"{name} must have {m} entries (one per objective), got {losses.numel()}")
    if not bool(torch.isfinite(losses.detach()).all()):
        raise ValueError(f"{name} must be finite, got {losses.detach().tolist()}")
    return losses


def _check_matrix(name: str, M, square: bool = False) -> torch.Tensor:
    if not isinstance(M, torch.Tensor):
        M = torch.as_tensor(M)
    if M.ndim != 2 or M.shape[0] == 0 or M.shape[1] == 0:
        raise ValueError(f"{name} must be a non-empty 2-D matrix, got shape {tuple(M.shape)}")
    if square and M.shape[0] != M.shape[1]:
        raise ValueError(f"{name} must be square, got shape {tuple(M.shape)}")
    if not M.is_floating_point():
        M = M.to(torch.get_default_dtype())
    if not bool(torch.isfinite(M).all()):
        raise ValueError(f"{name} must be finite (it holds NaN or Inf)")
    return M


def project_simplex(v: torch.Tensor) -> torch.Tensor:
    """Euclidean projection of ``v`` (shape (..., m)) onto the probability simplex along the
    last dimension, by sorting (Held, Wolfe and Crowder; Duchi et al. 2008): O(m log m)."""
    if not isinstance(v, torch.Tensor) or v.ndim == 0 or v.shape[-1] == 0:
        raise ValueError("v must be a tensor of shape (..., m) with m >= 1")
    if not bool(torch.isfinite(v).all()):
        raise ValueError("v must be finite")
    u, _ = torch.sort(v, dim=-1, descending=True)
    css = u.cumsum(-1) - 1
    k = torch.arange(1, v.shape[-1] + 1, device=v.device, dtype=v.dtype)
    cond = u - css / k > 0
    rho = cond.to(v.dtype).cumsum(-1).argmax(-1, keepdim=True)  # last index where cond holds
    theta = css.gather(-1, rho) / (rho + 1).to(v.dtype)
    return (v - theta).clamp_min(0)


def _supports(m: int, device) -> torch.Tensor:
    masks = torch.tensor(list(itertools.product((0.0, 1.0), repeat=m))[1:], dtype=torch.float64, device=device)
    return masks


def _enumerate_qp(Q: torch.Tensor, b: torch.Tensor, simplex: bool) -> torch.Tensor:
    """Exact solution of min ½λᵀQλ + bᵀλ over the simplex (or λ >= 0) for small m.

    Every support S gets its equality-constrained KKT system solved by least squares (so a
    singular Q, e.g. a rank-deficient Jacobian, is fine); each candidate is made feasible
    (negatives clipped, renormalized onto the simplex), so every candidate's objective is an
    upper bound of the optimum, and the optimum's own support (one with affinely independent
    active gradients exists by Carathéodory) attains it. The least objective wins."""
    m = Q.shape[0]
    S = _supports(m, Q.device)  # (K, m)
    K = S.shape[0]
    eye = torch.eye(m, dtype=Q.dtype, device=Q.device)
    A = Q * (S[:, :, None] * S[:, None, :]) + eye * (1 - S)[:, None, :]  # rows outside S: λ_i = 0
    rhs = -b[None, :] * S
    if simplex:
        n = m + 1
        KKT = torch.zeros(K, n, n, dtype=Q.dtype, device=Q.device)
        KKT[:, :m, :m] = A
        KKT[:, :m, m] = S
        KKT[:, m, :m] = S
        r = torch.cat([rhs, torch.ones(K, 1, dtype=Q.dtype, device=Q.device)], 1)
    else:
        KKT, r = A, rhs
    sol = torch.linalg.lstsq(KKT, r.unsqueeze(-1), driver="gelsd" if Q.device.type == "cpu" else None).solution
    lam = sol[:, :m, 0].clamp_min(0) * S
    if simplex:
        s = lam.sum(1, keepdim=True)
        ok = s[:, 0] > 0
        lam = torch.where(ok[:, None], lam / s.clamp_min(torch.finfo(Q.dtype).tiny), lam)
    obj = 0.5 * torch.einsum("ki,ij,kj->k", lam, Q, lam) + lam @ b
    if simplex:
        obj = torch.where(ok, obj, torch.full_like(obj, math.inf))
    if not simplex:  # λ = 0 is a candidate too (the empty support)
        best = int(torch.argmin(obj))
        return lam[best] if obj[best] < 0 else torch.zeros_like(b)
    return lam[int(torch.argmin(obj))]


def _apg_qp(Q: torch.Tensor, b: torch.Tensor, simplex: bool, iters: int = 20000, tol: float = 1e-14) -> torch.Tensor:
    """Accelerated projected gradient (FISTA with adaptive restart) for larger m."""
    m = Q.shape[0]
    L = float(torch.linalg.eigvalsh(Q)[-1].clamp_min(1e-30))
    proj = project_simplex if simplex else (lambda v: v.clamp_min(0))
    lam = torch.full((m,), 1.0 / m, dtype=Q.dtype, device=Q.device) if simplex else torch.zeros_like(b)
    z, t = lam.clone(), 1.0
    for _ in range(iters):
        new = proj(z - (Q @ z + b) / L)
        t_new = (1 + math.sqrt(1 + 4 * t * t)) / 2
        if float((new - lam) @ (Q @ new + b)) > 0:  # restart when the objective goes up
            z, t = new.clone(), 1.0
        else:
            z = new + (t - 1) / t_new * (new - lam)
            t = t_new
        if float((new - lam).abs().max()) <= tol:
            lam = new
            break
        lam = new
    return lam


def _solve_qp(Q, b, simplex: bool, name: str) -> torch.Tensor:
    Q = _check_matrix(f"Q ({name})", Q, square=True).to(torch.float64)
    b = torch.as_tensor(b, dtype=torch.float64, device=Q.device)
    if b.shape != (Q.shape[0],):
        raise ValueError(f"b must have shape ({Q.shape[0]},), got {tuple(b.shape)}")
    if not bool(torch.isfinite(b).all()):
        raise ValueError("b must be finite")
    Q = 0.5 * (Q + Q.T)
    if Q.shape[0] == 1:
        if simplex:
            return torch.ones(1, dtype=torch.float64, device=Q.device)
        q = float(Q[0, 0])
        return (-b / q).clamp_min(0) if q > 0 else (torch.zeros_like(b) if float(b[0]) >= 0 else b * math.inf)
    if Q.shape[0] <= _ENUMERATE_MAX:
        return _enumerate_qp(Q, b, simplex)
    return _apg_qp(Q, b, simplex)


def solve_simplex_qp(Q: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """argmin over the probability simplex of ½λᵀQλ + bᵀλ, Q (m, m) symmetric PSD (singular is
    fine), b (m,). Exact (active-set enumeration) for m <= 12, accelerated projected gradient
    beyond. Returns λ (m,) in float64. Where the minimizer is not unique, one of them."""
    return _solve_qp(Q, b, True, "simplex QP")


def solve_nonnegative_qp(Q: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """argmin over λ >= 0 of ½λᵀQλ + bᵀλ (Q PSD with the problem bounded below); as
    :func:`solve_simplex_qp`."""
    return _solve_qp(Q, b, False, "nonnegative QP")


def min_norm_weights(matrix: torch.Tensor, *, gram: bool = False) -> torch.Tensor:
    """The MGDA weights λ* = argmin over the simplex of ‖Σ λ_i ∇F_i‖² (Désidéri 2012).

    Args:
        matrix: the Jacobian J (m, n), one gradient per row, or with ``gram=True`` the Gram
            matrix J Jᵀ (m, m).
    Returns:
        λ* (m,) in float64. Two objectives: the closed form; m <= 12: exact active-set; more:
        accelerated projected gradient. With a rank-deficient J the weights need not be
        unique, the min-norm vector Jᵀλ* is."""
    M = _check_matrix("matrix (Jacobian or Gram)", matrix, square=gram).to(torch.float64)
    G = M if gram else M @ M.T
    if G.shape[0] == 2:
        g11, g12, g22 = G[0, 0], G[0, 1], G[1, 1]
        den = g11 + g22 - 2 * g12
        t = ((g22 - g12) / den).clamp(0, 1) if float(den) > 0 else torch.tensor(0.5, dtype=G.dtype)
        return torch.stack([t, 1 - t])
    return solve_simplex_qp(G, torch.zeros(G.shape[0], dtype=G.dtype, device=G.device))


def pareto_stationarity(J: torch.Tensor) -> torch.Tensor:
    """‖Σ λ*_i ∇F_i‖ for the Jacobian J (m, n): zero iff x is Pareto stationary (no common
    descent direction of all objectives)."""
    J = _check_matrix("J (the Jacobian)", J).to(torch.float64)
    return torch.linalg.vector_norm(J.T @ min_norm_weights(J))


def linearized_merit(J: torch.Tensor, alpha: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The merit with every F_i replaced by its linearization at x:

        max_d min_i −∇F_iᵀd − (α/2)‖d‖² = ‖Σ λ*_i ∇F_i‖² / (2α),

    attained at d* = −Jᵀλ*/α (minimax duality; λ* the min-norm weights). Returns (value,
    d*, λ*)."""
    alpha = check_real("alpha", alpha, low=0.0, low_open=True)
    J = _check_matrix("J (the Jacobian)", J).to(torch.float64)
    lam = min_norm_weights(J)
    w = J.T @ lam
    return (w @ w) / (2 * alpha), -w / alpha, lam


def jacobian_of(F: Callable[[torch.Tensor], torch.Tensor], y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(F(y), ∂F/∂y) for F: (n,) -> (m,), one backward pass per objective."""
    y = y.detach().requires_grad_(True)
    with torch.enable_grad():
        f = F(y)
        check_losses(f, "F(y)")
        rows = [torch.autograd.grad(f[i], y, retain_graph=i + 1 < f.numel(), allow_unused=True)[0]
                for i in range(f.numel())]
    J = torch.stack([torch.zeros_like(y) if r is None else r for r in rows])
    return f.detach(), J.detach()


class MeritResult(NamedTuple):
    """What :func:`weak_pareto_merit` returns: the merit u_α(x) (a float), the maximizing y
    (n,), the dual weights λ (m,) on the objectives (λ_i > 0 where F_i(x) − F_i(y) is
    smallest: the tasks that cannot improve without another getting worse), the number of
    outer steps taken and whether the stopping test was met."""

    value: float
    y: torch.Tensor
    lam: torch.Tensor
    steps: int
    converged: bool


def weak_pareto_merit(F: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, alpha: float,
                      inner_steps: int = 500, tol: float = 1e-13, lipschitz: float | None = None) -> MeritResult:
    """The regularized gap (weak-Pareto merit) of Tanabe, Fukuda and Yamashita,

        u_α(x) = max_y min_i [F_i(x) − F_i(y)] − (α/2)‖x − y‖²
               = min_{λ ∈ Δ} max_y λᵀ(F(x) − F(y)) − (α/2)‖x − y‖²,

    the second form (minimax duality) holding when y ↦ −λᵀF(y) − (α/2)‖x − y‖² is concave:
    always for convex F, and for nonconvex F once α exceeds the objectives' smoothness.

    **What zero means**: u_α(x) >= 0 always; u_α(x) = 0 iff x is weakly Pareto optimal when
    every F_i is convex, and iff x is Pareto stationary (no common descent direction) in
    general. A positive value is a certificate of how much every objective can still be
    lowered together; ``lam`` says which tasks are binding.

    Solved by a prox-linear (majorize-minimize) ascent on y: each step maximizes
    min_i [F_i(x) − F_i(y_k) − ∇F_i(y_k)ᵀ(y − y_k) − (L/2)‖y − y_k‖²] − (α/2)‖x − y‖², a lower
    model of the objective when L bounds the F_i's smoothness (L found by backtracking), whose
    dual is a QP over the simplex; the ascent is monotone, from y₀ = x.

    Args:
        F: maps x (n,) to the objective vector (m,), differentiable by autograd.
        x: the point (n,), float.
        alpha: α > 0.
        inner_steps: the most prox-linear steps (each: one Jacobian, m backward passes).
        tol: stop when a step raises the value by less than ``tol`` (absolute) and moves y by
            less than sqrt(tol) relative to (1 + ‖x‖).
        lipschitz: an initial smoothness estimate L (default α); doubled while the model fails
            to lower-bound the objective, halved after each accepted step.

    Returns: :class:`MeritResult` (value, y, lam, steps, converged).
    """
    alpha = check_real("alpha", alpha, low=0.0, low_open=True)
    inner_steps = check_int("inner_steps", inner_steps, minimum=1)
    tol = check_real("tol", tol, low=0.0, low_open=True)
    L = check_real("lipschitz", lipschitz, low=0.0, low_open=True) if lipschitz is not None else alpha
    if not isinstance(x, torch.Tensor) or x.ndim != 1 or x.numel() == 0 or not x.is_floating_point():
        raise ValueError(f"x must be a non-empty 1-D floating tensor, got "
                         f"{tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError("x must be finite")
    x = x.detach()
    with torch.no_grad():
        Fx = check_losses(F(x).detach(), "F(x)")

    def value(y, Fy):
        return float((Fx - Fy).min() - 0.5 * alpha * (x - y).pow(2).sum())

    y, cur = x.clone(), 0.0
    lam = torch.full((Fx.numel(),), 1.0 / Fx.numel(), dtype=torch.float64)
    steps, converged = 0, False
    while steps < inner_steps:
        steps += 1
        Fy, J = jacobian_of(F, y)
        J64, y64, x64 = J.to(torch.float64), y.to(torch.float64), x.to(torch.float64)
        c = (Fx - Fy).to(torch.float64) + J64 @ y64  # model_i(y') = c_i − J_i y' − quadratic terms
        for _ in range(60):  # backtracking on L
            beta = L + alpha
            v = (L * y64 + alpha * x64) / beta
            lam = solve_simplex_qp(J64 @ J64.T / beta, c - J64 @ v)  # the dual of the model's max
            y_new64 = v - J64.T @ lam / beta
            model = float((c - J64 @ y_new64).min() - 0.5 * L * (y_new64 - y64).pow(2).sum()
                          - 0.5 * alpha * (y_new64 - x64).pow(2).sum())
            y_new = y_new64.to(x.dtype)
            with torch.no_grad():
                Fn = F(y_new).detach()
            new = value(y_new, Fn) if bool(torch.isfinite(Fn).all()) else -math.inf
            if new >= model - 1e-12 * (1 + abs(model)):
                break
            L *= 2
        gain = new - cur
        move = float((y_new64 - y64).norm())
        if gain >= 0:  # monotone: keep the better point (rounding can cost the last digits)
            y, cur = y_new, new
        L = max(L / 2, 1e-12)
        if abs(gain) <= tol and move <= math.sqrt(tol) * (1 + float(x64.norm())):
            converged = True
            break
    return MeritResult(max(cur, 0.0), y, lam, steps, converged)
