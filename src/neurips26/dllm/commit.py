"""Commit (transfer) rules: which masked positions of the current block become tokens at this step.

Every rule sees the block's logits (B, n, V), its mask (B, n) and, if it asks for them
(``needs_hidden``), the block's last-layer hidden states (B, n, d); it returns the proposed tokens
(greedy argmax) and a (B, n) boolean of positions to commit, at least one per row that still has a mask.
Confidence is the softmax probability of the argmax in float64 (as LLaDA and Fast-dLLM compute it).

* :class:`LowConfidence` — LLaDA: a linear schedule of tokens per step, highest confidence first.
* :class:`Threshold` — Fast-dLLM: every masked token with confidence ≥ τ, and at least the most confident one.
* :class:`Factor` — Fast-dLLM's factor rule: the largest n whose n-th best confidence is ≥ 1 − f/(n+1).
* :class:`PolestarCommit` — drift-guided: commit confident tokens, and also tokens of moderate confidence
  whose representation has stopped drifting after the context moved them (see the class).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .._checks import check_int, check_real

__all__ = ["CommitRule", "LowConfidence", "Threshold", "Factor", "PolestarCommit", "confidence",
           "num_transfer_tokens"]


def confidence(logits: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy proposal x0 (B, n) and its confidence (B, n) in float64, −inf where not masked."""
    x0 = logits.argmax(-1)
    p = F.softmax(logits.to(torch.float64), dim=-1).gather(-1, x0.unsqueeze(-1)).squeeze(-1)
    return x0, torch.where(mask, p, torch.full_like(p, float("-inf")))


def num_transfer_tokens(mask: torch.Tensor, steps: int) -> torch.Tensor:
    """LLaDA's schedule: masked count per row split into ``steps`` near-equal parts, the remainder first. (B, steps)."""
    total = mask.sum(1)
    base, rem = total // steps, total % steps
    cols = torch.arange(steps, device=mask.device)[None]
    return base[:, None] + (cols < rem[:, None]).long()


def _force_one(conf: torch.Tensor, transfer: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    best = torch.zeros_like(transfer).scatter_(1, conf.argmax(1, keepdim=True), True)
    return (transfer | best) & mask


class CommitRule:
    """Base class. ``start_block(mask)`` is called at each block start; ``select`` at each step."""

    needs_hidden = False

    def start_block(self, mask: torch.Tensor) -> None:
        pass

    def select(self, logits: torch.Tensor, mask: torch.Tensor, hidden: torch.Tensor | None = None):
        raise NotImplementedError

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({args})"


class LowConfidence(CommitRule):
    """LLaDA low-confidence remasking with ``steps_per_block`` steps per block (``steps_per_block =
    block_length`` is one token per step)."""

    def __init__(self, steps_per_block: int):
        self.steps_per_block = check_int("steps_per_block", steps_per_block, 1)

    def start_block(self, mask):
        self._quota = num_transfer_tokens(mask, self.steps_per_block)
        self._i = 0

    def select(self, logits, mask, hidden=None):
        x0, conf = confidence(logits, mask)
        k = self._quota[:, self._i] if self._i < self.steps_per_block else mask.sum(1)
        self._i += 1
        order = conf.argsort(dim=1, descending=True, stable=True)
        ranks = torch.empty_like(order).scatter_(1, order, torch.arange(order.shape[1], device=order.device)
                                                 .expand_as(order).contiguous())
        transfer = (ranks < k[:, None]) & mask
        return x0, _force_one(conf, transfer, mask)


class Threshold(CommitRule):
    """Fast-dLLM's threshold rule: masked tokens with confidence ≥ ``tau`` (their code's ≥), plus the most
    confident one."""

    def __init__(self, tau: float = 0.9):
        self.tau = check_real("tau", tau, low=0.0, high=1.0)

    def select(self, logits, mask, hidden=None):
        x0, conf = confidence(logits, mask)
        return x0, _force_one(conf, mask & (conf >= self.tau), mask)


class Factor(CommitRule):
    """Fast-dLLM's factor rule: with the masked confidences sorted, c_1 ≥ … ≥ c_m, commit the top k where k is
    the first n (1-based, n ≥ 2) with c_n < 1 − f/(n+1) minus one, or m when none fails.

    ``fastdllm_edge=True`` (default) keeps the published loop's edge case: when only the *last* token fails,
    the loop's ``top_i == len − 1`` branch commits all m tokens anyway; ``False`` commits m − 1."""

    def __init__(self, factor: float = 1.0, fastdllm_edge: bool = True):
        self.factor = check_real("factor", factor, low=0.0, low_open=True)
        self.fastdllm_edge = bool(fastdllm_edge)

    def select(self, logits, mask, hidden=None):
        x0, conf = confidence(logits, mask)
        B, n = conf.shape
        m = mask.sum(1)
        srt, order = conf.sort(dim=1, descending=True, stable=True)
        idx = torch.arange(n, device=conf.device)
        th = (1 - self.factor / (idx + 2).to(torch.float64))[None].expand(B, n).clone()
        th[:, 0] = -1.0
        valid = idx[None] < m[:, None]
        fail = (srt < th) & valid
        any_fail = fail.any(1)
        first = torch.where(any_fail, fail.float().argmax(1), m - 1)
        bump = (first == 0) | ((first == m - 1) if self.fastdllm_edge else ~any_fail)
        k = torch.where(bump, first + 1, first)
        chosen = torch.zeros_like(mask).scatter_(1, order, idx[None].expand(B, n) < k[:, None])
        return x0, _force_one(conf, chosen & mask, mask)


class PolestarCommit(CommitRule):
    """Drift-guided commit (Polestar-Commit). Per masked position p of the block, drift_t(p) = 1 − cos(h_t(p),
    h_{t−1}(p)) of its last-layer hidden state between consecutive steps. A *sharp drift event* is a step at
    which p's representation moved by more than ``spike`` (it integrated new context). After an event, once
    the drift has settled (drift_t(p) ≤ ``settle``) and the proposal is unchanged, p is commit-ready if its
    confidence is ≥ ``tau_low``. Tokens with confidence ≥ ``tau`` commit at once (as Threshold), and at least
    one per row always commits. ``spike = 0`` makes every settled position eligible.

    Parameters: ``tau`` (high confidence), ``tau_low`` (confidence of a settled token; the main knob),
    ``settle`` and ``spike`` (cosine-drift levels)."""

    needs_hidden = True

    def __init__(self, tau: float = 0.9, tau_low: float = 0.5, settle: float = 0.05, spike: float = 0.0):
        self.tau = check_real("tau", tau, low=0.0, high=1.0)
        self.tau_low = check_real("tau_low", tau_low, low=0.0, high=1.0)
        self.settle = check_real("settle", settle, low=0.0, high=2.0)
        self.spike = check_real("spike", spike, low=0.0, high=2.0)

    def start_block(self, mask):
        self._h = None
        self._x0 = None
        self._event = torch.zeros_like(mask) if self.spike > 0 else torch.ones_like(mask)

    def select(self, logits, mask, hidden=None):
        if hidden is None:
            raise ValueError("PolestarCommit needs the block's hidden states (the decoder passes them)")
        x0, conf = confidence(logits, mask)
        transfer = mask & (conf >= self.tau)
        h = hidden.float()
        if self._h is not None:
            drift = 1 - F.cosine_similarity(h, self._h, dim=-1)
            self._event = self._event | (drift > self.spike)
            ready = self._event & (drift <= self.settle) & (x0 == self._x0) & (conf >= self.tau_low)
            transfer = transfer | (ready & mask)
        self._h, self._x0 = h, x0
        return x0, _force_one(conf, transfer, mask)
