"""The edit ranker: a small message-passing network that scores candidate edits of a state,
trained by listwise imitation of reference solutions, and cached locally once trained.

Architecture (plain torch, no torch-geometric): node features → MLP → ``layers`` residual
rounds of mean aggregation over the task's message edges (each message sees the sender's
embedding and the edge's features) → per edit, [Σ h over its vertices, Π h over its vertices,
edit features] → MLP → one score. Pair edits (TSP joins) are symmetric by construction.

Training (listwise imitation): a state drawn on or near a reference solution's trajectory, its
candidate edits, and the target set T of edits consistent with the reference solution; the
loss is -log Σ_{e∈T} softmax(scores)_e (softmax cross-entropy over the candidate list).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch
from torch import nn

from ..._atomic import atomic_open
from ..._cache import cache_root
from ..._checks import check_int, check_real
from .base import Features

__all__ = ["EditRanker", "RandomRanker", "TrainingExample", "training_examples", "train_ranker", "cache_path",
           "save_ranker", "load_ranker"]


def _mlp(i: int, h: int, o: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(i, h), nn.ReLU(), nn.Linear(h, o))


class EditRanker(nn.Module):
    """Scores (m,) for the m candidate edits of one state (``score``), or a batch of states.

    dims: (Fx, Fe, Fa) node, message-edge and edit feature sizes (a task's ``feature_dims``);
    hidden: embedding width; layers: message-passing rounds."""

    def __init__(self, dims: Sequence[int], hidden: int = 32, layers: int = 3):
        super().__init__()
        fx, fe, fa = (check_int("dims", d, 1) for d in dims)
        self.dims = (fx, fe, fa)
        self.hidden, self.layers = check_int("hidden", hidden, 1), check_int("layers", layers, 0)
        self.embed = _mlp(fx, hidden, hidden)
        # A message is W2·relu(W1·[h_src, e]); W2 is linear, so it is applied after the mean over
        # a node's incoming arcs (one matrix product per node instead of one per arc).
        self.msg_in = nn.ModuleList(nn.Linear(hidden + fe, hidden) for _ in range(layers))
        self.msg_out = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(layers))
        self.upd = nn.ModuleList(_mlp(2 * hidden, hidden, hidden) for _ in range(layers))
        self.norm = nn.ModuleList(nn.LayerNorm(hidden) for _ in range(layers))
        self.head = _mlp(2 * hidden + fa, hidden, 1)

    def forward(self, x, edge_index, edge_attr, edits, edit_attr) -> torch.Tensor:
        """x (N, Fx), edge_index (2, E) long, edge_attr (E, Fe), edits (m, a) long, edit_attr (m, Fa)
        → scores (m,)."""
        h = self.embed(x)
        src, dst = edge_index[0], edge_index[1]
        like = dict(dtype=x.dtype, device=x.device)
        count = torch.zeros(x.shape[0], 1, **like).index_add_(0, dst, torch.ones(len(dst), 1, **like))
        count = count.clamp_min(1.0)
        for w1, w2, upd, norm in zip(self.msg_in, self.msg_out, self.upd, self.norm):
            hw = h @ w1.weight[:, : self.hidden].T  # per node, gathered per arc below
            m = torch.relu(hw[src] + edge_attr @ w1.weight[:, self.hidden:].T + w1.bias)
            agg = w2(torch.zeros_like(h).index_add_(0, dst, m) / count)
            h = norm(h + upd(torch.cat([h, agg], 1)))
        he = h[edits]  # (m, a, hidden)
        return self.head(torch.cat([he.sum(1), he.prod(1), edit_attr], 1)).squeeze(1)

    @torch.no_grad()
    def scores(self, f: Features, rng: np.random.Generator | None = None) -> np.ndarray:
        """Scores (m,) of one state's candidate edits (NumPy in, NumPy out; rng unused)."""
        was = self.training
        self.eval()
        out = self(torch.from_numpy(f.x), torch.from_numpy(f.edge_index).long(), torch.from_numpy(f.edge_attr),
                   torch.from_numpy(np.ascontiguousarray(f.edits)).long(), torch.from_numpy(f.edit_attr))
        self.train(was)
        return out.numpy().astype(np.float64)


class RandomRanker:
    """The ablation: uniform random scores (from the solver's generator), i.e. a random
    ranking of the candidate edits."""

    def scores(self, f: Features, rng: np.random.Generator | None = None) -> np.ndarray:
        if rng is None:
            raise ValueError("RandomRanker needs the solver's rng")
        return rng.random(len(f.edits))


@dataclass(frozen=True)
class TrainingExample:
    """One listwise example: a state's features and the mask (m,) of target edits."""

    features: Features
    target: np.ndarray


def training_examples(task, inst, ref_sol, rng: np.random.Generator, n_states: int = 8,
                      perturbed: float = 0.5) -> list[TrainingExample]:
    """States of one instance with their targets. A fraction ``1 - perturbed`` lies on the
    reference trajectory (the reference solution with a random subset of units freed); the rest
    is met at refinement time (a closure of a random partial state, locally destroyed). States
    where no candidate is consistent with the reference are skipped."""
    out = []
    n = task.n_units(inst)
    for k in range(n_states):
        if k < round(n_states * (1 - perturbed)):
            units = np.flatnonzero(rng.random(n) < rng.uniform(0.1, 0.9))
            state = task.destroy(inst, ref_sol, units)
        else:
            s = task.empty_state(inst)
            for _ in range(int(rng.integers(0, max(1, n // 4)))):
                c = task.candidates(s)
                if not len(c):
                    break
                s = task.transition(s, c[rng.integers(len(c))])
            sol = task.complete(s)
            units = task.neighbourhood(inst, max(2, int(n * rng.uniform(0.1, 0.4))), rng)
            state = task.destroy(inst, sol, units)
        edits = task.candidates(state)
        if len(edits) < 2:
            continue
        target = task.reference_targets(state, edits, ref_sol)
        if target.any() and not target.all():
            out.append(TrainingExample(task.features(state, edits), target))
    return out


def _batch(examples: Sequence[TrainingExample]):
    xs, eis, eas, eds, edas, seg, tgt = [], [], [], [], [], [], []
    off = 0
    for b, ex in enumerate(examples):
        f = ex.features
        xs.append(f.x)
        eis.append(f.edge_index + off)
        eas.append(f.edge_attr)
        eds.append(f.edits + off)
        edas.append(f.edit_attr)
        seg.append(np.full(len(f.edits), b))
        tgt.append(ex.target)
        off += f.x.shape[0]
    t = lambda a, dt=torch.float32: torch.from_numpy(np.concatenate(a)).to(dt)  # noqa: E731
    return (t(xs), torch.from_numpy(np.concatenate(eis, 1)).long(), t(eas), t(eds, torch.long), t(edas),
            t(seg, torch.long), t(tgt, torch.bool))


def listwise_loss(scores: torch.Tensor, seg: torch.Tensor, target: torch.Tensor, n_lists: int) -> torch.Tensor:
    """Mean over lists of -log Σ_{targets} softmax(scores within the list)."""
    like = dict(dtype=scores.dtype, device=scores.device)
    mx = torch.full((n_lists,), -torch.inf, **like).scatter_reduce_(0, seg, scores.detach(), "amax")
    e = torch.exp(scores - mx[seg])
    z = torch.zeros(n_lists, **like).index_add_(0, seg, e)
    zt = torch.zeros(n_lists, **like).index_add_(0, seg, e * target)
    return -(torch.log(zt) - torch.log(z)).mean()


def train_ranker(task, examples: Sequence[TrainingExample], epochs: int = 20, batch: int = 32, lr: float = 2e-3,
                 hidden: int = 32, layers: int = 3, seed: int = 0,
                 on_epoch: Callable[[int, float], None] | None = None, device="cpu",
                 deadline: float | None = None) -> tuple[EditRanker, list[float]]:
    """A fresh ranker for ``task`` trained with Adam on the listwise loss; (ranker on the CPU, per-epoch loss).

    ``device``: where the batches and the weights live (the initial weights are drawn on the CPU, so a
    seed gives the same start everywhere). ``deadline``: a ``time.perf_counter()`` value after which no
    further batch starts; the weights and losses of the epochs finished by then are returned (a cut
    epoch's batches are undone; fewer losses than ``epochs`` say it was cut)."""
    epochs = check_int("epochs", epochs, 1)
    batch = check_int("batch", batch, 1)
    lr = check_real("lr", lr, low=0.0, low_open=True)
    if not examples:
        raise ValueError("examples must not be empty")
    gen = torch.Generator().manual_seed(int(seed))
    torch.manual_seed(int(seed))
    device = torch.device(device)
    model = EditRanker(task.feature_dims, hidden, layers).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    finished = None  # the weights at the last epoch's end (kept only under a deadline)
    if deadline is not None:
        finished = {k: v.clone() for k, v in model.state_dict().items()}
    for ep in range(epochs):
        perm = torch.randperm(len(examples), generator=gen).tolist()
        # the epoch's loss summed on the device: one host sync per epoch, not per batch
        total = torch.zeros((), dtype=torch.float64, device=device)
        for s in range(0, len(perm), batch):
            if deadline is not None and time.perf_counter() > deadline:
                model.load_state_dict(finished)
                return model.cpu().eval(), losses
            chunk = [examples[i] for i in perm[s: s + batch]]
            x, ei, ea, ed, eda, seg, tgt = (a.to(device) for a in _batch(chunk))  # built on the CPU per batch
            loss = listwise_loss(model(x, ei, ea, ed, eda), seg, tgt, len(chunk))
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.detach().double() * len(chunk)
        losses.append(float(total) / len(examples))
        if deadline is not None:
            finished = {k: v.clone() for k, v in model.state_dict().items()}
        if on_epoch is not None:
            on_epoch(ep, losses[-1])
    return model.cpu().eval(), losses


def cache_path(name: str) -> Path:
    """Where a trained ranker is kept: ``cache_root()``/pace-NAME-ranker.pt."""
    return cache_root() / f"pace-{name}-ranker.pt"


def save_ranker(model: EditRanker, path: Path, meta: dict) -> None:
    """Write the ranker and its training record atomically (a temporary file renamed)."""
    with atomic_open(path) as fh:
        torch.save({"dims": model.dims, "hidden": model.hidden, "layers": model.layers,
                    "state_dict": model.state_dict(), "meta": meta}, fh)


def load_ranker(path: Path) -> tuple[EditRanker, dict]:
    blob = torch.load(Path(path), map_location="cpu", weights_only=True)
    model = EditRanker(blob["dims"], blob["hidden"], blob["layers"])
    model.load_state_dict(blob["state_dict"])
    model.eval()
    return model, blob["meta"]
