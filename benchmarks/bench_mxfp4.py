"""MXFP4 quantize / dequantize throughput: ours against torchao's MX reference (CPU eager).

A 4096×4096 float32 tensor (64 MiB); GB/s counts the float32 bytes read (quantize) or
written (dequantize); best of 3 after a warm-up. Writes a Markdown table to --out.
"""

from __future__ import annotations

import argparse
import platform
import warnings

import torch

from neurips26._atomic import atomic_write_text
from neurips26.compression import quantize_mxfp4

from _timing import best_of


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="benchmarks/RESULTS_mxfp4.md")
    ap.add_argument("--size", type=int, default=4096)
    args = ap.parse_args()
    x = torch.randn(args.size, args.size, generator=torch.Generator().manual_seed(0))
    gb = x.numel() * 4 / 1e9
    rows = []
    q = quantize_mxfp4(x)
    rows.append(("ours", "quantize", best_of(lambda: quantize_mxfp4(x))))
    rows.append(("ours", "dequantize", best_of(lambda: q.dequantize())))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from torchao.prototype.mx_formats.config import ScaleCalculationMode
            from torchao.prototype.mx_formats.mx_tensor import to_dtype, to_mx
    except ImportError:
        to_mx = None
    if to_mx is not None:
        scale, data = to_mx(x, torch.float4_e2m1fn_x2, 32, ScaleCalculationMode.FLOOR)
        rows.append(("torchao", "quantize", best_of(lambda: to_mx(x, torch.float4_e2m1fn_x2, 32,
                                                                   ScaleCalculationMode.FLOOR))))
        rows.append(("torchao", "dequantize", best_of(lambda: to_dtype(data, scale, torch.float4_e2m1fn_x2, 32,
                                                                        torch.float32))))
    for who, op, t in rows:
        print(f"{who} {op}: {t * 1e3:.0f} ms, {gb / t:.2f} GB/s")
    lines = ["# MXFP4 quantize / dequantize throughput", "",
             f"Measured by `make bench` on {platform.machine()}, torch {torch.__version__} ({torch.get_num_threads()} "
             f"threads); a {args.size}×{args.size} float32 tensor, best of 3 after a warm-up; GB/s of float32 data.", "",
             "| implementation | operation | ms | GB/s |", "|---|---|---|---|",
             *[f"| {who} | {op} | {t * 1e3:.0f} | {gb / t:.2f} |" for who, op, t in rows], ""]
    atomic_write_text(args.out, "\n".join(lines))


if __name__ == "__main__":
    main()
