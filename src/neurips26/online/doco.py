"""Decentralized online convex optimization (D-OCO), exact and compressed.

n nodes on a graph with gossip matrix W; at round t node i plays x_i(t), then
learns its loss f_{t,i} (its gradient, or only its value under bandit feedback).
The network regret of node j is Σ_t Σ_i f_{t,i}(x_j(t)) − min_x Σ_t Σ_i f_{t,i}(x),
and the reported regret is the worst node's.

Algorithms (each a small object with ``init`` / ``decide`` / ``update``, all
nodes as one (n, d) array):

* :class:`DFTRL` — decentralized FTRL / dual averaging: z ← W(z + g), x = Π_K(−η z).
* :class:`CompressedDFTRL` — the FTRL-type method with compressed communication:
  the dual variables z run CHOCO-gossip (Koloskova et al., 2019): z ← z + g;
  q = Q(z − ẑ); ẑ ← ẑ + q; z ← z + γ(W − I)ẑ; play x = Π_K(−η z). Because W is
  doubly stochastic the columns of W − I sum to zero, so Σ_i z_i equals the sum of
  all gradients whatever Q does: compression only delays consensus, never loses
  gradient mass (the dual-update insight of the paper).
* :class:`DOGD` — decentralized online gradient descent: x ← Π_K(W x − η g).
* :class:`CompressedDOGD` — the prior OGD-type approach (CHOCO-compressed D-OGD, as in
  DC-DOGD of Tu et al., 2022): x ← Π_K(x + γ(W − I)x̂ − η g); q = Q(x − x̂); x̂ ← x̂ + q.

:func:`run_doco` drives any of them on an :class:`OnlineProblem`, with full-information
or bandit feedback (one- or two-point estimators on a shrunk domain) and optional
blocking (play one point for B rounds and communicate once per block).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np

from .compressors import Compressor, Identity
from .network import GossipMatrix, second_eigenvalue_modulus

__all__ = [
    "OnlineProblem",
    "LinearLosses",
    "LeastSquaresLosses",
    "LogisticLosses",
    "DFTRL",
    "AcceleratedDFTRL",
    "accelerated_gossip",
    "CompressedDFTRL",
    "DOGD",
    "CompressedDOGD",
    "choco_gossip",
    "quadratic_min_on_ball",
    "DOCOResult",
    "run_doco",
]


# --------------------------------------------------------------------------- problems
class OnlineProblem(Protocol):
    """A sequence of per-node convex losses f_{t,i}, known in advance (for simulation)."""

    T: int
    n: int
    d: int

    def grad(self, t: int, X: np.ndarray) -> np.ndarray:
        """(..., n, d): ∇f_{t,i}(X_i) for every node i (leading dims: independent runs)."""

    def value(self, t: int, X: np.ndarray) -> np.ndarray:
        """(..., n): f_{t,i}(X_i), each node's loss at its own point (bandit feedback)."""

    def network_value(self, t: int, X: np.ndarray) -> np.ndarray:
        """(..., n): Σ_i f_{t,i}(X_j) for every j — node j's point on the global loss."""

    def best_fixed(self, t_end: int, domain) -> float:
        """min over the domain of Σ_{t < t_end} Σ_i f_{t,i}(x)."""


@dataclass
class LinearLosses:
    """f_{t,i}(x) = ⟨G[t, i], x⟩. G has shape (T, n, d)."""

    G: np.ndarray

    def __post_init__(self):
        if self.G.ndim != 3:
            raise ValueError(f"G must have shape (T, n, d), got {self.G.shape}")
        self.T, self.n, self.d = self.G.shape
        self._prefix = np.concatenate([np.zeros((1, self.d)), np.cumsum(self.G.sum(1), 0)])

    def grad(self, t, X):
        return self.G[t]

    def value(self, t, X):
        return np.einsum("nd,...nd->...n", self.G[t], X)

    def network_value(self, t, X):
        return X @ self.G[t].sum(0)

    def best_fixed(self, t_end, domain):
        total = self._prefix[t_end]
        # The minimizer of a linear function over a ball is -R g/|g|; in general use the
        # domain's projection of a far point along -g (exact for balls and boxes).
        x = domain.project(-1e12 * total[None, :])[0]
        return float(total @ x)


@dataclass
class LeastSquaresLosses:
    """f_{t,i}(x) = ½(A[t, i]ᵀx − b[t, i])². A: (T, n, d), b: (T, n)."""

    A: np.ndarray
    b: np.ndarray

    def __post_init__(self):
        if self.A.ndim != 3 or self.b.shape != self.A.shape[:2]:
            raise ValueError(f"A must be (T, n, d) and b (T, n); got {self.A.shape} and {self.b.shape}")
        self.T, self.n, self.d = self.A.shape
        self._H = np.concatenate([np.zeros((1, self.d, self.d)), np.cumsum(np.einsum("tni,tnj->tij", self.A, self.A), 0)])
        self._c = np.concatenate([np.zeros((1, self.d)), np.cumsum(np.einsum("tni,tn->ti", self.A, self.b), 0)])
        self._bb = np.concatenate([[0.0], np.cumsum((self.b**2).sum(1))])

    def grad(self, t, X):
        r = np.einsum("nd,...nd->...n", self.A[t], X) - self.b[t]
        return r[..., None] * self.A[t]

    def value(self, t, X):
        return 0.5 * (np.einsum("nd,...nd->...n", self.A[t], X) - self.b[t]) ** 2

    def network_value(self, t, X):
        r = X @ self.A[t].T - self.b[t]  # (..., j, i): node j's point on node i's loss
        return 0.5 * (r**2).sum(-1)

    def best_fixed(self, t_end, domain):
        # Exact from the prefix sums of AᵀA, Aᵀb and b², kept since construction.
        H, c, bb = self._H[t_end], self._c[t_end], self._bb[t_end]
        x = quadratic_min_on_ball(H, c, domain.radius) if hasattr(domain, "radius") else _pgd_quadratic(H, c, domain)
        return float(0.5 * x @ H @ x - c @ x + 0.5 * bb)


@dataclass
class LogisticLosses:
    """f_{t,i}(x) = log(1 + exp(−y[t, i]·A[t, i]ᵀx)), labels y ∈ {−1, +1}. A: (T, n, d)."""

    A: np.ndarray
    y: np.ndarray
    comparator_iters: int = 2000

    def __post_init__(self):
        if self.A.ndim != 3 or self.y.shape != self.A.shape[:2]:
            raise ValueError(f"A must be (T, n, d) and y (T, n); got {self.A.shape} and {self.y.shape}")
        if not np.isin(self.y, (-1.0, 1.0)).all():
            raise ValueError("labels y must be -1 or +1")
        self.T, self.n, self.d = self.A.shape
        self._best: dict = {}

    def grad(self, t, X):
        m = self.y[t] * np.einsum("nd,...nd->...n", self.A[t], X)
        return (-self.y[t] * _sigmoid(-m))[..., None] * self.A[t]

    def value(self, t, X):
        return np.logaddexp(0.0, -self.y[t] * np.einsum("nd,...nd->...n", self.A[t], X))

    def network_value(self, t, X):
        return np.logaddexp(0.0, -(X @ self.A[t].T) * self.y[t]).sum(-1)

    def best_fixed(self, t_end, domain):
        key = (t_end, domain)
        if key not in self._best:
            self._best[key] = self._solve(t_end, domain)
        return self._best[key]

    def _solve(self, t_end, domain) -> float:
        # Projected accelerated gradient (FISTA) on the prefix's total loss; L from the
        # logistic curvature bound 1/4 times the data's squared spectral norm.
        Z = (self.A[:t_end] * self.y[:t_end, :, None]).reshape(-1, self.d)
        L = max(np.linalg.norm(Z, 2) ** 2 / 4.0, 1e-12)

        def total(x):
            return float(np.logaddexp(0.0, -Z @ x).sum())

        def grad(x):
            return -(Z.T @ _sigmoid(-Z @ x))

        x = y = domain.project(np.zeros((1, self.d)))[0]
        tk = 1.0
        for _ in range(self.comparator_iters):
            x_new = domain.project((y - grad(y) / L)[None, :])[0]
            t_new = 0.5 * (1 + math.sqrt(1 + 4 * tk * tk))
            y = x_new + (tk - 1) / t_new * (x_new - x)
            x, tk = x_new, t_new
        return total(x)


def _sigmoid(z):
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def quadratic_min_on_ball(H: np.ndarray, c: np.ndarray, radius: float) -> np.ndarray:
    """argmin ½xᵀHx − cᵀx over ‖x‖ ≤ radius (H ⪰ 0), exactly: the KKT point
    x(λ) = (H + λI)⁻¹c with λ ≥ 0 and ‖x(λ)‖ = radius when the unconstrained
    minimizer lies outside, found by bisection on the secular equation."""
    lam, Q = np.linalg.eigh(H)
    cq = Q.T @ c
    lam = np.maximum(lam, 0.0)

    def norm_at(mu):
        with np.errstate(divide="ignore", invalid="ignore"):
            y = np.where(lam + mu > 0, cq / (lam + mu), 0.0)
        return np.linalg.norm(y), y

    tiny = 1e-12 * max(1.0, lam.max(initial=0.0))
    n0, y0 = norm_at(tiny)
    if n0 <= radius and (lam > tiny).all():
        return Q @ (cq / lam)
    if n0 <= radius:  # singular H with c in its range: the minimum-norm solution is inside
        return Q @ y0
    lo, hi = 0.0, np.linalg.norm(c) / radius + 1.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if norm_at(mid)[0] > radius:
            lo = mid
        else:
            hi = mid
    return Q @ norm_at(hi)[1]


def _pgd_quadratic(H, c, domain, iters: int = 5000):
    L = max(np.linalg.eigvalsh(H).max(), 1e-12)
    x = domain.project(np.zeros((1, len(c))))[0]
    for _ in range(iters):
        x = domain.project((x - (H @ x - c) / L)[None, :])[0]
    return x


# ------------------------------------------------------------------------- algorithms
def choco_gossip(
    x: np.ndarray, x_hat: np.ndarray, W: np.ndarray, compressor: Compressor, gamma: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """One CHOCO-gossip round on all nodes: q = Q(x − x̂); x̂ ← x̂ + q; x ← x + γ(W − I)x̂."""
    x_hat = x_hat + compressor(x - x_hat, rng)
    x = x + gamma * (W @ x_hat - x_hat)
    return x, x_hat


def _check_common(eta, gamma=1.0) -> None:
    eta, gamma = np.asarray(eta, float), np.asarray(gamma, float)
    if eta.ndim > 1 or gamma.ndim > 1:
        raise ValueError("eta and gamma must be scalars or 1-d arrays (one value per batched run)")
    if not (eta > 0).all():
        raise ValueError(f"step size eta must be > 0, got {eta}")
    if not ((gamma > 0) & (gamma <= 1)).all():
        raise ValueError(f"consensus step gamma must be in (0, 1], got {gamma}")


def _b(v):
    """A hyper-parameter as a scalar, or (k,) -> (k, 1, 1) to broadcast over (k, n, d)."""
    v = np.asarray(v, float)
    return v.reshape(-1, 1, 1) if v.ndim == 1 else float(v)


def _batch(*params) -> tuple[int, ...]:
    shape = np.broadcast_shapes(*(np.shape(p) for p in params))
    return tuple(shape)


@dataclass
class DFTRL:
    """Decentralized FTRL with the ℓ2 regularizer ‖x‖²/(2η): z ← W(z + g), x = Π(−ηz)."""

    eta: float
    domain: object
    name: str = "D-FTRL"
    compressor: Compressor = field(default_factory=Identity)

    def __post_init__(self):
        _check_common(self.eta)

    def init(self, n, d, W):
        return {"z": np.zeros(_batch(self.eta) + (n, d))}

    def decide(self, state):
        return self.domain.project(-_b(self.eta) * state["z"])

    def update(self, state, g, W, rng):
        state["z"] = W @ (state["z"] + g)
        return state, 1


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
        if self.rounds < 1:
            raise ValueError(f"rounds must be >= 1, got {self.rounds}")

    def init(self, n, d, W):
        shape = _batch(self.eta, self.gamma) + (n, d)
        return {"z": np.zeros(shape), "z_hat": np.zeros(shape)}

    def decide(self, state):
        return self.domain.project(-_b(self.eta) * state["z"])

    def update(self, state, g, W, rng):
        z, z_hat = state["z"] + g, state["z_hat"]
        for _ in range(self.rounds):
            z, z_hat = choco_gossip(z, z_hat, W, self.compressor, _b(self.gamma), rng)
        state["z"], state["z_hat"] = z, z_hat
        return state, self.rounds


def accelerated_gossip(x: np.ndarray, W: np.ndarray, rounds: int, theta: float) -> np.ndarray:
    """``rounds`` steps of accelerated (two-step, Chebyshev-type) gossip (Liu & Morse, 2011;
    the consensus step of Wan et al.'s decentralized FTRL): x₁ = W x₀, then
    x_{k+1} = (1 + θ) W x_k − θ x_{k−1}. Each step is an affine combination of doubly
    stochastic maps, so the average of x is preserved exactly."""
    prev, cur = x, W @ x
    for _ in range(rounds - 1):
        prev, cur = cur, (1 + theta) * (W @ cur) - theta * prev
    return cur


def acceleration_theta(W: np.ndarray) -> float:
    """The optimal momentum θ = (1 − √(1 − λ²)) / (1 + √(1 − λ²)), λ the second largest
    eigenvalue modulus of W."""
    lam = second_eigenvalue_modulus(W)
    r = math.sqrt(max(0.0, 1.0 - lam * lam))
    return (1.0 - r) / (1.0 + r)


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
        if self.rounds != "auto" and (not isinstance(self.rounds, int) or self.rounds < 1):
            raise ValueError(f"rounds must be a positive int or 'auto', got {self.rounds!r}")

    def init(self, n, d, W):
        theta = acceleration_theta(W)
        gap = 1.0 - second_eigenvalue_modulus(W)
        rounds = math.ceil(1.0 / math.sqrt(gap)) if self.rounds == "auto" else self.rounds
        return {"z": np.zeros(_batch(self.eta) + (n, d)), "theta": theta, "rounds": rounds}

    def decide(self, state):
        return self.domain.project(-_b(self.eta) * state["z"])

    def update(self, state, g, W, rng):
        state["z"] = accelerated_gossip(state["z"] + g, W, state["rounds"], state["theta"])
        return state, state["rounds"]


@dataclass
class DOGD:
    """Decentralized online gradient descent: x ← Π(W x − η g)."""

    eta: float
    domain: object
    name: str = "D-OGD"
    compressor: Compressor = field(default_factory=Identity)

    def __post_init__(self):
        _check_common(self.eta)

    def init(self, n, d, W):
        return {"x": np.broadcast_to(self.domain.center(d), _batch(self.eta) + (n, d)).copy()}

    def decide(self, state):
        return state["x"]

    def update(self, state, g, W, rng):
        state["x"] = self.domain.project(W @ state["x"] - _b(self.eta) * g)
        return state, 1


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

    def init(self, n, d, W):
        x0 = np.broadcast_to(self.domain.center(d), _batch(self.eta, self.gamma) + (n, d)).copy()
        return {"x": x0, "x_hat": x0.copy()}

    def decide(self, state):
        return state["x"]

    def update(self, state, g, W, rng):
        x, x_hat = state["x"], state["x_hat"]
        x = self.domain.project(x + _b(self.gamma) * (W @ x_hat - x_hat) - _b(self.eta) * g)
        x_hat = x_hat + self.compressor(x - x_hat, rng)
        state["x"], state["x_hat"] = x, x_hat
        return state, 1


# ---------------------------------------------------------------------------- driver
@dataclass
class DOCOResult:
    """``cum_network_loss[c, ..., j]``: Σ_{t < checkpoints[c]} Σ_i f_{t,i}(played point of j);
    ``regret[c, ...]``: the worst node's regret at that checkpoint; ``bits[c]``: bits sent
    per node up to it (one broadcast message per node per gossip round). The ``...``
    axis exists when eta/gamma were given as arrays (one run per value)."""

    checkpoints: np.ndarray
    cum_network_loss: np.ndarray
    regret: np.ndarray
    bits: np.ndarray
    final_z_sum: np.ndarray | None = None
    grad_sum: np.ndarray | None = None

    @property
    def final_regret(self):
        """The last checkpoint's regret: a float, or an array for batched runs."""
        r = self.regret[-1]
        return float(r) if np.ndim(r) == 0 else r

    @property
    def final_bits(self) -> float:
        return float(self.bits[-1])


def _sphere(rng, shape):
    u = rng.standard_normal(shape)
    return u / np.linalg.norm(u, axis=-1, keepdims=True)


def run_doco(
    problem: OnlineProblem,
    network: GossipMatrix,
    algorithm,
    *,
    feedback: Literal["full", "one-point", "two-point"] = "full",
    delta: float = 0.1,
    block: int = 1,
    checkpoints: np.ndarray | None = None,
    seed: int = 0,
    check_finite: bool = True,
) -> DOCOResult:
    """Play ``problem`` on ``network`` with ``algorithm``.

    Bandit feedback: the algorithm's decisions live in the domain shrunk by
    α = δ / r (r the domain's inner radius) and the node plays y = x + δu (u uniform on
    the sphere); the one-point estimate is (d/δ) f(y) u (Flaxman et al., 2005), the
    two-point one (d/2δ)(f(x+δu) − f(x−δu)) u (Agarwal et al., 2010), whose loss is the
    mean of its two plays. ``block`` > 1 plays one decision for a block of rounds, sums
    the block's gradient estimates, and communicates once per block.

    Hyper-parameters given as 1-d arrays (``eta``, ``gamma``) run one independent copy
    per value in a single vectorized pass (for tuning); results then carry that axis.
    A run whose losses become non-finite raises FloatingPointError unless
    ``check_finite=False`` (then its regret is NaN/Inf, for a tuner to discard).
    """
    if problem.n != network.n:
        raise ValueError(f"the problem has {problem.n} nodes, the network {network.n}")
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    if feedback not in ("full", "one-point", "two-point"):
        raise ValueError(f"feedback must be 'full', 'one-point' or 'two-point', got {feedback!r}")
    T, n, d, W = problem.T, problem.n, problem.d, network.W
    rng = np.random.default_rng(seed)
    domain = algorithm.domain
    if feedback != "full":
        if not 0 < delta < domain.inner_radius:
            raise ValueError(f"delta must be in (0, {domain.inner_radius}), got {delta}")
        # Decisions in the shrunk set keep every exploration point y = x ± δu feasible.
        algorithm = _with_domain(algorithm, domain.shrink(delta / domain.inner_radius))
    checkpoints = np.unique(np.asarray(checkpoints if checkpoints is not None else [T], dtype=int))
    if checkpoints.min() < 1 or checkpoints.max() > T:
        raise ValueError(f"checkpoints must lie in [1, T={T}]")
    msg_bits = algorithm.compressor.bits(d)
    state = algorithm.init(n, d, W)
    X = algorithm.decide(state)
    cum = np.zeros(X.shape[:-1])
    acc = np.zeros(X.shape)
    grad_sum = np.zeros(X.shape[:-2] + (d,))
    bits = 0.0
    out_loss, out_bits = [], []
    for t in range(T):
        if feedback == "full":
            g = problem.grad(t, X)
            cum += problem.network_value(t, X)
        else:
            u = _sphere(rng, X.shape)
            if feedback == "one-point":
                Y = X + delta * u
                g = (d / delta) * problem.value(t, Y)[..., None] * u
                cum += problem.network_value(t, Y)
            else:
                Yp, Ym = X + delta * u, X - delta * u
                g = (d / (2 * delta)) * (problem.value(t, Yp) - problem.value(t, Ym))[..., None] * u
                cum += 0.5 * (problem.network_value(t, Yp) + problem.network_value(t, Ym))
        acc += g
        grad_sum += g.sum(-2)
        if (t + 1) % block == 0 or t + 1 == T:
            state, rounds = algorithm.update(state, acc, W, rng)
            bits += rounds * msg_bits
            acc = np.zeros(X.shape)
            X = algorithm.decide(state)
        if t + 1 in checkpoints:
            out_loss.append(cum.copy())
            out_bits.append(bits)
    cum_loss = np.array(out_loss)
    if check_finite and not np.isfinite(cum_loss).all():
        raise FloatingPointError("losses became non-finite: step size too large?")
    best = np.array([problem.best_fixed(int(c), domain) for c in checkpoints])
    best = best.reshape((-1,) + (1,) * (cum_loss.ndim - 2))
    return DOCOResult(
        checkpoints=checkpoints,
        cum_network_loss=cum_loss,
        regret=cum_loss.max(-1) - best,
        bits=np.array(out_bits),
        final_z_sum=state["z"].sum(-2) if "z" in state else None,
        grad_sum=grad_sum,
    )


def _with_domain(algorithm, domain):
    import dataclasses

    return dataclasses.replace(algorithm, domain=domain)
