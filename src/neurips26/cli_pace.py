"""``neurips26 pace train TASK``: train (or load) and cache the edit ranker of a PACE task.
``neurips26 pace train-neural PROBLEM``: train (or load) and cache an rl4co baseline policy (POMO on tsp and
cvrp, MatNet on atsp; the ``neural-co`` extra).

The ranker is a recipe, not downloaded weights (:mod:`neurips26.combinatorial.pace.pretrained`):
generated instances solved by a deterministic reference solver (the teacher), imitated listwise.
Training takes a minute or two on 2 cores; later runs of the experiment and of
``pretrained_ranker(task)`` load the cached file. ``register(sub)`` adds the subcommand to the
main parser (``neurips26.cli.build_parser``).
"""

from __future__ import annotations

import argparse


def _task_names() -> tuple[str, ...]:
    from .combinatorial.pace.pretrained import TASK_NAMES

    return TASK_NAMES


def register(sub) -> None:
    """Add ``pace train`` to the subparsers object ``sub`` of the main parser."""
    names = ", ".join(_task_names())
    pc = sub.add_parser("pace", help="PACE utilities (learned edits on feasible partial states)")
    pc_sub = pc.add_subparsers(dest="pace_command", required=True)
    tr = pc_sub.add_parser(
        "train", help="train and cache the edit ranker of a PACE task",
        description="Train the edit ranker of TASK by listwise imitation of a deterministic reference solver on "
                    "generated instances, and cache it under $NEURIPS26_CACHE (default ~/.cache/neurips26). "
                    "mvc and mcl share the mis ranker.")
    tr.add_argument("task", metavar="TASK", help=f"one of: {names}")
    tr.add_argument("--force", action="store_true", help="retrain even if a cached ranker of this recipe exists")
    tr.add_argument("--epochs", type=int, default=None, help="training epochs (default: the recipe's, 12)")
    tr.add_argument("--instances", type=int, default=None,
                    help="generated training instances (default: the recipe's, 32-128 by task)")
    tr.add_argument("--seed", type=int, default=None,
                    help="seed of the instances and the training (default: the recipe's, 0); a non-default "
                         "--epochs/--instances/--seed is cached in a file of its own")
    tr.set_defaults(func=cmd_pace_train)
    nn = pc_sub.add_parser(
        "train-neural", help="train and cache an rl4co baseline policy (POMO: tsp, cvrp; MatNet: atsp)",
        description="Train rl4co's POMO (tsp, cvrp) or MatNet (atsp) with its own REINFORCE step on generated "
                    "instances for a fixed number of steps, and cache the policy under $NEURIPS26_CACHE "
                    "(`pace.neural.pretrained_neural` loads it). Needs the neural-co extra (rl4co).")
    nn.add_argument("problem", metavar="PROBLEM", help="one of: tsp, cvrp, atsp")
    nn.add_argument("--n", type=int, default=20, help="nodes (clients for cvrp) of the training instances (default 20)")
    nn.add_argument("--steps", type=int, default=480, help="gradient steps (default 480)")
    nn.add_argument("--batch-size", type=int, default=32, help="instances per step (default 32)")
    nn.add_argument("--seed", type=int, default=0, help="seed of the weights and the instances (default 0)")
    nn.add_argument("--force", action="store_true", help="retrain even if a cached policy of this recipe exists")
    nn.set_defaults(func=cmd_pace_train_neural)


def cmd_pace_train(args: argparse.Namespace) -> int:
    from .cli import console, out_console, progress_bar
    from .combinatorial.pace.pretrained import TASK_NAMES, pretrained_ranker, ranker_name, ranker_path, recipe

    if args.task not in TASK_NAMES:
        console.print(f"[red]error:[/] TASK must be one of {', '.join(TASK_NAMES)}, got {args.task!r}")
        return 2
    for flag, value, low in (("--epochs", args.epochs, 1), ("--instances", args.instances, 1), ("--seed", args.seed, 0)):
        if value is not None and value < low:
            console.print(f"[red]error:[/] {flag} must be >= {low}, got {value}")
            return 2
    knobs = dict(epochs=args.epochs, instances=args.instances, seed=args.seed)
    r = recipe(args.task, **knobs)
    path = ranker_path(args.task, **knobs)
    name = ranker_name(args.task)
    trained = []  # set by on_epoch: this call trained (a cached ranker reports no epochs)
    try:
        with progress_bar() as progress:
            data = progress.add_task(f"solving {r['instances']} {name} instances", total=r["instances"])
            train = progress.add_task(f"training the {name} ranker", total=r["epochs"], start=False)

            def on_instance(done: int, total: int) -> None:
                progress.update(data, completed=done)

            def on_epoch(epoch: int, loss: float) -> None:
                trained.append(loss)
                if epoch == 0:
                    progress.start_task(train)
                progress.update(train, advance=1, description=f"training the {name} ranker, loss {loss:.3f}")

            _, meta = pretrained_ranker(args.task, retrain=args.force, on_epoch=on_epoch, on_instance=on_instance,
                                        **knobs)
    except ImportError as exc:  # a teacher's package (extra "co") is missing
        console.print(f"[red]error:[/] {exc}; install the 'co' extra")
        return 2
    losses = meta["losses"]
    how = (f"trained in {meta['data_s'] + meta['train_s']:.1f} s (teacher {meta['data_s']:.1f} s)" if trained
           else "already cached (--force retrains)")
    shared = f" (shared by {args.task})" if name != args.task else ""
    out_console.print(f"{name} ranker{shared}: {len(losses)} epochs on {meta['n_examples']} examples from "
                      f"{meta['recipe']['instances']} instances, teacher {meta['teacher']}, listwise loss "
                      f"{losses[0]:.3f} -> {losses[-1]:.3f}; {how}")
    out_console.print(str(path), soft_wrap=True)
    return 0


def cmd_pace_train_neural(args: argparse.Namespace) -> int:
    from .cli import console, out_console, progress_bar
    from .combinatorial.pace.neural import NEURAL_MODELS, neural_available, neural_cache_path, pretrained_neural

    if args.problem not in NEURAL_MODELS:
        console.print(f"[red]error:[/] PROBLEM must be one of {', '.join(NEURAL_MODELS)}, got {args.problem!r}")
        return 2
    for flag, value, low in (("--n", args.n, 10 if args.problem == "cvrp" else 5), ("--steps", args.steps, 1),
                             ("--batch-size", args.batch_size, 1), ("--seed", args.seed, 0)):
        if value < low:
            console.print(f"[red]error:[/] {flag} must be >= {low}, got {value}")
            return 2
    if not neural_available():
        console.print("[red]error:[/] rl4co is not installed: pip install 'neurips26\\[neural-co]'")
        return 2
    model = NEURAL_MODELS[args.problem][1]
    trained = []
    with progress_bar() as progress:
        bar = progress.add_task(f"training {model} on {args.problem.upper()}-{args.n}", total=args.steps)

        def on_step(step: int, loss: float, length: float) -> None:
            trained.append(length)
            progress.update(bar, completed=step, description=f"training {model} on {args.problem.upper()}-{args.n}, "
                                                             f"tour length {length:.3f}")

        _, meta = pretrained_neural(args.problem, args.n, args.steps, args.batch_size, seed=args.seed,
                                    retrain=args.force, on_step=on_step)
    how = f"trained in {meta['train_s']:.1f} s" if trained else "already cached (--force retrains)"
    out_console.print(f"{model} on {args.problem.upper()}-{args.n}: {args.steps} steps of {args.batch_size} instances, "
                      f"mean sampled tour length {meta['lengths'][0]:.3f} -> {meta['lengths'][-1]:.3f}; {how}")
    out_console.print(str(neural_cache_path(args.problem, args.n, args.steps, args.batch_size, args.seed)),
                      soft_wrap=True)
    return 0
