"""Shared numerics: matrix sign / polar factor, truncated SVD.

Every function works on the last two dimensions and batches over the leading ones.

Non-finite input: an SVD of a matrix holding NaN or Inf either fails inside LAPACK
(torch's raw ``_LinAlgError``) or returns NaN singular values, and the polar factor of such
a matrix would silently be all zeros. :func:`polar`, :func:`truncated_svd` and
:func:`msign` (unless told ``check_finite=False``) raise :class:`NonFiniteError` instead,
naming the argument: one reduction over the singular values (or the norm) that the
function computes anyway.
"""

from __future__ import annotations

import math
import numbers
from contextlib import contextmanager
from typing import Literal, NamedTuple

import torch

__all__ = [
    "MUON_COEFFICIENTS",
    "NEWTON_SCHULZ_CUBIC",
    "NonFiniteError",
    "msign",
    "polar",
    "TruncatedSVD",
    "truncated_svd",
]

# Quintic Newton–Schulz coefficients of Muon (Jordan et al., 2024). They trade exact
# convergence for speed: the slope at 0 is a = 3.4445, so small singular values grow
# fast, but the fixed point is not 1; after 5 steps the singular values of the output
# oscillate in roughly [0.7, 1.2] instead of converging to 1.
MUON_COEFFICIENTS: tuple[float, float, float] = (3.4445, -4.7750, 2.0315)
# The classical cubic iteration X <- 1.5 X - 0.5 X X^T X: converges (quadratically)
# to the polar factor for singular values in (0, sqrt(3)).
NEWTON_SCHULZ_CUBIC: tuple[float, float, float] = (1.5, -0.5, 0.0)


class NonFiniteError(FloatingPointError, ValueError):
    """A NaN or Inf where the numerics need finite numbers. Both a FloatingPointError (what a
    non-finite value met while optimizing raises) and a ValueError (a bad argument), so that
    ``except FloatingPointError`` and ``except ValueError`` both catch it."""


def nonfinite_error(name: str, x: torch.Tensor, what: str) -> NonFiniteError:
    """The error for ``x`` (argument ``name``) holding NaN or Inf where ``what`` needs finite
    entries (or, where its entries are finite, values that overflow on the way)."""
    bad = int((~torch.isfinite(x)).sum())
    if bad:
        return NonFiniteError(f"{name} holds NaN or Inf ({bad} of {x.numel()} entries): {what} needs finite entries")
    return NonFiniteError(f"{name} holds no NaN or Inf, but {what} met non-finite values: its entries (up to "
                          f"{float(x.abs().max()):.3g}) overflow {x.dtype} there; rescale {name}")


@contextmanager
def finite_linalg(name: str, x: torch.Tensor, what: str):
    """Run a decomposition of ``x``: LAPACK's failure on non-finite input (torch's raw
    ``_LinAlgError``) becomes a :class:`NonFiniteError` naming ``name``; any other failure
    passes through."""
    try:
        yield
    except torch.linalg.LinAlgError:
        if not bool(torch.isfinite(x).all()):
            raise nonfinite_error(name, x, what) from None
        raise


def check_finite_values(values: torch.Tensor, name: str, x: torch.Tensor, what: str) -> None:
    """Refuse ``x`` when ``values`` computed from it (its singular values, its norm) are not
    finite: one reduction over ``values`` and one host sync."""
    if not bool(torch.isfinite(values).all()):
        raise nonfinite_error(name, x, what)


def _check_matrix(x: torch.Tensor, name: str) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.ndim < 2:
        raise ValueError(f"{name} must have at least 2 dimensions (..., m, n), got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")


def msign(
    x: torch.Tensor,
    steps: int = 5,
    coefficients: tuple[float, float, float] = MUON_COEFFICIENTS,
    eps: float = 1e-7,
    *,
    dtype: torch.dtype | None = None,
    eps_mode: Literal["add", "clamp"] = "add",
    fused: bool = False,
    check_finite: bool = True,
) -> torch.Tensor:
    """Approximate matrix sign ``U V^T`` of ``x = U S V^T`` by Newton–Schulz iteration.

    Each step maps ``X <- a X + b (X X^T) X + c (X X^T)^2 X``, i.e. applies the odd
    polynomial ``p(s) = a s + b s^3 + c s^5`` to every singular value while keeping
    the singular vectors. ``x`` is first scaled by its Frobenius norm so that all
    singular values lie in [0, 1]. Zero singular values stay zero (sign(0) = 0), so a
    zero matrix maps to zero, not NaN. The iteration runs on the wide orientation
    (``x^T`` for a tall ``x``), where ``X X^T`` is the smaller Gram matrix.

    ``dtype=torch.bfloat16, eps_mode="clamp", fused=True`` is ``torch.optim.Muon``'s
    iteration operation for operation (its ``_zeropower_via_newtonschulz``), so that
    results agree bit for bit; the defaults are the plain form in ``x``'s own dtype.

    Args:
        x: tensor of shape (..., m, n), tall or wide.
        steps: number of iterations (Muon uses 5).
        coefficients: (a, b, c); the default is Muon's quintic, which is fast but not
            exact (see ``MUON_COEFFICIENTS``); ``NEWTON_SCHULZ_CUBIC`` converges to
            the polar factor.
        eps: keeps the normalization finite for a zero matrix.
        dtype: the dtype to iterate in (e.g. ``torch.bfloat16``, as Muon); None: ``x``'s.
            The result is cast back to ``x``'s dtype.
        eps_mode: ``"add"`` divides by ``‖x‖_F + eps``; ``"clamp"`` by ``max(‖x‖_F, eps)``.
        fused: evaluate each step with two ``addmm`` calls (``B = b A + c A A`` and
            ``a X + B X``, each rounded once, as Muon) instead of separate products and
            sums; batches go through ``baddbmm``.

    Returns:
        Tensor of the shape and dtype of ``x``.
    """
    _check_matrix(x, "x")
    if isinstance(steps, bool) or not isinstance(steps, numbers.Integral):
        raise TypeError(f"steps must be an integer, got {steps!r} ({type(steps).__name__})")
    if steps < 0:
        raise ValueError(f"steps must be >= 0, got {steps}")
    coefficients = check_coefficients(coefficients)
    if eps_mode not in ("add", "clamp"):
        raise ValueError(f"eps_mode must be 'add' or 'clamp', got {eps_mode!r}")
    if dtype is not None and not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise TypeError(f"dtype must be a floating-point torch.dtype or None, got {dtype!r}")
    a, b, c = coefficients
    wide = x.shape[-2] <= x.shape[-1]
    y = x if dtype is None else x.to(dtype)
    y = y if wide else y.mT
    norm = torch.linalg.matrix_norm(y, keepdim=True)
    if check_finite:
        check_finite_values(norm, "x", x, "the Newton-Schulz iteration (msign)")
    y = y / (norm + eps if eps_mode == "add" else norm.clamp(min=eps))
    for _ in range(steps):
        gram = y @ y.mT
        if fused:
            y = _addmm(y, _addmm(gram, gram, gram, beta=b, alpha=c), y, beta=a)
        else:
            poly = b * gram + c * (gram @ gram)
            y = a * y + poly @ y
    y = y if wide else y.mT
    return y if dtype is None else y.to(x.dtype)


def check_coefficients(coefficients, name: str = "coefficients") -> tuple[float, float, float]:
    """Newton-Schulz coefficients (a, b, c) as three finite floats, or a TypeError /
    ValueError naming ``name``."""
    try:
        values = tuple(coefficients)
    except TypeError:
        raise TypeError(f"{name} must be three numbers (a, b, c), got {coefficients!r}") from None
    if len(values) != 3:
        raise ValueError(f"{name} must be three numbers (a, b, c), got {len(values)}: {coefficients!r}")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise TypeError(f"{name} must be three real numbers (a, b, c), got {coefficients!r}")
        if not math.isfinite(v):
            raise ValueError(f"{name} must be three finite numbers (a, b, c), got {coefficients!r}")
    return values


def _addmm(input: torch.Tensor, m1: torch.Tensor, m2: torch.Tensor, *, beta: float, alpha: float = 1.0) -> torch.Tensor:
    """``beta * input + alpha * (m1 @ m2)`` in one fused call: ``addmm`` for matrices,
    ``baddbmm`` over the flattened leading dimensions of a batch."""
    if input.ndim == 2:
        return torch.addmm(input, m1, m2, beta=beta, alpha=alpha)
    flat = lambda t: t.reshape(-1, *t.shape[-2:])
    out = torch.baddbmm(flat(input), flat(m1), flat(m2), beta=beta, alpha=alpha)
    return out.reshape(*input.shape[:-2], *out.shape[-2:])


def polar(x: torch.Tensor, rtol: float | None = None) -> torch.Tensor:
    """Exact orthogonal polar factor ``U V^T`` of ``x = U S V^T`` via the SVD.

    Singular values at or below ``rtol * max(S)`` are treated as zero and their
    directions dropped, so that for rank-deficient input the result is the matrix
    sign function with sign(0) = 0 (what Newton–Schulz converges to) rather than an
    arbitrary completion. ``rtol`` defaults to ``max(m, n) * eps(dtype)``, the rank
    tolerance of ``torch.linalg.matrix_rank``.

    Args:
        x: tensor of shape (..., m, n).

    Returns:
        Tensor of shape (..., m, n) with singular values in {0, 1}.

    Raises:
        NonFiniteError: ``x`` holds NaN or Inf (its polar factor would be all zeros).
    """
    _check_matrix(x, "x")
    if x.shape[-2] == 0 or x.shape[-1] == 0:
        return torch.zeros_like(x)  # an empty matrix has no singular direction
    with finite_linalg("x", x, "the polar factor (an SVD)"):
        u, s, vh = torch.linalg.svd(x, full_matrices=False)
    check_finite_values(s, "x", x, "the polar factor (an SVD)")
    if rtol is None:
        rtol = max(x.shape[-2:]) * torch.finfo(x.dtype).eps
    keep = s > rtol * s.amax(dim=-1, keepdim=True)
    return (u * keep.unsqueeze(-2).to(x.dtype)) @ vh


class TruncatedSVD(NamedTuple):
    """Top-k factors: ``x ≈ U @ diag(S) @ Vh`` with U (..., m, k), S (..., k), Vh (..., k, n)."""

    U: torch.Tensor
    S: torch.Tensor
    Vh: torch.Tensor


def truncated_svd(
    x: torch.Tensor,
    k: int,
    method: Literal["auto", "full", "randomized"] = "auto",
    oversample: int = 10,
    niter: int = 4,
) -> TruncatedSVD:
    """The k leading singular triplets of ``x``, singular values in descending order.

    ``method="full"`` truncates ``torch.linalg.svd`` (exact). ``"randomized"`` uses
    ``torch.svd_lowrank`` (Halko et al.) with ``k + oversample`` probe vectors and
    ``niter`` power iterations: much cheaper when k is small against min(m, n), and
    accurate when the spectrum decays. ``"auto"`` takes the randomized path only when
    it pays: the matrix is large (min(m, n) > 512) and ``k + oversample`` is at most
    a quarter of min(m, n); otherwise the full SVD. ``x`` holding NaN or Inf raises
    :class:`NonFiniteError`.
    """
    _check_matrix(x, "x")
    m, n = x.shape[-2:]
    r = min(m, n)
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= r:
        raise ValueError(f"k must be an int in [1, min(m, n)] = [1, {r}], got {k!r}")
    if method not in ("auto", "full", "randomized"):
        raise ValueError(f"method must be 'auto', 'full' or 'randomized', got {method!r}")
    if method == "auto":
        method = "randomized" if (r > 512 and k + oversample <= r // 4) else "full"
    what = f"the {method} truncated SVD"
    if method == "full":
        with finite_linalg("x", x, what):
            u, s, vh = torch.linalg.svd(x, full_matrices=False)
        check_finite_values(s, "x", x, what)
        return TruncatedSVD(u[..., :k], s[..., :k], vh[..., :k, :])
    q = min(k + oversample, r)
    with finite_linalg("x", x, what):
        u, s, v = torch.svd_lowrank(x, q=q, niter=niter)
    check_finite_values(s, "x", x, what)
    return TruncatedSVD(u[..., :k], s[..., :k], v[..., :k].mT)
