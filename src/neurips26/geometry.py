"""Geometry shared by the fields: norms with their linear minimization oracle (LMO) and
dual norm, and the steepest-descent step they define.

For a norm ‖·‖ with dual ‖·‖_*, ``lmo(g) = argmax_{‖d‖ ≤ 1} ⟨g, d⟩`` and
``⟨g, lmo(g)⟩ = ‖g‖_*``; the normalized steepest-descent step is ``x ← x − lr · lmo(g)``
(normalized SGD for ℓ2, sign descent for ℓ∞, Muon-style orthogonalized steps for the
spectral norm), and ``sharp(g) = ‖g‖_* · lmo(g)`` is the unnormalized steepest-descent
direction. The optimizers (:mod:`neurips26.optim`) and the parameter servers
(:mod:`neurips26.distributed`) both build on these objects.

Non-finite input. The oracles are per-step hot paths, so they check only where the check
costs no extra host synchronization: the ℓ2 LMO (which reads ‖g‖ on the host anyway) and
every method of the exact :class:`Spectral` norm (each runs an SVD, which synchronizes on
CUDA anyway) raise :class:`~neurips26.linalg.NonFiniteError` (a FloatingPointError and a
ValueError) naming the argument, instead of returning zeros, NaN or LAPACK's raw
``_LinAlgError``. The elementwise ones do not check: ``L2.norm``/``dual_norm`` and the
ℓ∞ methods give NaN for NaN input, and ``Linf.lmo`` follows ``torch.sign``, whose sign of
NaN is 0; ``Spectral(exact=False).lmo`` gives NaN. The optimizers (:mod:`neurips26.optim`)
and the parameter servers (:mod:`neurips26.distributed`) check their gradients once per
step before calling them.
"""

from __future__ import annotations

import abc
import math

import torch

from ._checks import check_real
from .linalg import NonFiniteError, check_finite_values, finite_linalg, msign, nonfinite_error, polar

__all__ = ["Norm", "L2", "Linf", "Spectral", "Blocks", "get_norm", "nsgd_step"]


class Norm(abc.ABC):
    """A norm on one parameter tensor: ``norm``, ``dual_norm``, ``lmo`` and ``sharp``."""

    name = "norm"

    @abc.abstractmethod
    def norm(self, x: torch.Tensor) -> torch.Tensor:
        """‖x‖ (a 0-d tensor)."""

    @abc.abstractmethod
    def dual_norm(self, g: torch.Tensor) -> torch.Tensor:
        """‖g‖_* = max_{‖d‖ ≤ 1} ⟨g, d⟩."""

    @abc.abstractmethod
    def lmo(self, g: torch.Tensor) -> torch.Tensor:
        """A maximizer of ⟨g, d⟩ over the unit ball (zero for g = 0), of g's shape."""

    def sharp(self, g: torch.Tensor) -> torch.Tensor:
        """The sharp operator g♯ = ‖g‖_* · lmo(g) = argmax_d ⟨g, d⟩ − ½‖d‖², the
        steepest-descent direction whose length is the dual norm (Kelner et al. 2014;
        Bernstein & Newhouse, "Old optimizer, new norm"); ⟨g, g♯⟩ = ‖g‖_*²."""
        return self.dual_norm(g) * self.lmo(g)


class L2(Norm):
    """Euclidean (Frobenius) norm: lmo(g) = g / ‖g‖₂, self-dual. ``lmo`` raises
    :class:`~neurips26.linalg.NonFiniteError` when ‖g‖ is not finite (NaN or Inf in g, or
    entries whose squares overflow), where g / ‖g‖ would be NaN or silently zero."""

    name = "l2"

    def norm(self, x):
        return torch.linalg.vector_norm(x)

    def dual_norm(self, g):
        return torch.linalg.vector_norm(g)

    def lmo(self, g):
        n = torch.linalg.vector_norm(g)
        length = float(n)  # the one host read the zero test needs
        if not math.isfinite(length):
            raise nonfinite_error("g", g, "the l2 LMO g / ||g||")
        return g / n if length > 0 else torch.zeros_like(g)


class Linf(Norm):
    """ℓ∞ norm: lmo(g) = sign(g) (sign descent), dual ‖g‖₁. No check of non-finite input
    (a hot path without a host read): ``torch.sign`` maps NaN to 0, so a NaN entry of g
    gives a 0 step there; the optimizers check their gradients before."""

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
    1, so ⟨g, lmo(g)⟩ only approximates ‖g‖_*.

    The exact methods raise :class:`~neurips26.linalg.NonFiniteError` for a tensor holding
    NaN or Inf (torch's SVD either fails with a raw ``_LinAlgError`` or returns NaN
    singular values, and the polar factor would be all zeros); the check reads the
    singular values the SVD computed, after the host synchronization the SVD makes anyway.
    ``exact=False`` does not check (NaN in, NaN out), to keep its step free of host reads."""

    name = "spectral"

    def __init__(self, exact: bool = True, steps: int = 5):
        self.exact = exact
        self.steps = steps

    @staticmethod
    def _matrix(x):
        if x.ndim < 2:
            raise ValueError(f"the spectral norm needs a matrix, got a tensor of shape {tuple(x.shape)}")
        return x.reshape(x.shape[0], math.prod(x.shape[1:]))  # not -1: a tensor with no rows has no -1

    @staticmethod
    def _checked_norm(name, x, ord, what):
        with finite_linalg(name, x, what):
            value = torch.linalg.matrix_norm(Spectral._matrix(x), ord=ord)
        check_finite_values(value, name, x, what)
        return value

    def norm(self, x):
        return self._checked_norm("x", x, 2, "the spectral norm")

    def dual_norm(self, g):
        return self._checked_norm("g", g, "nuc", "the nuclear norm (the spectral norm's dual)")

    def lmo(self, g):
        m = self._matrix(g)
        if not self.exact:
            return msign(m, steps=self.steps, check_finite=False).reshape(g.shape)
        try:
            d = polar(m)
        except NonFiniteError:
            raise nonfinite_error("g", g, "the spectral norm's LMO (the polar factor of g)") from None
        return d.reshape(g.shape)

    def sharp(self, g):
        """‖g‖_* U Vᵀ from one SVD g = U S Vᵀ (exact) as (U · ΣS) Vᵀ. Singular directions
        of zero singular value are kept here (any completion of the polar factor is a
        maximizer), unlike :meth:`lmo`, which drops them."""
        if not self.exact:
            return super().sharp(g)
        what = "the spectral norm's sharp operator (an SVD)"
        with finite_linalg("g", g, what):
            u, s, vh = torch.linalg.svd(self._matrix(g), full_matrices=False)
        check_finite_values(s, "g", g, what)
        return ((u * s.sum()) @ vh).reshape(g.shape)


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


def nsgd_step(
    params: list[torch.Tensor],
    grads: list[torch.Tensor],
    momenta: list[torch.Tensor] | None,
    norms: list[Norm],
    *,
    lr: float,
    beta: float,
    weight_decay: float,
    nesterov: bool,
) -> None:
    """Normalized steepest descent with momentum in a chosen norm, one step for each
    parameter (the functional core of :class:`neurips26.optim.NSGD`):

        m ← β m + (1 − β) g,   d = lmo(m)  (Nesterov: lmo((1 − β) g + β m)),
        p ← p (1 − lr λ) − lr d           (decoupled weight decay λ, skipped when 0).

    ``params`` and ``momenta`` (tensors of the parameters' shapes) are updated in place,
    as torch.optim's functional cores do: the momentum is advanced in its own buffer and
    the step is one fused ``p.add_(d, alpha=-lr)``. ``momenta=None`` (with ``beta=0``) is
    the memoryless step p ← p − lr·lmo(g) that the parameter servers of
    :mod:`neurips26.distributed` take, without a buffer.

    The settings are checked on every call (Python numbers only, no tensor read): ``lr``
    finite (its sign is the caller's, as in torch.optim's functional cores), ``beta`` in
    [0, 1), ``weight_decay`` finite and >= 0, one gradient, norm (and momentum) per
    parameter. The gradients are not checked here: the callers do it once per step.
    """
    check_real("lr", lr)
    check_real("beta", beta, low=0.0, high=1.0, high_open=True)
    check_real("weight_decay", weight_decay, low=0.0)
    lists = {"grads": grads, "norms": norms, **({} if momenta is None else {"momenta": momenta})}
    for name, values in lists.items():
        if len(values) != len(params):
            raise ValueError(f"nsgd_step needs one entry of {name} per parameter: {len(params)} params, "
                             f"{len(values)} {name}")
    if momenta is None:
        if beta != 0 or nesterov:
            raise ValueError(f"momenta=None is the memoryless step: it needs beta=0 and nesterov=False, got beta={beta!r}")
        momenta = [None] * len(params)
    for p, g, m, norm in zip(params, grads, momenta, norms):
        if m is None:
            direction = norm.lmo(g)
        else:
            m.mul_(beta).add_(g, alpha=1 - beta)
            direction = norm.lmo(g.mul(1 - beta).add(m, alpha=beta) if nesterov else m)
        if weight_decay:
            p.mul_(1 - lr * weight_decay)
        p.add_(direction, alpha=-lr)
