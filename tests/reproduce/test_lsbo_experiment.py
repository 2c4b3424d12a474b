"""The LSBO reproduction end to end at a tiny size (robot task only; the VAE cache in a
temporary directory), and the train-vae command."""

import math

import pytest

pytest.importorskip("botorch")
from neurips26 import cli, reproduce  # noqa: E402
from neurips26.bayesopt import pretrained  # noqa: E402
from neurips26.reproduce import lsbo_marginalized_kernel as exp_mod  # noqa: E402
from neurips26.reproduce import run_experiment  # noqa: E402

TINY = dict(tasks=("robot",), seeds=(0, 1), n_init=16, budget=10, batch=5, n_candidates=32,
            vae_epochs={"molecules": 1, "robot": 2}, sweep_task="robot", finetune_every=2)


def test_lsbo_experiment_contract(monkeypatch, tmp_path):
    monkeypatch.setenv("NEURIPS26_CACHE", str(tmp_path / "cache"))
    monkeypatch.setitem(exp_mod.SIZES, True, TINY)
    out = run_experiment(reproduce.get("lsbo-marginalized-kernel"), tmp_path, seed=0, quick=True)
    s = out["metrics"]["summary"]["robot"]
    assert set(s) == {f"{k}+{m}" for k in exp_mod.KERNELS for m in exp_mod.SAMPLERS} | {"rbf x0.1+turbo",
                                                                                        "rbf x10+turbo"}
    for v in s.values():
        assert v["best_mean"] >= v["init_best"] and 0 <= v["validity"] <= 1 and 0 <= v["uniqueness"] <= 1
    assert (tmp_path / "cache" / "lsbo-robot-vae-2ep.pt").exists()  # trained once and cached
    assert out["config"]["seeds"] == [0, 1]
    per_seed = out["metrics"]["per_seed"]["robot"]
    assert len(out["claims"]) == 3  # robot vs its strongest baseline, most tasks, bandwidth sweep
    for claim in out["claims"]:  # every claim decided over the seeds, with its interval
        assert math.isfinite(claim["ours"]) and math.isfinite(claim["baseline"])
        assert claim["verdict"] in ("holds", "does not hold", "inconclusive") and claim["n"] == 2
        lo, hi = claim["ci"]
        assert lo <= claim["diff"] <= hi
    head = out["claims"][0]
    rival = head["claim"].split("strongest baseline by mean: ")[1].split(";")[0]
    assert head["ours_seeds"] == per_seed[exp_mod.OURS] and head["baseline_seeds"] == per_seed[rival]
    assert rival == max((k for k in s if k != exp_mod.OURS), key=lambda k: s[k]["best_mean"])
    wins = [float(a > b) for a, b in zip(per_seed[exp_mod.OURS], per_seed[rival])]
    assert out["claims"][1]["ours_seeds"] == wins and out["claims"][1]["baseline"] == 0.5
    assert (tmp_path / "lsbo-marginalized-kernel" / "best-found.png").exists()


def test_train_vae_command_caches_and_reuses(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("NEURIPS26_CACHE", str(tmp_path))
    monkeypatch.setitem(pretrained.DEFAULT_EPOCHS, "robot", 1)
    assert cli.main(["lsbo", "train-vae", "--task", "robot"]) == 0
    path = tmp_path / "lsbo-robot-vae-1ep.pt"
    stamp = path.stat().st_mtime_ns
    _, meta = pretrained.pretrained_codec("robot", epochs=1)  # served from the cache
    assert meta["epochs"] == 1 and path.stat().st_mtime_ns == stamp
    # another epoch count is another VAE, in a file of its own: the 1-epoch one is neither served nor replaced
    _, meta2 = pretrained.pretrained_codec("robot", epochs=2)
    assert meta2["epochs"] == 2 and (tmp_path / "lsbo-robot-vae-2ep.pt").exists()
    assert path.stat().st_mtime_ns == stamp and pretrained.pretrained_codec("robot", epochs=1)[1]["epochs"] == 1
    assert cli.main(["lsbo", "train-vae", "--task", "nope"]) == 2
    assert "must be one of" in capsys.readouterr().err
