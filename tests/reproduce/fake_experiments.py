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
