"""Smooth score + acyclicity objectives for linear SEMs, X ≈ X W (W: d × d weighted
adjacency, zero diagonal; X: n × d, centred by the objective).

Each objective is the smooth part f(W) of min_W f(W) + λ‖W‖₁; the ℓ1 term is left to the
solver (``path``). Values are defined in float64 torch, once per objective (DAGMA's is also
evaluated in closed form, for speed); gradients,
Hessian-vector products and Hessians on a support are closed forms (``derivatives`` for
NOTEARS and GOLEM, below for DAGMA), with autograd on that one definition as their reference
in the tests and as the base class's fallback.

* ``NotearsObjective``: least squares 1/(2n)‖X − XW‖²_F plus NOTEARS' augmented Lagrangian
  α·h(W) + ρ/2·h(W)² at fixed (ρ, α), h(W) = tr(exp(W ∘ W)) − d (Zheng et al. 2018).
* ``GolemObjective``: GOLEM-EV's likelihood d/2·log ‖X − XW‖²_F − log |det(I − W)| plus
  λ₂·h(W) (Ng et al. 2020).
* ``DagmaObjective``: DAGMA's central-path objective μ·1/(2n)‖X − XW‖²_F + h_s(W),
  h_s(W) = −log det(sI − W ∘ W) + d log s, defined where sI − W ∘ W is an M-matrix (Bello et al.
  2022). DAGMA's own ℓ1 weight enters as μ·λ₁, so its λ₁ is our λ/μ.
"""

from __future__ import annotations

import abc

import numpy as np
import torch

from . import derivatives
from ._checks import check_real

__all__ = ["SEMObjective", "NotearsObjective", "GolemObjective", "DagmaObjective", "notears_h", "dagma_h",
           "check_data", "SCALE_RANGE"]


SCALE_RANGE = (1e-100, 1e100)  # the column standard deviations check_data accepts


def check_data(X) -> np.ndarray:
    """Validate and centre the data: a real, finite (n, d) array, n ≥ 2, d ≥ 2, no constant
    column, and every column's standard deviation within ``SCALE_RANGE`` = [1e-100, 1e100]
    (beyond it the covariance, the objectives' values and the BIC over- or underflow float64:
    such data is reported as badly scaled, to be rescaled, not as constant)."""
    A = np.asarray(X)
    if A.dtype.kind not in "biufO":
        raise TypeError(f"X must be a real numeric (n, d) array, got dtype {A.dtype}")
    try:
        X = np.asarray(A, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise TypeError(f"X must be a real numeric (n, d) array: {e}") from None
    if X.ndim != 2 or X.shape[0] < 2 or X.shape[1] < 2:
        raise ValueError(f"X must be an (n, d) array with n >= 2 and d >= 2, got shape {X.shape}")
    if not np.isfinite(X).all():
        bad = np.argwhere(~np.isfinite(X))[0]
        raise ValueError(f"X has NaN or inf values (first at row {bad[0]}, column {bad[1]})")
    const = np.flatnonzero(X.max(0) == X.min(0))
    if len(const):
        raise ValueError(f"X has constant columns {const.tolist()}: they carry no information about edges")
    Xc = X - X.mean(0)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        # the standard deviation computed without over- or underflow: max|x| · rms(x / max|x|)
        top = np.abs(Xc).max(0)
        std = top * np.sqrt(((Xc / np.where(top > 0, top, 1.0)) ** 2).mean(0))
    lo, hi = SCALE_RANGE
    bad = np.flatnonzero(~((std >= lo) & (std <= hi)))
    if len(bad):
        stds = ", ".join(f"{v:.3g}" for v in std[bad])
        raise ValueError(f"X is badly scaled: columns {bad.tolist()} have standard deviation {stds}, outside "
                         f"[{lo:g}, {hi:g}], where the covariance and the objectives over- or underflow float64; "
                         "rescale X (e.g. divide each column by its standard deviation)")
    return Xc


def notears_h(W: torch.Tensor) -> torch.Tensor:
    return torch.trace(torch.linalg.matrix_exp(W * W)) - W.shape[0]


def dagma_h(W: torch.Tensor, s: float = 1.0) -> torch.Tensor:
    d = W.shape[0]
    M = s * torch.eye(d, dtype=W.dtype) - W * W
    sign, logdet = torch.linalg.slogdet(M)
    if sign <= 0:
        return torch.tensor(float("inf"), dtype=W.dtype)
    return -logdet + d * np.log(s)


class SEMObjective(abc.ABC):
    """Base: data handling and the derivative machinery over ``_value(W)``."""

    name = "sem"

    def __init__(self, X):
        self.X_np = check_data(X)
        self.n, self.d = self.X_np.shape
        self.X = torch.from_numpy(self.X_np)
        self.cov = self.X.T @ self.X / self.n
        self.offdiag = ~torch.eye(self.d, dtype=torch.bool)
        # work counters, for comparing compute with grid search: gradients, HVPs, support Hessians
        self.calls = {"value": 0, "grad": 0, "hvp": 0, "hessian": 0}
        self._grad_memo: tuple[bytes, np.ndarray] | None = None

    def least_squares(self, W: torch.Tensor) -> torch.Tensor:
        D = torch.eye(self.d, dtype=W.dtype) - W
        return 0.5 * torch.trace(D.T @ self.cov @ D)

    @abc.abstractmethod
    def _value(self, W: torch.Tensor) -> torch.Tensor:
        """f(W) as a differentiable float64 scalar."""

    def _as_tensor(self, W) -> torch.Tensor:
        W = torch.as_tensor(W, dtype=torch.float64)
        if W.shape != (self.d, self.d):
            raise ValueError(f"W must be ({self.d}, {self.d}), got {tuple(W.shape)}")
        return W

    def value(self, W) -> float:
        self.calls["value"] += 1
        return float(self._value(self._as_tensor(W)))

    def grad(self, W) -> np.ndarray:
        """∇f(W), diagonal zeroed, as a read-only array. The path asks for the gradient at
        the point its corrector has just converged to a second time (for its event margins),
        so the last point's gradient is kept: ``calls["grad"]`` counts evaluations, not asks."""
        W = self._as_tensor(W).numpy()
        key = W.tobytes()
        if self._grad_memo is None or self._grad_memo[0] != key:
            self.calls["grad"] += 1
            g = self._grad(W)
            g.flags.writeable = False
            self._grad_memo = (key, g)
        return self._grad_memo[1]

    def _grad(self, W: np.ndarray) -> np.ndarray:
        W = torch.from_numpy(W).clone().requires_grad_(True)
        (g,) = torch.autograd.grad(self._value(W), W)
        return g.masked_fill(~self.offdiag, 0.0).numpy()

    def hvp(self, W, V) -> np.ndarray:
        self.calls["hvp"] += 1
        W = self._as_tensor(W).clone().requires_grad_(True)
        V = self._as_tensor(V)
        (g,) = torch.autograd.grad(self._value(W), W, create_graph=True)
        (hv,) = torch.autograd.grad((g * V).sum(), W)
        return hv.masked_fill(~self.offdiag, 0.0).numpy()

    def grad_on(self, W, support: np.ndarray) -> np.ndarray:
        """∇f restricted to the entries ``support`` ((k, 2) index pairs)."""
        return self.grad(W)[support[:, 0], support[:, 1]]

    def hessian_on(self, W, support: np.ndarray) -> np.ndarray:
        """The (k, k) Hessian of f in the entries ``support``, the rest of W held fixed."""
        self.calls["hessian"] += 1
        W0 = self._as_tensor(W)
        rows, cols = torch.from_numpy(support[:, 0]), torch.from_numpy(support[:, 1])

        def f(w):
            return self._value(W0.index_put((rows, cols), w))

        H = torch.autograd.functional.hessian(f, W0[rows, cols].clone())
        return H.numpy()


class NotearsObjective(SEMObjective):
    name = "notears"

    def __init__(self, X, rho: float = 0.0, alpha: float = 0.0):
        super().__init__(X)
        check_real("rho", rho, low=0.0)
        check_real("alpha", alpha)
        self.rho, self.alpha = float(rho), float(alpha)

    def _value(self, W):
        h = notears_h(W)
        return self.least_squares(W) + self.alpha * h + 0.5 * self.rho * h * h

    # closed forms (``derivatives``), equal to autograd on ``_value`` to 1e-12 in the tests
    def _grad(self, W: np.ndarray) -> np.ndarray:
        return derivatives.notears_grad(self.cov.numpy(), W, self.rho, self.alpha)

    def hvp(self, W, V) -> np.ndarray:
        self.calls["hvp"] += 1
        return derivatives.notears_hvp(self.cov.numpy(), self._as_tensor(W).numpy(), self._as_tensor(V).numpy(),
                                       self.rho, self.alpha)

    def hessian_on(self, W, support: np.ndarray) -> np.ndarray:
        self.calls["hessian"] += 1
        return derivatives.notears_hessian_on(self.cov.numpy(), self._as_tensor(W).numpy(), support, self.rho,
                                              self.alpha)


class GolemObjective(SEMObjective):
    name = "golem"

    def __init__(self, X, lambda2: float = 5.0):
        super().__init__(X)
        check_real("lambda2", lambda2, low=0.0)
        self.lambda2 = float(lambda2)

    def _value(self, W):
        R = self.X - self.X @ W
        _, logabsdet = torch.linalg.slogdet(torch.eye(self.d, dtype=W.dtype) - W)
        return 0.5 * self.d * torch.log((R * R).sum()) - logabsdet + self.lambda2 * notears_h(W)

    def _grad(self, W: np.ndarray) -> np.ndarray:
        return derivatives.golem_grad(self.cov.numpy(), W, self.lambda2)

    def hvp(self, W, V) -> np.ndarray:
        self.calls["hvp"] += 1
        return derivatives.golem_hvp(self.cov.numpy(), self._as_tensor(W).numpy(), self._as_tensor(V).numpy(),
                                     self.lambda2)

    def hessian_on(self, W, support: np.ndarray) -> np.ndarray:
        self.calls["hessian"] += 1
        return derivatives.golem_hessian_on(self.cov.numpy(), self._as_tensor(W).numpy(), support, self.lambda2)


def _same_column_pairs(j: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All ordered pairs (a, b) of positions with j[a] == j[b], as two index arrays."""
    order = np.argsort(j, kind="stable")
    sizes = np.bincount(j[order] if len(j) else np.zeros(0, dtype=int))
    sizes = sizes[sizes > 0]
    starts = np.repeat(np.cumsum(sizes) - sizes, sizes)  # each sorted position's block start
    span = np.repeat(sizes, sizes)  # and its block's size
    a = np.repeat(np.arange(len(j)), span)
    b = np.arange(len(a)) - np.repeat(np.cumsum(span) - span, span) + np.repeat(starts, span)
    return order[a], order[b]


class DagmaObjective(SEMObjective):
    name = "dagma"

    def __init__(self, X, mu: float = 1.0, s: float = 1.0):
        super().__init__(X)
        check_real("mu", mu, low=0.0, low_open=True)
        check_real("s", s, low=0.0, low_open=True)
        self.mu, self.s = float(mu), float(s)
        self._inverse_memo: tuple[bytes, np.ndarray, bool] | None = None

    def _value(self, W):
        return self.mu * self.least_squares(W) + dagma_h(W, self.s)

    def value(self, W) -> float:
        """f(W) in closed form, +inf outside the domain (where sI − W∘W is not a nonsingular
        M-matrix; the torch ``dagma_h`` gives inf only where its determinant is <= 0, a
        subset). The fold jumps' descents evaluate it tens of thousands of times, where a
        torch graph cost more than the LU."""
        self.calls["value"] += 1
        W = self._as_tensor(W).numpy()
        try:
            inside = self._inverse_m(W)[1]
        except np.linalg.LinAlgError:
            inside = False
        if not inside:
            return float("inf")
        sign, logdet = np.linalg.slogdet(self.s * np.eye(self.d) - W * W)
        D = np.eye(self.d) - W
        return float(self.mu * 0.5 * np.sum(D * (self.cov.numpy() @ D)) - logdet + self.d * np.log(self.s))

    # Closed-form derivatives (autograd on ``_value`` is the reference in the tests). With
    # N = (sI − W∘W)⁻¹:  ∇h_s = 2 W ∘ Nᵀ,  ∂²h_s/∂w_ij∂w_kl = 2 δ_(ij),(kl) N_ji + 4 w_ij w_kl N_jk N_li,
    # and the least-squares part has gradient −C(I − W) and Hessian C_ik δ_jl (C the covariance).
    def _inverse_m(self, W: np.ndarray) -> tuple[np.ndarray, bool]:
        """(N, inside): N = (sI − W∘W)⁻¹, and whether sI − W∘W is a nonsingular M-matrix
        (DAGMA's domain). The path asks for the domain, the gradient and the support Hessian
        at the same point several times over, so the last point's answer is kept.

        sI − W∘W is a Z-matrix (off-diagonal entries ≤ 0), and a Z-matrix is a nonsingular
        M-matrix exactly when it is inverse-positive, N ≥ 0 entrywise (Berman & Plemmons,
        Nonnegative Matrices, thm 6.2.3, N38): the one LU that gives N decides the domain,
        where a spectral radius needed an eigenvalue solve of its own. Entries N_ij that are
        0 in exact arithmetic (no path between i and j in W's graph) come out as round-off,
        hence the relative tolerance; outside the domain N has negative entries of the order
        of 1/|s − ρ(W∘W)| or more on the offending strongly connected component. A singular
        sI − W∘W raises numpy's LinAlgError, as the derivatives are undefined there."""
        key = W.tobytes()
        if self._inverse_memo is None or self._inverse_memo[0] != key:
            N = np.linalg.inv(self.s * np.eye(self.d) - W * W)
            N.flags.writeable = False
            top = np.abs(N).max()
            inside = bool(np.isfinite(N).all() and N.min() >= -1e-10 * top and (np.diagonal(N) > 0).all())
            if inside and N.min() < 0 or not inside and np.isfinite(N).all() and N.min() > -1e-6 * top:
                # round-off in the zero entries grows as cond(sI − W∘W): within 1e-6 of the
                # boundary the sign test is ambiguous, and the spectral radius decides
                inside = bool(np.abs(np.linalg.eigvals(W * W)).max() < self.s)
            self._inverse_memo = (key, N, inside)
        return self._inverse_memo[1], self._inverse_memo[2]

    def _grad(self, W: np.ndarray) -> np.ndarray:
        C = self.cov.numpy()
        g = -self.mu * C @ (np.eye(self.d) - W) + 2.0 * W * self._inverse_m(W)[0].T
        np.fill_diagonal(g, 0.0)
        return g

    def hvp(self, W, V) -> np.ndarray:
        self.calls["hvp"] += 1
        W, V = self._as_tensor(W).numpy(), self._as_tensor(V).numpy()
        N = self._inverse_m(W)[0]
        hv = self.mu * self.cov.numpy() @ V + 2.0 * V * N.T + 4.0 * W * (N @ (W * V) @ N).T
        np.fill_diagonal(hv, 0.0)
        return hv

    def hessian_on(self, W, support: np.ndarray) -> np.ndarray:
        self.calls["hessian"] += 1
        W = self._as_tensor(W).numpy()
        N = self._inverse_m(W)[0]
        i, j = support[:, 0], support[:, 1]
        w = W[i, j]
        # 4 w_a w_b N_(j_a, i_b) N_(j_b, i_a) = P_ab P_ba with P_ab = 2 w_a N_(j_a, i_b): one k × k
        # gather (rows of N first, a k × d block, then its columns: 3× faster than np.ix_ here)
        # and two passes, where the outer product and two gathers cost as much as the Cholesky
        # factorization at k ≈ 1 500 on a d = 50 path; exactly symmetric, as P_ab P_ba = P_ba P_ab
        P = N[j][:, i]
        P *= (2.0 * w)[:, None]
        H = P * P.T
        # the least-squares part μ C_(i_a, i_b) couples only the entries of one column of W: added
        # on those pairs (about k²/d of them), not as a dense k × k product with a mask
        a, b = _same_column_pairs(j)
        H[a, b] += self.mu * self.cov.numpy()[i[a], i[b]]
        H[np.arange(len(i)), np.arange(len(i))] += 2.0 * N[j, i]
        return H

    def in_domain(self, W) -> bool:
        """sI − W∘W is a nonsingular M-matrix (spectral radius of W∘W below s), decided by
        the inverse-positivity of sI − W∘W (``_inverse_m``)."""
        try:
            return self._inverse_m(np.asarray(W, dtype=np.float64))[1]
        except np.linalg.LinAlgError:  # singular: on the domain's boundary, not inside it
            return False
