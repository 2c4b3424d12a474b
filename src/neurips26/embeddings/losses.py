"""InfoNCE on cosine similarities: the scale-invariant contrastive loss whose dynamics
:mod:`neurips26.embeddings.dynamics` describes."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .._checks import check_real

__all__ = ["info_nce"]


def info_nce(anchors: torch.Tensor, keys: torch.Tensor, targets: torch.Tensor, temperature: float = 0.1) -> torch.Tensor:
    """Mean cross-entropy of ``cos(anchor_b, keys) / temperature`` against ``targets``.

    anchors: (B, d); keys: (K, d) (every key a candidate for every anchor: in-batch negatives
    when keys are the batch's positives, a full softmax when they are all items); targets: (B,)
    int64 indices into keys. Invariant to the scale of every anchor and key row, so its
    gradient with respect to a row is orthogonal to that row.
    """
    if not (isinstance(anchors, torch.Tensor) and isinstance(keys, torch.Tensor) and isinstance(targets, torch.Tensor)):
        raise TypeError("anchors, keys and targets must be torch tensors")
    if anchors.dim() != 2 or keys.dim() != 2 or anchors.shape[1] != keys.shape[1]:
        raise ValueError(f"anchors (B, d) and keys (K, d) must share d, got {tuple(anchors.shape)} and {tuple(keys.shape)}")
    if anchors.shape[0] == 0 or keys.shape[0] == 0:
        raise ValueError("anchors and keys must be non-empty")
    if targets.shape != (anchors.shape[0],) or targets.dtype != torch.int64:
        raise ValueError(f"targets must be int64 of shape ({anchors.shape[0]},), got {targets.dtype} {tuple(targets.shape)}")
    temperature = check_real("temperature", temperature, low=0.0, low_open=True)
    logits = F.normalize(anchors, dim=-1) @ F.normalize(keys, dim=-1).T / temperature
    return F.cross_entropy(logits, targets)
