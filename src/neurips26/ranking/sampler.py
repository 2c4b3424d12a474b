"""A sampler that fixes the share of positives in every minibatch (LibAUC's ``DualSampler`` idea;
LibAUC's own imports torchvision)."""

from __future__ import annotations

import math
from typing import Iterator

import torch
from torch.utils.data import Sampler

from .._checks import check_int, check_real

__all__ = ["DualSampler"]


class DualSampler(Sampler[int]):
    """Indices for a ``DataLoader(dataset, batch_size=batch_size, sampler=DualSampler(...))`` in which
    every consecutive block of ``batch_size`` indices holds exactly ``n_pos = max(1, round(pos_fraction
    · batch_size))`` positives and ``batch_size − n_pos`` negatives, in random order within the block.

    Negatives are visited once per epoch in a fresh random order (a last short block is topped up
    from a new permutation); positives are drawn cyclically from successive random permutations,
    so the rare class is oversampled without repeats within a cycle. ``labels`` (n,) in {0, 1} or
    {−1, 1}; ``num_batches`` defaults to the batches needed to visit every negative once. ``seed``
    makes the order reproducible; each ``__iter__`` advances an internal epoch counter."""

    def __init__(self, labels, batch_size: int, pos_fraction: float = 0.5, num_batches: int | None = None,
                 seed: int | None = None):
        y = torch.as_tensor(labels).reshape(-1)
        if y.numel() == 0:
            raise ValueError("labels is empty")
        pos = y == 1
        if not bool((pos | (y == 0) | (y == -1)).all()):
            raise ValueError("labels must be in {0, 1} or {-1, 1}")
        self.batch_size = check_int("batch_size", batch_size, 2)
        self.pos_fraction = check_real("pos_fraction", pos_fraction, low=0.0, low_open=True, high=1.0, high_open=True)
        self.n_pos = min(self.batch_size - 1, max(1, round(self.pos_fraction * self.batch_size)))
        self.pos_idx = torch.nonzero(pos).reshape(-1)
        self.neg_idx = torch.nonzero(~pos).reshape(-1)
        if self.pos_idx.numel() == 0 or self.neg_idx.numel() == 0:
            raise ValueError(f"labels holds one class only ({self.pos_idx.numel()} positives of {y.numel()})")
        n_neg = self.batch_size - self.n_pos
        self.num_batches = (math.ceil(self.neg_idx.numel() / n_neg) if num_batches is None
                            else check_int("num_batches", num_batches, 1))
        self.seed = None if seed is None else check_int("seed", seed)
        self._epoch = 0

    def __len__(self) -> int:
        return self.num_batches * self.batch_size

    @staticmethod
    def _cycle(idx: torch.Tensor, total: int, gen: torch.Generator) -> torch.Tensor:
        reps = math.ceil(total / idx.numel())
        perms = torch.stack([torch.randperm(idx.numel(), generator=gen) for _ in range(reps)]).reshape(-1)
        return idx[perms[:total]]

    def __iter__(self) -> Iterator[int]:
        gen = torch.Generator()
        if self.seed is None:
            gen.seed()
        else:
            gen.manual_seed(self.seed * 1_000_003 + self._epoch)
        self._epoch += 1
        nb, n_pos = self.num_batches, self.n_pos
        pos = self._cycle(self.pos_idx, nb * n_pos, gen).reshape(nb, n_pos)
        neg = self._cycle(self.neg_idx, nb * (self.batch_size - n_pos), gen).reshape(nb, -1)
        batches = torch.cat([pos, neg], 1)
        order = torch.argsort(torch.rand(batches.shape, generator=gen), dim=1)  # shuffle within each batch
        return iter(torch.gather(batches, 1, order).reshape(-1).tolist())
