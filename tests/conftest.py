import os

import pytest
import torch

# `make test` runs two xdist workers on two cores: one intra-op thread each, or they
# oversubscribe the cores (and the gloo tests' worker processes) and small bf16 matmuls
# slow down by two orders of magnitude.
if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)

from neurips26 import reproduce
from neurips26.reproduce import Experiment


@pytest.fixture
def fake_registry(monkeypatch):
    """Replace the registry with the fake experiments of fake_experiments.py."""
    import pathlib

    monkeypatch.syspath_prepend(str(pathlib.Path(__file__).parent / "reproduce"))
    fakes = {
        slug: Experiment(slug=slug, paper=f"Paper {slug}", summary="test", target=f"fake_experiments:{fn}")
        for slug, fn in [("fake-ok", "ok"), ("fake-boom", "boom"), ("fake-nan", "nan_metric")]
    }
    monkeypatch.setattr(reproduce, "EXPERIMENTS", fakes)
    return fakes
