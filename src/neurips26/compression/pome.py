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
import math
import numbers
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


def _positive_real(name: str, value: object, accepted: str) -> float:
    """``value`` as a float, which must be finite and > 0 (numpy numbers are taken as Python
    ones; bools and strings are refused)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be {accepted}, got {value!r} of type {type(value).__name__}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be {accepted}, got {value!r}: a non-finite {name} makes every edited "
                         "weight NaN or Inf")
    if not v > 0.0:
        raise ValueError(f"{name} must be {accepted}, got {value!r}: a {name} <= 0 discards or flips the "
                         "fine-tuning delta")
    return v


def _check_rank(rank: object) -> int | None:
    if rank is None:
        return None
    if isinstance(rank, bool) or not isinstance(rank, numbers.Integral):
        raise TypeError(f"rank must be a positive int or None, got {rank!r} of type {type(rank).__name__}")
    if rank < 1:
        raise ValueError(f"rank must be a positive int, got {rank!r}")
    return int(rank)


def _check_rank_ratio(rank_ratio: object) -> float | None:
    if rank_ratio is None:
        return None
    if isinstance(rank_ratio, bool) or not isinstance(rank_ratio, numbers.Real):
        raise TypeError(f"rank_ratio must be a float in (0, 1] or None, got {rank_ratio!r} of type "
                        f"{type(rank_ratio).__name__}")
    if not 0.0 < float(rank_ratio) <= 1.0:
        raise ValueError(f"rank_ratio must be in (0, 1], got {rank_ratio!r}")
    return float(rank_ratio)


def check_pome_options(options: Mapping[str, object]) -> dict:
    """Validate POME options (a :class:`PomeOptions` mapping; absent keys take
    :func:`pome_delta`'s defaults) before any work: a TypeError for an unknown name or a
    value of the wrong type, a ValueError for a bad value. ``scale`` (when a number) and
    ``gain`` must be finite and > 0, ``rank`` a positive int, ``rank_ratio`` in (0, 1];
    numpy numbers count as Python numbers. Returns the given options as a dict, numbers
    as Python ``int`` / ``float``."""
    if not isinstance(options, Mapping):
        raise TypeError(f"options must be a mapping of POME option names to values, got {type(options).__name__}")
    unknown = sorted(set(options) - set(PomeOptions.__annotations__), key=repr)
    if unknown:
        raise TypeError(f"unknown POME option(s) {unknown}; accepted: {list(PomeOptions.__annotations__)}")
    out = dict(options)
    scale = options.get("scale", "fro")
    if isinstance(scale, str):
        if scale not in ("fro", "spectral"):
            raise ValueError(f"scale must be 'fro', 'spectral' or a finite float > 0, got {scale!r}")
    else:
        scale = _positive_real("scale", scale, "'fro', 'spectral' or a finite float > 0")
    gain = _positive_real("gain", options.get("gain", 1.0), "a finite float > 0")
    svd_method = options.get("svd_method", "auto")
    if svd_method not in ("auto", "full", "randomized"):
        raise ValueError(f"svd_method must be 'auto', 'full' or 'randomized', got {svd_method!r}")
    rank = _check_rank(options.get("rank"))
    rank_ratio = _check_rank_ratio(options.get("rank_ratio", 0.5))
    if rank is None and rank_ratio is None:
        raise ValueError("give rank or rank_ratio")
    for key, value in (("scale", scale), ("gain", gain), ("rank", rank), ("rank_ratio", rank_ratio)):
        if key in out:
            out[key] = value
    return out


def resolve_rank(shape: Sequence[int], rank: int | None, rank_ratio: float | None) -> int:
    """The kept rank k for a (..., m, n) matrix: ``rank`` if given, else
    ``max(1, round(rank_ratio · min(m, n)))``, capped at min(m, n) (so 0 for an empty
    matrix)."""
    if len(shape) < 2:
        raise ValueError(f"shape must be that of a matrix (..., m, n), got {tuple(shape)}")
    r = min(shape[-2], shape[-1])
    rank, rank_ratio = _check_rank(rank), _check_rank_ratio(rank_ratio)
    if rank is not None:
        return min(rank, r)
    if rank_ratio is None:
        raise ValueError("give rank or rank_ratio")
    return min(r, max(1, int(round(rank_ratio * r))))


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
            a float: α itself (finite and > 0).
        gain: multiplies α (the knob a user tunes on validation data); finite and > 0.
        svd_method: passed to :func:`neurips26.linalg.truncated_svd`.

    Directions whose singular value is numerically zero (≤ max(m, n)·eps·σ₁) are
    never inflated to α: a delta of rank r < k gives ΔW' of rank r, and a zero delta
    gives zero. An empty delta (a zero dimension) gives an empty ΔW'.

    Raises:
        TypeError: ``delta`` is not a floating-point tensor, or an option has the wrong
            type; ValueError: ``delta`` is not a matrix or holds NaN/Inf, or an option is
            out of range (``scale`` as a number and ``gain`` must be finite and > 0).

    Returns:
        ΔW' with the shape and dtype of ``delta``.
    """
    if not isinstance(delta, torch.Tensor) or not delta.is_floating_point():
        raise TypeError(f"delta must be a floating-point torch.Tensor, got "
                        f"{delta.dtype if isinstance(delta, torch.Tensor) else type(delta).__name__}")
    if delta.ndim < 2:
        raise ValueError(f"delta must be a matrix (..., m, n), got shape {tuple(delta.shape)}")
    if not torch.isfinite(delta).all():
        raise ValueError("delta contains NaN or Inf; the two checkpoints must be finite")
    opts = check_pome_options(dict(rank=rank, rank_ratio=rank_ratio, scale=scale, gain=gain, svd_method=svd_method))
    rank, rank_ratio, scale, gain = opts["rank"], opts["rank_ratio"], opts["scale"], opts["gain"]
    if delta.numel() == 0:
        return torch.zeros_like(delta)
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
        if scale > torch.finfo(work.dtype).max:
            raise ValueError(f"scale = {scale!r} overflows {work.dtype}; the edited delta would be Inf")
        alpha = torch.full_like(s[..., :1], float(scale))
    weights = float(gain) * alpha * keep  # (..., k)
    out = ((u * weights.unsqueeze(-2)) @ vh).to(delta.dtype)
    if not torch.isfinite(out).all():
        raise ValueError(f"the edited delta overflows {delta.dtype}: scale = {scale!r} times gain = {gain!r} is "
                         "too large for it")
    return out


def match_targets(targets: Targets) -> Callable[[str], bool]:
    """A predicate over tensor names from a glob, a compiled regex (``re.search``), a
    list mixing both, or a callable."""
    if callable(targets) and not isinstance(targets, re.Pattern):
        return targets
    if isinstance(targets, (str, re.Pattern)):
        targets = (targets,)
    try:
        patterns = tuple(targets)
    except TypeError:
        patterns = ()
    if not patterns or not all(isinstance(p, (str, re.Pattern)) for p in patterns):
        raise TypeError(f"targets must be a glob, a compiled regex, a non-empty list of them, or a callable, "
                        f"got {targets!r}")
    globs = [p for p in patterns if isinstance(p, str)]
    regexes = [p for p in patterns if isinstance(p, re.Pattern)]
    return lambda name: any(fnmatch.fnmatchcase(name, g) for g in globs) or any(r.search(name) for r in regexes)


@dataclass
class PomeReport:
    """What :func:`apply_pome` did: which tensors it edited (with their kept rank)
    and which matched the targets but were skipped (not a matrix). ``pome_checkpoint``
    also lists in ``stale_removed`` the temporaries of an earlier, killed run of the same
    output that it removed."""

    edited: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    stale_removed: list[str] = field(default_factory=list)


def _check_pair(name: str, pre: torch.Tensor, ft: torch.Tensor) -> None:
    for which, t in (("pretrained", pre), ("finetuned", ft)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"tensor {name!r}: {which}[{name!r}] must be a torch.Tensor, got {type(t).__name__}")
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
    pre: torch.Tensor, ft: torch.Tensor, name: str | None = None, **pome_kwargs
) -> tuple[torch.Tensor, int]:
    """POME on one weight: ``W_pre + pome_delta(W_ft − W_pre)`` in ``ft.dtype``, and
    the kept rank. Tensors of more than two dimensions (convolutions) are edited as
    their (out, in·kh·kw) matrix. ``name`` is the tensor's, for error messages."""
    shape = ft.shape
    work_dtype = torch.float64 if ft.dtype == torch.float64 else torch.float32
    flat = (shape[0], math.prod(shape[1:]))
    p = pre.to(work_dtype).reshape(flat)
    d = ft.to(work_dtype).reshape(flat) - p
    if not torch.isfinite(d).all():
        where = ("the pretrained checkpoint" if not torch.isfinite(pre).all() else
                 "the fine-tuned checkpoint" if not torch.isfinite(ft).all() else
                 f"their difference (it overflows {work_dtype})")
        raise ValueError(f"tensor {name!r}: NaN or Inf in {where}; POME needs finite weights")
    k = resolve_rank(d.shape, pome_kwargs.get("rank"), pome_kwargs.get("rank_ratio", 0.5))
    out = (p + pome_delta(d, **pome_kwargs)).reshape(shape).to(ft.dtype)
    if not torch.isfinite(out).all():
        raise ValueError(f"tensor {name!r}: the edited weight overflows {ft.dtype} (scale or gain too large for "
                         "its range)")
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

    Raises a TypeError / ValueError naming the option or the tensor for bad options
    (see :func:`pome_delta`), inputs that are not mappings of tensors, empty or
    mismatched state dicts, and NaN / Inf in an edited tensor.

    Returns:
        The edited state dict, or ``(state_dict, PomeReport)`` if ``return_report``.
    """
    kwargs = check_pome_options(dict(rank=rank, rank_ratio=rank_ratio, scale=scale, gain=gain, svd_method=svd_method))
    for which, sd in (("pretrained", pretrained), ("finetuned", finetuned)):
        if not isinstance(sd, Mapping):
            raise TypeError(f"{which} must be a mapping of tensor names to tensors (a state dict), "
                            f"got {type(sd).__name__}")
    if not finetuned:
        raise ValueError("finetuned is empty: the state dicts hold no tensor to edit")
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
            out[name], report.edited[name] = edit_tensor(pre, ft, name, **kwargs)
    if not report.edited:
        raise ValueError(
            "no tensor matched the targets; first names in the checkpoint: "
            f"{list(finetuned)[:5]}"
        )
    return (out, report) if return_report else out
