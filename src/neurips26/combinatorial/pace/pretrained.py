"""The rankers PACE ships as recipes, not weights: generated instances, solved by the
reference solvers, imitated listwise; trained once (``neurips26 pace train TASK`` or on first
use) and cached under ``$NEURIPS26_CACHE`` (default ``~/.cache/neurips26``) as
``pace-<name>-ranker.pt``, written atomically. Nothing is downloaded.

Recipes: "tsp": 128 uniform TSP-50 instances solved by elkai (LKH-3); "atsp": 64 "tmat" ATSP-50
instances solved by elkai; "cvrp": 48 CVRP-50 instances (Kool et al.) solved by PyVRP (0.5 s
each); "mis": 32 RB-small graphs solved by CHILS (0.2 s each); "maxcut": 32 Barabási–Albert
graphs of 60-80 vertices solved by CP-SAT (2 s each). MVC shares the MIS ranker (its states
are MIS states); max clique uses it on the complement graph.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from .generators import ba_graph, rb_graph, tmat_atsp, uniform_cvrp, uniform_tsp
from .ranker import EditRanker, cache_path, load_ranker, save_ranker, train_ranker, training_examples
from .tasks import ATSPTask, CVRPTask, MaxCutTask, MISTask, TSPTask

__all__ = ["RECIPES", "pretrained_ranker", "ranker_name"]

RECIPES = {
    "tsp": dict(n=50, instances=128, states=12, epochs=12, seed=0),
    "atsp": dict(n=50, instances=64, states=12, epochs=12, seed=0),
    "cvrp": dict(n=50, instances=48, states=12, epochs=12, seed=0, pyvrp_s=0.5),
    "mis": dict(size="small", instances=32, states=8, epochs=12, seed=0, chils_s=0.2),
    "maxcut": dict(n_range=(60, 80), instances=32, states=16, epochs=12, seed=0, cpsat_s=2.0),
}
_SHARED = {"tsp": "tsp", "atsp": "atsp", "cvrp": "cvrp", "mis": "mis", "mvc": "mis", "mcl": "mis", "maxcut": "maxcut"}


def ranker_name(task: str) -> str:
    """The recipe a task's ranker comes from ("mvc" and "mcl" use "mis")."""
    if task not in _SHARED:
        raise ValueError(f"task must be one of {sorted(_SHARED)}, got {task!r}")
    return _SHARED[task]


def _data(name: str, r: dict):
    rng = np.random.default_rng(r["seed"])
    if name == "tsp":
        from .baselines import ElkaiTSP

        task, ref = TSPTask(), ElkaiTSP(runs=1)
        insts = [task.instance(uniform_tsp(r["n"], rng)) for _ in range(r["instances"])]
    elif name == "atsp":
        from .baselines import ElkaiATSP

        task, ref = ATSPTask(), ElkaiATSP(runs=1)
        insts = [tmat_atsp(r["n"], rng) for _ in range(r["instances"])]
    elif name == "cvrp":
        from .baselines import PyVRPCVRP

        task, ref = CVRPTask(), PyVRPCVRP(time_s=r["pyvrp_s"])
        insts = [uniform_cvrp(r["n"], rng) for _ in range(r["instances"])]
    elif name == "maxcut":
        from .baselines import CpSatMaxCut

        task, ref = MaxCutTask(), CpSatMaxCut(time_s=r["cpsat_s"])
        insts = [ba_graph(rng, tuple(r["n_range"])) for _ in range(r["instances"])]
    else:
        from .baselines import ChilsMIS

        task, ref = MISTask(), ChilsMIS(time_s=r["chils_s"])
        insts = [rb_graph(rng, r["size"]) for _ in range(r["instances"])]
    examples = []
    for k, inst in enumerate(insts):
        sol = ref.solve(inst, seed=k + 1).sol
        examples += training_examples(task, inst, sol, rng, n_states=r["states"])
    return task, examples


def pretrained_ranker(task: str, retrain: bool = False,
                      on_epoch: Callable[[int, float], None] | None = None) -> tuple[EditRanker, dict]:
    """The cached ranker for ``task`` (training and caching it first when absent, when
    ``retrain``, or when the cached one was made by another recipe)."""
    name = ranker_name(task)
    recipe = RECIPES[name]
    path = cache_path(name)
    if path.exists() and not retrain:
        try:
            model, meta = load_ranker(path)
            if meta.get("recipe") == recipe:
                return model, meta
        except Exception:  # a corrupt or foreign cache file: train again
            pass
    import torch

    t0 = time.perf_counter()
    with torch.random.fork_rng():
        torch.manual_seed(recipe["seed"])
        t, examples = _data(name, recipe)
        t_data = time.perf_counter() - t0
        model, losses = train_ranker(t, examples, epochs=recipe["epochs"], seed=recipe["seed"], on_epoch=on_epoch)
    meta = {"recipe": recipe, "losses": losses, "n_examples": len(examples), "data_s": t_data,
            "train_s": time.perf_counter() - t0 - t_data}
    save_ranker(model, path, meta)
    return model, meta
