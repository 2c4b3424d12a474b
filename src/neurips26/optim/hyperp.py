"""HyperP's learning-rate transfer rules, and the fits that measure them.

Under HyperP (Muon on the Frobenius sphere, :class:`~neurips26.optim.hyperball.HyperballMuon`)
one base learning rate η₀, tuned at (width d₀, depth L₀, tokens T₀), transfers as

    η(d, L, T, k) = η₀ · √(L₀ / L) · (T / T₀)^(−γ) · (k / k₀)^(−κ)

* width: no factor. The sphere step is relative (it moves W by η‖W‖), so it does not grow
  with the fan-in as an absolute step does;
* depth (Depth-μP): η ∝ √(L₀/L) together with residual branches scaled by 1/√(2L)
  (:meth:`HyperPScaler.residual_multiplier`);
* tokens: the data-scaling power law with γ = 0.32 (the "magic exponent", also AdamW's);
* MoE granularity k (active experts of k·s, at constant active parameters): κ = 0 by
  default, i.e. the lr transfers unchanged across granularity when the gates are SqrtGate
  (:func:`neurips26.moe.apply_sqrt_gate`), which keeps the block output RMS fixed; κ is a
  setting for those who measure otherwise.

:func:`apply_hyperp` writes the depth rule into a ``transformers`` Granite config;
:func:`optimal_lr` (parabola in log η) and :func:`fit_power_law` (with a bootstrap CI) are
the measurements that check the rules.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np

from .._checks import check_int, check_real

__all__ = ["HyperPScaler", "apply_hyperp", "hyperp_param_groups", "optimal_lr", "fit_power_law", "MAGIC_EXPONENT"]

MAGIC_EXPONENT = 0.32


@dataclass(frozen=True)
class HyperPScaler:
    """The transfer rules from one base run (see the module docstring).

    Args:
        base_width, base_depth: the base model's hidden size and number of layers (ints >= 1).
        base_tokens: the base run's training tokens (> 0).
        base_lr: the lr tuned at the base (> 0).
        gamma: the token exponent (0.32).
        depth_mup: apply Depth-μP (√(L₀/L) lr and 1/√(2L) residual branches).
        granularity_exponent: κ of the granularity rule (0: lr unchanged across k).
        base_granularity: k₀, the base run's active experts per token.
    """

    base_width: int
    base_depth: int
    base_tokens: float
    base_lr: float
    gamma: float = MAGIC_EXPONENT
    depth_mup: bool = True
    granularity_exponent: float = 0.0
    base_granularity: int = 1

    def __post_init__(self):
        check_int("base_width", self.base_width, minimum=1)
        check_int("base_depth", self.base_depth, minimum=1)
        check_real("base_tokens", self.base_tokens, low=0.0, low_open=True)
        check_real("base_lr", self.base_lr, low=0.0, low_open=True)
        check_real("gamma", self.gamma, low=0.0)
        check_real("granularity_exponent", self.granularity_exponent)
        check_int("base_granularity", self.base_granularity, minimum=1)
        if not isinstance(self.depth_mup, bool):
            raise TypeError(f"depth_mup must be a bool, got {self.depth_mup!r}")

    def lr(self, width: int | None = None, depth: int | None = None, tokens: float | None = None,
           granularity: int | None = None) -> float:
        """η for a target (width, depth, tokens, granularity); None keeps the base value."""
        if width is not None:
            check_int("width", width, minimum=1)  # width-independent: checked, not used
        depth = self.base_depth if depth is None else check_int("depth", depth, minimum=1)
        tokens = self.base_tokens if tokens is None else check_real("tokens", tokens, low=0.0, low_open=True)
        k = self.base_granularity if granularity is None else check_int("granularity", granularity, minimum=1)
        eta = self.base_lr * (tokens / self.base_tokens) ** (-self.gamma)
        if self.depth_mup:
            eta *= math.sqrt(self.base_depth / depth)
        return eta * (k / self.base_granularity) ** (-self.granularity_exponent)

    def residual_multiplier(self, depth: int) -> float:
        """The residual-branch factor: 1/√(2L) with Depth-μP, 1 without."""
        depth = check_int("depth", depth, minimum=1)
        return 1.0 / math.sqrt(2 * depth) if self.depth_mup else 1.0


def apply_hyperp(config, scaler: HyperPScaler):
    """A copy of the ``transformers`` ``GraniteConfig`` / ``GraniteMoeConfig`` ``config`` with
    HyperP's architecture rule: ``residual_multiplier`` = 1/√(2L) for its L =
    ``num_hidden_layers`` under Depth-μP (1 otherwise). Other configs (no
    ``residual_multiplier``) raise TypeError: their residual branches cannot be scaled by
    a setting."""
    if not isinstance(scaler, HyperPScaler):
        raise TypeError(f"scaler must be a HyperPScaler, got {type(scaler).__name__}")
    if not (hasattr(config, "residual_multiplier") and hasattr(config, "num_hidden_layers")):
        raise TypeError(f"config must be a transformers GraniteConfig or GraniteMoeConfig (a config with "
                        f"residual_multiplier), got {type(config).__name__}")
    out = copy.deepcopy(config)
    out.residual_multiplier = scaler.residual_multiplier(int(config.num_hidden_layers))
    return out


def hyperp_param_groups(model, lr: float, adamw_lr: float) -> list[dict]:
    """:class:`~neurips26.optim.HyperballMuon` parameter groups for a ``transformers`` model:
    the 2-D tensors inside the blocks (attention and MLP matrices, routers) on the sphere at
    ``lr``; the input embeddings, the LM head, the norms, the biases and every tensor of
    another rank (MoE expert stacks) in the AdamW group at ``adamw_lr``.

    The embeddings and the head are excluded because their rows are looked up or read out one
    token at a time: a single Frobenius sphere over the vocabulary would couple unrelated
    tokens' norms. Parameters keep ``model.parameters()``'s order inside each group; a tied
    head (the same tensor as the embeddings) appears once.

    Example::

        opt = HyperballMuon(hyperp_param_groups(model, lr=scaler.lr(depth=L), adamw_lr=3e-3))
    """
    check_real("lr", lr, low=0.0, low_open=True)
    check_real("adamw_lr", adamw_lr, low=0.0, low_open=True)
    get_in, get_out = getattr(model, "get_input_embeddings", None), getattr(model, "get_output_embeddings", None)
    if get_in is None or get_out is None:
        raise TypeError(f"model must be a transformers PreTrainedModel (with get_input_embeddings and "
                        f"get_output_embeddings), got {type(model).__name__}")
    emb, head = get_in(), get_out()
    skip = {id(m.weight) for m in (emb, head) if m is not None and getattr(m, "weight", None) is not None}
    params = list(model.parameters())  # deduplicated by torch (a tied head is listed once)
    sphere = [p for p in params if p.ndim == 2 and id(p) not in skip]
    ids = {id(p) for p in sphere}
    rest = [p for p in params if id(p) not in ids]
    if not sphere:
        raise ValueError("model has no 2-D tensor inside its blocks: nothing for the sphere group")
    return [{"params": sphere, "use_hyperball": True, "lr": lr},
            {"params": rest, "use_hyperball": False, "lr": adamw_lr}]


def optimal_lr(lrs, losses) -> float:
    """η* from an LR sweep: a parabola in log₂ η through the best grid point and its two
    neighbours (the grid point itself when it lies on the edge, or when the parabola does
    not open upwards). Non-finite losses (diverged runs) count as +inf.

    Args:
        lrs: (n,) positive learning rates, n >= 1, in increasing order.
        losses: (n,) final losses.
    """
    lrs, y = np.asarray(lrs, dtype=float), np.asarray(losses, dtype=float)
    if lrs.ndim != 1 or lrs.shape != y.shape or lrs.size == 0:
        raise ValueError(f"lrs and losses must be two non-empty 1-D arrays of one length, got shapes "
                         f"{np.shape(lrs)} and {np.shape(losses)}")
    if not (np.all(np.isfinite(lrs)) and np.all(lrs > 0)):
        raise ValueError("lrs must be finite and > 0")
    x = np.log2(lrs)
    if np.any(np.diff(x) <= 0):
        raise ValueError("lrs must be strictly increasing")
    y = np.where(np.isfinite(y), y, np.inf)
    if not np.isfinite(y).any():
        raise ValueError("every loss is NaN or inf: no optimum to fit")
    i = int(np.argmin(y))
    if i == 0 or i == x.size - 1 or not np.isfinite(y[i - 1:i + 2]).all():
        return float(2.0 ** x[i])
    a, b, _ = np.polyfit(x[i - 1:i + 2], y[i - 1:i + 2], 2)
    if a <= 0:
        return float(2.0 ** x[i])
    return float(2.0 ** float(np.clip(-b / (2 * a), x[i - 1], x[i + 1])))


def fit_power_law(x, y, n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> dict:
    """Fit y ∝ x^(−γ) by least squares in log-log: ``{"gamma", "ci": [lo, hi], "intercept"}``
    with a percentile bootstrap CI over the points (resampled with replacement; resamples
    with fewer than two distinct x are dropped).

    Args:
        x, y: (n,) positive numbers, n >= 2 with at least two distinct x.
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.ndim != 1 or x.shape != y.shape or x.size < 2:
        raise ValueError(f"x and y must be 1-D of one length >= 2, got shapes {x.shape} and {y.shape}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y)) and np.all(x > 0) and np.all(y > 0)):
        raise ValueError("x and y must be finite and > 0")
    if np.unique(x).size < 2:
        raise ValueError("x needs at least two distinct values")
    n_boot = check_int("n_boot", n_boot, minimum=0)
    check_real("level", level, low=0.0, low_open=True, high=1.0, high_open=True)
    lx, ly = np.log(x), np.log(y)
    slope, intercept = np.polyfit(lx, ly, 1)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, x.size, size=(n_boot, x.size))
    bx, by = lx[idx], ly[idx]
    ok = bx.std(axis=1) > 0
    bx, by = bx[ok], by[ok]
    bxc = bx - bx.mean(axis=1, keepdims=True)
    slopes = (bxc * (by - by.mean(axis=1, keepdims=True))).sum(1) / (bxc ** 2).sum(1)  # vectorized OLS
    if slopes.size:
        lo, hi = np.quantile(-slopes, [(1 - level) / 2, (1 + level) / 2])
    else:
        lo = hi = float(-slope)
    return {"gamma": float(-slope), "ci": [float(lo), float(hi)], "intercept": float(intercept)}
