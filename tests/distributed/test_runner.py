"""The torch.distributed runner (gloo, local processes). Worker functions live at
module level: spawned processes import them by name."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from neurips26.distributed import RennalaServer, SynchronousServer, load_checkpoint, replay
from neurips26.distributed import run_distributed, run_rennala

TARGET = torch.tensor([1.0, -2.0, 0.5, 3.0], dtype=torch.float64)
X0 = torch.zeros(4, dtype=torch.float64)


def noisy_grad(x, worker, rng):
    return (x - TARGET) + torch.as_tensor(rng.standard_normal(4))


def slow_by_rank(worker, rng):
    return 0.004 * (1 + 2 * worker) * (1 + rng.random())


def grad_failing_on_worker_0(x, worker, rng):
    if worker == 0:
        raise ArithmeticError("worker 0 cannot compute")
    return noisy_grad(x, worker, rng)


def always_failing(x, worker, rng):
    raise ArithmeticError("nobody can compute")


def test_gloo_run_matches_the_trajectory_of_its_arrival_order():
    res = run_rennala(noisy_grad, X0, n_workers=3, batch_size=3, steps=12, lr=0.1, norm="linf", seed=5,
                      compute_time=slow_by_rank)
    assert len(res.points) == 12 and not res.dead
    assert np.all(np.diff(res.times) > 0)
    # Rennala's rule in the recorded order: B accepted gradients per step, at the current point.
    assert len(res.arrivals) == 12 * 3 + res.discarded
    per_step = np.bincount([k for _, k in res.arrivals], minlength=12)
    assert (per_step >= 3).all() and len(per_step) == 12
    # The fast worker contributes most: heterogeneity is real, not lockstep.
    counts = np.bincount([w for w, _ in res.arrivals], minlength=3)
    assert counts[0] > counts[2]
    again = replay(RennalaServer(X0, 3, 0.1, "linf"), noisy_grad, res.arrivals, seed=5)
    for a, b in zip(res.points, again):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
    assert len(again) == 12


def test_a_dying_worker_does_not_stop_training_and_checkpoints_resume(tmp_path, caplog):
    ckpt = tmp_path / "run.pt"
    res = run_rennala(noisy_grad, X0, n_workers=3, batch_size=2, steps=6, lr=0.1, seed=1, compute_time=slow_by_rank,
                      checkpoint=ckpt, checkpoint_every=3, fail_after={1: 2})
    assert len(res.points) == 6
    assert res.dead == {1: "process exited with code 17"}
    assert sum(w == 1 for w, _ in res.arrivals) == 2
    assert "worker 1 left" in caplog.text
    state = load_checkpoint(ckpt)
    assert state["server"]["k"] == 6 and torch.equal(state["server"]["x"], res.points[-1])

    # steps is the total target: resumed at step 6, a run to step 10 takes 4 steps
    more = run_rennala(noisy_grad, X0, n_workers=2, batch_size=2, steps=10, lr=0.1, seed=1, checkpoint=ckpt,
                       checkpoint_every=2, resume=True)
    assert more.start_step == 6 and len(more.points) == 4
    assert load_checkpoint(ckpt)["server"]["k"] == 10
    resumed = RennalaServer(X0, 2, 0.1)
    resumed.load_state_dict(state["server"])
    again = replay(resumed, noisy_grad, more.arrivals, seed=1)
    for a, b in zip(more.points, again):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="batch_size"):
        run_rennala(noisy_grad, X0, n_workers=1, batch_size=3, steps=1, lr=0.1, checkpoint=ckpt, resume=True)


def test_a_raising_gradient_is_reported_and_the_synchronous_server_stops_waiting_for_it():
    res = run_distributed(SynchronousServer(X0, 3, lr=0.1), grad_failing_on_worker_0, n_workers=3, steps=4, seed=2)
    assert len(res.points) == 4
    assert "ArithmeticError: worker 0 cannot compute" in res.dead[0]
    assert {w for w, _ in res.arrivals} == {1, 2}
    with pytest.raises(RuntimeError, match="every worker has left"):
        run_rennala(always_failing, X0, n_workers=2, batch_size=1, steps=3, lr=0.1)


def test_runner_validates_its_arguments():
    with pytest.raises(ValueError, match="fail_after"):
        run_rennala(noisy_grad, X0, n_workers=2, batch_size=1, steps=1, lr=0.1, fail_after={5: 1})
    with pytest.raises(ValueError, match="checkpoint path"):
        run_rennala(noisy_grad, X0, n_workers=2, batch_size=1, steps=1, lr=0.1, checkpoint_every=2)
    with pytest.raises(ValueError, match="float64"):
        run_rennala(noisy_grad, torch.zeros(4, dtype=torch.bfloat16), n_workers=1, batch_size=1, steps=300, lr=0.1)


def test_torchrun_launch(tmp_path):
    script = Path(__file__).with_name("torchrun_rennala.py")
    out = tmp_path / "result.pt"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=3", str(script), str(out)],
        capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = torch.load(out, weights_only=False)
    assert len(got["points"]) == 5 and not got["dead"]
    again = replay(RennalaServer(X0, 2, 0.05, "l2"), noisy_grad, got["arrivals"], seed=3)
    for a, b in zip(got["points"], again):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
