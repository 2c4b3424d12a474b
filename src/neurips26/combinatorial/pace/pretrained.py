"""The rankers PACE ships as recipes, not weights: generated instances, solved by the
reference solvers, imitated listwise; trained once (``neurips26 pace train TASK`` or on first
use) and cached under ``$NEURIPS26_CACHE`` (default ``~/.cache/neurips26``) as
``pace-<name>-v<CACHE_VERSION>-ranker.pt`` (a recipe with overrides gets its own file), written
atomically. Nothing is downloaded.

Recipes: "tsp": 128 uniform TSP-50 instances solved by elkai (LKH-3, one run); "atsp": 64 "tmat"
ATSP-50 instances solved by elkai; "cvrp": 48 CVRP-50 instances (Kool et al.) solved by PyVRP
(1000 HGS iterations each); "mis": 32 RB-small graphs solved by :class:`~.baselines.IlsCpSatMIS`
(256 local-search rounds, then CP-SAT for 1 s of deterministic time); "maxcut": 32
Barabási–Albert graphs of 60-80 vertices solved by CP-SAT (1 s of deterministic time, one
worker). MVC shares the MIS ranker (its states are MIS states); max clique uses it on the
complement graph.

Every teacher is budgeted by work, never by wall-clock seconds (elkai: LKH runs with LKH's fixed
default seed and no time limit; PyVRP: ``MaxIterations``; CP-SAT: ``max_deterministic_time``,
one worker, a fixed seed), so a recipe yields the same training data, and so the same ranker, on
every machine. Version 1 used PyVRP 0.5 s and CHILS 0.2 s: its rankers depended on the machine's
speed and load, and its cache files (``pace-<name>-ranker.pt``) are not read.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Callable

import numpy as np

from ..._checks import check_int
from .generators import ba_graph, rb_graph, tmat_atsp, uniform_cvrp, uniform_tsp
from .ranker import EditRanker, cache_path, load_ranker, save_ranker, train_ranker, training_examples
from .tasks import ATSPTask, CVRPTask, MaxCutTask, MISTask, TSPTask

__all__ = ["CACHE_VERSION", "RECIPES", "TASK_NAMES", "pretrained_ranker", "ranker_name", "ranker_path", "recipe",
           "teacher", "teacher_name", "training_instances"]

CACHE_VERSION = 2  # 2: work-budgeted (deterministic) teachers; 1: time-limited PyVRP / CHILS
RECIPES = {
    "tsp": dict(n=50, instances=128, states=12, epochs=12, seed=0),
    "atsp": dict(n=50, instances=64, states=12, epochs=12, seed=0),
    "cvrp": dict(n=50, instances=48, states=12, epochs=12, seed=0, pyvrp_iterations=1000),
    "mis": dict(size="small", instances=32, states=8, epochs=12, seed=0, ils_rounds=256, cpsat_det_s=1.0),
    "maxcut": dict(n_range=(60, 80), instances=32, states=16, epochs=12, seed=0, cpsat_det_s=1.0),
}
_SHARED = {"tsp": "tsp", "atsp": "atsp", "cvrp": "cvrp", "mis": "mis", "mvc": "mis", "mcl": "mis", "maxcut": "maxcut"}
TASK_NAMES = tuple(_SHARED)  # the task names a ranker can be asked for


def ranker_name(task: str) -> str:
    """The recipe a task's ranker comes from ("mvc" and "mcl" use "mis")."""
    if task not in _SHARED:
        raise ValueError(f"task must be one of {sorted(_SHARED)}, got {task!r}")
    return _SHARED[task]


def recipe(task: str, epochs: int | None = None, instances: int | None = None, seed: int | None = None) -> dict:
    """The recipe of ``task``'s ranker with the given knobs overridden (None: the recipe's own)."""
    r = dict(RECIPES[ranker_name(task)])
    for k, v in (("epochs", epochs), ("instances", instances), ("seed", seed)):
        if v is not None:
            r[k] = check_int(k, v, 0 if k == "seed" else 1)
    return r


def ranker_path(task: str, **overrides) -> Path:
    """The cache file of ``task``'s ranker; a recipe with overrides (``epochs``, ``instances``,
    ``seed``) gets a file of its own, so a custom training never replaces the default ranker."""
    name = ranker_name(task)
    r = recipe(task, **overrides)
    tag = f"{name}-v{CACHE_VERSION}"
    if r != RECIPES[name]:
        tag += "-" + hashlib.sha1(json.dumps(r, sort_keys=True).encode()).hexdigest()[:10]
    return cache_path(tag)


def teacher_name(task: str) -> str:
    """The reference solver a task's ranker imitates, in words."""
    name = ranker_name(task)
    r = RECIPES[name]
    if name in ("tsp", "atsp"):
        return "elkai (LKH-3), 1 run"
    if name == "cvrp":
        return f"PyVRP (HGS), {r['pyvrp_iterations']} iterations"
    if name == "mis":
        return (f"iterated local search ({r['ils_rounds']} rounds) + CP-SAT ({r['cpsat_det_s']} s deterministic "
                "time, 1 worker)")
    return f"CP-SAT ({r['cpsat_det_s']} s deterministic time, 1 worker)"


def teacher(task: str):
    """(task object, reference solver) of ``task``'s recipe; ``solver.solve(inst, seed=k)`` is
    deterministic (budgeted by work, not time)."""
    name = ranker_name(task)
    r = RECIPES[name]
    from . import baselines as b

    if name == "tsp":
        return TSPTask(), b.ElkaiTSP(runs=1)
    if name == "atsp":
        return ATSPTask(), b.ElkaiATSP(runs=1)
    if name == "cvrp":
        return CVRPTask(), b.PyVRPCVRP(iterations=r["pyvrp_iterations"])
    if name == "maxcut":
        return MaxCutTask(), b.CpSatMaxCut(deterministic_s=r["cpsat_det_s"])
    return MISTask(), b.IlsCpSatMIS(rounds=r["ils_rounds"], deterministic_s=r["cpsat_det_s"])


def training_instances(task: str, r: dict, rng: np.random.Generator) -> list:
    """The generated training instances of recipe ``r`` (drawn from ``rng``)."""
    name = ranker_name(task)
    if name == "tsp":
        return [TSPTask().instance(uniform_tsp(r["n"], rng)) for _ in range(r["instances"])]
    if name == "atsp":
        return [tmat_atsp(r["n"], rng) for _ in range(r["instances"])]
    if name == "cvrp":
        return [uniform_cvrp(r["n"], rng) for _ in range(r["instances"])]
    if name == "maxcut":
        return [ba_graph(rng, tuple(r["n_range"])) for _ in range(r["instances"])]
    return [rb_graph(rng, r["size"]) for _ in range(r["instances"])]


def _data(name: str, r: dict, on_instance: Callable[[int, int], None] | None = None):
    rng = np.random.default_rng(r["seed"])
    task, ref = teacher(name)
    insts = training_instances(name, r, rng)
    examples = []
    for k, inst in enumerate(insts):
        sol = ref.solve(inst, seed=k + 1).sol
        examples += training_examples(task, inst, sol, rng, n_states=r["states"])
        if on_instance is not None:
            on_instance(k + 1, len(insts))
    return task, examples


def pretrained_ranker(task: str, retrain: bool = False, on_epoch: Callable[[int, float], None] | None = None, *,
                      epochs: int | None = None, instances: int | None = None, seed: int | None = None,
                      on_instance: Callable[[int, int], None] | None = None) -> tuple[EditRanker, dict]:
    """The cached ranker for ``task`` (training and caching it first when absent, when
    ``retrain``, or when the cached one was made by another recipe). ``epochs``, ``instances``
    and ``seed`` override the recipe's (cached in a file of their own, see :func:`ranker_path`).
    ``on_instance(done, total)`` reports the teacher's progress over the training instances,
    ``on_epoch(epoch, loss)`` the training's. The record (meta) holds the recipe, the per-epoch
    losses, the number of examples, the teacher and the seconds spent on data and training."""
    name = ranker_name(task)
    r = recipe(task, epochs=epochs, instances=instances, seed=seed)
    path = ranker_path(task, epochs=epochs, instances=instances, seed=seed)
    if path.exists() and not retrain:
        try:
            model, meta = load_ranker(path)
            if meta.get("recipe") == r and meta.get("version") == CACHE_VERSION:
                return model, meta
        except Exception:  # a corrupt or foreign cache file: train again
            pass
    import torch

    t0 = time.perf_counter()
    with torch.random.fork_rng():
        torch.manual_seed(r["seed"])
        t, examples = _data(name, r, on_instance)
        t_data = time.perf_counter() - t0
        model, losses = train_ranker(t, examples, epochs=r["epochs"], seed=r["seed"], on_epoch=on_epoch)
    meta = {"recipe": r, "version": CACHE_VERSION, "teacher": teacher_name(name), "losses": losses,
            "n_examples": len(examples), "data_s": t_data, "train_s": time.perf_counter() - t0 - t_data}
    save_ranker(model, path, meta)
    return model, meta
