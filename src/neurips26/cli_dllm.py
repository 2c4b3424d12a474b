"""``neurips26 dllm train``: train and cache the small masked-diffusion LM of :mod:`neurips26.dllm`.

The checkpoint is cached under ``$NEURIPS26_CACHE`` (default ``~/.cache/neurips26``) keyed by the hash of its
:class:`~neurips26.dllm.model.TrainConfig`, so ``neurips26 run polestar`` (same preset) and any later call with
the same settings load it instead of training again. The presets are the reproduction's models
(``--size quick``: the quick run's, ``--size full``: the full run's); the flags override single fields.

After training (or loading) the command decodes ``--eval`` held-out prompts per task with vanilla LLaDA
decoding (one token per step, no cache) and prints their exact match: the issue's acceptance measure, so a
user sees whether decoder differences will be visible on this model.

Wiring (done in ``neurips26.cli.build_parser``): ``from .cli_dllm import register; register(sub)``.
"""

from __future__ import annotations

import argparse
import math

__all__ = ["register", "cmd_dllm_train", "train_config_from_args"]


def register(sub) -> None:
    """Add ``dllm train`` to ``sub``, the subparsers object of :func:`neurips26.cli.build_parser`."""
    d = sub.add_parser("dllm", help="masked-diffusion LM utilities (Polestar)")
    d_sub = d.add_subparsers(dest="dllm_command", required=True)
    t = d_sub.add_parser("train", help="train and cache the small masked-diffusion LM (LLaDA SFT objective)")
    t.add_argument("--size", default="quick", help="preset: 'quick' (the quick run's model, default) or 'full'")
    t.add_argument("--steps", type=int, default=None, help="optimizer steps (default: the preset's)")
    t.add_argument("--d-model", type=int, default=None, dest="d_model", help="hidden size (default: the preset's)")
    t.add_argument("--layers", type=int, default=None, help="transformer layers (default: the preset's)")
    t.add_argument("--heads", type=int, default=None, help="attention heads; must divide --d-model (default: the preset's)")
    t.add_argument("--ffn", type=int, default=None, help="MLP intermediate size (default: the preset's)")
    t.add_argument("--batch-size", type=int, default=None, dest="batch_size", help="examples per step (default: the preset's)")
    t.add_argument("--lr", type=float, default=None, help="AdamW peak learning rate (default: the preset's)")
    t.add_argument("--seed", type=int, default=0, help="initialisation and data seed (default 0)")
    t.add_argument("--tasks", nargs="+", default=None, help="tasks to train on (default: the preset's)")
    t.add_argument("--gen-length", type=int, default=None, dest="gen_length",
                   help="answer length in tokens (default: the preset's)")
    t.add_argument("--eval", type=int, default=32, dest="n_eval", metavar="N",
                   help="held-out prompts per task for the exact-match check (default 32; 0 skips it)")
    t.add_argument("--block-length", type=int, default=None, dest="block_length",
                   help="decoding block length of the check (default: the preset's; must divide the gen length)")
    t.add_argument("--force", action="store_true", help="retrain even if a cached checkpoint exists")
    t.set_defaults(func=cmd_dllm_train)


def _presets() -> dict:
    from .reproduce.polestar import SIZES

    return {"quick": SIZES[True], "full": SIZES[False]}


def _bad(msg: str) -> int:
    from .cli import console

    console.print(f"[red]error:[/] {msg}")
    return 2


def train_config_from_args(args: argparse.Namespace):
    """(TrainConfig, block_length) from the parsed flags; ValueError naming the flag on bad input."""
    from .dllm.model import ModelConfig, TrainConfig
    from .dllm.tasks import TASKS

    presets = _presets()
    if args.size not in presets:
        raise ValueError(f"--size must be one of {', '.join(presets)}, got {args.size!r}")
    S = presets[args.size]
    m = S["model"]

    def pick(flag, value, default, low):
        v = default if value is None else value
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise ValueError(f"{flag} must be an integer >= {low}, got {v!r}")
        return v

    d_model = pick("--d-model", args.d_model, m["hidden_size"], 2)
    heads = pick("--heads", args.heads, m["num_heads"], 1)
    if d_model % heads or (d_model // heads) % 2:
        raise ValueError(f"--d-model ({d_model}) must be a multiple of --heads ({heads}) with an even head size "
                         f"(rotary embeddings rotate pairs)")
    layers = pick("--layers", args.layers, m["num_layers"], 1)
    ffn = pick("--ffn", args.ffn, m["intermediate_size"], 1)
    steps = pick("--steps", args.steps, S["train_steps"], 1)
    batch = pick("--batch-size", args.batch_size, S["batch_size"], 1)
    gen = pick("--gen-length", args.gen_length, S["gen_length"], 2)
    seed = pick("--seed", args.seed, 0, 0)
    n_eval = pick("--eval", args.n_eval, 32, 0)
    block = pick("--block-length", args.block_length, S["block_length"] if args.gen_length is None else gen, 1)
    if gen % block:
        raise ValueError(f"--gen-length ({gen}) must be a multiple of --block-length ({block})")
    lr = S["lr"] if args.lr is None else args.lr
    if not isinstance(lr, (int, float)) or not math.isfinite(lr) or lr <= 0:
        raise ValueError(f"--lr must be a finite number > 0, got {lr!r}")
    tasks = tuple(S["tasks"] if args.tasks is None else args.tasks)
    bad = [t for t in tasks if t not in TASKS]
    if not tasks or bad:
        raise ValueError(f"--tasks must be among {', '.join(TASKS)}, got {', '.join(bad) or 'none'}")
    # the same defaults as the reproduction's train_config (warm-up 50), so the quick preset hits its cache
    cfg = TrainConfig(model=ModelConfig(hidden_size=d_model, num_layers=layers, num_heads=heads, intermediate_size=ffn),
                      tasks=tasks, add_digits=tuple(S["add_digits"]), gen_length=gen, steps=steps, batch_size=batch,
                      lr=float(lr), warmup=min(50, steps), seed=seed)
    return cfg, block, n_eval


def heldout_exact_match(model, cfg, n_per_task: int, block_length: int) -> dict:
    """Exact match of vanilla LLaDA decoding (one token per step, no cache) on held-out prompts, per task."""
    import numpy as np

    from .dllm import LowConfidence, NoCache, decode, encode_batch, exact_match
    from .dllm.model import heldout_examples
    from .dllm.tasks import TOKENIZER

    out = {}
    for task in cfg.tasks:
        exs = heldout_examples(task, n_per_task, cfg.add_digits)
        hits = []
        for i in range(0, len(exs), 64):
            chunk = exs[i:i + 64]
            b = encode_batch(chunk, cfg.gen_length, with_answers=False)
            r = decode(model, b["prompt_ids"], prompt_mask=b["prompt_mask"], gen_length=cfg.gen_length,
                       block_length=block_length, commit=LowConfidence(block_length), cache=NoCache(),
                       mask_id=TOKENIZER.mask_id)
            hits.append(exact_match(r.tokens, chunk))
        out[task] = float(np.concatenate(hits).mean())
    return out


def cmd_dllm_train(args: argparse.Namespace) -> int:
    from .reproduce._pinning import pin_numerics

    # the same pinned kernels and thread count as `neurips26 run`, before any kernel runs: the checkpoint cached
    # here is then the one the reproduction would train (same key, same weights), not a near copy
    pin_numerics()
    from .cli import out_console, progress_bar
    from .dllm.model import cache_path, pretrained_dllm

    try:
        cfg, block, n_eval = train_config_from_args(args)
    except ValueError as exc:
        return _bad(str(exc))
    path = cache_path(cfg)
    cached = path.exists() and not args.force
    try:
        if cached:
            model, meta = pretrained_dllm(cfg)
        else:
            with progress_bar() as progress:
                task = progress.add_task(f"training the dLLM ({cfg.steps} steps)", total=cfg.steps)
                model, meta = pretrained_dllm(
                    cfg, retrain=args.force,
                    on_step=lambda s, loss: progress.update(task, advance=1, description=f"loss {loss:.3f}"))
    except (ValueError, TypeError) as exc:
        return _bad(str(exc))
    except OSError as exc:
        return _bad(f"cannot write the checkpoint {path}: {exc.strerror or exc}")
    how = "loaded from the cache" if cached else f"trained in {meta['train_s']:.0f} s"
    out_console.print(f"dLLM {meta['n_params']:,} parameters, {cfg.steps} steps, final loss {meta['final_loss']:.3f} "
                      f"({how}) -> {path}", soft_wrap=True)
    if n_eval:
        em = heldout_exact_match(model, cfg, n_eval, block)
        per = ", ".join(f"{t} {v:.1%}" for t, v in em.items())
        mean = sum(em.values()) / len(em)
        out_console.print(f"held-out exact match (LLaDA one token per step, block {block}, {n_eval} prompts per task): "
                          f"{mean:.1%} ({per})", soft_wrap=True)
    return 0
