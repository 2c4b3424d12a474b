"""Generated tasks with exactly checkable answers, and the character-level tokenizer shipped in code.

Tasks (``TASKS``): ``add`` (a+b, 3–6 digits each; ``add_digits`` narrows it), ``mul`` (2×2 digits),
``sort`` (8–12 digits, ascending), ``reverse`` (8–12 digits) and ``word`` (two-step word arithmetic from
templates: "ann has 7, gets 5, gives 3" → 9). A prompt ends with ``=``; the answer is followed by
``[EOS]`` up to the generation length, as LLaDA's SFT pads answers with ``|EOS|``. Scoring is exact match
of the text before the first ``[EOS]`` (:func:`exact_match`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from .._checks import check_int

__all__ = ["CharTokenizer", "TOKENIZER", "TASKS", "Example", "make_examples", "encode_batch", "exact_match",
           "answers_from_tokens"]

TASKS = ("add", "mul", "sort", "reverse", "word")
NAMES = ("ann", "bob", "cy", "dee", "eve", "fay", "gus", "hal")


class CharTokenizer:
    """Characters ``0-9 a-z +*=, ?`` plus specials ``[PAD]`` (0), ``[MASK]`` (1), ``[EOS]`` (2)."""

    SPECIALS = ("[PAD]", "[MASK]", "[EOS]")

    def __init__(self, chars: str = "0123456789abcdefghijklmnopqrstuvwxyz+*=, ?"):
        if len(set(chars)) != len(chars):
            raise ValueError("chars must not repeat")
        self.chars = chars
        self.itos = list(self.SPECIALS) + list(chars)
        self.stoi = {c: i for i, c in enumerate(self.itos)}
        self.pad_id, self.mask_id, self.eos_id = 0, 1, 2

    @property
    def vocab_size(self) -> int:
        return len(self.itos)

    def encode(self, text: str) -> list[int]:
        bad = sorted({c for c in text if c not in self.stoi or c in self.SPECIALS})
        if bad:
            raise ValueError(f"characters {bad} are not in the tokenizer's alphabet {self.chars!r}")
        return [self.stoi[c] for c in text]

    def decode(self, ids: Sequence[int], stop_at_eos: bool = True) -> str:
        out = []
        for i in ids:
            i = int(i)
            if i == self.eos_id and stop_at_eos:
                break
            if i >= len(self.SPECIALS):
                out.append(self.itos[i])
            elif i == self.mask_id:
                out.append("_")
        return "".join(out)


TOKENIZER = CharTokenizer()


@dataclass(frozen=True)
class Example:
    task: str
    prompt: str
    answer: str


def _digits(rng, lo, hi, size):
    n = rng.integers(lo, hi + 1, size=size)
    return [int(rng.integers(10 ** (k - 1), 10 ** k)) for k in n]


def make_examples(task: str, n: int, seed: int, *, add_digits: tuple[int, int] = (3, 6)) -> list[Example]:
    """``n`` examples of ``task`` from ``np.random.default_rng(seed)`` (train and test sets use disjoint seeds;
    the experiment also removes exact prompt overlaps)."""
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    n = check_int("n", n, 0)
    rng = np.random.default_rng(seed)
    out = []
    if task == "add":
        a, b = _digits(rng, *add_digits, n), _digits(rng, *add_digits, n)
        out = [Example(task, f"{x}+{y}=", str(x + y)) for x, y in zip(a, b)]
    elif task == "mul":
        a, b = rng.integers(10, 100, n), rng.integers(10, 100, n)
        out = [Example(task, f"{x}*{y}=", str(x * y)) for x, y in zip(a, b)]
    elif task in ("sort", "reverse"):
        for _ in range(n):
            s = "".join(map(str, rng.integers(0, 10, int(rng.integers(8, 13)))))
            ans = "".join(sorted(s)) if task == "sort" else s[::-1]
            out.append(Example(task, f"{task[:3]} {s}=", ans))
    else:  # word: two steps
        for _ in range(n):
            name = NAMES[int(rng.integers(len(NAMES)))]
            a, b = int(rng.integers(1, 50)), int(rng.integers(1, 50))
            c = int(rng.integers(0, a + b + 1))
            out.append(Example(task, f"{name} has {a}, gets {b}, gives {c}=", str(a + b - c)))
    return out


def encode_batch(examples: Sequence[Example], gen_length: int, tokenizer: CharTokenizer = TOKENIZER,
                 with_answers: bool = True) -> dict[str, torch.Tensor]:
    """Left-padded prompts (``prompt_ids``, ``prompt_mask``) and, with answers, ``answer_ids`` of shape
    (n, gen_length): the answer then ``[EOS]`` to the end. ValueError when an answer does not fit."""
    gen_length = check_int("gen_length", gen_length, 1)
    prompts = [tokenizer.encode(e.prompt) for e in examples]
    lp = max(map(len, prompts))
    ids = torch.full((len(prompts), lp), tokenizer.pad_id, dtype=torch.long)
    pmask = torch.zeros((len(prompts), lp), dtype=torch.bool)
    for i, p in enumerate(prompts):
        ids[i, lp - len(p):] = torch.tensor(p)
        pmask[i, lp - len(p):] = True
    out = {"prompt_ids": ids, "prompt_mask": pmask}
    if with_answers:
        ans = torch.full((len(prompts), gen_length), tokenizer.eos_id, dtype=torch.long)
        for i, e in enumerate(examples):
            a = tokenizer.encode(e.answer)
            if len(a) >= gen_length:
                raise ValueError(f"answer {e.answer!r} does not fit gen_length={gen_length} (needs one [EOS])")
            ans[i, :len(a)] = torch.tensor(a)
        out["answer_ids"] = ans
    return out


def answers_from_tokens(tokens: torch.Tensor, tokenizer: CharTokenizer = TOKENIZER) -> list[str]:
    """The generated text of each row of ``tokens`` (n, gen_length), up to the first ``[EOS]``."""
    return [tokenizer.decode(row.tolist()) for row in tokens]


def exact_match(tokens: torch.Tensor, examples: Sequence[Example], tokenizer: CharTokenizer = TOKENIZER) -> np.ndarray:
    """Boolean array: generated answer (before ``[EOS]``) equals the reference, character for character."""
    got = answers_from_tokens(tokens, tokenizer)
    if len(got) != len(examples):
        raise ValueError(f"{len(got)} generations for {len(examples)} examples")
    return np.array([g == e.answer for g, e in zip(got, examples)], dtype=bool)
