"""The polestar reproduction end to end at a tiny size (a tiny model trained for a few steps in a temp cache)."""

import json

import numpy as np

from neurips26 import reproduce
from neurips26.reproduce import polestar as exp_mod
from neurips26.reproduce import run_experiment

TINY = dict(model=dict(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64),
            tasks=("sort", "reverse"), add_digits=(3, 3), train_steps=30, batch_size=16, lr=3e-3,
            gen_length=16, block_length=4, n_prompts=8, batch=4, n_speed_b1=1,
            knobs=dict(llada=[4, 1], threshold=[0.5, 0.9], factor=[1.0], elastic=[0.9], dllmcache=[0.25], pcache=[0.2], pcommit=[0.5],
                       polestar=[[0.3, 0.2], [0.5, 0.5]]))


def _strip(metrics):
    out = json.loads(json.dumps(metrics))
    out["model"] = {k: v for k, v in out["model"].items() if not k.endswith("_s")}
    for v in out["configs"].values():
        v.pop("tokens_per_s_b16")
        v.pop("tokens_per_s_b1")
    return out


def test_polestar_contract_and_determinism(monkeypatch, tmp_path):
    monkeypatch.setenv("NEURIPS26_CACHE", str(tmp_path / "cache"))
    monkeypatch.setitem(exp_mod.SIZES, True, TINY)
    exp = reproduce.get("polestar")
    a = run_experiment(exp, tmp_path / "a", seed=0, quick=True)
    assert list((tmp_path / "cache").glob("dllm-*.pt"))  # the trained model is cached by its config hash
    b = run_experiment(exp, tmp_path / "b", seed=0, quick=True)  # loads the cached model
    assert _strip(a["metrics"]) == _strip(b["metrics"])
    configs = a["metrics"]["configs"]
    assert len(configs) == sum(len(v) for v in TINY["knobs"].values())
    for v in configs.values():
        assert 0.0 <= v["accuracy"] <= 1.0 and len(v["correct"]) == 8
        assert 1.0 <= v["tokens_per_forward"] <= 16 and v["cost_per_token"] > 0
        assert v["tokens_per_s_b16"] > 0 and v["tokens_per_s_b1"] > 0
    # LLaDA at one token per step: exactly one token per forward, full recompute (N positions x layers)
    v = configs["llada[1]"]
    assert v["tokens_per_forward"] == 1.0
    assert len(a["claims"]) == 3
    for c in a["claims"]:
        assert c["holds"] is None or (isinstance(c["ours"], float) and isinstance(c["baseline"], float))
    # the frontier claim's verdict is the stated rule applied to the recorded numbers
    hv = a["metrics"]["hypervolume"]
    c = a["claims"][0]
    assert c["ours"] == hv["polestar"]
    assert c["holds"] == (not a["metrics"]["undominated_baseline_configs"] and c["ours"] > c["baseline"])
    run = tmp_path / "a" / "polestar"
    assert (run / "pareto.png").exists() and "accuracy %" in (run / "report.md").read_text()


def test_hypervolume_closed_form():
    pts = [{"throughput": 1.0, "accuracy": 0.5}, {"throughput": 0.5, "accuracy": 1.0}]
    assert np.isclose(exp_mod.hypervolume(pts, 1.0), 0.5 * 0.5 + 1.0 * 0.5)
    assert np.isclose(exp_mod.hypervolume(pts[:1], 2.0), 0.25)
