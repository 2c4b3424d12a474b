"""Argument checks shared by the servers, the simulated driver and the runners."""

from __future__ import annotations

__all__ = ["check_int"]


def check_int(name: str, value, minimum: int) -> None:
    """Refuse ``value`` unless it is an int >= ``minimum`` (ValueError naming ``name``)."""
    if not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
