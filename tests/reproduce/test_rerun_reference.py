"""The fastest quick runs, rerun as a user runs them (`neurips26 run SLUG --quick --seed 0`), against their
committed references results/quick/SLUG.json.

Both run with the numerics pinned as scripts/refresh_results.py pins them (neurips26.reproduce._pinning).

* Same machine type (the reference's CPU model, torch version, torch CPU capability, torch threads and
  numerics pinning all equal this run's): every metric exactly equal (timings aside).
* Another machine type: every metric within ``RTOL`` relative (``ATOL`` absolute near zero). Pinned
  runs on two x86-64 CPUs with AVX2 are expected to agree exactly (docs/reproducibility.md); the
  tolerance is for what cannot be pinned (another CPU vendor's MKL path, another architecture). Values
  that are beyond ``DIVERGED`` on both sides (a diverging baseline's curve) agree.
* Either way the claims must be the same, in the same order, with the same verdicts.

riemannian-bilevel takes about 25 s on 2 cores; moe-mxfp4 about 45-60 s and is marked slow.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import re
import subprocess
import sys

import pytest

from neurips26.reproduce._harness import verdict
from neurips26.reproduce._pinning import pinned_environ

ROOT = pathlib.Path(__file__).resolve().parents[2]
REFERENCES = ROOT / "results" / "quick"
RTOL = 0.02  # relative, another machine type: perplexities and accuracies within 2 %
ATOL = 1e-6  # absolute, for metrics that are zero or nearly so
DIVERGED = 1e12  # on another machine type, two values both beyond this (a baseline that blew up) agree
# metrics that are measured times, not results: never compared
TIMING = re.compile(r"(^|[/._\s])(timing|wall|time|seconds|s_per_step)([/._\s\[]|$)|_s$|_s[/.\[]")
MACHINE_KEYS = ("cpu", "torch", "torch_cpu_capability", "torch_threads")


def flatten(obj, prefix: str = ""):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from flatten(v, f"{prefix}/{k}" if prefix else str(k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from flatten(v, f"{prefix}[{i}]")
    else:
        yield prefix, obj


def machine(env: dict) -> dict:
    pin = env.get("numerics") or {}
    return {k: env.get(k) for k in MACHINE_KEYS} | {"pinned": pin.get("pinned"), "pin_env": pin.get("env")}


def compare(ref: dict, new: dict) -> list[str]:
    """What differs between two results.json (an empty list: they agree), at the level of exactness
    the two machines allow."""
    problems = []
    ref_claims = [(c["claim"], verdict(c)) for c in ref["claims"]]
    new_claims = [(c["claim"], verdict(c)) for c in new["claims"]]
    if [v for _, v in ref_claims] != [v for _, v in new_claims]:
        problems.append(f"verdicts changed: reference {[v for _, v in ref_claims]}, rerun {[v for _, v in new_claims]}")
    same_machine = machine(ref["env"]) == machine(new["env"])
    a = {k: v for k, v in flatten(ref["metrics"]) if not TIMING.search(k)}
    b = {k: v for k, v in flatten(new["metrics"]) if not TIMING.search(k)}
    if a.keys() != b.keys():
        problems.append(f"metrics differ in names: only in the reference {sorted(a.keys() - b.keys())[:5]}, "
                        f"only in the rerun {sorted(b.keys() - a.keys())[:5]}")
    for k in sorted(a.keys() & b.keys()):
        x, y = a[k], b[k]
        if same_machine or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (x, y)):
            ok = x == y
        else:
            ok = math.isclose(x, y, rel_tol=RTOL, abs_tol=ATOL) or min(abs(x), abs(y)) > DIVERGED
        if not ok:
            problems.append(f"{k}: reference {x!r}, rerun {y!r}")
    if problems and same_machine:
        problems.insert(0, "same machine type as the reference (exact comparison)")
    elif problems:
        problems.insert(0, f"another machine type (tolerance {RTOL:g} relative): reference {machine(ref['env'])}, "
                           f"this run {machine(new['env'])}")
    return problems


def rerun(slug: str, tmp_path: pathlib.Path) -> tuple[dict, dict]:
    ref_path = REFERENCES / f"{slug}.json"
    if not ref_path.exists():
        pytest.fail(f"no committed reference {ref_path.relative_to(ROOT)} (scripts/refresh_results.py {slug} makes it)")
    ref = json.loads(ref_path.read_text())
    cmd = [sys.executable, "-m", "neurips26.cli", "run", slug, "--quick", "--seed", "0", "--out", str(tmp_path)]
    executor = (ref["env"].get("tasks") or {}).get("executor", "")
    jobs = re.match(r"process pool, (\d+) worker", executor)
    if jobs:  # a pool's workers run one thread each: rerun it the same way
        cmd += ["--jobs", jobs.group(1)]
    # as refresh_results.py runs it: not this test worker's thread count or pinning switch
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_XDIST_WORKER", "NEURIPS26_THREADS", "NEURIPS26_PIN")}
    env["PYTHONWARNINGS"] = "ignore"
    env.update(pinned_environ(threads=2))  # as scripts/refresh_results.py made the reference
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    return ref, json.loads((tmp_path / slug / "results.json").read_text())


@pytest.mark.parametrize("slug", [
    "riemannian-bilevel",
    pytest.param("moe-mxfp4", marks=pytest.mark.slow),
])
def test_quick_rerun_matches_committed_reference(slug, tmp_path):
    ref, new = rerun(slug, tmp_path)
    problems = compare(ref, new)
    assert not problems, f"{slug} --quick --seed 0 no longer matches results/quick/{slug}.json:\n" + "\n".join(problems[:20])


def _result(metrics, verdicts, **env):
    base = {"cpu": "X", "torch": "2.13.0+cpu", "torch_cpu_capability": "AVX2", "torch_threads": 2}
    claims = [{"claim": f"c{i}", "holds": {"holds": True, "does not hold": False}.get(v), "verdict": v}
              for i, v in enumerate(verdicts)]
    return {"env": base | env, "metrics": metrics, "claims": claims}


def test_compare_is_exact_on_the_same_machine_and_tolerant_elsewhere():
    ref = _result({"ppl": 7.65, "curve": [1.0, 0.5], "timing": {"s_per_step": 0.1}, "wall_s": 3.0}, ["holds"])
    same = _result({"ppl": 7.65 * (1 + 1e-12), "curve": [1.0, 0.5], "timing": {"s_per_step": 0.2}, "wall_s": 9.0},
                   ["holds"])
    assert compare(ref, same)[1].startswith("ppl:")  # one ulp-ish change fails on the same machine; timings ignored
    assert compare(ref, _result({"ppl": 7.65, "curve": [1.0, 0.5]}, ["holds"])) == []
    other = _result({"ppl": 7.65 * 1.01, "curve": [1.0, 0.5]}, ["holds"], torch_cpu_capability="AVX512")
    assert compare(ref, other) == []  # 1 % on another machine type: within tolerance
    far = _result({"ppl": 7.65 * 1.05, "curve": [1.0, 0.5]}, ["holds"], torch_cpu_capability="AVX512")
    assert any(p.startswith("ppl:") for p in compare(ref, far))
    blown = _result({"ppl": 7.65, "curve": [1e40, 0.5]}, ["holds"], torch_cpu_capability="AVX512")
    assert compare(_result({"ppl": 7.65, "curve": [3e30, 0.5]}, ["holds"]), blown) == []
    # on the same machine type a blown-up value must still be equal to the bit
    assert compare(_result({"ppl": 7.65, "curve": [3e30, 0.5]}, ["holds"], torch_cpu_capability="AVX512"), blown)
    flipped = _result({"ppl": 7.65, "curve": [1.0, 0.5]}, ["inconclusive"], torch_cpu_capability="AVX512")
    assert any(p.startswith("verdicts changed") for p in compare(ref, flipped))
    renamed = _result({"ppl": 7.65, "curve2": [1.0, 0.5]}, ["holds"])
    assert any("differ in names" in p for p in compare(ref, renamed))
