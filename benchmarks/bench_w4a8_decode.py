"""W4A8 decoding speed on a Qwen3-30B-A3B-shaped MoE (GPU only).

The model is built from Qwen3-30B-A3B's published configuration with random weights in
bf16 (decoding speed does not depend on the weights' values, and nothing is downloaded):
48 layers, hidden 2048, 128 experts with 8 active, expert width 768, 32 query / 4 KV heads.
It measures greedy decoding (tokens per second, after a warm-up) at each batch size for

* bf16: transformers' own experts;
* w4a8: every routed expert replaced by ``neurips26.compression.w4a8.W4A8Experts``
  (MXFP4 weights folded into FP8, FP8 activations, ``torch._scaled_mm``), with the FP8
  cache (``cache_fp8=True``) and without it (4.25-bit storage, unfolded per call).

The reference is transformers' bf16 eager experts on the same GPU. Without a CUDA device
the script says so and exits 0; ``--tiny`` runs the same code on a tiny config on the CPU
(a smoke check of the pipeline, not a measurement).

    python benchmarks/bench_w4a8_decode.py --out benchmarks/RESULTS_w4a8.md
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import torch

QWEN3_30B_A3B = dict(vocab_size=151936, hidden_size=2048, intermediate_size=6144, num_hidden_layers=48,
                     num_attention_heads=32, num_key_value_heads=4, head_dim=128, num_experts=128,
                     num_experts_per_tok=8, moe_intermediate_size=768, decoder_sparse_step=1, norm_topk_prob=True,
                     max_position_embeddings=4096, rope_theta=1_000_000.0, rms_norm_eps=1e-6)
TINY = dict(QWEN3_30B_A3B, vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_experts=8, num_experts_per_tok=2,
            moe_intermediate_size=64)


def build(cfg: dict, device: str):
    import transformers as T

    config = T.Qwen3MoeConfig(**cfg)
    with torch.device(device):
        model = T.Qwen3MoeForCausalLM(config).to(torch.bfloat16)
    return model.eval()


def decode_speed(model, batch: int, prompt: int, new_tokens: int, device: str, repeats: int = 2) -> float:
    ids = torch.randint(0, model.config.vocab_size, (batch, prompt), device=device)
    kw = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        model.generate(ids, **dict(kw, max_new_tokens=4, min_new_tokens=4))  # warm-up
        best = float("inf")
        for _ in range(repeats):
            if device == "cuda":
                torch.cuda.synchronize()
            t = time.perf_counter()
            model.generate(ids, **kw)
            if device == "cuda":
                torch.cuda.synchronize()
            best = min(best, time.perf_counter() - t)
    return batch * new_tokens / best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiny", action="store_true", help="a tiny config on the CPU: a smoke check, not a measurement")
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--out", default=None, help="write a markdown table here (atomically)")
    args = ap.parse_args(argv)
    if not args.tiny and not torch.cuda.is_available():
        print("bench_w4a8_decode: skipped, it needs a CUDA device and this machine has none "
              "(run with --tiny for a CPU smoke check of the pipeline)")
        return 0
    from neurips26.compression.w4a8 import quantize_moe_w4a8

    device = "cpu" if args.tiny else "cuda"
    cfg = TINY if args.tiny else QWEN3_30B_A3B
    if device == "cuda":
        cap = torch.cuda.get_device_capability()
        if cap < (8, 9):
            print(f"bench_w4a8_decode: skipped, FP8 matmuls need compute capability 8.9 or newer, found {cap}")
            return 0
    rows = []
    for cache_fp8 in (None, True, False):  # None: the bf16 reference
        model = build(cfg, device)
        if cache_fp8 is not None:
            quantize_moe_w4a8(model, cache_fp8=cache_fp8)
        label = "bf16" if cache_fp8 is None else ("w4a8 (fp8 cache)" if cache_fp8 else "w4a8 (packed mxfp4)")
        mem = torch.cuda.memory_allocated() / 2**30 if device == "cuda" else float("nan")
        for batch in args.batches:
            tps = decode_speed(model, batch, args.prompt, args.new_tokens, device)
            rows.append((label, batch, tps, mem))
            print(f"{label:22s} batch {batch:3d}: {tps:10.1f} tokens/s  (weights on device {mem:.1f} GiB)", flush=True)
        del model
        if device == "cuda":
            torch.cuda.empty_cache()
    base = {b: t for (lab, b, t, _) in rows if lab == "bf16"}
    lines = ["# W4A8 decoding, Qwen3-30B-A3B shape (random weights)" + (" — tiny CPU smoke run" if args.tiny else ""),
             "", f"device: {torch.cuda.get_device_name() if device == 'cuda' else 'cpu'}, prompt {args.prompt}, "
             f"{args.new_tokens} new tokens, greedy, best of 2", "",
             "| variant | batch | tokens/s | vs bf16 | GiB on device |", "|---|---|---|---|---|"]
    lines += [f"| {lab} | {b} | {t:.1f} | {t / base[b]:.2f}× | {m:.1f} |" for lab, b, t, m in rows]
    text = "\n".join(lines) + "\n"
    if args.out:
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(args.out)) or ".", suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, args.out)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
