"""Compare a rerun's results.json with a committed reference (results/quick/SLUG.json).

Used by tests/reproduce/test_rerun_reference.py and `scripts/refresh_results.py --check`.

* Same machine type (the reference's CPU model, torch version, torch CPU capability, torch threads and
  numerics pinning all equal this run's): every metric exactly equal (timings aside).
* Another machine type: every metric within ``RTOL`` relative (``ATOL`` absolute near zero). Pinned
  runs on two x86-64 CPUs with AVX2 are expected to agree exactly (docs/reproducibility.md); the
  tolerance is for what cannot be pinned (another CPU vendor's MKL path, another architecture). Values
  that are beyond ``DIVERGED`` on both sides (a diverging baseline's curve) agree.
* Either way the claims must be the same, in the same order, with the same verdicts.
"""

from __future__ import annotations

import math
import re

from ._harness import verdict

RTOL = 0.02  # relative, another machine type: perplexities and accuracies within 2 %
ATOL = 1e-6  # absolute, for metrics that are zero or nearly so
DIVERGED = 1e12  # on another machine type, two values both beyond this (a baseline that blew up) agree
# metrics that are measured times, or ratios of them (paretom3's cost per iteration and its growth in m), not
# results: never compared
TIMING = re.compile(r"(^|[/._\s])(timing|wall|time|seconds|s_per_step|s_per_iteration|cost_ratio)([/._\s\[]|$)"
                    r"|_s$|_s[/.\[]")
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


def jobs_of(ref: dict) -> int | None:
    """The ``--jobs`` a reference was made with (its tasks ran on a process pool), else None."""
    executor = (ref["env"].get("tasks") or {}).get("executor", "")
    found = re.match(r"process pool, (\d+) worker", executor)
    return int(found.group(1)) if found else None
