"""The AdaSGDA reproduction end to end at a tiny size (the --quick run takes a few minutes)."""

import math

from neurips26 import reproduce
from neurips26.reproduce import adasgda as exp_mod
from neurips26.reproduce import run_experiment


def test_adasgda_experiment_contract_and_determinism(monkeypatch, tmp_path):
    monkeypatch.setitem(exp_mod.SIZES, True, dict(m=4, n=3, calls=60, seeds=2, det_seeds=1, etas=[0.1, 1.0, 10.0],
                                                  noise=0.5, dro_calls=6, dro_etas=[0.1, 1.0], dro_seeds=2,
                                                  grid=[0.1, 1.0], grid_calls=30,
                                                  gan=dict(calls=4, etas=[0.1, 1.0], seeds=1)))
    exp = reproduce.get("adasgda")
    a = run_experiment(exp, tmp_path / "a", seed=1, quick=True)
    b = run_experiment(exp, tmp_path / "b", seed=1, quick=True)
    assert a["metrics"] == b["metrics"]
    m = a["metrics"]
    assert set(m["stochastic_decades"]) == set(exp_mod.METHODS)
    claims = a["claims"]
    assert len(claims) == 7
    for c in claims:  # every claim decided over seeds, with its interval
        assert c["verdict"] in ("holds", "does not hold", "inconclusive") and c["n"] == 2
        assert c["ci"][0] <= c["diff"] <= c["ci"][1]
    assert claims[0]["ours_seeds"] == m["stochastic_decades_per_seed"]["AdaSGDA"]
    assert claims[0]["baseline"] == 4.0 - 0.5  # grid [0.1, 1, 10]: a step of one decade
    assert all(0.0 <= v <= 2.0 for v in claims[0]["ours_seeds"])
    assert claims[1]["ours_seeds"] == m["dro"]["AdaSGDA"]["loss_decades_seeds"]
    slopes = m["stochastic_slopes_eta1"]
    assert claims[2]["ours_seeds"] == [0.0 if v == "diverged" else v for v in slopes["AdaSGDA"]["per_seed"]]
    assert claims[4]["baseline_seeds"] == claims[2]["ours_seeds"] and claims[4]["better"] == "lower"
    dro = m["dro"]
    rival = claims[5]["claim"].split("TiAda / NeAda (")[1].split(")")[0]
    assert claims[5]["ours_seeds"] == dro["AdaSGDA"]["best_robust_acc_seeds"]
    assert claims[5]["baseline_seeds"] == dro[rival]["best_robust_acc_seeds"] and claims[5]["margin"] == -0.01
    for v in dro.values():
        for r in v["per_eta"]:
            assert len(r["robust_acc_seeds"]) == 2 and all(0.0 <= x <= 1.0 for x in r["robust_acc_seeds"])
            if r["robust_acc"] != "diverged":
                assert r["train_delta_norm"] >= 0.0 and 0.0 <= r["robust_acc_wide"] <= 1.0
    assert set(m["gan"]) == set(exp_mod.METHODS)
    for v in m["gan"].values():
        assert v["best_eta"] in (0.1, 1.0) and len(v["per_eta"]) == 2
        assert v["mmd2_eta1"] == "diverged" or 0.0 <= v["mmd2_eta1"] <= 2.0
    report = (tmp_path / "a" / "adasgda" / "report.md").read_text()
    assert "WGAN-GP on 8 Gaussians" in report
    for png in ("grad_phi_vs_calls.png", "eta_robustness.png", "stepsize_ratio.png", "sensitivity_map.png"):
        assert (tmp_path / "a" / "adasgda" / png).exists()


def test_robust_decades_counts_the_longest_run_within_10x():
    etas = [1e-3, 1e-2, 1e-1, 1.0, 10.0]
    assert exp_mod.robust_decades(etas, [50.0, 0.9, 1.0, 2.0, None]) == 2.0
    assert exp_mod.robust_decades(etas, [1.0, 1.0, 100.0, 1.0, 1.0]) == 1.0
    assert exp_mod.robust_decades(etas, [None] * 5) == 0.0
    assert math.isclose(exp_mod.robust_decades([1e-3, 10 ** -2.5, 1e-2], [1, 2, 3]), 1.0)
    # below the floor every value ties with the best
    assert exp_mod.robust_decades(etas, [1e-30, 1e-90, 1e-12, 1e-3, None]) == 0.0
    assert exp_mod.robust_decades(etas, [1e-30, 1e-90, 1e-12, 1e-3, None], floor=1e-8) == 2.0


def test_decades_threshold_is_half_a_grid_step_below_four():
    assert exp_mod._decades_threshold(exp_mod.ETAS) == 3.75
    assert exp_mod._decades_threshold([1e-3, 1e-2, 1e-1, 1.0, 10.0]) == 3.5


def test_attack_breaks_an_undefended_model_more_at_a_larger_radius():
    import torch

    Xtr, ytr, Xte, yte = exp_mod._digits(0)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(150):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(Xtr), ytr).backward()
        opt.step()
    with torch.no_grad():
        clean = float((model(Xte).argmax(1) == yte).float().mean())
    small, _ = exp_mod._attack(model, Xte, yte, eps=0.1)
    mid, _ = exp_mod._attack(model, Xte, yte, eps=exp_mod.ATTACK_EPS)
    wide, _ = exp_mod._attack(model, Xte, yte, eps=exp_mod.ATTACK_EPS_WIDE)
    assert clean > 0.9 and clean >= small >= mid >= wide and wide < 0.1


def test_gan_quality_counts_modes_and_mmd():
    import torch

    centres = exp_mod.gan_centres()
    gen = torch.Generator().manual_seed(0)
    real = exp_mod.gan_real(4000, gen)
    q = exp_mod.gan_quality(exp_mod.gan_real(4000, gen), real)
    assert q["modes"] == 8 and q["high_quality"] > 0.98 and q["mmd2"] < 1e-3  # the data itself
    collapsed = exp_mod.gan_quality(centres[[3]].repeat(4000, 1), real)
    assert collapsed["modes"] == 1 and collapsed["high_quality"] == 1.0 and collapsed["mmd2"] > 0.1
    far = exp_mod.gan_quality(torch.zeros(4000, 2), real)  # the origin, 2 from every centre
    assert far["modes"] == 0 and far["high_quality"] == 0.0
