"""Reproduction: MXFP4 quantization of MoE models with load-aware low-rank compensation and
limited routing replay QAT.

Tiny Mixtral, Qwen3-MoE and DeepSeek-V3 models are built from configs by ``transformers``
(random init, nothing downloaded), pretrained briefly on the Python standard library's
docstrings (bytes), so that routing is meaningful and expert loads are skewed. Float32 is
the reference precision here (CPU); "bf16" in the metric names follows the issue. Then, on
held-out text, perplexity for:

* ``bf16``: the reference model;
* ``rtn``: experts MXFP4 round-to-nearest (FLOOR scales), no compensation;
* ``uniform``: plus the residual's rank-r SVD on every expert (r the same for all);
* ``loadaware``: the same total rank budget allocated by load (BF16 routing counts on
  calibration text) × residual spectrum, greedily (:func:`allocate_ranks`);
* ``qat`` / ``qat_replay``: adapters initialised by the load-aware compensation and trained
  to match the reference's next-token distributions (KL distillation on training text),
  routers frozen, without / with the BF16 routes replayed (the replay fraction of the steps
  is swept; the reported one is the fraction with the lowest perplexity).

* ``gptq``: the PTQ baseline a user would reach for, GPTQ from llm-compressor
  (``GPTQModifier``, scheme ``MXFP4A16``: MXFP4 weights in blocks of 32, activations kept),
  on the routed experts only, calibrated on the same calibration text; llm-compressor's own
  ``linearize_moe`` unfuses the 3-D expert parameters into nn.Linear modules for it, and
  the quantized weights are copied back into the fused layout for evaluation.

Routing agreement with the reference (exact top-k set match and Jaccard) on held-out tokens
for every variant.

Every architecture runs on several seeds (quick: 3, full: 5; seed ``--seed + i``: a fresh model,
pretraining order and QAT batches), and each comparison is decided over them, paired by seed,
with a 95% Student-t interval of the difference (``RunContext.compare``): the differences at stake
are a fraction of a percent of perplexity, so one run's sign is not evidence. The replay fraction
is picked on the calibration text (not on the held-out text it is then scored on).
"""

from __future__ import annotations

import copy
import math

import numpy as np
import torch

from neurips26.compression.moe_quant import (allocate_ranks, distill_adapters, margin_diagnostic, prepare_qat,
                                             residual_spectra)
from neurips26.moe import expert_loads, find_moe_blocks, record_routes, routing_agreement

from ._common import pyplot, stdlib_text
from ._harness import RunContext

SIZES = {
    True: dict(archs=("qwen3",), seeds=3, pretrain_steps=300, qat_steps=60, context=64, batch=16, eval_seqs=96,
               rank=4, fractions=(0.5, 1.0), width=64, experts=8),
    False: dict(archs=("mixtral", "qwen3", "deepseek"), seeds=5, pretrain_steps=800, qat_steps=200, context=64,
                batch=16, eval_seqs=256, rank=4, fractions=(0.25, 0.5, 1.0), width=64, experts=8),
}


def build(arch: str, width: int, experts: int, seed: int):
    import transformers as T

    common = dict(vocab_size=128, hidden_size=width, intermediate_size=2 * width, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    if arch == "mixtral":
        cfg = T.MixtralConfig(num_local_experts=experts, num_experts_per_tok=2, **common)
        cls = T.MixtralForCausalLM
    elif arch == "qwen3":
        cfg = T.Qwen3MoeConfig(num_experts=experts, num_experts_per_tok=2, moe_intermediate_size=width,
                               decoder_sparse_step=1, norm_topk_prob=True, **common)
        cls = T.Qwen3MoeForCausalLM
    elif arch == "deepseek":
        common["num_key_value_heads"] = 4
        cfg = T.DeepseekV3Config(n_routed_experts=experts, num_experts_per_tok=2, moe_intermediate_size=width,
                                 first_k_dense_replace=0, n_group=1, topk_group=1, q_lora_rank=None, kv_lora_rank=16,
                                 qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16, head_dim=8, n_shared_experts=1,
                                 **common)
        cls = T.DeepseekV3ForCausalLM
    else:
        raise ValueError(f"unknown architecture {arch!r}")
    torch.manual_seed(seed)
    model = cls(cfg)
    with torch.no_grad():  # DeepSeek-V3 initialises its router at zero: start every router with real logits
        for b in find_moe_blocks(model):
            if float(b.gate.weight.abs().max()) == 0:
                b.gate.weight.normal_(0, 0.02)
    return model


def text_splits(context: int):
    data = torch.tensor(list(stdlib_text()), dtype=torch.long)
    n = len(data)
    return data[: int(0.8 * n)], data[int(0.8 * n): int(0.9 * n)], data[int(0.9 * n):]  # train, calibration, test


def batches_from(data, context, batch, count, seed):
    generator = torch.Generator().manual_seed(seed)
    return [torch.stack([data[s: s + context]
                         for s in torch.randint(0, len(data) - context, (batch,), generator=generator).tolist()])
            for _ in range(count)]


def eval_batches(data, context, seqs):
    starts = torch.arange(0, len(data) - context, context)[:seqs]
    ids = torch.stack([data[s: s + context] for s in starts.tolist()])
    return list(ids.split(32))


@torch.no_grad()
def perplexity(model, batches) -> float:
    model.eval()
    losses = [float(model(ids, labels=ids).loss) for ids in batches]
    return math.exp(float(np.mean(losses)))


def pretrain(model, train, cfg, seed, track, desc):
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    model.train()
    for ids in track(batches_from(train, cfg["context"], cfg["batch"], cfg["pretrain_steps"], seed), desc):
        loss = model(ids, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    model.eval()


@torch.no_grad()
def routes_on(model, batches):
    """(top-k indices, router logits) per MoE block over ``batches``, from one pass."""
    blocks = find_moe_blocks(model)
    with record_routes(blocks) as log:
        for ids in batches:
            model(ids)
    return ({b.name: torch.cat(log.indices[b.name]) for b in blocks},
            {b.name: torch.cat(log.logits[b.name]) for b in blocks})


def agreement(ref, other) -> dict:
    scores = [routing_agreement(ref[name], other[name]) for name in ref]
    return {k: float(np.mean([s[k] for s in scores])) for k in ("exact", "jaccard")}


def gptq_mxfp4(model, calib_batches):
    """A copy of ``model`` whose routed experts carry llm-compressor's GPTQ MXFP4 weights
    (module docstring); routers, attention and shared experts stay as they are."""
    import contextlib
    import io
    import tempfile

    from datasets import Dataset
    from llmcompressor import oneshot
    from llmcompressor.modeling.moe.linearize import linearize_moe
    from llmcompressor.modifiers.quantization import GPTQModifier
    from loguru import logger
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    logger.disable("llmcompressor")
    linear = copy.deepcopy(model)
    with contextlib.redirect_stderr(io.StringIO()):
        linearize_moe(linear)
    ids = torch.cat(calib_batches, 0)
    data = Dataset.from_dict({"input_ids": ids.tolist(), "attention_mask": torch.ones_like(ids).tolist()})
    vocab = model.config.vocab_size
    # oneshot insists on a processor; the data is already token ids, so any tokenizer of the vocabulary will do
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({f"<{i}>": i for i in range(vocab)},
                                                                               unk_token="<0>")), pad_token="<0>")
    recipe = GPTQModifier(targets="Linear", scheme="MXFP4A16",
                          ignore=["lm_head", "re:.*mlp.gate$", "re:.*self_attn.*", "re:.*shared_expert.*"])
    with tempfile.TemporaryDirectory() as cfg_dir, contextlib.redirect_stderr(io.StringIO()):
        linear.config.save_pretrained(cfg_dir)  # oneshot reads the config back from the model's path
        linear.config._name_or_path = cfg_dir
        oneshot(model=linear, processor=tok, dataset=data, recipe=recipe, max_seq_length=ids.shape[1],
                num_calibration_samples=len(ids))
    out = copy.deepcopy(model)
    modules = dict(linear.named_modules())
    with torch.no_grad():
        for b in find_moe_blocks(out):
            experts = modules[f"{b.name}.experts"]
            inter = b.experts.down_proj.shape[2]
            mlps = [experts[e] for e in range(b.num_experts)]  # the list also holds its activation module
            for e, mlp in enumerate(mlps):  # fused layout: gate_up_proj (E, 2I, H) = [gate; up], down (E, H, I)
                b.experts.gate_up_proj[e, :inter].copy_(mlp.gate_proj.weight)
                b.experts.gate_up_proj[e, inter:].copy_(mlp.up_proj.weight)
                b.experts.down_proj[e].copy_(mlp.down_proj.weight)
    return out


def run_arch(arch, cfg, seed, track) -> dict:
    train, calib, test = text_splits(cfg["context"])
    model = build(arch, cfg["width"], cfg["experts"], seed)
    pretrain(model, train, cfg, seed, track, f"{arch}: pretraining")
    evals = eval_batches(test, cfg["context"], cfg["eval_seqs"])
    calib_batches = eval_batches(calib, cfg["context"], cfg["eval_seqs"])
    ref_routes, ref_logits = routes_on(model, evals)
    loads = {name: expert_loads(idx, cfg["experts"]) for name, idx in routes_on(model, calib_batches)[0].items()}
    spectra = residual_spectra(model)
    E, r = cfg["experts"], cfg["rank"]
    out = {"ppl_bf16": perplexity(model, evals)}
    skew = float(np.mean([float(l.max() / l.mean()) for l in loads.values()]))
    out["load_max_over_mean"] = skew

    def variant(ranks, init):
        m = copy.deepcopy(model)
        prepare_qat(m, ranks=ranks, init=init)
        return m

    def measure(m, key):
        """Perplexity and agreement of a variant; returns its router logits."""
        out[f"ppl_{key}"] = perplexity(m, evals)
        routes, logits = routes_on(m, evals)
        out[f"agree_{key}"] = agreement(ref_routes, routes)
        return logits

    rtn_logits = measure(variant(0, "residual"), "rtn")
    # the routing-consistency bound on the quantized model: which tokens it certifies
    k = find_moe_blocks(model)[0].top_k
    out["margin_rtn"] = {name: margin_diagnostic(ref_logits[name], rtn_logits[name], k) for name in ref_logits}
    measure(variant(r, "residual"), "uniform")
    load_ranks = {}
    for key, svals in spectra.items():
        block = key.rsplit(".", 1)[0]
        load_ranks[key] = allocate_ranks(svals, loads[block].tolist(), budget=E * r)
    out["loadaware_ranks"] = load_ranks
    measure(variant(load_ranks, "residual"), "loadaware")
    measure(gptq_mxfp4(model, calib_batches), "gptq")

    qat_batches = batches_from(train, cfg["context"], cfg["batch"], 20, seed + 7)
    with torch.no_grad(), record_routes(find_moe_blocks(model)) as log:
        for ids in qat_batches:
            model(ids)
    m = variant(load_ranks, "residual")
    distill_adapters(m, model, qat_batches, cfg["qat_steps"])
    measure(m, "qat")
    sweep = {}
    for fraction in cfg["fractions"]:
        m = variant(load_ranks, "residual")
        distill_adapters(m, model, qat_batches, cfg["qat_steps"], routes=log, replay_fraction=fraction)
        sweep[fraction] = (perplexity(m, calib_batches), perplexity(m, evals), agreement(ref_routes, routes_on(m, evals)[0]))
    # the fraction a user would pick: lowest perplexity on the calibration text (the held-out text only scores it)
    best = min(sweep, key=lambda f: sweep[f][0])
    out["ppl_qat_replay"], out["agree_qat_replay"] = sweep[best][1:]
    out["replay_fraction"] = best
    out["replay_sweep"] = {str(f): {"ppl_calib": c, "ppl": p, **a} for f, (c, p, a) in sweep.items()}
    return out


def arch_seed_task(task: dict) -> dict:
    """One architecture on one seed (a task of ``RunContext.map``)."""
    return run_arch(task["arch"], task["cfg"], task["seed"], lambda items, desc: items)


def mean_over_seeds(runs: list[dict]) -> dict:
    """The mean of every perplexity and agreement figure over seeds, with the perplexities' spread."""
    out = {}
    for k in VARIANTS:
        values = [r[f"ppl_{k}"] for r in runs]
        out[f"ppl_{k}"] = float(np.mean(values))
        out[f"ppl_{k}_sd"] = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
        if k != "bf16":
            out[f"agree_{k}"] = {m: float(np.mean([r[f"agree_{k}"][m] for r in runs])) for m in ("exact", "jaccard")}
    out["load_max_over_mean"] = float(np.mean([r["load_max_over_mean"] for r in runs]))
    out["replay_fractions"] = [r["replay_fraction"] for r in runs]
    return out


VARIANTS = ("bf16", "rtn", "gptq", "uniform", "loadaware", "qat", "qat_replay")


def run(ctx: RunContext) -> None:
    cfg = SIZES[ctx.quick]
    if cfg["seeds"] < 2:
        raise ValueError(f"moe-mxfp4 decides its claims over seeds: seeds must be >= 2, got {cfg['seeds']}")
    ctx.config.update({k: v for k, v in cfg.items() if k != "fractions"}, fractions=list(cfg["fractions"]),
                      seed_list=[ctx.seed + i for i in range(cfg["seeds"])],
                      mxfp4="FLOOR scales, blocks of 32", text="standard-library docstrings (bytes)",
                      claims="paired over seeds, 95% Student-t interval of the difference")
    tasks = [dict(arch=arch, seed=ctx.seed + i, cfg=cfg) for arch in cfg["archs"] for i in range(cfg["seeds"])]
    done = ctx.map(arch_seed_task, tasks, "architecture × seed")
    runs = {arch: [r for t, r in zip(tasks, done) if t["arch"] == arch] for arch in cfg["archs"]}
    ctx.metric("per_seed", runs)
    ctx.metric("mean", {arch: mean_over_seeds(rs) for arch, rs in runs.items()})
    claims(ctx, runs)
    tables(ctx, runs)
    plots(ctx, runs)


def claims(ctx: RunContext, runs: dict[str, list[dict]]) -> None:
    for arch, rs in runs.items():
        def ppl(key):
            return [r[f"ppl_{key}"] for r in rs]

        worst = max(d["measured_flip"] - d["predicted_flip"] for r in rs for d in r["margin_rtn"].values())
        ctx.claim(f"{arch}: the margin bound holds: measured flip rate ≤ predicted in every block and seed "
                  "(max measured − predicted; baseline 0)", worst, 0.0, worst <= 0.0)
        ctx.compare(f"{arch}: load-aware compensation beats uniform in perplexity at equal rank budget",
                    ppl("loadaware"), ppl("uniform"), better="lower")
        ctx.compare(f"{arch}: uniform low-rank compensation beats none (MXFP4 RTN) in perplexity",
                    ppl("uniform"), ppl("rtn"), better="lower")
        ctx.compare(f"{arch}: QAT with limited routing replay (fraction picked on calibration text) improves routing "
                    "agreement (Jaccard) over QAT without replay",
                    [r["agree_qat_replay"]["jaccard"] for r in rs], [r["agree_qat"]["jaccard"] for r in rs])
        ctx.compare(f"{arch}: QAT with limited routing replay improves perplexity over QAT without replay",
                    ppl("qat_replay"), ppl("qat"), better="lower")
        ctx.compare(f"{arch}: load-aware compensation (no training) beats GPTQ MXFP4 (llm-compressor) in perplexity",
                    ppl("loadaware"), ppl("gptq"), better="lower")
        ctx.compare(f"{arch}: QAT with limited routing replay beats GPTQ MXFP4 (llm-compressor) in perplexity",
                    ppl("qat_replay"), ppl("gptq"), better="lower")


def tables(ctx: RunContext, runs: dict[str, list[dict]]) -> None:
    means = {arch: mean_over_seeds(rs) for arch, rs in runs.items()}
    n = len(next(iter(runs.values())))
    ctx.table(f"Held-out perplexity (mean and standard deviation over {n} seeds) and routing agreement with the "
              "reference (Jaccard / exact top-k set, means)",
              ["architecture", "variant", "perplexity", "sd over seeds", "Jaccard", "exact set"],
              [(a, k, m[f"ppl_{k}"], m[f"ppl_{k}_sd"], m.get(f"agree_{k}", {"jaccard": 1.0})["jaccard"],
                m.get(f"agree_{k}", {"exact": 1.0})["exact"]) for a, m in means.items() for k in VARIANTS])
    ctx.table("Per seed: held-out perplexity of each variant",
              ["architecture", "seed", *VARIANTS],
              [(a, ctx.seed + i, *(r[f"ppl_{k}"] for k in VARIANTS)) for a, rs in runs.items() for i, r in enumerate(rs)])
    ctx.table("Replay fraction sweep (share of QAT steps with BF16 routes replayed; the fraction with the lowest "
              "calibration perplexity is the one reported)",
              ["architecture", "seed", "fraction", "calibration perplexity", "held-out perplexity", "Jaccard",
               "exact set"],
              [(a, ctx.seed + i, f, v["ppl_calib"], v["ppl"], v["jaccard"], v["exact"])
               for a, rs in runs.items() for i, r in enumerate(rs) for f, v in r["replay_sweep"].items()])
    ctx.table("Router-margin bound on the MXFP4 (RTN) model: tokens it cannot certify vs tokens whose top-k changed",
              ["architecture", "seed", "block", "predicted flip (bound)", "measured flip", "margin q10", "q50", "q90"],
              [(a, ctx.seed + i, name, d["predicted_flip"], d["measured_flip"], d["margin_q10"], d["margin_q50"],
                d["margin_q90"]) for a, rs in runs.items() for i, r in enumerate(rs) for name, d in r["margin_rtn"].items()])


def plots(ctx: RunContext, runs: dict[str, list[dict]]) -> None:
    plt = pyplot()
    keys = VARIANTS
    fig, axes = plt.subplots(1, len(runs), figsize=(5.5 * len(runs), 4), squeeze=False)
    for ax, (arch, rs) in zip(axes[0], runs.items()):
        m = mean_over_seeds(rs)
        x = np.arange(len(keys))
        ax.bar(x, [m[f"ppl_{k}"] for k in keys], color=["k", "tab:red", "tab:brown", "tab:orange", "tab:green",
                                                        "tab:blue", "tab:purple"], alpha=0.8)
        for i, k in enumerate(keys):  # each seed's value over its bar
            ax.plot(np.full(len(rs), x[i]), [r[f"ppl_{k}"] for r in rs], "o", color="0.2", ms=3, zorder=3)
        values = [r[f"ppl_{k}"] for r in rs for k in keys]
        ax.set_ylim(min(values) * 0.97, max(values) * 1.02)
        ax.set_xticks(x, keys)
        ax.set_title(f"{arch}: held-out perplexity, mean of {len(rs)} seeds (dots: each seed)")
        ax.set_ylabel("held-out perplexity (lower is better)")
        ax.axhline(m[f"ppl_{keys[0]}"], color="k", lw=0.8, ls=":")  # the unquantized reference
        ax.tick_params(axis="x", rotation=30)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
    ctx.figure(fig, "perplexity", "Held-out perplexity of the reference and of each MXFP4 variant (bars: mean over "
               "seeds; dots: the seeds).")
    plt.close(fig)
