"""Asynchronous BO: runs on thread, process and Dask executors, keeps every finished
evaluation in its journal, records raising / NaN evaluations once instead of retrying them,
and resumes a stopped run from the journal."""

import json
import math
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import pytest
import torch

pytest.importorskip("botorch")
from botorch.acquisition import UpperConfidenceBound  # noqa: E402

from neurips26.bayesopt import fit_gp  # noqa: E402
from neurips26.bayesopt.async_bo import AsyncBayesOpt, simulate_async  # noqa: E402
from neurips26.bayesopt.kriging_believer import KrigingBeliever  # noqa: E402
from neurips26.bayesopt.space import SearchSpace  # noqa: E402

BOUNDS = torch.tensor([[-1.0, -1.0], [1.0, 1.0]], dtype=torch.float64)
SPACE = SearchSpace(BOUNDS, num_restarts=2, raw_samples=64)


def bowl(x):  # module level, so process pools can pickle it
    return float(-((x - 0.3) ** 2).sum())


def flaky(x):
    if x[0] > 0.5:
        raise RuntimeError("simulator crashed")
    if x[1] > 0.5:
        return float("nan")
    return bowl(x)


def proposer():
    return KrigingBeliever(lambda m: UpperConfidenceBound(m, beta=2.0), SPACE, seed=0)


@pytest.mark.parametrize("pool", [ThreadPoolExecutor, ProcessPoolExecutor])
def test_async_runs_on_executors_and_journals_every_result(tmp_path, pool):
    journal = tmp_path / "run.jsonl"
    seen = []
    with pool(max_workers=2) as ex:
        res = AsyncBayesOpt(bowl, SPACE, proposer(), ex, n_workers=2, journal=journal, n_init=4).run(
            max_evals=10, callback=seen.append)
    assert len(res.Y) == 10 and not res.failed and len(seen) == 10
    lines = [json.loads(line) for line in journal.read_text().splitlines()]
    results = [r for r in lines if r["event"] == "result"]
    assert len(results) == 10 and sorted(r["y"] for r in results) == sorted(res.Y.tolist())
    for r in results:  # each journaled value is the objective at its journaled point
        x = next(s["x"] for s in lines if s["event"] == "submit" and s["id"] == r["id"])
        assert math.isclose(r["y"], bowl(torch.tensor(x, dtype=torch.float64)), rel_tol=1e-12)
    assert res.best[1] > -0.3  # BO made progress beyond the Sobol start on a smooth bowl


def test_failures_are_recorded_once_and_not_retried(tmp_path):
    with ThreadPoolExecutor(2) as ex:
        res = AsyncBayesOpt(flaky, SPACE, proposer(), ex, n_workers=2, journal=tmp_path / "j.jsonl",
                            n_init=6).run(max_evals=12)
    assert len(res.Y) + len(res.failed) == 12
    assert res.failed, "the Sobol start covers the crashing corner"
    assert {e.split(":")[0] for _, e in res.failed} <= {"RuntimeError", "non-finite value nan"}
    assert torch.isfinite(res.Y).all()
    submits = [json.loads(line) for line in (tmp_path / "j.jsonl").read_text().splitlines()
               if '"submit"' in line]
    assert len({s["id"] for s in submits}) == len(submits)  # nothing was resubmitted


def test_resume_keeps_finished_results_and_resubmits_lost_ones(tmp_path):
    journal = tmp_path / "j.jsonl"
    with ThreadPoolExecutor(2) as ex:
        first = AsyncBayesOpt(bowl, SPACE, proposer(), ex, n_workers=2, journal=journal, n_init=4).run(max_evals=6)
    # a driver that died with one evaluation running, mid-way through writing a line
    with open(journal, "a") as fh:
        fh.write(json.dumps({"event": "submit", "id": 99, "x": [0.1, 0.1], "initial": False}) + "\n")
        fh.write('{"event": "result", "id": 99, "sta')
    calls = []

    def counted(x):
        calls.append(x.tolist())
        return bowl(x)

    with ThreadPoolExecutor(2) as ex:
        res = AsyncBayesOpt(counted, SPACE, proposer(), ex, n_workers=2, journal=journal, n_init=4).run(max_evals=9)
    assert len(res.Y) == 9
    assert set(map(tuple, first.X.tolist())) <= set(map(tuple, res.X.tolist()))  # nothing lost
    assert [0.1, 0.1] in calls and len(calls) == 3  # the lost one once more, then two new


def test_async_runs_on_a_local_dask_cluster(tmp_path):
    distributed = pytest.importorskip("distributed")
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=2, dashboard_address=None) as client:
        res = AsyncBayesOpt(bowl, SPACE, proposer(), client.get_executor(), n_workers=2,
                            journal=tmp_path / "d.jsonl", n_init=4).run(max_evals=6)
    assert len(res.Y) == 6 and torch.isfinite(res.Y).all()


def test_simulator_counts_evaluations_and_orders_completions():
    f = lambda X: -((X - 0.3) ** 2).sum(-1)  # noqa: E731
    factory = lambda X, Y: fit_gp(X, Y, BOUNDS, noise=1e-4)  # noqa: E731
    for sync in (False, True):
        sim = simulate_async(f, proposer(), SPACE, factory, n_workers=3, budget=7, n_init=4, synchronous=sync)
        assert len(sim.Y) == 4 + 7 and torch.all(sim.finish_times.diff() >= 0)
        assert torch.allclose(sim.F, f(sim.X))
