"""The GP surrogate every BO loop of the package builds, and its warm start."""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["fit_gp", "load_hyperparameters"]


def load_hyperparameters(model, state: dict | None) -> None:
    """Warm-start ``model`` from a previous model's ``state_dict``: copy every hyperparameter
    whose name and shape match. Input / outcome transform buffers are skipped: they belong
    to the new data (a Standardize's mean and sd, say), not to the kernel."""
    if state is None:
        return
    own = model.state_dict()
    model.load_state_dict({k: v for k, v in state.items() if k in own and own[k].shape == v.shape
                           and "transform" not in k}, strict=False)


def fit_gp(X: Tensor, Y: Tensor, bounds: Tensor | None = None, noise: float | None = None, state: dict | None = None,
           fit: bool = True, *, normalize: bool = True, standardize: bool = True, covar_module=None,
           optimizer_kwargs: dict | None = None, strict: bool = False):
    """A BoTorch ``SingleTaskGP`` on inputs ``X`` (n, d) and outcomes ``Y`` (n,) or (n, 1),
    in eval mode, its hyperparameters by marginal likelihood (``fit_gpytorch_mll``).

    Inputs are normalized to the box ``bounds`` (2, d), or to the data's own range when
    ``bounds`` is None (BoTorch's ``Normalize``); ``normalize=False`` leaves them as they are.
    Outcomes are standardized (``Standardize``) unless ``standardize=False``. ``noise`` fixes
    the observation variance (original scale) instead of learning it. ``covar_module`` replaces
    BoTorch's default kernel. The model is warm-started from ``state`` (a previous model's
    ``state_dict``, see ``load_hyperparameters``); ``fit=False`` keeps those hyperparameters
    (new data, no refit). ``optimizer_kwargs`` go to the fit's optimizer (``{"options":
    {"maxiter": 200}}``, say). A fit that fails keeps the warm-started hyperparameters, unless
    ``strict``: then its error propagates."""
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP
    from botorch.models.transforms import Normalize, Standardize
    from gpytorch.mlls import ExactMarginalLogLikelihood

    if bounds is not None and not normalize:
        raise ValueError("bounds normalize the inputs: pass bounds=None with normalize=False")
    Y = Y.reshape(-1, 1)
    kw = {"train_Yvar": torch.full_like(Y, noise)} if noise is not None else {}
    model = SingleTaskGP(X, Y, covar_module=covar_module,
                         input_transform=Normalize(X.shape[-1], bounds=bounds) if normalize else None,
                         outcome_transform=Standardize(1) if standardize else None, **kw)
    load_hyperparameters(model, state)
    if fit:
        mll = ExactMarginalLogLikelihood(model.likelihood, model)
        try:
            fit_gpytorch_mll(mll, optimizer_kwargs=optimizer_kwargs)
        except Exception:  # noqa: BLE001 - a failed fit keeps the (warm-started) hyperparameters
            if strict:
                raise
    model.eval()
    return model
