"""Neural construction baselines from ``rl4co`` behind PACE's ``solve(instance, budget, seed) -> Solution``
face: POMO (Kwon et al. 2020) on TSP and CVRP, MatNet (Kwon et al. 2021) on ATSP.

:class:`NeuralConstruction` holds an rl4co model and its environment. ``train(steps, batch_size)``
runs rl4co's own REINFORCE step (``model.shared_step(..., phase="train")``: POMO's shared baseline,
the mean reward over the ``n`` start nodes of each instance) on instances drawn from rl4co's
generator, with Adam at rl4co's default learning rate, for a fixed number of gradient steps, so a
trained policy depends on the seed and the step budget, not on the machine's speed.
``solve`` decodes one instance greedily from every start node (POMO's multi-start inference) and,
for TSP and CVRP, on the 8 dihedral transforms of the coordinates (POMO's x8 augmentation; MatNet
takes none), keeps the shortest, and scores it with the PACE task's own cost and checker in float64.

The instances match rl4co's training distributions: PACE's uniform TSP coordinates in [0, 1)², its
"tmat" ATSP matrices (uniform in (0, 1], closed under shortest paths, the MatNet rule) and Kool et
al.'s CVRP (demands 1-9 over the capacity). Training on a CPU is slow (a TSP-50 POMO step of 64
instances takes seconds), so a CPU-trained policy is far from the published ones; say so beside
any number it gives.

``rl4co`` (with lightning, torchrl and tensordict) is the optional extra ``neural-co``; this
module imports it on first use and raises an ImportError that names the extra when it is absent.
Trained policies are cached like the rankers (:func:`pretrained_neural`), written atomically.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Callable

import numpy as np

from ..._atomic import atomic_open
from ..._checks import check_int, check_real
from .base import Budget, Solution
from ..._cache import cache_root
from .tasks import ATSPTask, CVRPTask, TSPTask
from .tasks.atsp import canonical_directed
from .tasks.cvrp import canonical_routes
from .tasks.tsp import canonical_tour

__all__ = ["NEURAL_MODELS", "NeuralConstruction", "neural_available", "pretrained_neural", "neural_cache_path"]

# problem -> (rl4co environment, rl4co model, PACE task, x8 augmentation at inference)
NEURAL_MODELS = {"tsp": ("TSPEnv", "POMO", TSPTask, True), "cvrp": ("CVRPEnv", "POMO", CVRPTask, True),
                 "atsp": ("ATSPEnv", "MatNet", ATSPTask, False)}
GRAD_CLIP = 1.0  # rl4co's RL4COTrainer default gradient_clip_val
_EXTRA = "rl4co is not installed: pip install 'neurips26[neural-co]' (rl4co 0.7, with lightning and torchrl)"


def neural_available() -> bool:
    """Whether rl4co imports here (the ``neural-co`` extra)."""
    try:
        import rl4co  # noqa: F401
    except ImportError:
        return False
    return True


def _rl4co():
    try:
        import rl4co.envs as envs
        import rl4co.models as models
    except ImportError as e:
        raise ImportError(_EXTRA) from e
    return envs, models


class NeuralConstruction:
    """An rl4co construction policy for ``problem`` ("tsp", "cvrp": POMO; "atsp": MatNet),
    trained on instances of ``num_loc`` nodes (clients for CVRP). ``policy_kwargs`` go to rl4co's
    policy (e.g. ``num_encoder_layers``, ``embed_dim``); ``seed`` fixes the initial weights and the
    training instances."""

    def __init__(self, problem: str, num_loc: int, seed: int = 0, lr: float = 1e-4, **policy_kwargs):
        if problem not in NEURAL_MODELS:
            raise ValueError(f"problem must be one of {sorted(NEURAL_MODELS)}, got {problem!r}")
        self.problem = problem
        self.num_loc = check_int("num_loc", num_loc, 5 if problem != "cvrp" else 10)
        self.seed = check_int("seed", seed, 0)
        self.lr = check_real("lr", lr, low=0.0, low_open=True)
        self.policy_kwargs = dict(policy_kwargs)
        env_name, model_name, task_type, self.augment = NEURAL_MODELS[problem]
        self.task = task_type(local_search=False)
        envs, models = _rl4co()
        import inspect

        import torch

        policy_type = models.MatNetPolicy if model_name == "MatNet" else models.AttentionModelPolicy
        known = set(inspect.signature(policy_type.__init__).parameters) - {"self", "args", "kwargs"}
        unknown = sorted(set(self.policy_kwargs) - known)
        if unknown:  # rl4co only logs unknown keys; a typo would silently train the default policy
            raise ValueError(f"policy_kwargs has keys {unknown} that {policy_type.__name__} does not take")

        self._env_type = getattr(envs, env_name)
        self.env = self._env_type(generator_params=dict(num_loc=self.num_loc))
        self._envs = {self.num_loc: self.env}  # inference environments by instance size (MatNet needs it)
        with torch.random.fork_rng():
            torch.manual_seed(self.seed)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # rl4co's notes on its defaults (no augmentation for MatNet ...)
                kw = dict(batch_size=1, train_data_size=1, val_data_size=1)
                if model_name == "POMO":
                    kw.update(num_augment=8, policy_kwargs=self.policy_kwargs)
                else:  # MatNet's constructor names them policy_params (policy_kwargs would be dropped silently)
                    kw.update(policy_params=self.policy_kwargs)
                self.model = getattr(models, model_name)(self.env, **kw)
        self._embed_dim = self.model.policy.encoder.init_embedding.embed_dim if model_name == "MatNet" else None
        self.model.eval()
        self.steps_done = 0

    @property
    def policy(self):
        return self.model.policy

    # --- training ---------------------------------------------------------------------
    def train(self, steps: int, batch_size: int = 64, on_step: Callable[[int, float, float], None] | None = None
              ) -> dict:
        """``steps`` REINFORCE steps of ``batch_size`` fresh generated instances each (rl4co's
        ``shared_step``: POMO's shared multi-start baseline, MatNet's likewise; Adam, the gradient
        norm clipped at 1 as rl4co's trainer does). ``on_step(step,
        loss, mean_tour_length)``. Returns the record: per-step loss and mean tour length of the
        sampled rollouts, and the seconds spent."""
        import torch

        steps = check_int("steps", steps, 1)
        batch_size = check_int("batch_size", batch_size, 1)
        opt = torch.optim.Adam(self.model.parameters(), lr=self.lr)
        losses, lengths = [], []
        t0 = time.perf_counter()
        self.model.train()
        with torch.random.fork_rng(), warnings.catch_warnings():
            # self.log outside a lightning Trainer warns and does nothing; the record is kept here
            warnings.simplefilter("ignore")
            torch.manual_seed(self.seed * 1_000_003 + self.steps_done)
            for k in range(steps):
                batch = self.env.generator(batch_size=[batch_size])
                out = self.model.shared_step(batch, k, phase="train")
                loss = out["loss"]
                if not torch.isfinite(loss):
                    raise FloatingPointError(f"the REINFORCE loss is not finite at step {self.steps_done + 1}")
                opt.zero_grad(set_to_none=True)
                loss.backward()
                # rl4co's trainer clips the gradient norm at 1.0 by default (RL4COTrainer gradient_clip_val)
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), GRAD_CLIP)
                opt.step()
                self.steps_done += 1
                losses.append(float(loss))
                lengths.append(-float(out["train/reward"]))  # rl4co's logged mean reward of the rollouts
                if on_step is not None:
                    on_step(self.steps_done, losses[-1], lengths[-1])
        self.model.eval()
        return {"steps": steps, "batch_size": batch_size, "losses": losses, "lengths": lengths,
                "train_s": time.perf_counter() - t0}

    # --- inference --------------------------------------------------------------------
    def _tensordict(self, inst):
        import torch
        from tensordict import TensorDict

        f32 = dict(dtype=torch.float32)
        if self.problem == "tsp":
            data = {"locs": torch.as_tensor(inst.coords, **f32)[None]}
        elif self.problem == "atsp":
            data = {"cost_matrix": torch.as_tensor(inst.D, **f32)[None]}
        else:
            c = torch.as_tensor(inst.coords, **f32)
            data = {"depot": c[None, 0], "locs": c[None, 1:],
                    "demand": torch.as_tensor(inst.demands[1:] / inst.capacity, **f32)[None],
                    "capacity": torch.full((1, 1), float(inst.capacity))}
        return TensorDict(data, batch_size=[1])

    def _solution(self, actions: np.ndarray):
        """The task-native canonical solution of one rollout's actions (CVRP: 0 is the depot; the
        zeros after the last client pad a finished rollout)."""
        if self.problem == "tsp":
            return canonical_tour(actions)
        if self.problem == "atsp":
            return canonical_directed(actions)
        routes, cur = [], []
        for a in actions.tolist():
            if a == 0:
                if cur:
                    routes.append(np.array(cur, np.int64))
                cur = []
            else:
                cur.append(a)
        if cur:
            routes.append(np.array(cur, np.int64))
        return canonical_routes(routes)

    def solve(self, instance, budget: Budget | None = None, seed: int = 0) -> Solution:
        """Multi-start greedy decoding (every start node; x8 dihedral augmentation for TSP and
        CVRP), the shortest tour kept. ``seed`` seeds MatNet's random one-hot column embeddings
        (drawn at every call), so a solve is reproducible; POMO's greedy decoding uses no randomness.
        ``budget`` is accepted for the common face and unused: greedy decoding has no budget knob."""
        import torch

        inst = self.task.instance(instance)
        t0 = time.perf_counter()
        n = inst.n
        if self._embed_dim is not None and n > self._embed_dim:
            raise ValueError(f"instance has {n} nodes: MatNet's one-hot node embeddings take at most embed_dim = "
                             f"{self._embed_dim} (build it with NeuralConstruction('atsp', ..., embed_dim=...))")
        if n not in self._envs:  # an environment sized like the instance: MatNet's decoder reads the size from it
            self._envs[n] = self._env_type(generator_params=dict(num_loc=n))
        env = self._envs[n]
        with torch.random.fork_rng(), torch.inference_mode():
            torch.manual_seed(check_int("seed", seed, 0))
            td = env.reset(self._tensordict(inst))
            n_start = env.get_num_starts(td)
            n_aug = 8 if self.augment else 1
            if n_aug > 1:
                td = self.model.augment(td)
            out = self.policy(td, env, phase="test", num_starts=n_start, decode_type="multistart_greedy",
                              return_actions=True)
        # one instance: every rollout (start node x transform) is a candidate, the best reward wins
        reward = out["reward"].reshape(-1)
        best = int(torch.argmax(reward))
        actions = out["actions"].reshape(reward.numel(), -1)[best].cpu().numpy().astype(np.int64)
        sol = self._solution(actions)
        wall = time.perf_counter() - t0
        feasible = bool(self.task.is_feasible(inst, sol))
        cost = float(self.task.cost(inst, sol)) if feasible else float("inf")
        return Solution(sol, cost, feasible, [], {"wall_s": wall, "rollouts": n_start * n_aug,
                                                  "model_length": -float(reward.max())})

    # --- persistence ------------------------------------------------------------------
    def save(self, path, meta: dict) -> None:
        """The policy's weights and ``meta`` (a JSON-able record), written atomically."""
        import torch

        with atomic_open(path) as fh:
            torch.save({"state_dict": self.policy.state_dict(), "meta": meta}, fh)

    def load(self, path) -> dict:
        import torch

        blob = torch.load(Path(path), map_location="cpu", weights_only=True)
        self.policy.load_state_dict(blob["state_dict"])
        self.model.eval()
        return blob["meta"]


def neural_cache_path(problem: str, num_loc: int, steps: int, batch_size: int, seed: int) -> Path:
    return cache_root() / f"pace-neural-{problem}-n{num_loc}-s{steps}-b{batch_size}-seed{seed}-clip.pt"


def pretrained_neural(problem: str, num_loc: int, steps: int, batch_size: int = 64, seed: int = 0,
                      retrain: bool = False, on_step: Callable[[int, float, float], None] | None = None,
                      train: bool = True) -> tuple[NeuralConstruction, dict]:
    """The POMO / MatNet policy for ``problem`` trained ``steps`` steps of ``batch_size`` instances of
    ``num_loc`` nodes from ``seed`` (cached; trained first when absent or ``retrain``). The record
    holds the recipe, the per-step losses and tour lengths, and the training seconds.
    ``train=False``: load only (FileNotFoundError when no cached policy of this recipe exists), so an
    evaluation never trains a policy of its own behind the caller's back."""
    solver = NeuralConstruction(problem, num_loc, seed=seed)
    recipe = dict(problem=problem, num_loc=num_loc, steps=check_int("steps", steps, 1),
                  batch_size=check_int("batch_size", batch_size, 1), seed=seed, lr=solver.lr, grad_clip=GRAD_CLIP)
    path = neural_cache_path(problem, num_loc, steps, batch_size, seed)
    if path.exists() and not retrain:
        try:
            meta = solver.load(path)
            if meta.get("recipe") == recipe:
                return solver, meta
        except Exception:  # a corrupt or foreign cache file: train again
            pass
        solver = NeuralConstruction(problem, num_loc, seed=seed)
    if not train:
        raise FileNotFoundError(f"no cached {problem} policy of recipe {recipe} at {path} (train it first)")
    record = solver.train(steps, batch_size, on_step=on_step)
    meta = dict(recipe=recipe, **record)
    solver.save(path, meta)
    return solver, meta
