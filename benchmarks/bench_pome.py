"""POME benchmarks: `pome_delta` (full vs randomized SVD) and whole-checkpoint CLI throughput.

Writes a Markdown table to --out. Sizes follow the issue: 4096x4096 and 4096x11008 deltas
(Llama-7B's attention and FFN shapes), and a generated ~1 GB checkpoint for the CLI.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from neurips26._atomic import atomic_open, atomic_write_text
from neurips26.compression import pome_delta
from neurips26.compression.safetensors_io import StreamingWriter

from _timing import best_of


def _low_rank_plus_noise(m: int, n: int, rank: int, seed: int) -> torch.Tensor:
    # Fine-tuning deltas have a decaying spectrum: a strong low-rank part plus noise.
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, rank, generator=g) @ torch.randn(rank, n, generator=g) / rank**0.5
    return a + 0.05 * torch.randn(m, n, generator=g)


def bench_delta(shapes, ks, repeats):
    rows = []
    for m, n in shapes:
        d = _low_rank_plus_noise(m, n, 64, seed=0)
        for k in ks:
            for method in ("full", "randomized"):
                if method == "full" and k != ks[0]:
                    # The full SVD costs the same whatever k; time it once per shape.
                    continue
                t = best_of(lambda: pome_delta(d, rank=k, svd_method=method), repeats)
                rows.append((f"{m}x{n}", k if method == "randomized" else "any", method, t))
    return rows


def make_checkpoint(folder: Path, total_bytes: float, seed: int) -> None:
    """A Llama-like checkpoint of bf16 tensors, written with our streaming writer."""
    g = torch.Generator().manual_seed(seed)
    h, f = 2048, 5504
    per_layer = [("self_attn.q_proj", (h, h)), ("self_attn.k_proj", (h, h)), ("self_attn.v_proj", (h, h)),
                 ("self_attn.o_proj", (h, h)), ("mlp.gate_proj", (f, h)), ("mlp.up_proj", (f, h)),
                 ("mlp.down_proj", (h, f))]
    layer_bytes = sum(a * b for _, (a, b) in per_layer) * 2
    n_layers = max(1, int(total_bytes // layer_bytes))
    layout = [(f"model.layers.{i}.{name}.weight", "BF16", shape) for i in range(n_layers) for name, shape in per_layer]
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_open(folder / "model.safetensors") as fh:
        w = StreamingWriter(fh, layout, {"format": "pt"})
        for name, _, shape in layout:
            w.write(name, (0.02 * torch.randn(shape, generator=g)).to(torch.bfloat16))
        w.close()


def perturb_checkpoint(src: Path, dst: Path, seed: int) -> None:
    from neurips26.compression.safetensors_io import SafetensorsFile

    g = torch.Generator().manual_seed(seed)
    dst.mkdir(parents=True, exist_ok=True)
    with SafetensorsFile(src / "model.safetensors") as f, atomic_open(dst / "model.safetensors") as fh:
        w = StreamingWriter(fh, [(n, i.dtype, i.shape) for n, i in f.tensors.items()], f.metadata)
        for name in f.tensors:
            t = f.read(name)
            u = torch.randn(t.shape[0], 16, generator=g) @ torch.randn(16, t.shape[1], generator=g)
            w.write(name, (t.float() + 1e-3 * u).to(t.dtype))
        w.close()


def bench_cli(total_bytes: float) -> tuple[float, float, float]:
    tmp = Path(tempfile.mkdtemp(prefix="pome-bench-"))
    try:
        make_checkpoint(tmp / "pre", total_bytes, seed=0)
        perturb_checkpoint(tmp / "pre", tmp / "ft", seed=1)
        size = (tmp / "ft" / "model.safetensors").stat().st_size
        exe = Path(sys.executable).parent / "neurips26"
        t = time.perf_counter()
        subprocess.run([str(exe), "pome", str(tmp / "pre"), str(tmp / "ft"), "-o", str(tmp / "out")], check=True,
                       stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - t
        return size / 1e6, wall, size / 1e6 / wall
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="benchmarks/RESULTS.md")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--checkpoint-gb", type=float, default=1.0)
    args = p.parse_args()

    delta_rows = bench_delta([(4096, 4096), (4096, 11008)], ks=[64, 256, 1024], repeats=args.repeats)
    mb, wall, mbps = bench_cli(args.checkpoint_gb * 1e9)

    lines = [
        "# Benchmarks",
        "",
        f"Measured by `make bench` on {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"torch {torch.__version__} ({torch.get_num_threads()} threads), {time.strftime('%Y-%m-%d')}.",
        "",
        "## `pome_delta` (float32; best of "
        f"{args.repeats} after a warm-up)",
        "",
        "| delta | k | SVD | seconds |",
        "|---|---|---|---|",
    ]
    lines += [f"| {s} | {k} | {m} | {t:.2f} |" for s, k, m, t in delta_rows]
    lines += [
        "",
        "`svd_method=\"auto\"` picks the randomized SVD when k + 10 <= min(m, n) / 4 and min(m, n) > 512.",
        "",
        "## `neurips26 pome` on a generated checkpoint (bf16, FFN up-projections edited at rank ratio 0.5)",
        "",
        "| checkpoint (MB) | wall (s) | throughput (MB/s) |",
        "|---|---|---|",
        f"| {mb:.0f} | {wall:.1f} | {mbps:.1f} |",
        "",
    ]
    atomic_write_text(args.out, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
