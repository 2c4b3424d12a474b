"""MoE pieces on tiny random-init transformers models (Mixtral, Qwen3-MoE, DeepSeek-V3)."""

import itertools

import pytest
import torch

from neurips26.compression.moe_quant import (allocate_ranks, find_moe_blocks, low_rank_compensation, record_routes,
                                             replay_routes, route_weights, router_margins, routing_agreement)


def tiny(arch, **extra):
    import transformers as T

    common = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2)
    if arch == "mixtral":
        cfg = T.MixtralConfig(num_local_experts=4, num_experts_per_tok=2, **common, **extra)
        cls = T.MixtralForCausalLM
    elif arch == "qwen3":
        cfg = T.Qwen3MoeConfig(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, decoder_sparse_step=1,
                               **common, **extra)
        cls = T.Qwen3MoeForCausalLM
    else:
        common["num_key_value_heads"] = 4  # DeepSeek's MLA has no grouped keys
        cfg = T.DeepseekV3Config(n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                                 first_k_dense_replace=0, n_group=1, topk_group=1, q_lora_rank=None, kv_lora_rank=16,
                                 qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8, head_dim=8, n_shared_experts=1,
                                 **common, **extra)
        cls = T.DeepseekV3ForCausalLM
    torch.manual_seed(0)
    model = cls(cfg).eval()
    with torch.no_grad():  # DeepSeek initialises its router at zero: give every router real logits
        for b in find_moe_blocks(model):
            b.gate.weight.normal_(0, 0.5)
    return model


ARCHS = ["mixtral", "qwen3", "deepseek"]


@pytest.mark.parametrize("arch", ARCHS)
def test_blocks_are_found_and_route_weights_follow_each_router(arch):
    model = tiny(arch)
    blocks = find_moe_blocks(model)
    assert len(blocks) == 2 and all(b.num_experts == 4 and b.top_k == 2 for b in blocks)
    x = torch.randn(10, 32)
    for b in blocks:
        logits, weights, idx = b.gate(x)
        assert torch.allclose(route_weights(b.gate, logits, idx), weights, atol=1e-6)


def test_qwen3_without_renormalization_is_followed_too():
    model = tiny("qwen3", norm_topk_prob=False)
    b = find_moe_blocks(model)[0]
    logits, weights, idx = b.gate(torch.randn(7, 32))
    assert torch.allclose(route_weights(b.gate, logits, idx), weights, atol=1e-6)
    assert not torch.allclose(weights.sum(-1), torch.ones(7))


def test_unsupported_architectures_get_a_clear_error():
    import transformers as T

    llama = T.LlamaForCausalLM(T.LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                             num_attention_heads=2))
    with pytest.raises(ValueError, match="LlamaForCausalLM: no MoE block"):
        find_moe_blocks(llama)


@pytest.mark.parametrize("arch", ARCHS)
def test_replay_restores_the_recorded_routes_after_a_perturbation(arch):
    model = tiny(arch)
    blocks = find_moe_blocks(model)
    ids = torch.randint(0, 64, (4, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad(), record_routes(blocks) as ref:
        base = model(ids).logits
    with torch.no_grad():  # perturb the first block's experts: later routes move
        blocks[0].experts.down_proj.mul_(-3.0)
        blocks[0].experts.gate_up_proj.add_(torch.randn_like(blocks[0].experts.gate_up_proj))
    with torch.no_grad(), record_routes(blocks) as free:
        model(ids)
    with torch.no_grad(), replay_routes(blocks, ref) as replay, record_routes(blocks) as replayed:
        model(ids)
        replay.rewind()
        replay.layers = {blocks[0].name}  # limited replay: the first block only
        model(ids)
    last = blocks[-1].name
    plain = routing_agreement(ref.indices[last][0], free.indices[last][0])
    full = routing_agreement(ref.indices[last][0], replayed.indices[last][0])
    assert plain["exact"] < 1.0 and full["exact"] == 1.0 and full["jaccard"] >= plain["jaccard"]
    # limited: the first block replayed, the last one routes freely (as without replay)
    assert torch.equal(replayed.indices[blocks[0].name][1], ref.indices[blocks[0].name][0])
    assert torch.equal(replayed.indices[last][1], free.indices[last][0])
    assert base.shape == (4, 12, 64)


def test_margin_condition_keeps_the_top_k_set():
    gen = torch.Generator().manual_seed(2)
    logits = torch.randn(2000, 8, generator=gen)
    k = 2
    m = router_margins(logits, k)
    assert torch.all(m >= 0)
    base = logits.topk(k).indices.sort(-1).values
    for scale in (0.49, 0.2):
        delta = (torch.rand(2000, 8, generator=gen) * 2 - 1) * (scale * m[:, None])  # 2·max|Δ| < m
        moved = (logits + delta).topk(k).indices.sort(-1).values
        assert torch.equal(moved, base)
    # beyond the margin the set can change, and does for some tokens
    delta = torch.zeros_like(logits)
    top = logits.topk(k + 1).indices
    rows = torch.arange(2000)
    delta[rows, top[:, k - 1]] = -0.6 * m
    delta[rows, top[:, k]] = 0.6 * m
    assert not torch.equal((logits + delta).topk(k).indices.sort(-1).values, base)


def brute_force_ranks(svals, loads, budget):
    best, arg = -1.0, None
    for r in itertools.product(*[range(len(s) + 1) for s in svals]):
        if sum(r) != min(budget, sum(len(s) for s in svals)):
            continue
        val = sum(l * float((s[:ri] ** 2).sum()) for l, s, ri in zip(loads, svals, r))
        if val > best + 1e-12:
            best, arg = val, r
    return best, arg


def test_greedy_rank_allocation_is_the_brute_force_optimum():
    gen = torch.Generator().manual_seed(3)
    for _ in range(30):
        svals = [torch.rand(4, generator=gen).sort(descending=True).values for _ in range(3)]
        loads = torch.rand(3, generator=gen).tolist()
        for budget in range(0, 13):
            r = allocate_ranks(svals, loads, budget)
            value = sum(l * float((s[:ri] ** 2).sum()) for l, s, ri in zip(loads, svals, r))
            assert abs(value - brute_force_ranks(svals, loads, budget)[0]) < 1e-9


def test_weighted_error_decreases_and_load_is_respected():
    gen = torch.Generator().manual_seed(4)
    spectrum = torch.rand(6, generator=gen).sort(descending=True).values
    svals = [spectrum, spectrum.clone(), torch.rand(6, generator=gen).sort(descending=True).values]
    loads = [3.0, 1.0, 2.0]
    total = sum(l * float((s**2).sum()) for l, s in zip(loads, svals))
    errors = []
    for budget in range(0, 19):
        r = allocate_ranks(svals, loads, budget)
        assert sum(r) == budget and r[0] >= r[1]  # same spectrum, higher load: never a lower rank
        errors.append(total - sum(l * float((s[:ri] ** 2).sum()) for l, s, ri in zip(loads, svals, r)))
    assert all(b < a for a, b in zip(errors, errors[1:]))  # strictly, as every σ > 0
    with pytest.raises(ValueError, match="descending"):
        allocate_ranks([torch.tensor([1.0, 2.0])], [1.0], 1)


def test_low_rank_compensation_is_the_eckart_young_optimum():
    R = torch.randn(20, 12, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    S = torch.linalg.svdvals(R)
    for r in (0, 1, 5, 12):
        B, A = low_rank_compensation(R, r)
        assert B.shape == (20, r) and A.shape == (r, 12)
        assert abs(float(torch.linalg.norm(R - B @ A) ** 2) - float((S[r:] ** 2).sum())) < 1e-9


def qat(model, batches, steps, replay_log=None, fraction=1.0, lr=1e-2):
    """A few QAT steps on the recorded batches (language-modelling loss)."""
    from neurips26.compression.moe_quant import RouteReplay, prepare_qat, replay_schedule

    adapters = prepare_qat(model, ranks=2)
    opt = torch.optim.Adam(adapters, lr=lr)
    blocks = find_moe_blocks(model)
    replay = RouteReplay(blocks, replay_log) if replay_log is not None else None
    model.train()
    for step in range(steps):
        if replay is not None:
            replay.rewind()
            replay.active = replay_schedule(step, steps, fraction)
        for ids in batches:
            loss = model(ids, labels=ids).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
    if replay is not None:
        replay.remove()
    model.eval()
    return adapters


@pytest.mark.parametrize("arch", ["mixtral", "qwen3"])
def test_qat_trains_only_adapters_keeps_routers_and_replay_agrees_at_least_as_well(arch):
    batches = [torch.randint(0, 64, (2, 10), generator=torch.Generator().manual_seed(s)) for s in range(2)]
    results = {}
    for replay in (False, True):
        model = tiny(arch)
        blocks = find_moe_blocks(model)
        routers = [b.gate.weight.detach().clone() for b in blocks]
        others = {n: p.detach().clone() for n, p in model.named_parameters() if "experts" not in n}
        with torch.no_grad(), record_routes(blocks) as ref:
            for ids in batches:
                model(ids)
        adapters = qat(model, batches, steps=3, replay_log=ref if replay else None)
        # routers bit-identical, every non-expert parameter untouched, only adapters trained
        assert all(torch.equal(b.gate.weight, r) for b, r in zip(blocks, routers))
        for n, p in model.named_parameters():
            if n in others:
                assert torch.equal(p, others[n]) and not p.requires_grad
        trainable = {id(p) for p in model.parameters() if p.requires_grad}
        assert trainable == {id(a) for a in adapters}
        assert any(a.detach().abs().sum().item() > 0 for a in adapters[1::2])  # the B factors moved
        with torch.no_grad(), record_routes(blocks) as after:
            for ids in batches:
                model(ids)
        results[replay] = sum(routing_agreement(ref.indices[b.name][i], after.indices[b.name][i])["jaccard"]
                              for b in blocks for i in range(len(batches)))
    assert results[True] >= results[False]


def test_residual_initialised_adapter_is_the_compensated_weight():
    from neurips26.compression.moe_quant import QuantizedExpertsWithAdapter
    from neurips26.compression.mxfp4 import fake_quantize_mxfp4

    W = torch.randn(3, 16, 64, generator=torch.Generator().manual_seed(6))
    adapter = QuantizedExpertsWithAdapter(W, ranks=[0, 2, 16], init="residual")
    with torch.no_grad():
        out = adapter(W)
    Q = fake_quantize_mxfp4(W)
    assert torch.equal(out[0], Q[0])  # rank 0: the quantized weight itself
    assert torch.allclose(out[2], W[2], atol=1e-5)  # full rank: the residual is restored
    S = torch.linalg.svdvals((W[1] - Q[1]).double())
    assert abs(float(torch.linalg.norm((W[1] - out[1]).double()) ** 2) - float((S[2:] ** 2).sum())) < 1e-6


def test_margin_diagnostic_never_reports_more_flips_than_the_bound_allows():
    from neurips26.compression.moe_quant import margin_diagnostic

    gen = torch.Generator().manual_seed(7)
    ref = torch.randn(5000, 8, generator=gen)
    for scale in (0.01, 0.1, 1.0):
        d = margin_diagnostic(ref, ref + scale * torch.randn(5000, 8, generator=gen), 2)
        assert d["measured_flip"] <= d["predicted_flip"]
        assert d["margin_q10"] <= d["margin_q50"] <= d["margin_q90"]
    assert margin_diagnostic(ref, ref, 2)["measured_flip"] == 0.0
