import os

import pytest
import torch

# `make test` runs two xdist workers on two cores: one intra-op thread each, or they
# oversubscribe the cores (and the gloo tests' worker processes) and small bf16 matmuls
# slow down by two orders of magnitude.
if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)
    os.environ.setdefault("NEURIPS26_THREADS", "1")  # runs through the CLI pin one thread per xdist worker

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


@pytest.fixture(autouse=True)
def _torch_default_dtype_unchanged():
    """Fail the test that changes torch's default dtype and give it back, so that a leak (gcastle
    sets float64 on import) is caught where it happens, not in whichever test runs next."""
    before = torch.get_default_dtype()
    yield
    after = torch.get_default_dtype()
    if after != before:
        torch.set_default_dtype(before)
        pytest.fail(f"the test changed torch's default dtype from {before} to {after}")


def pytest_collection_finish(session):
    """A test module that sets torch's default dtype at import time changes it for every test
    collected after it on the same worker; the per-test guard above cannot see that, so refuse here."""
    if torch.get_default_dtype() != torch.float32:
        raise pytest.UsageError(
            f"torch's default dtype is {torch.get_default_dtype()} after collection: a test module sets it at "
            "import time; set it in a fixture that restores it instead")
