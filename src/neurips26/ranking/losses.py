"""Exact pairwise AUC surrogate losses over all positive-negative pairs, without forming them.

For scores ``a`` of the n₊ positives and ``b`` of the n₋ negatives, a pairwise surrogate is

    L = 1/(n₊ n₋) Σ_i Σ_j ℓ(a_i − b_j)

(the two-sample U-statistic of the batch; ``reduction="sum"`` drops the normalization). The
surrogates, with t = a_i − b_j and ``margin`` m (a scale for the smooth ones, as LibAUC's ``hparam``):

============== ========================= ==============================================
surrogate      ℓ(t)                      exact algorithm
============== ========================= ==============================================
squared_hinge  max(m − t, 0)²            sort + prefix sums of (1, b, b²), O(n log n)
hinge          max(m − t, 0)             sort + prefix sums of (1, b), O(n log n)
squared        (m − t)²                  moments, O(n)
exponential    exp(−m t)                 factorizes: Σ e^{−m a} · Σ e^{m b}, O(n)
logistic       log(1 + exp(−m t))        chunked O(n₊ n₋) in bounded memory
============== ========================= ==============================================

The gradient with respect to every score is computed in the same pass at the same cost by a
custom ``autograd.Function`` (first-order only: no double backward).

Ties: at the hinge's kink (a_i − b_j = m exactly) the subgradient is split in halves, as torch's
``maximum`` does, so the result equals LibAUC's ``PairwiseAUCLoss`` built from ``torch.max``; the
squared hinge is differentiable there. Score ties between a positive and a negative are ordinary
pairs with t = 0.
"""

from __future__ import annotations

import torch

from .._checks import check_real

__all__ = ["SURROGATES", "PairwiseAUCLoss", "pairwise_auc_loss", "split_scores", "empirical_auc"]

SURROGATES = ("squared_hinge", "hinge", "squared", "exponential", "logistic")
REDUCTIONS = ("mean", "sum")
# Pairs per block of the logistic surrogate: bounds memory at about 4 such float64 blocks.
_LOGISTIC_BLOCK = 1 << 21


# --- input checks -------------------------------------------------------------------------------

def _as_tensor(name: str, x) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x
    try:
        return torch.as_tensor(x)
    except (TypeError, ValueError, RuntimeError) as e:
        raise TypeError(f"{name} must be a tensor or array-like of numbers, got {type(x).__name__}") from e


def split_scores(scores, targets, *, check: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Positive-class mask of ``targets`` for ``scores``, both of shape (n,) (or (n, 1)).

    Labels are {0, 1} or {−1, 1} (bool, integer or float); 1 marks a positive. With ``check``,
    raises ValueError for a shape mismatch, an empty input, labels outside those sets, a single
    class, or non-finite scores (one host read, done once per call). Returns ``(scores (n,),
    positive mask (n,) bool)``."""
    scores = _as_tensor("scores", scores)
    targets = _as_tensor("targets", targets)
    if scores.dim() == 2 and scores.shape[1] == 1:
        scores = scores[:, 0]
    if targets.dim() == 2 and targets.shape[1] == 1:
        targets = targets[:, 0]
    if scores.dim() != 1:
        raise ValueError(f"scores must have shape (n,) or (n, 1), got {tuple(scores.shape)}")
    if not scores.is_floating_point():
        raise TypeError(f"scores must be a floating-point tensor, got {scores.dtype}")
    if targets.shape != scores.shape:
        raise ValueError(f"targets must have the shape of scores {tuple(scores.shape)}, got {tuple(targets.shape)}")
    if targets.is_complex():
        raise TypeError(f"targets must be real labels, got {targets.dtype}")
    pos = targets == 1
    if check:
        if scores.numel() == 0:
            raise ValueError("scores is empty: a pairwise loss needs at least one positive and one negative")
        valid = pos | (targets == 0) | (targets == -1)
        n_pos = int(pos.sum())
        stats = torch.stack([valid.all(), torch.isfinite(scores.detach()).all()]).tolist()
        if not stats[0]:
            bad = targets[~valid][:3].tolist()
            raise ValueError(f"targets must be labels in {{0, 1}} or {{-1, 1}}, got values such as {bad}")
        has_zero, has_minus = bool((targets == 0).any()), bool((targets == -1).any())
        if has_zero and has_minus:
            raise ValueError("targets mixes 0 and -1 as the negative label: use {0, 1} or {-1, 1}")
        if n_pos == 0 or n_pos == scores.numel():
            raise ValueError(f"targets holds one class only ({n_pos} positives of {scores.numel()}): "
                             "a pairwise AUC loss needs both")
        if not stats[1]:
            raise ValueError("scores contains NaN or inf")
    return scores, pos


def check_surrogate(surrogate: str, margin, reduction: str) -> float:
    if surrogate not in SURROGATES:
        raise ValueError(f"surrogate must be one of {SURROGATES}, got {surrogate!r}")
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    smooth = surrogate in ("exponential", "logistic")
    return check_real("margin", margin, low=0.0, low_open=smooth)


# --- the exact cores: (loss sum, d sum / d a, d sum / d b) -------------------------------------

def _sorted_prefix(v: torch.Tensor, powers: int):
    """Sorted v, its sorting permutation, and the prefix sums (with a leading 0) of v**k,
    k = 1..powers, each of shape (n + 1,)."""
    vs, perm = torch.sort(v)
    zero = vs.new_zeros(1)
    sums = [torch.cat([zero, torch.cumsum(vs ** k, 0)]) for k in range(1, powers + 1)]
    return vs, perm, sums


def _unsort(values: torch.Tensor, perm: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(values)
    out[perm] = values
    return out


def _hinge_family(a: torch.Tensor, b: torch.Tensor, m: float, squared: bool, need_grad: bool):
    """Σ_ij max(b_j − u_i, 0)^p with u = a − m, p = 2 (squared) or 1, and its gradients.

    For each u_i the active negatives b_j > u_i form a suffix of the sorted b, found by
    ``searchsorted``; their count and sums of b, b² come from prefix sums. Both sides are sorted,
    so every ``searchsorted`` runs on sorted queries (cache-friendly: 3-5x faster than random
    queries at n = 10⁶); results go back to the input order through the sorting permutations."""
    # Shift by a common constant: differences are unchanged and the moment expansion below
    # cancels less (scores far from 0 would otherwise lose digits in Σb² − 2uΣb + u²k).
    c = torch.cat([a, b]).mean()
    u, b = a - m - c, b - c
    bs, bperm, (s1, s2) = _sorted_prefix(b, 2)
    us, uperm, (t1,) = _sorted_prefix(u, 1)
    n_neg = b.numel()
    idx = torch.searchsorted(bs, us, right=True)  # per sorted u: number of b <= u, the inactive prefix
    k = (n_neg - idx).to(us.dtype)
    sb = s1[-1] - s1[idx]
    if squared:
        sbb = s2[-1] - s2[idx]
        per_pos = sbb - 2 * us * sb + us * us * k
    else:
        per_pos = sb - us * k
    total = per_pos.sum()
    if not need_grad:
        return total, None, None
    lo = torch.searchsorted(us, bs, right=False)  # per sorted b: number of u < b, the positives it is active for
    if squared:
        grad_a = -2 * (sb - us * k)
        grad_b = 2 * (lo.to(bs.dtype) * bs - t1[lo])
    else:
        # Kink ties (b_j == u_i) count one half, as torch.maximum's subgradient.
        ties_a = (idx - torch.searchsorted(bs, us, right=False)).to(us.dtype)
        grad_a = -(k + 0.5 * ties_a)
        hi = torch.searchsorted(us, bs, right=True)
        grad_b = lo.to(bs.dtype) + 0.5 * (hi - lo).to(bs.dtype)
    return total, _unsort(grad_a, uperm), _unsort(grad_b, bperm)


def _squared(a, b, m, need_grad):
    """Σ_ij (m − a_i + b_j)² from the first two moments, O(n)."""
    c = torch.cat([a, b]).mean()
    u, b = a - m - c, b - c
    n_pos, n_neg = u.numel(), b.numel()
    su, sb = u.sum(), b.sum()
    total = n_neg * (u * u).sum() - 2 * su * sb + n_pos * (b * b).sum()
    if not need_grad:
        return total, None, None
    return total, -2 * (sb - n_neg * u), 2 * (n_pos * b - su)


def _exponential(a, b, m, need_grad):
    """Σ_ij exp(−m (a_i − b_j)) = Σ_i e^{−m a_i} Σ_j e^{m b_j}, in log space against overflow."""
    la = torch.logsumexp(-m * a, 0)
    lb = torch.logsumexp(m * b, 0)
    total = torch.exp(la + lb)
    if not need_grad:
        return total, None, None
    return total, -m * torch.exp(-m * a + lb), m * torch.exp(m * b + la)


def _logistic(a, b, m, need_grad):
    """Σ_ij log(1 + exp(−m (a_i − b_j))) in row blocks of at most ``_LOGISTIC_BLOCK`` pairs."""
    n_neg = b.numel()
    rows = max(1, _LOGISTIC_BLOCK // max(n_neg, 1))
    total = a.new_zeros(())
    grad_a = torch.empty_like(a) if need_grad else None
    grad_b = torch.zeros_like(b) if need_grad else None
    for start in range(0, a.numel(), rows):
        t = a[start:start + rows, None] - b[None, :]
        total = total + torch.nn.functional.softplus(-m * t).sum()
        if need_grad:
            g = -m * torch.sigmoid(-m * t)  # dℓ/dt
            grad_a[start:start + rows] = g.sum(1)
            grad_b -= g.sum(0)
    return total, grad_a, grad_b


def _pairwise_core(a, b, surrogate: str, m: float, need_grad: bool):
    if surrogate == "squared_hinge":
        return _hinge_family(a, b, m, True, need_grad)
    if surrogate == "hinge":
        return _hinge_family(a, b, m, False, need_grad)
    if surrogate == "squared":
        return _squared(a, b, m, need_grad)
    if surrogate == "exponential":
        return _exponential(a, b, m, need_grad)
    return _logistic(a, b, m, need_grad)


class _PairwiseAUC(torch.autograd.Function):
    """Loss and its gradient in one pass; backward scales the stored gradient."""

    @staticmethod
    def forward(ctx, scores, pos, surrogate, margin, reduction):
        a, b = scores[pos], scores[~pos]
        need = ctx.needs_input_grad[0]
        total, ga, gb = _pairwise_core(a, b, surrogate, margin, need)
        scale = 1.0 / (a.numel() * b.numel()) if reduction == "mean" else 1.0
        if need:
            grad = torch.empty_like(scores)
            grad[pos] = ga * scale
            grad[~pos] = gb * scale
            ctx.save_for_backward(grad)
        return total * scale

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_output):
        (grad,) = ctx.saved_tensors
        return grad * grad_output, None, None, None, None


def pairwise_auc_loss(scores, targets, surrogate: str = "squared_hinge", margin: float = 1.0,
                      reduction: str = "mean", *, check: bool = True) -> torch.Tensor:
    """Exact pairwise AUC surrogate over all positive-negative pairs of ``scores`` (n,).

    ``targets`` (n,) in {0, 1} or {−1, 1}; ``surrogate`` one of :data:`SURROGATES`; ``margin``
    is m in the table of the module docstring (the scale for ``exponential`` / ``logistic``).
    ``reduction="mean"`` averages over the n₊ n₋ pairs (the two-sample U-statistic), ``"sum"``
    sums. Differentiable in ``scores`` (first order). ``check=False`` skips the input checks
    (and their host reads) in a hot loop whose batches are known to be valid. Returns a 0-d tensor.
    """
    m = check_surrogate(surrogate, margin, reduction)
    scores, pos = split_scores(scores, targets, check=check)
    return _PairwiseAUC.apply(scores, pos, surrogate, m, reduction)


class PairwiseAUCLoss(torch.nn.Module):
    """``torch.nn.Module`` face of :func:`pairwise_auc_loss`: ``loss(scores, targets)`` as
    LibAUC's ``PairwiseAUCLoss(surr_loss, hparam)``, computed exactly in O(n log n) (squared
    hinge, hinge), O(n) (squared, exponential) or blocked O(n₊ n₋) (logistic) without forming the
    pair matrix. ``scores`` (n,) or (n, 1); ``targets`` of the same shape."""

    def __init__(self, surrogate: str = "squared_hinge", margin: float = 1.0, reduction: str = "mean"):
        super().__init__()
        self.margin = check_surrogate(surrogate, margin, reduction)
        self.surrogate = surrogate
        self.reduction = reduction

    def forward(self, scores, targets) -> torch.Tensor:
        return pairwise_auc_loss(scores, targets, self.surrogate, self.margin, self.reduction)

    def extra_repr(self) -> str:
        return f"surrogate={self.surrogate!r}, margin={self.margin:g}, reduction={self.reduction!r}"


def empirical_auc(scores, targets) -> float:
    """The empirical AUC, P(s₊ > s₋) + ½ P(s₊ = s₋) over all pairs, in O(n log n) from average
    ranks (the Mann–Whitney statistic; equal to ``sklearn.metrics.roc_auc_score``). ``scores``
    and ``targets`` (n,) as in :func:`pairwise_auc_loss`; returns a float."""
    scores, pos = split_scores(scores, targets)
    s = scores.detach().to(torch.float64)
    ss, _ = torch.sort(s)
    # Average rank (1-based) of each score among all: ties share the mean of their positions.
    left = torch.searchsorted(ss, s, right=False).to(torch.float64)
    right = torch.searchsorted(ss, s, right=True).to(torch.float64)
    ranks = (left + right + 1) / 2
    n_pos = int(pos.sum())
    n_neg = s.numel() - n_pos
    u = ranks[pos].sum() - n_pos * (n_pos + 1) / 2
    return float(u) / (n_pos * n_neg)
