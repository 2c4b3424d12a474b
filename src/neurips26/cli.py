"""``neurips26 list | run | report | pome | lsbo | dllm | hyperp-lr | pace``.

Exit status: 0 on success, 1 when an experiment failed, 2 for bad usage or input.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import traceback
from pathlib import Path
from typing import Sequence

from rich.console import Console
from rich.markup import escape as rich_escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from . import reproduce
from .reproduce._harness import VERDICTS, check_writable, run_experiment, tally, verdict, verdict_counts, verdict_text

console = Console(stderr=True, soft_wrap=True)  # never break paths or messages mid-line
out_console = Console()


VERDICT_STYLE = {"holds": "green", "does not hold": "red", "inconclusive": "magenta", "not tested": "yellow"}


def _verdict_summary(claims) -> str:
    """'3 held, 1 do not hold, 2 inconclusive, 0 not tested (of 6 claims)'."""
    c = verdict_counts(claims)
    return (f"{c['holds']} held, {c['does not hold']} do not hold, {c['inconclusive']} inconclusive, "
            f"{c['not tested']} not tested (of {len(claims)} claims)")


def progress_bar() -> Progress:
    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


def cmd_list(args: argparse.Namespace) -> int:
    table = Table("slug", "paper", "what it runs")
    for exp in reproduce.EXPERIMENTS.values():
        table.add_row(exp.slug, exp.paper, exp.summary)
    out_console.print(table)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from .reproduce._pinning import pin_numerics

    pin_numerics()  # before any experiment loads numpy / torch kernels: same numbers on another x86 machine
    if args.slug == "all":
        exps = list(reproduce.EXPERIMENTS.values())
    else:
        try:
            exps = [reproduce.get(args.slug)]
        except KeyError as exc:
            console.print(f"[red]error:[/] {exc.args[0]}")
            return 2
    out = Path(args.out)
    try:
        check_writable(out)
    except PermissionError as exc:
        console.print(f"[red]error:[/] {exc}")
        return 2
    if args.jobs is not None and args.jobs < 1:
        console.print(f"[red]error:[/] --jobs must be >= 1, got {args.jobs}")
        return 2
    if args.scheduler is not None:
        import importlib.util

        if importlib.util.find_spec("distributed") is None:
            console.print("[red]error:[/] --scheduler needs Dask's distributed package: pip install 'neurips26[cluster]'")
            return 2
    where = (f", {args.jobs} worker process{'es' * (args.jobs > 1)}" if args.jobs else
             f", Dask scheduler {args.scheduler}" if args.scheduler else "")
    failed = []
    for exp in exps:
        console.print(f"[bold]{exp.slug}[/]: {exp.paper} ({'quick' if args.quick else 'full'}, seed {args.seed}{where}"
                      f"{', resuming' if args.resume else ''})")
        try:
            with progress_bar() as progress:
                res = run_experiment(exp, out, seed=args.seed, quick=args.quick, progress=progress,
                                     jobs=args.jobs, scheduler=args.scheduler, resume=args.resume)
        except KeyboardInterrupt:
            if any((out / f"{exp.slug}.tasks").glob("*.json")):
                console.print(f"finished tasks are kept in {out / (exp.slug + '.tasks')}; "
                              f"`neurips26 run {exp.slug} --resume` (same --seed, --quick, --out) runs only the rest")
            raise
        except Exception:  # one failing experiment must not stop `run all`
            console.print(f"[red]{exp.slug} failed:[/]\n{traceback.format_exc()}")
            failed.append(exp.slug)
            continue
        if (args.jobs or args.scheduler) and "tasks" not in res["env"]:
            console.print(f"  [yellow]note:[/] {exp.slug} does not run its sweep through ctx.map (yet): it ran in this process")
        out_dir = out / exp.slug
        console.print(f"  {_verdict_summary(res['claims'])}, {res['wall_s']:.1f} s -> {out_dir}")
        for c in res["claims"]:
            v = verdict(c)
            ours = "n/a" if c["ours"] is None else f"{c['ours']:.4g}"
            base = "n/a" if c["baseline"] is None else f"{c['baseline']:.4g}"
            mean = " (means)" if c.get("n_capped") is not None else ""
            console.print(f"  - {rich_escape(c['claim'])}: ours {ours} vs baseline {base}{mean}: "
                          f"[{VERDICT_STYLE[v]}]{rich_escape(verdict_text(c))}[/]")
    if failed:
        console.print(f"[red]{len(failed)} experiment(s) failed:[/] {', '.join(failed)}")
        return 1
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from .reproduce.report import collect_results, render_index

    out = Path(args.out)
    try:
        results = collect_results(out)
    except ValueError as exc:
        console.print(f"[red]error:[/] {exc}")
        return 2
    if not results:
        console.print(f"[red]error:[/] no results.json under {out}/; run `neurips26 run SLUG --quick` first")
        return 2
    index = render_index(out)
    table = Table()
    table.add_column("slug", no_wrap=True)
    table.add_column("claims held / tested")  # tested: holds, does not hold or inconclusive
    table.add_column(" / ".join(f"[{VERDICT_STYLE[v]}]{v.replace('does not hold', 'not held')}[/]" for v in VERDICTS[1:]))
    table.add_column("size")
    table.add_column("wall (s)", justify="right")
    for _, r in results:
        counts = verdict_counts(r["claims"])
        held, tested = tally(r["claims"])
        table.add_row(r["slug"], f"{held} / {tested}",
                      " / ".join(f"[{VERDICT_STYLE[v]}]{counts[v]}[/]" if counts[v] else "0" for v in VERDICTS[1:]),
                      "quick" if r["quick"] else "full", f"{r['wall_s']:.1f}")
    out_console.print(table)
    out_console.print(f"wrote {index}")
    return 0


def cmd_pome(args: argparse.Namespace) -> int:
    import re

    from .compression import DEFAULT_TARGETS, pome_checkpoint
    from .compression.pome import check_pome_options
    from .compression.pome_io import total_bytes

    try:
        targets = [re.compile(t[3:]) if t.startswith("re:") else t for t in args.targets] if args.targets else DEFAULT_TARGETS
    except re.error as exc:
        console.print(f"[red]error:[/] bad --targets regex: {exc}")
        return 2
    scale: object = args.scale
    if scale not in ("fro", "spectral"):
        try:
            scale = float(scale)
        except ValueError:
            console.print(f"[red]error:[/] --scale must be 'fro', 'spectral' or a number, got {args.scale!r}")
            return 2
    options = dict(rank=args.rank, rank_ratio=args.rank_ratio, scale=scale, gain=args.gain)
    try:
        check_pome_options(options)  # before any file is read (total_bytes opens the checkpoint)
        total = total_bytes(args.finetuned)
        with progress_bar() as progress:
            task = progress.add_task("POME", total=total)
            report = pome_checkpoint(
                args.pretrained,
                args.finetuned,
                args.output,
                targets=targets,
                overwrite=args.overwrite,
                callback=lambda name, nbytes, edited: progress.advance(task, nbytes),
                **options,  # type: ignore[arg-type]
            )
    except (ValueError, TypeError, OSError) as exc:
        # OSError: a missing file (FileNotFoundError), an existing output (FileExistsError),
        # permissions, a path through a file (NotADirectoryError), a full disk ...
        console.print(f"[red]error:[/] {exc}")
        return 2
    if report.stale_removed:
        out_console.print(f"removed {len(report.stale_removed)} stale temporary file(s) of an earlier interrupted "
                          f"run: {', '.join(report.stale_removed)}")
    out_console.print(f"edited {len(report.edited)} tensors, copied the rest unchanged -> {args.output}")
    if report.skipped:
        out_console.print(f"skipped (matched but not a float matrix): {', '.join(sorted(report.skipped))}")
    return 0


def cmd_lsbo_train_vae(args: argparse.Namespace) -> int:
    from .bayesopt.pretrained import DEFAULT_EPOCHS, TASKS, cache_path, pretrained_codec

    if args.task not in TASKS:
        console.print(f"[red]error:[/] --task must be one of {', '.join(TASKS)}, got {args.task!r}")
        return 2
    if args.epochs is not None and args.epochs < 1:
        console.print(f"[red]error:[/] --epochs must be >= 1, got {args.epochs}")
        return 2
    epochs = args.epochs or DEFAULT_EPOCHS[args.task]
    try:
        with progress_bar() as progress:
            task = progress.add_task(f"training the {args.task} VAE", total=epochs)
            _, meta = pretrained_codec(args.task, epochs=epochs, retrain=args.force,
                                       on_epoch=lambda e, loss: progress.update(task, advance=1,
                                                                                 description=f"loss {loss:.3f}"))
    except ImportError as exc:
        console.print(f"[red]error:[/] {exc}")
        return 2
    out_console.print(f"{args.task} VAE: {meta['epochs']} epochs on {meta['n_train']} objects, final loss "
                      f"{meta['losses'][-1]:.3f} -> {cache_path(args.task, epochs)}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="neurips26", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    sub.add_parser("list", help="list the experiments").set_defaults(func=cmd_list)

    r = sub.add_parser("run", help="run an experiment (or 'all')")
    r.add_argument("slug")
    r.add_argument("--quick", action="store_true", help="the small size: a few minutes on 2 CPU cores")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--out", default="runs", help="output directory (default: runs/)")
    where = r.add_mutually_exclusive_group()
    where.add_argument("--jobs", type=int, default=None, metavar="N",
                       help="run the sweep's tasks on N local worker processes, one thread each (default: in this process)")
    where.add_argument("--scheduler", default=None, metavar="ADDRESS",
                       help="run the sweep's tasks on a running Dask scheduler, e.g. tcp://host:8786 (extra 'cluster')")
    r.add_argument("--resume", action="store_true",
                   help="reuse the finished tasks cached in OUT/SLUG.tasks/ by an earlier run with the same seed and size "
                        "(without it, an existing cache is moved aside)")
    r.set_defaults(func=cmd_run)

    rep = sub.add_parser("report", help="render every results.json under --out into index.html")
    rep.add_argument("--out", default="runs")
    rep.set_defaults(func=cmd_report)

    pm = sub.add_parser("pome", help="apply POME to a pretrained / fine-tuned checkpoint pair")
    pm.add_argument("pretrained", help=".safetensors file or Hugging Face model folder")
    pm.add_argument("finetuned", help=".safetensors file or Hugging Face model folder")
    pm.add_argument("-o", "--output", required=True, help="output file (.safetensors) or folder")
    pm.add_argument("--rank", type=int, default=None, help="kept rank k (overrides --rank-ratio)")
    pm.add_argument("--rank-ratio", type=float, default=0.5, help="k = ratio * min(m, n) (default 0.5)")
    pm.add_argument("--scale", default="fro",
                    help="'fro' (default), 'spectral', or a finite number > 0: the common singular value")
    pm.add_argument("--gain", type=float, default=1.0, help="multiplies the common singular value (finite, > 0)")
    pm.add_argument(
        "--targets", nargs="+", default=None,
        help="tensor names to edit: globs, or 're:REGEX' (default: FFN up-projections)",
    )
    pm.add_argument("--overwrite", action="store_true", help="replace an existing output")
    pm.set_defaults(func=cmd_pome)

    ls = sub.add_parser("lsbo", help="latent-space BO utilities")
    ls_sub = ls.add_subparsers(dest="lsbo_command", required=True)
    tv = ls_sub.add_parser("train-vae", help="train and cache the small VAE of an LSBO task")
    tv.add_argument("--task", default="molecules", help="molecules (SELFIES, rdkit's NCI set) or robot")
    tv.add_argument("--epochs", type=int, default=None, help="training epochs (default: the task's)")
    tv.add_argument("--force", action="store_true", help="retrain even if a cached VAE exists")
    tv.set_defaults(func=cmd_lsbo_train_vae)

    # the methods' own tools, each in its module (imported here, after this module is complete)
    from . import cli_dllm, cli_hyperp, cli_pace

    for tool in (cli_dllm, cli_hyperp, cli_pace):
        tool.register(sub)
    return p


def _interrupt(signum, frame):
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. SIGTERM (a scheduler's kill, ``timeout``) is handled like Ctrl-C:
    the command unwinds, its temporary files are removed, and what was there before
    stays as it was. Exit status 130 for SIGINT, 143 for SIGTERM."""
    args = build_parser().parse_args(argv)
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _interrupt) if in_main_thread else None
    try:
        return args.func(args)
    except KeyboardInterrupt as exc:
        by = exc.args[0] if exc.args else "SIGINT"
        console.print(f"[red]interrupted ({by}):[/] nothing half-written was left; earlier outputs are unchanged")
        return 143 if by == "SIGTERM" else 130
    finally:
        if in_main_thread:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
