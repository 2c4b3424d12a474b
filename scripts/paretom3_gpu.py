"""The math word-problem task of the paretom3 reproduction on a GPU: the same code as the experiment's full
run (``paretom3.math_run``: a Llama from a ``transformers`` config trained from scratch on generated
addition/subtraction and multiplication word problems, the two answer losses as the objectives), on a ~99 M
parameter configuration (``MATH_CONFIGS["gpu100m"]``: hidden 768, 12 layers, 12 heads, FFN 2560; no downloaded
weights). Every method gets the same budget in backward passes (ParetoM3 2 per step, LS 1, EPO/MGDA m = 2).

Usage: python scripts/paretom3_gpu.py --out results/gpu/paretom3_math.json [--seeds 1] [--rays 5] [--budget 2000]
       python scripts/paretom3_gpu.py --device cpu --tiny --out /tmp/pm3_math.json   # a smoke test of the script
       python scripts/paretom3_gpu.py --device cpu --config cpu --budget 3000 --n-train 2000 --n-test 300 \
           --batch 32 --merit-steps 20 --lr 0.15 --methods ParetoM3 --out results/cpu/paretom3-math-lr015.json
           # the full run's math task at another step size (a probe)
Writes one JSON file (through a temporary file and a rename): the settings and, per method, ray and seed, the
held-out exact match per family, the training losses, their alignment with the ray and (``--merit-steps``) u_alpha.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from neurips26._atomic import atomic_write_text
from neurips26.reproduce import paretom3

TINY = dict(config="tiny", budget=8, n_train=64, n_test=32, batch=8, rays=2, seeds=1, merit_steps=2)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--rays", type=int, default=5)
    ap.add_argument("--budget", type=int, default=2000, help="backward passes per run")
    ap.add_argument("--n-train", type=int, default=20000)
    ap.add_argument("--n-test", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=64, help="problems per family per step")
    ap.add_argument("--lr", type=float, default=paretom3.MATH_LR)
    ap.add_argument("--merit-steps", type=int, default=0, help="inner steps of u_alpha at the end (0: skip)")
    ap.add_argument("--methods", nargs="+", default=list(paretom3.MATH_METHODS), choices=paretom3.MATH_METHODS)
    ap.add_argument("--config", default="gpu100m", choices=sorted(paretom3.MATH_CONFIGS),
                    help="the model size (gpu100m: ~99 M parameters; cpu: the full run's)")
    ap.add_argument("--tiny", action="store_true", help="a few-second configuration (checks the script)")
    args = ap.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("no CUDA device here: pass --device cpu (slow) or run on a GPU machine")
    size = dict(config=args.config, budget=args.budget, n_train=args.n_train, n_test=args.n_test, batch=args.batch,
                rays=args.rays, seeds=args.seeds, merit_steps=args.merit_steps)
    if args.tiny:
        size = dict(TINY)
    for key in ("budget", "n_train", "n_test", "batch", "rays", "seeds"):
        if size[key] < (2 if key == "rays" else 1):
            raise SystemExit(f"--{key.replace('_', '-')} must be >= {2 if key == 'rays' else 1}, got {size[key]}")
    rays = paretom3._rays(size["rays"])
    ray_list = tuple(map(tuple, rays.tolist()))
    runs = []
    for method in args.methods:
        for k, r in enumerate(ray_list):
            for s in range(args.seed, args.seed + size["seeds"]):
                t = paretom3.MathTask(method, tuple(map(float, r)), ray_list, k, s, size["budget"], size["config"],
                                      size["n_train"], size["n_test"], size["batch"], lr=args.lr,
                                      merit_steps=size["merit_steps"], device=args.device)
                start = time.perf_counter()
                res = paretom3.math_run(t)
                res.update(method=method, ray=list(r), seed=s, wall_s=time.perf_counter() - start)
                runs.append(res)
                print(json.dumps({k2: res[k2] for k2 in ("method", "ray", "seed", "acc", "alignment", "diverged", "wall_s")}),
                      flush=True)
    n_params = sum(p.numel() for p in paretom3._math_model(40, paretom3.MATH_CONFIGS[size["config"]]).parameters())
    out = {"settings": dict(size, device=args.device, lr=args.lr, methods=args.methods, seed=args.seed,
                            model=paretom3.MATH_CONFIGS[size["config"]], parameters=n_params), "runs": runs}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out, json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
