"""The bidirectional Llama, its attention function, the K/V cache's scatter, the SFT loss and the tasks."""

import numpy as np
import pytest
import torch

from neurips26.dllm.kvcache import DiffusionKVCache
from neurips26.dllm.model import ModelConfig, TrainConfig, build_model, forward, llada_sft_loss, train_dllm
from neurips26.dllm.tasks import TASKS, TOKENIZER, encode_batch, exact_match, make_examples

TINY = ModelConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, max_positions=128)


@pytest.fixture(scope="module")
def model():
    return build_model(TINY, seed=0)


def test_attention_is_bidirectional_and_equals_hf_sdpa(model):
    x = torch.randint(3, TOKENIZER.vocab_size, (2, 20), generator=torch.Generator().manual_seed(0))
    y = x.clone()
    y[:, -1] = 3 + (x[:, -1] - 2) % (TOKENIZER.vocab_size - 3)
    with torch.no_grad():
        a, b = forward(model, x).logits, forward(model, y).logits
        assert (a[:, 0] - b[:, 0]).abs().max() > 1e-4  # position 0 sees the last token
        model.config._attn_implementation = "sdpa"  # transformers' own bidirectional path (is_causal=False)
        try:
            c = model(input_ids=x).logits
        finally:
            model.config._attn_implementation = "neurips26_dllm"
    assert torch.allclose(a, c, atol=1e-6)


def test_left_padding_is_invisible(model):
    x = torch.randint(3, TOKENIZER.vocab_size, (1, 12), generator=torch.Generator().manual_seed(1))
    padded = torch.cat([torch.zeros(1, 4, dtype=torch.long), x], 1)
    km = torch.cat([torch.zeros(1, 4, dtype=torch.bool), torch.ones(1, 12, dtype=torch.bool)], 1)
    with torch.no_grad():
        a = forward(model, x).logits
        b = forward(model, padded, key_mask=km).logits[:, 4:]
    assert torch.allclose(a, b, atol=1e-5)


def test_sparse_forward_through_the_cache_matches_a_full_forward(model):
    x = torch.randint(3, TOKENIZER.vocab_size, (2, 24), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        full = forward(model, x).logits
        cache = DiffusionKVCache(TINY.num_layers)
        forward(model, x, cache=cache)
        allpos = torch.arange(24)
        sparse = forward(model, x, cache=cache, positions=allpos, record={}).logits
        assert (sparse - full).abs().max() < 1e-5
        idx = torch.tensor([0, 5, 23])
        sub = forward(model, x[:, idx], cache=cache, positions=idx).logits
        assert (sub - full[:, idx]).abs().max() < 1e-5
        # the write lands at the given positions: changing a token there changes only what it should
        y = x.clone()
        y[:, 5] = 3 + (x[:, 5] - 2) % (TOKENIZER.vocab_size - 3)
        forward(model, y[:, [5]], cache=cache, positions=torch.tensor([5]))
        k_ref = DiffusionKVCache(TINY.num_layers)
        forward(model, y, cache=k_ref)
        assert torch.allclose(cache.layers[0].keys[:, :, 5], k_ref.layers[0].keys[:, :, 5], atol=1e-6)


def test_recorded_attention_rows_are_distributions(model):
    x = torch.randint(3, TOKENIZER.vocab_size, (1, 10))
    rec = {}
    with torch.no_grad():
        forward(model, x, record=rec)
    assert set(rec) == {0, 1}
    assert torch.allclose(rec[0].sum(-1), torch.ones(1, 10), atol=1e-5)


def test_sft_loss_weights_masked_tokens_by_one_over_p(model):
    ex = make_examples("sort", 4, seed=0)
    b = encode_batch(ex, 16)
    g = torch.Generator().manual_seed(0)
    loss = llada_sft_loss(model, b["prompt_ids"], b["prompt_mask"], b["answer_ids"], TOKENIZER.mask_id, g)
    # recompute by hand with the same draws
    g = torch.Generator().manual_seed(0)
    t = torch.rand(4, 1, generator=g)
    p = (1 - 1e-3) * t + 1e-3
    m = torch.rand(4, 16, generator=g) < p
    noisy = torch.where(m, TOKENIZER.mask_id, b["answer_ids"])
    x = torch.cat([b["prompt_ids"], noisy], 1)
    km = torch.cat([b["prompt_mask"], torch.ones_like(m)], 1)
    lg = forward(model, x, key_mask=km).logits[:, b["prompt_ids"].shape[1]:]
    ce = torch.nn.functional.cross_entropy(lg.reshape(-1, lg.shape[-1]), b["answer_ids"].reshape(-1), reduction="none")
    ref = (ce.reshape(4, 16) * m / p).sum() / 64
    assert torch.allclose(loss, ref, atol=1e-5)


def test_stratified_masking_levels_take_one_draw_per_stratum(model):
    ex = make_examples("reverse", 8, seed=1)
    b = encode_batch(ex, 16)
    g = torch.Generator().manual_seed(5)
    loss = llada_sft_loss(model, b["prompt_ids"], b["prompt_mask"], b["answer_ids"], TOKENIZER.mask_id, g,
                          t_sampling="stratified")
    # the same draws by hand: t_k = (π_k + u_k) / B, one level in each [j/B, (j+1)/B)
    g = torch.Generator().manual_seed(5)
    u = torch.rand(8, 1, generator=g)
    t = (torch.randperm(8, generator=g).reshape(8, 1) + u) / 8
    assert sorted((t[:, 0] * 8).floor().long().tolist()) == list(range(8))
    p = (1 - 1e-3) * t + 1e-3
    m = torch.rand(8, 16, generator=g) < p
    x = torch.cat([b["prompt_ids"], torch.where(m, TOKENIZER.mask_id, b["answer_ids"])], 1)
    km = torch.cat([b["prompt_mask"], torch.ones_like(m)], 1)
    lg = forward(model, x, key_mask=km).logits[:, b["prompt_ids"].shape[1]:]
    ce = torch.nn.functional.cross_entropy(lg.reshape(-1, lg.shape[-1]), b["answer_ids"].reshape(-1), reduction="none")
    assert torch.allclose(loss, (ce.reshape(8, 16) * m / p).sum() / 128, atol=1e-5)
    with pytest.raises(ValueError, match="t_sampling"):
        llada_sft_loss(model, b["prompt_ids"], b["prompt_mask"], b["answer_ids"], TOKENIZER.mask_id, g, t_sampling="sobol")
    with pytest.raises(ValueError, match="t_sampling"):
        train_dllm(TrainConfig(model=TINY, t_sampling="halton"))


def test_the_checkpoint_key_names_the_recipe():
    base = TrainConfig(model=TINY)
    assert base.t_sampling == "uniform"
    assert TrainConfig(model=TINY, t_sampling="stratified").key() != base.key()
    assert TrainConfig(model=TINY).key() == base.key()


def test_training_reduces_the_loss():
    cfg = TrainConfig(model=TINY, tasks=("reverse",), gen_length=16, steps=40, batch_size=16, lr=3e-3, warmup=5)
    _, meta = train_dllm(cfg)
    assert meta["losses"][-1] < 0.8 * meta["losses"][0]


def test_tasks_are_exact():
    for task in TASKS:
        ex = make_examples(task, 50, seed=3)
        for e in ex:
            assert e.prompt.endswith("=")
        if task == "add":
            assert all(int(e.answer) == sum(map(int, e.prompt[:-1].split("+"))) for e in ex)
        if task == "sort":
            assert all(e.answer == "".join(sorted(e.prompt[4:-1])) for e in ex)
    ex = make_examples("mul", 3, seed=0)
    ans = encode_batch(ex, 8)["answer_ids"]
    assert exact_match(ans, ex).all()
    wrong = ans.clone()
    wrong[0, 0] = TOKENIZER.stoi["9"] if ex[0].answer[0] != "9" else TOKENIZER.stoi["8"]
    assert exact_match(wrong, ex).tolist() == [False, True, True]
    with pytest.raises(ValueError, match="task must be one of"):
        make_examples("div", 2, 0)
    with pytest.raises(ValueError, match="does not fit"):
        encode_batch(ex, 3)
    with pytest.raises(ValueError, match="alphabet"):
        TOKENIZER.encode("A")
