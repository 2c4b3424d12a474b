"""Where neurips26 keeps what it builds or trains once and reuses (models, policies, kernels)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_root"]


def cache_root() -> Path:
    """``$NEURIPS26_CACHE`` (default ``~/.cache/neurips26``)."""
    return Path(os.environ.get("NEURIPS26_CACHE", Path.home() / ".cache" / "neurips26"))
