"""scripts/pace_gpu.py (train the ATSP ranker at n = 200 on a GPU, evaluate ATSP-500) at its --tiny size on
the CPU: the JSON's structure and sanity against independent recomputation (tours checked as
permutations, costs and gaps recomputed from the distance matrix, the summary from the per-instance
rows), the script's training loop against the library's ``train_ranker``, the budget read-off against
separate solves, the worker count not changing the results, and bad arguments refused with a message."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from neurips26.combinatorial.pace import ATSPTask, Budget, PaceSolver, RandomRanker, tmat_atsp, train_ranker
from neurips26.combinatorial.pace.ranker import load_ranker

ROOT = Path(__file__).resolve().parents[2]
TOL = 1e-9


@pytest.fixture
def script(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))  # spawned workers import it by this name too
    import pace_gpu

    return pace_gpu


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import pace_gpu
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    d = tmp_path_factory.mktemp("pace_gpu")
    res = pace_gpu.main(["--device", "cpu", "--tiny", "--workers", "1", "--out", str(d / "out.json"),
                         "--save-ranker", str(d / "ranker.pt"), "--arms", "learned", "learned_argmax", "random"])
    return res, d


def _instance(res, i):
    S = res["settings"]
    return tmat_atsp(S["n_eval"], np.random.default_rng([S["seed"], 4, S["n_eval"], i]))


def _length(D, tour):
    t = np.asarray(tour)
    assert sorted(t.tolist()) == list(range(len(D)))  # a permutation: a directed Hamiltonian cycle
    return float(sum(D[a, b] for a, b in zip(t, np.roll(t, -1))))


def test_tiny_run_json_is_complete_and_sane(tiny):
    res, d = tiny
    assert json.loads((d / "out.json").read_text()) == json.loads(json.dumps(res))
    S = res["settings"]
    assert S["tiny"] and S["budgets"] == [1, 2] and S["n_train"] == 20 and S["n_eval"] == 30
    assert S["arms"] == ["learned", "learned_argmax", "random"] and res["device"]["name"].startswith("cpu")
    tr = res["training"]
    assert tr["instances"] == S["train_instances"] and tr["examples"] > 0 and tr["stopped"] == "epochs"
    assert len(tr["losses"]) == tr["epochs_done"] == S["epochs"] and all(np.isfinite(tr["losses"]))
    assert tr["losses"][-1] < tr["losses"][0]  # the listwise loss falls on its own training data
    assert res["evaluation"]["complete"] and len(res["instances"]) == S["eval_instances"]
    task = ATSPTask()
    for i, r in enumerate(res["instances"]):
        inst = _instance(res, i)
        assert r["index"] == i
        assert task.is_feasible(inst, np.asarray(r["ref_tour"]))
        assert r["ref_cost"] == pytest.approx(_length(inst.D, r["ref_tour"]), rel=1e-12)
        assert r["elkai_1run"]["gap"] >= -TOL
        for arm, a in r["arms"].items():
            assert [row["B"] for row in a["rows"]] == [0, 1, 2] and a["rounds_done"] == 3 and a["stopped"] == "budget"
            assert task.is_feasible(inst, np.asarray(a["tour"]))
            assert a["cost"] == pytest.approx(_length(inst.D, a["tour"]), rel=1e-12)
            # the returned tour is the best after max B rounds
            assert a["rows"][-1]["cost"] == pytest.approx(a["cost"], rel=1e-12)
            costs = [row["cost"] for row in a["rows"]]
            assert all(x >= y - TOL for x, y in zip(costs, costs[1:]))  # nondegradation in B
            times = [row["time_s"] for row in a["rows"]]
            assert all(0 <= x <= y for x, y in zip(times, times[1:]))
            for row in a["rows"]:
                assert row["gap"] >= -TOL  # n = 30: LKH's tour is not beaten
                assert row["gap"] == pytest.approx(100 * (row["cost"] - r["ref_cost"]) / r["ref_cost"], abs=1e-9)
    summ = res["summary"]
    for arm in S["arms"]:
        for k, B in enumerate([0, *S["budgets"]]):
            gaps = [r["arms"][arm]["rows"][k]["gap"] for r in res["instances"]]
            cell = summ["arms"][arm][str(B)]
            assert cell["instances"] == len(gaps) and cell["gap_mean"] == pytest.approx(np.mean(gaps), abs=1e-12)
            assert cell["time_s_mean"] == pytest.approx(np.mean([r["arms"][arm]["rows"][k]["time_s"]
                                                                 for r in res["instances"]]), abs=1e-12)
    for k, B in enumerate([0, *S["budgets"]]):
        diff = [r["arms"]["learned"]["rows"][k]["gap"] - r["arms"]["random"]["rows"][k]["gap"]
                for r in res["instances"]]
        assert summ["learned_vs_random"]["learned"][str(B)]["diff_mean"] == pytest.approx(np.mean(diff), abs=1e-12)
    assert summ["elkai_1run"]["gap_mean"] == pytest.approx(np.mean([r["elkai_1run"]["gap"] for r in res["instances"]]))
    assert res["paper"]["atsp500_gap_pct"] == 0.247 and "not measured here" in res["paper"]["note"]


@pytest.fixture
def one_thread():
    """One torch thread, as the script's evaluation and training-equality runs use; restored after."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def test_budget_read_off_equals_separate_solves(tiny, one_thread):
    """Each B's row comes from one solve with rounds = max(B); a solve with rounds = B gives the same cost."""
    res, d = tiny
    model, meta = load_ranker(d / "ranker.pt")
    assert meta["losses"] == res["training"]["losses"]
    S = res["settings"]
    for i, r in enumerate(res["instances"]):
        inst = _instance(res, i)
        arms = (("learned", model, 1.0), ("learned_argmax", model, 0.0), ("random", RandomRanker(), 0.0))
        for arm, ranker, temp in arms:
            solver = PaceSolver(ATSPTask(), ranker, temperature=temp)
            for k, B in enumerate(S["budgets"], start=1):
                sol = solver.solve(inst, Budget(depth=S["depth"], rounds=B, width=S["width"]), seed=i)
                assert sol.cost == pytest.approx(r["arms"][arm]["rows"][k]["cost"], rel=1e-12), (arm, B, i)


def test_train_ranker_deadline_keeps_the_finished_epochs(script, one_thread):
    """The script trains through ``train_ranker(device=, deadline=)``: a deadline already past trains no
    epoch; none gives every epoch, equal to a plain CPU call (the device path is the CPU path here)."""
    examples = [ex for k in range(3) for ex in script.teach((k, 12, 6, 0))["examples"]]
    assert examples
    _, cut = train_ranker(ATSPTask(), examples, epochs=3, batch=8, hidden=16, layers=2, seed=7,
                          deadline=time.perf_counter() - 1.0)
    assert cut == []
    ours, losses = train_ranker(ATSPTask(), examples, epochs=3, batch=8, hidden=16, layers=2, seed=7,
                                device=torch.device("cpu"), deadline=time.perf_counter() + 600)
    ref, ref_losses = train_ranker(ATSPTask(), examples, epochs=3, batch=8, hidden=16, layers=2, seed=7)
    assert losses == ref_losses and len(losses) == 3
    for (k, a), (_, b) in zip(ours.state_dict().items(), ref.state_dict().items()):
        assert torch.equal(a, b), k


def test_train_ranker_deadline_mid_epoch_undoes_the_cut_epoch(script, one_thread, monkeypatch):
    """A deadline that falls inside epoch 2 returns epoch 1's weights and loss, as if epochs=1."""
    from neurips26.combinatorial.pace import ranker

    examples = [ex for k in range(3) for ex in script.teach((k, 12, 6, 0))["examples"]]
    per_epoch = -(-len(examples) // 8)
    ref, ref_losses = train_ranker(ATSPTask(), examples, epochs=1, batch=8, hidden=16, layers=2, seed=7)
    ticks = iter(range(1, 10_000))  # the clock advances by one at every batch's deadline check
    monkeypatch.setattr(ranker.time, "perf_counter", lambda: float(next(ticks)))
    cut, losses = train_ranker(ATSPTask(), examples, epochs=3, batch=8, hidden=16, layers=2, seed=7,
                               deadline=per_epoch + 1.5)  # epoch 2's first batch runs, its second does not
    assert losses == ref_losses
    for (k, a), (_, b) in zip(cut.state_dict().items(), ref.state_dict().items()):
        assert torch.equal(a, b), k


def test_table_quotes_the_paper_as_the_papers(tiny, script):
    table = script._table(tiny[0])
    assert "PACE learned" in table and "PACE random" in table and "elkai, 1 run" in table
    assert "0.247 % (the paper's figure, quoted, not ours)" in table


def test_worker_count_does_not_change_results(tiny, script, tmp_path):
    res1 = tiny[0]
    res2 = script.main(["--device", "cpu", "--tiny", "--workers", "2", "--out", str(tmp_path / "w2.json"),
                        "--arms", "learned", "learned_argmax", "random"])
    assert res2["training"]["examples"] == res1["training"]["examples"]
    assert res2["training"]["losses"] == pytest.approx(res1["training"]["losses"], rel=1e-5)
    for a, b in zip(res1["instances"], res2["instances"]):
        assert a["ref_cost"] == b["ref_cost"] and a["ref_tour"] == b["ref_tour"]
        for arm in a["arms"]:
            assert [r["cost"] for r in a["arms"][arm]["rows"]] == [r["cost"] for r in b["arms"][arm]["rows"]]


@pytest.mark.parametrize("argv, flag", [
    (["--budgets", "0"], "--budgets"),
    (["--budgets", "1", "-4"], "--budgets"),
    (["--eval-instances", "-1"], "--eval-instances"),
    (["--train-instances", "0"], "--train-instances"),
    (["--n-eval", "2"], "--n-eval"),
    (["--epochs", "0"], "--epochs"),
    (["--workers", "0"], "--workers"),
    (["--max-minutes", "-1"], "--max-minutes"),
    (["--lr", "nan"], "--lr"),
    (["--device", "not-a-device"], "--device"),
])
def test_bad_arguments_exit_with_a_message(script, tmp_path, argv, flag):
    out = tmp_path / "x.json"
    for extra in ([], ["--tiny"]):  # --tiny replaces the sizes but still refuses bad flags
        with pytest.raises(SystemExit) as e:
            script.main(["--device", "cpu", "--out", str(out), *extra, *argv])
        assert isinstance(e.value.code, str) and flag in e.value.code
    assert not out.exists()


def test_cuda_device_without_cuda_exits_with_a_message(script, tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit) as e:
        script.main(["--tiny", "--out", str(tmp_path / "x.json")])  # --device defaults to cuda
    assert "no CUDA device" in str(e.value.code) and "--device cpu" in str(e.value.code)
    assert not (tmp_path / "x.json").exists()


def test_max_minutes_guard_keeps_what_is_done(script, tmp_path, monkeypatch):
    """Past the guard, a solve is not started (its rows stay empty) and the JSON is still written, with the
    summary over the instances that finished (none here) and the table printable."""
    job = dict(index=0, n=12, seed=0, elkai_long=1, budgets=[1, 2], arms=["learned", "random"], depth=2, width=1,
               deadline=time.time() - 1.0)
    r = script.evaluate(job)
    for a in r["arms"].values():
        assert a["stopped"] == "max_minutes" and a["tour"] is None and all(row["gap"] is None for row in a["rows"])
    assert script.summarize([r], ["learned", "random"], [1, 2])["arms"]["learned"]["2"]["instances"] == 0
    monkeypatch.setattr(script, "EVAL_MARGIN_S", 1e6)  # the evaluation's deadline lies in the past
    res = script.main(["--device", "cpu", "--tiny", "--workers", "1", "--out", str(tmp_path / "g.json")])
    assert not res["evaluation"]["complete"] and res["instances"] == [] and res["training"]["epochs_done"] == 3
    assert res["summary"]["arms"]["learned"]["1"] == dict(instances=0, gap_mean=None, gap_std=None, time_s_mean=None)
    assert json.loads((tmp_path / "g.json").read_text())["evaluation"]["instances_done"] == 0
    assert "PACE learned" in script._table(res)
