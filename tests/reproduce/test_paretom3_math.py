"""The math word-problem task of the paretom3 reproduction (full run and scripts/paretom3_gpu.py) at a tiny size."""

import dataclasses
import json
import random
import re
import runpy
import sys
from pathlib import Path

import numpy as np
import pytest

from neurips26.reproduce import paretom3 as exp_mod
from neurips26.reproduce._common import CharTokenizer

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("family", exp_mod.MATH_FAMILIES)
def test_generated_problems_have_the_right_answers(family):
    """Independent reference: the numbers read back from the text, combined as the family says."""
    items = exp_mod._math_problems(family, 300, random.Random(0))
    assert len({qa.prompt for qa in items}) == 300
    tok = CharTokenizer()
    for qa in items:
        tok.encode(qa.prompt + qa.answer)  # every character is in the tokenizer's alphabet
        nums = [int(v) for v in re.findall(r"\d+", qa.prompt)]
        expected = nums[0] + nums[1] - nums[2] if family == "addsub" else nums[0] * nums[1] * nums[2]
        assert int(qa.answer) == expected and expected >= 0


def test_family_sizes_count_the_distinct_problems_and_bound_the_draw():
    """Reference: every operand combination written out, its distinct prompts counted; asking for more
    than there are is refused (it used to loop forever: the full size asked for 2 300 of 1 536)."""
    lo, hi = exp_mod.MUL_RANGE
    mul = {(w, c, a, b, item) for w in exp_mod.NAMES for item in exp_mod.MUL_ITEMS
           for a in range(lo, hi + 1) for b in range(lo, hi + 1) for c in range(lo, hi + 1)}
    assert exp_mod.math_family_size("mul") == len(mul)
    lo, hi = exp_mod.ADDSUB_RANGE
    addsub = sum(a + b + 1 for a in range(lo, hi + 1) for b in range(lo, hi + 1)) * len(exp_mod.NAMES)
    assert exp_mod.math_family_size("addsub") == addsub
    # the full run's and the GPU script's defaults fit
    assert exp_mod.SIZES[False]["math"]["n_train"] + exp_mod.SIZES[False]["math"]["n_test"] <= len(mul)
    assert 20000 + 1000 <= len(mul)
    items = exp_mod._math_problems("mul", len(mul), random.Random(1))  # all of them, and it ends
    assert len({qa.prompt for qa in items}) == len(mul)
    with pytest.raises(ValueError, match="distinct ones"):
        exp_mod._math_problems("mul", len(mul) + 1, random.Random(0))


def test_unknown_family_and_config_are_rejected():
    with pytest.raises(ValueError, match="family"):
        exp_mod._math_problems("div", 3, random.Random(0))
    t = exp_mod.MathTask("LS", (0.5, 0.5), ((0.5, 0.5),), 0, 0, 2, "huge", 8, 4, 2)
    with pytest.raises(ValueError, match="config"):
        exp_mod.math_run(t)


def test_math_runs_spend_the_same_budget_and_report_consistent_metrics():
    rays = tuple(map(tuple, exp_mod._rays(2).tolist()))
    for method in exp_mod.MATH_METHODS:
        t = exp_mod.MathTask(method, rays[1], rays, 1, 0, 8, "tiny", 32, 16, 4, merit_steps=2)
        out = exp_mod.run_math(t)
        assert out["backward_passes"] == 8  # the same budget in backward passes (ParetoM3: 4 steps, LS: 8)
        assert len(out["acc"]) == 2 and all(0.0 <= a <= 1.0 for a in out["acc"])
        L, inv = np.asarray(out["train_loss"]), 1 / np.asarray(rays[1])
        assert out["alignment"] == pytest.approx(float(L @ inv / np.linalg.norm(L) / np.linalg.norm(inv)))
        assert out["merit"] >= 0.0


def test_gpu_script_smoke_on_cpu(tmp_path, monkeypatch):
    out = tmp_path / "math.json"
    monkeypatch.setattr(sys, "argv", ["paretom3_gpu.py", "--device", "cpu", "--tiny", "--out", str(out),
                                      "--methods", "LS", "ParetoM3"])
    runpy.run_path(str(ROOT / "scripts" / "paretom3_gpu.py"), run_name="__main__")
    res = json.loads(out.read_text())
    assert res["settings"]["config"] == "tiny" and res["settings"]["parameters"] > 0
    assert len(res["runs"]) == 2 * 2  # methods x rays x 1 seed
    assert {r["method"] for r in res["runs"]} == {"LS", "ParetoM3"}
    # the ~100 M configuration the script runs by default
    cfg = exp_mod.MATH_CONFIGS["gpu100m"]
    h, f, n = cfg["hidden"], cfg["ffn"], cfg["layers"]
    assert 80e6 < n * (4 * h * h + 3 * h * f) < 120e6


def test_a_diverged_math_run_is_flagged_and_measured_at_the_untrained_model():
    # at lr 30 the tiny model's losses turn non-finite within a few steps (ParetoM3 raises on them); the run
    # must not fail the experiment but count as not having moved, as a diverged run does on the other problems
    rays = tuple(map(tuple, exp_mod._rays(2).tolist()))
    t = exp_mod.MathTask("ParetoM3", rays[0], rays, 0, 0, 40, "tiny", 32, 16, 4, lr=30.0, merit_steps=2)
    out = exp_mod.run_math(t)
    assert out["diverged"] and 0 < out["diverged_at"] < 40
    start = exp_mod.run_math(dataclasses.replace(t, budget=0))  # the untrained model, same seed
    assert not start["diverged"] and start["diverged_at"] is None
    assert out["train_loss"] == start["train_loss"] and out["acc"] == start["acc"]
    assert out["merit"] == pytest.approx(start["merit"]) and np.isfinite(out["alignment"])


def test_gpu_script_runs_another_config(tmp_path, monkeypatch):
    out = tmp_path / "math.json"
    monkeypatch.setattr(sys, "argv", ["paretom3_gpu.py", "--device", "cpu", "--config", "tiny", "--budget", "4",
                                      "--n-train", "16", "--n-test", "8", "--batch", "4", "--rays", "2",
                                      "--lr", "30", "--methods", "ParetoM3", "--out", str(out)])
    runpy.run_path(str(ROOT / "scripts" / "paretom3_gpu.py"), run_name="__main__")
    res = json.loads(out.read_text())
    assert res["settings"]["config"] == "tiny" and res["settings"]["lr"] == 30.0
    assert len(res["runs"]) == 2 and all("diverged" in r for r in res["runs"])
