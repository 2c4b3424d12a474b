"""``neurips26 hyperp-lr``: HyperP's per-group learning rates for a target ``transformers`` config,
transferred from a base run (:class:`neurips26.optim.HyperPScaler`).

The base is a config (``--base``: a ``config.json`` or a model folder) or its width and depth
(``--base-width``/``--base-depth``), with the lr tuned there and the tokens it trained on. The
target's width, depth and active experts are read from its config. Nothing is downloaded: both
configs are local files. The model is built on the meta device (no memory, no weights) only to
count what goes into each optimizer group.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path


def _load_config(path: str, what: str):
    """A transformers config from a local ``config.json`` (or the folder holding one); ValueError
    naming ``what``. Read as JSON and built with ``AutoConfig.for_model``: the hub is never asked."""
    from transformers import AutoConfig

    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    if not p.is_file():
        raise ValueError(f"{what}: {p} does not exist (give a config.json file or a model folder holding one)")
    try:
        data = json.loads(p.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{what}: {p} is not a readable JSON file ({exc})") from None
    if not isinstance(data, dict) or "model_type" not in data:
        raise ValueError(f"{what}: {p} has no 'model_type' entry: not a transformers config")
    try:
        return AutoConfig.for_model(data.pop("model_type"), **data)
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{what}: {p} is not a config transformers can read ({exc})") from None


def _shape(cfg, what: str) -> tuple[int, int, int]:
    """(width, depth, active experts per token; 1 for a dense model) of a config."""
    width, depth = getattr(cfg, "hidden_size", None), getattr(cfg, "num_hidden_layers", None)
    if not isinstance(width, int) or not isinstance(depth, int):
        raise ValueError(f"{what}: the config ({type(cfg).__name__}) has no integer hidden_size and "
                         f"num_hidden_layers")
    k = getattr(cfg, "num_experts_per_tok", None) or 1
    return width, depth, int(k)


def _group_sizes(cfg, lr: float, adamw_lr: float) -> list[dict] | str:
    """Tensors and parameters per optimizer group, from the model built on the meta device; or
    why it could not be built."""
    import torch
    from transformers import AutoModel, AutoModelForCausalLM

    from .optim import hyperp_param_groups

    model, why = None, ""
    for auto in (AutoModelForCausalLM, AutoModel):
        try:
            with torch.device("meta"):
                model = auto.from_config(cfg)
            break
        except (ValueError, KeyError, TypeError, RuntimeError) as exc:
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if model is None:
        return f"the model could not be built from the config ({why})"
    try:
        groups = hyperp_param_groups(model, lr=lr, adamw_lr=adamw_lr)
    except (TypeError, ValueError) as exc:
        return str(exc)
    return [{"tensors": len(g["params"]), "parameters": int(sum(p.numel() for p in g["params"]))} for g in groups]


def transfer(args: argparse.Namespace) -> dict:
    """The computation behind the command, as a JSON-ready dict (ValueError on bad input)."""
    from .optim.hyperp import MAGIC_EXPONENT, HyperPScaler

    target = _load_config(args.target, "target")
    width, depth, k = _shape(target, "target")
    if args.base is not None:
        base_width, base_depth, base_k = _shape(_load_config(args.base, "--base"), "--base")
    elif args.base_width is not None and args.base_depth is not None:
        base_width, base_depth, base_k = args.base_width, args.base_depth, 1
    else:
        raise ValueError("give the base run's config (--base) or its --base-width and --base-depth")
    gamma = MAGIC_EXPONENT if args.gamma is None else args.gamma
    tokens = args.base_tokens if args.tokens is None else args.tokens
    scaler = HyperPScaler(base_width, base_depth, args.base_tokens, args.base_lr, gamma=gamma,
                          depth_mup=not args.no_depth_mup, granularity_exponent=args.granularity_exponent,
                          base_granularity=base_k)
    lr = scaler.lr(width=width, depth=depth, tokens=tokens, granularity=k)
    # the AdamW group (embeddings, head, norms) follows the data-scaling law only: its tensors are not
    # inside the residual branches that Depth-muP rescales
    base_adamw = args.base_lr if args.adamw_lr is None else args.adamw_lr
    if not (math.isfinite(base_adamw) and base_adamw > 0):
        raise ValueError(f"--adamw-lr must be finite and > 0, got {base_adamw}")
    adamw_lr = base_adamw * (tokens / args.base_tokens) ** (-gamma)
    residual = getattr(target, "residual_multiplier", None)
    return {
        "target": {"config": str(args.target), "model_type": getattr(target, "model_type", None), "width": width,
                   "depth": depth, "active_experts": k, "tokens": tokens},
        "base": {"width": base_width, "depth": base_depth, "active_experts": base_k, "tokens": args.base_tokens,
                 "lr": args.base_lr, "adamw_lr": base_adamw},
        "rules": {"gamma": gamma, "depth_mup": not args.no_depth_mup,
                  "depth_factor": math.sqrt(base_depth / depth) if not args.no_depth_mup else 1.0,
                  "token_factor": (tokens / args.base_tokens) ** (-gamma),
                  "granularity_factor": (k / base_k) ** (-args.granularity_exponent)},
        "groups": {"sphere": {"lr": lr, "holds": "2-D tensors inside the blocks (HyperballMuon's sphere)"},
                   "adamw": {"lr": adamw_lr, "holds": "embeddings, LM head, norms, biases, expert stacks"}},
        "residual_multiplier": {"set_to": scaler.residual_multiplier(depth),
                                "config_has_setting": residual is not None, "config_value": residual},
        "sizes": _group_sizes(target, lr, adamw_lr),
    }


def cmd_hyperp_lr(args: argparse.Namespace) -> int:
    from rich.table import Table

    from .cli import console, out_console

    try:
        res = transfer(args)
    except (ValueError, TypeError) as exc:
        console.print(f"[red]error:[/] {exc}")
        return 2
    if args.json:
        out_console.print_json(json.dumps(res))
        return 0
    t, b, rules = res["target"], res["base"], res["rules"]
    table = Table(title=f"HyperP learning rates for {t['config']} ({t['model_type']}: width {t['width']}, depth "
                        f"{t['depth']}, {t['tokens']:.3g} tokens)")
    for col in ("group", "holds", "tensors", "parameters", "lr"):
        table.add_column(col, justify="right" if col in ("tensors", "parameters", "lr") else "left")
    sizes = res["sizes"] if isinstance(res["sizes"], list) else [None, None]
    for (name, g), size in zip(res["groups"].items(), sizes):
        table.add_row(name, g["holds"], str(size["tensors"]) if size else "?",
                      f"{size['parameters']:,}" if size else "?", f"{g['lr']:.6g}")
    out_console.print(table)
    out_console.print(f"base: width {b['width']}, depth {b['depth']}, {b['tokens']:.3g} tokens, lr {b['lr']:.6g} "
                      f"(AdamW {b['adamw_lr']:.6g}); factors: depth {rules['depth_factor']:.4g}, tokens "
                      f"{rules['token_factor']:.4g} (gamma {rules['gamma']}), granularity "
                      f"{rules['granularity_factor']:.4g}; width: none (the sphere step is relative)")
    if isinstance(res["sizes"], str):
        out_console.print(f"group sizes not shown: {res['sizes']}")
    rm = res["residual_multiplier"]
    if rules["depth_mup"]:
        if rm["config_has_setting"]:
            out_console.print(f"set residual_multiplier = {rm['set_to']:.6g} in the target config (now "
                              f"{rm['config_value']}); neurips26.optim.apply_hyperp does it")
        else:
            out_console.print(f"Depth-muP also scales the residual branches by {rm['set_to']:.6g} = 1/sqrt(2L): this "
                              f"config has no residual_multiplier setting, so the model code must do it")
    return 0


def _positive(kind):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a {kind.__name__}, got {text!r}") from None
        if not (math.isfinite(value) and value > 0):
            raise argparse.ArgumentTypeError(f"must be finite and > 0, got {text!r}")
        return value
    return parse


def register(sub) -> None:
    """Add ``hyperp-lr`` to the CLI's subcommands."""
    h = sub.add_parser("hyperp-lr", help="HyperP's per-group learning rates for a target transformers config, "
                                         "transferred from a base run",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    h.add_argument("target", help="the target model's config.json, or its folder")
    h.add_argument("--base", default=None, help="the base run's config.json or folder (or --base-width/--base-depth)")
    h.add_argument("--base-width", type=_positive(int), default=None, help="the base model's hidden size")
    h.add_argument("--base-depth", type=_positive(int), default=None, help="the base model's number of layers")
    h.add_argument("--base-lr", type=_positive(float), required=True, help="the lr tuned at the base (sphere group)")
    h.add_argument("--base-tokens", type=_positive(float), required=True, help="the tokens the base run trained on")
    h.add_argument("--tokens", type=_positive(float), default=None,
                   help="the target run's tokens (default: the base's)")
    h.add_argument("--adamw-lr", type=_positive(float), default=None,
                   help="the AdamW group's lr at the base (default: --base-lr)")
    h.add_argument("--gamma", type=float, default=None, help="the token exponent (default 0.32)")
    h.add_argument("--granularity-exponent", type=float, default=0.0,
                   help="kappa of lr ~ (k/k0)^-kappa over active experts k (default 0: unchanged under SqrtGate)")
    h.add_argument("--no-depth-mup", action="store_true", help="no depth rule (lr and residual branches unscaled)")
    h.add_argument("--json", action="store_true", help="print the result as JSON")
    h.set_defaults(func=cmd_hyperp_lr)
