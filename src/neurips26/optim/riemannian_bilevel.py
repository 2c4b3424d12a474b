r"""Riemannian bilevel optimization with a Polyak–Łojasiewicz lower level: spectral-clipped
tangent hypergradients (the Riemannian bilevel paper of NeurIPS 2026), with the estimators of
Han et al. (NeurIPS 2024, "rhgd") as baselines.

Problem: ``min_{x ∈ M_x} f(x, y*(x))`` with ``y*(x) ∈ argmin_{y ∈ M_y} g(x, y)``. The lower-level
Riemannian Hessian ``H = Hess_y g(x, y)`` may be singular or indefinite (PL, not strongly
convex), so ``H⁻¹`` does not exist; the paper replaces it by the spectrally clipped operator

    H_δ = U · diag(max(|λ|, δ)) · Uᵀ    (``mode="abs"``, positive definite for any H)
    H_δ = U · diag(max(λ, δ)) · Uᵀ      (``mode="floor"``)

and the hypergradient by ``grad_x f − G_xy g[H_δ⁻¹ grad_y f]`` in ``T_x M_x`` (``G_xy g[v]`` is the
Riemannian gradient in x of ``⟨grad_y g, v⟩_y``). :func:`clipped_solve` applies ``H_δ⁻¹`` with
Lanczos on ``T_y M_y`` (Hessian-vector products only, full reorthogonalization, the k × k
tridiagonal matrix eigendecomposed): exact once the Krylov space is invariant (k = dim T_y at
the latest). Nothing is inverted, no Hessian is formed, and the inner loop is never
differentiated, so memory does not grow with the number of inner steps.

Needs the ``riemann`` extra (geoopt): import this module explicitly
(``from neurips26.optim.riemannian_bilevel import ...``) or through ``neurips26.optim``'s lazy names.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import geoopt
import torch

from .._checks import check_int, check_real
from ..manifolds import rhess, supported_manifold, tangent_inner

__all__ = [
    "ClippedSolution", "Hypergradient", "RiemannianBilevel", "SOLVERS", "cg_solve", "clipped_solve", "hinv_solve",
    "neumann_solve", "spectral_clip", "tangent_basis", "tangent_hypergradient",
]

SOLVERS = ("clipped", "hinv", "cg", "neumann", "ad")
Tensor = torch.Tensor
HVP = Callable[[Tensor], Tensor]
Inner = Callable[[Tensor, Tensor], Tensor]  # (U of shape (m, *s), v of shape s) -> (m,)


def _euclidean_inner(u: Tensor, v: Tensor) -> Tensor:
    return (u * v).reshape(u.shape[0], -1).sum(-1)


# --- linear solvers on a tangent space ------------------------------------------------------------

class ClippedSolution(NamedTuple):
    """``v`` (b's shape) solves ``H_δ v = b``. ``residual`` = ‖H_δ v − b‖/‖b‖ measured with one extra
    HVP: ``H_δ v = H v + Σᵢ cᵢ (clip(θᵢ) − θᵢ) zᵢ`` with the Ritz pairs (θᵢ, zᵢ) and v = Σᵢ cᵢ zᵢ, so it
    catches Ritz pairs that are not eigenpairs (NaN when not asked for). ``eigenvalues``: the Ritz
    values θ (shape (k,)); ``n_clipped``: how many were raised to δ; ``krylov_dim``: k used."""

    v: Tensor
    residual: float
    eigenvalues: Tensor
    n_clipped: int
    krylov_dim: int


def spectral_clip(eigenvalues: Tensor, delta: float, mode: str = "abs") -> Tensor:
    """``max(|λ|, δ)`` (``mode="abs"``) or ``max(λ, δ)`` (``mode="floor"``), elementwise."""
    delta = check_real("delta", delta, low=0.0, low_open=True)
    if mode == "abs":
        return eigenvalues.abs().clamp(min=delta)
    if mode == "floor":
        return eigenvalues.clamp(min=delta)
    raise ValueError(f"mode must be 'abs' or 'floor', got {mode!r}")


def _check_rhs(b) -> None:
    if not isinstance(b, torch.Tensor) or not b.is_floating_point():
        raise TypeError(f"b must be a floating-point tensor, got {type(b).__name__}"
                        + (f" of dtype {b.dtype}" if isinstance(b, torch.Tensor) else ""))
    if b.numel() == 0:
        raise ValueError("b is empty")
    if not bool(torch.isfinite(b).all()):
        raise ValueError("b has NaN or infinite entries")


def clipped_solve(hvp: HVP, b: Tensor, delta: float, *, krylov: int | None = None, mode: str = "abs",
                  inner: Inner | None = None, proj: Callable[[Tensor], Tensor] | None = None, tol: float = 1e-13,
                  residual: bool = True) -> ClippedSolution:
    """Apply ``H_δ⁻¹`` to ``b`` by Lanczos on the tangent space.

    ``hvp(u)``: the operator H applied to a tangent vector (b's shape), self-adjoint in ``inner``
    (batched: ``inner(U, v)`` maps U of shape (m, *b.shape) and v to the m inner products; default
    Euclidean). ``proj``: the projection onto the tangent space, applied to every Lanczos vector
    so that rounding never leaves it. ``krylov``: the Krylov dimension k (default ``b.numel()``);
    the iteration stops earlier when the Krylov space is invariant (β ≤ tol·max|T|). Full
    reorthogonalization (classical Gram–Schmidt twice). Cost: k HVPs (+1 for the residual).
    """
    if not callable(hvp):
        raise TypeError(f"hvp must be callable, got {type(hvp).__name__}")
    _check_rhs(b)
    delta = check_real("delta", delta, low=0.0, low_open=True)
    if mode not in ("abs", "floor"):
        raise ValueError(f"mode must be 'abs' or 'floor', got {mode!r}")
    k = b.numel() if krylov is None else check_int("krylov", krylov, minimum=1)
    k = min(k, b.numel())
    tol = check_real("tol", tol, low=0.0)
    inner = _euclidean_inner if inner is None else inner
    nb = torch.sqrt(inner(b[None], b)[0])
    if float(nb) == 0.0:
        return ClippedSolution(torch.zeros_like(b), 0.0, b.new_zeros(0), 0, 0)
    Q = b.new_zeros((k, *b.shape))
    Q[0] = b / nb
    alphas, betas = [], []
    scale = 0.0
    for j in range(k):
        w = hvp(Q[j])
        if proj is not None:
            w = proj(w)
        a = inner(Q[j][None], w)[0]
        w = w - a * Q[j] - (betas[-1] * Q[j - 1] if j else 0.0)
        for _ in range(2):  # full reorthogonalization (CGS2): keeps the Ritz pairs exact to rounding
            w = w - torch.tensordot(inner(Q[: j + 1], w), Q[: j + 1], 1)
        beta = torch.sqrt(inner(w[None], w)[0].clamp(min=0.0))
        alphas.append(a)
        scale = max(scale, abs(float(a)), float(beta))
        if j == k - 1 or float(beta) <= tol * scale:
            break
        betas.append(beta)
        Q[j + 1] = w / beta
    m = len(alphas)
    T = torch.diag(torch.stack(alphas))
    if m > 1:
        off = torch.stack(betas[: m - 1])
        T = T + torch.diag(off, 1) + torch.diag(off, -1)
    theta, S = torch.linalg.eigh(T)
    lam = spectral_clip(theta, delta, mode)
    coef = nb * S[0] / lam  # v's coordinates in the Ritz basis
    Qm = Q[:m]
    v = torch.tensordot(S @ coef, Qm, 1)
    res = float("nan")
    if residual:
        hv = hvp(v)
        if proj is not None:
            hv = proj(hv)
        r = hv + torch.tensordot(S @ (coef * (lam - theta)), Qm, 1) - b
        res = float(torch.sqrt(inner(r[None], r)[0].clamp(min=0.0)) / nb)
    return ClippedSolution(v, res, theta, int((lam != theta).sum()), m)


def tangent_basis(manifold, y: Tensor, rtol: float = 1e-10) -> Tensor:
    """An orthonormal (Euclidean) basis of ``T_y manifold``: shape (dim, *y.shape), from the
    projections of the ambient coordinate vectors. For the dense Hessian-inverse baseline."""
    n = y.numel()
    eye = torch.eye(n, dtype=y.dtype, device=y.device).reshape(n, *y.shape)
    P = manifold.proju(y, eye).reshape(n, n)
    U, s, _ = torch.linalg.svd(P)
    keep = s > rtol * s[0]
    return U[:, keep].T.reshape(-1, *y.shape)


def hinv_solve(hvp: HVP, b: Tensor, basis: Tensor) -> Tensor:
    """The Hessian-inverse baseline: H formed in ``basis`` (dim HVPs) and ``H v = b`` solved by LU.
    A singular H gives NaN (LU reports it) or a huge v (rounding hides it): that is the failure
    the baseline shows on a PL lower level."""
    _check_rhs(b)
    d = basis.shape[0]
    HE = torch.stack([hvp(basis[i]) for i in range(d)])
    A = _euclidean_inner(basis, HE[0])[:, None] if d == 1 else torch.einsum("i...,j...->ij", basis, HE)
    rhs = _euclidean_inner(basis, b)
    try:
        c = torch.linalg.solve(A, rhs)
    except RuntimeError:  # torch.linalg.LinAlgError: exactly singular
        c = torch.full_like(rhs, float("nan"))
    return torch.tensordot(c, basis, 1)


def cg_solve(hvp: HVP, b: Tensor, *, iters: int = 50, lam: float = 0.0, inner: Inner | None = None) -> Tensor:
    """rhgd's CG baseline: conjugate gradients on the normal equations ``(H+λI)² v = (H+λI) b`` in
    the tangent space, ``iters`` iterations from v = 0 (stops early at a zero residual)."""
    _check_rhs(b)
    iters = check_int("iters", iters, minimum=1)
    lam = check_real("lam", lam, low=0.0)
    inner = _euclidean_inner if inner is None else inner

    def op(u):
        au = hvp(u) + lam * u
        return hvp(au) + lam * au

    def dot(u, v):
        return inner(u[None], v)[0]

    rhs = hvp(b) + lam * b
    v = torch.zeros_like(b)
    r = rhs.clone()
    p = r.clone()
    rr = dot(r, r)
    rr0 = float(rr)
    for _ in range(iters):
        if float(rr) <= 1e-30 * max(rr0, 1e-300):
            break
        ap = op(p)
        alpha = rr / dot(p, ap)
        v = v + alpha * p
        r = r - alpha * ap
        rr_new = dot(r, r)
        p = r + (rr_new / rr) * p
        rr = rr_new
    return v


def neumann_solve(hvp: HVP, b: Tensor, *, gamma: float, iters: int) -> Tensor:
    """rhgd's truncated Neumann series ``v = γ Σ_{i<K} (I − γH)ⁱ b`` (K = ``iters``)."""
    _check_rhs(b)
    gamma = check_real("gamma", gamma, low=0.0, low_open=True)
    iters = check_int("iters", iters, minimum=1)
    term, acc = b, b.clone()
    for _ in range(iters - 1):
        term = term - gamma * hvp(term)
        acc = acc + term
    return gamma * acc


# --- the hypergradient -------------------------------------------------------------------------

class Hypergradient(NamedTuple):
    """``grad``: the hypergradient estimate in ``T_x`` (x's shape). ``v``: the linear system's
    solution (``None`` for ``"ad"``). ``residual``: ‖H_δ v − b‖/‖b‖ for ``"clipped"``, ‖H v − b‖/‖b‖
    for the other linear solvers (NaN for ``"ad"`` or when not measured). ``n_clipped``: Ritz
    values raised to δ (0 for the others). ``lower_grad_norm``: ‖grad_y g(x, y)‖ at the y used.
    ``upper_loss`` / ``lower_loss``: f(x, y), g(x, y) there; ``y``: that point (y_K for ``"ad"``)."""

    grad: Tensor
    v: Tensor | None
    residual: float
    n_clipped: int
    krylov_dim: int
    lower_grad_norm: float
    upper_loss: float
    lower_loss: float
    y: Tensor


def _manifold_of(t: Tensor, given, name: str):
    m = given if given is not None else getattr(t, "manifold", None)
    if m is None:
        return geoopt.Euclidean()
    if not isinstance(m, geoopt.Manifold):
        raise TypeError(f"{name} must be a geoopt.Manifold, got {type(m).__name__}")
    return m


def _check_point(t, name: str, manifold, atol: float = 1e-6) -> Tensor:
    if not isinstance(t, torch.Tensor) or not t.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got {type(t).__name__}"
                        + (f" of dtype {t.dtype}" if isinstance(t, torch.Tensor) else ""))
    if t.numel() == 0:
        raise ValueError(f"{name} is empty")
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} has NaN or infinite entries")
    ok, reason = manifold._check_shape(tuple(t.shape), name)
    if not ok:
        raise ValueError(f"{name} of shape {tuple(t.shape)} does not fit {manifold.name}: {reason}")
    ok, reason = manifold._check_point_on_manifold(t.detach(), atol=atol, rtol=0.0)
    if not ok:
        raise ValueError(f"{name} is not on its manifold {manifold.name} within {atol:g}: {reason}")
    return t.detach().as_subclass(torch.Tensor)


def _finite_loss(value, name: str) -> Tensor:
    if not isinstance(value, torch.Tensor) or value.numel() != 1:
        raise TypeError(f"{name} must return a one-element tensor, got "
                        f"{tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__}")
    if not math.isfinite(float(value.detach())):
        raise ValueError(f"{name} is not finite ({float(value.detach())})")
    return value.reshape(())


def _grad_or_zero(out, inputs, **kw):
    grads = torch.autograd.grad(out, inputs, allow_unused=True, **kw)
    return [torch.zeros_like(i) if gr is None else gr for gr, i in zip(grads, inputs)]


def tangent_hypergradient(f: Callable[[Tensor, Tensor], Tensor], g: Callable[[Tensor, Tensor], Tensor], x: Tensor,
                          y: Tensor, solver: str = "clipped", *, manifold_x=None, manifold_y=None, delta: float = 1e-3,
                          krylov: int | None = None, mode: str = "abs", iters: int = 50, lam: float = 0.0,
                          gamma: float = 0.1, inner_steps: int = 10, lr_y: float = 0.1,
                          residual: bool = True) -> Hypergradient:
    """The tangent hypergradient ``grad_x f − G_xy g[v]`` at (x, y), projected to ``T_x``, with v from

    * ``"clipped"`` (the paper): ``v = H_δ⁻¹ grad_y f`` by :func:`clipped_solve` (``delta``, ``krylov``, ``mode``);
    * ``"hinv"``: ``v = H⁻¹ grad_y f``, H formed in a tangent basis (rhgd's Hessian inverse);
    * ``"cg"``: CG on ``(H+λI)² v = (H+λI) grad_y f`` (``iters``, ``lam``);
    * ``"neumann"``: ``v = γ Σ_{i<K}(I − γH)ⁱ grad_y f`` (``gamma``, ``iters``);
    * ``"ad"``: no v: ``inner_steps`` Riemannian GD steps on y from ``y`` (step ``lr_y``) unrolled
      with their graph, and the Riemannian gradient in x of ``f(x, y_K(x))``.

    ``f(x, y)``, ``g(x, y)``: scalar tensors. ``x``, ``y``: points (geoopt ManifoldTensors carry
    their manifold; ``manifold_x`` / ``manifold_y`` override; plain tensors are Euclidean).
    Only the ``"ad"`` estimator differentiates through the inner loop.
    """
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    if not callable(f) or not callable(g):
        raise TypeError("f and g must be callables f(x, y) -> scalar tensor")
    mx = _manifold_of(x, manifold_x, "manifold_x")
    my = _manifold_of(y, manifold_y, "manifold_y")
    x0 = _check_point(x, "x", mx)
    y0 = _check_point(y, "y", my)
    if x0.dtype != y0.dtype:
        raise TypeError(f"x and y must share a dtype, got {x0.dtype} and {y0.dtype}")
    xd = x0.clone().requires_grad_(True)

    def rgrad_norm(my_, yy, egrad):
        rg = my_.egrad2rgrad(yy, egrad)
        return float(torch.sqrt(tangent_inner(my_, yy, rg, rg).clamp(min=0.0)))

    if solver == "ad":
        steps = check_int("inner_steps", inner_steps, minimum=0)
        lr_y = check_real("lr_y", lr_y, low=0.0, low_open=True)
        yk = y0.clone().requires_grad_(True)
        for _ in range(steps):
            (gy,) = torch.autograd.grad(g(xd, yk), yk, create_graph=True)
            yk = my.retr(yk, -lr_y * my.egrad2rgrad(yk, gy))
        F = _finite_loss(f(xd, yk), "f(x, y)")
        (fx,) = _grad_or_zero(F, [xd])
        yl = yk.detach().requires_grad_(True)
        G = _finite_loss(g(x0, yl), "g(x, y)")
        (gy,) = torch.autograd.grad(G, yl)
        h = mx.proju(x0, mx.egrad2rgrad(x0, fx))
        return Hypergradient(h, None, float("nan"), 0, 0, rgrad_norm(my, yl.detach(), gy), float(F.detach()), float(G.detach()),
                             yl.detach())

    yd = y0.clone().requires_grad_(True)
    G = _finite_loss(g(xd, yd), "g(x, y)")
    (gy,) = torch.autograd.grad(G, yd, create_graph=True)
    F = _finite_loss(f(xd, yd), "f(x, y)")
    fx, fy = _grad_or_zero(F, [xd, yd], retain_graph=False)
    gy0 = gy.detach()
    b = my.proju(y0, my.egrad2rgrad(y0, fy))

    def hvp(u):
        (eh,) = _grad_or_zero(gy, [yd], grad_outputs=u, retain_graph=True)
        return rhess(my, y0, gy0, eh, u)

    def inner(U, v):
        return tangent_inner(my, y0, U, v)

    def proj(u):
        return my.proju(y0, u)

    n_clipped = kdim = 0
    res = float("nan")
    if solver == "clipped":
        if not supported_manifold(my):
            raise TypeError(f"the lower level's manifold {type(my).__name__} has no Riemannian Hessian in rhess")
        sol = clipped_solve(hvp, b, delta, krylov=krylov, mode=mode, inner=inner, proj=proj, residual=residual)
        v, res, n_clipped, kdim = sol.v, sol.residual, sol.n_clipped, sol.krylov_dim
    else:
        if solver == "hinv":
            v = hinv_solve(hvp, b, tangent_basis(my, y0))
        elif solver == "cg":
            v = cg_solve(hvp, b, iters=iters, lam=lam, inner=inner)
        else:
            v = neumann_solve(hvp, b, gamma=gamma, iters=iters)
        if residual:
            nb = float(torch.sqrt(inner(b[None], b)[0]))
            r = proj(hvp(v)) - b
            res = float(torch.sqrt(inner(r[None], r)[0])) / nb if nb > 0 else 0.0
    # G_xy g[v] = ∇_x ⟨∇_y g, v⟩ (Euclidean in y: ⟨grad_y g, v⟩_y = Dg[v] for every metric), then x's metric.
    (cross,) = _grad_or_zero(gy, [xd], grad_outputs=v.detach())
    h = mx.proju(x0, mx.egrad2rgrad(x0, fx - cross))
    return Hypergradient(h, v, res, n_clipped, kdim, rgrad_norm(my, y0, gy0), float(F.detach()), float(G.detach()), y0)


# --- memory held by autograd graphs ---------------------------------------------------------------

class _Saved:
    __slots__ = ("t", "n", "meter")

    def __init__(self, t: Tensor, meter: "_GraphMemory"):
        self.t, self.n, self.meter = t, t.numel() * t.element_size(), meter
        meter.live += self.n
        meter.peak = max(meter.peak, meter.live)

    def __del__(self):
        self.meter.live -= self.n


class _GraphMemory:
    """Peak bytes of the tensors autograd graphs hold for backward (saved-tensor hooks, released
    when a graph is freed): the memory an unrolled inner loop costs, measurable on any device."""

    def __init__(self):
        self.live = self.peak = 0

    def __enter__(self):
        self._hooks = torch.autograd.graph.saved_tensors_hooks(lambda t: _Saved(t, self), lambda s: s.t)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc):
        self._hooks.__exit__(*exc)
        return False


# --- the optimizer ---------------------------------------------------------------------------------

class RiemannianBilevel:
    r"""Riemannian bilevel optimization with a PL lower level (the paper's algorithm).

    Each :meth:`step`: ``inner_steps`` warm-started Riemannian gradient steps on y (retraction,
    step ``lr_y``, no graph kept), the tangent hypergradient (:func:`tangent_hypergradient`,
    by default spectrally clipped with ``delta``), and a retraction step on x with ``lr_x``.
    ``x`` and ``y`` are updated in place (geoopt ``ManifoldParameter``/``ManifoldTensor`` carry
    their manifolds; plain tensors are Euclidean).

    Stochastic finite sum (``batch=B``, ``n_samples=n``): ``f(x, y, idx)`` and ``g(x, y, idx)`` take
    a LongTensor of B sample indices drawn uniformly with replacement; every inner step draws one
    batch for g, the hypergradient draws one for f's gradients and another one for g's HVPs and
    the cross term.

    With ``solver="ad"`` the ``inner_steps`` lower-level steps are themselves unrolled with their
    graph (rhgd's automatic differentiation; memory grows with them).

    Every step appends to ``history`` (and returns) a certificate: ``grad_mapping_norm`` ‖h‖_x
    (with a retraction step the Riemannian gradient mapping ``−R_x⁻¹(x⁺)/η`` is h itself), ``residual`` (‖H_δ v − b‖/‖b‖), ``n_clipped``, ``lower_grad_norm``,
    ``graph_bytes`` (peak bytes held by autograd graphs during the step), losses.
    Solver settings other than ``delta`` / ``krylov`` / ``mode`` go in ``solver_options``
    (``iters``, ``lam``, ``gamma``).
    """

    def __init__(self, x: Tensor, y: Tensor, f: Callable, g: Callable, inner_steps: int = 10, lr_x: float = 0.1,
                 lr_y: float = 0.1, delta: float = 1e-3, batch: int | None = None, *, n_samples: int | None = None,
                 solver: str = "clipped", krylov: int | None = None, mode: str = "abs",
                 solver_options: dict | None = None, generator: torch.Generator | None = None,
                 manifold_x=None, manifold_y=None):
        if not callable(f) or not callable(g):
            raise TypeError("f and g must be callables")
        self.mx = _manifold_of(x, manifold_x, "manifold_x")
        self.my = _manifold_of(y, manifold_y, "manifold_y")
        _check_point(x, "x", self.mx)
        _check_point(y, "y", self.my)
        self.x, self.y, self.f, self.g = x, y, f, g
        self.inner_steps = check_int("inner_steps", inner_steps, minimum=0)
        self.lr_x = check_real("lr_x", lr_x, low=0.0, low_open=True)
        self.lr_y = check_real("lr_y", lr_y, low=0.0, low_open=True)
        self.delta = check_real("delta", delta, low=0.0, low_open=True)
        if solver not in SOLVERS:
            raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
        if mode not in ("abs", "floor"):
            raise ValueError(f"mode must be 'abs' or 'floor', got {mode!r}")
        self.solver, self.krylov, self.mode = solver, krylov, mode
        if krylov is not None:
            check_int("krylov", krylov, minimum=1)
        self.solver_options = dict(solver_options or {})
        unknown = set(self.solver_options) - {"iters", "lam", "gamma"}
        if unknown:
            raise ValueError(f"solver_options: unknown keys {sorted(unknown)} (iters, lam, gamma)")
        if batch is not None:
            batch = check_int("batch", batch, minimum=1)
            if n_samples is None:
                raise ValueError("n_samples is needed with batch (the size of the finite sum)")
            n_samples = check_int("n_samples", n_samples, minimum=1)
        self.batch, self.n_samples, self.generator = batch, n_samples, generator
        self.history: list[dict] = []

    def _draw(self):
        return torch.randint(self.n_samples, (self.batch,), generator=self.generator)

    def _closures(self):
        if self.batch is None:
            return self.f, self.g
        idx_f, idx_g = self._draw(), self._draw()
        return (lambda x, y: self.f(x, y, idx_f)), (lambda x, y: self.g(x, y, idx_g))

    def step(self) -> dict:
        mx, my = self.mx, self.my
        x0 = _check_point(self.x, "x", mx)
        with _GraphMemory() as meter:
            y = self.y.detach().as_subclass(torch.Tensor).clone()
            for _ in range(0 if self.solver == "ad" else self.inner_steps):  # warm-started lower-level descent, no graph kept
                gk = self.g if self.batch is None else (lambda x, yy, idx=self._draw(): self.g(x, yy, idx))
                yr = y.requires_grad_(True)
                (gy,) = _grad_or_zero(gk(x0, yr), [yr])
                with torch.no_grad():
                    y = my.retr(yr.detach(), -self.lr_y * my.egrad2rgrad(yr.detach(), gy))
            if not bool(torch.isfinite(y).all()):
                raise ValueError("the lower-level iterate became non-finite (lr_y too large?)")
            f, g = self._closures()
            hg = tangent_hypergradient(f, g, x0, y, self.solver, manifold_x=mx, manifold_y=my, delta=self.delta,
                                       krylov=self.krylov, mode=self.mode, lr_y=self.lr_y,
                                       inner_steps=self.inner_steps, **self.solver_options)
        h = hg.grad
        gm = float(torch.sqrt(tangent_inner(mx, x0, h, h).clamp(min=0.0)))
        if not math.isfinite(gm):
            raise ValueError(f"the {self.solver!r} hypergradient is not finite")
        with torch.no_grad():
            self.y.copy_(hg.y)
            self.x.copy_(mx.retr(x0, -self.lr_x * h))
        rec = dict(step=len(self.history), grad_mapping_norm=gm, residual=hg.residual, n_clipped=hg.n_clipped,
                   krylov_dim=hg.krylov_dim, lower_grad_norm=hg.lower_grad_norm, graph_bytes=int(meter.peak),
                   upper_loss=hg.upper_loss, lower_loss=hg.lower_loss)
        self.history.append(rec)
        return rec
