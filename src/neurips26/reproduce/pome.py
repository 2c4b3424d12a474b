"""Reproduction of POME: does editing the fine-tuning delta of the FFN up-projections
improve exact-match accuracy of a fine-tuned LM on held-out arithmetic word problems?

Offline pipeline: a tiny Llama (``transformers``, random init) is pretrained on
procedurally generated text (stories with numbers and arithmetic facts), then
fully fine-tuned on GSM8K-like word problems. Post-hoc edits of ΔW = W_ft − W_pre,
each with its hyper-parameter chosen on a validation split (never on test):

* POME (``neurips26.compression.apply_pome``): rank ratio × gain grid;
* truncated ΔW (top-k SVD, no equalization): rank ratio;
* DARE (random drop and rescale; ``peft.utils.merge_utils.random_pruning``): density;
* ΔW extrapolation (W_pre + t·ΔW): t.
"""

from __future__ import annotations

import copy
import random
import zlib
from typing import Callable

import numpy as np
import torch

from ..compression import DEFAULT_TARGETS, apply_pome, match_targets
from ..linalg import truncated_svd
from ._common import BOS, EOS, QA, CharTokenizer, exact_match, pad_batch, pyplot, qa_tensors, split_unique, train_lm
from ._harness import RunContext

NAMES = ["tom", "ann", "sam", "mia", "leo", "eva", "max", "ivy", "ben", "zoe", "joe", "kim"]
THINGS = ["apples", "pears", "books", "coins", "cards", "pens", "eggs", "shells", "stamps", "rocks"]


def _problem(rng: random.Random) -> QA:
    """A one- or two-step word problem over single-digit numbers, with its answer."""
    who, what = rng.choice(NAMES), rng.choice(THINGS)
    a, b = rng.randint(1, 9), rng.randint(1, 9)
    kind = rng.randrange(4)
    if kind == 0:
        text, ans = f"{who} has {a} {what}, gets {b}.", a + b
    elif kind == 1:
        a, b = max(a, b), min(a, b)
        text, ans = f"{who} has {a} {what}, gives {b} away.", a - b
    elif kind == 2:
        c = rng.randint(1, min(9, a + b))
        text, ans = f"{who} has {a} {what}, gets {b}, loses {c}.", a + b - c
    else:
        other = rng.choice([n for n in NAMES if n != who])
        text, ans = f"{who} has {a} {what}, {other} has {b}. both?", a + b
    return QA(f"q: {text} a: ", str(ans))


def _pretrain_text(rng: random.Random) -> str:
    """Generic text: little stories and arithmetic facts, no question/answer format."""
    def sentence() -> str:
        who, what = rng.choice(NAMES), rng.choice(THINGS)
        a, b = rng.randint(1, 9), rng.randint(1, 9)
        return rng.choice([
            f"{who} has {a} {what}.",
            f"{a} plus {b} is {a + b}.",
            f"{max(a, b)} minus {min(a, b)} is {max(a, b) - min(a, b)}.",
            f"the box holds {b} {what}.",
        ])

    return " ".join(sentence() for _ in range(3))


def _make_model(vocab: int, size: dict) -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=size["hidden"],
        intermediate_size=size["ffn"],
        num_hidden_layers=size["layers"],
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=160,
        tie_word_embeddings=False,
        pad_token_id=0,
        bos_token_id=BOS,
        eos_token_id=EOS,
    )
    return LlamaForCausalLM(cfg)


SIZES = {
    True: dict(hidden=64, ffn=256, layers=2, pretrain_steps=500, finetune_steps=300, batch=32, seeds=3,
               n_train=3000, n_val=300, n_test=500),
    False: dict(hidden=128, ffn=384, layers=4, pretrain_steps=1500, finetune_steps=600, batch=48, seeds=5,
                n_train=8000, n_val=500, n_test=1000),
}
ALL_LINEAR = ("*self_attn.*_proj.weight", "*mlp.*_proj.weight")
POME_RANK_RATIOS = (0.1, 0.25, 0.5, 0.75)
POME_GAINS = (0.75, 1.0, 1.5, 2.0, 3.0)
TRUNC_RANK_RATIOS = (0.1, 0.25, 0.5, 0.75)
DARE_DENSITIES = (0.1, 0.3, 0.5, 0.7, 0.9)
EXTRAPOLATE_FACTORS = (0.5, 0.75, 1.25, 1.5, 2.0, 3.0)


def _edited(pre: dict, ft: dict, fn: Callable[[str, torch.Tensor], torch.Tensor]) -> dict:
    """ft with every target tensor replaced by pre + fn(name, ΔW)."""
    selected = match_targets(DEFAULT_TARGETS)
    return {k: (pre[k] + fn(k, v - pre[k]) if selected(k) else v) for k, v in ft.items()}


def _truncate(delta: torch.Tensor, ratio: float) -> torch.Tensor:
    k = max(1, round(ratio * min(delta.shape)))
    u, s, vh = truncated_svd(delta, k, method="full")
    return (u * s) @ vh


def _dare(delta: torch.Tensor, density: float, gen_seed: int) -> torch.Tensor:
    from peft.utils.merge_utils import random_pruning

    # peft draws its mask from the global RNG; fork it so DARE is seeded and repeatable.
    with torch.random.fork_rng():
        torch.manual_seed(gen_seed)
        return random_pruning(delta, density=density, rescale=True)


METHODS = ("finetuned", "pome", "truncated", "dare", "extrapolate", "pome_all_linear")


def run(ctx: RunContext) -> None:
    size = SIZES[ctx.quick]
    ctx.config.update(size)
    ctx.config.update(
        targets=list(DEFAULT_TARGETS), all_linear_targets=list(ALL_LINEAR), pome_rank_ratios=list(POME_RANK_RATIOS), pome_gains=list(POME_GAINS),
        trunc_rank_ratios=list(TRUNC_RANK_RATIOS), dare_densities=list(DARE_DENSITIES),
        extrapolate_factors=list(EXTRAPOLATE_FACTORS), pome_scale="fro",
    )
    raw = _run(ctx, size)
    summary = summarize(raw)
    metrics(ctx, raw, summary)
    claims(ctx, raw, summary)
    tables(ctx, raw, summary, size)
    plots(ctx, raw, summary)


def _run(ctx: RunContext, size: dict) -> dict:
    """One pretraining (from the run seed), then per fine-tuning seed (``ctx.seed``, ``ctx.seed + 1``, ...;
    one task of ``ctx.map`` each) the fine-tuned model and every post-hoc edit with its hyper-parameter
    chosen on validation. Returns test accuracies per method and seed, the choices, POME's validation
    grid and the loss curves."""
    tasks = [dict(run_seed=ctx.seed, finetune_seed=ctx.seed + s, size=dict(size)) for s in range(size["seeds"])]
    outs = ctx.map(finetune_and_edit, tasks, description=f"fine-tune and edit ({size['seeds']} seeds)")
    test_acc = {m: [o["test"][m] for o in outs] for m in METHODS}
    chosen = {m: [o["chosen"][m] for o in outs] for m in METHODS[1:]}
    pome_grid = np.mean([np.array(o["pome_val"]) for o in outs], axis=0)
    first = outs[0]
    return {"test_acc": test_acc, "chosen": chosen, "pome_grid": pome_grid, "ft_curves": [o["curve"] for o in outs],
            "pre_losses": first["pre_losses"], "acc_pretrained": first["acc_pretrained"],
            "n_params": first["n_params"], "split_sizes": tuple(first["split_sizes"]),
            "finetune_seeds": [t["finetune_seed"] for t in tasks]}


_PRETRAINED: dict = {}  # (run seed, size) -> data and pretrained base: a pure function of its key


def _pretrained(run_seed: int, size: dict) -> dict:
    """The data splits and the pretrained base model of run seed ``run_seed``: one W_pre for every
    fine-tuning seed, as in the paper. Computed once per process (every fine-tuning task of a run
    needs it; it depends only on its arguments, so a worker process that computes it again gets the
    same model)."""
    key = (run_seed, tuple(sorted(size.items())))
    if key in _PRETRAINED:
        return _PRETRAINED[key]
    tok = CharTokenizer()
    rng = random.Random(run_seed)
    problems = [_problem(rng) for _ in range(6 * (size["n_train"] + size["n_val"] + size["n_test"]))]
    train, val, test = split_unique(problems, [size["n_train"], size["n_val"], size["n_test"]], rng)
    val_t, test_t = qa_tensors(tok, val), qa_tensors(tok, test)
    train_ids, train_labels = qa_tensors(tok, train)

    torch.manual_seed(run_seed)
    base = _make_model(tok.vocab_size, size)
    pre_rng = random.Random(run_seed + 1)

    def pretrain_batch(step: int):
        seqs = [[BOS] + tok.encode(_pretrain_text(pre_rng)) + [EOS] for _ in range(size["batch"])]
        ids = pad_batch(seqs)
        return ids, ids.masked_fill(ids == 0, -100)

    pre_losses = train_lm(base, pretrain_batch, size["pretrain_steps"], lr=3e-3, description="pretrain")
    out = {"base": base, "pre_state": {k: v.detach().clone() for k, v in base.state_dict().items()},
           "data": {"train": (train_ids, train_labels), "val": val_t, "test": test_t},
           "pre_losses": pre_losses, "acc_pretrained": exact_match(base, *test_t),
           "n_params": sum(p.numel() for p in base.parameters()), "split_sizes": [len(train), len(val), len(test)]}
    _PRETRAINED.clear()  # keep one base model in memory
    _PRETRAINED[key] = out
    return out


def finetune_and_edit(task: dict) -> dict:
    """One task: fine-tune a copy of the run's pretrained base with seed ``task["finetune_seed"]``,
    then edit its delta with every method, each hyper-parameter chosen on validation. Returns the
    loss curve, each method's test accuracy and choice, POME's validation accuracy over its grid
    (rank ratio × gain), and the pretraining's figures (the same in every task of a run)."""
    size, seed = task["size"], task["finetune_seed"]
    pre = _pretrained(task["run_seed"], size)
    base, pre_state, data = pre["base"], pre["pre_state"], pre["data"]
    train_ids, train_labels = data["train"]
    val_t, test_t = data["val"], data["test"]
    model = copy.deepcopy(base)
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)

    def ft_batch(step: int):
        idx = torch.randint(0, len(train_ids), (size["batch"],), generator=generator)
        return train_ids[idx], train_labels[idx]

    curve = train_lm(model, ft_batch, size["finetune_steps"], lr=2e-3, description=f"fine-tune seed {seed}")
    ft_state = {k: v.detach().clone() for k, v in model.state_dict().items()}

    def score(state: dict, split) -> float:
        model.load_state_dict(state)
        return exact_match(model, *split)

    test = {"finetuned": score(ft_state, test_t)}
    chosen = {}

    def select(candidates: dict) -> tuple[object, float, dict]:
        """The candidate with the best validation accuracy (first one on ties), its test
        accuracy, and every candidate's validation accuracy."""
        val_scores = {c: score(st(), val_t) for c, st in candidates.items()}
        best = max(val_scores, key=val_scores.get)
        return best, score(candidates[best](), test_t), val_scores

    def pome_grid_candidates(targets) -> dict:
        return {
            (r, gn): (lambda r=r, gn=gn: apply_pome(pre_state, ft_state, targets=targets, rank_ratio=r, gain=gn,
                                                    scale="fro"))
            for r in POME_RANK_RATIOS for gn in POME_GAINS
        }

    best, test["pome"], pome_val = select(pome_grid_candidates(DEFAULT_TARGETS))
    chosen["pome"] = list(best)

    # Not the paper's default: every linear layer of attention and MLP, same grid.
    best, test["pome_all_linear"], _ = select(pome_grid_candidates(ALL_LINEAR))
    chosen["pome_all_linear"] = list(best)

    chosen["truncated"], test["truncated"], _ = select(
        {r: (lambda r=r: _edited(pre_state, ft_state, lambda k, d: _truncate(d, r))) for r in TRUNC_RANK_RATIOS})

    chosen["dare"], test["dare"], _ = select({
        p: (lambda p=p: _edited(pre_state, ft_state, lambda k, d: _dare(d, p, seed + zlib.crc32(k.encode()) % 997)))
        for p in DARE_DENSITIES
    })

    chosen["extrapolate"], test["extrapolate"], _ = select(
        {t: (lambda t=t: _edited(pre_state, ft_state, lambda k, d: t * d)) for t in EXTRAPOLATE_FACTORS})
    grid = [[pome_val[(r, gn)] for gn in POME_GAINS] for r in POME_RANK_RATIOS]
    return {"curve": curve, "test": test, "chosen": chosen, "pome_val": grid, "pre_losses": pre["pre_losses"],
            "acc_pretrained": pre["acc_pretrained"], "n_params": pre["n_params"], "split_sizes": pre["split_sizes"]}


def summarize(raw) -> dict:
    """Mean and standard deviation over seeds of every method's test accuracy."""
    test_acc = raw["test_acc"]
    return {"means": {m: float(np.mean(v)) for m, v in test_acc.items()},
            "stds": {m: float(np.std(v)) for m, v in test_acc.items()}}


def metrics(ctx: RunContext, raw, summary) -> None:
    test_acc, means, stds = raw["test_acc"], summary["means"], summary["stds"]
    for m in METHODS:
        ctx.metric(f"acc_{m}", means[m])
        ctx.metric(f"acc_{m}_std", stds[m])
        ctx.metric(f"acc_{m}_per_seed", test_acc[m])
    paired = [p - f for p, f in zip(test_acc["pome"], test_acc["finetuned"])]
    ctx.metric("pome_minus_finetuned_per_seed", paired)
    ctx.metric("acc_pretrained", raw["acc_pretrained"])
    ctx.metric("pome_gain_points", 100 * (means["pome"] - means["finetuned"]))
    ctx.metric("chosen", {m: v for m, v in raw["chosen"].items()})
    ctx.metric("n_params", raw["n_params"])
    ctx.metric("pretrain_final_loss", float(np.mean(raw["pre_losses"][-20:])))
    ctx.metric("finetune_final_loss", float(np.mean([np.mean(c[-20:]) for c in raw["ft_curves"]])))
    ctx.metric("pome_val_grid", raw["pome_grid"].tolist())
    ctx.metric("finetune_seeds", raw["finetune_seeds"])


def claims(ctx: RunContext, raw, summary) -> None:
    """Both claims paired over the fine-tuning seeds of one pretrained model: on each seed, POME and the
    baseline edit the same fine-tuned weights and are scored on the same test problems."""
    acc, means = raw["test_acc"], summary["means"]
    n = len(acc["pome"])
    ctx.compare(
        "POME improves exact-match test accuracy over the fine-tuned model (paper: +2.5 points on GSM8K), "
        f"paired over {n} fine-tuning seeds",
        acc["pome"], acc["finetuned"], better="higher",
    )
    best_base = max(("truncated", "dare", "extrapolate"), key=means.get)
    ctx.compare(
        f"POME beats the best other post-hoc edit of the delta ({best_base}, best mean over seeds), "
        f"paired over {n} fine-tuning seeds",
        acc["pome"], acc[best_base], better="higher",
    )


def tables(ctx: RunContext, raw, summary, size) -> None:
    means, stds, chosen = summary["means"], summary["stds"], raw["chosen"]
    n_train, n_val, n_test = raw["split_sizes"]
    ctx.text(
        f"Tiny Llama ({raw['n_params'] / 1e6:.2f} M parameters, {size['layers']} layers), pretrained "
        f"{size['pretrain_steps']} steps on procedural text, fine-tuned {size['finetune_steps']} steps on "
        f"{n_train} word problems, {size['seeds']} fine-tuning seeds. Exact match on {n_test} held-out "
        f"problems; every method's hyper-parameter chosen on {n_val} validation problems. Edits touch the "
        "FFN up-projections only (the paper's default), for every method except `pome_all_linear`, which "
        "applies POME to every attention and MLP projection."
    )
    ctx.table(
        f"Test exact-match accuracy (%), mean ± std over {len(raw['finetune_seeds'])} fine-tuning seeds "
        f"{raw['finetune_seeds']}",
        ["method", "accuracy (mean ± std)", "per seed", "chosen on validation (per seed)"],
        [(m, f"{100 * means[m]:.1f} ± {100 * stds[m]:.1f}", ", ".join(f"{100 * a:.1f}" for a in raw["test_acc"][m]),
          chosen.get(m, "-")) for m in METHODS]
        + [("pretrained (no fine-tuning)", f"{100 * raw['acc_pretrained']:.1f}", "-", "-")],
    )


def plots(ctx: RunContext, raw, summary) -> None:
    plt = pyplot()
    methods, means, stds = list(METHODS), summary["means"], summary["stds"]
    grid, ft_curves, pre_losses = raw["pome_grid"], raw["ft_curves"], raw["pre_losses"]

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.bar(methods, [100 * means[m] for m in methods], yerr=[100 * stds[m] for m in methods], capsize=4,
           color=["#888", "#c33", "#48a", "#4a8", "#a84", "#e77"], alpha=0.75)
    for i, m in enumerate(methods):  # every seed as a point: the claims pair them
        seeds = raw["test_acc"][m]
        ax.plot(i + np.linspace(-0.2, 0.2, len(seeds)), [100 * a for a in seeds], "k.", ms=5)
    ax.tick_params(axis="x", labelsize=7)
    ax.set_ylabel("test exact match (%)")
    ax.set_title("POME vs post-hoc baselines (dots: one fine-tuning seed each)", fontsize=9)
    ctx.figure(fig, "accuracy", "Test exact-match accuracy: bars mean ± std over fine-tuning seeds, dots one seed each.")
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(5, 3.5))
    im = ax.imshow(100 * grid, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(POME_GAINS)), [str(g) for g in POME_GAINS])
    ax.set_yticks(range(len(POME_RANK_RATIOS)), [str(r) for r in POME_RANK_RATIOS])
    ax.set_xlabel("gain (× RMS of kept singular values)")
    ax.set_ylabel("rank ratio")
    for i in range(grid.shape[0]):
        for j in range(grid.shape[1]):
            ax.text(j, i, f"{100 * grid[i, j]:.1f}", ha="center", va="center", color="w", fontsize=8)
    fig.colorbar(im, label="validation exact match (%)")
    ax.set_title(f"POME validation grid (fine-tuned: {100 * means['finetuned']:.1f}% test)")
    ctx.figure(fig, "pome_grid", "POME validation accuracy over rank ratio and gain, averaged over seeds.")
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.plot(pre_losses, label="pretrain", color="#888")
    for seed, c in zip(raw["finetune_seeds"], ft_curves):
        ax.plot(range(len(pre_losses), len(pre_losses) + len(c)), c, label=f"fine-tune seed {seed}", lw=0.8)
    ax.set(xlabel="step", ylabel="loss", yscale="log")
    ax.legend(fontsize=7)
    ctx.figure(fig, "loss", "Training loss: pretraining, then answer-only fine-tuning.")
    plt.close(fig)
