"""``hyperp_param_groups`` (against the reproduction's own split and a hand enumeration) and the
``neurips26 hyperp-lr`` command (its numbers against HyperPScaler's rules, written out by hand)."""

import json
import math

import pytest
import torch

from neurips26.cli import main
from neurips26.optim import HyperballMuon, hyperp_param_groups

transformers = pytest.importorskip("transformers")


def _granite(width=32, depth=2, tie=False, moe_k=0):
    common = dict(vocab_size=64, hidden_size=width, num_hidden_layers=depth, num_attention_heads=width // 16,
                  num_key_value_heads=width // 16, intermediate_size=2 * width, tie_word_embeddings=tie)
    if moe_k:
        return transformers.GraniteMoeConfig(num_local_experts=4 * moe_k, num_experts_per_tok=moe_k, **common)
    return transformers.GraniteConfig(**common)


@pytest.mark.parametrize("tie", [False, True])
def test_param_groups_split_block_matrices_from_the_rest(tie):
    torch.manual_seed(0)
    model = transformers.GraniteForCausalLM(_granite(tie=tie))
    sphere, rest = hyperp_param_groups(model, lr=0.1, adamw_lr=0.01)
    assert sphere["use_hyperball"] and not rest["use_hyperball"]
    assert (sphere["lr"], rest["lr"]) == (0.1, 0.01)
    names = {id(p): n for n, p in model.named_parameters()}
    # by hand: the sphere holds exactly the q/k/v/o and gate/up/down projections of every layer
    want = {f"model.layers.{i}.{m}.weight" for i in range(2)
            for m in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                      "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")}
    assert {names[id(p)] for p in sphere["params"]} == want
    assert "model.embed_tokens.weight" in {names[id(p)] for p in rest["params"]}
    # every parameter exactly once, in model.parameters()'s order inside each group
    everything = list(model.parameters())
    assert len(sphere["params"]) + len(rest["params"]) == len(everything)
    order = {id(p): i for i, p in enumerate(everything)}
    for g in (sphere, rest):
        idx = [order[id(p)] for p in g["params"]]
        assert idx == sorted(idx)
    HyperballMuon(hyperp_param_groups(model, lr=0.1, adamw_lr=0.01))  # accepted as they are


def test_param_groups_put_expert_stacks_in_adamw():
    model = transformers.GraniteMoeForCausalLM(_granite(moe_k=2))
    sphere, rest = hyperp_param_groups(model, lr=0.1, adamw_lr=0.01)
    assert all(p.ndim == 2 for p in sphere["params"])
    assert any(p.ndim == 3 for p in rest["params"])  # the (E, ., .) expert tensors


def test_param_groups_bad_input():
    model = transformers.GraniteForCausalLM(_granite())
    with pytest.raises(ValueError, match="lr"):
        hyperp_param_groups(model, lr=0.0, adamw_lr=0.01)
    with pytest.raises(ValueError, match="adamw_lr"):
        hyperp_param_groups(model, lr=0.1, adamw_lr=float("nan"))
    with pytest.raises(TypeError, match="PreTrainedModel"):
        hyperp_param_groups(torch.nn.Linear(3, 3), lr=0.1, adamw_lr=0.01)


def _save(cfg, folder):
    cfg.save_pretrained(folder)
    return folder


def test_hyperp_lr_numbers_follow_the_rules(tmp_path, capsys):
    base = _save(_granite(32, 2), tmp_path / "base")
    target = _save(_granite(128, 8), tmp_path / "target")
    rc = main(["hyperp-lr", str(target), "--base", str(base), "--base-lr", "0.25", "--base-tokens", "1e6",
               "--tokens", "8e6", "--adamw-lr", "0.004", "--json"])
    assert rc == 0
    res = json.loads(capsys.readouterr().out)
    token = 8.0 ** -0.32
    assert res["groups"]["sphere"]["lr"] == pytest.approx(0.25 * math.sqrt(2 / 8) * token, rel=1e-14)
    assert res["groups"]["adamw"]["lr"] == pytest.approx(0.004 * token, rel=1e-14)
    assert res["residual_multiplier"]["set_to"] == pytest.approx(1 / 4, rel=1e-15)  # 1/sqrt(2*8)
    assert res["residual_multiplier"]["config_has_setting"]
    # the group sizes come from the model built on the meta device: they add up to the model's parameters
    model = transformers.GraniteForCausalLM(_granite(128, 8))
    total = sum(p.numel() for p in model.parameters())
    assert sum(g["parameters"] for g in res["sizes"]) == total
    assert res["sizes"][0]["tensors"] == 7 * 8


def test_hyperp_lr_table_and_widths_given_by_hand(tmp_path, capsys):
    target = _save(_granite(64, 4), tmp_path / "t")
    rc = main(["hyperp-lr", str(target / "config.json"), "--base-width", "32", "--base-depth", "4",
               "--base-lr", "0.5", "--base-tokens", "1e6", "--no-depth-mup"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "sphere" in out and "0.5" in out  # same depth and tokens, no depth rule: the base lr itself
    assert "residual" not in out  # no depth rule: nothing to set


@pytest.mark.parametrize("argv, message", [
    (["{t}", "--base-lr", "0.1", "--base-tokens", "1e6"], "--base"),
    (["{missing}", "--base-width", "32", "--base-depth", "2", "--base-lr", "0.1", "--base-tokens", "1e6"],
     "does not exist"),
    (["{notjson}", "--base-width", "32", "--base-depth", "2", "--base-lr", "0.1", "--base-tokens", "1e6"],
     "JSON"),
    (["{nomodeltype}", "--base-width", "32", "--base-depth", "2", "--base-lr", "0.1", "--base-tokens", "1e6"],
     "model_type"),
])
def test_hyperp_lr_bad_input_exits_2_and_says_why(tmp_path, capsys, argv, message):
    target = _save(_granite(), tmp_path / "t")
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "plain.json").write_text(json.dumps({"hidden_size": 8}))
    paths = dict(t=target, missing=tmp_path / "nope", notjson=tmp_path / "bad.json",
                 nomodeltype=tmp_path / "plain.json")
    rc = main(["hyperp-lr"] + [a.format(**paths) for a in argv])
    assert rc == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("flag, value", [("--base-lr", "0"), ("--base-lr", "nan"), ("--base-tokens", "-1"),
                                         ("--base-width", "0")])
def test_hyperp_lr_rejects_non_positive_numbers(tmp_path, flag, value):
    target = _save(_granite(), tmp_path / "t")
    argv = {"--base-width": "32", "--base-depth": "2", "--base-lr": "0.1", "--base-tokens": "1e6"} | {flag: value}
    with pytest.raises(SystemExit) as exc:
        main(["hyperp-lr", str(target)] + [x for kv in argv.items() for x in kv])
    assert exc.value.code == 2
