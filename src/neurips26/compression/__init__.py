"""Model compression and post-hoc editing: POME (and, later, MXFP4 / MoE quantization)."""

from .pome import DEFAULT_TARGETS, PomeReport, apply_pome, match_targets, pome_delta, resolve_rank
from .pome_io import pome_checkpoint

__all__ = [
    "DEFAULT_TARGETS",
    "PomeReport",
    "apply_pome",
    "match_targets",
    "pome_checkpoint",
    "pome_delta",
    "resolve_rank",
]
