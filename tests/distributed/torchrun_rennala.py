"""Launched by test_runner.py with torchrun: every rank runs this file."""

import sys

import torch

from neurips26.distributed import RennalaServer
from neurips26.distributed import serve_torchrun

TARGET = torch.tensor([1.0, -2.0, 0.5, 3.0], dtype=torch.float64)


def noisy_grad(x, worker, rng):
    return (x - TARGET) + torch.as_tensor(rng.standard_normal(4))


if __name__ == "__main__":
    res = serve_torchrun(lambda: RennalaServer(torch.zeros(4, dtype=torch.float64), 2, 0.05, "l2"), noisy_grad,
                         steps=5, seed=3, timeout=60)
    if res is not None:
        torch.save({"points": res.points, "arrivals": res.arrivals, "dead": res.dead}, sys.argv[1])
