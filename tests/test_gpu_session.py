"""scripts/gpu_session.sh: the prepared command for a lent GPU. Checked here on the CPU: its usage,
its refusal of unknown parts, and one part's tiny variant end to end (results and log under $OUT)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu_session.sh"
pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")


def run(*args, out=None):
    env = {**os.environ, "PYTHON": sys.executable}
    if out is not None:
        env["OUT"] = str(out)
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)


def test_without_parts_it_prints_its_usage_and_exits_2():
    proc = run()
    assert proc.returncode == 2 and "w4a8" in proc.stdout and "polestar" in proc.stdout and "--smoke" in proc.stdout


def test_an_unknown_part_is_refused_before_anything_runs(tmp_path):
    proc = run("w4a8", "bogus", out=tmp_path)
    assert proc.returncode == 2 and "unknown part 'bogus'" in proc.stderr
    assert not list(tmp_path.iterdir())


def test_the_mxfp4_part_runs_its_smoke_variant_and_writes_results_and_log(tmp_path):
    proc = run("--smoke", "mxfp4", out=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    table = (tmp_path / "RESULTS_mxfp4_gpu.md").read_text()
    assert "| float32 | ours (native) | quantize |" in table
    log = (tmp_path / "session.log").read_text()
    assert "== mxfp4: rc 0" in log and (tmp_path / "mxfp4.log").is_file()
