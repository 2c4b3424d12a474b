"""The masked-diffusion LM: a transformers Llama run bidirectionally, its forward helper and the LLaDA SFT
objective, and a small trainer whose checkpoints are cached keyed by a config hash.

LLaDA is a Llama-style transformer with bidirectional attention and a ``[MASK]`` token, so the model is
``LlamaForCausalLM(LlamaConfig(..., is_causal=False))`` with the tokenizer's ``[MASK]``. Attention goes
through an attention function registered with ``transformers.AttentionInterface`` under
``ATTENTION_NAME``: non-causal SDPA with a key-padding mask (left-padded prompts), which can also record the
head-averaged attention probabilities per layer (what :class:`~neurips26.dllm.cache.PolestarCache` uses).
Keys and values pass through any ``transformers.Cache``, so :class:`~neurips26.dllm.cache.DiffusionKVCache`
makes a forward over a subset of positions attend over all positions.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import torch
import torch.nn.functional as F

from .._atomic import atomic_open
from .._cache import cache_root
from .._checks import check_int, check_real
from .tasks import TASKS, TOKENIZER, encode_batch, make_examples

__all__ = ["ATTENTION_NAME", "ModelConfig", "TrainConfig", "build_model", "forward", "positions_from_mask",
           "llada_sft_loss", "train_dllm", "pretrained_dllm", "cache_path", "heldout_examples", "HELDOUT_SEED", "HELDOUT_N",
           "attention_recorder", "forward_layers"]

ATTENTION_NAME = "neurips26_dllm"
HELDOUT_SEED = 10_000_019
HELDOUT_N = 1000  # held-out prompts per task; training drops every one of them


@dataclass
class _Ctx:
    key_mask: torch.Tensor | None = None  # (B, N) bool over *all* key positions; True = attend
    record: dict | None = None            # layer_idx -> (B, q, N) head-mean attention probabilities


_CTX: contextvars.ContextVar[_Ctx | None] = contextvars.ContextVar("neurips26_dllm_ctx", default=None)


def _attention(module, query, key, value, attention_mask=None, scaling=None, dropout=0.0, **kwargs):
    """Bidirectional attention: query (B, H, q, D) over key/value (B, Hkv, N, D); padding from the context."""
    ctx = _CTX.get()
    if key.shape[1] != query.shape[1]:
        g = query.shape[1] // key.shape[1]
        key, value = key.repeat_interleave(g, 1), value.repeat_interleave(g, 1)
    mask = None
    if ctx is not None and ctx.key_mask is not None:
        mask = ctx.key_mask[:, None, None, :]
    elif attention_mask is not None:
        mask = attention_mask
    if ctx is not None and ctx.record is not None:
        scale = scaling if scaling is not None else query.shape[-1] ** -0.5
        scores = (query @ key.transpose(-1, -2)) * scale
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
        probs = torch.softmax(scores.float(), dim=-1).to(value.dtype)
        ctx.record[module.layer_idx] = probs.mean(1)
        out = probs @ value
    else:
        out = F.scaled_dot_product_attention(query, key, value, attn_mask=mask,
                                             dropout_p=dropout if module.training else 0.0, scale=scaling,
                                             is_causal=False)
    return out.transpose(1, 2).contiguous(), None


def _register() -> None:
    from transformers import AttentionInterface

    AttentionInterface.register(ATTENTION_NAME, _attention)


_register()


@dataclass(frozen=True)
class ModelConfig:
    """Quick model: 4 layers, width 192, 6 heads (~2M parameters)."""

    hidden_size: int = 192
    num_layers: int = 4
    num_heads: int = 6
    intermediate_size: int = 512
    max_positions: int = 256


def build_model(cfg: ModelConfig = ModelConfig(), vocab_size: int | None = None, seed: int = 0):
    """``LlamaForCausalLM`` with ``is_causal=False`` and our attention function, fp32, eval mode."""
    from transformers import LlamaConfig, LlamaForCausalLM

    vocab_size = TOKENIZER.vocab_size if vocab_size is None else check_int("vocab_size", vocab_size, 3)
    conf = LlamaConfig(vocab_size=vocab_size, hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
                       num_hidden_layers=cfg.num_layers, num_attention_heads=cfg.num_heads,
                       num_key_value_heads=cfg.num_heads, max_position_embeddings=cfg.max_positions,
                       is_causal=False, tie_word_embeddings=False, pad_token_id=TOKENIZER.pad_id,
                       bos_token_id=None, eos_token_id=TOKENIZER.eos_id)
    conf._attn_implementation = ATTENTION_NAME
    torch.manual_seed(seed)
    model = LlamaForCausalLM(conf)
    model.config._attn_implementation = ATTENTION_NAME
    model.config.mask_token_id = TOKENIZER.mask_id
    return model.float().eval()


def positions_from_mask(key_mask: torch.Tensor) -> torch.Tensor:
    """RoPE positions of left-padded rows: 0 at the first real token (padding gets 0 too)."""
    return (key_mask.long().cumsum(1) - 1).clamp(min=0)


@contextlib.contextmanager
def attention_recorder(record: dict | None, key_mask: torch.Tensor | None) -> Iterator[None]:
    token = _CTX.set(_Ctx(key_mask=key_mask, record=record))
    try:
        yield
    finally:
        _CTX.reset(token)


def forward(model, input_ids: torch.Tensor, *, key_mask: torch.Tensor | None = None,
            positions: torch.Tensor | None = None, cache=None, record: dict | None = None,
            hidden_states: bool = False):
    """One forward of ``model`` over ``input_ids`` (B, n).

    Without ``positions``: the full sequence (n = N). With ``positions`` (n,) LongTensor of absolute
    positions: ``input_ids`` are the tokens at those positions, RoPE uses their positions, and ``cache``
    (a :class:`~neurips26.dllm.cache.DiffusionKVCache`) writes their K/V there and returns all N positions'
    K/V, so they attend over the whole sequence. ``key_mask`` (B, N) marks real tokens (left padding).
    Returns the HF output (``logits`` (B, n, V); ``hidden_states`` when asked)."""
    B = input_ids.shape[0]
    if getattr(model.config, "_attn_implementation", None) != ATTENTION_NAME:  # any other HF masked LM
        if cache is not None or positions is not None or record is not None:
            raise ValueError("K/V reuse needs a model built by build_model (attention "
                             f"{ATTENTION_NAME!r}); other HF models decode with NoCache only")
        am = None if key_mask is None else key_mask.long()
        return model(input_ids=input_ids, attention_mask=am, output_hidden_states=hidden_states)
    if key_mask is None:
        N = input_ids.shape[1] if positions is None else cache.seq_length
        key_mask = torch.ones((B, N), dtype=torch.bool, device=input_ids.device)
    pos_full = positions_from_mask(key_mask)
    pos = pos_full if positions is None else pos_full[:, positions]
    kwargs = {}
    if cache is not None:
        cache.write_positions = positions
        kwargs.update(past_key_values=cache, use_cache=True)
    with attention_recorder(record, key_mask):
        out = model(input_ids=input_ids, position_ids=pos, output_hidden_states=hidden_states, **kwargs)
    if cache is not None:
        cache.write_positions = None
    return out


def forward_layers(model, hidden: torch.Tensor, *, key_mask: torch.Tensor, layers: range, cache,
                   positions: torch.Tensor | None = None, record: dict | None = None, inputs: list | None = None):
    """Run decoder ``layers`` of a model built by :func:`build_model` on ``hidden`` (B, n, d), the layer
    inputs at ``positions`` (all positions when None), writing their K/V into ``cache``. ``inputs[l]``
    receives each layer's input. Returns the hidden state after the last of ``layers`` (un-normed)."""
    pos_full = positions_from_mask(key_mask)
    pos = pos_full if positions is None else pos_full[:, positions]
    rot = model.model.rotary_emb(hidden, pos)
    with attention_recorder(record, key_mask):
        for li in layers:
            if inputs is not None:
                inputs[li] = hidden
            cache.write_positions = positions
            hidden = model.model.layers[li](hidden, attention_mask=None, position_ids=pos, past_key_values=cache,
                                            position_embeddings=rot)
    cache.write_positions = None
    return hidden


def _check_t_sampling(t_sampling) -> None:
    if t_sampling not in ("uniform", "stratified"):
        raise ValueError(f"t_sampling must be 'uniform' or 'stratified', got {t_sampling!r}")


def llada_sft_loss(model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, answer_ids: torch.Tensor,
                   mask_id: int, generator: torch.Generator | None = None, eps: float = 1e-3,
                   t_sampling: str = "uniform") -> torch.Tensor:
    """LLaDA's SFT objective: t ~ U(0, 1), p = (1 − eps) t + eps; each answer token is masked with
    probability p (the prompt never); cross-entropy on masked positions weighted 1/p, summed and divided by
    the answer length and the batch size.

    ``t_sampling="stratified"``: the batch's B masking levels are one uniform draw from each of the strata
    [k/B, (k+1)/B) in a random order (MDLM's low-discrepancy sampler, Sahoo et al. 2024). Each t is still
    marginally U(0, 1), so the loss is the same unbiased estimate; its variance across batches is lower (the
    1/p weights make a batch that happens to hold mostly small t very noisy)."""
    _check_t_sampling(t_sampling)
    B, G = answer_ids.shape
    t = torch.rand(B, 1, generator=generator)
    if t_sampling == "stratified":
        t = (torch.randperm(B, generator=generator).reshape(B, 1) + t) / B
    p = (1 - eps) * t + eps
    masked = torch.rand(B, G, generator=generator) < p
    noisy = torch.where(masked, torch.full_like(answer_ids, mask_id), answer_ids)
    x = torch.cat([prompt_ids, noisy], 1)
    km = torch.cat([prompt_mask, torch.ones_like(masked)], 1)
    logits = forward(model, x, key_mask=km).logits[:, prompt_ids.shape[1]:]
    ce = F.cross_entropy(logits[masked], answer_ids[masked], reduction="none")
    return (ce / p.expand(B, G)[masked]).sum() / (B * G)


@dataclass(frozen=True)
class TrainConfig:
    """What the cached checkpoint depends on (its hash names the file)."""

    model: ModelConfig = field(default_factory=ModelConfig)
    tasks: tuple[str, ...] = TASKS
    add_digits: tuple[int, int] = (3, 6)
    gen_length: int = 32
    steps: int = 3000
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 0.01
    warmup: int = 100
    seed: int = 0
    t_sampling: str = "uniform"  # LLaDA's; "stratified" measured no better here (sort/reverse 100/100 vs 100/97.9 %)

    def key(self) -> str:
        blob = json.dumps(asdict(self), sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def heldout_examples(task: str, n: int, add_digits: tuple[int, int] = (3, 6)):
    """The first ``n`` (at most ``HELDOUT_N``) held-out prompts of ``task``: never seen in training, since the
    trainer drops every prompt of the ``HELDOUT_N`` pool. Always a prefix of the pool: ``make_examples`` draws
    the add and mul operands as whole arrays, so a draw of n prompts is not the start of a draw of
    ``HELDOUT_N`` (a direct draw of 200 mul prompts had 178 of them in the full size's training data)."""
    n = check_int("n", n, 0)
    if n > HELDOUT_N:
        raise ValueError(f"n must be <= {HELDOUT_N} (the held-out pool that training excludes), got {n}")
    return make_examples(task, HELDOUT_N, HELDOUT_SEED + TASKS.index(task), add_digits=add_digits)[:n]


def _check_train(cfg: TrainConfig) -> None:
    if not isinstance(cfg, TrainConfig):
        raise TypeError(f"cfg must be a TrainConfig, got {type(cfg).__name__}")
    bad = [t for t in cfg.tasks if t not in TASKS]
    if not cfg.tasks or bad:
        raise ValueError(f"tasks must be a non-empty subset of {TASKS}, got {cfg.tasks}")
    check_int("steps", cfg.steps, 1)
    check_int("batch_size", cfg.batch_size, 1)
    check_int("gen_length", cfg.gen_length, 2)
    check_real("lr", cfg.lr, low=0.0, low_open=True)
    _check_t_sampling(cfg.t_sampling)


def train_dllm(cfg: TrainConfig = TrainConfig(), on_step: Callable[[int, float], None] | None = None):
    """Train from scratch on fresh generated batches (tasks in equal shares, held-out prompts removed) with
    AdamW, linear warm-up and cosine decay. Returns (model in eval mode, meta dict)."""
    _check_train(cfg)
    model = build_model(cfg.model, seed=cfg.seed).train()
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / cfg.warmup)
                                              * 0.5 * (1 + math.cos(math.pi * min(s, cfg.steps) / cfg.steps)))
    held = {e.prompt for t in cfg.tasks for e in heldout_examples(t, HELDOUT_N, cfg.add_digits)}
    g = torch.Generator().manual_seed(cfg.seed)
    losses, t0 = [], time.perf_counter()
    per = -(-cfg.batch_size // len(cfg.tasks))
    for step in range(cfg.steps):
        exs = []
        for j, task in enumerate(cfg.tasks):
            cand = make_examples(task, per, seed=cfg.seed * 1_000_003 + step * 31 + j, add_digits=cfg.add_digits)
            exs += [e for e in cand if e.prompt not in held]
        exs = exs[:cfg.batch_size]
        b = encode_batch(exs, cfg.gen_length)
        loss = llada_sft_loss(model, b["prompt_ids"], b["prompt_mask"], b["answer_ids"], TOKENIZER.mask_id, g,
                              t_sampling=cfg.t_sampling)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        if on_step is not None:
            on_step(step, losses[-1])
    meta = {"config": asdict(cfg), "key": cfg.key(), "losses": losses[::10], "final_loss": float(np.mean(losses[-50:])),
            "train_s": time.perf_counter() - t0, "n_params": sum(p.numel() for p in model.parameters())}
    return model.eval(), meta


def cache_path(cfg: TrainConfig) -> Path:
    return cache_root() / f"dllm-{cfg.key()}.pt"


def pretrained_dllm(cfg: TrainConfig = TrainConfig(), retrain: bool = False,
                    on_step: Callable[[int, float], None] | None = None):
    """The cached model for ``cfg`` (trained and saved atomically first when absent or ``retrain``)."""
    _check_train(cfg)
    path = cache_path(cfg)
    if path.exists() and not retrain:
        blob = torch.load(path, map_location="cpu", weights_only=False)
        model = build_model(cfg.model)
        model.load_state_dict(blob["state_dict"])
        return model.eval(), blob["meta"]
    model, meta = train_dllm(cfg, on_step)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path) as fh:
        torch.save({"state_dict": model.state_dict(), "meta": meta}, fh)
    return model, meta
