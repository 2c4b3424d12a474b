"""The polestar reproduction end to end at a tiny size (a tiny model trained for a few steps in a temp cache)."""

import json

import numpy as np
import pytest

from neurips26 import reproduce
from neurips26.reproduce import polestar as exp_mod
from neurips26.reproduce import run_experiment

TINY = dict(model=dict(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64),
            tasks=("sort", "reverse"), add_digits=(3, 3), train_steps=30, batch_size=16, lr=3e-3,
            gen_length=16, block_length=4, n_prompts=8, batch=4, n_speed_b1=1,
            knobs=dict(llada=[4, 1], threshold=[0.5, 0.9], factor=[1.0], elastic=[0.9], elastic_window=[2], dllmcache=[0.25],
                       pcache=[0.2], pcommit=[0.5],
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
        if "verdict" in c:  # decided by the paired bootstrap over prompts
            lo, hi = c["ci"]
            assert "paired bootstrap over 8 prompts" in c["method"] and c["n"] == 8 and lo <= c["diff"] <= hi
            assert c["verdict"] == ("holds" if lo > 0 else "does not hold" if hi < 0 else "inconclusive")
        else:  # only a claim whose comparison does not exist in this run goes undecided
            assert c["holds"] is None and "not tested" in c["claim"]
    # the frontier claim: Polestar's hypervolume against the best baseline's, with its bootstrap interval
    hv = a["metrics"]["hypervolume"]
    c = a["claims"][0]
    assert "verdict" in c and c["ours"] == hv["polestar"] and c["baseline"] == max(hv[f] for f in exp_mod.BASELINES)
    assert c["ci"] == a["metrics"]["hypervolume_diff_ci95"]
    run = tmp_path / "a" / "polestar"
    assert (run / "pareto.png").exists() and "accuracy %" in (run / "report.md").read_text()


def test_bootstrap_is_paired_and_speedups_pick_the_fastest_within_one_point():
    summary = {"a": {"correct": [1, 0, 1, 1], "cost_per_prompt": [2.0] * 4},
               "b": {"correct": [1, 0, 1, 1], "cost_per_prompt": [1.0] * 4}}
    boot = exp_mod._resampled(summary, seed=0, reps=50)
    assert np.array_equal(boot["a"]["accuracy"], boot["b"]["accuracy"])  # same prompts in every resample
    assert np.allclose(boot["b"]["throughput"], 2 * boot["a"]["throughput"])
    acc = {"v": 0.9, "p1": 0.895, "p2": 0.85, "c1": 0.95}
    thr = {"v": 1.0, "p1": 3.0, "p2": 9.0, "c1": 2.0}
    assert exp_mod._speedups(acc, thr, "v", ["p1", "p2"], ["c1"]) == (3.0, 2.0)
    assert exp_mod._speedups(acc, thr, "v", ["p2"], ["c1"]) == (0.0, 2.0)
    assert exp_mod._interval(5.0, np.arange(100.0)) == [pytest.approx(2.475), pytest.approx(96.525)]
    assert exp_mod._interval(-1.0, np.arange(10.0))[0] == -1.0


def test_hypervolume_closed_form():
    pts = [{"throughput": 1.0, "accuracy": 0.5}, {"throughput": 0.5, "accuracy": 1.0}]
    assert np.isclose(exp_mod.hypervolume(pts, 1.0), 0.5 * 0.5 + 1.0 * 0.5)
    assert np.isclose(exp_mod.hypervolume(pts[:1], 2.0), 0.25)


@pytest.mark.parametrize("quick", [True, False])
def test_every_decoder_family_has_knobs_and_builds(quick):
    S = exp_mod.SIZES[quick]
    assert set(S["knobs"]) == set(exp_mod.FAMILIES)
    for family in exp_mod.FAMILIES:
        for knob in S["knobs"][family]:
            commit, cache, block = exp_mod.make_decoder(family, knob, S["block_length"], S["gen_length"])
            assert S["gen_length"] % block == 0
            # the sliding window decodes the answer as one block, every other decoder semi-autoregressively
            assert block == (S["gen_length"] if family == "elastic_window" else S["block_length"])
