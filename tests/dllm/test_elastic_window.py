"""Elastic-Cache's sliding window (``ElasticCache(gamma, window=β)``).

* ``window=None`` is the class as it was before the window existed, bit for bit: a verbatim copy of that class
  (``OldElasticCache`` below) gives ``torch.equal`` logits at every step, the same tokens and the same cost.
* ``window=β`` equals a direct transcription of the published rule (Nguyen-Tri, Ranjan and Shen 2025, §3:
  decode and query only the β leftmost masked positions, off-window masks keep their cached K/V; most-attended
  tokens T^l tracked as queries; recompute from the first layer whose attention rows of T^l drift below cosine
  γ). The transcription keeps each layer's *inputs* for all positions and runs every layer as a full
  single-layer forward over them, so it shares no code with ``DiffusionKVCache`` or ``forward_layers``.
* γ = 1 with a window equals full recompute decoding restricted to the window (``NoCache`` + ``SlidingWindow``).
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from neurips26._checks import check_real
from neurips26.dllm import (ElasticCache, Factor, LowConfidence, NoCache, PolestarCommit, Threshold, decode)
from neurips26.dllm.cache import CacheRule, SlidingWindow, window_mask
from neurips26.dllm.model import ModelConfig, attention_recorder, build_model, forward_layers, positions_from_mask
from neurips26.dllm.tasks import TOKENIZER

TINY = ModelConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, max_positions=128)
TINY3 = ModelConfig(hidden_size=32, num_layers=3, num_heads=4, intermediate_size=64, max_positions=128)
MASK = TOKENIZER.mask_id


def sharp(cfg, seed, attention=1.0):
    m = build_model(cfg, seed=seed)
    with torch.no_grad():  # sharpen the random model so that confidences spread over (0, 1)
        m.lm_head.weight.mul_(8.0)
        for layer in m.model.layers:  # and its attention, so that attention rows move when a key changes
            layer.self_attn.q_proj.weight.mul_(attention)
            layer.self_attn.k_proj.weight.mul_(attention)
    return m


@pytest.fixture(scope="module")
def model():
    return sharp(TINY, 1)


@pytest.fixture(scope="module")
def model3():
    return sharp(TINY3, 2, attention=6.0)  # cosines of the tracked rows between steps: 0.98 .. 1


def prompts(n=2, length=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, TOKENIZER.vocab_size, (n, length), generator=g)


# --- the class before the window: a verbatim copy --------------------------------------------------------------
class OldElasticCache(CacheRule):
    """Elastic-Cache (attention-aware, layer-aware refresh). Each step computes the block and every position
    whose token changed through all layers against cached K/V. At each layer l it compares the block's
    attention over the ``top_k`` tokens the block attended most at the previous step with the previous step's
    (cosine); from the first layer whose similarity falls below ``gamma`` on, all positions' K/V are
    recomputed (layers below keep their cache). Not implemented: Elastic-Cache's sliding window over masked
    tokens (the whole block is queried). Needs a model from :func:`~neurips26.dllm.model.build_model`."""

    def __init__(self, gamma: float = 0.9, top_k: int = 4):
        self.gamma = check_real("gamma", gamma, low=0.0, high=1.0)
        self.top_k = int(top_k)
        if self.top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {top_k}")

    def start(self, model, x, key_mask):
        super().start(model, x, key_mask)
        self._L = int(model.config.num_hidden_layers)
        self._inputs = [None] * self._L
        self._prev = None  # per layer: (B, q, N) attention rows of the block queries at the previous step
        self._dirty = torch.zeros_like(key_mask)
        self._started = False

    def _head(self, model, h):
        return model.lm_head(model.model.norm(h)), model.model.norm(h)

    def step(self, model, x, key_mask, s, e, block_start):
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

    def after_commit(self, changed):
        self._dirty |= changed


def record_steps(model, p, cache, commit, **kw):
    seen = []
    r = decode(model, p, cache=cache, commit=commit, mask_id=MASK, step_callback=lambda b, i, lg: seen.append(lg.clone()),
               **kw)
    return r, seen


@pytest.mark.parametrize("gamma", [0.0, 0.9, 0.99, 0.997, 1.0])
def test_window_none_is_the_old_class_bit_for_bit(model3, gamma):
    p = prompts(n=3, length=5, seed=11)
    kw = dict(gen_length=12, block_length=4)
    for commit in (lambda: LowConfidence(2), lambda: Threshold(0.5)):
        a, la = record_steps(model3, p, OldElasticCache(gamma, top_k=3), commit(), **kw)
        b, lb = record_steps(model3, p, ElasticCache(gamma, top_k=3), commit(), **kw)
        assert len(la) == len(lb) and all(torch.equal(x, y) for x, y in zip(la, lb))
        assert torch.equal(a.tokens, b.tokens) and a.nfe == b.nfe
        assert a.positions_recomputed == b.positions_recomputed


# --- the published rule, transcribed ----------------------------------------------------------------------------
def layer_full(model, l, H, key_mask):
    """Decoder layer ``l`` over all positions of its inputs ``H`` (B, N, d): outputs and attention rows (B, N, N)."""
    pos = positions_from_mask(key_mask)
    rec = {}
    with attention_recorder(rec, key_mask):
        out = model.model.layers[l](H, attention_mask=None, position_ids=pos,
                                    position_embeddings=model.model.rotary_emb(H, pos))
    return out, rec[l].float()


def leftmost(masked_row, beta):
    """Indices of the beta leftmost True entries of a 1-D bool tensor (M^t_beta)."""
    return [int(i) for i in masked_row.nonzero().flatten()[:beta]]


@torch.no_grad()
def transcribed_elastic_window(model, prompt, gen_length, block_length, beta, gamma, top_k, tau):
    """Elastic-Cache's sliding-window decoding with its attention-aware, layer-aware refresh, and Fast-dLLM's
    threshold commit (tau) inside the window, written as a loop over full single-layer forwards: H[l] holds each
    position's layer-l input as last computed (a position not queried keeps it, hence its K/V), R[l] each
    position's attention row as last computed."""
    B, Lp = prompt.shape
    N, L = Lp + gen_length, int(model.config.num_hidden_layers)
    x = torch.cat([prompt, torch.full((B, gen_length), MASK, dtype=torch.long)], 1)
    km = torch.ones((B, N), dtype=torch.bool)
    emb = model.model.embed_tokens
    H, R = [None] * L, [None] * L
    h = emb(x)
    for l in range(L):  # step 1: the full forward
        H[l] = h.clone()
        h, R[l] = layer_full(model, l, H[l], km)
    out = h
    T, changed, first, all_logits, cost, events = None, set(), True, [], 0.0, []
    for nb in range(gen_length // block_length):
        s, e = Lp + nb * block_length, Lp + (nb + 1) * block_length
        while (x[:, s:e] == MASK).any():
            masked = x == MASK
            win = torch.zeros((B, N), dtype=torch.bool)
            for b in range(B):
                win[b, [s + i for i in leftmost(masked[b, s:e], beta)]] = True
            if first:
                cost += N
            else:
                Q = sorted(changed | set(win.any(0).nonzero().flatten().tolist())
                           | {int(t) for Tl in T for t in Tl.flatten()})
                hq, refreshed = emb(x)[:, Q], False
                for l in range(L):
                    H[l][:, Q] = hq
                    o, rows = layer_full(model, l, H[l], km)
                    sims = [F.cosine_similarity(rows[b, T[l][b]].flatten(), R[l][b, T[l][b]].flatten(), dim=0)
                            for b in range(B)]
                    R[l][:, Q] = rows[:, Q]
                    if float(min(sims)) < gamma:  # drift at layer l: recompute every position from l on
                        hh = H[l]
                        for m in range(l, L):
                            H[m] = hh.clone()
                            hh, R[m] = layer_full(model, m, H[m], km)
                        out, refreshed = hh, True
                        events.append(l)
                        cost += (len(Q) * (l + 1) + N * (L - l)) / L
                        break
                    hq = o[:, Q]
                if not refreshed:
                    out[:, Q] = hq
                    cost += len(Q)
                    events.append(None)
            first = False
            logits = model.lm_head(model.model.norm(out[:, s:e]))
            all_logits.append(logits)
            # most-attended decoded (or prompt) tokens of each layer, from the window's queries
            k = min(top_k, int((~masked).sum(1).min()))
            T = [(win.float()[:, :, None] * R[l]).sum(1).masked_fill(masked, float("-inf")).topk(k, dim=1).indices
                 for l in range(L)]
            # threshold commit inside the window, at least the most confident window token
            x0 = logits.argmax(-1)
            conf = F.softmax(logits.double(), -1).gather(-1, x0[..., None]).squeeze(-1)
            wm = win[:, s:e]
            conf = torch.where(wm, conf, torch.full_like(conf, float("-inf")))
            tr = wm & (conf >= tau)
            for b in range(B):
                if wm[b].any():
                    tr[b, int(conf[b].argmax())] = True
            x[:, s:e] = torch.where(tr, x0, x[:, s:e])
            changed = {s + int(i) for i in tr.any(0).nonzero().flatten()}
    return x[:, Lp:], all_logits, cost, events


@pytest.mark.parametrize("beta, gamma, tau, seed", [(1, 0.99, 0.5, 1), (2, 0.99, 0.1, 0), (2, 0.997, 0.1, 1),
                                                     (3, 0.997, 0.1, 1), (8, 0.997, 0.5, 1), (3, 0.0, 0.1, 0),
                                                     (2, 1.0, 0.5, 0)])
def test_window_equals_the_transcribed_published_rule(model3, beta, gamma, tau, seed):
    p = prompts(n=2, length=5, seed=seed)
    gen, blk = 16, 8
    ref_tokens, ref_logits, ref_cost, events = transcribed_elastic_window(model3, p, gen, blk, beta, gamma, 2, tau)
    refreshes = [ev for ev in events if ev is not None]
    if gamma == 0.0:
        assert not refreshes  # cosines of non-negative rows are >= 0: never below 0
    elif gamma < 1.0:  # the drift test decides both ways on this run (else the case tests nothing)
        assert refreshes and len(refreshes) < len(events)
    cache = ElasticCache(gamma, top_k=2, window=beta)
    r, seen = record_steps(model3, p, cache, cache.windowed(Threshold(tau)), gen_length=gen, block_length=blk)
    assert torch.equal(r.tokens, ref_tokens) and r.nfe == len(ref_logits)
    assert max(float((a - b).abs().max()) for a, b in zip(seen, ref_logits)) <= 1e-5
    assert np.isclose(r.positions_recomputed, ref_cost)
    assert not (r.tokens == MASK).any()


@pytest.mark.parametrize("beta", [1, 3, 4])
def test_gamma_one_with_a_window_is_full_recompute_in_the_window(model, beta):
    """gamma = 1 refreshes every layer at every step: NoCache's logits (1e-5) with the same windowed commits; a
    window as wide as the block decodes what the unrestricted rule decodes."""
    p = prompts(n=2, length=6, seed=4)
    kw = dict(gen_length=12, block_length=4)
    a, la = record_steps(model, p, NoCache(), SlidingWindow(Threshold(0.6), beta), **kw)
    cache = ElasticCache(1.0, window=beta)
    b, lb = record_steps(model, p, cache, cache.windowed(Threshold(0.6)), **kw)
    assert torch.equal(a.tokens, b.tokens) and a.nfe == b.nfe
    assert max(float((x - y).abs().max()) for x, y in zip(la, lb)) < 1e-5
    if beta >= 4:
        c = decode(model, p, commit=Threshold(0.6), cache=NoCache(), mask_id=MASK, **kw)
        assert torch.equal(c.tokens, a.tokens)
    else:  # a narrow window commits fewer tokens per forward
        c = decode(model, p, commit=Threshold(0.6), cache=NoCache(), mask_id=MASK, **kw)
        assert a.nfe >= c.nfe


def test_window_mask_is_the_leftmost_masked_positions():
    m = torch.tensor([[True, False, True, True, True], [False, False, False, False, True], [False] * 5])
    got = window_mask(m, 2)
    want = torch.zeros_like(m)
    for b in range(3):
        want[b, leftmost(m[b], 2)] = True
    assert torch.equal(got, want) and got.sum(1).tolist() == [2, 1, 0]


@pytest.mark.parametrize("rule", [lambda: LowConfidence(4), lambda: Factor(1.0), lambda: PolestarCommit(tau_low=0.5)])
def test_window_terminates_with_every_commit_rule(model, rule):
    p = prompts(n=3, length=4, seed=6)
    cache = ElasticCache(0.8, window=2)
    r = decode(model, p, gen_length=12, block_length=6, commit=cache.windowed(rule()), cache=cache, mask_id=MASK)
    assert not (r.tokens == MASK).any() and r.nfe <= 12
    assert r.cost_per_token > 0


def test_window_bad_input_and_unwindowed_commit(model):
    with pytest.raises(ValueError, match="window must be an integer >= 1"):
        ElasticCache(0.9, window=0)
    with pytest.raises(TypeError, match="window must be an integer"):
        ElasticCache(0.9, window=2.5)
    with pytest.raises(ValueError, match="needs ElasticCache\\(window=...\\)"):
        ElasticCache(0.9).windowed(Threshold(0.9))
    with pytest.raises(TypeError, match="rule must be a CommitRule"):
        SlidingWindow("threshold", 2)
    with pytest.raises(ValueError, match="commit=cache.windowed"):  # commits outside the window are refused
        decode(model, prompts(), gen_length=8, block_length=8, commit=Threshold(0.0), cache=ElasticCache(0.9, window=2),
               mask_id=MASK)
