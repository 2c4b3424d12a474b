"""Closed-form derivatives of the NOTEARS and GOLEM objectives (float64 numpy, no autograd).

``objectives.NotearsObjective`` and ``objectives.GolemObjective`` define their values once in
torch and differentiate them by autograd; this module gives the same gradients, Hessian-vector
products and support Hessians in closed form, for the objectives to call. Autograd on the
objectives' ``_value`` is the reference in ``tests/causal/test_derivatives.py``.

Notation: W, V are (d, d) with zero diagonal; ``support`` is a (k, 2) integer array of
off-diagonal index pairs, entry a = (i_a, j_a); C = XᵀX / n for the centred data X (any positive
multiple of XᵀX will do for GOLEM, see below); δ is the Kronecker delta; ∘ the entrywise product.

Acyclicity h(W) = tr(exp(A)) − d with A = W ∘ W, E = exp(A):

* ∇h = 2 W ∘ Eᵀ, since d tr(exp(A)) = tr(E dA) and dA = 2 W ∘ dW.
* ∇²h[V] = 2 V ∘ Eᵀ + 2 W ∘ L(A, 2 W ∘ V)ᵀ, where L(A, B) = ∫₀¹ e^{sA} B e^{(1−s)A} ds is the
  Fréchet derivative of exp at A in the direction B.
* ∂²h/∂w_ij ∂w_kl = 2 δ_(ij),(kl) E_ji + 4 w_ij w_kl [L(A, e_k e_lᵀ)]_ji.

  The Fréchet derivatives are exact (to round-off) from the block-triangular identity
  exp([[A, B], [0, A]]) = [[E, L(A, B)], [0, E]], one (2d, 2d) exponential per support entry,
  all in one batched ``torch.linalg.matrix_exp`` (used as a numeric kernel only).

NOTEARS, f = ½ tr((I − W)ᵀ C (I − W)) + α h + ρ/2 h²:

* ∇f = −C (I − W) + (α + ρ h) ∇h,
* ∇²f[V] = C V + (α + ρ h) ∇²h[V] + ρ ⟨∇h, V⟩ ∇h,
* ∂²f/∂w_ij ∂w_kl = C_ik δ_jl + (α + ρ h) ∂²h/∂w_ij ∂w_kl + ρ ∂h/∂w_ij ∂h/∂w_kl.

GOLEM-EV, f = d/2 log ℓ − log |det(I − W)| + λ₂ h with ℓ = ‖X − XW‖²_F = n tr((I − W)ᵀ C (I − W)):

* log-likelihood term: ∇ℓ = −2n C (I − W), ∇²ℓ[V] = 2n C V, so
  ∇(d/2 log ℓ) = d/2 ∇ℓ / ℓ and ∇²(d/2 log ℓ)[V] = d/2 (∇²ℓ[V] / ℓ − ⟨∇ℓ, V⟩ ∇ℓ / ℓ²).
  Every term is homogeneous of degree 0 in n, so the derivatives depend on C only up to a
  positive factor: the functions take C (the covariance, or the Gram matrix XᵀX alike) and never X.
  ℓ is then the quadratic form tr(Dᵀ C D), D = I − W, which loses relative accuracy only when the
  residual X − XW is tiny next to X itself (a near-perfect fit), where autograd on ‖X − XW‖² keeps it.
* −log |det(I − W)|, N = (I − W)⁻¹: gradient Nᵀ, ∇²[V] = (N V N)ᵀ, ∂²/∂w_ij ∂w_kl = N_jk N_li.

Every gradient and Hessian-vector product comes back with its diagonal set to 0, as the
objectives' base class returns them (the diagonal of W is not a variable). V's own diagonal, if
not zero, enters as it would under autograd. Support Hessians are (k, k) and symmetric.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
import torch

__all__ = [
    "notears_h_value_grad", "notears_h_hvp", "notears_h_hessian_on",
    "notears_grad", "notears_hvp", "notears_hessian_on",
    "golem_grad", "golem_hvp", "golem_hessian_on",
]

# Largest number of doubles the batched block exponentials hold at once (about 32 MB, before
# matrix_exp's own work space): long supports at large d go through in chunks.
_BLOCK_BATCH_DOUBLES = 4_000_000


def _zero_diagonal(M: np.ndarray) -> np.ndarray:
    np.fill_diagonal(M, 0.0)
    return M


def _support_indices(support) -> tuple[np.ndarray, np.ndarray]:
    support = np.asarray(support, dtype=np.intp).reshape(-1, 2)
    return support[:, 0], support[:, 1]


def _quadratic_hessian_on(C: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Hessian of ½ tr((I − W)ᵀ C (I − W)) on the support: C_ik δ_jl. C = XᵀX / n from a matmul
    need not be bitwise symmetric, so its block is averaged with its transpose: every other term
    is symmetric exactly, and the Hessians come back exactly symmetric."""
    block = C[np.ix_(i, i)]
    return 0.5 * (block + block.T) * (j[:, None] == j[None, :])


# ---------------------------------------------------------------------------------------------
# The acyclicity function h(W) = tr(exp(W ∘ W)) − d
# ---------------------------------------------------------------------------------------------


def notears_h_value_grad(W: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """(h(W), ∇h(W), E) with E = exp(W ∘ W), kept for callers that go on to second derivatives."""
    E = scipy.linalg.expm(W * W)
    h = float(np.trace(E)) - W.shape[0]
    return h, 2.0 * W * E.T, E


def _h_hvp_and_expm(W: np.ndarray, V: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # expm_frechet returns exp(A) alongside L(A, B) at no extra cost, so callers that also need
    # h and ∇h (the ρ h terms of NOTEARS) need no second exponential.
    E, frechet = scipy.linalg.expm_frechet(W * W, 2.0 * W * V)
    return 2.0 * V * E.T + 2.0 * W * frechet.T, E


def notears_h_hvp(W: np.ndarray, V: np.ndarray) -> np.ndarray:
    """∇²h(W)[V] = 2 V ∘ Eᵀ + 2 W ∘ L(W ∘ W, 2 W ∘ V)ᵀ (diagonal not zeroed: ∇²h's own)."""
    return _h_hvp_and_expm(W, V)[0]


def _expm_frechet_unit_directions(A: np.ndarray, rows: np.ndarray, cols: np.ndarray,
                                  at_rows: np.ndarray, at_cols: np.ndarray) -> np.ndarray:
    """(m, k) array F[b, a] = L(A, e_r e_cᵀ)[at_rows[a], at_cols[a]] with (r, c) = (rows[b], cols[b]).
    Each L is the upper right block of exp([[A, e_r e_cᵀ], [0, A]]); the blocks are exponentiated
    as one batch, in chunks that bound memory, and only the entries asked for are kept."""
    d, m = A.shape[0], len(rows)
    out = np.empty((m, len(at_rows)))
    chunk = max(1, _BLOCK_BATCH_DOUBLES // (4 * d * d))
    A_t = torch.from_numpy(A)
    for start in range(0, m, chunk):
        stop = min(start + chunk, m)
        blocks = torch.zeros((stop - start, 2 * d, 2 * d), dtype=torch.float64)
        blocks[:, :d, :d] = A_t
        blocks[:, d:, d:] = A_t
        batch = torch.arange(stop - start)
        blocks[batch, torch.from_numpy(rows[start:stop]), d + torch.from_numpy(cols[start:stop])] = 1.0
        frechet = torch.linalg.matrix_exp(blocks)[:, :d, d:].numpy()
        out[start:stop] = frechet[:, at_rows, at_cols]
    return out


def notears_h_hessian_on(W: np.ndarray, support, E: np.ndarray | None = None) -> np.ndarray:
    """(k, k) Hessian of h in the entries ``support``, the rest of W held fixed:
    2 δ_ab E_{j_a i_a} + 4 w_a w_b L(A, e_{i_b} e_{j_b}ᵀ)_{j_a i_a}. Pass ``E`` = exp(W ∘ W) if it is at hand."""
    return _h_hessian_on_indices(W, *_support_indices(support), E)


def _h_hessian_on_indices(W: np.ndarray, i: np.ndarray, j: np.ndarray, E: np.ndarray | None) -> np.ndarray:
    k = len(i)
    A = W * W
    if E is None:
        E = scipy.linalg.expm(A)
    H = np.zeros((k, k))
    H[np.arange(k), np.arange(k)] = 2.0 * E[j, i]
    w = W[i, j]
    # Column b of the Fréchet term is proportional to w_b: support entries at zero (e.g. edges
    # about to enter) need no block exponential at all.
    nonzero = np.flatnonzero(w)
    if len(nonzero):
        # frechet[b, a] = L(A, e_{i_b} e_{j_b}ᵀ)_{j_a i_a}
        frechet = _expm_frechet_unit_directions(A, i[nonzero], j[nonzero], j, i)
        H[:, nonzero] += 4.0 * w[:, None] * w[nonzero][None, :] * frechet.T
    # L(A, ·)'s adjoint is L(Aᵀ, ·), so the exact Hessian is symmetric; averaging only removes
    # the round-off asymmetry of the batched exponentials.
    return 0.5 * (H + H.T)


# ---------------------------------------------------------------------------------------------
# NOTEARS: ½ tr((I − W)ᵀ C (I − W)) + α h + ρ/2 h²
# ---------------------------------------------------------------------------------------------


def notears_grad(C: np.ndarray, W: np.ndarray, rho: float, alpha: float) -> np.ndarray:
    """∇f = −C (I − W) + (α + ρ h) ∇h, diagonal zeroed. C = XᵀX / n of the centred data."""
    g = C @ W - C
    if rho or alpha:
        h, grad_h, _ = notears_h_value_grad(W)
        g += (alpha + rho * h) * grad_h
    return _zero_diagonal(g)


def notears_hvp(C: np.ndarray, W: np.ndarray, V: np.ndarray, rho: float, alpha: float) -> np.ndarray:
    """∇²f[V] = C V + (α + ρ h) ∇²h[V] + ρ ⟨∇h, V⟩ ∇h, diagonal zeroed."""
    hv = C @ V
    if rho or alpha:
        hess_h_v, E = _h_hvp_and_expm(W, V)
        h = float(np.trace(E)) - W.shape[0]
        grad_h = 2.0 * W * E.T
        hv += (alpha + rho * h) * hess_h_v + rho * float(np.sum(grad_h * V)) * grad_h
    return _zero_diagonal(hv)


def notears_hessian_on(C: np.ndarray, W: np.ndarray, support, rho: float, alpha: float) -> np.ndarray:
    """(k, k) Hessian of f in the entries ``support``, the rest of W held fixed:
    C_ik δ_jl + (α + ρ h) ∇²h + ρ ∇h ∇hᵀ on the support."""
    i, j = _support_indices(support)
    H = _quadratic_hessian_on(C, i, j)
    if rho or alpha:
        h, grad_h, E = notears_h_value_grad(W)
        grad_on = grad_h[i, j]
        H += (alpha + rho * h) * _h_hessian_on_indices(W, i, j, E) + rho * np.outer(grad_on, grad_on)
    return H


# ---------------------------------------------------------------------------------------------
# GOLEM-EV: d/2 log ‖X − XW‖² − log |det(I − W)| + λ₂ h
# ---------------------------------------------------------------------------------------------


def _golem_loss_terms(C: np.ndarray, W: np.ndarray) -> tuple[float, np.ndarray]:
    """(ℓ, ∇ℓ) up to the common positive factor of C: ℓ = tr(Dᵀ C D), ∇ℓ = −2 C D, D = I − W."""
    D = np.eye(W.shape[0]) - W
    CD = C @ D
    return float(np.sum(D * CD)), -2.0 * CD


def golem_grad(C: np.ndarray, W: np.ndarray, lambda2: float) -> np.ndarray:
    """∇f = d/2 ∇ℓ / ℓ + Nᵀ + λ₂ ∇h, N = (I − W)⁻¹, diagonal zeroed. C: XᵀX / n or XᵀX."""
    d = W.shape[0]
    loss, grad_loss = _golem_loss_terms(C, W)
    g = (0.5 * d / loss) * grad_loss + np.linalg.inv(np.eye(d) - W).T
    if lambda2:
        g += lambda2 * notears_h_value_grad(W)[1]
    return _zero_diagonal(g)


def golem_hvp(C: np.ndarray, W: np.ndarray, V: np.ndarray, lambda2: float) -> np.ndarray:
    """∇²f[V] = d/2 (2 C V / ℓ − ⟨∇ℓ, V⟩ ∇ℓ / ℓ²) + (N V N)ᵀ + λ₂ ∇²h[V], diagonal zeroed."""
    d = W.shape[0]
    loss, grad_loss = _golem_loss_terms(C, W)
    N = np.linalg.inv(np.eye(d) - W)
    hv = (0.5 * d) * (2.0 * (C @ V) / loss - (float(np.sum(grad_loss * V)) / loss**2) * grad_loss)
    hv += (N @ V @ N).T
    if lambda2:
        hv += lambda2 * notears_h_hvp(W, V)
    return _zero_diagonal(hv)


def golem_hessian_on(C: np.ndarray, W: np.ndarray, support, lambda2: float) -> np.ndarray:
    """(k, k) Hessian of f in the entries ``support``:
    d/2 (2 C_ik δ_jl / ℓ − ∂ℓ/∂w_ij ∂ℓ/∂w_kl / ℓ²) + N_jk N_li + λ₂ ∂²h/∂w_ij ∂w_kl."""
    d = W.shape[0]
    i, j = _support_indices(support)
    loss, grad_loss = _golem_loss_terms(C, W)
    grad_on = grad_loss[i, j]
    H = (0.5 * d) * (2.0 * _quadratic_hessian_on(C, i, j) / loss
                     - np.outer(grad_on, grad_on) / loss**2)
    N = np.linalg.inv(np.eye(d) - W)
    N_ji = N[np.ix_(j, i)]  # N_ji[a, b] = N[j_a, i_b]; N_{j_a k_b} N_{l_b i_a} = N_ji[a, b] · N_ji[b, a]
    H += N_ji * N_ji.T
    if lambda2:
        H += lambda2 * _h_hessian_on_indices(W, i, j, None)
    return H
