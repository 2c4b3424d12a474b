"""POME: Post-Optimization Model Edit (Liu et al., "POME: Post Optimization Model
Edit via Muon-style Projection").

Given a pretrained and a fine-tuned checkpoint, POME edits each selected weight
matrix through its fine-tuning delta ``ΔW = W_ft − W_pre``:

    ΔW = U S Vᵀ (SVD),   ΔW' = α · U_k V_kᵀ,   W' = W_pre + ΔW'

The k leading singular directions are kept and *equalized* (all get the same
singular value α, as Muon's orthogonalized update does), and the rest, which the
paper reads as noise, are pruned. No data and no training are involved.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from typing import Callable, Literal, Mapping, Sequence, TypedDict, Union

import torch

from ..linalg import truncated_svd

__all__ = [
    "DEFAULT_TARGETS",
    "Targets",
    "resolve_rank",
    "PomeOptions",
    "check_pome_options",
    "pome_delta",
    "match_targets",
    "apply_pome",
    "PomeReport",
]

# FFN up-projections under the names of the common architectures: Llama/Qwen/Mistral
# (up_proj), GPT-2 (c_fc), OPT/BART/Phi (fc1), GPT-NeoX/Falcon (dense_h_to_4h),
# Mixtral experts (w3). The paper edits the up-projections by default.
DEFAULT_TARGETS: tuple[str, ...] = (
    "*up_proj.weight",
    "*mlp.c_fc.weight",
    "*fc1.weight",
    "*dense_h_to_4h.weight",
    "*experts.*.w3.weight",
)

Targets = Union[str, "re.Pattern[str]", Sequence[Union[str, "re.Pattern[str]"]], Callable[[str], bool]]
Scale = Union[Literal["fro", "spectral"], float]


class PomeOptions(TypedDict, total=False):
    """The options of a POME edit, each documented at :func:`pome_delta` (defaults there):
    what :func:`apply_pome` takes by name and ``pome_checkpoint`` forwards."""

    rank: int | None
    rank_ratio: float | None
    scale: Scale
    gain: float
    svd_method: Literal["auto", "full", "randomized"]


def check_pome_options(options: Mapping[str, object]) -> dict:
    """Validate POME options (a :class:`PomeOptions` mapping; absent keys take
    :func:`pome_delta`'s defaults) before any work: a TypeError for an unknown name, a
    ValueError for a bad value. Returns them as a dict."""
    unknown = sorted(set(options) - set(PomeOptions.__annotations__))
    if unknown:
        raise TypeError(f"unknown POME option(s) {unknown}; accepted: {list(PomeOptions.__annotations__)}")
    scale, gain = options.get("scale", "fro"), options.get("gain", 1.0)
    if not isinstance(scale, (int, float)) and scale not in ("fro", "spectral"):
        raise ValueError(f"scale must be 'fro', 'spectral' or a float, got {scale!r}")
    if isinstance(scale, (int, float)) and not float(scale) >= 0.0:
        raise ValueError(f"a float scale must be >= 0, got {scale!r}")
    if not float(gain) >= 0.0:
        raise ValueError(f"gain must be >= 0, got {gain!r}")
    svd_method = options.get("svd_method", "auto")
    if svd_method not in ("auto", "full", "randomized"):
        raise ValueError(f"svd_method must be 'auto', 'full' or 'randomized', got {svd_method!r}")
    resolve_rank((1, 1), options.get("rank"), options.get("rank_ratio", 0.5))  # the same errors for any shape
    return dict(options)


def resolve_rank(shape: Sequence[int], rank: int | None, rank_ratio: float | None) -> int:
    """The kept rank k for a (..., m, n) matrix: ``rank`` if given, else
    ``max(1, round(rank_ratio · min(m, n)))``, capped at min(m, n)."""
    r = min(shape[-2], shape[-1])
    if rank is not None:
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
            raise ValueError(f"rank must be a positive int, got {rank!r}")
        return min(rank, r)
    if rank_ratio is None:
        raise ValueError("give rank or rank_ratio")
    if not 0.0 < float(rank_ratio) <= 1.0:
        raise ValueError(f"rank_ratio must be in (0, 1], got {rank_ratio!r}")
    return min(r, max(1, int(round(float(rank_ratio) * r))))


def pome_delta(
    delta: torch.Tensor,
    rank: int | None = None,
    rank_ratio: float | None = 0.5,
    scale: Scale = "fro",
    gain: float = 1.0,
    svd_method: Literal["auto", "full", "randomized"] = "auto",
) -> torch.Tensor:
    """The POME projection ``ΔW' = α · U_k V_kᵀ`` of a fine-tuning delta.

    Args:
        delta: ΔW of shape (m, n), or (..., m, n) for stacked matrices (each edited
            on its own). Computed in float32 at least; returned in ``delta.dtype``.
        rank: kept rank k; overrides ``rank_ratio``.
        rank_ratio: k = round(rank_ratio · min(m, n)) (default 0.5).
        scale: how the common singular value α is set, per matrix:
            ``"fro"``: α = ‖ΔW_k‖_F / √k, the RMS of the top-k singular values, so
            that ‖ΔW'‖_F = ‖ΔW_k‖_F (the energy kept by truncation is preserved);
            ``"spectral"``: α = σ₁, so that ‖ΔW'‖₂ = ‖ΔW‖₂;
            a float: α itself.
        gain: multiplies α (the knob a user tunes on validation data).
        svd_method: passed to :func:`neurips26.linalg.truncated_svd`.

    Directions whose singular value is numerically zero (≤ max(m, n)·eps·σ₁) are
    never inflated to α: a delta of rank r < k gives ΔW' of rank r, and a zero delta
    gives zero.

    Returns:
        ΔW' with the shape and dtype of ``delta``.
    """
    if not isinstance(delta, torch.Tensor) or not delta.is_floating_point():
        raise TypeError("delta must be a floating-point torch.Tensor")
    if delta.ndim < 2:
        raise ValueError(f"delta must be a matrix (..., m, n), got shape {tuple(delta.shape)}")
    if not torch.isfinite(delta).all():
        raise ValueError("delta contains NaN or Inf; the two checkpoints must be finite")
    check_pome_options(dict(rank=rank, rank_ratio=rank_ratio, scale=scale, gain=gain, svd_method=svd_method))
    k = resolve_rank(delta.shape, rank, rank_ratio)
    work = delta if delta.dtype in (torch.float32, torch.float64) else delta.float()
    u, s, vh = truncated_svd(work, k, method=svd_method)
    tol = max(work.shape[-2:]) * torch.finfo(work.dtype).eps * s[..., :1]
    keep = (s > tol).to(work.dtype)
    if scale == "fro":
        n_kept = keep.sum(-1, keepdim=True).clamp_min(1.0)
        alpha = torch.sqrt((s.square() * keep).sum(-1, keepdim=True) / n_kept)
    elif scale == "spectral":
        alpha = s[..., :1]
    else:
        alpha = torch.full_like(s[..., :1], float(scale))
    weights = float(gain) * alpha * keep  # (..., k)
    return ((u * weights.unsqueeze(-2)) @ vh).to(delta.dtype)


def match_targets(targets: Targets) -> Callable[[str], bool]:
    """A predicate over tensor names from a glob, a compiled regex (``re.search``), a
    list mixing both, or a callable."""
    if callable(targets) and not isinstance(targets, re.Pattern):
        return targets
    if isinstance(targets, (str, re.Pattern)):
        targets = (targets,)
    patterns = tuple(targets)
    if not patterns or not all(isinstance(p, (str, re.Pattern)) for p in patterns):
        raise TypeError("targets must be a glob, a compiled regex, a non-empty list of them, or a callable")
    globs = [p for p in patterns if isinstance(p, str)]
    regexes = [p for p in patterns if isinstance(p, re.Pattern)]
    return lambda name: any(fnmatch.fnmatchcase(name, g) for g in globs) or any(r.search(name) for r in regexes)


@dataclass
class PomeReport:
    """What :func:`apply_pome` did: which tensors it edited (with their kept rank)
    and which matched the targets but were skipped (not a matrix)."""

    edited: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


def _check_pair(name: str, pre: torch.Tensor, ft: torch.Tensor) -> None:
    if pre.shape != ft.shape:
        raise ValueError(
            f"tensor {name!r}: shapes differ between checkpoints: "
            f"pretrained {tuple(pre.shape)} vs fine-tuned {tuple(ft.shape)}"
        )
    if pre.dtype != ft.dtype:
        raise ValueError(
            f"tensor {name!r}: dtypes differ between checkpoints: pretrained {pre.dtype} vs fine-tuned {ft.dtype}"
        )


def check_same_keys(pre_keys, ft_keys) -> None:
    """Raise a ValueError naming the keys that only one checkpoint has."""
    pre_keys, ft_keys = set(pre_keys), set(ft_keys)
    if pre_keys != ft_keys:
        only_pre = sorted(pre_keys - ft_keys)
        only_ft = sorted(ft_keys - pre_keys)
        raise ValueError(
            "the checkpoints hold different tensors: "
            f"only in pretrained: {only_pre[:5]}{' ...' if len(only_pre) > 5 else ''}; "
            f"only in fine-tuned: {only_ft[:5]}{' ...' if len(only_ft) > 5 else ''}"
        )


def edit_tensor(
    pre: torch.Tensor, ft: torch.Tensor, **pome_kwargs
) -> tuple[torch.Tensor, int]:
    """POME on one weight: ``W_pre + pome_delta(W_ft − W_pre)`` in ``ft.dtype``, and
    the kept rank. Tensors of more than two dimensions (convolutions) are edited as
    their (out, in·kh·kw) matrix."""
    shape = ft.shape
    work_dtype = torch.float64 if ft.dtype == torch.float64 else torch.float32
    p = pre.to(work_dtype).reshape(shape[0], -1)
    d = ft.to(work_dtype).reshape(shape[0], -1) - p
    k = resolve_rank(d.shape, pome_kwargs.get("rank"), pome_kwargs.get("rank_ratio", 0.5))
    out = (p + pome_delta(d, **pome_kwargs)).reshape(shape).to(ft.dtype)
    return out, k


def apply_pome(
    pretrained: Mapping[str, torch.Tensor],
    finetuned: Mapping[str, torch.Tensor],
    targets: Targets = DEFAULT_TARGETS,
    *,
    rank: int | None = None,
    rank_ratio: float | None = 0.5,
    scale: Scale = "fro",
    gain: float = 1.0,
    svd_method: Literal["auto", "full", "randomized"] = "auto",
    return_report: bool = False,
):
    """POME over two state dicts.

    Every tensor whose name matches ``targets`` (default: the FFN up-projections,
    see ``DEFAULT_TARGETS``) and has at least two dimensions is replaced by
    ``W_pre + pome_delta(W_ft − W_pre)``; every other tensor of ``finetuned`` is
    returned as the same object, untouched. Keys, shapes and dtypes must agree.

    Returns:
        The edited state dict, or ``(state_dict, PomeReport)`` if ``return_report``.
    """
    kwargs = check_pome_options(dict(rank=rank, rank_ratio=rank_ratio, scale=scale, gain=gain, svd_method=svd_method))
    check_same_keys(pretrained.keys(), finetuned.keys())
    selected = match_targets(targets)
    out: dict[str, torch.Tensor] = {}
    report = PomeReport()
    for name, ft in finetuned.items():
        pre = pretrained[name]
        _check_pair(name, pre, ft)
        if not selected(name):
            out[name] = ft
        elif ft.ndim < 2 or not ft.is_floating_point():
            report.skipped[name] = "not a floating-point matrix"
            out[name] = ft
        else:
            out[name], report.edited[name] = edit_tensor(pre, ft, **kwargs)
    if not report.edited:
        raise ValueError(
            "no tensor matched the targets; first names in the checkpoint: "
            f"{list(finetuned)[:5]}"
        )
    return (out, report) if return_report else out
