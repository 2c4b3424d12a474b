"""pin_numerics: a probe run in fresh processes that play two different machines (forced ISA levels,
thread counts) gives bit-identical numbers when pinned, and different numbers when not.

Every probe runs in its own subprocess: the settings are read once per process (at the first ATen
dispatch, oneDNN / MKL call, OpenBLAS load), and pinning here would change this test worker's threads."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from neurips26.reproduce._harness import _cpu_model
from neurips26.reproduce._pinning import PIN_ENV, _has_avx2, pin_numerics

# Kernels whose low bits depend on the ISA level, the BLAS core type or the thread count (measured on
# the project's AMD EPYC, docs/reproducibility.md): ATen's log_softmax and reductions, oneDNN's GELU
# and linear layers inside a short training run, MKL's GEMM, NumPy's OpenBLAS GEMM.
PROBE = r"""
import hashlib, json, os, sys
if os.environ.get("PROBE_PIN") == "1":
    from neurips26.reproduce._pinning import pin_numerics
    record = pin_numerics()
else:
    record = None
import numpy as np
import torch

def h(t):
    a = t.detach().contiguous().numpy() if isinstance(t, torch.Tensor) else np.ascontiguousarray(t)
    return hashlib.sha256(a.tobytes()).hexdigest()[:16]

g = torch.Generator().manual_seed(0)
out = {"capability": torch.backends.cpu.get_cpu_capability(), "threads": torch.get_num_threads(), "record": record}
x = torch.randn(1_000_003, generator=g)
out["sum"] = h(x.sum())
out["log_softmax"] = h(torch.log_softmax(torch.randn(64, 1000, generator=g), -1))
out["matmul"] = h(torch.randn(257, 300, generator=g) @ torch.randn(300, 129, generator=g))
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.GELU(), torch.nn.Linear(64, 64), torch.nn.Tanh(),
                          torch.nn.Linear(64, 3))
X = torch.randn(512, 20)
y = (X[:, 0] + X[:, 1] ** 2 > 0.5).long() + (X[:, 2] > 1).long()
opt = torch.optim.Adam(net.parameters(), 1e-2)
for _ in range(100):
    opt.zero_grad()
    torch.nn.functional.cross_entropy(net(X), y).backward()
    opt.step()
out["mlp"] = h(torch.cat([p.detach().flatten() for p in net.parameters()]))
r = np.random.default_rng(0)
out["numpy_matmul"] = h(r.standard_normal((257, 300)) @ r.standard_normal((300, 129)))
print(json.dumps(out))
"""

RESULTS = ("sum", "log_softmax", "matmul", "mlp", "numpy_matmul")
# "another machine": lower ISA levels for ATen, oneDNN, MKL and OpenBLAS, and one thread
OTHER_MACHINE = {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
                 "OPENBLAS_CORETYPE": "Nehalem", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
_CLEAR = (*PIN_ENV, "MKL_ENABLE_INSTRUCTIONS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
          "NEURIPS26_PIN", "NEURIPS26_THREADS", "PROBE_PIN")

needs_avx2 = pytest.mark.skipif(not _has_avx2(), reason="pinning sets the AVX2 level; this CPU has no AVX2")


def probe(machine: dict[str, str], pin: bool, code: str = PROBE) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in _CLEAR}
    env.update(machine, PROBE_PIN="1" if pin else "0", PYTHONWARNINGS="ignore")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@needs_avx2
@pytest.mark.xfail("Intel" in (_cpu_model() or ""), strict=False, reason="known gap, measured on an Intel Xeon: MKL there lets the "
                   "'other machine's MKL_ENABLE_INSTRUCTIONS=SSE4_2 override MKL_CBWR=AVX2, and torch's float32 "
                   "matmul differs in its last bits; pin_numerics does not set that variable (on the AMD EPYC "
                   "the references come from, the probe is bit-identical)")
def test_pinned_probe_is_bit_identical_on_two_machines_and_differs_unpinned():
    here_pinned, there_pinned = probe({}, pin=True), probe(OTHER_MACHINE, pin=True)
    assert here_pinned["capability"] == there_pinned["capability"] == "AVX2"
    assert here_pinned["threads"] == there_pinned["threads"] == 2
    for name in RESULTS:
        assert here_pinned[name] == there_pinned[name], f"{name} differs between the two machines although pinned"
    assert there_pinned["record"]["not_applied"] == []
    assert there_pinned["record"]["openblas_coretype"] == "Haswell"

    # the same probe unpinned: the forced ISA levels and the thread count do change the numbers, so the
    # comparison above could fail (and the kernels named here are the ones that move)
    here, there = probe({}, pin=False), probe(OTHER_MACHINE, pin=False)
    assert there["capability"] == "DEFAULT" and there["threads"] == 1
    moved = [name for name in RESULTS if here[name] != there[name]]
    assert {"sum", "log_softmax", "mlp", "numpy_matmul"} <= set(moved), moved


def test_pin_record_says_what_it_set_and_what_came_too_late():
    code = r"""
import json, os
import numpy  # loaded before the pin: its OpenBLAS already chose a core type
from neurips26.reproduce import _pinning
before = _pinning.pinned_record()
rec = _pinning.pin_numerics(threads=1)
print(json.dumps({"before": before, "rec": rec, "again": _pinning.pinned_record(),
                  "environ": {k: os.environ.get(k) for k in ("ATEN_CPU_CAPABILITY", "OMP_NUM_THREADS")}}))
"""
    out = probe({"OPENBLAS_CORETYPE": "Nehalem"}, pin=False, code=code)
    assert out["before"]["pinned"] is False and out["before"]["not_applied"]
    rec = out["rec"]
    assert rec == out["again"]
    assert rec["pinned"] is True and rec["threads"] == 1 and rec["env"]["OMP_NUM_THREADS"] == "1"
    assert out["environ"]["OMP_NUM_THREADS"] == "1"
    if _has_avx2():
        assert rec["env"]["ATEN_CPU_CAPABILITY"] == "avx2" == out["environ"]["ATEN_CPU_CAPABILITY"]
        assert rec["torch_cpu_capability"] == "AVX2"  # torch was imported, but no kernel had run: still applies
        # OpenBLAS had loaded as Nehalem: the record says the pin came too late for it
        assert rec["openblas_coretype"] == "Nehalem"
        assert any(n.startswith("OPENBLAS_CORETYPE") for n in rec["not_applied"]), rec["not_applied"]


def test_thread_count_from_the_environment():
    code = r"""
import json
from neurips26.reproduce._pinning import pin_numerics
print(json.dumps({"rec": pin_numerics()}))
"""
    assert probe({"NEURIPS26_THREADS": "1"}, pin=False, code=code)["rec"]["threads"] == 1
    bad = dict(os.environ, NEURIPS26_THREADS="two")
    proc = subprocess.run([sys.executable, "-c", code], env=bad, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "NEURIPS26_THREADS must be an integer >= 1, got 'two'" in proc.stderr


def test_pinning_can_be_turned_off():
    code = r"""
import json, os
from neurips26.reproduce._pinning import pin_numerics
rec = pin_numerics()
print(json.dumps({"rec": rec, "cap": os.environ.get("ATEN_CPU_CAPABILITY")}))
"""
    out = probe({"NEURIPS26_PIN": "0"}, pin=False, code=code)
    assert out["rec"]["pinned"] is False and out["rec"]["env"] == {} and out["cap"] is None


@pytest.mark.parametrize("threads", [0, -1, 1.5, True, "2"])
def test_bad_thread_count_is_refused_before_anything_changes(threads):
    before = dict(os.environ)
    with pytest.raises(ValueError, match="threads must be an int >= 1 or None"):
        pin_numerics(threads=threads)
    assert dict(os.environ) == before
