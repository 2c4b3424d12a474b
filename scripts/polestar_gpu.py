"""Polestar on a GPU (not run in CI; fits 10 minutes on one H100): train a ~30M-parameter bidirectional
Llama dLLM on the generated tasks for ``--minutes`` in bf16 autocast, then the decoder sweep at
``--gen-length`` (default 256) with tokens/s; writes benchmarks/RESULTS_polestar_gpu.md.

``--model-path DIR`` instead runs the commit rules (NoCache) on a local LLaDA/Dream checkpoint loaded with
``AutoModel.from_pretrained(DIR, trust_remote_code=True)`` and its tokenizer (nothing is downloaded; such a
checkpoint was not available here, so that path is untested).

Usage: python scripts/polestar_gpu.py [--device cuda] [--minutes 5] [--gen-length 256] [--block-length 32]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from neurips26._atomic import atomic_write_text
from neurips26.dllm import (DualCache, Factor, LowConfidence, NoCache, PolestarCache, PolestarCommit, Threshold,
                            decode, encode_batch, exact_match)
from neurips26.dllm.model import HELDOUT_N, ModelConfig, build_model, heldout_examples, llada_sft_loss
from neurips26.dllm.tasks import TASKS, TOKENIZER, make_examples

DECODERS = [("LLaDA 1 tok/step", lambda b: (LowConfidence(b), NoCache())),
            ("Fast-dLLM threshold 0.9 + dual", lambda b: (Threshold(0.9), DualCache())),
            ("Fast-dLLM factor 1 + dual", lambda b: (Factor(1.0), DualCache())),
            ("Polestar-Cache 0.2 + threshold 0.9", lambda b: (Threshold(0.9), PolestarCache(0.2))),
            ("Polestar-Commit 0.5 + dual", lambda b: (PolestarCommit(tau_low=0.5), DualCache())),
            ("Polestar 0.5 / 0.2", lambda b: (PolestarCommit(tau_low=0.5), PolestarCache(0.2)))]


def train(args, dev):
    cfg = ModelConfig(hidden_size=args.width, num_layers=args.layers, num_heads=args.width // 64,
                      intermediate_size=4 * args.width, max_positions=args.gen_length + 64)
    model = build_model(cfg).to(dev).train()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01, betas=(0.9, 0.98))
    held = {e.prompt for t in TASKS for e in heldout_examples(t, HELDOUT_N)}
    g = torch.Generator().manual_seed(0)
    t0, step, losses = time.perf_counter(), 0, []
    while time.perf_counter() - t0 < 60 * args.minutes:
        exs = [e for j, t in enumerate(TASKS) for e in make_examples(t, args.batch // len(TASKS), step * 7 + j)
               if e.prompt not in held]
        b = {k: v.to(dev) for k, v in encode_batch(exs, args.train_gen).items()}
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            loss = llada_sft_loss(model, b["prompt_ids"], b["prompt_mask"], b["answer_ids"], TOKENIZER.mask_id,
                                  None)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        losses.append(float(loss.detach()))
    n = sum(p.numel() for p in model.parameters())
    return model.eval(), dict(steps=step, params=n, final_loss=float(np.mean(losses[-20:])))


def sweep(model, args, dev, lines):
    exs = [e for t in TASKS for e in heldout_examples(t, args.prompts // len(TASKS))]
    for name, mk in DECODERS:
        correct, wall, toks, cost, nfe = [], 0.0, 0, [], []
        for i in range(0, len(exs), args.batch_decode):
            chunk = exs[i:i + args.batch_decode]
            b = encode_batch(chunk, args.gen_length, with_answers=False)
            commit, cache = mk(args.block_length)
            if dev.type == "cuda":
                torch.cuda.synchronize()
            r = decode(model, b["prompt_ids"].to(dev), prompt_mask=b["prompt_mask"].to(dev),
                       gen_length=args.gen_length, block_length=args.block_length, commit=commit, cache=cache,
                       mask_id=TOKENIZER.mask_id)
            if dev.type == "cuda":
                torch.cuda.synchronize()
            wall += r.wall_s
            toks += args.gen_length * len(chunk)
            correct += exact_match(r.tokens.cpu(), chunk).tolist()
            cost.append(r.cost_per_token)
            nfe += (args.gen_length / r.row_nfe.float()).tolist()
        lines.append(f"| {name} | {100 * np.mean(correct):.1f} | {np.mean(nfe):.2f} | {np.mean(cost):.0f} | "
                     f"{toks / wall:.0f} |")
        print(lines[-1], flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--minutes", type=float, default=5.0)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--train-gen", type=int, default=32)
    ap.add_argument("--gen-length", type=int, default=256)
    ap.add_argument("--block-length", type=int, default=32)
    ap.add_argument("--prompts", type=int, default=160)
    ap.add_argument("--batch-decode", type=int, default=16)
    ap.add_argument("--model-path", default=None)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "benchmarks" / "RESULTS_polestar_gpu.md"))
    args = ap.parse_args()
    k = len(TASKS)
    for bad, why in ((args.width < 64 or args.width % 64, f"--width must be a positive multiple of 64 (heads of 64), "
                                                          f"got {args.width}"),
                     (args.layers < 1, f"--layers must be >= 1, got {args.layers}"),
                     (args.batch < k, f"--batch must be >= {k} (one example per task per step), got {args.batch}"),
                     (args.prompts < k, f"--prompts must be >= {k} (one per task), got {args.prompts}"),
                     (args.prompts // k > HELDOUT_N, f"--prompts must be <= {k * HELDOUT_N}, got {args.prompts}"),
                     (args.block_length < 1 or args.gen_length % args.block_length,
                      f"--gen-length ({args.gen_length}) must be a multiple of --block-length ({args.block_length})"),
                     (not args.minutes > 0, f"--minutes must be > 0, got {args.minutes}")):
        if bad:
            raise SystemExit(f"error: {why}")
    dev = torch.device(args.device)
    if args.model_path:
        from transformers import AutoModel, AutoTokenizer

        model = AutoModel.from_pretrained(args.model_path, trust_remote_code=True, torch_dtype=torch.bfloat16).to(dev)
        tok = AutoTokenizer.from_pretrained(args.model_path, trust_remote_code=True)
        mask_id = getattr(model.config, "mask_token_id", None) or tok.mask_token_id
        ids = torch.tensor([tok("What is 12 + 30?")["input_ids"]], device=dev)
        for name, commit in (("LLaDA low-confidence", LowConfidence(args.block_length)),
                             ("Fast-dLLM threshold 0.9", Threshold(0.9)), ("Fast-dLLM factor 1", Factor(1.0)),
                             ("Polestar-Commit 0.5", PolestarCommit(tau_low=0.5))):
            r = decode(model, ids, gen_length=args.gen_length, block_length=args.block_length, commit=commit,
                       cache=NoCache(), mask_id=int(mask_id))
            print(name, r.nfe, "forwards:", tok.decode(r.tokens[0]))
        return
    model, meta = train(args, dev)
    lines = [f"# polestar on {torch.cuda.get_device_name() if dev.type == 'cuda' else 'cpu'}", "",
             f"Model: {meta['params'] / 1e6:.1f}M parameters, {meta['steps']} steps in {args.minutes} min "
             f"(bf16 autocast), final loss {meta['final_loss']:.3f}; gen_length {args.gen_length}, block "
             f"{args.block_length}, {args.prompts} held-out prompts, batch {args.batch_decode}.", "",
             "| decoder | accuracy % | tokens/forward | pos x layers / token | tokens/s |", "|---|---|---|---|---|"]
    sweep(model, args, dev, lines)
    atomic_write_text(args.out, "\n".join(lines) + "\n")  # an interrupted run leaves no half-written file


if __name__ == "__main__":
    main()
