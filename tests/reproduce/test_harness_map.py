"""Sweeps as tasks: RunContext.map in process, on a process pool (--jobs) and on a Dask cluster
(--scheduler); per-task seeds, the task cache and --resume, failures and interruptions."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import neurips26
from neurips26.cli import main
from neurips26.reproduce import Experiment, RunContext, run_experiment
from neurips26.reproduce._tasks import Outcome, run_task

HERE = Path(__file__).parent


@pytest.fixture
def fake_map(fake_registry, monkeypatch, tmp_path):
    """'fake-map': six tasks through ctx.map; each task appends its index to a log file."""
    exp = Experiment(slug="fake-map", paper="Paper fake-map", summary="test", target="fake_experiments:mapped")
    fake_registry[exp.slug] = exp
    monkeypatch.setenv("NEURIPS26_TEST_TASK_LOG", str(tmp_path / "tasks.log"))
    for var in ("NEURIPS26_TEST_FAIL_TASK", "NEURIPS26_TEST_INTERRUPT", "NEURIPS26_TEST_KILL_ONCE",
                "NEURIPS26_TEST_SLEEP", "NEURIPS26_TEST_TASKS"):
        monkeypatch.delenv(var, raising=False)
    return exp


def ran(tmp_path, clear=True):
    """The task indices started since the last call (from the tasks' log file)."""
    log = tmp_path / "tasks.log"
    out = sorted(int(x) for x in log.read_text().split()) if log.exists() else []
    if clear:
        log.unlink(missing_ok=True)
    return out


def cache_entries(out, slug="fake-map"):
    return sorted(p.name for p in (Path(out) / f"{slug}.tasks").glob("*.json") if p.name != "run.json")


class _Reversed:
    """A runner that finishes the tasks last to first."""

    name = "reversed"

    def run(self, fn, calls):
        for i in reversed(range(len(calls))):
            yield Outcome(i, *run_task(fn, calls[i][0], calls[i][1], isolate=True))

    def close(self):
        pass


class _Progress:
    def __init__(self):
        self.total, self.done, self.removed = {}, {}, []

    def add_task(self, description, total=None):
        self.total[description], self.done[description] = total, 0
        return description

    def advance(self, task, advance=1):
        self.done[task] += advance

    def remove_task(self, task):
        self.removed.append(task)


def test_results_come_back_in_task_order_and_the_bar_counts_tasks(fake_registry, tmp_path):
    import fake_experiments as fe

    progress = _Progress()
    tasks = [{"i": i, "scale": 1.0} for i in range(5)]
    ctx = RunContext("x", tmp_path, seed=3, progress=progress, runner=_Reversed())
    res = ctx.map(fe.draw_task, tasks, description="draws")
    assert [r["i"] for r in res] == list(range(5))
    assert progress.total == {"x: draws": 5} and progress.done == {"x: draws": 5} and progress.removed == ["x: draws"]
    # The same results in the default runner: the order of completion changes nothing.
    assert RunContext("x", tmp_path, seed=3).map(fe.draw_task, tasks) == res
    # A repeated record runs once and fills every place it holds.
    twice = RunContext("x", tmp_path, seed=3).map(fe.draw_task, [tasks[2], tasks[0], tasks[2]])
    assert twice == [res[2], res[0], res[2]]


def test_task_functions_and_records_are_checked(fake_registry, tmp_path):
    import fake_experiments as fe

    ctx = RunContext("x", tmp_path)
    with pytest.raises(TypeError, match="module-level function"):
        ctx.map(lambda t: {}, [1])

    def local(task):
        return {}

    with pytest.raises(TypeError, match="module-level function"):
        ctx.map(local, [1])
    with pytest.raises(TypeError, match=r"task\[1\] is a object: a task record must be built of"):
        ctx.map(fe.draw_task, [[1, object()]])
    with pytest.raises(TypeError, match="must return a dict"):
        ctx.map(fe.not_a_dict, [1])
    assert ctx.map(fe.draw_task, []) == []


def test_each_task_has_its_own_seed_and_the_runs_stream_is_untouched(fake_registry, tmp_path):
    import fake_experiments as fe
    from neurips26.reproduce._harness import task_seed

    tasks = [{"i": i, "scale": 2.0} for i in range(4)]
    full = RunContext("x", tmp_path, seed=5).map(fe.draw_task, tasks)
    part = RunContext("x", tmp_path, seed=5).map(fe.draw_task, [tasks[3], tasks[1]])
    assert part == [full[3], full[1]]  # a task's numbers do not depend on the others
    assert len({r["random"] for r in full}) == 4  # nor are two tasks given the same stream
    other = RunContext("x", tmp_path, seed=6).map(fe.draw_task, tasks)
    assert all(a["torch"] != b["torch"] and a["own"] != b["own"] for a, b in zip(full, other))
    torch.manual_seed(11)
    RunContext("x", tmp_path, seed=5).map(fe.draw_task, tasks)
    x = torch.rand(())
    torch.manual_seed(11)
    assert torch.equal(x, torch.rand(()))
    with pytest.raises(RuntimeError, match="only defined inside a task"):
        task_seed()


@pytest.fixture(scope="module")
def dask_cluster():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=50) as cluster:
        yield cluster


def test_same_metrics_in_process_on_one_and_two_workers_and_on_dask_with_a_worker_killed(fake_map, tmp_path,
                                                                                          monkeypatch, dask_cluster):
    import distributed
    import fake_experiments as fe

    monkeypatch.setenv("NEURIPS26_TEST_SLEEP", "0.2")
    base = run_experiment(fake_map, tmp_path / "in", seed=4)
    assert ran(tmp_path) == list(range(6))
    assert base["env"]["tasks"]["executor"] == "in-process" and base["env"]["tasks"]["ran"] == 6
    for jobs in (1, 2):
        res = run_experiment(fake_map, tmp_path / f"j{jobs}", seed=4, jobs=jobs)
        assert res["metrics"] == base["metrics"], jobs
        assert res["env"]["tasks"]["executor"].startswith(f"process pool, {jobs} worker")
        assert ran(tmp_path) == list(range(6))

    # Dask: task 1 kills its worker the first time it starts; the scheduler runs it again elsewhere.
    marker = tmp_path / "killed"
    with distributed.Client(dask_cluster.scheduler_address) as client:
        pids = set(client.run(os.getpid).values())
        for var, value in [("NEURIPS26_TEST_KILL_ONCE", str(marker)), ("NEURIPS26_TEST_SLEEP", "0.2"),
                           ("NEURIPS26_TEST_TASK_LOG", str(tmp_path / "tasks.log"))]:
            client.run(fe.set_env, var, value)
        res = run_experiment(fake_map, tmp_path / "dask", seed=4, scheduler=dask_cluster.scheduler_address)
        client.run(fe.set_env, "NEURIPS26_TEST_KILL_ONCE", None)
        assert marker.exists()
        assert not pids <= set(client.run(os.getpid).values())  # one worker process was replaced
    # Python's `random` is one stream per process, and a Dask worker's own threads draw from it
    # too (tornado's jittered timers): on Dask only NumPy's and torch's global streams are the task's.
    def without_stdlib_random(metrics):
        return {**metrics, "results": [{k: v for k, v in r.items() if k != "random"} for r in metrics["results"]]}

    assert without_stdlib_random(res["metrics"]) == without_stdlib_random(base["metrics"])
    assert res["env"]["tasks"] == {**res["env"]["tasks"], "tasks": 6, "ran": 6, "reused": 0,
                                   "executor": f"dask scheduler {dask_cluster.scheduler_address}"}
    assert res["metrics"]["index"] == list(range(6))  # every task once
    assert ran(tmp_path).count(1) == 2  # task 1 started twice: killed, then run again
    assert len(cache_entries(tmp_path / "dask")) == 6


def test_resume_reuses_finished_tasks_and_a_plain_run_moves_the_cache_aside(fake_map, tmp_path, capsys):
    first = run_experiment(fake_map, tmp_path, seed=2)
    assert ran(tmp_path) == list(range(6)) and len(cache_entries(tmp_path)) == 6
    again = run_experiment(fake_map, tmp_path, seed=2, resume=True)
    assert ran(tmp_path) == [] and again["metrics"] == first["metrics"]
    assert again["env"]["tasks"]["reused"] == 6 and again["env"]["tasks"]["ran"] == 0
    # Without --resume the cache is moved aside, whole, and everything runs again.
    before = cache_entries(tmp_path)
    third = run_experiment(fake_map, tmp_path, seed=2)
    assert ran(tmp_path) == list(range(6)) and third["metrics"] == first["metrics"]
    (aside,) = tmp_path.glob("fake-map.tasks.moved-*")
    assert sorted(p.name for p in aside.glob("*.json") if p.name != "run.json") == before
    # Through the command line.
    assert main(["run", "fake-map", "--seed", "2", "--out", str(tmp_path), "--resume"]) == 0
    assert ran(tmp_path) == [] and "6 of 6 tasks reused" in capsys.readouterr().err


@pytest.mark.parametrize("change", ["seed", "version", "quick"])
def test_a_cache_of_another_seed_version_or_size_is_not_reused(fake_map, tmp_path, monkeypatch, change):
    run_experiment(fake_map, tmp_path, seed=2)
    ran(tmp_path)
    kwargs = dict(seed=2, quick=False)
    if change == "seed":
        kwargs["seed"] = 3
    elif change == "quick":
        kwargs["quick"] = True
    else:
        monkeypatch.setattr(neurips26, "__version__", "999.0")
    res = run_experiment(fake_map, tmp_path, resume=True, **kwargs)
    assert ran(tmp_path) == list(range(6)) and res["env"]["tasks"]["reused"] == 0
    (aside,) = tmp_path.glob("fake-map.tasks.moved-*")  # moved aside, not mixed in
    assert len(cache_entries(tmp_path)) == 6
    run_json = json.loads((tmp_path / "fake-map.tasks" / "run.json").read_text())
    assert run_json == {"slug": "fake-map", "seed": kwargs["seed"], "quick": kwargs["quick"],
                        "version": neurips26.__version__}
    # An entry copied in from the other run is refused too (its record names its run).
    for p in aside.glob("*.json"):
        if p.name != "run.json":
            (tmp_path / "fake-map.tasks" / p.name).write_text(p.read_text())
    res2 = run_experiment(fake_map, tmp_path, resume=True, **kwargs)
    assert res2["env"]["tasks"]["reused"] == 6 and ran(tmp_path) == [] and res2["metrics"] == res["metrics"]


@pytest.mark.parametrize("jobs", [None, 2])
def test_a_failing_task_is_raised_after_the_others_finish_and_resume_runs_only_it(fake_map, tmp_path, monkeypatch, jobs):
    monkeypatch.setenv("NEURIPS26_TEST_FAIL_TASK", "2")
    with pytest.raises(ValueError, match="task 2 fails on purpose") as info:
        run_experiment(fake_map, tmp_path, seed=1, jobs=jobs)
    note = "\n".join(getattr(info.value, "__notes__", []))
    assert "task 2 of 6" in note and "5 finished" in note and "--resume" in note
    assert ran(tmp_path) == list(range(6))  # the others ran to the end
    assert not (tmp_path / "fake-map").exists()  # no partial results.json
    cache = tmp_path / "fake-map.tasks"
    assert len(cache_entries(tmp_path)) == 5
    (error,) = cache.glob("*.error.txt")
    assert "task 2 fails on purpose" in error.read_text() and "Traceback" in error.read_text()
    monkeypatch.delenv("NEURIPS26_TEST_FAIL_TASK")
    res = run_experiment(fake_map, tmp_path, seed=1, jobs=jobs, resume=True)
    assert ran(tmp_path) == [2] and res["env"]["tasks"]["reused"] == 5
    assert not list(cache.glob("*.error.txt"))
    assert res["metrics"] == run_experiment(fake_map, tmp_path / "clean", seed=1)["metrics"]


def test_ctrl_c_inside_a_task_stops_the_run_and_keeps_what_finished(fake_map, tmp_path, monkeypatch):
    monkeypatch.setenv("NEURIPS26_TEST_INTERRUPT", "3")
    with pytest.raises(KeyboardInterrupt):
        run_experiment(fake_map, tmp_path, seed=0)
    assert ran(tmp_path) == [0, 1, 2, 3]  # stopped at once: 4 and 5 never started
    assert len(cache_entries(tmp_path)) == 3 and not (tmp_path / "fake-map").exists()
    monkeypatch.delenv("NEURIPS26_TEST_INTERRUPT")
    res = run_experiment(fake_map, tmp_path, seed=0, resume=True)
    assert ran(tmp_path) == [3, 4, 5]
    assert res["metrics"] == run_experiment(fake_map, tmp_path / "clean", seed=0)["metrics"]


_CHILD = """
import sys
sys.path.insert(0, {here!r})
from neurips26 import reproduce
from neurips26.cli import main
reproduce.EXPERIMENTS.clear()
reproduce.register(reproduce.Experiment("fake-map", "Paper fake-map", "test", "fake_experiments:mapped"))
sys.exit(main(sys.argv[1:]))
"""


def test_sigint_during_a_two_worker_cli_run_leaves_a_consistent_cache_and_resume_finishes(fake_map, tmp_path,
                                                                                             monkeypatch):
    env = {**os.environ, "NEURIPS26_TEST_SLEEP": "0.4", "NEURIPS26_TEST_TASKS": "12",
           "NEURIPS26_TEST_TASK_LOG": str(tmp_path / "tasks.log")}
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-c", _CHILD.format(here=str(HERE)), "run", "fake-map", "--seed", "7",
                             "--jobs", "2", "--out", str(out)], env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while len(cache_entries(out)) < 3:
            assert proc.poll() is None and time.monotonic() < deadline, "the run ended or stalled before the interrupt"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=30)
    finally:
        proc.kill()
    err = proc.stderr.read()
    assert rc == 130, err
    assert "interrupted (SIGINT)" in err
    assert not (out / "fake-map").exists()  # no results of a half run
    cache = out / "fake-map.tasks"
    assert not [p for p in cache.iterdir() if p.name.startswith(".")]  # no half-written file
    entries = [json.loads(p.read_text()) for p in cache.glob("*.json") if p.name != "run.json"]
    done = sorted(e["result"]["i"] for e in entries)
    assert 3 <= len(done) < 12
    ran(tmp_path)
    monkeypatch.setenv("NEURIPS26_TEST_TASKS", "12")
    res = run_experiment(fake_map, out, seed=7, resume=True)
    assert sorted(set(range(12)) - set(done)) == ran(tmp_path)  # only the missing tasks ran
    assert res["metrics"] == run_experiment(fake_map, tmp_path / "clean", seed=7)["metrics"]


def test_cli_checks_where_tasks_run(fake_map, tmp_path, capsys):
    assert main(["run", "fake-ok", "--jobs", "2", "--out", str(tmp_path)]) == 0  # an experiment without ctx.map
    assert "does not run its sweep through ctx.map" in capsys.readouterr().err
    assert not list(tmp_path.glob("fake-ok.tasks*"))
    assert main(["run", "fake-map", "--jobs", "0", "--out", str(tmp_path)]) == 2
    assert "--jobs must be >= 1" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["run", "fake-map", "--jobs", "2", "--scheduler", "tcp://127.0.0.1:1", "--out", str(tmp_path)])
    assert exit_.value.code == 2
    with pytest.raises(ValueError, match="jobs must be an int >= 1"):
        run_experiment(fake_map, tmp_path, jobs=0)
    with pytest.raises(ValueError, match="not both"):
        run_experiment(fake_map, tmp_path, jobs=2, scheduler="tcp://127.0.0.1:1")
