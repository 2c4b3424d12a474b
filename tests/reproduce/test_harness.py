import json
import os

import pytest

from neurips26 import reproduce
from neurips26._atomic import atomic_open, atomic_write_text
from neurips26.reproduce import Experiment, run_experiment
from neurips26.reproduce._harness import SCHEMA_KEYS


def test_results_schema_report_and_figure(fake_registry, tmp_path):
    res = run_experiment(fake_registry["fake-ok"], tmp_path, seed=7, quick=True)
    on_disk = json.loads((tmp_path / "fake-ok" / "results.json").read_text())
    assert on_disk == res
    assert tuple(on_disk) == SCHEMA_KEYS
    assert on_disk["seed"] == 7 and on_disk["quick"] is True and on_disk["config"] == {"n": 3}
    assert {"python", "torch", "numpy", "cpu_count", "git_commit"} <= set(on_disk["env"])
    assert on_disk["claims"] == [{"claim": "x is below 2", "ours": res["metrics"]["x"], "baseline": 2.0, "holds": True}]
    report = (tmp_path / "fake-ok" / "report.md").read_text()
    assert "| x is below 2 |" in report and "![a line](line.png)" in report and "| 1 | 2.5 |" in report
    assert (tmp_path / "fake-ok" / "line.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_same_seed_same_metrics(fake_registry, tmp_path):
    a = run_experiment(fake_registry["fake-ok"], tmp_path / "a", seed=3)
    b = run_experiment(fake_registry["fake-ok"], tmp_path / "b", seed=3)
    c = run_experiment(fake_registry["fake-ok"], tmp_path / "c", seed=4)
    assert a["metrics"] == b["metrics"] and a["metrics"] != c["metrics"]


def test_nan_metric_is_refused_and_nothing_written(fake_registry, tmp_path):
    with pytest.raises(ValueError, match="finite"):
        run_experiment(fake_registry["fake-nan"], tmp_path)
    assert not (tmp_path / "fake-nan" / "results.json").exists()


def test_claim_holds_must_be_bool(tmp_path):
    from neurips26.reproduce import RunContext

    ctx = RunContext("x", tmp_path)
    with pytest.raises(TypeError, match="bool"):
        ctx.claim("c", 1.0, 2.0, holds=1)
    with pytest.raises(ValueError, match="finite"):  # a tested claim needs its numbers
        ctx.claim("c", float("nan"), 2.0, holds=False)


def test_untested_claim_is_stored_as_null_and_counted_apart(tmp_path):
    from neurips26.reproduce import RunContext
    from neurips26.reproduce._harness import render_markdown, tally, verdict

    ctx = RunContext("x", tmp_path)
    ctx.claim("both sides hit the step cap", float("nan"), 5.0, holds=None)
    ctx.claim("a", 1.0, 2.0, holds=True)
    ctx.claim("b", 3.0, 2.0, holds=False)
    claims = [vars(c) for c in ctx.claims]
    assert claims[0] == {"claim": "both sides hit the step cap", "ours": None, "baseline": 5.0, "holds": None}
    assert [verdict(c) for c in claims] == ["not tested", "holds", "does not hold"]
    assert tally(claims) == (1, 2)
    md = render_markdown({"slug": "x", "paper": "p", "seed": 0, "quick": True, "wall_s": 1.0, "env": {}, "claims": claims}, [])
    assert "| both sides hit the step cap | n/a | 5 | not tested |" in md


def test_atomic_write_keeps_old_file_on_failure(tmp_path):
    path = tmp_path / "f.json"
    atomic_write_text(path, "old")
    with pytest.raises(RuntimeError):
        with atomic_open(path) as fh:
            fh.write(b"half of the new")
            raise RuntimeError("crash mid-write")
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["f.json"]  # the temporary is gone


def test_registry():
    assert "pome" in reproduce.EXPERIMENTS
    with pytest.raises(ValueError, match="already registered"):
        reproduce.register(reproduce.EXPERIMENTS["pome"])
    with pytest.raises(KeyError, match="known: .*pome"):
        reproduce.get("nope")
    with pytest.raises(ValueError, match="invalid slug"):
        reproduce.register(Experiment("all", "p", "s", "m:f"))
    # Every registered target resolves to a callable.
    for exp in reproduce.EXPERIMENTS.values():
        assert callable(exp.load())


def test_atomic_outputs_have_ordinary_permissions(tmp_path):
    from neurips26._atomic import atomic_directory

    atomic_write_text(tmp_path / "a.txt", "x")
    (tmp_path / "b.txt").write_text("x")
    assert (tmp_path / "a.txt").stat().st_mode == (tmp_path / "b.txt").stat().st_mode
    with atomic_directory(tmp_path / "d") as d:
        (d / "f").write_text("x")
    (tmp_path / "e").mkdir()
    assert (tmp_path / "d").stat().st_mode == (tmp_path / "e").stat().st_mode


def test_a_failed_run_leaves_the_previous_results_whole(fake_registry, tmp_path):
    first = run_experiment(fake_registry["fake-ok"], tmp_path, seed=1)
    before = sorted(os.listdir(tmp_path / "fake-ok"))
    boom = Experiment(slug="fake-ok", paper="p", summary="s", target="fake_experiments:boom")
    with pytest.raises(RuntimeError, match="deliberate"):
        run_experiment(boom, tmp_path, seed=2)
    assert sorted(os.listdir(tmp_path / "fake-ok")) == before
    assert json.loads((tmp_path / "fake-ok" / "results.json").read_text()) == first
    # no temporary folder left behind, only the mark that the last attempt failed (for the report)
    assert sorted(os.listdir(tmp_path)) == ["fake-ok", "fake-ok.error.txt"]
    assert "deliberate" in (tmp_path / "fake-ok.error.txt").read_text()


def test_a_folder_never_mixes_two_runs(fake_registry, tmp_path):
    run_experiment(fake_registry["fake-ok"], tmp_path, seed=1)
    assert (tmp_path / "fake-ok" / "line.png").exists()
    # a second run that saves no figure replaces the whole folder: the old figure does not linger
    no_figure = Experiment(slug="fake-ok", paper="p", summary="s", target="fake_experiments:no_figure")
    run_experiment(no_figure, tmp_path, seed=1)
    assert sorted(os.listdir(tmp_path / "fake-ok")) == ["report.md", "results.json"]


def test_atomic_directory_recovers_an_output_stranded_between_its_two_renames(tmp_path):
    from neurips26._atomic import atomic_directory

    # a run killed after moving the previous output aside and before moving the new one in
    stranded = tmp_path / ".out.old"
    stranded.mkdir()
    (stranded / "f").write_text("previous")
    with pytest.raises(FileExistsError):
        with atomic_directory(tmp_path / "out"):
            pass
    assert (tmp_path / "out" / "f").read_text() == "previous" and not stranded.exists()
    with atomic_directory(tmp_path / "out", overwrite=True) as d:
        (d / "f").write_text("new")
    assert (tmp_path / "out" / "f").read_text() == "new"
    assert sorted(os.listdir(tmp_path)) == ["out"]


def test_runs_are_quiet_about_the_baselines_import_chatter():
    # torchao's CUDA-only kernels and llm-compressor's "no accelerator" line print on import on a CPU
    # machine; a run silences them (its own output stays), a plain import of the packages does not.
    import subprocess
    import sys

    probe = ("import logging, sys\n"
             "QUIET\n"
             "import torchao\n"
             "from llmcompressor.utils.dev import get_main_device\n"
             "get_main_device()\n"
             "logging.getLogger('torchao').warning('a real torchao warning')\n")
    import os

    env = {k: v for k, v in os.environ.items() if not k.endswith("_LOG_LEVEL")}  # an earlier run set them here
    loud = subprocess.run([sys.executable, "-c", probe.replace("QUIET", "")], capture_output=True, text=True, env=env)
    quiet = subprocess.run([sys.executable, "-c", probe.replace(
        "QUIET", "from neurips26.reproduce._tasks import quiet_third_party; quiet_third_party()")],
        capture_output=True, text=True, env=env)
    assert loud.returncode == quiet.returncode == 0, loud.stderr + quiet.stderr
    loud_out, quiet_out = loud.stdout + loud.stderr, quiet.stdout + quiet.stderr  # loguru prints on stdout
    assert "Failed to load" in loud_out and "No accelerator" in loud_out  # else this test checks nothing
    assert "Failed to load" not in quiet_out and "No accelerator" not in quiet_out
    assert "a real torchao warning" in quiet.stderr


def test_environment_names_what_makes_two_machines_differ():
    import transformers  # noqa: F401  (a package a run would have loaded)

    from neurips26.reproduce._harness import environment

    env = environment()
    import torch

    assert env["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert env["packages"]["transformers"] == transformers.__version__
    assert "pymoo" not in env["packages"] or "pymoo" in __import__("sys").modules
