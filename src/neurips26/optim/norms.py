"""Norms with their linear minimization oracle (LMO), for steepest descent in a chosen
geometry (normalized SGD, sign descent, Muon-style spectral descent).

For a norm ‖·‖ with dual ‖·‖_*, ``lmo(g) = argmax_{‖d‖ ≤ 1} ⟨g, d⟩`` and
``⟨g, lmo(g)⟩ = ‖g‖_*``; the steepest-descent step is ``x ← x − lr · lmo(g)``.
"""

from __future__ import annotations

import abc

import torch

from ..linalg import msign, polar

__all__ = ["Norm", "L2", "Linf", "Spectral", "Blocks", "get_norm"]


class Norm(abc.ABC):
    """A norm on one parameter tensor: ``norm``, ``dual_norm`` and ``lmo``."""

    name = "norm"

    @abc.abstractmethod
    def norm(self, x: torch.Tensor) -> torch.Tensor:
        """‖x‖ (a 0-d tensor)."""

    @abc.abstractmethod
    def dual_norm(self, g: torch.Tensor) -> torch.Tensor:
        """‖g‖_* = max_{‖d‖ ≤ 1} ⟨g, d⟩."""

    @abc.abstractmethod
    def lmo(self, g: torch.Tensor) -> torch.Tensor:
        """A maximizer of ⟨g, d⟩ over the unit ball (zero for g = 0)."""


class L2(Norm):
    """Euclidean (Frobenius) norm: lmo(g) = g / ‖g‖₂, self-dual."""

    name = "l2"

    def norm(self, x):
        return torch.linalg.vector_norm(x)

    def dual_norm(self, g):
        return torch.linalg.vector_norm(g)

    def lmo(self, g):
        n = torch.linalg.vector_norm(g)
        return g / n if n > 0 else torch.zeros_like(g)


class Linf(Norm):
    """ℓ∞ norm: lmo(g) = sign(g) (sign descent), dual ‖g‖₁."""

    name = "linf"

    def norm(self, x):
        return x.abs().max() if x.numel() else x.new_zeros(())

    def dual_norm(self, g):
        return g.abs().sum()

    def lmo(self, g):
        return torch.sign(g)


class Spectral(Norm):
    """Spectral norm of a matrix (tensors of more dims are viewed as (shape[0], -1)):
    lmo(g) = U Vᵀ, the polar factor (Muon's orthogonalized direction), dual: the nuclear
    norm. ``exact=False`` uses 5 Newton–Schulz steps (``linalg.msign``) instead of an
    SVD: faster on large matrices, but the direction's singular values lie near, not at,
    1, so ⟨g, lmo(g)⟩ only approximates ‖g‖_*."""

    name = "spectral"

    def __init__(self, exact: bool = True, steps: int = 5):
        self.exact = exact
        self.steps = steps

    @staticmethod
    def _matrix(x):
        if x.ndim < 2:
            raise ValueError(f"the spectral norm needs a matrix, got a tensor of shape {tuple(x.shape)}")
        return x.reshape(x.shape[0], -1)

    def norm(self, x):
        return torch.linalg.matrix_norm(self._matrix(x), ord=2)

    def dual_norm(self, g):
        return torch.linalg.matrix_norm(self._matrix(g), ord="nuc")

    def lmo(self, g):
        m = self._matrix(g)
        d = polar(m) if self.exact else msign(m, steps=self.steps)
        return d.reshape(g.shape)


class Blocks(Norm):
    """A norm on a flat vector that holds several parameters (a model's parameters
    concatenated, as a parameter server keeps them): ``‖x‖ = max_i ‖x_i‖_i``, block i
    being the next ``prod(shapes[i])`` entries reshaped to ``shapes[i]``.

    With the max over blocks the dual is the sum of the blocks' duals and the LMO is
    the blocks' LMOs side by side, so every block moves by exactly one unit of its own
    norm: the per-layer geometry of spectral descent (e.g. ``Spectral()`` for weight
    matrices, ``Linf()`` or ``L2()`` for biases)."""

    name = "blocks"

    def __init__(self, shapes, norms):
        self.shapes = [torch.Size(s) for s in shapes]
        norms = [get_norm(n) for n in norms]
        if len(norms) != len(self.shapes):
            raise ValueError(f"Blocks needs one norm per shape: {len(self.shapes)} shapes, {len(norms)} norms")
        if not self.shapes:
            raise ValueError("Blocks needs at least one block")
        self.norms = norms
        self.sizes = [s.numel() for s in self.shapes]
        self.numel = sum(self.sizes)

    @classmethod
    def for_parameters(cls, params, matrix: str | Norm = "spectral", other: str | Norm = "l2") -> "Blocks":
        """One block per parameter: ``matrix`` for 2-D and larger ones, ``other`` for the rest."""
        shapes = [tuple(p.shape) for p in params]
        return cls(shapes, [matrix if len(s) >= 2 else other for s in shapes])

    def _split(self, x):
        if x.ndim != 1 or x.numel() != self.numel:
            raise ValueError(f"Blocks expects a flat vector of {self.numel} entries, got shape {tuple(x.shape)}")
        return [b.reshape(s) for b, s in zip(torch.split(x, self.sizes), self.shapes)]

    def norm(self, x):
        return torch.stack([n.norm(b) for n, b in zip(self.norms, self._split(x))]).max()

    def dual_norm(self, g):
        return torch.stack([n.dual_norm(b) for n, b in zip(self.norms, self._split(g))]).sum()

    def lmo(self, g):
        return torch.cat([n.lmo(b).reshape(-1) for n, b in zip(self.norms, self._split(g))])


_NAMED = {"l2": L2, "linf": Linf, "spectral": Spectral}


def get_norm(norm: str | Norm) -> Norm:
    """A Norm from an instance or a name ('l2', 'linf', 'spectral')."""
    if isinstance(norm, Norm):
        return norm
    if isinstance(norm, str) and norm in _NAMED:
        return _NAMED[norm]()
    raise ValueError(f"norm must be a Norm or one of {sorted(_NAMED)}, got {norm!r}")
