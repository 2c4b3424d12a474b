"""Where a proposer maximizes its acquisition: a box, or a finite set of candidates."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ._checks import check_box, check_int, check_points

__all__ = ["SearchSpace"]


@dataclass
class SearchSpace:
    """Where acquisitions are maximized: the box ``bounds`` (2, d) by BoTorch's
    ``optimize_acqf`` (``num_restarts`` L-BFGS-B starts from ``raw_samples`` Sobol points),
    or, when ``candidates`` (N, d) is given, exactly over that finite set.

    ValueError / TypeError for bounds that are not a finite (2, d) box with lower < upper,
    candidates that are not a finite non-empty (N, d) tensor, and ``num_restarts``,
    ``raw_samples`` or ``chunk`` that are not integers >= 1."""

    bounds: Tensor
    candidates: Tensor | None = None
    num_restarts: int = 4
    raw_samples: int = 256
    chunk: int = 4096  # candidates per acquisition call, to bound memory

    def __post_init__(self):
        self.bounds = check_box("bounds", torch.as_tensor(self.bounds, dtype=torch.float64))
        if self.candidates is not None:
            self.candidates = check_points("candidates", torch.as_tensor(self.candidates, dtype=torch.float64),
                                           self.dim, allow_empty=False, rows="N")
        self.num_restarts = check_int("num_restarts", self.num_restarts, 1)
        self.raw_samples = check_int("raw_samples", self.raw_samples, 1)
        self.chunk = check_int("chunk", self.chunk, 1)

    @property
    def dim(self) -> int:
        return self.bounds.shape[1]

    def maximize(self, acqf, q: int = 1) -> Tensor:
        """argmax of ``acqf`` over the space, (q, d); for q > 1 the acquisition is joint."""
        if self.candidates is None:
            from botorch.optim import optimize_acqf

            x, _ = optimize_acqf(acqf, self.bounds, q=q, num_restarts=self.num_restarts, raw_samples=self.raw_samples)
            return x.detach()
        if q != 1:
            from botorch.optim import optimize_acqf_discrete

            x, _ = optimize_acqf_discrete(acqf, q=q, choices=self.candidates, max_batch_size=self.chunk, unique=False)
            return x.detach()
        return self.candidates[self.evaluate(acqf).argmax()][None]

    def evaluate(self, acqf) -> Tensor:
        """``acqf`` on every candidate, (N,); one (chunk, 1, d) t-batch per call."""
        with torch.no_grad():
            return torch.cat([acqf(c[:, None, :]) for c in self.candidates.split(self.chunk)])

