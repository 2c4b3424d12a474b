"""Playing a D-OCO algorithm on an online problem: :func:`run_doco` drives any algorithm of
``algorithms`` with full-information or bandit feedback (one- or two-point estimators on a
shrunk domain) and optional blocking (play one point for B rounds and communicate once per
block), and reports the network regret.

The network regret of node j is Σ_t Σ_i f_{t,i}(x_j(t)) − min_x Σ_t Σ_i f_{t,i}(x), and the
reported regret is the worst node's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ._checks import check_int, check_real, nonfinite_where
from .algorithms import DOCOAlgorithm
from .network import GossipMatrix
from .problems import OnlineProblem

__all__ = ["DOCOResult", "run_doco"]


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
    algorithm: DOCOAlgorithm,
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
    _check_problem(problem)
    if not isinstance(network, GossipMatrix):
        raise TypeError(f"network must be a GossipMatrix (see gossip_matrix), got {type(network).__name__}")
    if not all(hasattr(algorithm, a) for a in ("domain", "compressor", "init", "decide", "update")):
        raise TypeError(f"algorithm must be a D-OCO algorithm (DFTRL, CompressedDFTRL, DOGD, ...), got {algorithm!r}")
    if problem.n != network.n:
        raise ValueError(f"the problem has {problem.n} nodes, the network {network.n}")
    block = check_int("block", block, minimum=1)
    if feedback not in ("full", "one-point", "two-point"):
        raise ValueError(f"feedback must be 'full', 'one-point' or 'two-point', got {feedback!r}")
    T, n, d, W = problem.T, problem.n, problem.d, network.W
    try:
        rng = np.random.default_rng(seed)
    except (TypeError, ValueError) as e:
        raise type(e)(f"seed must be a non-negative integer, got {seed!r} ({e})") from None
    domain = algorithm.domain
    if feedback != "full":
        if not 0 < check_real("delta", delta) < domain.inner_radius:
            raise ValueError(f"delta must be in (0, {domain.inner_radius}), got {delta}")
        # Decisions in the shrunk set keep every exploration point y = x ± δu feasible.
        algorithm = _with_domain(algorithm, domain.shrink(delta / domain.inner_radius))
    checkpoints = _check_checkpoints(checkpoints, T)
    msg_bits = algorithm.compressor.bits(d)  # also checks the compressor's setting against d
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
        raise FloatingPointError("losses became non-finite (NaN or inf) while playing: the step size eta is too "
                                 "large for these losses, or the problem's gradients / values are not finite")
    best = np.array([problem.best_fixed(int(c), domain) for c in checkpoints])
    best = best.reshape((-1,) + (1,) * (cum_loss.ndim - 2))
    return DOCOResult(
        checkpoints=checkpoints,
        cum_network_loss=cum_loss,
        regret=cum_loss.max(-1) - best,
        bits=np.array(out_bits),
        final_z_sum=state.z.sum(-2) if hasattr(state, "z") else None,
        grad_sum=grad_sum,
    )


def _check_problem(problem) -> None:
    """An OnlineProblem: T, n, d integers >= 1, its four methods, and finite data (the data
    arrays of the problems of ``problems``, checked again here as they may have changed since
    their construction)."""
    missing = [a for a in ("T", "n", "d", "grad", "value", "network_value", "best_fixed") if not hasattr(problem, a)]
    if missing:
        raise TypeError(f"problem must be an OnlineProblem (LinearLosses, LeastSquaresLosses, LogisticLosses, ...); "
                        f"{type(problem).__name__} has no {', '.join(missing)}")
    for a in ("T", "n", "d"):
        check_int(f"problem.{a}", getattr(problem, a), minimum=1)
    for name in ("G", "A", "b", "y"):
        data = getattr(problem, name, None)
        if isinstance(data, np.ndarray) and data.dtype.kind in "fc" and not np.isfinite(data).all():
            raise ValueError(f"problem.{name} has NaN or inf entries ({nonfinite_where(data)}): the losses' data must be "
                             "finite")


def _check_checkpoints(checkpoints, T: int) -> np.ndarray:
    """The sorted distinct rounds (whole numbers in [1, T]) at which the regret is recorded."""
    if checkpoints is None:
        return np.array([T])
    raw = np.asarray(checkpoints)
    if raw.dtype.kind not in "iuf":
        raise TypeError(f"checkpoints must be a 1-d list of rounds (integers in [1, T={T}]), got {checkpoints!r}")
    if raw.ndim > 1:
        raise ValueError(f"checkpoints must be a 1-d list of rounds, got shape {raw.shape}")
    if raw.size == 0:
        raise ValueError(f"checkpoints is empty: give at least one round in [1, T={T}] at which to record the regret "
                         "(or None: the last round)")
    if raw.dtype.kind == "f":
        if not np.isfinite(raw).all():
            raise ValueError(f"checkpoints has NaN or inf entries: {checkpoints!r}")
        if (raw != np.round(raw)).any():
            raise ValueError(f"checkpoints must be whole numbers of rounds, got {checkpoints!r}")
    if raw.min() < 1 or raw.max() > T:
        raise ValueError(f"checkpoints must lie in [1, T={T}], got {checkpoints!r}")
    return np.unique(raw.astype(int))


def _with_domain(algorithm, domain):
    return dataclasses.replace(algorithm, domain=domain)