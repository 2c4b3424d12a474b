"""Bad input to the distributed field's public entry points: every probe must raise a
ValueError / TypeError (FloatingPointError for a non-finite gradient) whose message names
the argument (issue 22, section 5). Then the three rows of section 3: ``resume=True`` with
``steps`` is the total target, a corrupt checkpoint says "checkpoint corrupt: PATH", and a
launcher whose worker processes die fails within seconds with the cause.

The probes are listed as data (one ``(name, call, exception, pattern)`` row each) so that
their count is the module's count. Worker functions live at module level: spawned
processes import them by name."""

import os
import pickle
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.distributed import (AsynchronousServer, Checkpointer, RennalaServer, RunOptions, SynchronousServer,
                                   equilibrium_time, load_checkpoint, replay, run_distributed, run_rennala,
                                   save_checkpoint, serve_torchrun, simulate, simulate_rennala, worker_rngs)
from neurips26.geometry import Blocks, L2

NAN, INF = float("nan"), float("inf")
BAD = (ValueError, TypeError)
X0 = torch.zeros(3, dtype=torch.float64)
TARGET = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)


def grad(x, worker, rng):
    return (x - TARGET) + torch.as_tensor(rng.standard_normal(3))


def one_second(worker, rng):
    return 1.0


def _server(**kw):
    args = dict(x0=X0, batch_size=2, lr=0.1)
    args.update(kw)
    return RennalaServer(**args)


def _sim(**kw):
    args = dict(server=_server(), grad=grad, compute_time=one_second, n_workers=2, steps=3)
    args.update(kw)
    return simulate(**args)


def _run(**kw):
    args = dict(grad=grad, x0=X0, n_workers=1, batch_size=1, steps=1, lr=0.1, timeout=30)
    args.update(kw)
    return run_rennala(**args)


def _tmp(name: str) -> Path:
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="n26-dist-bad-"))
    return folder / name


def _good_checkpoint() -> Path:
    path = _tmp("ok.pt")
    server = _server()
    server.submit(torch.ones(3, dtype=torch.float64), 0)
    server.submit(torch.ones(3, dtype=torch.float64), 0)
    save_checkpoint(path, server, seed=0)
    return path


def _truncated_checkpoint() -> Path:
    path = _good_checkpoint()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


def _text_checkpoint() -> Path:
    path = _tmp("notes.pt")
    path.write_text("these are my notes, not a checkpoint\n")
    return path


def _empty_checkpoint() -> Path:
    path = _tmp("empty.pt")
    path.write_bytes(b"")
    return path


def _saved(obj) -> Path:
    path = _tmp("odd.pt")
    torch.save(obj, path)
    return path


def _state(**changes):
    server = _server()
    state = server.state_dict()
    for key, value in changes.items():
        if value is None:
            state.pop(key)
        else:
            state[key] = value
    return state


def _load_into_server(state):
    _server().load_state_dict(state)


PROBES = [
    # --- servers ---
    ("x0-nan", lambda: _server(x0=torch.tensor([NAN, 0.0])), ValueError, "x0"),
    ("x0-inf", lambda: _server(x0=torch.tensor([INF, 0.0])), ValueError, "x0"),
    ("x0-empty", lambda: _server(x0=torch.zeros(0)), ValueError, "x0"),
    ("x0-2d", lambda: _server(x0=torch.zeros(2, 2)), ValueError, "x0"),
    ("x0-integer-dtype", lambda: _server(x0=torch.zeros(3, dtype=torch.int64)), BAD, "x0"),
    ("x0-numpy", lambda: _server(x0=np.zeros(3)), TypeError, "x0"),
    ("x0-list", lambda: _server(x0=[0.0, 0.0]), TypeError, "x0"),
    ("lr-nan", lambda: _server(lr=NAN), ValueError, "lr"),
    ("lr-inf", lambda: _server(lr=INF), ValueError, "lr"),
    ("lr-zero", lambda: _server(lr=0.0), ValueError, "lr"),
    ("lr-negative", lambda: _server(lr=-0.1), ValueError, "lr"),
    ("lr-string", lambda: _server(lr="0.1"), TypeError, "lr"),
    ("lr-bool", lambda: _server(lr=True), TypeError, "lr"),
    ("batch-size-zero", lambda: _server(batch_size=0), ValueError, "batch_size"),
    ("batch-size-negative", lambda: _server(batch_size=-2), ValueError, "batch_size"),
    ("batch-size-float", lambda: _server(batch_size=1.5), TypeError, "batch_size"),
    ("batch-size-nan", lambda: _server(batch_size=NAN), TypeError, "batch_size"),
    ("batch-size-bool", lambda: _server(batch_size=True), TypeError, "batch_size"),
    ("norm-unknown", lambda: _server(norm="l3"), ValueError, "norm"),
    ("norm-int", lambda: _server(norm=2), BAD, "norm"),
    ("norm-blocks-size", lambda: _server(norm=Blocks([(2,)], [L2()])), ValueError, "norm.*x0"),
    ("sync-n-workers-zero", lambda: SynchronousServer(X0, 0, lr=0.1), ValueError, "n_workers"),
    ("sync-n-workers-float", lambda: SynchronousServer(X0, 2.5, lr=0.1), TypeError, "n_workers"),
    ("async-max-delay-negative", lambda: AsynchronousServer(X0, lr=0.1, max_delay=-1), ValueError, "max_delay"),
    ("async-max-delay-float", lambda: AsynchronousServer(X0, lr=0.1, max_delay=1.5), TypeError, "max_delay"),
    ("submit-gradient-shape", lambda: _server().submit(torch.ones(4, dtype=torch.float64), 0), ValueError,
     "gradient"),
    ("submit-gradient-scalar", lambda: _server().submit(torch.tensor(1.0, dtype=torch.float64), 0), ValueError,
     "gradient"),
    ("submit-gradient-numpy", lambda: _server().submit(np.ones(3), 0), TypeError, "gradient"),
    ("submit-gradient-nan", lambda: _server(batch_size=1).submit(torch.tensor([NAN, 0, 0], dtype=torch.float64), 0),
     FloatingPointError, "non-finite gradient"),
    ("async-submit-gradient-shape", lambda: AsynchronousServer(X0, lr=0.1).submit(torch.ones(2), 0), ValueError,
     "gradient"),
    ("sync-submit-gradient-shape", lambda: SynchronousServer(X0, 1, lr=0.1).submit(torch.ones(2), 0), ValueError,
     "gradient"),
    ("state-dict-missing-x", lambda: _load_into_server(_state(x=None)), ValueError, "state_dict.*'x'"),
    ("state-dict-x-not-tensor", lambda: _load_into_server(_state(x=[0.0, 0.0, 0.0])), ValueError, "state_dict.*x"),
    ("state-dict-k-negative", lambda: _load_into_server(_state(k=-3)), ValueError, "state_dict.*k"),
    ("state-dict-x-nan", lambda: _load_into_server(_state(x=torch.full((3,), NAN, dtype=torch.float64))),
     ValueError, "state_dict.*x.*NaN"),
    ("state-dict-not-a-dict", lambda: _load_into_server([1, 2, 3]), TypeError, "state_dict"),
    # --- simulate / simulate_rennala / replay / helpers ---
    ("simulate-steps-negative", lambda: _sim(steps=-1), ValueError, "steps"),
    ("simulate-steps-float", lambda: _sim(steps=2.5), TypeError, "steps"),
    ("simulate-n-workers-zero", lambda: _sim(n_workers=0), ValueError, "n_workers"),
    ("simulate-seed-negative", lambda: _sim(seed=-1), ValueError, "seed"),
    ("simulate-seed-float", lambda: _sim(seed=0.5), TypeError, "seed"),
    ("simulate-checkpoint-every-negative", lambda: _sim(checkpoint_every=-1), ValueError, "checkpoint_every"),
    ("simulate-checkpoint-every-without-path", lambda: _sim(checkpoint_every=2), ValueError, "checkpoint"),
    ("simulate-until-not-callable", lambda: _sim(until=5), TypeError, "until"),
    ("simulate-grad-not-callable", lambda: _sim(grad=None), TypeError, "grad"),
    ("simulate-compute-time-not-callable", lambda: _sim(compute_time=1.0), TypeError, "compute_time"),
    ("simulate-grad-wrong-shape", lambda: _sim(grad=lambda x, w, rng: torch.ones(2, dtype=torch.float64)),
     ValueError, "gradient"),
    ("simulate-grad-scalar", lambda: _sim(grad=lambda x, w, rng: torch.tensor(1.0, dtype=torch.float64)),
     ValueError, "gradient"),
    ("simulate-grad-nan", lambda: _sim(grad=lambda x, w, rng: torch.full((3,), NAN, dtype=torch.float64)),
     FloatingPointError, "non-finite gradient"),
    ("simulate-compute-time-nan", lambda: _sim(compute_time=lambda w, rng: NAN), ValueError, "compute_time"),
    ("simulate-compute-time-zero", lambda: _sim(compute_time=lambda w, rng: 0.0), ValueError, "compute_time"),
    ("simulate-compute-time-inf", lambda: _sim(compute_time=lambda w, rng: INF), ValueError, "compute_time"),
    ("simulate-rennala-batch-size-zero",
     lambda: simulate_rennala(grad, X0, one_second, n_workers=2, batch_size=0, steps=2, lr=0.1), ValueError,
     "batch_size"),
    ("simulate-rennala-lr-nan",
     lambda: simulate_rennala(grad, X0, one_second, n_workers=2, batch_size=1, steps=2, lr=NAN), ValueError, "lr"),
    ("replay-arrival-not-a-pair", lambda: replay(_server(), grad, [(0,)]), ValueError, "arrivals"),
    ("replay-arrival-negative-worker", lambda: replay(_server(), grad, [(-1, 0)]), ValueError, "arrivals"),
    ("replay-arrival-float", lambda: replay(_server(), grad, [(0.5, 0)]), BAD, "arrivals"),
    ("equilibrium-taus-empty", lambda: equilibrium_time([], 2), ValueError, "compute times"),
    ("equilibrium-taus-nan", lambda: equilibrium_time([1.0, NAN], 2), ValueError, "compute times"),
    ("equilibrium-batch-size-zero", lambda: equilibrium_time([1.0, 2.0], 0), ValueError, "batch_size"),
    ("equilibrium-batch-size-float", lambda: equilibrium_time([1.0, 2.0], 2.5), TypeError, "batch_size"),
    ("worker-rngs-seed-negative", lambda: worker_rngs(-1, 0), ValueError, "seed"),
    ("worker-rngs-worker-negative", lambda: worker_rngs(0, -1), ValueError, "worker"),
    ("checkpointer-every-negative", lambda: Checkpointer(_tmp("c.pt"), -1), ValueError, "checkpoint_every"),
    ("save-checkpoint-not-a-server", lambda: save_checkpoint(_tmp("s.pt"), {"x": 1}), TypeError, "server"),
    # --- checkpoints ---
    ("checkpoint-truncated", lambda: load_checkpoint(_truncated_checkpoint()), ValueError,
     "checkpoint corrupt: .*ok.pt"),
    ("checkpoint-not-a-torch-file", lambda: load_checkpoint(_text_checkpoint()), ValueError,
     "checkpoint corrupt: .*notes.pt"),
    ("checkpoint-empty-file", lambda: load_checkpoint(_empty_checkpoint()), ValueError,
     "checkpoint corrupt: .*empty.pt"),
    ("checkpoint-wrong-keys", lambda: load_checkpoint(_saved({"model": torch.zeros(3)})), ValueError,
     "checkpoint corrupt: .*odd.pt.*'server'"),
    ("checkpoint-not-a-dict", lambda: load_checkpoint(_saved([1, 2, 3])), ValueError, "checkpoint corrupt: .*odd.pt"),
    ("checkpoint-server-missing-x", lambda: load_checkpoint(_saved({"server": _state(x=None)})), ValueError,
     "checkpoint corrupt: .*odd.pt.*'x'"),
    ("checkpoint-x-not-a-tensor", lambda: load_checkpoint(_saved({"server": _state(x=[0.0, 1.0])})), ValueError,
     "checkpoint corrupt: .*odd.pt.*x"),
    ("checkpoint-k-negative", lambda: load_checkpoint(_saved({"server": _state(k=-1)})), ValueError,
     "checkpoint corrupt: .*odd.pt.*k"),
    ("checkpoint-x-nan", lambda: load_checkpoint(_saved({"server": _state(x=torch.full((3,), NAN,
                                                                                     dtype=torch.float64))})),
     ValueError, "checkpoint corrupt: .*odd.pt.*NaN"),
    ("resume-from-truncated-checkpoint", lambda: _run(checkpoint=_truncated_checkpoint(), resume=True), ValueError,
     "checkpoint corrupt: .*ok.pt"),
    ("resume-from-text-file", lambda: _run(checkpoint=_text_checkpoint(), resume=True), ValueError,
     "checkpoint corrupt: .*notes.pt"),
    # --- the process runners (refused before any process starts) ---
    ("run-timeout-zero", lambda: _run(timeout=0), ValueError, "timeout"),
    ("run-timeout-negative", lambda: _run(timeout=-5), ValueError, "timeout"),
    ("run-timeout-nan", lambda: _run(timeout=NAN), ValueError, "timeout"),
    ("run-timeout-inf", lambda: _run(timeout=INF), ValueError, "timeout"),
    ("run-timeout-string", lambda: _run(timeout="30"), TypeError, "timeout"),
    ("run-resume-without-checkpoint", lambda: _run(resume=True), ValueError, "checkpoint"),
    ("run-resume-not-bool", lambda: _run(resume="yes", checkpoint=_tmp("r.pt")), TypeError, "resume"),
    ("run-seed-negative", lambda: _run(seed=-1), ValueError, "seed"),
    ("run-seed-float", lambda: _run(seed=1.5), TypeError, "seed"),
    ("run-compute-time-not-callable", lambda: _run(compute_time=0.1), TypeError, "compute_time"),
    ("run-checkpoint-every-negative", lambda: _run(checkpoint_every=-1, checkpoint=_tmp("c.pt")), ValueError,
     "checkpoint_every"),
    ("run-checkpoint-not-a-path", lambda: _run(checkpoint=3, checkpoint_every=1), TypeError, "checkpoint"),
    ("run-unknown-option", lambda: _run(timeuot=3), TypeError, "timeuot"),
    ("run-n-workers-zero", lambda: _run(n_workers=0), ValueError, "n_workers"),
    ("run-steps-negative", lambda: _run(steps=-1), ValueError, "steps"),
    ("run-steps-float", lambda: _run(steps=1.5), TypeError, "steps"),
    ("run-grad-not-callable", lambda: _run(grad="grad"), TypeError, "grad"),
    ("run-grad-unpicklable", lambda: _run(grad=lambda x, w, rng: x), TypeError, "grad.*picklable"),
    ("run-fail-after-out-of-range", lambda: _run(fail_after={5: 1}), ValueError, "fail_after"),
    ("run-fail-after-negative-count", lambda: _run(fail_after={0: -1}), ValueError, "fail_after"),
    ("run-distributed-not-a-server", lambda: run_distributed("server", grad, 1, 1, timeout=30), TypeError, "server"),
    ("run-options-timeout-nan", lambda: RunOptions(timeout=NAN), ValueError, "timeout"),
    ("serve-torchrun-steps-negative", lambda: serve_torchrun(lambda: _server(), grad, -1), ValueError, "steps"),
    ("serve-torchrun-make-server-not-callable", lambda: serve_torchrun(_server(), grad, 2), TypeError,
     "make_server"),
    ("serve-torchrun-timeout-zero", lambda: serve_torchrun(lambda: _server(), grad, 2, timeout=0), ValueError,
     "timeout"),
]


@pytest.mark.parametrize("call, exc, pattern", [p[1:] for p in PROBES], ids=[p[0] for p in PROBES])
def test_bad_input_is_named(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


def test_probe_names_are_unique():
    assert len({p[0] for p in PROBES}) == len(PROBES)


# --- hypothesis: spaces of bad settings --------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True).filter(lambda v: not (0 < v < INF)))
def test_learning_rates_outside_0_inf_are_refused(lr):
    with pytest.raises(ValueError, match="lr"):
        RennalaServer(X0, 1, lr)


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=-100, max_value=0))
def test_batch_sizes_below_one_are_refused(b):
    with pytest.raises(ValueError, match="batch_size"):
        RennalaServer(X0, b, 0.1)


@settings(max_examples=30, deadline=None)
@given(st.integers(min_value=1, max_value=2000))
def test_a_checkpoint_cut_anywhere_is_named_corrupt(cut):
    path = _good_checkpoint()
    data = path.read_bytes()
    path.write_bytes(data[: cut % len(data)])
    with pytest.raises(ValueError, match="checkpoint corrupt: "):
        load_checkpoint(path)


@settings(max_examples=30, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True).filter(lambda v: not (0 < v < INF)))
def test_timeouts_outside_0_inf_are_refused(t):
    with pytest.raises(ValueError, match="timeout"):
        RunOptions(timeout=t)


# --- NumPy integers are accepted wherever Python ints are ----------------------------------------

def test_numpy_integers_are_accepted_and_give_the_same_result():
    ref = simulate_rennala(grad, X0, one_second, n_workers=2, batch_size=2, steps=4, lr=0.1, seed=3)
    got = simulate_rennala(grad, X0, one_second, n_workers=np.int64(2), batch_size=np.int32(2), steps=np.int64(4),
                           lr=np.float64(0.1), seed=np.int64(3))
    for a, b in zip(ref.points, got.points):
        assert torch.equal(a, b)
    server = RennalaServer(X0, np.int64(2), 0.1)
    assert type(server.B) is int
    assert equilibrium_time([1.0, 2.0], np.int64(3)) == equilibrium_time([1.0, 2.0], 3)
    assert RunOptions(seed=np.int64(4), checkpoint_every=np.int64(0)).seed == 4


# --- a valid checkpoint still loads ------------------------------------------------------------

def test_a_valid_checkpoint_loads_and_resumes():
    path = _good_checkpoint()
    state = load_checkpoint(path)
    server = _server()
    server.load_state_dict(state["server"])
    assert server.k == 1 and state["seed"] == 0


# --- resume=True: ``steps`` is the total target --------------------------------------------------

def test_resume_with_steps_means_the_total_target(tmp_path):
    ckpt = tmp_path / "run.pt"
    first = run_rennala(grad, X0, n_workers=2, batch_size=2, steps=10, lr=0.1, seed=1, checkpoint=ckpt,
                        checkpoint_every=5, timeout=60)
    assert len(first.points) == 10 and load_checkpoint(ckpt)["server"]["k"] == 10
    more = run_rennala(grad, X0, n_workers=2, batch_size=2, steps=25, lr=0.1, seed=1, checkpoint=ckpt,
                       checkpoint_every=5, resume=True, timeout=60)
    assert more.start_step == 10 and len(more.points) == 15
    assert load_checkpoint(ckpt)["server"]["k"] == 25
    t0 = time.perf_counter()
    with pytest.warns(UserWarning, match="already at step 25.*steps=25.*no step"):
        none = run_rennala(grad, X0, n_workers=2, batch_size=2, steps=25, lr=0.1, seed=1, checkpoint=ckpt,
                           checkpoint_every=5, resume=True, timeout=60)
    assert time.perf_counter() - t0 < 5  # no process was started
    assert none.start_step == 25 and len(none.points) == 0 and len(none.times) == 0
    with pytest.warns(UserWarning, match="already at step 25.*steps=10"):
        run_rennala(grad, X0, n_workers=2, batch_size=2, steps=10, lr=0.1, seed=1, checkpoint=ckpt, resume=True,
                    timeout=60)
    assert load_checkpoint(ckpt)["server"]["k"] == 25  # untouched
    # resume=True before any checkpoint exists: a fresh run to `steps`
    fresh = run_rennala(grad, X0, n_workers=1, batch_size=1, steps=3, lr=0.1, checkpoint=tmp_path / "new.pt",
                        checkpoint_every=1, resume=True, timeout=60)
    assert fresh.start_step == 0 and len(fresh.points) == 3


def test_a_run_resumed_to_its_own_step_does_no_step_and_says_so(tmp_path):
    ckpt = tmp_path / "run.pt"
    run_rennala(grad, X0, n_workers=1, batch_size=1, steps=10, lr=0.1, checkpoint=ckpt, checkpoint_every=10,
                timeout=60)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = run_rennala(grad, X0, n_workers=1, batch_size=1, steps=10, lr=0.1, checkpoint=ckpt,
                          checkpoint_every=10, resume=True, timeout=60)
    assert res.start_step == 10 and not res.points
    assert any("no step" in str(w.message) and str(ckpt) in str(w.message) for w in caught)


# --- worker processes that die: fail within seconds, with the cause ------------------------------

def always_raising(x, worker, rng):
    raise ArithmeticError("nobody can compute")


def _explode_on_arrival():
    raise RuntimeError("this gradient cannot be rebuilt in the worker")


class DiesOnArrival:
    """Pickles fine; unpickling it in the worker process raises (an import-time failure)."""

    def __call__(self, x, worker, rng):
        return x

    def __reduce__(self):
        return (_explode_on_arrival, ())


def test_a_gradient_that_raises_at_once_fails_the_run_within_seconds():
    t0 = time.perf_counter()
    with pytest.raises(RuntimeError, match="every worker has left.*ArithmeticError: nobody can compute"):
        run_rennala(always_raising, X0, n_workers=2, batch_size=1, steps=5, lr=0.1, timeout=300)
    assert time.perf_counter() - t0 < 30


def test_workers_that_die_before_joining_fail_the_run_within_seconds():
    t0 = time.perf_counter()
    with pytest.raises(RuntimeError, match="worker [01] exited with code 1 before joining"):
        run_rennala(DiesOnArrival(), X0, n_workers=2, batch_size=1, steps=5, lr=0.1, timeout=300)
    assert time.perf_counter() - t0 < 30


def test_workers_that_all_die_mid_run_fail_the_run_within_seconds():
    # fail_after: each worker os._exit(17)s after one gradient, without a word to the server
    t0 = time.perf_counter()
    with pytest.raises(RuntimeError, match="every worker has left.*exited with code 17"):
        run_rennala(grad, X0, n_workers=2, batch_size=1, steps=50, lr=0.1, timeout=300, fail_after={0: 1, 1: 1})
    assert time.perf_counter() - t0 < 30


def test_a_synchronous_run_stops_waiting_for_a_worker_that_died_mid_computation():
    # worker 1 dies while worker 0 idles for the step: the server must notice it at once
    t0 = time.perf_counter()
    res = run_distributed(SynchronousServer(X0, 2, lr=0.1), grad, n_workers=2, steps=4, timeout=300,
                          fail_after={1: 1})
    assert time.perf_counter() - t0 < 30
    assert len(res.points) == 4 and res.dead == {1: "process exited with code 17"}


def test_a_script_without_the_main_guard_fails_within_seconds(tmp_path):
    script = tmp_path / "unguarded.py"
    script.write_text(textwrap.dedent("""
        import torch
        from neurips26.distributed import run_rennala

        def grad(x, worker, rng):
            return x

        run_rennala(grad, torch.zeros(3, dtype=torch.float64), n_workers=2, batch_size=1, steps=3, lr=0.1,
                    timeout=300)
    """))
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert time.perf_counter() - t0 < 60
    assert proc.returncode != 0
    assert "before joining" in proc.stderr and "__main__" in proc.stderr, proc.stderr[-3000:]


def test_the_dying_worker_class_pickles():
    assert pickle.dumps(DiesOnArrival())  # the failure happens in the worker, not here


def test_under_torchrun_a_gradient_that_raises_fails_the_job_within_seconds(tmp_path):
    script = tmp_path / "failing_torchrun.py"
    script.write_text(textwrap.dedent("""
        import torch
        from neurips26.distributed import RennalaServer, serve_torchrun

        def grad(x, worker, rng):
            raise ArithmeticError("nobody can compute")

        if __name__ == "__main__":
            serve_torchrun(lambda: RennalaServer(torch.zeros(3, dtype=torch.float64), 1, 0.1), grad, steps=5,
                           timeout=300)
    """))
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=3",
                           str(script)], capture_output=True, text=True, timeout=240,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert time.perf_counter() - t0 < 60
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "every worker has left" in out and "ArithmeticError: nobody can compute" in out, out[-3000:]
