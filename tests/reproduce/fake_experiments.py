"""Experiments for testing the harness (registered by the tests, not by the package)."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch


def ok(ctx):
    ctx.config["n"] = 3
    x = float(torch.rand(()))  # seeded by the harness
    for _ in ctx.track(range(3), "work"):
        pass
    ctx.metric("x", x)
    ctx.metric("curve", [1.0, 0.5, 0.25])
    ctx.claim("x is below 2", ours=x, baseline=2.0, holds=x < 2.0)
    ctx.table("numbers", ["a", "b"], [(1, 2.5)])
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    ctx.figure(fig, "line", "a line")
    plt.close(fig)


def boom(ctx):
    raise RuntimeError("deliberate failure")


def nan_metric(ctx):
    ctx.metric("bad", float("nan"))


def no_figure(ctx):
    ctx.metric("x", 1.0)


# --- sweeps as tasks (tests/reproduce/test_harness_map.py) --------------------------------------
# Environment variables steer the tasks from a test, in this process and in worker processes alike:
#   NEURIPS26_TEST_TASK_LOG    a file to which each task appends its index when it starts
#   NEURIPS26_TEST_FAIL_TASK   the index of a task that raises ValueError
#   NEURIPS26_TEST_INTERRUPT   the index of a task that raises KeyboardInterrupt (in-process Ctrl-C)
#   NEURIPS26_TEST_KILL_ONCE   a marker file: the first task to create it, in a Dask worker, kills its worker
#   NEURIPS26_TEST_SLEEP       seconds each task sleeps (default 0)

import os
import random
import signal
import time

import numpy as np


def _env_index(name):
    value = os.environ.get(name)
    return int(value) if value not in (None, "") else None


def draw_task(task):
    """A task whose result is made of draws from every generator the harness seeds."""
    i = task["i"]
    log = os.environ.get("NEURIPS26_TEST_TASK_LOG")
    if log:
        with open(log, "a") as fh:
            fh.write(f"{i}\n")
    marker = os.environ.get("NEURIPS26_TEST_KILL_ONCE")
    if marker and i == 1:
        try:
            from distributed import get_worker

            get_worker()
            in_worker = True
        except (ImportError, ValueError):
            in_worker = False
        if in_worker:
            try:
                os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                pass
            else:
                os.kill(os.getpid(), signal.SIGKILL)  # the worker dies mid-task
    time.sleep(float(os.environ.get("NEURIPS26_TEST_SLEEP", "0")))
    if _env_index("NEURIPS26_TEST_FAIL_TASK") == i:
        raise ValueError(f"task {i} fails on purpose")
    if _env_index("NEURIPS26_TEST_INTERRUPT") == i:
        raise KeyboardInterrupt
    from neurips26.reproduce._harness import task_seed

    return {"i": i, "torch": torch.rand(3, dtype=torch.float64).tolist(), "numpy": np.random.rand(2),
            "random": random.random(), "own": float(np.random.default_rng(task_seed()).random()),
            "scaled": task["scale"] * float(torch.randn(()))}


def mapped(ctx):
    """Six independent tasks through ctx.map, then an ordinary draw after them."""
    n = int(os.environ.get("NEURIPS26_TEST_TASKS", "6"))
    ctx.config["tasks"] = n
    results = ctx.map(draw_task, [{"i": i, "scale": 1.0 + i} for i in range(n)], description="draws")
    ctx.metric("index", [r["i"] for r in results])
    ctx.metric("results", results)
    ctx.metric("after", float(torch.rand(())))  # the run's own stream, untouched by the map
    ctx.claim("the tasks came back in order", ours=1.0, baseline=1.0, holds=[r["i"] for r in results] == list(range(n)))


def set_env(var, value):
    """For Client.run: set (value None: remove) an environment variable in a Dask worker."""
    if value is None:
        os.environ.pop(var, None)
    else:
        os.environ[var] = value


def not_a_dict(task):
    return [task]
