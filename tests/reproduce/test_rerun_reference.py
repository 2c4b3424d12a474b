"""The fastest quick runs, rerun as a user runs them (`neurips26 run SLUG --quick --seed 0`), against their
committed references results/quick/SLUG.json.

Both run with the numerics pinned as scripts/refresh_results.py pins them (neurips26.reproduce._pinning),
and are compared by neurips26.reproduce._references.compare: exactly on the same machine type, within a
stated tolerance on another, and any verdict change fails. `scripts/refresh_results.py --check` does the
same for every experiment (about 50 minutes on 2 cores, too long for `make test`).

riemannian-bilevel takes about 25 s on 2 cores; moe-mxfp4 about 45-60 s and is marked slow.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from neurips26.reproduce._pinning import pinned_environ
from neurips26.reproduce._references import compare, jobs_of

ROOT = pathlib.Path(__file__).resolve().parents[2]
REFERENCES = ROOT / "results" / "quick"


def rerun(slug: str, tmp_path: pathlib.Path) -> tuple[dict, dict]:
    ref_path = REFERENCES / f"{slug}.json"
    if not ref_path.exists():
        pytest.fail(f"no committed reference {ref_path.relative_to(ROOT)} (scripts/refresh_results.py {slug} makes it)")
    ref = json.loads(ref_path.read_text())
    cmd = [sys.executable, "-m", "neurips26.cli", "run", slug, "--quick", "--seed", "0", "--out", str(tmp_path)]
    if jobs_of(ref):  # a pool's workers run one thread each: rerun it the same way
        cmd += ["--jobs", str(jobs_of(ref))]
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
    from neurips26.reproduce._harness import _cpu_model

    made_on = json.loads((REFERENCES / f"{slug}.json").read_text())["env"].get("cpu", "")
    if _vendor(made_on) != _vendor(_cpu_model() or ""):
        pytest.skip(f"the reference was made on {made_on!r}, this CPU is {_cpu_model()!r}: MKL promises equal "
                    "bits only within one vendor's code branch (docs/reproducibility.md), and these runs amplify "
                    "a last-bit difference past any tolerance")
    ref, new = rerun(slug, tmp_path)
    problems = compare(ref, new)
    assert not problems, f"{slug} --quick --seed 0 no longer matches results/quick/{slug}.json:\n" + "\n".join(problems[:20])


def _vendor(cpu: str) -> str:
    return "AMD" if "AMD" in cpu else "Intel" if "Intel" in cpu else cpu


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
    costs = {"cost_s_per_iteration": {"10": {"EPO": {"mean": 0.03}}}, "cost_ratio_m10_over_m2": {"EPO": [3.9]}}
    moved = {"cost_s_per_iteration": {"10": {"EPO": {"mean": 0.02}}}, "cost_ratio_m10_over_m2": {"EPO": [4.1]}}
    assert compare(_result({"ppl": 7.65} | costs, ["holds"]), _result({"ppl": 7.65} | moved, ["holds"])) == []
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
