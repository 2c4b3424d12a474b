"""Regularized large neighbourhood search (RLNS) as an MCMC sampler over feasible solutions.

Large neighbourhood search destroys part of a solution (a neighbourhood of units) and
re-optimizes it with the rest held fixed. RLNS regularizes that local re-optimization:

* ``Entropic(T)``: sample the block from the Gibbs distribution ∝ exp(θᵀy / T) restricted to
  the feasible completions. The chain is then exact block Gibbs sampling: every step leaves
  p(y) ∝ exp(θᵀy / T) on the feasible set invariant (detailed balance holds block by block).
* ``Perturbed(σ, noise)``: add Gumbel or Gaussian noise to θ, then re-optimize the block
  exactly (a perturbed local optimizer; the chain's stationary law is not Gibbs in general).
* ``Greedy()``: plain LNS, the exact local argmax (a hill climber, not a sampler).

Everything runs on a batch of B chains at once (numpy arrays (B, n_vars)); θ is one vector
for all chains or one per chain (B, n_vars), which is what learning needs (one instance
per chain group).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .._checks import check_int, check_real
from ._checks import check_feasible, check_states
from .exact import solve_binary_milp

__all__ = ["RandomBlock", "BruteForceLocalSolver", "MILPLocalSolver", "Entropic", "Perturbed", "Greedy", "RLNS",
           "IncompatibleComponentsError"]


class IncompatibleComponentsError(ValueError, TypeError):
    """An RLNS whose problem, neighbourhood, regularizer and local solver cannot work
    together (e.g. entropic sampling with a local solver that returns only the block's
    optimum). A ValueError, as any bad combination of arguments; also a TypeError, which is
    what the same mistake raised at the first step before RLNS checked it up front."""


@dataclass(frozen=True)
class RandomBlock:
    """Free ``size`` units drawn uniformly without replacement (every subset of that size
    equally likely)."""

    size: int

    def __post_init__(self):
        object.__setattr__(self, "size", check_int("size", self.size, 1))  # a NumPy integer becomes an int

    def check(self, problem) -> None:
        """Raise a ValueError when ``problem`` has fewer units than the block frees."""
        if self.size > problem.n_units:
            raise ValueError(f"neighbourhood size {self.size} exceeds the problem's {problem.n_units} units")

    def sample(self, problem, B: int, rng: np.random.Generator) -> np.ndarray:
        """(B, size) unit indices, one block per chain."""
        self.check(problem)
        return np.argsort(rng.random((B, problem.n_units)), axis=1)[:, : self.size]


@dataclass(frozen=True)
class BruteForceLocalSolver:
    """Enumerate every feasible completion of the block (the problem's ``block_candidates``);
    exact for any regularizer. Refuses blocks with more than ``max_candidates`` completions
    before allocating them."""

    max_candidates: int = 4096
    enumerates: ClassVar[bool] = True  # serves sampling regularizers (Entropic) too

    def __post_init__(self):
        object.__setattr__(self, "max_candidates", check_int("max_candidates", self.max_candidates, 1))

    def check_block(self, problem, size: int) -> None:
        """Raise when blocks of ``size`` units of ``problem`` cannot be enumerated: the
        problem does not enumerate completions at all (IncompatibleComponentsError), or a
        block has more than ``max_candidates`` (ValueError)."""
        per_unit = problem.values_per_unit
        if per_unit is None:
            raise IncompatibleComponentsError(
                f"{problem!r} does not enumerate its block completions: re-optimize its blocks with MILPLocalSolver "
                "and an argmax regularizer (Perturbed or Greedy)")
        if per_unit ** size > self.max_candidates:
            raise ValueError(f"a block of {size} units has {per_unit}^{size} completions, more than "
                             f"max_candidates={self.max_candidates}: use a smaller neighbourhood")

    def candidates(self, problem, Y, S):
        self.check_block(problem, S.shape[1])
        return problem.block_candidates(Y, S)

    def argmax(self, problem, Y, S, theta):
        """The exact block optimum of θᵀy for every chain (θ (n,) or (B, n))."""
        cands, mask = self.candidates(problem, Y, S)
        choice = np.argmax(np.where(mask, _scores(cands, theta), -np.inf), axis=1)
        return cands[np.arange(len(Y)), choice]


@dataclass(frozen=True)
class MILPLocalSolver:
    """Re-optimize the block exactly with HiGHS (``scipy.optimize.milp``) on the problem's
    ``block_milp`` formulation, one chain at a time: for blocks too large to enumerate.
    It returns the optimum only, so it serves the argmax regularizers (``Perturbed``,
    ``Greedy``); entropic sampling needs the enumeration of :class:`BruteForceLocalSolver`."""

    time_limit: float | None = None
    enumerates: ClassVar[bool] = False  # the optimum only: argmax regularizers

    def __post_init__(self):
        if self.time_limit is not None:
            check_real("time_limit", self.time_limit, low=0)

    def candidates(self, problem, Y, S):
        raise TypeError("MILPLocalSolver returns the block optimum only; Entropic sampling needs "
                        "BruteForceLocalSolver's enumeration")

    def argmax(self, problem, Y, S, theta):
        Y = np.asarray(Y)
        out = Y.copy()
        for b in range(len(Y)):
            th = theta if theta.ndim == 1 else theta[b]
            free, constraints = problem.block_milp(Y[b], S[b])
            out[b, free] = solve_binary_milp(-th[free], constraints, self.time_limit)
        return out


def _scores(cands: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """(B, C) objective θᵀy of each candidate; θ is (n,) or (B, n)."""
    if theta.ndim == 1:
        return cands @ theta
    return np.einsum("bcn,bn->bc", cands, theta)


def _masked(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return np.where(mask, scores, -np.inf)


@dataclass(frozen=True)
class Entropic:
    """Sample the block from softmax(θᵀy / T) over the feasible completions."""

    temperature: float = 1.0

    def __post_init__(self):
        check_real("temperature", self.temperature, low=0, low_open=True)

    def probabilities(self, cands, mask, theta) -> np.ndarray:
        z = _masked(_scores(cands, theta) / self.temperature, mask)
        z = z - z.max(axis=1, keepdims=True)
        p = np.exp(z)
        return p / p.sum(axis=1, keepdims=True)

    def choose(self, cands, mask, theta, rng) -> np.ndarray:
        z = _masked(_scores(cands, theta) / self.temperature, mask)
        return np.argmax(z + rng.gumbel(size=z.shape), axis=1)  # Gumbel-max: an exact softmax draw


@dataclass(frozen=True)
class Perturbed:
    """Re-optimize the block exactly for θ + σε, ε Gumbel or standard normal per variable
    and per chain, drawn afresh at every step."""

    scale: float = 1.0
    noise: str = "gumbel"

    def __post_init__(self):
        check_real("scale", self.scale, low=0)
        if self.noise not in ("gumbel", "gaussian"):
            raise ValueError(f"noise must be 'gumbel' or 'gaussian', got {self.noise!r}")

    def perturb(self, theta, B: int, rng) -> np.ndarray:
        """(B, n): θ + σε, the objective each chain's local solver maximizes this step."""
        n = theta.shape[-1]
        eps = rng.gumbel(size=(B, n)) if self.noise == "gumbel" else rng.standard_normal((B, n))
        return theta + self.scale * eps


class Greedy:
    """Plain LNS: the exact local argmax (ties to the first candidate)."""

    def perturb(self, theta, B: int, rng) -> np.ndarray:
        return theta


class RLNS:
    """The RLNS chain: at every step free a neighbourhood, then let the regularizer pick the
    block's new value among the local solver's feasible completions.

    Args:
        problem: a problem of :mod:`neurips26.combinatorial.problems` (or anything with the
            same interface).
        neighborhood: which units to free (default ``RandomBlock(2)``).
        regularizer: ``Entropic`` (exact block Gibbs), ``Perturbed`` or ``Greedy``.
        local_solver: the block re-optimizer: ``BruteForceLocalSolver`` (default; any
            regularizer) or ``MILPLocalSolver`` (HiGHS, for large blocks; argmax regularizers).

    The combination is checked here, not at the first step: a sampling regularizer
    (``Entropic``) needs a local solver that enumerates the block's completions, a problem
    without enumerable completions (``VehicleScheduling``) needs ``MILPLocalSolver``, and a
    ``RandomBlock`` must fit the problem (and the brute-force solver's ``max_candidates``).
    A bad combination raises :class:`IncompatibleComponentsError` (a ValueError) or a
    ValueError.
    """

    def __init__(self, problem, neighborhood=None, regularizer=None, local_solver=None):
        missing = [a for a in ("n_vars", "n_units", "is_feasible") if not hasattr(problem, a)]
        if missing:
            raise TypeError(f"problem must be a problem of neurips26.combinatorial.problems (or have its interface); "
                            f"{type(problem).__name__} has no {', '.join(missing)}")
        self.problem = problem
        self.neighborhood = neighborhood or RandomBlock(2)
        self.regularizer = regularizer or Entropic(1.0)
        self.local_solver = local_solver or BruteForceLocalSolver()
        self._check_components()

    def _check_components(self) -> None:
        reg, solver = self.regularizer, self.local_solver
        if not callable(getattr(self.neighborhood, "sample", None)):
            raise TypeError(f"neighborhood must have a sample(problem, B, rng) method, got {self.neighborhood!r}")
        if not (hasattr(reg, "perturb") or hasattr(reg, "choose")):
            raise TypeError(f"regularizer must be Entropic, Perturbed or Greedy (or have their choose / perturb "
                            f"method), got {reg!r}")
        enumerates = getattr(solver, "enumerates", True)
        if not hasattr(reg, "perturb") and not enumerates:
            raise IncompatibleComponentsError(
                f"{type(reg).__name__} samples among the block's enumerated completions, but {type(solver).__name__} "
                f"returns the block optimum only: use BruteForceLocalSolver, or an argmax regularizer (Perturbed or "
                f"Greedy) with {type(solver).__name__}")
        if not enumerates and not hasattr(self.problem, "block_milp"):
            raise IncompatibleComponentsError(f"{type(solver).__name__} needs the problem's block_milp(y, units); "
                                              f"{self.problem!r} has none")
        if isinstance(self.neighborhood, RandomBlock):
            self.neighborhood.check(self.problem)
            if isinstance(solver, BruteForceLocalSolver):
                solver.check_block(self.problem, self.neighborhood.size)

    def _theta(self, theta, B) -> np.ndarray:
        try:
            theta = np.asarray(theta, dtype=float)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"theta must be an array of real numbers ({exc})") from None
        n = self.problem.n_vars
        if theta.shape not in ((n,), (B, n)):
            raise ValueError(f"theta must have shape ({n},) or ({B}, {n}), got {theta.shape}")
        if not np.all(np.isfinite(theta)):
            raise ValueError("theta holds NaN or Inf")
        return theta

    def step(self, Y, theta, rng: np.random.Generator) -> np.ndarray:
        """One move of every chain; returns the new states (B, n_vars)."""
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy Generator, got {type(rng).__name__}")
        Y = np.asarray(Y)
        theta = self._theta(theta, len(Y))
        S = self.neighborhood.sample(self.problem, len(Y), rng)
        if hasattr(self.regularizer, "perturb"):  # an argmax regularizer: the local solver optimizes
            return self.local_solver.argmax(self.problem, Y, S, self.regularizer.perturb(theta, len(Y), rng))
        cands, mask = self.local_solver.candidates(self.problem, Y, S)
        if not np.all(mask.any(axis=1)):
            raise ValueError("a chain's current state is infeasible: its block has no feasible completion")
        choice = self.regularizer.choose(cands, mask, theta, rng)
        return cands[np.arange(len(Y)), choice]

    def run(self, Y0, theta, steps: int, rng: np.random.Generator | None = None, every: int = 0, *,
            seed: int = 0) -> np.ndarray | list:
        """``steps`` (an int >= 0; 0 returns the start) moves from Y0 (B, n_vars), which
        must be feasible. ``rng`` is the random stream, advanced in place; without one, a
        fresh ``np.random.default_rng(seed)`` (``seed`` an int >= 0). Returns the final
        states (B, n_vars), or with ``every`` > 0 the list of states after every
        ``every``-th step. NumPy integers are accepted for ``steps``, ``every`` and
        ``seed``. An infeasible starting state is refused with the constraint it breaks."""
        steps = check_int("steps", steps, 0)
        every = check_int("every", every, 0)
        if rng is None:
            rng = np.random.default_rng(check_int("seed", seed, 0))
        elif not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy Generator (an int goes to seed=), got {type(rng).__name__}")
        Y = check_states(np.asarray(Y0), self.problem.n_vars, "Y0").copy()
        check_feasible(self.problem, Y, "Y0")
        kept = []
        for t in range(1, steps + 1):
            Y = self.step(Y, theta, rng)
            if every and t % every == 0:
                kept.append(Y)
        return kept if every else Y

    def transition_matrix(self, states: np.ndarray, theta) -> np.ndarray:
        """The exact transition matrix P[i, j] = P(states[i] → states[j]) of the entropic
        chain under a uniform block neighbourhood, by enumerating every neighbourhood: for
        small instances (``states`` all feasible states, e.g. ``problem.enumerate()``)."""
        import itertools

        if not isinstance(self.regularizer, Entropic) or not isinstance(self.neighborhood, RandomBlock):
            raise TypeError("the exact transition matrix is defined here for Entropic regularization over RandomBlock")
        theta = self._theta(theta, 1)
        index = {row.tobytes(): i for i, row in enumerate(np.asarray(states, dtype=np.int8))}
        blocks = np.array(list(itertools.combinations(range(self.problem.n_units), self.neighborhood.size)))
        P = np.zeros((len(states), len(states)))
        for i, y in enumerate(states):
            Y = np.repeat(np.asarray(y)[None], len(blocks), axis=0)
            cands, mask = self.local_solver.candidates(self.problem, Y, blocks)
            probs = self.regularizer.probabilities(cands, mask, theta) / len(blocks)
            for b, c in zip(*np.nonzero(mask)):
                P[i, index[cands[b, c].astype(np.int8).tobytes()]] += probs[b, c]
        return P
