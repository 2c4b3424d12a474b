"""W4A8 decoding speed on a Qwen3-30B-A3B-shaped MoE (GPU; ``--tiny`` is a CPU smoke run).

The model is built from Qwen3-30B-A3B's published configuration with random weights in
bf16 (decoding speed does not depend on the weights' values, and nothing is downloaded):
48 layers, hidden 2048, 128 experts with 8 active, expert width 768, 32 query / 4 KV heads.
Variants, each on the same GPU in one run:

* ``bf16 grouped_mm``: transformers' default experts implementation (``grouped_mm``);
* ``bf16 eager``: transformers' eager experts (a Python loop over the hit experts);
* ``w4a8``: every routed expert replaced by ``neurips26.compression.w4a8.W4A8Experts``
  (MXFP4 weights folded into FP8, per-token FP8 activations, one grouped FP8 GEMM per
  projection on sm90+, the per-expert ``_scaled_mm`` loop elsewhere), FP8 cache;
* ``w4a8 + adapters r32`` / ``r64``: the same with rank-32 / 64 low-rank adapters on every
  expert (two grouped bf16 matmuls per projection);
* ``w4a8 packed mxfp4``: 4.25-bit storage, the routed experts unfolded to FP8 per call.

Reported: greedy decode tokens/s at each batch (a one-token generate, the prefill, timed apart and taken out),
prefill ms, GPU memory (allocated after conversion, and the peak), and a per-layer table: one
MoE layer's experts alone at 1 / 8 / 32 tokens, CUDA-graph timed where the forward can be
captured (µs per call). The table is rewritten after every variant, so a run cut short keeps
what it measured. Without a CUDA device (and without ``--tiny``) the script says so and exits 0.

    python benchmarks/bench_w4a8_decode.py --out benchmarks/RESULTS_w4a8.md          # GPU
    python benchmarks/bench_w4a8_decode.py --tiny --out /tmp/w4a8_tiny.md            # CPU smoke
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

# label, experts implementation (bf16) or W4A8 options
VARIANTS = [
    ("bf16 grouped_mm", dict(experts="grouped_mm")),
    ("bf16 eager", dict(experts="eager")),
    ("w4a8", dict(w4a8=dict(cache_fp8=True))),
    ("w4a8 + adapters r32", dict(w4a8=dict(cache_fp8=True, adapter_rank=32))),
    ("w4a8 + adapters r64", dict(w4a8=dict(cache_fp8=True, adapter_rank=64))),
    ("w4a8 packed mxfp4", dict(w4a8=dict(cache_fp8=False))),
]


def build(cfg: dict, device: str, experts: str = "grouped_mm", layers: int | None = None):
    import transformers as T

    cfg = dict(cfg, num_hidden_layers=layers or cfg["num_hidden_layers"])
    config = T.Qwen3MoeConfig(**cfg)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)  # built in bf16: 30B float32 parameters would not fit an 80 GB GPU
    try:
        with torch.device(device):
            model = T.Qwen3MoeForCausalLM(config).to(torch.bfloat16)
    finally:
        torch.set_default_dtype(previous)
    model.set_experts_implementation(experts)
    return model.eval()


def sync(device: str):
    if device == "cuda":
        torch.cuda.synchronize()


def prefill_and_decode(model, batch: int, prompt: int, new_tokens: int, device: str, repeats: int = 2):
    """(prefill seconds, decode tokens/s), best of ``repeats`` after a warm-up: the prefill is a
    generate of one token (the prompt's forward and the first token), the decode rate counts the
    other new_tokens − 1 tokens over the time a generate of new_tokens takes beyond it (nan where
    timing noise leaves no positive difference, as it can on a tiny CPU model)."""
    if new_tokens < 2:
        raise ValueError(f"--new-tokens must be at least 2 (one prefill token and one decoded), got {new_tokens}")
    g = torch.Generator(device="cpu").manual_seed(batch)
    ids = torch.randint(0, model.config.vocab_size, (batch, prompt), generator=g).to(device)
    kw = dict(do_sample=False, pad_token_id=0)

    def gen(n):
        sync(device)
        t = time.perf_counter()
        model.generate(ids, max_new_tokens=n, min_new_tokens=n, **kw)
        sync(device)
        return time.perf_counter() - t

    with torch.no_grad():
        gen(2)  # warm-up
        pre = min(gen(1) for _ in range(repeats))
        full = min(gen(new_tokens) for _ in range(repeats))
    rest = full - pre
    return pre, (batch * (new_tokens - 1) / rest if rest > 0 else float("nan"))


def layer_us(experts, tokens: int, hidden: int, num_experts: int, k: int, device: str, reps: int = 20):
    """µs per call of one experts module on ``tokens`` routed tokens: (µs, how) with how
    'graph' (a captured CUDA graph replayed), 'events' (CUDA events, not capturable) or 'cpu'."""
    g = torch.Generator(device="cpu").manual_seed(tokens)
    h = torch.randn(tokens, hidden, generator=g).to(device, torch.bfloat16)
    idx = torch.stack([torch.randperm(num_experts, generator=g)[:k] for _ in range(tokens)]).to(device)
    w = torch.softmax(torch.randn(tokens, k, generator=g), -1).to(device, torch.bfloat16)
    with torch.no_grad():
        for _ in range(3):
            experts(h, idx, w)
        if device != "cuda":
            t = time.perf_counter()
            for _ in range(reps):
                experts(h, idx, w)
            return (time.perf_counter() - t) / reps * 1e6, "cpu"
        torch.cuda.synchronize()
        how = "graph"
        try:
            graph = torch.cuda.CUDAGraph()
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                experts(h, idx, w)
                with torch.cuda.graph(graph, stream=stream):
                    experts(h, idx, w)
            torch.cuda.current_stream().wait_stream(stream)
            run = graph.replay
        except Exception:  # a host sync in the forward: not capturable
            torch.cuda.synchronize()
            how, run = "events", (lambda: experts(h, idx, w))
        run()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            run()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / reps * 1e3, how


def write(path: str | None, text: str) -> None:
    if not path:
        return
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)) or ".", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def render(args, device, rows, layer_rows, notes) -> str:
    name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    base = {b: t for (lab, b, _, t, _, _) in rows if lab == "bf16 grouped_mm"}
    lines = ["# W4A8 decoding, Qwen3-30B-A3B shape (random weights)" + (" — tiny CPU smoke run, not a measurement"
                                                                        if args.tiny else ""), "",
             f"device: {name}, torch {torch.__version__}, {args.layers or 'all'} layers, prompt {args.prompt}, "
             f"{args.new_tokens} new tokens, greedy, best of {args.repeats}; prefill = a generate of one token; decode = the other tokens over the rest of the time; "
             "'vs bf16' is against transformers' default (grouped_mm) experts in bf16.", "",
             "| variant | batch | prefill ms | decode tokens/s | vs bf16 grouped_mm | GiB allocated | GiB peak |",
             "|---|---|---|---|---|---|---|"]
    for lab, b, pre, tps, mem, peak in rows:
        ratio = f"{tps / base[b]:.2f}×" if b in base else "–"
        lines.append(f"| {lab} | {b} | {pre * 1e3:.1f} | {tps:.1f} | {ratio} | {mem:.1f} | {peak:.1f} |")
    if layer_rows:
        toks = sorted({t for _, t, _, _ in layer_rows})
        lines += ["", "One MoE layer's experts alone (µs per call; g = CUDA graph, e = CUDA events, c = CPU wall):", "",
                  "| experts | " + " | ".join(f"{t} tokens" for t in toks) + " |", "|---|" + "---|" * len(toks)]
        for lab in dict.fromkeys(lab for lab, _, _, _ in layer_rows):
            cells = {t: f"{us:.0f} {how[0]}" for l2, t, us, how in layer_rows if l2 == lab}
            lines.append(f"| {lab} | " + " | ".join(cells.get(t, "–") for t in toks) + " |")
    lines += [""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiny", action="store_true", help="a tiny config on the CPU: a smoke check, not a measurement")
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--prompt", type=int, default=32)
    ap.add_argument("--new-tokens", type=int, default=16)
    ap.add_argument("--layers", type=int, default=None, help="fewer decoder layers (default: the config's 48)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--variants", nargs="+", default=[v for v, _ in VARIANTS], help="a subset of the variants")
    ap.add_argument("--layer-tokens", type=int, nargs="*", default=[1, 8, 32], help="per-layer table token counts")
    ap.add_argument("--out", default=None, help="write a markdown table here (atomically, after every variant)")
    args = ap.parse_args(argv)
    unknown = set(args.variants) - {v for v, _ in VARIANTS}
    if unknown:
        ap.error(f"unknown variants {sorted(unknown)}; known: {[v for v, _ in VARIANTS]}")
    if not args.tiny and not torch.cuda.is_available():
        print("bench_w4a8_decode: skipped, it needs a CUDA device and this machine has none "
              "(run with --tiny for a CPU smoke check of the pipeline)")
        return 0
    from neurips26.compression.w4a8 import fp8_grouped_mm_supported, quantize_moe_w4a8

    device = "cpu" if args.tiny else "cuda"
    cfg = TINY if args.tiny else QWEN3_30B_A3B
    notes = []
    if device == "cuda":
        cap = torch.cuda.get_device_capability()
        if cap < (8, 9):
            print(f"bench_w4a8_decode: skipped, FP8 matmuls need compute capability 8.9 or newer, found {cap}")
            return 0
        notes.append(f"compute capability {cap}: W4A8 uses "
                     + ("one grouped FP8 GEMM per projection (torch._scaled_grouped_mm)"
                        if fp8_grouped_mm_supported(torch.device("cuda")) else "the per-expert _scaled_mm loop"))
    rows, layer_rows = [], []
    for label, spec in VARIANTS:
        if label not in args.variants:
            continue
        t0 = time.perf_counter()
        model = build(cfg, device, spec.get("experts", "grouped_mm"), args.layers)
        if "w4a8" in spec:
            quantize_moe_w4a8(model, **spec["w4a8"])
        sync(device)
        notes.append(f"{label}: built and converted in {time.perf_counter() - t0:.1f} s")
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        mem = torch.cuda.memory_allocated() / 2**30 if device == "cuda" else float("nan")
        experts = next(m for n, m in model.named_modules() if n.endswith(".experts"))  # the first MoE layer's
        for tokens in args.layer_tokens:
            us, how = layer_us(experts, tokens, cfg["hidden_size"], cfg["num_experts"], cfg["num_experts_per_tok"],
                               device)
            layer_rows.append((label, tokens, us, how))
            print(f"{label:22s} layer, {tokens:3d} tokens: {us:9.1f} µs ({how})", flush=True)
        for batch in args.batches:
            pre, tps = prefill_and_decode(model, batch, args.prompt, args.new_tokens, device, args.repeats)
            peak = torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else float("nan")
            rows.append((label, batch, pre, tps, mem, peak))
            print(f"{label:22s} batch {batch:3d}: prefill {pre * 1e3:8.1f} ms, decode {tps:9.1f} tokens/s "
                  f"(allocated {mem:.1f} GiB, peak {peak:.1f} GiB)", flush=True)
            write(args.out, render(args, device, rows, layer_rows, notes))
        del model, experts
        if device == "cuda":
            torch.cuda.empty_cache()
    text = render(args, device, rows, layer_rows, notes)
    write(args.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
