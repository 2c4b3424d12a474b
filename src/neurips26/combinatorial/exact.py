"""Exact references and solvers: the Gibbs distribution by enumeration, chain properties
(irreducibility, total variation), k-subset's log partition function and marginals by the
elementary-symmetric-polynomial recursion, and the binary MILP solve (HiGHS) behind every
exact global or block optimum."""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["gibbs", "is_irreducible", "tv_distance", "empirical_distribution", "ksubset_log_partition",
           "ksubset_marginals", "solve_binary_milp"]


def gibbs(states: np.ndarray, theta, temperature: float = 1.0) -> np.ndarray:
    """p(y) ∝ exp(θᵀy / T) over the given states."""
    z = np.asarray(states, dtype=float) @ np.asarray(theta, dtype=float) / temperature
    p = np.exp(z - z.max())
    return p / p.sum()


def is_irreducible(P: np.ndarray) -> bool:
    """Whether every state reaches every other along transitions with positive probability."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    n_comp, _ = connected_components(csr_matrix(P > 0), directed=True, connection="strong")
    return n_comp == 1


def empirical_distribution(samples: np.ndarray, states: np.ndarray) -> np.ndarray:
    """Frequencies of ``states`` among ``samples`` (rows); a sample outside ``states`` is an error."""
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
    return 0.5 * float(np.abs(np.asarray(p) - np.asarray(q)).sum())


def ksubset_log_partition(theta: torch.Tensor, k: int, temperature: float = 1.0) -> torch.Tensor:
    """log Σ_{|S| = k} exp(Σ_{i∈S} θ_i / T), batched over leading dimensions and
    differentiable: the recursion e_j ← logaddexp(e_j, e_{j−1} + θ_i/T) over the items, in
    log space (stable for any θ scale), O(n k)."""
    if not 0 < k <= theta.shape[-1]:
        raise ValueError(f"need 0 < k <= n, got k={k}, n={theta.shape[-1]}")
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
    t = torch.as_tensor(np.asarray(theta, dtype=float)).requires_grad_(True)
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
