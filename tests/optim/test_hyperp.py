"""HyperP's transfer rules (exact), the fits that measure them (closed forms), and the
instability indicators (against eager attention and hand computations)."""

import math

import numpy as np
import pytest
import torch

from neurips26.optim.diagnostics import InstabilityMonitor, attention_scores, outlier_share, z_value
from neurips26.optim.hyperp import HyperPScaler, apply_hyperp, fit_power_law, optimal_lr

transformers = pytest.importorskip("transformers")


def test_scaler_rules_exact():
    s = HyperPScaler(base_width=64, base_depth=2, base_tokens=1e6, base_lr=0.02)
    assert s.lr() == 0.02
    assert s.lr(width=4096) == 0.02  # width-independent
    assert s.lr(depth=8) == pytest.approx(0.01, rel=1e-15)  # √(2/8)
    assert s.lr(tokens=8e6) == pytest.approx(0.02 * 8 ** -0.32, rel=1e-15)
    assert s.lr(width=256, depth=32, tokens=4e6) == pytest.approx(0.02 * 0.25 * 4 ** -0.32, rel=1e-15)
    assert s.residual_multiplier(8) == 0.25
    no_depth = HyperPScaler(64, 2, 1e6, 0.02, depth_mup=False)
    assert no_depth.lr(depth=8) == 0.02 and no_depth.residual_multiplier(8) == 1.0
    g = HyperPScaler(64, 2, 1e6, 0.02, granularity_exponent=0.5, base_granularity=2)
    assert g.lr(granularity=8) == pytest.approx(0.01, rel=1e-15)
    assert HyperPScaler(64, 2, 1e6, 0.02).lr(granularity=8) == 0.02  # κ = 0: unchanged under SqrtGate


@pytest.mark.parametrize("kwargs", [dict(base_width=0), dict(base_depth=-1), dict(base_tokens=0.0),
                                    dict(base_lr=0.0), dict(base_lr=float("nan")), dict(base_tokens=float("inf")),
                                    dict(gamma=float("nan"))])
def test_scaler_bad_input(kwargs):
    args = dict(base_width=64, base_depth=2, base_tokens=1e6, base_lr=0.02) | kwargs
    with pytest.raises(ValueError):
        HyperPScaler(**args)


def test_scaler_bad_targets():
    s = HyperPScaler(64, 2, 1e6, 0.02)
    for kw in (dict(width=0), dict(depth=0), dict(tokens=-1.0), dict(tokens=float("nan")), dict(granularity=0)):
        with pytest.raises(ValueError):
            s.lr(**kw)
    with pytest.raises(TypeError):
        s.lr(depth=2.5)


def test_apply_hyperp_sets_granite_residual_multiplier():
    cfg = transformers.GraniteConfig(num_hidden_layers=8, hidden_size=32, intermediate_size=64,
                                     num_attention_heads=4, vocab_size=64)
    out = apply_hyperp(cfg, HyperPScaler(32, 2, 1e6, 0.02))
    assert out.residual_multiplier == 0.25 and cfg.residual_multiplier != 0.25  # a copy
    moe = transformers.GraniteMoeConfig(num_hidden_layers=2, hidden_size=32, intermediate_size=16,
                                        num_attention_heads=4, vocab_size=64)
    assert apply_hyperp(moe, HyperPScaler(32, 2, 1e6, 0.02)).residual_multiplier == 0.5
    with pytest.raises(TypeError):
        apply_hyperp(transformers.LlamaConfig(), HyperPScaler(32, 2, 1e6, 0.02))
    with pytest.raises(TypeError):
        apply_hyperp(cfg, 0.02)


def test_optimal_lr_recovers_the_vertex():
    lrs = 2.0 ** np.arange(-10, -4)
    for c in (-8.3, -7.0, -6.6):
        assert optimal_lr(lrs, (np.log2(lrs) - c) ** 2 + 1.0) == pytest.approx(2.0 ** c, rel=1e-9)
    # on the edge: the edge point; a diverged run counts as +inf
    assert optimal_lr(lrs, np.log2(lrs)) == lrs[0]
    assert optimal_lr(lrs, [3, 2, 1.5, 1, np.nan, np.inf]) == lrs[3]
    for bad in (([1e-3, 1e-4], [1, 2]), ([1e-3], [1, 2]), ([], []), ([-1e-3, 1e-2], [1, 2]), ([1, 2], [np.nan, np.nan])):
        with pytest.raises(ValueError):
            optimal_lr(*bad)


def test_fit_power_law():
    T = np.array([1.0, 2.0, 4.0, 8.0])
    exact = fit_power_law(T, 0.3 * T ** -0.32)
    assert exact["gamma"] == pytest.approx(0.32, abs=1e-12)
    assert exact["ci"] == pytest.approx([0.32, 0.32], abs=1e-9)
    rng = np.random.default_rng(0)
    T = np.repeat(2.0 ** np.arange(6), 8)
    fit = fit_power_law(T, T ** -0.5 * np.exp(0.05 * rng.standard_normal(T.size)), seed=1)
    assert fit["ci"][0] < 0.5 < fit["ci"][1] and fit["ci"][1] - fit["ci"][0] < 0.05
    for bad in (([1.0], [1.0]), ([1.0, 1.0], [1.0, 2.0]), ([1.0, -2.0], [1.0, 2.0]), ([1.0, 2.0], [np.nan, 1.0])):
        with pytest.raises(ValueError):
            fit_power_law(*bad)


def _tiny_moe(attn="eager"):
    torch.manual_seed(0)
    cfg = transformers.GraniteMoeConfig(vocab_size=64, hidden_size=32, intermediate_size=16, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, num_local_experts=4,
                                        num_experts_per_tok=2, max_position_embeddings=32, attn_implementation=attn)
    return transformers.GraniteMoeForCausalLM(cfg).eval()


def test_attention_scores_softmax_is_eager_attention():
    model = _tiny_moe()
    for layer in model.model.layers:  # non-trivial rotary: larger q/k weights
        torch.nn.init.normal_(layer.self_attn.q_proj.weight, std=0.3)
        torch.nn.init.normal_(layer.self_attn.k_proj.weight, std=0.3)
    x = torch.randint(0, 64, (2, 12))
    seen = {}
    attn = model.model.layers[1].self_attn
    h = attn.register_forward_pre_hook(lambda m, a, kw: seen.update(kw), with_kwargs=True)
    with torch.no_grad():
        out = model(x, output_attentions=True)
    h.remove()
    s = attention_scores(attn, seen["hidden_states"], seen["position_embeddings"])
    torch.testing.assert_close(torch.softmax(s, -1), out.attentions[1], rtol=0, atol=1e-6)


def test_monitor_indicators_by_hand():
    model = _tiny_moe()
    x = torch.randint(0, 64, (2, 12))
    with torch.no_grad(), InstabilityMonitor(model) as mon:
        out = model(x, output_hidden_states=True)
    s = mon.summary()
    assert set(s) == {"block_rms", "outlier_share", "lm_head_z", "router_z", "attention_z"}
    with torch.no_grad(), InstabilityMonitor(model, blocks=[model.model.layers[0]], attention=False) as first:
        model(x)
    h = out.hidden_states[1]  # the first block's output (the last entry is after the final norm)
    assert first.summary()["block_rms"] == pytest.approx(float(h.pow(2).mean().sqrt()), rel=1e-5)
    share = float(((h - h.mean()).abs() > 5 * h.std()).float().mean())
    assert first.summary()["outlier_share"] == pytest.approx(share, abs=1e-9)
    lse = torch.logsumexp(out.logits * model.config.logits_scaling, -1)
    assert s["lm_head_z"] == pytest.approx(float(lse.pow(2).mean()), rel=1e-5)
    mon.reset()
    assert mon.summary() == {}
    model(x)  # hooks removed on exit: nothing recorded
    assert mon.summary() == {}


def test_z_value_and_outlier_share():
    logits = torch.tensor([[0.0, 0.0], [1.0, float("-inf")]])
    assert float(z_value(logits)) == pytest.approx((math.log(2) ** 2 + 1.0) / 2)
    x = torch.zeros(1000)
    x[0] = 100.0
    assert float(outlier_share(x)) == pytest.approx(1e-3)
    with pytest.raises(TypeError):
        z_value(torch.ones(3, dtype=torch.long))
    with pytest.raises(TypeError):
        InstabilityMonitor("model")
