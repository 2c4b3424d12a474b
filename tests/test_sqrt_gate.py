"""SqrtGate and the MoE load statistics: output RMS across granularity (a property of
independent experts), the router left untouched, transformers' load-balancing loss as the
reference of the auxiliary loss, and the layouts that are refused."""

import math

import pytest
import torch

from neurips26.moe import (aux_load_balance_loss, apply_sqrt_gate, collect_router_outputs, expert_load,
                           find_routers, sqrt_gate)

transformers = pytest.importorskip("transformers")


def _granite_block(k, seed=0, hidden=64):
    torch.manual_seed(seed)
    cfg = transformers.GraniteMoeConfig(hidden_size=hidden, intermediate_size=32, num_local_experts=4 * k,
                                        num_experts_per_tok=k, num_attention_heads=4, vocab_size=32)
    block = transformers.models.granitemoe.modeling_granitemoe.GraniteMoeMoE(cfg)
    with torch.no_grad():
        torch.nn.init.normal_(block.router.weight, std=0.5)  # uneven softmax weights
        torch.nn.init.normal_(block.experts.gate_up_proj, std=1 / math.sqrt(hidden))
        torch.nn.init.normal_(block.experts.down_proj, std=1 / math.sqrt(32))
    return block


def _rms(x):
    return float(x.pow(2).mean().sqrt())


@pytest.mark.parametrize("k", [1, 2, 4, 8])
def test_sqrt_gate_keeps_output_rms_across_granularity(k):
    block = _granite_block(k)
    x = torch.randn(1, 4096, 64)
    h = x.reshape(-1, 64)
    E = 4 * k
    with torch.no_grad():
        # each expert alone (weight 1): the expert RMS, equal across experts by construction
        ones = torch.ones(h.shape[0], 1)
        expert = math.sqrt(sum(_rms(block.experts(h, torch.full((h.shape[0], 1), e), ones)) ** 2
                               for e in range(E)) / E)
        idx, w, logits = block.router(h)
        softmax_out = _rms(block(x))
        with apply_sqrt_gate(block):
            idx2, g, logits2 = block.router(h)
            sqrt_out = _rms(block(x))
    assert abs(sqrt_out / expert - 1) <= 0.05
    # softmax gates: RMS ratio √(E[Σw²]) (< 1 as soon as k > 1)
    assert softmax_out / expert == pytest.approx(math.sqrt(float(w.pow(2).sum(-1).mean())), rel=0.05)
    assert torch.equal(idx, idx2) and torch.equal(logits, logits2)
    torch.testing.assert_close(g, w.sqrt(), rtol=1e-6, atol=0)
    torch.testing.assert_close(g.pow(2).sum(-1), torch.ones(h.shape[0]))


def test_sqrt_gate_function_and_removal():
    w = torch.tensor([[0.6, 0.2], [0.1, 0.1]])
    torch.testing.assert_close(sqrt_gate(w), torch.tensor([[0.75, 0.25], [0.5, 0.5]]).sqrt())
    assert sqrt_gate(w.to(torch.bfloat16)).dtype == torch.bfloat16
    with pytest.raises(TypeError):
        sqrt_gate(torch.ones(2, 2, dtype=torch.long))
    block = _granite_block(2)
    h = torch.randn(16, 64)
    gate = apply_sqrt_gate(block)
    gate.remove()
    torch.testing.assert_close(block.router(h)[1].sum(-1), torch.ones(16))


def test_qwen3_moe_router_and_model_outputs():
    torch.manual_seed(1)
    cfg = transformers.Qwen3MoeConfig(vocab_size=64, hidden_size=32, intermediate_size=32, moe_intermediate_size=16,
                                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                      num_experts=8, num_experts_per_tok=2, norm_topk_prob=False, head_dim=8)
    model = transformers.Qwen3MoeForCausalLM(cfg).eval()
    routers = find_routers(model)
    assert [r.name for r in routers] == ["model.layers.0.mlp.gate", "model.layers.1.mlp.gate"]
    x = torch.randint(0, 64, (2, 8))
    with torch.no_grad(), collect_router_outputs(model) as before:
        model(x)
    with torch.no_grad(), apply_sqrt_gate(model):
        out = routers[0].module(torch.randn(5, 32))
        with collect_router_outputs(model) as after:
            model(x)
    torch.testing.assert_close(out[1].pow(2).sum(-1), torch.ones(5))  # Σg² = 1 without norm_topk_prob too
    # the first layer sees the same input: same logits and experts (later layers see the gated output)
    assert torch.equal(before["indices"][0], after["indices"][0])
    torch.testing.assert_close(before["logits"][0], after["logits"][0], rtol=0, atol=0)
    assert len(after["logits"]) == 2


def test_other_layouts_are_refused():
    dense = transformers.GraniteForCausalLM(transformers.GraniteConfig(
        vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2))
    with pytest.raises(TypeError):
        apply_sqrt_gate(dense)

    class SigmoidRouter(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(4, 8))
            self.top_k = 2
            self.e_score_correction_bias = torch.zeros(4)

    block = torch.nn.Module()
    block.gate, block.experts = SigmoidRouter(), torch.nn.Module()
    with pytest.raises(TypeError):
        apply_sqrt_gate(block)
    with pytest.raises(TypeError):
        apply_sqrt_gate("model")


def test_aux_loss_is_transformers_load_balancing_loss():
    from transformers.models.granitemoe.modeling_granitemoe import load_balancing_loss_func

    torch.manual_seed(2)
    logits = [torch.randn(50, 8) * 2, torch.randn(30, 8)]
    for k in (1, 2, 3):
        ours = aux_load_balance_loss(logits, k)
        ref = load_balancing_loss_func(tuple(logits), 8, k)
        torch.testing.assert_close(ours, ref, rtol=1e-6, atol=0)
    # uniform routing: the minimum, k
    assert float(aux_load_balance_loss(torch.zeros(8, 8), 2)) == pytest.approx(2.0)
    t = torch.randn(10, 4, requires_grad=True)
    aux_load_balance_loss(t, 2).backward()
    assert t.grad is not None and float(t.grad.abs().sum()) > 0
    for bad in (([], 1), (torch.randn(5, 4), 0), (torch.randn(5, 4), 5), ([torch.randn(5, 4), torch.randn(5, 3)], 1),
                (torch.randn(0, 4), 1)):
        with pytest.raises(ValueError):
            aux_load_balance_loss(*bad)


def test_expert_load():
    assert expert_load(torch.tensor([[0, 1], [2, 3]]), 4) == 1.0
    assert expert_load(torch.tensor([[0], [0], [0], [1]]), 2) == 1.5
    assert expert_load(torch.zeros(6, 1, dtype=torch.long), 3) == 3.0
    with pytest.raises(ValueError):
        expert_load(torch.zeros(0, 1, dtype=torch.long), 3)
    with pytest.raises(ValueError):
        expert_load(torch.tensor([[5]]), 3)
