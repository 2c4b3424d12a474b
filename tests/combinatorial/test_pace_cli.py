"""``neurips26 pace train TASK`` (cli_pace): trains with the given knobs into the cache folder the
environment names, prints the cache path and the training record, loads instead of retraining on a
second call (``--force`` retrains), and rejects bad input with exit status 2."""

import argparse

import pytest

from neurips26.cli_pace import register
from neurips26.combinatorial.pace import pretrained
from neurips26.combinatorial.pace.ranker import load_ranker


def _main(argv):
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="command", required=True)
    register(sub)
    args = p.parse_args(argv)
    return args.func(args)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NEURIPS26_CACHE", str(tmp_path))
    monkeypatch.setitem(pretrained.RECIPES, "tsp", dict(n=12, instances=3, states=4, epochs=2, seed=0))
    return tmp_path


def test_pace_train_caches_and_reports(cache, capsys):
    assert _main(["pace", "train", "tsp", "--epochs", "3", "--instances", "2", "--seed", "5"]) == 0
    out = capsys.readouterr().out
    path = pretrained.ranker_path("tsp", epochs=3, instances=2, seed=5)
    assert path.parent == cache and path.exists() and [p.name for p in cache.iterdir()] == [path.name]
    _, meta = load_ranker(path)
    assert meta["recipe"] == dict(n=12, instances=2, states=4, epochs=3, seed=5) and len(meta["losses"]) == 3
    assert path.name in out.replace("\n", "") and "3 epochs" in out and f"{meta['n_examples']} examples" in out
    assert "teacher elkai" in out and f"{meta['losses'][-1]:.3f}" in out and "trained in" in out
    # the default recipe is another file: untouched by the custom training
    assert not pretrained.ranker_path("tsp").exists()

    mtime = path.stat().st_mtime_ns
    assert _main(["pace", "train", "tsp", "--epochs", "3", "--instances", "2", "--seed", "5"]) == 0
    assert "already cached" in capsys.readouterr().out and path.stat().st_mtime_ns == mtime
    assert _main(["pace", "train", "tsp", "--epochs", "3", "--instances", "2", "--seed", "5", "--force"]) == 0
    assert "trained in" in capsys.readouterr().out and path.stat().st_mtime_ns != mtime


def test_pace_train_shared_ranker_and_default_recipe(cache, capsys, monkeypatch):
    monkeypatch.setitem(pretrained.RECIPES, "mis", dict(pretrained.RECIPES["mis"], instances=2, states=3, epochs=1,
                                                        ils_rounds=2, cpsat_det_s=0.05))
    assert _main(["pace", "train", "mvc"]) == 0
    out = capsys.readouterr().out
    assert "mis ranker (shared by mvc)" in out and pretrained.ranker_path("mis").exists()
    assert pretrained.ranker_path("mis").name == f"pace-mis-v{pretrained.CACHE_VERSION}-ranker.pt"


@pytest.mark.parametrize("argv, message", [
    (["pace", "train", "knapsack"], "TASK must be one of tsp, atsp, cvrp, mis, mvc, mcl, maxcut"),
    (["pace", "train", "tsp", "--epochs", "0"], "--epochs must be >= 1"),
    (["pace", "train", "tsp", "--instances", "-1"], "--instances must be >= 1"),
    (["pace", "train", "tsp", "--seed", "-2"], "--seed must be >= 0"),
])
def test_pace_train_bad_input_exits_2(cache, capsys, argv, message):
    assert _main(argv) == 2
    err = capsys.readouterr().err
    assert "error:" in err and message in err
    assert list(cache.iterdir()) == []


def test_pace_train_help_lists_the_tasks(capsys):
    with pytest.raises(SystemExit):
        _main(["pace", "train", "--help"])
    out = capsys.readouterr().out
    for name in pretrained.TASK_NAMES:
        assert name in out
    assert "--force" in out and "--epochs" in out and "--instances" in out and "--seed" in out


def test_pace_train_neural_bad_input_and_missing_extra(cache, capsys, monkeypatch):
    from neurips26.combinatorial.pace import neural

    assert _main(["pace", "train-neural", "mis"]) == 2
    assert "PROBLEM must be one of tsp, cvrp, atsp" in capsys.readouterr().err
    assert _main(["pace", "train-neural", "tsp", "--steps", "0"]) == 2
    assert "--steps must be >= 1" in capsys.readouterr().err
    assert _main(["pace", "train-neural", "cvrp", "--n", "5"]) == 2
    assert "--n must be >= 10" in capsys.readouterr().err
    monkeypatch.setattr(neural, "neural_available", lambda: False)
    assert _main(["pace", "train-neural", "tsp", "--steps", "2"]) == 2
    assert "neurips26[neural-co]" in capsys.readouterr().err
    assert not list(cache.iterdir())


@pytest.mark.skipif(not __import__("neurips26.combinatorial.pace.neural", fromlist=["x"]).neural_available(),
                    reason="the neural-co extra (rl4co) is not installed")
def test_pace_train_neural_caches_and_reports(cache, capsys):
    from neurips26.combinatorial.pace.neural import neural_cache_path

    assert _main(["pace", "train-neural", "tsp", "--n", "10", "--steps", "2", "--batch-size", "4"]) == 0
    out = capsys.readouterr().out.replace("\n", "")
    path = neural_cache_path("tsp", 10, 2, 4, 0)
    assert path.exists() and path.name in out and "POMO on TSP-10: 2 steps of 4 instances" in out and "trained in" in out
    assert _main(["pace", "train-neural", "tsp", "--n", "10", "--steps", "2", "--batch-size", "4"]) == 0
    assert "already cached" in capsys.readouterr().out
