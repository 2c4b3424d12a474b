"""Corrective Power and the U-statistic structure of minibatch pairwise gradients.

*Corrective Power* (the AUC corrective-power paper) asks whether one pairwise minibatch update
corrects ranking errors the more strongly and the more reliably the more severe they are. For a
probe pair (x₊, x₋) with scores s₊, s₋ the *severity* is s₋ − s₊ (an error when > 0); after one
update the margin change is Δ = (s₊' − s₋') − (s₊ − s₋) (a correction when > 0). Binned by
severity, the mean of Δ is the *strength* and the fraction of Δ > 0 the *reliability*.

The minibatch pairwise gradient over n₊ positives and n₋ negatives drawn independently from the
class distributions is a two-sample U-statistic with vector kernel g(x₊, x₋) = ℓ'(f(x₊) − f(x₋))
(∇f(x₊) − ∇f(x₋)). Its covariance trace is exactly (Hoeffding)

    Var = σ₁₊² / n₊ + σ₁₋² / n₋ + σ₂² / (n₊ n₋),

σ₁₊² = tr Cov E[g | x₊], σ₁₋² = tr Cov E[g | x₋] (the Hájek, first-order part) and σ₂² =
tr Cov g − σ₁₊² − σ₁₋² (the second-order, degenerate part). Where σ₁ vanishes the minibatch noise
falls as 1/(n₊ n₋) instead of 1/n and no longer carries a per-sample signal: the *degeneracy
index* V₂ / (V₁ + V₂), V₁ = σ₁₊²/n₊ + σ₁₋²/n₋, V₂ = σ₂²/(n₊n₋), measures that share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from .._checks import check_int, check_real
from .losses import check_surrogate, split_scores

__all__ = ["CorrectivePower", "corrective_power", "corrective_profile", "UStatDecomposition", "ustat_components", "ustat_decomposition",
           "surrogate_derivative", "severe_fraction", "DegeneracyMonitor"]


# --- corrective power ---------------------------------------------------------------------------

@dataclass(frozen=True)
class CorrectivePower:
    """Per severity bin: ``edges`` (B + 1,), ``count`` (B,) probe pairs, ``strength`` (B,) mean margin
    change and ``reliability`` (B,) fraction of pairs whose margin grew (NaN in an empty bin)."""

    edges: torch.Tensor
    count: torch.Tensor
    strength: torch.Tensor
    reliability: torch.Tensor

    def as_dict(self) -> dict:
        return {k: getattr(self, k).tolist() for k in ("edges", "count", "strength", "reliability")}


def _pair_margins(scores_fn, probe_pos, probe_neg) -> torch.Tensor:
    with torch.no_grad():
        a = torch.as_tensor(scores_fn(probe_pos)).reshape(-1)
        b = torch.as_tensor(scores_fn(probe_neg)).reshape(-1)
    if not (torch.isfinite(a).all() and torch.isfinite(b).all()):
        raise ValueError("scores_fn returned NaN or inf scores on the probes")
    return a[:, None] - b[None, :]


def _check_probes(probe_pos, probe_neg):
    for name, p in (("probe_pos", probe_pos), ("probe_neg", probe_neg)):
        if not isinstance(p, torch.Tensor):
            raise TypeError(f"{name} must be a tensor of inputs, got {type(p).__name__}")
        if p.dim() == 0 or p.shape[0] == 0:
            raise ValueError(f"{name} must hold at least one example (first dimension), got shape {tuple(p.shape)}")
        if p.is_floating_point() and not torch.isfinite(p).all():
            raise ValueError(f"{name} contains NaN or inf")


def _check_edges(bins) -> torch.Tensor:
    edges = torch.as_tensor(bins, dtype=torch.float64).reshape(-1)
    if edges.numel() < 2 or torch.isnan(edges).any() or not bool((edges[1:] > edges[:-1]).all()):
        raise ValueError(f"bins must be at least two increasing edges (inf allowed at the ends), got {edges.tolist()}")
    return edges


def corrective_power(scores_fn: Callable[[torch.Tensor], torch.Tensor], update_fn: Callable[[], object],
                     probe_pos: torch.Tensor, probe_neg: torch.Tensor,
                     bins: Sequence[float] | torch.Tensor = (-float("inf"), -1.0, 0.0, 0.5, 1.0, float("inf"))
                     ) -> CorrectivePower:
    """Corrective power of one update on the probe pairs.

    ``scores_fn(X)`` returns the scores (k,) of a batch of inputs X (k, ...); ``update_fn()`` applies
    one update in place (a training step: the caller snapshots the model first if it wants the
    update undone); ``probe_pos`` (n₊, ...) and ``probe_neg`` (n₋, ...) are inputs of each class.
    ``bins`` are severity edges (B + 1,), left-closed ``[e_k, e_{k+1})``; pairs outside are dropped.
    Scores are read under ``no_grad`` before and after the update. Returns :class:`CorrectivePower`.
    """
    if not callable(scores_fn) or not callable(update_fn):
        raise TypeError("scores_fn and update_fn must be callables")
    _check_probes(probe_pos, probe_neg)
    edges = _check_edges(bins)
    before = _pair_margins(scores_fn, probe_pos, probe_neg)
    update_fn()
    after = _pair_margins(scores_fn, probe_pos, probe_neg)
    return corrective_profile(-before.reshape(-1), (after - before).reshape(-1), edges)


def corrective_profile(severity: torch.Tensor, delta: torch.Tensor, edges) -> CorrectivePower:
    """Bin margin changes ``delta`` (m,) by ``severity`` (m,) into ``edges``: the reduction step of
    :func:`corrective_power`, for margin changes computed elsewhere."""
    edges = _check_edges(edges)
    severity = severity.to(torch.float64)
    delta = delta.to(torch.float64)
    nb = edges.numel() - 1
    k = torch.bucketize(severity, edges, right=True) - 1  # [e_k, e_{k+1})
    inside = (k >= 0) & (k < nb)
    k, d = k[inside], delta[inside]
    count = torch.bincount(k, minlength=nb).to(torch.float64)
    total = torch.zeros(nb, dtype=torch.float64).index_add_(0, k, d)
    better = torch.zeros(nb, dtype=torch.float64).index_add_(0, k, (d > 0).to(torch.float64))
    nan = torch.full((nb,), float("nan"), dtype=torch.float64)
    strength = torch.where(count > 0, total / count.clamp(min=1), nan)
    reliability = torch.where(count > 0, better / count.clamp(min=1), nan)
    return CorrectivePower(edges, count, strength, reliability)


def severe_fraction(scores, targets, threshold: float = 1.0) -> float:
    """Fraction of positive-negative pairs with severity s₋ − s₊ > ``threshold``, exact in
    O(n log n) (sorted positives, ``searchsorted``). ``scores``, ``targets`` (n,) as in
    :func:`~neurips26.ranking.pairwise_auc_loss`."""

    thr = check_real("threshold", threshold)
    scores, pos = split_scores(scores, targets)
    a, _ = torch.sort(scores[pos].detach().to(torch.float64))
    b = scores[~pos].detach().to(torch.float64)
    # For each negative: positives with a < b − thr.
    n = torch.searchsorted(a, b - thr, right=False).sum()
    return float(n) / (a.numel() * b.numel())


# --- U-statistic decomposition ------------------------------------------------------------------

def surrogate_derivative(t: torch.Tensor, surrogate: str = "squared_hinge", margin: float = 1.0) -> torch.Tensor:
    """dℓ/dt of a pairwise surrogate at t = s₊ − s₋ (elementwise; the hinge's kink gets ½ as in
    :mod:`~neurips26.ranking.losses`)."""
    m = check_surrogate(surrogate, margin, "mean")
    if surrogate == "squared_hinge":
        return -2 * torch.clamp(m - t, min=0)
    if surrogate == "hinge":
        return -((m - t > 0).to(t.dtype) + 0.5 * (m - t == 0).to(t.dtype))
    if surrogate == "squared":
        return -2 * (m - t)
    if surrogate == "exponential":
        return -m * torch.exp(-m * t)
    return -m * torch.sigmoid(-m * t)


@dataclass(frozen=True)
class UStatDecomposition:
    """Hoeffding components of a two-sample U-statistic (scalar, or the covariance trace of a
    vector one): ``sigma1_pos`` = σ₁₊², ``sigma1_neg`` = σ₁₋², ``sigma2`` = σ₂² (variances, not
    standard deviations), and ``mean`` (the full-population mean, a float or a tensor (P,))."""

    sigma1_pos: float
    sigma1_neg: float
    sigma2: float
    mean: object

    def variance(self, n_pos: int, n_neg: int) -> float:
        """Exact variance (trace) of the U-statistic of n₊, n₋ draws with replacement."""
        n_pos, n_neg = check_int("n_pos", n_pos, 1), check_int("n_neg", n_neg, 1)
        return self.sigma1_pos / n_pos + self.sigma1_neg / n_neg + self.sigma2 / (n_pos * n_neg)

    def degeneracy(self, n_pos: int, n_neg: int) -> float:
        """Share of the second-order part, V₂ / (V₁ + V₂), at batch composition (n₊, n₋); in [0, 1],
        NaN where the minibatch gradient has no variance at all (e.g. every pair past the margin)."""
        n_pos, n_neg = check_int("n_pos", n_pos, 1), check_int("n_neg", n_neg, 1)
        v2 = self.sigma2 / (n_pos * n_neg)
        tot = self.sigma1_pos / n_pos + self.sigma1_neg / n_neg + v2
        return float(v2 / tot) if tot > 0 else float("nan")


def ustat_components(kernel: torch.Tensor) -> UStatDecomposition:
    """Hoeffding components of the two-sample U-statistic whose kernel values over the whole
    (empirical) population are ``kernel`` (n₊, n₋): h(x₊ᵢ, x₋ⱼ), or (n₊, n₋, P) for a vector kernel
    (components are then covariance traces). Exact for batches drawn with replacement."""
    if not isinstance(kernel, torch.Tensor) or not kernel.is_floating_point():
        raise TypeError("kernel must be a floating-point tensor (n_pos, n_neg) or (n_pos, n_neg, P)")
    if kernel.dim() not in (2, 3) or kernel.shape[0] == 0 or kernel.shape[1] == 0:
        raise ValueError(f"kernel must have shape (n_pos, n_neg) or (n_pos, n_neg, P), got {tuple(kernel.shape)}")
    if not torch.isfinite(kernel).all():
        raise ValueError("kernel contains NaN or inf")
    h = kernel if kernel.dim() == 3 else kernel[..., None]
    mean = h.mean((0, 1))
    r = h.mean(1) - mean  # (n₊, P): E[h | x₊] − E h
    c = h.mean(0) - mean  # (n₋, P)
    s1p = float((r * r).sum(-1).mean())
    s1n = float((c * c).sum(-1).mean())
    total = float(((h - mean) ** 2).sum(-1).mean())
    out_mean = float(mean[0]) if kernel.dim() == 2 else mean
    return UStatDecomposition(s1p, s1n, max(total - s1p - s1n, 0.0), out_mean)


def _per_sample_grads(model: torch.nn.Module, X: torch.Tensor, chunk: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Scores (k,) and per-sample gradients (k, P) of a scalar-output model, by torch.func."""
    from torch.func import functional_call, grad, vmap

    params = {k: v.detach() for k, v in model.named_parameters() if v.requires_grad}
    buffers = {k: v.detach() for k, v in model.named_buffers()}

    def score(p, x):
        out = functional_call(model, (p, buffers), (x[None],))
        return out.reshape(()), out.reshape(())

    g_fn = vmap(grad(score, has_aux=True), in_dims=(None, 0), chunk_size=chunk)
    grads, s = g_fn(params, X)
    flat = torch.cat([g.reshape(X.shape[0], -1) for g in grads.values()], 1)
    return s.detach(), flat.detach()


def ustat_decomposition(model: torch.nn.Module, X_pos: torch.Tensor, X_neg: torch.Tensor,
                        surrogate: str = "squared_hinge", margin: float = 1.0, chunk: int | None = 64
                        ) -> UStatDecomposition:
    """Hoeffding decomposition of the minibatch pairwise gradient of ``model`` at its current
    parameters, over the population ``X_pos`` (n₊, ...) × ``X_neg`` (n₋, ...).

    ``model`` maps a batch (k, ...) to scores (k,) or (k, 1) (any module; per-sample gradients via
    ``torch.func``, taken in eval mode: BatchNorm uses its running statistics, dropout is off; the
    model's mode is restored afterwards). The kernel is
    g(x₊, x₋) = ℓ'(f(x₊) − f(x₋)) (∇f(x₊) − ∇f(x₋)) of ``surrogate`` with ``margin``; the n₊ × n₋ × P
    tensor is never formed (cost O(n₊ n₋ + (n₊ + n₋) P) memory, one n₊ × n₋ Gram matrix).
    ``mean`` of the result is the full pairwise gradient (P,) (flattened over parameters)."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    check_surrogate(surrogate, margin, "mean")
    _check_probes(X_pos, X_neg)
    if chunk is not None:
        chunk = check_int("chunk", chunk, 1)
    was_training = model.training
    model.eval()  # per-sample gradients need a functional model: BatchNorm statistics frozen, no dropout
    try:
        a, Jp = _per_sample_grads(model, X_pos, chunk)
        b, Jn = _per_sample_grads(model, X_neg, chunk)
    finally:
        model.train(was_training)
    if not (torch.isfinite(a).all() and torch.isfinite(b).all()):
        raise ValueError("model returned NaN or inf scores")
    n_pos, n_neg = a.numel(), b.numel()
    D = surrogate_derivative(a[:, None] - b[None, :], surrogate, margin)  # (n₊, n₋)
    r, c = D.mean(1), D.mean(0)
    G = (r[:, None] * Jp).mean(0) - (c[:, None] * Jn).mean(0)
    h_pos = r[:, None] * Jp - (D @ Jn) / n_neg  # E[g | x₊ᵢ]
    h_neg = (D.T @ Jp) / n_pos - c[:, None] * Jn  # E[g | x₋ⱼ]
    s1p = float(((h_pos - G) ** 2).sum(1).mean())
    s1n = float(((h_neg - G) ** 2).sum(1).mean())
    sq_p, sq_n = (Jp * Jp).sum(1), (Jn * Jn).sum(1)
    norms = sq_p[:, None] + sq_n[None, :] - 2 * (Jp @ Jn.T)  # ||∇f(x₊ᵢ) − ∇f(x₋ⱼ)||²
    total = float((D * D * norms).mean() - (G * G).sum())
    return UStatDecomposition(s1p, s1n, max(total - s1p - s1n, 0.0), G)


class DegeneracyMonitor:
    """A training callback: every ``every`` calls of :meth:`step` it measures the degeneracy
    index of the pairwise gradient on fixed probes and the fraction of severe pairs, and says
    when pairwise training has stalled in the degenerate regime the paper describes (severe
    errors remain but the second-order part dominates the gradient noise) — the signal to go
    back to cross-entropy, or (read the other way) that a CE warm-up should last longer.

    ``history`` holds one dict per measurement: step, degeneracy, severe (fraction of probe pairs
    with severity > ``severe_threshold``), mean_grad_norm."""

    def __init__(self, model: torch.nn.Module, X_pos: torch.Tensor, X_neg: torch.Tensor, *, n_pos: int, n_neg: int,
                 surrogate: str = "squared_hinge", margin: float = 1.0, every: int = 50,
                 degeneracy_threshold: float = 0.5, severe_threshold: float = 1.0, severe_share: float = 0.05):
        _check_probes(X_pos, X_neg)
        check_surrogate(surrogate, margin, "mean")
        self.model, self.X_pos, self.X_neg = model, X_pos, X_neg
        self.n_pos, self.n_neg = check_int("n_pos", n_pos, 1), check_int("n_neg", n_neg, 1)
        self.surrogate, self.margin = surrogate, margin
        self.every = check_int("every", every, 1)
        self.degeneracy_threshold = check_real("degeneracy_threshold", degeneracy_threshold, low=0.0, high=1.0)
        self.severe_threshold = check_real("severe_threshold", severe_threshold)
        self.severe_share = check_real("severe_share", severe_share, low=0.0, high=1.0)
        self.history: list[dict] = []
        self._calls = 0

    def measure(self) -> dict:
        d = ustat_decomposition(self.model, self.X_pos, self.X_neg, self.surrogate, self.margin)
        with torch.no_grad():
            a = self.model(self.X_pos).reshape(-1)
            b = self.model(self.X_neg).reshape(-1)
        severe = float(((b[None, :] - a[:, None]) > self.severe_threshold).double().mean())
        rec = {"step": self._calls, "degeneracy": d.degeneracy(self.n_pos, self.n_neg), "severe": severe,
               "mean_grad_norm": float(torch.linalg.vector_norm(d.mean))}
        self.history.append(rec)
        return rec

    def step(self) -> dict | None:
        """Call once per training step; returns the new measurement when one was taken."""
        self._calls += 1
        return self.measure() if self._calls % self.every == 0 else None

    @property
    def stalled(self) -> bool:
        """True when the last measurement shows severe errors remaining (share > ``severe_share``)
        while the degeneracy index is above ``degeneracy_threshold``."""
        if not self.history:
            return False
        last = self.history[-1]
        return bool(last["degeneracy"] > self.degeneracy_threshold and last["severe"] > self.severe_share)


