"""Model compression and post-hoc editing: POME, and MXFP4 quantization (exact to the OCP MX spec)."""

from .pome import DEFAULT_TARGETS, PomeReport, apply_pome, match_targets, pome_delta, resolve_rank
from .mxfp4 import MXFP4Tensor, fake_quantize_mxfp4, quantize_mxfp4
from .pome_io import pome_checkpoint
from .w4a8 import W4A8Experts, quantize_moe_w4a8

__all__ = [
    "DEFAULT_TARGETS",
    "MXFP4Tensor",
    "fake_quantize_mxfp4",
    "quantize_mxfp4",
    "PomeReport",
    "apply_pome",
    "match_targets",
    "pome_checkpoint",
    "pome_delta",
    "resolve_rank",
    "W4A8Experts",
    "quantize_moe_w4a8",
]
