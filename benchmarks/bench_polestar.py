"""Bench: tokens/s (wall, torch threads 2) and positions x layers recomputed per generated token for each
decoder at batch 1 and 16 on CPU, on the polestar quick model (trained and cached on first use) and its
held-out prompts, one configuration per decoder family of the reproduction (Elastic-Cache's sliding window:
beta = 4 leftmost masked positions, one block over the whole answer, as in the paper; threshold 0.9 inside the
window). Usage: python benchmarks/bench_polestar.py [--out benchmarks/RESULTS_polestar.md]"""

from __future__ import annotations

import argparse
import platform
from pathlib import Path

import torch

from _timing import best_of
from neurips26.dllm import decode, encode_batch
from neurips26.dllm.model import pretrained_dllm
from neurips26.dllm.tasks import TOKENIZER
from neurips26.reproduce._pinning import pin_numerics
from neurips26.reproduce.polestar import LABEL, SIZES, make_decoder, prompts, train_config

DECODERS = [("llada", 1), ("threshold", 0.9), ("factor", 1.0), ("elastic", 0.9), ("elastic_window", 4),
            ("dllmcache", 0.25), ("pcache", 0.2), ("pcommit", 0.5), ("polestar", [0.5, 0.2])]


def cpu_name() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(Path(__file__).with_name("RESULTS_polestar.md")))
    args = ap.parse_args()
    # pinned as `neurips26 run` is (AVX2 kernels, 2 threads): a checkpoint this script trains and caches is then
    # the one the reproduction trains, and the timings are those of the quick run's kernels
    pin_numerics()
    torch.set_num_threads(2)
    S = SIZES[True]
    model, _ = pretrained_dllm(train_config(S))
    exs = prompts(S)
    G = S["gen_length"]
    lines = [f"# polestar bench ({cpu_name()}, torch {torch.__version__}, {torch.get_num_threads()} threads; quick model, "
             f"gen length {G}, block {S['block_length']}; best of 3 after a warm-up; numerics pinned "
             "as in the quick run; wall numbers depend on the machine's load)", "",
             "| decoder | knob | batch | tokens/s | forwards | pos x layers / token |", "|---|---|---|---|---|---|"]
    for family, knob in DECODERS:
        for bs in (1, 16):
            b = encode_batch(exs[:bs], G, with_answers=False)
            box = {}

            def run():
                commit, cache, blk = make_decoder(family, knob, S["block_length"], G)
                box["r"] = decode(model, b["prompt_ids"], prompt_mask=b["prompt_mask"], gen_length=G,
                                  block_length=blk, commit=commit, cache=cache, mask_id=TOKENIZER.mask_id)

            t = best_of(run, repeats=3)
            r = box["r"]
            lines.append(f"| {LABEL[family]} | {knob} | {bs} | {bs * G / t:.0f} | {r.nfe} | {r.cost_per_token:.1f} |")
    out = Path(args.out)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(out)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
