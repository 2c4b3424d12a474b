"""Bench: tokens/s (wall, torch threads 2) and positions x layers recomputed per generated token for each
decoder at batch 1 and 16 on CPU, on the polestar quick model (trained and cached on first use) and its
held-out prompts. Usage: python benchmarks/bench_polestar.py [--out benchmarks/RESULTS_polestar.md]"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from _timing import best_of
from neurips26.dllm import decode, encode_batch
from neurips26.dllm.model import pretrained_dllm
from neurips26.dllm.tasks import TOKENIZER
from neurips26.reproduce.polestar import LABEL, SIZES, make_decoder, prompts, train_config

DECODERS = [("llada", 1), ("threshold", 0.9), ("factor", 1.0), ("elastic", 0.9), ("dllmcache", 0.25), ("pcache", 0.2), ("pcommit", 0.5),
            ("polestar", [0.5, 0.2])]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(Path(__file__).with_name("RESULTS_polestar.md")))
    args = ap.parse_args()
    torch.set_num_threads(2)
    S = SIZES[True]
    model, _ = pretrained_dllm(train_config(S))
    exs = prompts(S)
    G, blk = S["gen_length"], S["block_length"]
    lines = ["# polestar bench (CPU, torch threads 2, quick model; wall numbers depend on the machine's load)", "",
             "| decoder | knob | batch | tokens/s | forwards | pos x layers / token |", "|---|---|---|---|---|---|"]
    for family, knob in DECODERS:
        for bs in (1, 16):
            b = encode_batch(exs[:bs], G, with_answers=False)
            box = {}

            def run():
                commit, cache = make_decoder(family, knob, blk)
                box["r"] = decode(model, b["prompt_ids"], prompt_mask=b["prompt_mask"], gen_length=G,
                                  block_length=blk, commit=commit, cache=cache, mask_id=TOKENIZER.mask_id)

            t = best_of(run, repeats=3)
            r = box["r"]
            lines.append(f"| {LABEL[family]} | {knob} | {bs} | {bs * G / t:.0f} | {r.nfe} | {r.cost_per_token:.1f} |")
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
