"""A minibatch training loop for scoring models: an optional cross-entropy warm-up, then a
pairwise AUC surrogate (or any loss) on class-balanced batches from :class:`DualSampler`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

from .._checks import check_int, check_real
from .losses import SURROGATES, pairwise_auc_loss
from .sampler import DualSampler

__all__ = ["TrainResult", "train_scorer", "make_loss"]

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def make_loss(loss: str | LossFn, margin: float = 1.0) -> LossFn:
    """``"ce"`` (binary cross-entropy on the logits), a surrogate name of :data:`SURROGATES`
    (exact pairwise loss of the batch), or a callable ``(scores (b,), targets (b,) float) -> loss``."""
    if callable(loss):
        return loss
    if loss == "ce":
        return lambda s, y: torch.nn.functional.binary_cross_entropy_with_logits(s, y)
    if loss in SURROGATES:
        return lambda s, y: pairwise_auc_loss(s, y, loss, margin, check=False)
    raise ValueError(f"loss must be 'ce', one of {SURROGATES} or a callable, got {loss!r}")


@dataclass
class TrainResult:
    """``steps`` taken, ``losses`` (one mean per epoch) and ``phases`` (the loss used per epoch)."""

    steps: int = 0
    losses: list = field(default_factory=list)
    phases: list = field(default_factory=list)


def train_scorer(model: torch.nn.Module, X: torch.Tensor, y: torch.Tensor, *, loss: str | LossFn = "squared_hinge",
                 margin: float = 1.0, epochs: int = 10, warmup_epochs: int = 0, lr: float = 1e-3,
                 batch_size: int = 64, pos_fraction: float = 0.25,
                 optimizer: str | Callable[[list], torch.optim.Optimizer] = "adam", weight_decay: float = 0.0,
                 seed: int = 0, on_step: Callable[[int, str], None] | None = None,
                 on_epoch: Callable[[int, str], None] | None = None) -> TrainResult:
    """Train ``model`` (inputs (b, ...) -> scores (b,) or (b, 1)) in place on ``X`` (n, ...) and
    labels ``y`` (n,) in {0, 1}: ``warmup_epochs`` of cross-entropy, then ``epochs`` of ``loss``
    (see :func:`make_loss`). Batches of ``batch_size`` hold ``pos_fraction`` positives
    (:class:`DualSampler`, one epoch = every negative once). ``optimizer`` is ``"adam"``, ``"sgd"``
    (momentum 0.9) or a factory ``params -> Optimizer``; one optimizer serves both phases.
    ``on_step(step, phase)`` runs after every update (a monitor), ``on_epoch(epoch, phase)`` after
    every epoch. Deterministic for a given ``seed`` and torch's global state of the model."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    X = torch.as_tensor(X)
    y = torch.as_tensor(y).reshape(-1)
    if X.shape[0] != y.shape[0] or X.shape[0] == 0:
        raise ValueError(f"X and y must hold the same positive number of rows, got {X.shape[0]} and {y.shape[0]}")
    if X.is_floating_point() and not torch.isfinite(X).all():
        raise ValueError("X contains NaN or inf")
    epochs = check_int("epochs", epochs, 0)
    warmup_epochs = check_int("warmup_epochs", warmup_epochs, 0)
    lr = check_real("lr", lr, low=0.0, low_open=True)
    weight_decay = check_real("weight_decay", weight_decay, low=0.0)
    seed = check_int("seed", seed, 0)
    main_loss = make_loss(loss, margin)
    ce = make_loss("ce")
    sampler = DualSampler(y, batch_size, pos_fraction, seed=seed)  # checks labels, batch_size, pos_fraction
    params = [p for p in model.parameters() if p.requires_grad]
    if optimizer == "adam":
        opt = torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    elif optimizer == "sgd":
        opt = torch.optim.SGD(params, lr=lr, momentum=0.9, weight_decay=weight_decay)
    elif callable(optimizer):
        opt = optimizer(params)
    else:
        raise ValueError(f"optimizer must be 'adam', 'sgd' or a callable params -> Optimizer, got {optimizer!r}")
    yf = (y == 1).to(torch.get_default_dtype() if not X.is_floating_point() else X.dtype)
    result = TrainResult()
    model.train()
    for epoch in range(warmup_epochs + epochs):
        phase = "ce" if epoch < warmup_epochs else "main"
        fn = ce if phase == "ce" else main_loss
        order = torch.tensor(list(iter(sampler))).reshape(-1, sampler.batch_size)
        total = 0.0
        for idx in order:
            xb, yb = X[idx], yf[idx]
            opt.zero_grad(set_to_none=True)
            out = fn(model(xb).reshape(-1), yb)
            if out.numel() != 1:
                raise ValueError(f"loss must return a scalar, got shape {tuple(out.shape)}")
            out = out.reshape(())
            out.backward()
            opt.step()
            total = total + out.detach()  # stays on the device: one host read per epoch
            result.steps += 1
            if on_step is not None:
                on_step(result.steps, phase)
        result.losses.append(float(total) / len(order) if len(order) else float("nan"))
        result.phases.append(phase)
        if on_epoch is not None:
            on_epoch(epoch, phase)
    model.eval()
    return result
