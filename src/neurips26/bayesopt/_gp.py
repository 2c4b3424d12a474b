"""Helpers shared by the BO loops that refit a GP every step."""

from __future__ import annotations


def load_hyperparameters(model, state: dict | None) -> None:
    """Warm-start ``model`` from a previous model's ``state_dict``: copy every hyperparameter
    whose name and shape match. Input / outcome transform buffers are skipped: they belong
    to the new data (a Standardize's mean and sd, say), not to the kernel."""
    if state is None:
        return
    own = model.state_dict()
    model.load_state_dict({k: v for k, v in state.items() if k in own and own[k].shape == v.shape
                           and "transform" not in k}, strict=False)
