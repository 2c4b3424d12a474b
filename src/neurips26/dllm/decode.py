"""Semi-autoregressive block decoding of a masked-diffusion LM with independent commit and cache rules.

``decode(model, prompt_ids, gen_length=..., block_length=..., commit=..., cache=..., mask_id=...)`` appends
``gen_length`` ``[MASK]`` tokens to the (left-padded) prompts and fills them block by block, as LLaDA does:
at each step the cache rule produces the block's logits (greedy, temperature 0) and the commit rule picks
which masked positions of the block become tokens (at least one per row, so decoding terminates with at most
``gen_length`` forwards).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from .._checks import check_int
from .cache import CacheRule, NoCache
from .commit import CommitRule, confidence

__all__ = ["DecodeResult", "decode"]


@dataclass
class DecodeResult:
    """``tokens`` (B, gen_length); ``nfe`` forwards; ``tokens_per_forward`` = gen_length / nfe;
    ``row_nfe`` (B,) forwards in which each row still had a mask (gen_length / row_nfe is that row's
    tokens per forward in a batch); ``positions_recomputed`` = Σ over forwards of positions recomputed (per row); ``cost_per_token`` =
    positions × layers recomputed per generated token; ``wall_s``; ``trace``: per step (block, #committed,
    #recomputed) when asked."""

    tokens: torch.Tensor
    nfe: int
    tokens_per_forward: float
    positions_recomputed: int
    cost_per_token: float
    wall_s: float
    trace: list = field(default_factory=list)
    row_nfe: torch.Tensor | None = None  # (B,) forwards in which each row still had a mask


def _check(model, prompt_ids, prompt_mask, gen_length, block_length, commit, cache, mask_id):
    if not isinstance(prompt_ids, torch.Tensor) or prompt_ids.dtype not in (torch.long, torch.int, torch.int32):
        raise TypeError("prompt_ids must be an integer torch.Tensor of shape (B, Lp)")
    if prompt_ids.dim() != 2 or prompt_ids.shape[0] == 0 or prompt_ids.shape[1] == 0:
        raise ValueError(f"prompt_ids must have shape (B, Lp) with B, Lp >= 1, got {tuple(prompt_ids.shape)}")
    gen_length = check_int("gen_length", gen_length, 1)
    block_length = check_int("block_length", block_length, 1)
    if gen_length % block_length:
        raise ValueError(f"gen_length ({gen_length}) must be a multiple of block_length ({block_length})")
    vocab = int(model.config.vocab_size)
    mask_id = check_int("mask_id", mask_id, 0)
    if mask_id >= vocab:
        raise ValueError(f"mask_id must be a token id in [0, {vocab}), got {mask_id}")
    if prompt_mask is not None and (prompt_mask.shape != prompt_ids.shape or prompt_mask.dtype != torch.bool):
        raise ValueError("prompt_mask must be a bool tensor of prompt_ids' shape (True at real tokens)")
    real = prompt_ids if prompt_mask is None else prompt_ids[prompt_mask]
    if (real == mask_id).any():
        raise ValueError("the prompt contains the [MASK] id; prompts must be fully observed")
    if ((real < 0) | (real >= vocab)).any():
        raise ValueError(f"prompt token ids must lie in [0, {vocab})")
    if not isinstance(commit, CommitRule):
        raise TypeError(f"commit must be a CommitRule (LowConfidence, Threshold, Factor, PolestarCommit), got "
                        f"{type(commit).__name__}")
    if not isinstance(cache, CacheRule):
        raise TypeError(f"cache must be a CacheRule (NoCache, PrefixCache, DualCache, PolestarCache), got "
                        f"{type(cache).__name__}")
    return gen_length, block_length, mask_id


@torch.no_grad()
def decode(model, prompt_ids: torch.Tensor, *, gen_length: int, block_length: int, commit: CommitRule,
           cache: CacheRule | None = None, mask_id: int, prompt_mask: torch.Tensor | None = None,
           trace: bool = False, step_callback=None) -> DecodeResult:
    """Decode ``gen_length`` tokens after ``prompt_ids`` (B, Lp); ``prompt_mask`` (B, Lp) marks real tokens of
    left-padded prompts. ``step_callback(block, step, logits)`` sees the block logits of every step (tests)."""
    cache = NoCache() if cache is None else cache
    gen_length, block_length, mask_id = _check(model, prompt_ids, prompt_mask, gen_length, block_length, commit,
                                               cache, mask_id)
    t0 = time.perf_counter()
    B, Lp = prompt_ids.shape
    dev = prompt_ids.device
    x = torch.cat([prompt_ids.long(), torch.full((B, gen_length), mask_id, dtype=torch.long, device=dev)], 1)
    pm = torch.ones_like(prompt_ids, dtype=torch.bool) if prompt_mask is None else prompt_mask
    key_mask = torch.cat([pm, torch.ones((B, gen_length), dtype=torch.bool, device=dev)], 1)
    cache.start(model, x, key_mask)
    nfe, recomputed, steps = 0, 0, []
    row_nfe = torch.zeros(B, dtype=torch.long, device=dev)
    for nb in range(gen_length // block_length):
        s = Lp + nb * block_length
        e = s + block_length
        commit.start_block(x[:, s:e] == mask_id)
        first, i = True, 0
        while True:
            mask = x[:, s:e] == mask_id
            if not mask.any():
                break
            logits, hidden, n = cache.step(model, x, key_mask, s, e, first)
            if step_callback is not None:
                step_callback(nb, i, logits)
            if (logits.argmax(-1)[mask] == mask_id).any():
                # the model proposes [MASK] itself at a masked position: committing it would leave the position
                # masked for ever (an untrained model does this); propose the best real token there instead. A
                # trained model never does, and its logits then go to the rule untouched.
                logits = logits.clone()
                logits[..., mask_id] = float("-inf")
            x0, transfer = commit.select(logits, mask, hidden if commit.needs_hidden else None)
            # every rule commits >= 1 per row with a mask; enforce it so that decoding always terminates
            _, conf = confidence(logits, mask)
            lacking = mask.any(1) & ~transfer.any(1)
            if lacking.any():
                best = torch.zeros_like(transfer).scatter_(1, conf.argmax(1, keepdim=True), True)
                transfer = transfer | (best & lacking[:, None])
            x[:, s:e] = torch.where(transfer, x0, x[:, s:e])
            changed = torch.zeros_like(x, dtype=torch.bool)
            changed[:, s:e] = transfer
            cache.after_commit(changed)
            nfe += 1
            row_nfe += mask.any(1)
            recomputed += n
            if trace:
                steps.append((nb, int(transfer.sum()), n))
            first, i = False, i + 1
    L = int(model.config.num_hidden_layers)
    return DecodeResult(tokens=x[:, Lp:], nfe=nfe, tokens_per_forward=gen_length / nfe,
                        positions_recomputed=recomputed, cost_per_token=recomputed * L / gen_length,
                        wall_s=time.perf_counter() - t0, trace=steps, row_nfe=row_nfe)
