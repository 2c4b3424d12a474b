"""``neurips26 dllm train`` through a local parser: it trains a tiny model into a temporary
``$NEURIPS26_CACHE``, names the checkpoint (keyed by the config hash) and the held-out exact match,
reuses the checkpoint on a second call (no training), retrains with ``--force``, and exits 2 with an
``error:`` line on bad input."""

import argparse

import pytest
import torch

from neurips26.cli_dllm import register, train_config_from_args
from neurips26.dllm.model import TrainConfig, cache_path, pretrained_dllm

TINY = ["--steps", "3", "--d-model", "16", "--layers", "1", "--heads", "2", "--ffn", "32", "--batch-size", "4",
        "--tasks", "reverse", "--gen-length", "16", "--block-length", "4", "--eval", "3"]


def run(argv):
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="command", required=True)
    register(sub)
    args = p.parse_args(argv)
    return args, args.func(args)


@pytest.fixture
def cache(monkeypatch, tmp_path):
    monkeypatch.setenv("NEURIPS26_CACHE", str(tmp_path))
    return tmp_path


def test_train_caches_reuses_and_forces(cache, capsys):
    args, rc = run(["dllm", "train", *TINY])
    assert rc == 0
    cfg, block, n_eval = train_config_from_args(args)
    assert (block, n_eval) == (4, 3)
    assert cfg.steps == 3 and cfg.model.hidden_size == 16 and cfg.tasks == ("reverse",)
    path = cache_path(cfg)
    assert path.parent == cache and path.exists() and cfg.key() in path.name
    out = capsys.readouterr().out
    assert "trained in" in out and path.name in out and "held-out exact match" in out and "reverse" in out
    before = path.stat().st_mtime_ns
    # the checkpoint holds the trained weights: loading it gives the same state as the file
    blob = torch.load(path, map_location="cpu", weights_only=False)
    model, meta = pretrained_dllm(cfg)
    assert meta["key"] == cfg.key() and len(meta["losses"]) == 1
    assert all(torch.equal(v, blob["state_dict"][k]) for k, v in model.state_dict().items())

    assert run(["dllm", "train", *TINY])[1] == 0  # cached: loaded, not trained
    assert "loaded from the cache" in capsys.readouterr().out and path.stat().st_mtime_ns == before
    assert run(["dllm", "train", *TINY, "--eval", "0", "--force"])[1] == 0
    out = capsys.readouterr().out
    assert "trained in" in out and "held-out exact match" not in out and path.stat().st_mtime_ns != before
    # another seed is another checkpoint
    args, rc = run(["dllm", "train", *TINY, "--seed", "1", "--eval", "0"])
    assert rc == 0 and len(list(cache.glob("dllm-*.pt"))) == 2


def test_quick_preset_is_the_reproductions_config():
    from neurips26.reproduce.polestar import SIZES, train_config

    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="command", required=True)
    register(sub)
    for size, quick in (("quick", True), ("full", False)):
        cfg, block, _ = train_config_from_args(p.parse_args(["dllm", "train", "--size", size]))
        assert cfg == train_config(SIZES[quick]) and isinstance(cfg, TrainConfig)
        assert block == SIZES[quick]["block_length"]


@pytest.mark.parametrize("extra, msg", [
    (["--steps", "0"], "--steps must be an integer >= 1"),
    (["--d-model", "15"], "must be a multiple of --heads"),
    (["--d-model", "6", "--heads", "2"], "even head size"),
    (["--lr", "nan"], "--lr must be a finite number > 0"),
    (["--lr", "-1"], "--lr must be a finite number > 0"),
    (["--tasks", "add", "nope"], "--tasks must be among"),
    (["--gen-length", "10", "--block-length", "4"], "multiple of --block-length"),
    (["--size", "huge"], "--size must be one of"),
    (["--eval", "-1"], "--eval must be an integer >= 0"),
])
def test_bad_input_exits_2(cache, capsys, extra, msg):
    assert run(["dllm", "train", *TINY, *extra])[1] == 2
    err = capsys.readouterr().err
    assert "error:" in err and msg in err
    assert not list(cache.glob("dllm-*.pt"))
