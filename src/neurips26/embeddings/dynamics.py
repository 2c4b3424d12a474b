r"""Why contrastive embeddings have informative norms: the norm records the training.

The formula
-----------
Let a loss see an embedding :math:`x \in \mathbb{R}^d` only through its direction,
:math:`L(x) = \ell(u)`, :math:`u = x/\|x\|` (InfoNCE on cosine similarities, any loss
after a ``Normalize`` layer). Then

.. math:: g = \nabla L(x) = \frac{1}{\|x\|} (I - u u^\top) \nabla \ell(u)
          = \frac{\tilde g}{\|x\|}, \qquad \langle g, x \rangle = 0,

where :math:`\tilde g` is the gradient with respect to the unit vector (its tangential
part). Write :math:`r_t = \|x_t\|^2` and :math:`G_t = \|\tilde g_t\|^2`.

*SGD* (``torch.optim.SGD``, weight decay :math:`\lambda` coupled into the gradient):
:math:`x_{t+1} = (1 - \eta_t\lambda) x_t - \eta_t g_t`. As :math:`g_t \perp x_t`,

.. math:: r_{t+1} = \rho_t^2 r_t + \eta_t^2 \|g_t\|^2
                  = \rho_t^2 r_t + \eta_t^2 G_t / r_t, \qquad \rho_t = 1 - \eta_t\lambda

exactly. Without decay the norm never decreases, and squaring,
:math:`r_{t+1}^2 = r_t^2 + 2\eta_t^2 G_t + \eta_t^4 G_t^2 / r_t^2`, so

.. math:: \|x_T\|^4 \approx \|x_0\|^4 + 2 \sum_t \eta_t^2 \|\tilde g_t\|^2 :

the norm is a record of the accumulated tangential gradient energy. With decay the
recursion has the fixed point :math:`r^{*2} = \eta^2 G / (1 - \rho^2) \approx \eta G / (2\lambda)`.

*SGD with momentum* :math:`\mu`: :math:`m_{t+1} = \mu m_t + g_t`,
:math:`x_{t+1} = x_t - \eta m_{t+1}`. The step is no longer tangential; with
:math:`c_t = \langle x_t, m_t\rangle` and :math:`M_t = \|m_t\|^2`, and again
:math:`\langle x_t, g_t\rangle = 0`,

.. math:: r_{t+1} = r_t - 2\eta\mu c_t + \eta^2 M_{t+1}, \qquad c_{t+1} = \mu c_t - \eta M_{t+1},

exactly (torch's coupled decay adds :math:`\lambda x_t` to the gradient: replace
:math:`\mu c_t` by :math:`a_t = \mu c_t + \lambda r_t` in both, still exact). For gradients uncorrelated across steps :math:`M \approx G/(r(1-\mu^2))`, the
stationary :math:`c = -\eta M/(1-\mu)` and :math:`\Delta r \approx (\eta/(1-\mu))^2 G / r`:
momentum acts as the effective step :math:`\eta/(1-\mu)`.

*Adam / AdamW*: the step :math:`\eta\, \hat m_t / (\sqrt{\hat v_t} + \epsilon)` is
normalized per coordinate, so it neither shrinks as :math:`1/\|x\|` nor stays exactly
tangential. To first order :math:`r_{t+1} \approx \rho_t^2 r_t + \eta_t^2 U_t` with
:math:`U_t = \|\hat m_t / (\sqrt{\hat v_t} + \epsilon)\|^2` and :math:`\rho_t = 1 - \eta_t\lambda`
(AdamW's decoupled decay). Adam's first moment is a momentum, and as with SGD's it turns
past tangential steps into an outward radial part: with :math:`s_t` the step direction,
:math:`c_t = \langle x_t, s_t\rangle` and :math:`\langle x_t, s_{t+1}\rangle \approx
\bar\beta_1 c_t` (:math:`\bar\beta_1 = \beta_1 (1-\beta_1^{k-1})/(1-\beta_1^k)` the
bias-corrected coefficient; dropped: the radial part of the new gradient after the
per-coordinate scaling, and the change of :math:`\hat v`),

.. math:: r_{t+1} = \rho^2 r_t - 2\rho\eta\bar\beta_1 c_t + \eta^2 U_t,
          \qquad c_{t+1} = \rho\bar\beta_1 c_t - \eta U_t . :math:`U_t` is a signal-to-noise energy: about
:math:`d` for a gradient of constant direction, much less for gradients that change sign.

Signs this predicts (used by the reproduction, derived here rather than assumed)
-------------------------------------------------------------------------------
An item's accumulated energy is (number of steps with a gradient) × (energy per step).
Under SGD the energy per step is the squared tangential gradient, which stays large for an
item whose positives disagree (a broad concept, noisy labels: the gradient never settles) and
falls once a narrow item is fit: the norm grows with frequency, falls with specificity and
grows with label noise. Under Adam the energy per step is :math:`U_t`, a signal-to-noise
ratio that does not scale with the gradient, so the same argument fixes no sign in advance
(consistent gradients give large :math:`U_t`, but so does the momentum's radial drift of a
row whose direction keeps changing); the reproduction measures the signs under Adam rather
than predicting them.

API
---
:class:`NormRecorder` wraps a parameter (an embedding table, one row per item) and its
optimizer and logs, at each step, the quantities above; :func:`predicted_norms` turns a
:class:`NormHistory` into the norms the formula predicts, without looking at the norms
observed after the first step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .._checks import check_int, check_real

__all__ = ["NormHistory", "NormRecorder", "predicted_norms", "tangential_energy"]

_OPTIMIZERS = ("sgd", "adam", "adamw")


def tangential_energy(x: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    r"""Per-row :math:`\|\tilde g\|^2 = \|g\|^2 \|x\|^2`, the squared gradient with respect to
    the unit vector, for a scale-invariant loss (where :math:`g \perp x`).

    x, grad: (n, d) or (d,). Returns (n,) (or a 0-d tensor)."""
    if not isinstance(x, torch.Tensor) or not isinstance(grad, torch.Tensor):
        raise TypeError("x and grad must be torch tensors")
    if x.shape != grad.shape or x.dim() not in (1, 2):
        raise ValueError(f"x and grad must have one shape (n, d) or (d,), got {tuple(x.shape)} and {tuple(grad.shape)}")
    return grad.pow(2).sum(-1) * x.pow(2).sum(-1)


@dataclass
class NormHistory:
    """What :class:`NormRecorder` logged over T steps of n rows.

    sq_norm0 : (n,) squared norms before the first step.
    tangent_sq : (T, n) :math:`\\|\\tilde g_t\\|^2` (the gradient with respect to the unit vector).
    lr : (T,) step sizes.
    optimizer : "sgd", "adam" or "adamw".
    weight_decay, momentum : the optimizer's settings (momentum is SGD's).
    step_sq : (T, n) or None. SGD with momentum: :math:`\\|m_{t+1}\\|^2`; Adam(W): :math:`U_t`.
    sq_norms : (T + 1, n) or None: the squared norms observed (for comparison; the prediction
        uses only ``sq_norm0``).
    betas, first_step : Adam's betas and its step count at the first logged step.
    radial : (T, n) or None. Adam(W): the radial part of the step direction,
        :math:`\\langle x_t, s_{t+1}\\rangle`, for the exact bookkeeping.
    """

    sq_norm0: torch.Tensor
    tangent_sq: torch.Tensor
    lr: torch.Tensor
    optimizer: str = "sgd"
    weight_decay: float = 0.0
    momentum: float = 0.0
    step_sq: torch.Tensor | None = None
    sq_norms: torch.Tensor | None = None
    betas: tuple[float, float] = (0.9, 0.999)
    first_step: int = 1
    radial: torch.Tensor | None = None

    def __post_init__(self):
        if self.optimizer not in _OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {_OPTIMIZERS}, got {self.optimizer!r}")
        for name in ("sq_norm0", "tangent_sq", "lr"):
            if not isinstance(getattr(self, name), torch.Tensor):
                raise TypeError(f"{name} must be a torch tensor")
        if self.sq_norm0.dim() != 1 or self.tangent_sq.dim() != 2 or self.tangent_sq.shape[1] != self.sq_norm0.shape[0]:
            raise ValueError(f"sq_norm0 must be (n,) and tangent_sq (T, n); got {tuple(self.sq_norm0.shape)} "
                             f"and {tuple(self.tangent_sq.shape)}")
        if self.lr.shape != (self.tangent_sq.shape[0],):
            raise ValueError(f"lr must be (T,) = ({self.tangent_sq.shape[0]},), got {tuple(self.lr.shape)}")
        for name in ("step_sq", "radial"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, torch.Tensor) or v.shape != self.tangent_sq.shape):
                raise ValueError(f"{name} must be a (T, n) tensor like tangent_sq")
        for name in ("sq_norm0", "tangent_sq", "lr", "step_sq", "radial"):
            v = getattr(self, name)
            if v is not None and not torch.isfinite(v).all():
                raise ValueError(f"{name} has NaN or inf entries")
        if (self.sq_norm0 <= 0).any():
            raise ValueError("sq_norm0 must be positive (a zero vector has no direction)")
        self.weight_decay = check_real("weight_decay", self.weight_decay, low=0.0)
        self.momentum = check_real("momentum", self.momentum, low=0.0, high=1.0, high_open=True)
        self.first_step = check_int("first_step", self.first_step, minimum=1)
        b1 = check_real("betas[0]", self.betas[0], low=0.0, high=1.0, high_open=True)
        self.betas = (b1, check_real("betas[1]", self.betas[1], low=0.0, high=1.0, high_open=True))
        if self.optimizer != "sgd" and self.momentum:
            raise ValueError("momentum is SGD's setting; Adam's moments are in step_sq")
        if self.optimizer == "adam" and self.weight_decay:
            raise ValueError("Adam's coupled weight decay is not covered; use optimizer='adamw'")
        if (self.optimizer != "sgd" or self.momentum) and self.step_sq is None:
            raise ValueError(f"optimizer={self.optimizer!r} with momentum={self.momentum} needs step_sq")

    @property
    def steps(self) -> int:
        return self.tangent_sq.shape[0]


def predicted_norms(history: NormHistory, exact: bool = True) -> torch.Tensor:
    """The norms (not squared) the formula predicts: (T + 1, n), row 0 the initial norms.

    exact=True: the identities (SGD with or without decay or momentum, from the energies
    alone; Adam/AdamW with the logged radial part ``history.radial``). exact=False, the
    formula: for Adam/AdamW the first-order recursion from the step energies alone (module
    docstring); for SGD without momentum or decay the fourth-power law :math:`\\|x_T\\|^4 \\approx \\|x_0\\|^4 + 2\\sum \\eta_t^2 G_t`
    at every T.
    """
    if not isinstance(history, NormHistory):
        raise TypeError(f"history must be a NormHistory, got {type(history).__name__}")
    h = history
    dtype = torch.promote_types(h.tangent_sq.dtype, torch.float32)
    lr = h.lr.to(dtype)
    r0 = h.sq_norm0.to(dtype)
    if exact and h.optimizer != "sgd" and h.radial is None:
        raise ValueError("the exact Adam recursion needs the logged radial part (history.radial); "
                         "exact=False gives the first-order formula")
    if not exact and h.optimizer == "sgd":
        if h.momentum or h.weight_decay:
            raise ValueError("the fourth-power law (exact=False) is for SGD without momentum or weight decay")
        acc = torch.cumsum(2 * lr[:, None] ** 2 * h.tangent_sq.to(dtype), 0)
        return torch.cat([r0[None], r0[None] ** 2 + acc]).pow(0.25)
    rho2 = (1 - lr * h.weight_decay) ** 2
    out = torch.empty(h.steps + 1, r0.shape[0], dtype=dtype)
    out[0] = r0
    r = r0.clone()
    # A recursion over steps (each needs the previous norm); rows are vectorized.
    if h.optimizer == "sgd" and not h.momentum:
        G = h.tangent_sq.to(dtype)
        for t in range(h.steps):
            r = rho2[t] * r + lr[t] ** 2 * G[t] / r
            out[t + 1] = r
    elif h.optimizer == "sgd":
        M = h.step_sq.to(dtype)
        c = torch.zeros_like(r)
        for t in range(h.steps):
            a = h.momentum * c + h.weight_decay * r  # <x_t, m_{t+1}>: g_t is orthogonal to x_t
            r = r - 2 * lr[t] * a + lr[t] ** 2 * M[t]
            c = a - lr[t] * M[t]
            out[t + 1] = r
    elif exact:  # Adam(W) with its logged radial part: the identity, no approximation
        U, rad = h.step_sq.to(dtype), h.radial.to(dtype)
        for t in range(h.steps):
            rho = 1 - lr[t] * h.weight_decay
            r = rho ** 2 * r - 2 * rho * lr[t] * rad[t] + lr[t] ** 2 * U[t]
            out[t + 1] = r
    else:
        U = h.step_sq.to(dtype)
        b1 = h.betas[0]
        c = torch.zeros_like(r)
        for t in range(h.steps):
            k = h.first_step + t  # Adam's step count at this step (1 for a fresh optimizer)
            # <x_t, s_{t+1}> ~ (bias-corrected beta1) <x_t, s_t>: the new gradient's radial part is dropped
            a = b1 * (1 - b1 ** (k - 1)) / (1 - b1 ** k) * c
            r = rho2[t] * r - 2 * (1 - lr[t] * h.weight_decay) * lr[t] * a + lr[t] ** 2 * U[t]
            c = (1 - lr[t] * h.weight_decay) * a - lr[t] * U[t]
            out[t + 1] = r
    return out.clamp_min(0).sqrt()


class _StepLog:
    """Rows of one shape appended once per step, kept in preallocated blocks of ``rows`` steps.

    Why not a list of tensors: each step allocates and frees (n, d) temporaries, and one small live tensor
    per step between them fragments the allocator's heap so that it never shrinks. A 6000-step Adam run on
    a 5 460 x 64 table grew past 16 GB that way (the logged data is under 0.6 GB); copied into blocks, the
    process stays near the data's size."""

    def __init__(self, rows: int = 256):
        self.rows, self.blocks, self.count = rows, [], 0

    def __len__(self) -> int:
        return self.count

    def append(self, value: torch.Tensor) -> None:
        if self.count == len(self.blocks) * self.rows:
            self.blocks.append(torch.empty((self.rows, *value.shape), dtype=value.dtype, device=value.device))
        self.blocks[-1][self.count % self.rows] = value
        self.count += 1

    def stack(self) -> torch.Tensor:
        """(steps, *shape): a copy, like ``torch.stack`` of the appended rows."""
        return torch.cat(self.blocks)[: self.count]


class NormRecorder:
    """Log what :func:`predicted_norms` needs while an optimizer trains ``param``.

    ``param``: (n, d), one embedding per row (or (d,), one embedding). Call :meth:`step` in
    place of ``optimizer.step()`` after ``backward()``; :meth:`history` returns the
    :class:`NormHistory`. Supports ``torch.optim.SGD`` (with or without momentum; no
    dampening or Nesterov), ``Adam`` (no weight decay) and ``AdamW``, without amsgrad.
    """

    def __init__(self, param: torch.Tensor, optimizer: torch.optim.Optimizer):
        if not isinstance(param, torch.Tensor) or not param.requires_grad:
            raise TypeError("param must be a tensor that requires grad")
        if param.dim() not in (1, 2) or param.numel() == 0:
            raise ValueError(f"param must be (n, d) or (d,) and non-empty, got {tuple(param.shape)}")
        group = next((g for g in optimizer.param_groups if any(p is param for p in g["params"])), None)
        if group is None:
            raise ValueError("param is not in the optimizer's param_groups")
        if isinstance(optimizer, torch.optim.AdamW):
            kind = "adamw"
        elif isinstance(optimizer, torch.optim.Adam):
            kind = "adam"
        elif isinstance(optimizer, torch.optim.SGD):
            kind = "sgd"
            if group.get("nesterov") or group.get("dampening", 0):
                raise ValueError("SGD with Nesterov or dampening is not covered by the formula here")
        else:
            raise TypeError(f"optimizer must be torch.optim.SGD, Adam or AdamW, got {type(optimizer).__name__}")
        if kind != "sgd" and group.get("amsgrad"):
            raise ValueError("amsgrad is not covered")
        if kind == "adam" and group["weight_decay"]:
            raise ValueError("Adam with coupled weight decay is not covered; use AdamW")
        self.param, self.optimizer, self.group, self.kind = param, optimizer, group, kind
        self._rows = (lambda t: t.detach().reshape(1, -1)) if param.dim() == 1 else (lambda t: t.detach())
        self._sq0 = self._rows(param).pow(2).sum(-1).clone()
        state = optimizer.state.get(param, {})
        self._first_step = int(float(state["step"])) + 1 if "step" in state else 1
        self._tangent, self._step, self._radial, self._sq = _StepLog(), _StepLog(), _StepLog(), _StepLog()
        self._lr = []
        self._sq.append(self._sq0)

    @torch.no_grad()
    def step(self) -> None:
        if self.param.grad is None:
            raise RuntimeError("param.grad is None: call backward() before step()")
        x, g = self._rows(self.param), self._rows(self.param.grad)
        self._tangent.append(tangential_energy(x, g))
        x_before = x.clone() if self.kind != "sgd" else None
        self._lr.append(float(self.group["lr"]))
        self.optimizer.step()
        state = self.optimizer.state[self.param]
        if self.kind == "sgd" and self.group["momentum"]:
            self._step.append(self._rows(state["momentum_buffer"]).pow(2).sum(-1))
        elif self.kind != "sgd":
            b1, b2 = self.group["betas"]
            t = float(state["step"])
            # torch's own step direction: (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
            u = (self._rows(state["exp_avg"]) / (1 - b1 ** t)) / (
                (self._rows(state["exp_avg_sq"]) / (1 - b2 ** t)).sqrt() + self.group["eps"])
            self._step.append(u.pow(2).sum(-1))
            self._radial.append((x_before * u).sum(-1))
        self._sq.append(self._rows(self.param).pow(2).sum(-1))

    def history(self) -> NormHistory:
        if not len(self._tangent):
            raise RuntimeError("no step recorded yet")
        wd = float(self.group["weight_decay"])
        return NormHistory(
            sq_norm0=self._sq0, tangent_sq=self._tangent.stack(),
            lr=torch.tensor(self._lr, dtype=torch.float64), optimizer=self.kind, weight_decay=wd,
            momentum=float(self.group.get("momentum", 0.0)) if self.kind == "sgd" else 0.0,
            step_sq=self._step.stack() if len(self._step) else None, sq_norms=self._sq.stack(),
            betas=tuple(self.group.get("betas", (0.9, 0.999))), first_step=self._first_step,
            radial=self._radial.stack() if len(self._radial) else None)
