"""The GP surrogate every BO loop of the package builds, and its warm start."""

from __future__ import annotations

import warnings

import torch
from torch import Tensor

from ._checks import check_box, check_finite, check_real, check_tensor

__all__ = ["fit_gp", "load_hyperparameters", "GPFitWarning"]


class GPFitWarning(RuntimeWarning):
    """``fit_gp``: the marginal-likelihood fit did not converge (every attempt of BoTorch's
    ``fit_gpytorch_mll`` ended in an optimizer warning or a numerical failure), so the model
    keeps its warm-started (or initial) hyperparameters."""


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
    {"maxiter": 200}}``, say).

    A fit that does not converge (BoTorch's ``ModelFittingError``: every attempt ended in an
    optimizer warning or a numerical failure such as a non-PSD covariance) keeps the
    warm-started hyperparameters and says so with a ``GPFitWarning``, unless ``strict``: then
    that error propagates. Any other error of the fit (a kernel that does not fit the inputs,
    say) always propagates, with a note saying that it came from ``fit_gp``.

    Raises ValueError / TypeError up front for inputs that are not (n, d) / (n,) finite
    floating-point tensors with matching n, ``bounds`` that are not a finite (2, d) box with
    lower < upper, a ``noise`` that is not a finite number >= 0, or a ``covar_module`` whose
    ``ard_num_dims`` is not d."""
    from botorch.exceptions.errors import ModelFittingError
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP
    from botorch.models.transforms import Normalize, Standardize
    from gpytorch.mlls import ExactMarginalLogLikelihood

    if bounds is not None and not normalize:
        raise ValueError("bounds normalize the inputs: pass bounds=None with normalize=False")
    _check_data(X, Y, bounds, noise, covar_module)
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
        except ModelFittingError as exc:  # did not converge: keep the (warm-started) hyperparameters
            if strict:
                raise
            kept = "warm-started" if state is not None else "initial"
            warnings.warn(GPFitWarning(f"fit_gp: the marginal-likelihood fit did not converge ({exc}); the model keeps "
                                       f"its {kept} hyperparameters"), stacklevel=2)
        except Exception as exc:
            exc.add_note(f"fit_gp: raised while fitting the GP's hyperparameters by marginal likelihood "
                         f"(X {tuple(X.shape)}, covar_module {type(model.covar_module).__name__})")
            raise
    model.eval()
    return model


def _check_data(X, Y, bounds, noise, covar_module) -> None:
    check_tensor("X", X, "(n, d)")
    if X.ndim != 2:
        raise ValueError(f"X must be (n, d), got shape {tuple(X.shape)}")
    n, d = X.shape
    if n == 0:
        raise ValueError(f"X is empty ({tuple(X.shape)}): a GP needs n >= 1 observations")
    check_tensor("Y", Y, f"({n},)")
    if Y.shape not in ((n,), (n, 1)):
        raise ValueError(f"Y must be ({n},) or ({n}, 1), one outcome per row of X (n = {n}), "
                         f"got shape {tuple(Y.shape)}")
    if X.dtype != Y.dtype:
        raise TypeError(f"X and Y must share a dtype, got X {X.dtype} and Y {Y.dtype}")
    check_finite("X", X)
    check_finite("Y", Y)
    if bounds is not None:
        check_box("bounds", check_tensor("bounds", bounds, f"(2, {d})"), d)
    if noise is not None:
        check_real("noise", noise, low=0.0)
    if covar_module is not None:
        _check_kernel_width(covar_module, d)


def _check_kernel_width(covar_module, d: int) -> None:
    """A kernel with ``ard_num_dims`` must see d input columns. Only checked when no kernel in
    ``covar_module`` selects columns (``active_dims``); then every kernel sees all d."""
    from gpytorch.kernels import Kernel

    kernels = [m for m in covar_module.modules() if isinstance(m, Kernel)]
    if any(k.active_dims is not None for k in kernels):
        return
    for k in kernels:
        ard = getattr(k, "ard_num_dims", None)
        if ard is not None and ard != d:
            raise ValueError(f"covar_module: {type(k).__name__} has ard_num_dims={ard} but X has d={d} columns")
