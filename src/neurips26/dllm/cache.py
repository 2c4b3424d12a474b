"""Cache rules: how each decoding step obtains the current block's logits, reusing K/V where the rule allows.

A rule's ``step(model, x, key_mask, s, e, block_start)`` returns the block's logits (B, e−s, V), its
last-layer hidden states (B, e−s, d) and the number of positions recomputed (per row; times the number of
layers it is the hardware-independent cost). ``after_commit(changed)`` tells it which positions received a
token. All K/V live in a :class:`~neurips26.dllm.kvcache.DiffusionKVCache`.

* :class:`NoCache` — full forward every step (LLaDA).
* :class:`PrefixCache`, :class:`DualCache` — Fast-dLLM: full recompute at each block start; inside the block
  recompute block+suffix (prefix cached) or only the block (prefix and suffix cached).
* :class:`DLLMCache` — dLLM-Cache: periodic prompt / response refresh, V-verify selection in between.
* :class:`ElasticCache` — Elastic-Cache: recompute from the first layer whose attention drifts below γ;
  ``window=β`` adds its sliding-window decoding (with :class:`SlidingWindow`, the commit side).
* :class:`PolestarCache` — Polestar-Cache: drift per position and layer → refresh K/V only at stale positions.
"""

from __future__ import annotations

import torch

from .._checks import check_int, check_real
from .commit import CommitRule
from .kvcache import DiffusionKVCache
from .model import forward

__all__ = ["CacheRule", "NoCache", "PrefixCache", "DualCache", "PolestarCache", "ElasticCache", "DLLMCache",
           "DiffusionKVCache", "SlidingWindow", "window_mask",
           "drift_trace"]


def _num_layers(model) -> int:
    return int(model.config.num_hidden_layers)


def _out(out, s, e):
    hs = out.hidden_states[-1] if out.hidden_states is not None else None
    return out.logits, hs


class CacheRule:
    """Base class: ``start(model, x, key_mask)`` at the start of a sequence, ``step`` at every step."""

    uses_cache = True

    def start(self, model, x, key_mask) -> None:
        self.cache = DiffusionKVCache(_num_layers(model)) if self.uses_cache else None

    def step(self, model, x, key_mask, s, e, block_start):
        raise NotImplementedError

    def after_commit(self, changed: torch.Tensor) -> None:
        pass

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v}" for k, v in vars(self).items() if not k.startswith("_") and k != "cache")
        return f"{type(self).__name__}({args})"


class NoCache(CacheRule):
    """Full forward over the whole sequence at every step (works with any HF masked LM)."""

    uses_cache = False

    def step(self, model, x, key_mask, s, e, block_start):
        out = forward(model, x, key_mask=key_mask, hidden_states=True)
        logits, hs = _out(out, s, e)
        return logits[:, s:e], hs[:, s:e], x.shape[1]


class _BlockCache(CacheRule):
    reuse_suffix = True

    def step(self, model, x, key_mask, s, e, block_start):
        N = x.shape[1]
        if block_start:
            out = forward(model, x, key_mask=key_mask, cache=self.cache, hidden_states=True)
            logits, hs = _out(out, s, e)
            return logits[:, s:e], hs[:, s:e], N
        stop = e if self.reuse_suffix else N
        pos = torch.arange(s, stop, device=x.device)
        out = forward(model, x[:, s:stop], key_mask=key_mask, positions=pos, cache=self.cache, hidden_states=True)
        logits, hs = _out(out, s, e)
        return logits[:, :e - s], hs[:, :e - s], stop - s


class PrefixCache(_BlockCache):
    """Fast-dLLM prefix cache: full forward at each block start; then the prefix's K/V are reused and the
    block and everything after it are recomputed."""

    reuse_suffix = False


class DualCache(_BlockCache):
    """Fast-dLLM dual cache: full forward at each block start; then only the block is recomputed, attending
    to the cached prefix and suffix K/V (the block's K/V are written at its positions)."""


class PolestarCache(CacheRule):
    """Polestar-Cache: sparse K/V refresh at stale positions, stale judged by drift per position and layer.

    After a position p is computed at layer l, its attention row a_l(p, ·) is kept. When tokens commit at a
    set C of positions, the representation of p at layer l drifts in proportion to the attention it pays
    to them; the estimate d_l(p) += Σ_{j∈C} a_l(p, j) accumulates until p is recomputed. At each step the
    forward covers the current block, every position whose token changed since it was last computed, and the
    stale positions max_l d_l(p) > ``threshold``; all other positions keep their cached K/V. The first step is a
    full forward. ``threshold = 0`` refreshes everything at every step: the full-recompute path (NoCache's
    forward, bit for bit). Batched rows share one position set (the union)."""

    def __init__(self, threshold: float = 0.1, keep_trace: bool = False):
        self.threshold = check_real("threshold", threshold, low=0.0, high=1.0)
        self.keep_trace = bool(keep_trace)
        self.trace: list[torch.Tensor] = []

    @classmethod
    def calibrate(cls, model, prompt_ids: torch.Tensor, *, budget: float = 0.25, gen_length: int, block_length: int,
                  commit, mask_id: int, prompt_mask: torch.Tensor | None = None,
                  grid=(0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0)) -> tuple["PolestarCache", float]:
        """The smallest drift threshold in ``grid`` whose refresh fraction (positions recomputed over positions
        a full recompute would touch, on these calibration prompts) is ≤ ``budget``; returns (the cache rule, the
        fraction it reached). When no threshold meets the budget (the current block alone costs more), the
        largest threshold is returned with its fraction. ``commit`` is a zero-argument factory of the commit rule."""
        from .decode import decode

        budget = check_real("budget", budget, low=0.0, low_open=True, high=1.0)
        if not callable(commit):
            raise TypeError("commit must be a zero-argument factory of a CommitRule, e.g. lambda: Threshold(0.9)")
        grid = sorted(check_real("grid value", g, low=0.0, high=1.0) for g in grid)
        if not grid:
            raise ValueError("grid must hold at least one threshold in [0, 1]")
        N = prompt_ids.shape[1] + gen_length
        frac = 1.0
        for t in grid:
            r = decode(model, prompt_ids, prompt_mask=prompt_mask, gen_length=gen_length, block_length=block_length,
                       commit=commit(), cache=cls(t), mask_id=mask_id)
            frac = r.positions_recomputed / (r.nfe * N)
            if frac <= budget:
                return cls(t), frac
        return cls(grid[-1]), frac

    def start(self, model, x, key_mask):
        super().start(model, x, key_mask)
        B, N = x.shape
        L = _num_layers(model)
        self._key_mask = key_mask
        self._att = torch.zeros((L, B, N, N), dtype=torch.float32, device=x.device)
        self._drift = torch.zeros((L, B, N), dtype=torch.float32, device=x.device)
        self._dirty = torch.zeros((B, N), dtype=torch.bool, device=x.device)
        self._started = False
        self.trace = []

    def _record(self, rec, pos):
        for l, probs in rec.items():
            if pos is None:
                self._att[l] = probs.float()
                self._drift[l] = 0
            else:
                self._att[l][:, pos] = probs.float()
                self._drift[l][:, pos] = 0

    def stale(self) -> torch.Tensor:
        """(B, N) positions whose estimated drift exceeds the threshold or whose token changed."""
        return ((self._drift.amax(0) > self.threshold) | self._dirty) & self._key_mask

    def step(self, model, x, key_mask, s, e, block_start):
        N = x.shape[1]
        if self.threshold == 0.0:  # full recompute: exactly NoCache's forward
            out = forward(model, x, key_mask=key_mask, hidden_states=True)
            logits, hs = _out(out, s, e)
            return logits[:, s:e], hs[:, s:e], N
        if not self._started:
            rec = {}
            out = forward(model, x, key_mask=key_mask, cache=self.cache, record=rec, hidden_states=True)
            self._record(rec, None)
            self._dirty.zero_()
            self._started = True
            logits, hs = _out(out, s, e)
            return logits[:, s:e], hs[:, s:e], N
        sel = self.stale().any(0)
        sel[s:e] = True
        pos = sel.nonzero().squeeze(1)
        rec = {}
        out = forward(model, x[:, pos], key_mask=key_mask, positions=pos, cache=self.cache, record=rec,
                      hidden_states=True)
        self._record(rec, pos)
        self._dirty[:, pos] = False
        blk = (pos >= s) & (pos < e)
        logits, hs = _out(out, s, e)
        return logits[:, blk], hs[:, blk], int(pos.numel())

    def after_commit(self, changed):
        if self.threshold == 0.0 or not changed.any():
            return
        self._dirty |= changed
        self._drift += (self._att * changed[None, :, None, :].float()).sum(-1)
        if self.keep_trace:
            self.trace.append(self._drift.clone())


def drift_trace(model, prompt_ids: torch.Tensor, *, gen_length: int, block_length: int, commit, mask_id: int,
                threshold: float = 0.2, prompt_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Polestar's estimated drift per step, layer and position while decoding ``prompt_ids`` with
    ``PolestarCache(threshold)``: a (steps, L, B, N) tensor (after each commit, before the next refresh) to plot
    and to choose the threshold from."""
    from .decode import decode

    cache = PolestarCache(threshold, keep_trace=True)
    if cache.threshold == 0.0:
        raise ValueError("threshold 0 refreshes everything and keeps no drift; use a threshold in (0, 1]")
    decode(model, prompt_ids, prompt_mask=prompt_mask, gen_length=gen_length, block_length=block_length,
           commit=commit, cache=cache, mask_id=mask_id)
    return torch.stack(cache.trace)


class SlidingWindow(CommitRule):
    """Elastic-Cache's sliding-window decoding as a commit-rule wrapper: only the ``window`` leftmost masked
    positions of each row (inside the current block) may commit; ``rule`` (any commit rule) decides among them.
    With ``block_length = gen_length`` the window slides over the whole answer, as in Elastic-Cache; with
    smaller blocks it slides inside each block. Use it with ``ElasticCache(window=...)`` through
    :meth:`ElasticCache.windowed`, or alone with any cache rule (then it only restricts decoding). It is a commit
    rule because :func:`~neurips26.dllm.decode.decode` hands the block's mask to the commit rule: a cache rule
    can choose what is computed, not what is committed."""

    def __init__(self, rule: CommitRule, window: int):
        if not isinstance(rule, CommitRule):
            raise TypeError(f"rule must be a CommitRule, got {type(rule).__name__}")
        self.rule = rule
        self.window = check_int("window", window, 1)
        self.needs_hidden = rule.needs_hidden

    def start_block(self, mask):
        self.rule.start_block(mask)

    def select(self, logits, mask, hidden=None):
        return self.rule.select(logits, window_mask(mask, self.window), hidden)


def window_mask(mask: torch.Tensor, window: int) -> torch.Tensor:
    """(B, n) bool: the ``window`` leftmost True entries of each row of ``mask`` (Elastic-Cache's M^t_β)."""
    return mask & (mask.long().cumsum(1) <= window)


class ElasticCache(CacheRule):
    """Elastic-Cache (attention-aware, layer-aware refresh), with its sliding window as an option.

    ``window=None`` (default): each step computes the block and every position whose token changed through
    all layers against cached K/V. At each layer l it compares the block's attention over the ``top_k`` tokens
    the block attended most at the previous step with the previous step's (cosine); from the first layer whose
    similarity falls below ``gamma`` on, all positions' K/V are recomputed (layers below keep their cache).

    ``window=β``: Elastic-Cache's sliding-window decoding (Nguyen-Tri, Ranjan and Shen, "Attention Is All You
    Need for KV Cache in Diffusion LLMs", 2025, §3): only the β leftmost masked positions of the block, M^t_β,
    are predicted and queried; masked positions off the window keep the K/V of their last computation (the
    off-window MASK cache) and their logits are that computation's. Decoding must be restricted to the window
    too: pass ``commit=cache.windowed(rule)`` (a :class:`SlidingWindow`); a commit outside the window raises.
    The drift test is the paper's: per layer l, T^l = the ``top_k`` decoded or prompt tokens with the most
    attention from the window's queries (the most-attended tokens), kept as queries at the next step; σ^l =
    cosine between T^l's attention rows now and at their previous computation, and from the first layer with
    σ^l < ``gamma`` on, all positions are recomputed. Queries: the window ∪ positions whose token changed ∪ the
    tracked T (batched rows share the union). Needs a model from :func:`~neurips26.dllm.model.build_model`."""

    def __init__(self, gamma: float = 0.9, top_k: int = 4, window: int | None = None):
        self.gamma = check_real("gamma", gamma, low=0.0, high=1.0)
        self.top_k = int(top_k)
        if self.top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {top_k}")
        self.window = None if window is None else check_int("window", window, 1)

    def windowed(self, rule: CommitRule) -> SlidingWindow:
        """``rule`` restricted to this cache's sliding window (the commit rule to decode with)."""
        if self.window is None:
            raise ValueError("windowed() needs ElasticCache(window=...) with a window size >= 1")
        return SlidingWindow(rule, self.window)

    def start(self, model, x, key_mask):
        super().start(model, x, key_mask)
        self._L = _num_layers(model)
        self._inputs = [None] * self._L
        self._prev = None  # per layer: (B, q, N) attention rows of the block queries at the previous step
        self._dirty = torch.zeros_like(key_mask)
        self._started = False
        self._masked = None  # window mode: (B, N) positions still masked (x == [MASK], read at each step)

    def _head(self, model, h):
        return model.lm_head(model.model.norm(h)), model.model.norm(h)

    def step(self, model, x, key_mask, s, e, block_start):
        if self.window is None:
            return self._step_block(model, x, key_mask, s, e, block_start)
        return self._step_window(model, x, key_mask, s, e)

    def _step_block(self, model, x, key_mask, s, e, block_start):
        from .model import forward_layers

        B, N = x.shape
        if not self._started:
            inputs, rec = [None] * self._L, {}
            h = forward_layers(model, model.model.embed_tokens(x), key_mask=key_mask, layers=range(self._L),
                               cache=self.cache, inputs=inputs, record=rec)
            self._inputs = inputs
            self._started, self._prev = True, [rec[li][:, s:e] for li in range(self._L)]
            self._dirty.zero_()
            logits, hs = self._head(model, h[:, s:e])
            return logits, hs, N
        sel = self._dirty.any(0) & key_mask.any(0)
        sel[s:e] = True
        pos = sel.nonzero().squeeze(1)
        blk = (pos >= s) & (pos < e)
        n_q = int(pos.numel())
        h = model.model.embed_tokens(x[:, pos])
        cur, start_layer = [], None
        for li in range(self._L):
            rec: dict = {}
            inputs = [None] * self._L
            h_next = forward_layers(model, h, key_mask=key_mask, layers=range(li, li + 1), cache=self.cache,
                                    positions=pos, record=rec, inputs=inputs)
            self._inputs[li][:, pos] = h
            cur.append(rec[li][:, blk])
            if self._prev is not None and self._prev[li].shape == cur[li].shape:
                top = self._prev[li].sum(1).topk(min(self.top_k, N), dim=1).indices  # most-attended tokens
                idx = top[:, None, :].expand(-1, cur[li].shape[1], -1)
                sim = torch.nn.functional.cosine_similarity(cur[li].gather(2, idx).flatten(1),
                                                            self._prev[li].gather(2, idx).flatten(1), dim=1)
                if float(sim.min()) < self.gamma:
                    start_layer = li
                    break
            h = h_next
        self._dirty[:, pos] = False
        if start_layer is None:
            self._prev = cur
            logits, hs = self._head(model, h[:, blk])
            return logits, hs, n_q
        # drift at layer `start_layer`: recompute every position from there on (the block's queries included)
        inputs = [None] * self._L
        rec = {}
        h = forward_layers(model, self._inputs[start_layer], key_mask=key_mask, layers=range(start_layer, self._L),
                           cache=self.cache, inputs=inputs, record=rec)
        for li in range(start_layer, self._L):
            self._inputs[li] = inputs[li]
        self._prev = cur[:start_layer] + [rec[li][:, s:e] for li in range(start_layer, self._L)]
        logits, hs = self._head(model, h[:, s:e])
        return logits, hs, (n_q * (start_layer + 1) + N * (self._L - start_layer)) / self._L

    # --- sliding-window mode -------------------------------------------------------------------------------
    def _set_window(self, s, e):
        """This step's window M^t_β as a (B, N) mask (``self._allowed``: the positions that may commit)."""
        self._allowed = torch.zeros_like(self._masked)
        self._allowed[:, s:e] = window_mask(self._masked[:, s:e], self.window)

    def _track(self, key_mask):
        """T^l per layer (B, k): the decoded/prompt tokens the window's queries attend most, from the rows now
        held (``self._rows``)."""
        eligible = key_mask & ~self._masked
        k = max(1, min(self.top_k, int(eligible.sum(1).min())))
        w = self._allowed.float()
        self._T = []
        for li in range(self._L):
            score = (w[:, :, None] * self._rows[li]).sum(1).masked_fill(~eligible, float("-inf"))  # (B, N)
            self._T.append(score.topk(k, dim=1).indices)

    def _step_window(self, model, x, key_mask, s, e):
        from .model import forward_layers

        B, N = x.shape
        if not self._started:  # the first step: a full forward; the whole answer is masked, so x[:, s] is [MASK]
            self._mask_id = int(x[0, s])
            self._masked = x == self._mask_id
            inputs, rec = [None] * self._L, {}
            h = forward_layers(model, model.model.embed_tokens(x), key_mask=key_mask, layers=range(self._L),
                               cache=self.cache, inputs=inputs, record=rec)
            self._inputs, self._rows, self._out = inputs, [rec[li].float() for li in range(self._L)], h
            self._started = True
            self._dirty.zero_()
            self._set_window(s, e)
            self._track(key_mask)
            logits, hs = self._head(model, h[:, s:e])
            return logits, hs, N
        self._masked = x == self._mask_id
        self._set_window(s, e)
        sel = self._dirty.any(0) | self._allowed.any(0)
        for T in self._T:
            sel[T.flatten()] = True
        sel &= key_mask.any(0)
        pos = sel.nonzero().squeeze(1)
        n_q = int(pos.numel())
        where = torch.full((N,), -1, dtype=torch.long, device=x.device)
        where[pos] = torch.arange(n_q, device=x.device)
        h = model.model.embed_tokens(x[:, pos])
        start_layer = None
        for li in range(self._L):
            rec: dict = {}
            h_next = forward_layers(model, h, key_mask=key_mask, layers=range(li, li + 1), cache=self.cache,
                                    positions=pos, record=rec)
            self._inputs[li][:, pos] = h
            rows = rec[li].float()  # (B, n_q, N)
            T = self._T[li]  # (B, k), all among the queries
            now = rows.gather(1, where[T][:, :, None].expand(-1, -1, N))
            before = self._rows[li].gather(1, T[:, :, None].expand(-1, -1, N))
            self._rows[li][:, pos] = rows
            sim = torch.nn.functional.cosine_similarity(now.flatten(1), before.flatten(1), dim=1)
            if float(sim.min()) < self.gamma:
                start_layer = li
                break
            h = h_next
        self._dirty[:, pos] = False
        if start_layer is None:
            self._out[:, pos] = h
            cost = n_q
        else:  # drift at `start_layer`: recompute every position from there on
            inputs, rec = [None] * self._L, {}
            self._out = forward_layers(model, self._inputs[start_layer], key_mask=key_mask,
                                       layers=range(start_layer, self._L), cache=self.cache, inputs=inputs, record=rec)
            for li in range(start_layer, self._L):
                self._inputs[li] = inputs[li]
                self._rows[li] = rec[li].float()
            cost = (n_q * (start_layer + 1) + N * (self._L - start_layer)) / self._L
        self._track(key_mask)
        logits, hs = self._head(model, self._out[:, s:e])
        return logits, hs, cost

    def after_commit(self, changed):
        self._dirty |= changed
        if self.window is not None and self._masked is not None:
            if (changed & ~self._allowed).any():
                raise ValueError("ElasticCache(window=...) decodes only its sliding window: decode with "
                                 "commit=cache.windowed(rule) (a SlidingWindow of the same size)")


class DLLMCache(CacheRule):
    """dLLM-Cache (adaptive feature caching). Every ``kp`` steps the whole sequence is recomputed; every ``kr``
    steps the response (all generated positions); at the other steps, layer by layer, the value vectors of
    every response position are computed from its current layer input and only the ``rho`` fraction whose
    values moved most (cosine) since they were cached is recomputed at that layer (V-verify); the others
    reuse their cached layer output. Batched rows share one position set per layer (union of each row's
    top fraction). Needs a model from :func:`~neurips26.dllm.model.build_model`."""

    def __init__(self, kp: int = 50, kr: int = 7, rho: float = 0.25):
        from .._checks import check_int

        self.kp = check_int("kp", kp, 1)
        self.kr = check_int("kr", kr, 1)
        self.rho = check_real("rho", rho, low=0.0, low_open=True, high=1.0)

    def start(self, model, x, key_mask):
        super().start(model, x, key_mask)
        self._L = _num_layers(model)
        self._t = 0
        self._lp = None

    def _values(self, model, li, h):
        layer = model.model.layers[li]
        return layer.self_attn.v_proj(layer.input_layernorm(h))

    def _refresh(self, model, x, key_mask, pos):
        from .model import forward_layers

        inputs = [None] * self._L
        src = x if pos is None else x[:, pos]
        h = forward_layers(model, model.model.embed_tokens(src), key_mask=key_mask, layers=range(self._L),
                           cache=self.cache, positions=pos, inputs=inputs)
        outs = inputs[1:] + [h]
        if pos is None:
            self._out = [o.clone() for o in outs]
            self._v = [self._values(model, li, inputs[li]) for li in range(self._L)]
        else:
            for li in range(self._L):
                self._out[li][:, pos] = outs[li]
                self._v[li][:, pos] = self._values(model, li, inputs[li])
        return h

    def step(self, model, x, key_mask, s, e, block_start):
        from .model import forward_layers

        B, N = x.shape
        t, self._t = self._t, self._t + 1
        if self._lp is None:  # the first step is the first block's: it starts right after the prompt
            self._lp = s
        resp = torch.arange(self._lp, N, device=x.device)
        if t % self.kp == 0:
            h = self._refresh(model, x, key_mask, None)
            return model.lm_head(model.model.norm(h[:, s:e])), model.model.norm(h[:, s:e]), N
        if t % self.kr == 0:
            h = self._refresh(model, x, key_mask, resp)
            hb = h[:, s - self._lp:e - self._lp]
            return model.lm_head(model.model.norm(hb)), model.model.norm(hb), int(resp.numel())
        R = int(resp.numel())
        k = max(1, int(round(self.rho * R)))
        h = model.model.embed_tokens(x[:, resp])
        work = 0
        for li in range(self._L):
            v = self._values(model, li, h)
            drift = 1 - torch.nn.functional.cosine_similarity(v, self._v[li][:, resp], dim=-1)  # (B, R)
            sel = torch.zeros(R, dtype=torch.bool, device=x.device)
            sel[drift.topk(k, dim=1).indices.flatten()] = True
            idx = sel.nonzero().squeeze(1)
            out = forward_layers(model, h[:, idx], key_mask=key_mask, layers=range(li, li + 1), cache=self.cache,
                                 positions=resp[idx])
            self._v[li][:, resp[idx]] = v[:, idx]
            self._out[li][:, resp[idx]] = out
            h = self._out[li][:, resp].clone()
            work += int(idx.numel())
        hb = h[:, s - self._lp:e - self._lp]
        return model.lm_head(model.model.norm(hb)), model.model.norm(hb), work / self._L
