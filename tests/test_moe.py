"""MoE structure (neurips26.moe) on tiny random-init transformers models (Mixtral, Qwen3-MoE,
DeepSeek-V3): finding blocks, gate weights by each router's rule, recording routes, loads and
routing agreement."""

import pytest
import torch

from neurips26.moe import expert_loads, find_moe_blocks, record_routes, route_weights, routing_agreement


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
def test_record_routes_logs_every_call_of_every_router_and_lets_go(arch):
    model = tiny(arch)
    blocks = find_moe_blocks(model)
    batches = [torch.randint(0, 64, (3, 5), generator=torch.Generator().manual_seed(s)) for s in range(2)]
    with torch.no_grad(), record_routes(blocks) as log:
        for ids in batches:
            model(ids)
    for b in blocks:
        assert len(log.indices[b.name]) == len(batches) == len(log.logits[b.name])
        for idx, logits in zip(log.indices[b.name], log.logits[b.name]):
            assert idx.shape == (15, 2) and logits.shape == (15, 4)
            # the recorded indices are the router's top-k of the recorded logits
            assert torch.equal(idx.sort(-1).values, logits.topk(2).indices.sort(-1).values)
    with torch.no_grad():  # the hooks are gone after the block
        model(batches[0])
    assert all(len(log.indices[b.name]) == len(batches) for b in blocks)


def test_expert_loads_count_each_choice():
    idx = torch.tensor([[0, 2], [2, 3], [2, 0]])
    loads = expert_loads(idx, 5)
    assert loads.dtype == torch.float64
    assert loads.tolist() == [2.0, 0.0, 3.0, 1.0, 0.0]
    assert float(loads.sum()) == idx.numel()
    with pytest.raises(ValueError, match=r"indices must lie in \[0, 3\)"):
        expert_loads(idx, 3)
    with pytest.raises(ValueError, match="num_experts"):
        expert_loads(idx, 0)


def test_routing_agreement_on_a_hand_example():
    ref = torch.tensor([[0, 1], [2, 3], [0, 3]])
    other = torch.tensor([[1, 0], [2, 1], [1, 2]])  # the same set, one shared expert, none shared
    out = routing_agreement(ref, other)
    assert out["exact"] == pytest.approx(1 / 3)
    assert out["jaccard"] == pytest.approx((1.0 + 1 / 3 + 0.0) / 3)
    assert routing_agreement(ref, ref) == {"exact": 1.0, "jaccard": 1.0}
    with pytest.raises(ValueError, match="one shape"):
        routing_agreement(ref, other[:2])
