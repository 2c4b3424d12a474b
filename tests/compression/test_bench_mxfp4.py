"""benchmarks/bench_mxfp4.py runs end to end on a small tensor and writes every row it promises."""

import runpy
import sys
from pathlib import Path

import pytest

from neurips26.compression.mxfp4 import compile_available, native_available

ROOT = Path(__file__).resolve().parents[2]


def test_bench_writes_the_table_with_the_copy_yardsticks(tmp_path, monkeypatch):
    out = tmp_path / "mx.md"
    monkeypatch.setattr(sys, "argv", ["bench_mxfp4.py", "--size", "64", "--repeats", "1", "--out", str(out)])
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(ROOT / "benchmarks" / "bench_mxfp4.py"), run_name="__main__")
    assert done.value.code == 0
    text = out.read_text()
    rows = [line.split(" | ") for line in text.splitlines() if line.startswith("| float") or line.startswith("| bfloat")]
    names = {(r[0].strip("| "), r[1], r[2]) for r in rows}
    for dtype in ("float32", "bfloat16"):
        assert {(dtype, "torch", "clone"), (dtype, "ours (eager)", "quantize"),
                (dtype, "ours (torch ops)", "dequantize")} <= names
        assert ((dtype, "ours (native)", "quantize") in names) == native_available()
        assert ((dtype, "ours (compiled)", "quantize") in names) == compile_available()
    clone_rows = [r for r in rows if r[2] == "clone"]
    assert all(r[5] == "100%" for r in clone_rows)  # each dtype's ratios are against its own clone
    assert "--device cpu" in text


def test_bench_refuses_cuda_without_a_gpu(monkeypatch, tmp_path):
    import torch
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    monkeypatch.setattr(sys, "argv", ["bench_mxfp4.py", "--device", "cuda", "--out", str(tmp_path / "x.md")])
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(ROOT / "benchmarks" / "bench_mxfp4.py"), run_name="__main__")
    assert done.value.code == 2 and not (tmp_path / "x.md").exists()
