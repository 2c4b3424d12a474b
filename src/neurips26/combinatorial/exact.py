"""Exact references and solvers: the Gibbs distribution by enumeration, chain properties
(irreducibility, total variation), k-subset's log partition function and marginals by the
elementary-symmetric-polynomial recursion, and the binary MILP solve (HiGHS) behind every
exact global or block optimum."""

from __future__ import annotations

import numpy as np
import torch

from .._checks import check_int, check_real

__all__ = ["gibbs", "is_irreducible", "tv_distance", "empirical_distribution", "ksubset_log_partition",
           "ksubset_marginals", "solve_binary_milp"]


def _finite_array(name: str, value, ndim: int | None = None) -> np.ndarray:
    try:
        a = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be an array of real numbers ({exc})") from None
    if ndim is not None and a.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} holds NaN or inf")
    return a


def gibbs(states: np.ndarray, theta, temperature: float = 1.0) -> np.ndarray:
    """p(y) ∝ exp(θᵀy / T) over the given states (n_states, n) with θ (n,) and T > 0."""
    check_real("temperature", temperature, low=0, low_open=True)
    states = _finite_array("states", states, 2)
    theta = _finite_array("theta", theta, 1)
    if len(states) == 0:
        raise ValueError("states must hold at least one state, got shape (0, ...)")
    if theta.shape != (states.shape[1],):
        raise ValueError(f"theta must have shape ({states.shape[1]},), one entry per variable, got {theta.shape}")
    z = states @ theta / temperature
    p = np.exp(z - z.max())
    return p / p.sum()


def is_irreducible(P: np.ndarray) -> bool:
    """Whether every state reaches every other along transitions with positive probability."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    P = np.asarray(P)
    if P.ndim != 2 or P.shape[0] != P.shape[1]:
        raise ValueError(f"P must be a square transition matrix, got shape {P.shape}")
    n_comp, _ = connected_components(csr_matrix(P > 0), directed=True, connection="strong")
    return n_comp == 1


def empirical_distribution(samples: np.ndarray, states: np.ndarray) -> np.ndarray:
    """Frequencies of ``states`` among ``samples`` (rows); a sample outside ``states`` is an error."""
    samples, states = np.asarray(samples), np.asarray(states)
    if states.ndim != 2 or samples.ndim != 2 or samples.shape[1] != states.shape[1] or len(samples) == 0:
        raise ValueError(f"samples must be a non-empty (n_samples, {states.shape[-1]}) array of states like "
                         f"states {states.shape}, got shape {samples.shape}")
    index = {row.tobytes(): i for i, row in enumerate(np.asarray(states, dtype=np.int8))}
    counts = np.zeros(len(states))
    keys, freq = np.unique(np.asarray(samples, dtype=np.int8), axis=0, return_counts=True)
    for row, c in zip(keys, freq):
        try:
            counts[index[row.tobytes()]] += c
        except KeyError:
            raise ValueError(f"a sample is not among the given states: {row.tolist()}") from None
    return counts / counts.sum()


def tv_distance(p: np.ndarray, q: np.ndarray) -> float:
    """½ Σ |p − q| of two distributions of one shape."""
    p, q = np.asarray(p), np.asarray(q)
    if p.shape != q.shape:
        raise ValueError(f"p and q must have one shape, got {p.shape} and {q.shape}")
    if not (np.all(np.isfinite(p)) and np.all(np.isfinite(q))):
        raise ValueError("p and q must be finite (no NaN or inf)")
    return 0.5 * float(np.abs(p - q).sum())


def ksubset_log_partition(theta: torch.Tensor, k: int, temperature: float = 1.0) -> torch.Tensor:
    """log Σ_{|S| = k} exp(Σ_{i∈S} θ_i / T), batched over leading dimensions and
    differentiable: the recursion e_j ← logaddexp(e_j, e_{j−1} + θ_i/T) over the items, in
    log space (stable for any θ scale), O(n k). ``k`` an integer in 1..n, T finite > 0."""
    if not isinstance(theta, torch.Tensor):
        raise TypeError(f"theta must be a torch tensor, got {type(theta).__name__}")
    k = check_int("k", k)
    check_real("temperature", temperature, low=0, low_open=True)
    if not 0 < k <= theta.shape[-1]:
        raise ValueError(f"k must be an integer with 0 < k <= n, got k={k}, n={theta.shape[-1]}")
    z = theta / temperature
    # log 0 as a finite floor, not −inf: logaddexp(−inf, −inf) has a NaN gradient
    floor = torch.finfo(z.dtype).min / 8
    empty = torch.full(z.shape[:-1] + (k,), floor, dtype=z.dtype, device=z.device)
    e = torch.cat([torch.zeros(z.shape[:-1] + (1,), dtype=z.dtype, device=z.device), empty], dim=-1)  # e_0..e_k
    for i in range(z.shape[-1]):
        shifted = torch.cat([torch.full_like(e[..., :1], floor), e[..., :-1] + z[..., i: i + 1]], dim=-1)
        e = torch.logaddexp(e, shifted)
    return e[..., k]


def ksubset_marginals(theta, k: int, temperature: float = 1.0) -> np.ndarray:
    """P(y_i = 1) under p(y) ∝ exp(θᵀy / T) on {Σy = k}: T · ∂ log Z / ∂θ."""
    t = torch.as_tensor(_finite_array("theta", theta)).requires_grad_(True)
    (grad,) = torch.autograd.grad(ksubset_log_partition(t, k, temperature).sum(), t)
    return (grad * temperature).numpy()


def solve_binary_milp(cost, constraints, time_limit: float | None = None) -> np.ndarray:
    """argmin costᵀy over y ∈ {0, 1}ⁿ subject to lo ≤ A y ≤ hi for every (A, lo, hi) of
    ``constraints`` (the format of the problems' ``milp()`` and ``block_milp()``), by HiGHS
    through ``scipy.optimize.milp``. To maximize θᵀy pass cost = −θ.

    Args:
        cost: (n,) finite objective coefficients.
        constraints: (A (m, n), lo, hi) triples, lo / hi scalars or (m,) arrays (±inf for
            a one-sided row).
        time_limit: seconds for HiGHS; when it runs out, the best feasible y found so far.
            None or 0: no limit.

    Returns y (n,) as int8. Raises RuntimeError when HiGHS finds no feasible y (an
    infeasible problem, or none found within the time limit).
    """
    from scipy.optimize import Bounds, LinearConstraint, milp

    cost = np.asarray(cost)
    if time_limit is not None:
        check_real("time_limit", time_limit, low=0)
    if cost.ndim != 1 or not np.all(np.isfinite(cost)):
        raise ValueError(f"cost must be a finite vector, got shape {cost.shape}")
    for A, _, _ in constraints:
        if np.ndim(A) != 2 or np.shape(A)[1] != len(cost):
            raise ValueError(f"every constraint matrix must have {len(cost)} columns, got shape {np.shape(A)}")
    options = {"time_limit": time_limit} if time_limit else {}
    res = milp(cost, integrality=np.ones(len(cost)), bounds=Bounds(0, 1),
               constraints=[LinearConstraint(A, lo, hi) for A, lo, hi in constraints], options=options)
    if res.x is None:
        raise RuntimeError(f"the MILP found no feasible solution ({res.message})")
    return np.round(res.x).astype(np.int8)
