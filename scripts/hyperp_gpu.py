"""The hyperp reproduction at full size on a GPU: the same experiment as ``neurips26 run hyperp``
(same tasks, claims, tables and figures), on ``--device`` with bfloat16 autocast, widths up to 1024
and depths up to 16. Writes ``OUT/hyperp/{results.json, report.md, *.png}`` in the same shape as
the CPU run (``quick`` is false; ``config`` records the sizes).

Usage: python scripts/hyperp_gpu.py --out results/gpu [--seed 0] [--steps 1000] [--resume]
       python scripts/hyperp_gpu.py --device cpu --tiny --out /tmp/hp   # a smoke test of the script
The tasks run in this process, one after the other, on the one device (``--resume`` continues an
interrupted run from its task cache).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from neurips26 import reproduce
from neurips26.reproduce import hyperp
from neurips26.reproduce._harness import run_experiment

FULL = dict(widths=[64, 128, 256, 512, 1024], depths=[2, 4, 8, 16], budgets=[1, 2, 4, 8], steps=1000, seq=128,
            batch=32, eval_batches=16, ks=[1, 2, 4, 8], aux=[1e-3, 1e-2, 1e-1], moe_width=256, moe_ffn=512,
            bootstrap=2000)
TINY = dict(widths=[32, 48], depths=[2, 3], budgets=[1, 2], steps=6, seq=16, batch=4, eval_batches=2, ks=[1, 2],
            aux=[1e-3, 1e-1], moe_width=32, moe_ffn=32, bootstrap=20)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--steps", type=int, default=FULL["steps"])
    ap.add_argument("--no-bf16", action="store_true", help="train in float32")
    ap.add_argument("--tiny", action="store_true", help="a few-second configuration (checks the script)")
    ap.add_argument("--resume", action="store_true")
    args = ap.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("no CUDA device here: pass --device cpu (slow) or run on a GPU machine")
    if args.steps < 10 and not args.tiny:
        raise SystemExit(f"--steps must be >= 10, got {args.steps}")
    size = dict(TINY) if args.tiny else dict(FULL, steps=args.steps)
    hyperp.DEVICE = args.device
    hyperp.AUTOCAST_BF16 = not args.no_bf16 and not args.device.startswith("cpu")
    hyperp.SIZES[False] = size
    res = run_experiment(reproduce.get("hyperp"), args.out, seed=args.seed, quick=False, resume=args.resume)
    for c in res["claims"]:
        print(json.dumps({k: c[k] for k in ("claim", "ours", "baseline", "holds")}))
    return res


if __name__ == "__main__":
    main()
