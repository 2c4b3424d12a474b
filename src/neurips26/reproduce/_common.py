"""Helpers shared by experiments: a character tokenizer, procedural text, a small
causal-LM training loop, teacher-forced exact-match evaluation, offline text (the
standard library's docstrings), a grid search that extends past its edges, and pyplot on
the Agg backend."""

from __future__ import annotations

import contextlib

import importlib
import inspect
import math
import random
import warnings
import string
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import torch

PAD, BOS, EOS = 0, 1, 2


class CharTokenizer:
    """Lower-case letters, digits, space and a little punctuation; ids 0-2 are PAD/BOS/EOS."""

    alphabet = string.ascii_lowercase + string.digits + " .,?:'\n-+="

    def __init__(self) -> None:
        self.stoi = {c: i + 3 for i, c in enumerate(self.alphabet)}
        self.itos = {i: c for c, i in self.stoi.items()}

    @property
    def vocab_size(self) -> int:
        return len(self.alphabet) + 3

    def encode(self, text: str) -> list[int]:
        try:
            return [self.stoi[c] for c in text]
        except KeyError as exc:
            raise ValueError(f"character {exc.args[0]!r} is not in the tokenizer's alphabet") from None

    def decode(self, ids: Iterable[int]) -> str:
        return "".join(self.itos.get(int(i), "") for i in ids)


def pyplot():
    """matplotlib's pyplot on the non-interactive Agg backend (experiments write PNGs and
    must not need a display). Imported here, not at module level, so that ``neurips26
    list`` and the library never import matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def tune_on_grid(evaluate: Callable[[Any], Any], grid: Sequence, step: Callable[[Any, int], Any],
                 score: Callable[[Any], Any] = lambda result: result, max_extend: int = 3) -> tuple[Any, dict]:
    """A hyper-parameter grid search that extends its grid past an edge.

    Every point of ``grid`` is evaluated in order (``evaluate(x)``, once per distinct
    point). Then, up to ``max_extend`` times, while the best point tried lies on an edge of
    the points tried, one point past that edge is tried: ``step(x, +1)`` above the top,
    ``step(x, -1)`` below the bottom (the top edge is looked at first). So no method is
    reported with a value the grid merely cut off. ``score(result)`` is minimized; ties go
    to the point tried first.

    Returns the best point and ``{point: result}`` of every point tried, in the order tried.
    """
    if not len(grid):
        raise ValueError("grid is empty")
    if not (isinstance(max_extend, int) and max_extend >= 0):
        raise ValueError(f"max_extend must be an int >= 0, got {max_extend!r}")
    tried: dict = {}
    for x in grid:
        if x not in tried:
            tried[x] = evaluate(x)
    for _ in range(max_extend):
        best = min(tried, key=lambda x: score(tried[x]))
        if best == max(tried):
            edge = step(best, +1)
        elif best == min(tried):
            edge = step(best, -1)
        else:
            break
        if edge not in tried:
            tried[edge] = evaluate(edge)
    return min(tried, key=lambda x: score(tried[x])), tried


def finite_or_minus_one(x) -> float:
    """A metric value for results.json: the number, or −1 when it is None, NaN or infinite
    (a method that never reached its target, a diverged run)."""
    return float(x) if x is not None and math.isfinite(x) else -1.0


def pad_batch(seqs: Sequence[Sequence[int]], length: int | None = None) -> torch.Tensor:
    length = length or max(len(s) for s in seqs)
    out = torch.full((len(seqs), length), PAD, dtype=torch.long)
    for i, s in enumerate(seqs):
        s = s[:length]
        out[i, : len(s)] = torch.as_tensor(s, dtype=torch.long)
    return out


@dataclass
class QA:
    prompt: str
    answer: str


def train_lm(
    model: torch.nn.Module,
    batches: Callable[[int], tuple[torch.Tensor, torch.Tensor]],
    steps: int,
    lr: float,
    track: Callable = lambda it, desc, total=None: it,
    description: str = "training",
    weight_decay: float = 0.0,
) -> list[float]:
    """AdamW with linear warm-up and cosine decay; ``batches(step)`` gives
    (input_ids, labels) with -100 where no loss is taken. Returns the loss curve."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay, betas=(0.9, 0.98))
    warm = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt,
        lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + torch.cos(torch.tensor(torch.pi * s / steps)).item()),
    )
    model.train()
    losses = []
    for step in track(range(steps), description, total=steps):
        ids, labels = batches(step)
        loss = model(input_ids=ids, labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    model.eval()
    return losses


def qa_tensors(tok: CharTokenizer, items: Sequence[QA]) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids, labels): BOS prompt answer EOS, labels only on answer and EOS."""
    seqs, lab = [], []
    for qa in items:
        p = [BOS] + tok.encode(qa.prompt)
        a = tok.encode(qa.answer) + [EOS]
        seqs.append(p + a)
        lab.append([-100] * len(p) + a)
    ids = pad_batch(seqs)
    labels = torch.full_like(ids, -100)
    for i, row in enumerate(lab):
        labels[i, : len(row)] = torch.as_tensor(row)
    return ids, labels


@torch.no_grad()
def exact_match(model: torch.nn.Module, ids: torch.Tensor, labels: torch.Tensor, batch_size: int = 256) -> float:
    """Fraction of examples whose greedy continuation of the prompt is exactly the answer
    followed by EOS. Teacher forcing is exact for this: greedy decoding emits the answer
    iff the argmax at every answer position (given the correct prefix) is the answer's
    next token, so one forward pass replaces token-by-token generation."""
    model.eval()
    hits = 0
    for start in range(0, len(ids), batch_size):
        x = ids[start : start + batch_size]
        y = labels[start : start + batch_size]
        logits = model(input_ids=x).logits[:, :-1]
        target = y[:, 1:]
        mask = target != -100
        ok = (logits.argmax(-1) == target) | ~mask
        hits += int(ok.all(-1).sum())
    return hits / len(ids)


def split_unique(items: Sequence[QA], sizes: Sequence[int], rng: random.Random) -> list[list[QA]]:
    """Disjoint splits (by prompt text) of the requested sizes."""
    uniq = list({qa.prompt: qa for qa in items}.values())
    rng.shuffle(uniq)
    if sum(sizes) > len(uniq):
        raise ValueError(f"only {len(uniq)} distinct problems for splits of {list(sizes)}")
    out, at = [], 0
    for n in sizes:
        out.append(uniq[at : at + n])
        at += n
    return out


STDLIB_MODULES = ("argparse", "bisect", "collections", "csv", "dataclasses", "decimal", "difflib", "enum",
                  "fractions", "functools", "heapq", "inspect", "itertools", "json", "pathlib", "random", "re",
                  "statistics", "string", "textwrap", "typing", "unittest")


def stdlib_text() -> bytes:
    """The docstrings of a fixed list of standard-library modules and their public members,
    in a fixed order, as ASCII bytes."""
    parts = []
    for mod_name in STDLIB_MODULES:
        with warnings.catch_warnings():  # typing's deprecated io/re submodules warn when inspected
            warnings.simplefilter("ignore", DeprecationWarning)
            parts += _docstrings(importlib.import_module(mod_name))
    return "\n\n".join(parts).encode("ascii", errors="ignore")


def _docstrings(mod) -> list[str]:
    """The module's docstring, then its public classes' and functions' by name."""
    parts = [inspect.getdoc(mod) or ""]
    for name, obj in sorted(vars(mod).items()):
        if not name.startswith("_") and (inspect.isclass(obj) or inspect.isfunction(obj)):
            doc = inspect.getdoc(obj)
            if doc:
                parts.append(doc)
    return parts


@contextlib.contextmanager
def quiet_bo_warnings():
    """BoTorch's data warnings (unstandardized outcomes on purpose, in the GP-prior runs) and
    the optimizer's RuntimeWarnings of warm-started fits are expected in the BO experiments."""
    from botorch.exceptions import InputDataWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputDataWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        yield
