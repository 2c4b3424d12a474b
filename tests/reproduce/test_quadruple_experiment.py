"""The quadruple-optimizers reproduction end to end at a tiny size (--quick takes about two minutes)."""

import math

from neurips26 import reproduce
from neurips26.reproduce import quadruple_optimizers as exp_mod
from neurips26.reproduce import run_experiment

TINY = dict(decades=(-1, 0), quad_steps=30, rosen_steps=40, digits_steps=20, lm_steps=6, lm_context=16, lm_width=16,
            refine=False, seeds=(0, 1), dev_steps=20)


def test_quadruple_experiment_contract(monkeypatch, tmp_path):
    monkeypatch.setitem(exp_mod.SIZES, True, TINY)
    out = run_experiment(reproduce.get("quadruple-optimizers"), tmp_path, seed=0, quick=True)
    m = out["metrics"]
    assert set(m["per_task"]) == {"quadratic", "rosenbrock", "digits", "lm"}
    for task in m["per_task"].values():
        assert set(task) == set(exp_mod.OPTIMIZERS)
    assert set(m["max_rel_dev_vs_torch"]) >= {"sgd", "adam", "adamw", "muon"}
    assert all(v <= 1e-6 for v in m["max_rel_dev_vs_torch"].values())
    # the tracking instance's contraction is a theorem: it holds at any size, on every seed's quadratic
    per_seed = m["theory_quadratic_per_seed"]["tracking"]["max_contraction_ratio"]
    assert len(per_seed) == 2 and max(per_seed) <= 1 - exp_mod.TRACKING_GAIN + 1e-9
    assert m["seeds"] == [0, 1]
    assert len(out["claims"]) == 1 + 2 * len(exp_mod.NEW) + 2
    for claim in out["claims"]:  # every claim decided over the seeds, with its interval
        assert claim["verdict"] in ("holds", "does not hold", "inconclusive", "not tested")
        assert math.isfinite(claim["ours"]) and math.isfinite(claim["baseline"]) and claim["n"] == 2
        assert claim["ci"][0] <= claim["diff"] <= claim["ci"][1]
    first = out["claims"][0]
    assert first["ours_seeds"] == per_seed and first["method"] == "one-sample t"
    digits = [c for c in out["claims"] if c["claim"].startswith("digits")][0]
    best = digits["claim"].split("(")[1].split(",")[0]
    assert digits["ours_seeds"] == m["per_task"]["digits"][best]["test_accuracy_per_seed"]
    assert digits["baseline_seeds"] == m["per_task"]["digits"]["adamw"]["test_accuracy_per_seed"]
    assert digits["margin"] == -exp_mod.ACC_MARGIN and digits["method"] == "paired t"
    lo, hi = digits["ci"]
    assert digits["verdict"] == ("holds" if lo > -0.01 else "does not hold" if hi < -0.01 else "inconclusive")
    for png in ("geometric_diagnostics.png", "training_curves.png"):
        assert (tmp_path / "quadruple-optimizers" / png).exists()


def test_bound_all_takes_the_weakest_part(tmp_path):
    from neurips26.reproduce._harness import RunContext

    ctx = RunContext("x", tmp_path, seed=0)
    # the rate part holds (well below 1), the R² part does not (well below 0.9): the claim does not hold
    v = exp_mod.bound_all(ctx, "c", [("rate", [0.5, 0.51, 0.49], 1.0, "lower"), ("r2", [0.5, 0.52, 0.48], 0.9, "higher")])
    assert v == "does not hold" and ctx.claims[-1].claim.endswith("decided by its r2 part")
    assert ctx.claims[-1].ours_seeds == [0.5, 0.52, 0.48]
    # both hold: holds; one inconclusive, none failing: inconclusive
    assert exp_mod.bound_all(ctx, "c", [("rate", [0.5, 0.51], 1.0, "lower"), ("r2", [0.99, 0.98], 0.9, "higher")]) == "holds"
    assert exp_mod.bound_all(ctx, "c", [("rate", [0.5, 1.5], 1.0, "lower"), ("r2", [0.99, 0.98], 0.9, "higher")]) \
        == "inconclusive"


def test_tuning_extends_past_an_edge_and_refines():
    calls = []

    def run_at(lr):
        calls.append(lr)
        return {"score": abs(math.log10(lr) + 4.0)}  # best at 1e-4, below the sgd grid

    best, grid = exp_mod.tune(run_at, "sgd-momentum", (-1, 0, 1), lambda r: r["score"], refine=True)
    assert best["score"] == 0.0
    assert min(grid) < 1e-4 < max(grid)
    assert any(abs(math.log10(lr) + 3.5) < 1e-9 for lr in grid)  # a half-decade beside the best


def test_stdlib_text_is_deterministic_ascii():
    a, b = exp_mod.stdlib_text(), exp_mod.stdlib_text()  # re-exported from _common
    assert a == b and len(a) > 50_000 and max(a) < 128


def _reference_tune(run_at, name, decades, score, refine):
    """The tuner as it stood before it moved into _common.tune_on_grid (the baseline)."""
    centre = exp_mod.LR_CENTRE[name]
    tried = {}

    def at(k):
        if k not in tried:
            tried[k] = run_at(centre * 10.0**k)
        return tried[k]

    for k in decades:
        at(float(k))
    for _ in range(3):
        best = min(tried, key=lambda k: score(tried[k]))
        if best == min(tried):
            at(best - 1.0)
        elif best == max(tried):
            at(best + 1.0)
        else:
            break
    best = min(tried, key=lambda k: score(tried[k]))
    if refine:
        at(best - 0.5)
        at(best + 0.5)
        best = min(tried, key=lambda k: score(tried[k]))
    return tried[best], sorted(centre * 10.0**k for k in tried)


def test_tune_makes_the_choices_of_the_tuner_it_replaced():
    import random

    rng = random.Random(0)
    for trial in range(300):
        decades = tuple(sorted(rng.sample(range(-3, 4), rng.randint(2, 5))))
        optimum = rng.uniform(-8, 2)
        values = {}

        def run_at(lr, calls):
            calls.append(lr)
            key = round(math.log10(lr), 6)
            if key not in values:  # a noisy landscape with ties: rounded to half decades
                values[key] = round(2 * abs(key - optimum + rng.uniform(-1, 1))) / 2
            return {"lr": lr, "score": values[key]}

        for refine in (False, True):
            ours_calls, ref_calls = [], []
            name = rng.choice(exp_mod.OPTIMIZERS)
            ours = exp_mod.tune(lambda lr: run_at(lr, ours_calls), name, decades, lambda r: r["score"], refine)
            ref = _reference_tune(lambda lr: run_at(lr, ref_calls), name, decades, lambda r: r["score"], refine)
            assert ours_calls == ref_calls and ours == ref
