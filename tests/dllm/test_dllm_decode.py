"""Decoders: commit rules on hand-worked logits, cache rules against full recompute and against a direct
transcription of Fast-dLLM's dual-cache loop, termination, monotone recompute, bad input."""

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from neurips26.dllm import (DLLMCache, DualCache, ElasticCache, Factor, LowConfidence, NoCache, PolestarCache, PolestarCommit, PrefixCache,
                            Threshold, decode)
from neurips26.dllm.model import ModelConfig, build_model
from neurips26.dllm.tasks import TOKENIZER

TINY = ModelConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, max_positions=128)
MASK = TOKENIZER.mask_id


@pytest.fixture(scope="module")
def model():
    m = build_model(TINY, seed=1)
    with torch.no_grad():  # sharpen the random model so that confidences spread over (0, 1)
        m.lm_head.weight.mul_(8.0)
    return m


def prompts(n=2, length=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, TOKENIZER.vocab_size, (n, length), generator=g)


def logits_from_probs(p):
    return torch.log(torch.tensor(p, dtype=torch.float64))


# --- commit rules on fixed logits ------------------------------------------------------------------------
def test_threshold_rule_hand_worked():
    # confidences 0.95, 0.6, 0.92, 0.5 (3 classes: the argmax probability is the first entry)
    probs = [[[0.95, 0.03, 0.02], [0.6, 0.3, 0.1], [0.92, 0.05, 0.03], [0.5, 0.25, 0.25]]]
    lg = logits_from_probs(probs)
    mask = torch.tensor([[True, True, False, True]])
    _, t = Threshold(0.9).select(lg, mask)
    assert t.tolist() == [[True, False, False, False]]  # 0.92 is not masked
    _, t = Threshold(0.99).select(lg, mask)
    assert t.tolist() == [[True, False, False, False]]  # none passes: the most confident one
    _, t = Threshold(0.6).select(lg, mask)
    assert t.tolist() == [[True, True, False, False]]  # >= as in Fast-dLLM's code


def _factor_reference(conf_sorted, factor):
    """Fast-dLLM's get_transfer_index_dynamic loop for one row, transcribed."""
    n = len(conf_sorted)
    threshs = [1 - factor / (k + 1) for k in range(1, n + 1)]
    threshs[0] = -1
    for top_i in range(n):
        if conf_sorted[top_i] < threshs[top_i]:
            break
    if top_i == 0 or top_i == n - 1:
        top_i += 1
    return top_i


def test_factor_rule_hand_worked_and_edge_case():
    # f = 1: thresholds for n = 1..4 are -1, 2/3, 3/4, 4/5
    probs = [[[0.9, 0.1], [0.7, 0.3], [0.6, 0.4], [0.55, 0.45]]]
    lg = logits_from_probs(probs)
    mask = torch.ones(1, 4, dtype=torch.bool)
    _, t = Factor(1.0).select(lg, mask)
    assert t.tolist() == [[True, True, False, False]]  # 0.6 < 3/4 fails at n = 3
    # only the last one fails: Fast-dLLM's loop commits all four; without the quirk three
    probs = [[[0.99, 0.01], [0.9, 0.1], [0.8, 0.2], [0.7, 0.3]]]
    lg = logits_from_probs(probs)
    _, t = Factor(1.0).select(lg, mask)
    assert t.sum() == 4 == _factor_reference([0.99, 0.9, 0.8, 0.7], 1.0)
    _, t = Factor(1.0, fastdllm_edge=False).select(lg, mask)
    assert t.tolist() == [[True, True, True, False]]


def test_factor_rule_matches_the_transcribed_loop_on_random_rows():
    g = torch.Generator().manual_seed(0)
    for _ in range(200):
        n = int(torch.randint(1, 9, (1,), generator=g))
        lg = torch.randn(1, 8, 5, generator=g, dtype=torch.float64) * 3
        mask = torch.zeros(1, 8, dtype=torch.bool)
        mask[0, torch.randperm(8, generator=g)[:n]] = True
        f = float(torch.rand(1, generator=g)) * 3 + 0.1
        _, t = Factor(f).select(lg, mask)
        conf = F.softmax(lg, -1).max(-1).values[mask].sort(descending=True).values.tolist()
        assert int(t.sum()) == _factor_reference(conf, f)
        assert not (t & ~mask).any()


def test_low_confidence_schedule_and_order():
    rule = LowConfidence(steps_per_block=2)
    mask = torch.tensor([[True, True, True, False, True]])
    rule.start_block(mask)
    probs = [[[0.5, 0.5], [0.9, 0.1], [0.7, 0.3], [0.99, 0.01], [0.8, 0.2]]]
    _, t = rule.select(logits_from_probs(probs), mask)
    assert t.tolist() == [[False, True, False, False, True]]  # 4 masked over 2 steps: 2 now, best first


def test_polestar_commit_uses_settled_drift():
    rule = PolestarCommit(tau=0.95, tau_low=0.6, settle=0.01)
    mask = torch.ones(1, 3, dtype=torch.bool)
    rule.start_block(mask)
    probs = [[[0.7, 0.3], [0.65, 0.35], [0.5, 0.5]]]
    lg = logits_from_probs(probs)
    h1 = torch.tensor([[[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]]])
    _, t = rule.select(lg, mask, h1)
    assert t.tolist() == [[True, False, False]]  # first step: nothing settled yet, only the forced best
    h2 = torch.tensor([[[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]]])
    h2[0, 1] = torch.tensor([0.0, 1.0])  # position 1 still drifting
    _, t = rule.select(lg, mask, h2)
    assert t.tolist() == [[True, False, False]]  # position 2 settled but below tau_low; 1 drifts
    _, t = rule.select(lg, mask, h2)
    assert t.tolist() == [[True, True, False]]  # now 1 has settled with confidence 0.65 >= 0.6


# --- cache rules ---------------------------------------------------------------------------------------------
def test_polestar_threshold_zero_is_nocache_bit_for_bit(model):
    p = prompts()
    logs = {}
    for name, cache in (("none", NoCache()), ("pole", PolestarCache(0.0))):
        seen = []
        r = decode(model, p, gen_length=16, block_length=4, commit=LowConfidence(2), cache=cache, mask_id=MASK,
                   step_callback=lambda b, i, lg: seen.append(lg.clone()))
        logs[name] = (r, seen)
    (a, la), (b, lb) = logs["none"], logs["pole"]
    assert len(la) == len(lb) and all(torch.equal(x, y) for x, y in zip(la, lb))
    assert torch.equal(a.tokens, b.tokens) and a.positions_recomputed == b.positions_recomputed


def test_polestar_sparse_path_with_everything_stale_matches_full_forward(model):
    p = prompts()
    seen = {}
    for name, cache in (("none", NoCache()), ("pole", PolestarCache(1e-12))):
        s = []
        r = decode(model, p, gen_length=8, block_length=4, commit=LowConfidence(4), cache=cache, mask_id=MASK,
                   step_callback=lambda b, i, lg: s.append(lg.clone()))
        seen[name] = (r, s)
    (a, la), (b, lb) = seen["none"], seen["pole"]
    assert torch.equal(a.tokens, b.tokens)
    assert max(float((x - y).abs().max()) for x, y in zip(la, lb)) < 1e-5
    assert b.positions_recomputed <= a.positions_recomputed


def fastdllm_dual_cache(model, prompt, gen_length, block_length, steps, threshold=None):
    """Fast-dLLM's generate_with_dual_cache (llada/generate.py), transcribed onto transformers' own bidirectional
    Llama (attention 'eager', DynamicCache): replace_position is emulated by giving the cache the prefix and
    suffix K/V of the block-start forward (key order does not matter without a causal mask; RoPE is applied
    before caching)."""
    from transformers import DynamicCache

    old = model.config._attn_implementation
    model.config._attn_implementation = "eager"
    try:
        B, Lp = prompt.shape
        x = torch.full((B, Lp + gen_length), MASK, dtype=torch.long)
        x[:, :Lp] = prompt
        num_blocks = gen_length // block_length
        steps_per_block = steps // num_blocks
        nfe, all_logits = 0, []

        def transfer(logits, mask_index, xx, k):
            x0 = logits.argmax(-1)
            p = F.softmax(logits.to(torch.float64), -1)
            x0_p = torch.gather(p, -1, x0.unsqueeze(-1)).squeeze(-1)
            x0 = torch.where(mask_index, x0, xx)
            conf = torch.where(mask_index, x0_p, torch.tensor(torch.finfo(x0_p.dtype).min, dtype=x0_p.dtype))
            if threshold is not None:
                ti = mask_index & (conf >= threshold)
                force = torch.zeros_like(ti).scatter_(1, conf.argmax(1, keepdim=True), True)
                return x0, (ti | force) & mask_index
            ti = torch.zeros_like(mask_index)
            for j in range(conf.shape[0]):
                _, sel = torch.topk(conf[j], k=int(k[j]))
                ti[j, sel] = True
            return x0, ti & mask_index

        for nb in range(num_blocks):
            s, e = Lp + nb * block_length, Lp + (nb + 1) * block_length
            bm = x[:, s:e] == MASK
            total = bm.sum(1)
            base, rem = total // steps_per_block, total % steps_per_block
            ntt = base[:, None] + (torch.arange(steps_per_block)[None] < rem[:, None]).long()
            out = model(input_ids=x, use_cache=True)
            pkv = out.past_key_values
            nfe += 1
            keys = [pkv.layers[i].keys for i in range(len(pkv.layers))]
            vals = [pkv.layers[i].values for i in range(len(pkv.layers))]
            gmi = x == MASK
            gmi[:, e:] = False
            all_logits.append(out.logits[:, s:e])
            x0, ti = transfer(out.logits, gmi, x, ntt[:, 0])
            x = torch.where(ti, x0, x)
            for i in range(1, steps_per_block):
                if (x[:, s:e] == MASK).sum() == 0:
                    break
                cache = DynamicCache()
                for li in range(len(keys)):
                    cache.update(torch.cat([keys[li][:, :, :s], keys[li][:, :, e:]], 2),
                                 torch.cat([vals[li][:, :, :s], vals[li][:, :, e:]], 2), li)
                logits_blk = model(input_ids=x[:, s:e], position_ids=torch.arange(s, e)[None].expand(B, -1),
                                   past_key_values=cache, use_cache=True).logits
                all_logits.append(logits_blk)
                mask_blk = x[:, s:e] == MASK
                x0b, tib = transfer(logits_blk, mask_blk, x[:, s:e], ntt[:, i])
                x = torch.cat([x[:, :s], torch.where(tib, x0b, x[:, s:e]), x[:, e:]], 1)
                nfe += 1
        return x[:, Lp:], nfe, all_logits
    finally:
        model.config._attn_implementation = old


@pytest.mark.parametrize("threshold", [None, 0.3])
def test_dual_cache_equals_transcribed_fastdllm_loop(model, threshold):
    p = prompts(n=2, length=5, seed=3)
    gen, blk = 12, 4
    with torch.no_grad():
        ref_tokens, ref_nfe, ref_logits = fastdllm_dual_cache(model, p, gen, blk, steps=gen, threshold=threshold)
    seen = []
    commit = Threshold(threshold) if threshold is not None else LowConfidence(blk)
    r = decode(model, p, gen_length=gen, block_length=blk, commit=commit, cache=DualCache(), mask_id=MASK,
               step_callback=lambda b, i, lg: seen.append(lg.clone()))
    assert torch.equal(r.tokens, ref_tokens) and r.nfe == ref_nfe
    assert max(float((a - b).abs().max()) for a, b in zip(seen, ref_logits)) <= 1e-5


def test_polestar_recompute_is_non_increasing_in_the_threshold(model):
    for seed in range(3):
        p = prompts(n=1, length=6, seed=10 + seed)
        costs = [decode(model, p, gen_length=16, block_length=4, commit=LowConfidence(4), cache=PolestarCache(t),
                        mask_id=MASK).positions_recomputed for t in (0.0, 0.05, 0.2, 0.5, 1.0)]
        assert all(a >= b for a, b in zip(costs, costs[1:])), costs
        assert costs[0] > costs[-1]


@pytest.mark.parametrize("commit, cache", list(itertools.product(
    [LowConfidence(4), Threshold(0.9), Factor(1.0), PolestarCommit()],
    [NoCache(), PrefixCache(), DualCache(), PolestarCache(0.2), ElasticCache(0.9), DLLMCache(5, 2, 0.25)])))
def test_decoding_terminates_with_no_mask_left(model, commit, cache):
    p = prompts(n=3, length=4, seed=5)
    pm = torch.ones_like(p, dtype=torch.bool)
    pm[0, :2] = False  # a left-padded row
    r = decode(model, p, gen_length=8, block_length=4, commit=commit, cache=cache, mask_id=MASK, prompt_mask=pm)
    assert not (r.tokens == MASK).any()
    assert 1 <= r.nfe <= 8 and r.tokens_per_forward == 8 / r.nfe


@pytest.mark.parametrize("commit", [LowConfidence(2), Threshold(0.9), Factor(1.0), PolestarCommit()],
                         ids=lambda c: type(c).__name__)
def test_a_model_that_proposes_mask_still_terminates(commit):
    """A model whose top token is [MASK] itself (an untrained one can be) must not commit [MASK] for ever:
    the best real token is committed there; a model that never proposes [MASK] is decoded untouched."""
    m = build_model(TINY, seed=1)
    with torch.no_grad():
        m.lm_head.weight.mul_(8.0)

    def favour_mask(module, inputs, out):  # [MASK] on top everywhere, the other logits as they were
        out = out.clone()
        out[..., MASK] = out.max(-1).values + 5.0
        return out

    m.lm_head.register_forward_hook(favour_mask)
    seen = []
    r = decode(m, prompts(n=2, length=4, seed=3), gen_length=8, block_length=4, commit=commit, mask_id=MASK,
               step_callback=lambda b, i, lg: seen.append(bool((lg.argmax(-1) == MASK).any())))
    assert any(seen), "the model was meant to propose [MASK]"
    assert not (r.tokens == MASK).any() and r.nfe <= 8


def test_commit_rules_work_on_a_hf_masked_lm():
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    bert = BertForMaskedLM(BertConfig(vocab_size=30, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                      intermediate_size=64, max_position_embeddings=64)).eval()
    p = torch.randint(5, 30, (2, 5))
    for commit in (LowConfidence(4), Threshold(0.5), Factor(1.0), PolestarCommit()):
        r = decode(bert, p, gen_length=8, block_length=4, commit=commit, mask_id=4)
        assert not (r.tokens == 4).any() and r.nfe <= 8
    with pytest.raises(ValueError, match="NoCache only"):
        decode(bert, p, gen_length=8, block_length=4, commit=Threshold(), cache=DualCache(), mask_id=4)


def test_bad_input(model):
    p = prompts()
    kw = dict(commit=Threshold(), mask_id=MASK)
    with pytest.raises(ValueError, match="multiple of block_length"):
        decode(model, p, gen_length=10, block_length=4, **kw)
    bad = p.clone()
    bad[0, 2] = MASK
    with pytest.raises(ValueError, match=r"\[MASK\]"):
        decode(model, bad, gen_length=8, block_length=4, **kw)
    with pytest.raises(ValueError, match="mask_id must be a token id"):
        decode(model, p, gen_length=8, block_length=4, commit=Threshold(), mask_id=10_000)
    with pytest.raises(ValueError, match="threshold must be"):
        PolestarCache(1.5)
    with pytest.raises(ValueError, match="threshold must be"):
        PolestarCache(-0.1)
    with pytest.raises(ValueError, match="tau must be"):
        Threshold(float("nan"))
    with pytest.raises(TypeError, match="CommitRule"):
        decode(model, p, gen_length=8, block_length=4, commit="threshold", mask_id=MASK)
    with pytest.raises(TypeError, match="integer torch.Tensor"):
        decode(model, p.float(), gen_length=8, block_length=4, **kw)


def test_calibrate_meets_the_budget_and_drift_trace_shape(model):
    from neurips26.dllm import drift_trace

    p = prompts(n=2, length=6, seed=7)
    kw = dict(gen_length=16, block_length=4, mask_id=MASK)
    cache, frac = PolestarCache.calibrate(model, p, budget=0.6, commit=lambda: LowConfidence(4), **kw)
    assert frac <= 0.6 and 0.0 < cache.threshold <= 1.0
    r = decode(model, p, commit=LowConfidence(4), cache=PolestarCache(cache.threshold), **kw)
    assert np.isclose(r.positions_recomputed / (r.nfe * 22), frac)
    tr = drift_trace(model, p, commit=LowConfidence(4), threshold=0.2, **kw)
    assert tr.shape == (16, TINY.num_layers, 2, 22) and (tr >= 0).all()
    with pytest.raises(ValueError, match="budget must be"):
        PolestarCache.calibrate(model, p, budget=0.0, commit=lambda: LowConfidence(4), **kw)


def test_elastic_cache_gamma_bounds(model):
    """gamma = 1 recomputes every layer at every step after the first: the same logits as NoCache (1e-5);
    gamma = 0 never triggers: the block and changed positions only (cheaper)."""
    p = prompts(n=2, length=6, seed=4)
    kw = dict(gen_length=12, block_length=4, commit=LowConfidence(4), mask_id=MASK)
    seen = {}
    for name, cache in (("none", NoCache()), ("e1", ElasticCache(1.0)), ("e0", ElasticCache(0.0))):
        s = []
        seen[name] = (decode(model, p, cache=cache, step_callback=lambda b, i, lg: s.append(lg.clone()), **kw), s)
    (a, la), (b, lb), (c, _) = seen["none"], seen["e1"], seen["e0"]
    assert torch.equal(a.tokens, b.tokens)
    assert max(float((x - y).abs().max()) for x, y in zip(la, lb)) < 1e-5
    assert c.cost_per_token < b.cost_per_token
    assert b.cost_per_token <= a.cost_per_token * (1 + 4 / 18) + 1e-9  # at most the block's layer 0 twice
    assert not (c.tokens == MASK).any()


def test_dllm_cache_extremes(model):
    """kp = 1 recomputes everything every step (= NoCache to 1e-5); with rare refreshes, rho = 1 recomputes
    every response position at every layer (the same logits as refreshing the response every step, kr = 1),
    and a small rho costs less."""
    p = prompts(n=2, length=6, seed=8)
    kw = dict(gen_length=12, block_length=4, commit=LowConfidence(4), mask_id=MASK)
    seen = {}
    for name, cache in (("none", NoCache()), ("kp1", DLLMCache(kp=1)), ("rho1", DLLMCache(100, 100, 1.0)),
                        ("kr1", DLLMCache(100, 1, 0.5)), ("small", DLLMCache(100, 100, 0.1))):
        s = []
        seen[name] = (decode(model, p, cache=cache, step_callback=lambda b, i, lg: s.append(lg.clone()), **kw), s)
    for a, b in (("none", "kp1"), ("kr1", "rho1")):
        assert max(float((x - y).abs().max()) for x, y in zip(seen[a][1], seen[b][1])) < 1e-5
    assert seen["small"][0].cost_per_token < seen["rho1"][0].cost_per_token
    with pytest.raises(ValueError, match="rho must be"):
        DLLMCache(rho=0.0)
