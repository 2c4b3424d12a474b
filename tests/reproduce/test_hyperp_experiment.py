"""The hyperp reproduction end to end at a tiny size (the --quick run takes a few minutes)."""

import math

import numpy as np
import pytest

from neurips26 import reproduce
from neurips26.reproduce import hyperp as exp_mod
from neurips26.reproduce import run_experiment

TINY = dict(seeds=2, width_methods=("hyperp", "muon"), widths=[32, 48], depths=[2, 3], budgets=[1, 2], steps=6,
            seq=16, batch=4, eval_batches=2, ks=[1, 2], aux=[1e-3, 1e-1], moe_width=32, moe_ffn=32, bootstrap=20)


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setitem(exp_mod.SIZES, True, TINY)
    monkeypatch.setattr(exp_mod, "GRIDS", {m: g[1:4] for m, g in exp_mod.GRIDS.items()})


def test_hyperp_contract(tiny, tmp_path):
    res = run_experiment(reproduce.get("hyperp"), tmp_path, seed=3, quick=True)
    out = tmp_path / "hyperp"
    assert (out / "results.json").exists() and (out / "report.md").exists()
    for png in ("lr_sweep_width.png", "depth_tokens_wd.png", "curves_sqrt_gate.png"):
        assert (out / png).exists()
    m, claims = res["metrics"], res["claims"]
    assert res["config"]["seeds"] == [3, 4]
    assert len(claims) == 11
    for c in claims:  # every claim decided with its uncertainty over the seeds
        assert c["verdict"] in ("holds", "does not hold", "inconclusive", "not tested")
        assert math.isfinite(c["ours"]) and math.isfinite(c["baseline"])
        if c["verdict"] != "not tested":
            assert c["ci"][0] <= c["diff"] <= c["ci"][1]
    # eta* for every method, width and seed, inside the swept range
    for meth in TINY["width_methods"]:
        grid = [2.0 ** e for e in exp_mod.GRIDS[meth]]
        for w in TINY["widths"]:
            per = m[f"eta_star/width/{meth}/{w}"]["per_seed"]
            assert len(per) == 2 and all(grid[0] <= v <= grid[-1] for v in per)
    # the claims are the stated rules applied to the recorded per-seed numbers
    wd = m["wd_deviation"]
    assert claims[0]["ours_seeds"] == wd["worst_slope_error"]["per_seed"] and claims[0]["baseline"] == 0.2
    # weight decay: second order on the sphere, first order for Muon (the library's property, exact here)
    for a, b in zip(wd["slope_hyperp"]["per_seed"], wd["slope_muon"]["per_seed"]):
        assert abs(a - 2) < 0.3 and abs(b - 1) < 0.3
    assert claims[0]["verdict"] == "holds"
    shift = m["width_shift_log2"]
    assert claims[1]["ours_seeds"] == shift["hyperp"]["per_seed"]
    assert claims[1]["n_capped"] == sum(shift["hyperp_on_grid_edge"])
    assert (claims[1]["verdict"] == "not tested") == (sum(shift["hyperp_on_grid_edge"]) >= 1)  # 2 seeds: one cap
    depth = m["depth_shift_log2"]
    assert claims[2]["ours_seeds"] == depth["depth-mup"]["per_seed"]
    assert claims[2]["baseline_seeds"] == depth["no-depth-mup"]["per_seed"]
    g = m["gamma"]
    assert g["ci"][0] <= g["gamma"] <= g["ci"][1]
    assert (claims[4]["verdict"] == "not tested") == g["pooled_optimum_on_grid_edge"]
    if not g["pooled_optimum_on_grid_edge"]:
        assert claims[4]["diff"] == pytest.approx(exp_mod.GAMMA_TOL - abs(g["gamma"] - 0.32))
    eff = m["compute_efficiency"]
    assert claims[5]["ours_seeds"] == eff["speedup"]["per_seed"] and claims[5]["baseline"] == 1.0
    assert claims[6]["ours_seeds"] == m["indicators"]["worst_ratio_hyperp"]["per_seed"]
    sg = m["sqrt_gate"]
    for s in ("3", "4"):
        assert len(sg["moe_rms"][s]["sqrt"]) == len(TINY["ks"]) and all(v > 0 for v in sg["moe_rms"][s]["sqrt"])
        for meth in ("hyperp", "muon"):
            for a in TINY["aux"]:
                assert m["aux_loss"][s][meth][str(a)]["load"] >= 1.0
    assert claims[7]["ours_seeds"] == sg["sqrt_max_over_min"]["per_seed"]
    assert claims[8]["ours_seeds"] == sg["softmax_last_over_first"]["per_seed"]
    assert set(m["indicators"]["per_seed"]["3"]["ratio_hyperp"]) >= {"block_rms", "lm_head_z"}


def test_band_distance_is_the_image_of_the_interval():
    # tol - |g - 0.32| over g in [lo, hi]
    assert exp_mod._band_distance([0.2, 0.5], 0.32, 0.1) == pytest.approx([0.1 - 0.18, 0.1])
    assert exp_mod._band_distance([0.35, 0.4], 0.32, 0.1) == pytest.approx([0.1 - 0.08, 0.1 - 0.03])
    assert exp_mod._band_distance([0.0, 0.1], 0.32, 0.1) == pytest.approx([0.1 - 0.32, 0.1 - 0.22])


def test_one_run_is_deterministic_and_learns(tiny):
    r = exp_mod.Run("hyperp", 32, 2, 2.0 ** -5, 8, 16, 4, 2, seed=0)
    a, b = exp_mod.run_training(r), exp_mod.run_training(r)
    assert a == b
    assert not a["diverged"] and a["loss"] < math.log(exp_mod.VOCAB)
    # HyperballMuon keeps every hidden matrix on its sphere during the run
    model = exp_mod._model(r)
    radii = [float(p.detach().norm()) for p in exp_mod._hidden_matrices(model)[0]]
    opt, = exp_mod._optimizers(r, model)
    train, _ = exp_mod._data()
    gen = np.random.default_rng(0)
    for _ in range(3):
        s = int(gen.integers(0, train.numel() - 20))
        b = train[s:s + 17][None]
        loss = model(b[:, :-1], labels=b[:, :-1]).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    after = [float(p.detach().norm()) for p in exp_mod._hidden_matrices(model)[0]]
    assert np.allclose(after, radii, rtol=1e-5)


def test_spectral_sphere_baseline_trains_the_block_matrices():
    """The full size's extra baseline: pytorch_optimizer.SpectralSphere on HyperP's sphere group (the block
    matrices), AdamW on the rest, and a short run that lowers the loss."""
    pytest.importorskip("pytorch_optimizer")
    from pytorch_optimizer import SpectralSphere

    r = exp_mod.Run("spectral-sphere", 32, 2, 2.0 ** -6, 4, 16, 4, 2, 0)
    model = exp_mod._model(r)
    mats, adamw = exp_mod._optimizers(r, model)
    hidden, rest = exp_mod._hidden_matrices(model)
    assert isinstance(mats, SpectralSphere) and mats.param_groups[0]["params"] == hidden
    assert adamw.param_groups[0]["params"] == rest
    assert "spectral-sphere" in exp_mod.SIZES[False]["width_methods"]
    out = exp_mod.run_training(r)
    assert not out["diverged"] and math.isfinite(out["loss"])
    assert out["curve"][-1][1] < out["curve"][0][1]
