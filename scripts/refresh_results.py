"""Rerun quick reproductions and commit-ready copies of their results under results/quick/SLUG.json.

    python scripts/refresh_results.py                 # every registered experiment, one after another
    python scripts/refresh_results.py pome rlns       # only these
    python scripts/refresh_results.py --jobs 2 dag-flow
    python scripts/refresh_results.py --check         # rerun and compare with the committed references; write nothing

Each experiment runs as `neurips26 run SLUG --quick --seed 0` in its own process, with its numerics pinned
(neurips26.reproduce._pinning: two threads, the kernels' ISA level fixed at AVX2 for ATen, oneDNN, MKL and
OpenBLAS, set in the environment before the process starts so that every one applies; docs/reproducibility.md),
into a temporary directory; its results.json is then copied to
results/quick/SLUG.json through a temporary file and a rename, so a failed or interrupted run never leaves
a half-written reference behind. With ``--check`` nothing is written: each rerun is compared with its
committed reference (neurips26.reproduce._references.compare: exact on the same machine type, within a
tolerance on another, every verdict equal), as tests/reproduce/test_rerun_reference.py does for the
fastest two. The README's figures and claim counts are checked against these files
by tests/test_readme_figures.py.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from neurips26.reproduce import EXPERIMENTS  # noqa: E402
from neurips26.reproduce._harness import tally, verdict_counts  # noqa: E402
from neurips26.reproduce._pinning import pinned_environ  # noqa: E402
from neurips26.reproduce._references import compare, jobs_of  # noqa: E402


def refresh(slug: str, dest: pathlib.Path, jobs: int | None, check: bool = False) -> tuple[float, str]:
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    env.update(pinned_environ(threads=2) or {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"})
    reference = json.loads((dest / f"{slug}.json").read_text()) if check else None
    with tempfile.TemporaryDirectory(prefix=f"refresh-{slug}-") as out:
        cmd = [sys.executable, "-m", "neurips26.cli", "run", slug, "--quick", "--seed", "0", "--out", out]
        if jobs:
            cmd += ["--jobs", str(jobs)]
        elif reference and jobs_of(reference):
            cmd += ["--jobs", str(jobs_of(reference))]  # as the reference was made
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        produced = pathlib.Path(out) / slug / "results.json"
        if proc.returncode != 0 or not produced.exists():
            tail = (proc.stdout + proc.stderr)[-2000:]
            return wall, f"FAILED (exit {proc.returncode}):\n{tail}"
        result = json.loads(produced.read_text())
        if check:
            problems = compare(reference, result)
            if problems:
                return wall, "DIFFERS from its reference:\n    " + "\n    ".join(problems[:20])
            return wall, f"matches its reference, run {result['wall_s']:.0f} s"
        dest.mkdir(parents=True, exist_ok=True)
        tmp = dest / f".{slug}.json.tmp"
        tmp.write_text(json.dumps(result, indent=1, sort_keys=False) + "\n")
        os.replace(tmp, dest / f"{slug}.json")
        held, tested = tally(result["claims"])
        counts = ", ".join(f"{n} {v}" for v, n in verdict_counts(result["claims"]).items() if n)
        return wall, f"{held}/{tested} claims held ({counts or 'no claims'}), run {result['wall_s']:.0f} s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("slugs", nargs="*", help="experiments to rerun (default: all registered)")
    parser.add_argument("--jobs", type=int, default=None, help="passed to `neurips26 run --jobs`")
    parser.add_argument("--dest", type=pathlib.Path, default=ROOT / "results" / "quick")
    parser.add_argument("--check", action="store_true",
                        help="compare each rerun with its committed reference instead of replacing it")
    args = parser.parse_args(argv)
    unknown = [s for s in args.slugs if s not in EXPERIMENTS]
    if unknown:
        parser.error(f"unknown experiment(s) {unknown}; registered: {sorted(EXPERIMENTS)}")
    slugs = args.slugs or list(EXPERIMENTS)
    if args.check and (missing := [s for s in slugs if not (args.dest / f"{s}.json").exists()]):
        parser.error(f"--check: no committed reference for {missing} in {args.dest}")
    failed = 0
    for slug in slugs:
        wall, line = refresh(slug, args.dest, args.jobs, check=args.check)
        failed += line.startswith(("FAILED", "DIFFERS"))
        print(f"{slug:28s} {wall:7.1f} s  {line}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
