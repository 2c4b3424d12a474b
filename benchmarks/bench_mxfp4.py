"""MXFP4 quantize / dequantize throughput: ours (native C, compiled and eager) against torchao's MX
reference and a same-run ``clone()`` of the input (the memory-bandwidth yardstick), on the CPU.

A 4096×4096 float32 and bfloat16 tensor; GB/s counts the input's bytes (quantize reads them,
dequantize writes them back in the input's dtype, clone does both); "of clone" is the clone's
time over ours, "of copy_" the same for a copy into a preallocated tensor. A fresh 64 MiB
clone pays the kernel's page faults (glibc maps allocations above 32 MiB anew each time), a
32 MiB one reuses freed memory, so the copy_ column is the memory-bandwidth yardstick. Best of 5 after a warm-up (the compile is timed apart), every call starting
from cold caches (a 256 MiB scratch buffer is rewritten before each), so that every row, the
clone included, reads its input from memory: a 32 MiB bf16 tensor otherwise stays in a large
last-level cache for the clone. Writes a Markdown table to --out.
"""

from __future__ import annotations

import argparse
import logging
import platform
import time
import warnings

import torch

from neurips26._atomic import atomic_write_text
from neurips26.compression import mxfp4
from neurips26.compression.mxfp4 import compile_available, native_available, quantize_mxfp4

_SCRATCH: dict = {}


def flush_caches(device: torch.device) -> None:
    if device.type not in _SCRATCH:
        _SCRATCH[device.type] = torch.zeros(64 * 2**20, device=device)  # 256 MiB: above any cache level
    _SCRATCH[device.type].add_(1.0)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def best_cold(fn, repeats: int, device: torch.device = torch.device("cpu")) -> float:
    """The best wall time of ``repeats`` calls of ``fn`` after one warm-up, caches flushed before each
    (on a GPU the device is synchronized around each call, so the time is the kernels')."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        flush_caches(device)
        _sync(device)
        t = time.perf_counter()
        fn()
        _sync(device)
        best = min(best, time.perf_counter() - t)
    return best


def torchao_mx():
    """torchao's ``to_mx`` / ``to_dtype`` and its FLOOR mode, or None; its import-time notes about
    CUDA kernels a CPU build cannot load and about enum registration are dropped."""
    class Drop(logging.Filter):
        def filter(self, record):
            msg = record.getMessage()
            return not ("Failed to load" in msg or "is an Enum subclass" in msg)

    drop = Drop()
    loggers = [logging.getLogger(n) for n in ("torchao", "torch.utils._pytree")]
    for lg in loggers:
        lg.addFilter(drop)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from torchao.prototype.mx_formats.config import ScaleCalculationMode
            from torchao.prototype.mx_formats.mx_tensor import to_dtype, to_mx
    except ImportError:
        return None
    finally:
        for lg in loggers:
            lg.removeFilter(drop)
    return to_mx, to_dtype, ScaleCalculationMode.FLOOR


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="benchmarks/RESULTS_mxfp4.md")
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--device", default="cpu", help="cpu (make bench) or cuda (the GPU goal: write to "
                    "benchmarks/RESULTS_mxfp4_gpu.md with --out)")
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: no CUDA device here")
    ao = torchao_mx()
    notes = []
    compiled = compile_available()
    t = time.perf_counter()
    native = device.type == "cpu" and native_available()  # builds the C kernels on a first use (or loads them from the cache)
    notes.append(f"native C path: {'available' if native else 'unavailable (' + mxfp4._native.why() + ')'}, "
                 f"build or cache load {time.perf_counter() - t:.2f} s")
    rows = []  # (dtype, implementation, operation, seconds, bytes)
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(args.size, args.size, generator=torch.Generator().manual_seed(0)).to(device, dtype)
        nbytes = x.numel() * x.element_size()
        name = str(dtype).removeprefix("torch.")

        def timed(who, op, fn):
            rows.append((name, who, op, best_cold(fn, args.repeats, device), nbytes))
            print(f"{name} {who} {op}: {rows[-1][3] * 1e3:.1f} ms", flush=True)

        timed("torch", "clone", x.clone)
        dst = torch.empty_like(x)
        timed("torch", "copy_ (preallocated)", lambda: dst.copy_(x))
        if native:
            timed("ours (native)", "quantize", lambda: quantize_mxfp4(x, impl="native"))
        if compiled:
            t = time.perf_counter()
            q = quantize_mxfp4(x, impl="compiled")
            notes.append(f"{name}: first compiled call (compile included) {time.perf_counter() - t:.1f} s")
            timed("ours (compiled)", "quantize", lambda: quantize_mxfp4(x, impl="compiled"))
        q = quantize_mxfp4(x, impl="eager")
        timed("ours (eager)", "quantize", lambda: quantize_mxfp4(x, impl="eager"))
        if ao is not None:
            to_mx, to_dtype, floor = ao
            scale, data = to_mx(x, torch.float4_e2m1fn_x2, 32, floor)
            assert torch.equal(data.view(torch.uint8).reshape(q.packed.shape), q.packed)
            assert torch.equal(scale.view(torch.uint8).reshape(q.scales.shape), q.scales)
            timed("torchao to_mx", "quantize", lambda: to_mx(x, torch.float4_e2m1fn_x2, 32, floor))
        if native:
            timed("ours (native)", "dequantize", lambda: q.dequantize(dtype))
        available, mxfp4._native.available = mxfp4._native.available, lambda: False  # the torch-ops decoder
        try:
            timed("ours (torch ops)" if device.type == "cpu" else "ours", "dequantize", lambda: q.dequantize(dtype))
        finally:
            mxfp4._native.available = available
        if ao is not None:
            timed("torchao to_dtype", "dequantize", lambda: to_dtype(data, scale, torch.float4_e2m1fn_x2, 32, dtype))
    clone = {d: t for d, who, op, t, _ in rows if op == "clone"}
    copy = {d: t for d, who, op, t, _ in rows if op.startswith("copy_")}
    where = (f"{platform.machine()}, torch {torch.__version__} ({torch.get_num_threads()} threads)" if device.type == "cpu"
             else f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}")
    lines = ["# MXFP4 quantize / dequantize throughput", "",
             f"Measured by `python benchmarks/bench_mxfp4.py --device {device.type}` on {where}; a {args.size}×{args.size} tensor, best of {args.repeats} after a warm-up, caches flushed "
             "before every call; GB/s of the "
             "input's bytes; \"of clone\" / \"of copy_\" is a same-run `clone()` / `copy_` into a preallocated "
             "tensor's time over the row's (a fresh 64 MiB clone pays page faults, a 32 MiB one does not). FLOOR "
             "scales; ours and "
             "torchao's bytes are checked equal in the run.", "",
             "| dtype | implementation | operation | ms | GB/s | of clone | of copy_ |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {d} | {who} | {op} | {t * 1e3:.1f} | {b / t / 1e9:.2f} | {clone[d] / t:.0%} | {copy[d] / t:.0%} |"
              for d, who, op, t, b in rows]
    if not compiled:
        notes.append("torch.compile is unavailable here: only the eager path was measured")
    if ao is None:
        notes.append("torchao is not installed: no torchao rows")
    lines += [""] + [f"- {n}" for n in notes] + [""]
    atomic_write_text(args.out, "\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
