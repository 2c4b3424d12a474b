"""Algorithms for decentralized online convex optimization (D-OCO), exact and compressed.

n nodes on a graph with gossip matrix W; each algorithm keeps all nodes as one (n, d)
array (with leading dims when hyper-parameters are given as arrays: one independent run
per value) and is a small object over a pure init / decide / update triple, as optax's
transformations are:

* ``init(n, d, W) -> state``;
* ``decide(state) -> X``, the (..., n, d) points the nodes play;
* ``update(state, g, W, rng) -> (new_state, rounds)``: a new state after the nodes learn
  their (..., n, d) gradients g (or gradient estimates), and the gossip rounds it took
  (for counting bits). The old state is left as it was: states are immutable tuples, and
  every update builds its arrays anew, so no copy is needed to keep it.

* :class:`DFTRL` — decentralized FTRL / dual averaging: z ← W(z + g), x = Π_K(−η z).
* :class:`CompressedDFTRL` — the FTRL-type method with compressed communication:
  the dual variables z run CHOCO-gossip (Koloskova et al., 2019): z ← z + g;
  q = Q(z − ẑ); ẑ ← ẑ + q; z ← z + γ(W − I)ẑ; play x = Π_K(−η z). Because W is
  doubly stochastic the columns of W − I sum to zero, so Σ_i z_i equals the sum of
  all gradients whatever Q does: compression only delays consensus, never loses
  gradient mass (the dual-update insight of the paper).
* :class:`AcceleratedDFTRL` — D-FTRL whose consensus is several rounds of accelerated gossip.
* :class:`DOGD` — decentralized online gradient descent: x ← Π_K(W x − η g).
* :class:`CompressedDOGD` — the prior OGD-type approach (CHOCO-compressed D-OGD, as in
  DC-DOGD of Tu et al., 2022): x ← Π_K(x + γ(W − I)x̂ − η g); q = Q(x − x̂); x̂ ← x̂ + q.

``driver.run_doco`` plays any of them on an online problem.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

import numpy as np

from ._checks import check_int
from .compressors import Compressor, Identity
from .gossip import acceleration_theta, accelerated_gossip, choco_gossip
from .network import second_eigenvalue_modulus

__all__ = [
    "DOCOAlgorithm",
    "DFTRL",
    "CompressedDFTRL",
    "AcceleratedDFTRL",
    "DOGD",
    "CompressedDOGD",
    "FTRLState",
    "CompressedFTRLState",
    "AcceleratedFTRLState",
    "OGDState",
    "CompressedOGDState",
]


class DOCOAlgorithm(Protocol):
    """What ``run_doco`` needs of an algorithm (module docstring)."""

    domain: object
    compressor: Compressor

    def init(self, n: int, d: int, W: np.ndarray): ...

    def decide(self, state) -> np.ndarray: ...

    def update(self, state, g: np.ndarray, W: np.ndarray, rng: np.random.Generator) -> tuple[object, int]: ...


class FTRLState(NamedTuple):
    z: np.ndarray  # (..., n, d) dual variables: gossiped sums of gradients


class CompressedFTRLState(NamedTuple):
    z: np.ndarray  # (..., n, d) dual variables
    z_hat: np.ndarray  # (..., n, d) their public copies, the sum of the messages sent so far


class AcceleratedFTRLState(NamedTuple):
    z: np.ndarray  # (..., n, d) dual variables
    theta: float  # the momentum of accelerated gossip, from W's spectrum
    rounds: int  # gossip rounds per update


class OGDState(NamedTuple):
    x: np.ndarray  # (..., n, d) the points played


class CompressedOGDState(NamedTuple):
    x: np.ndarray  # (..., n, d) the points played
    x_hat: np.ndarray  # (..., n, d) their public copies


def _hyper(name: str, value) -> np.ndarray:
    """A hyper-parameter given as a number or a 1-d array (one value per batched run)."""
    if np.iscomplexobj(value) or isinstance(value, (str, bytes)):
        raise TypeError(f"{name} must be a real number or a 1-d array of them, got {value!r}")
    try:
        a = np.asarray(value, float)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a real number or a 1-d array of them, got {value!r}") from None
    if a.ndim > 1:
        raise ValueError(f"{name} must be a scalar or a 1-d array (one value per batched run), got shape {a.shape}")
    if a.size == 0:
        raise ValueError(f"{name} is an empty array: give a number or a non-empty 1-d array")
    if not np.isfinite(a).all():
        raise ValueError(f"{name} must be finite, got {value!r}")
    return a


def _check_common(eta, gamma=1.0) -> None:
    eta, gamma = _hyper("step size eta", eta), _hyper("consensus step gamma", gamma)
    if not (eta > 0).all():
        raise ValueError(f"step size eta must be > 0, got {eta}")
    if not ((gamma > 0) & (gamma <= 1)).all():
        raise ValueError(f"consensus step gamma must be in (0, 1], got {gamma}")
    if eta.ndim == gamma.ndim == 1 and len(eta) != len(gamma) and 1 not in (len(eta), len(gamma)):
        raise ValueError(f"eta and gamma given as arrays must have the same length, got {len(eta)} and {len(gamma)}")


def _check_parts(domain, compressor=None) -> None:
    if not (hasattr(domain, "project") and hasattr(domain, "center")):
        raise TypeError(f"domain must be a decision set with project() and center() (Ball, Box, Simplex), got {domain!r}")
    if compressor is not None and not (callable(compressor) and hasattr(compressor, "bits")):
        raise TypeError(f"compressor must be a Compressor (Identity, TopK, RandomK, ScaledSign, QSGD), got {compressor!r}")


def _b(v):
    """A hyper-parameter as a scalar, or (k,) -> (k, 1, 1) to broadcast over (k, n, d)."""
    v = np.asarray(v, float)
    return v.reshape(-1, 1, 1) if v.ndim == 1 else float(v)


def _batch(*params) -> tuple[int, ...]:
    shape = np.broadcast_shapes(*(np.shape(p) for p in params))
    return tuple(shape)


def _ftrl_play(domain, eta, z: np.ndarray) -> np.ndarray:
    """FTRL's decision with the ℓ2 regularizer ‖x‖²/(2η): x = Π_K(−η z)."""
    return domain.project(-_b(eta) * z)


@dataclass
class _Uncompressed:
    """The fields and checks of the algorithms that communicate exactly (subclasses set
    ``name``'s default); ``compressor`` is the identity, for counting bits."""

    eta: float
    domain: object
    name: str = ""
    compressor: Compressor = field(default_factory=Identity)

    def __post_init__(self):
        _check_common(self.eta)
        _check_parts(self.domain, self.compressor)


@dataclass
class DFTRL(_Uncompressed):
    """Decentralized FTRL with the ℓ2 regularizer ‖x‖²/(2η): z ← W(z + g), x = Π(−ηz)."""

    name: str = "D-FTRL"

    def init(self, n, d, W) -> FTRLState:
        return FTRLState(np.zeros(_batch(self.eta) + (n, d)))

    def decide(self, state: FTRLState) -> np.ndarray:
        return _ftrl_play(self.domain, self.eta, state.z)

    def update(self, state: FTRLState, g, W, rng) -> tuple[FTRLState, int]:
        return FTRLState(W @ (state.z + g)), 1


@dataclass
class CompressedDFTRL:
    """FTRL on CHOCO-gossiped dual variables (see the module docstring).

    The consensus step γ must suit the compressor: CHOCO's error contracts for
    γ ≲ δ²ω / (16δ + δ² + 4β² + 2δβ² − 8δω) (Koloskova et al., 2019; δ the spectral gap,
    ω the compressor's contraction, β = ‖I − W‖₂); with aggressive compression and
    γ = 1 the public copies cannot follow the growing dual sums and consensus diverges.
    """

    eta: float
    domain: object
    compressor: Compressor
    gamma: float = 1.0
    rounds: int = 1
    name: str = "C-DFTRL"

    def __post_init__(self):
        _check_common(self.eta, self.gamma)
        _check_parts(self.domain, self.compressor)
        check_int("rounds", self.rounds, minimum=1)

    def init(self, n, d, W) -> CompressedFTRLState:
        shape = _batch(self.eta, self.gamma) + (n, d)
        return CompressedFTRLState(np.zeros(shape), np.zeros(shape))

    def decide(self, state: CompressedFTRLState) -> np.ndarray:
        return _ftrl_play(self.domain, self.eta, state.z)

    def update(self, state: CompressedFTRLState, g, W, rng) -> tuple[CompressedFTRLState, int]:
        z, z_hat = state.z + g, state.z_hat
        for _ in range(self.rounds):
            z, z_hat = choco_gossip(z, z_hat, W, self.compressor, _b(self.gamma), rng)
        return CompressedFTRLState(z, z_hat), self.rounds


@dataclass
class AcceleratedDFTRL:
    """Uncompressed decentralized FTRL whose consensus uses ``rounds`` steps of
    accelerated gossip per update (``rounds="auto"``: ⌈1/√δ⌉, the mixing time of
    accelerated gossip); meant to be run with blocking, as Wan et al. do."""

    eta: float
    domain: object
    rounds: int | str = "auto"
    name: str = "D-FTRL (accelerated gossip)"
    compressor: Compressor = field(default_factory=Identity)

    def __post_init__(self):
        _check_common(self.eta)
        _check_parts(self.domain, self.compressor)
        if isinstance(self.rounds, str):
            if self.rounds != "auto":
                raise ValueError(f"rounds must be a positive int or 'auto', got {self.rounds!r}")
        elif isinstance(self.rounds, bool) or not isinstance(self.rounds, numbers.Integral):
            raise TypeError(f"rounds must be a positive int or 'auto', got {self.rounds!r}")
        elif self.rounds < 1:
            raise ValueError(f"rounds must be a positive int or 'auto', got {self.rounds!r}")

    def init(self, n, d, W) -> AcceleratedFTRLState:
        theta = acceleration_theta(W)
        gap = 1.0 - second_eigenvalue_modulus(W)
        rounds = math.ceil(1.0 / math.sqrt(gap)) if self.rounds == "auto" else self.rounds
        return AcceleratedFTRLState(np.zeros(_batch(self.eta) + (n, d)), theta, rounds)

    def decide(self, state: AcceleratedFTRLState) -> np.ndarray:
        return _ftrl_play(self.domain, self.eta, state.z)

    def update(self, state: AcceleratedFTRLState, g, W, rng) -> tuple[AcceleratedFTRLState, int]:
        z = accelerated_gossip(state.z + g, W, state.rounds, state.theta)
        return state._replace(z=z), state.rounds


@dataclass
class DOGD(_Uncompressed):
    """Decentralized online gradient descent: x ← Π(W x − η g)."""

    name: str = "D-OGD"

    def init(self, n, d, W) -> OGDState:
        return OGDState(np.broadcast_to(self.domain.center(d), _batch(self.eta) + (n, d)).copy())

    def decide(self, state: OGDState) -> np.ndarray:
        return state.x

    def update(self, state: OGDState, g, W, rng) -> tuple[OGDState, int]:
        return OGDState(self.domain.project(W @ state.x - _b(self.eta) * g)), 1


@dataclass
class CompressedDOGD:
    """CHOCO-compressed decentralized OGD (the OGD-type prior approach)."""

    eta: float
    domain: object
    compressor: Compressor
    gamma: float = 1.0
    name: str = "C-DOGD"

    def __post_init__(self):
        _check_common(self.eta, self.gamma)
        _check_parts(self.domain, self.compressor)

    def init(self, n, d, W) -> CompressedOGDState:
        x0 = np.broadcast_to(self.domain.center(d), _batch(self.eta, self.gamma) + (n, d)).copy()
        return CompressedOGDState(x0, x0.copy())

    def decide(self, state: CompressedOGDState) -> np.ndarray:
        return state.x

    def update(self, state: CompressedOGDState, g, W, rng) -> tuple[CompressedOGDState, int]:
        x, x_hat = state
        x = self.domain.project(x + _b(self.gamma) * (W @ x_hat - x_hat) - _b(self.eta) * g)
        x_hat = x_hat + self.compressor(x - x_hat, rng)
        return CompressedOGDState(x, x_hat), 1
