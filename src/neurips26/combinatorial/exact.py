"""Exact references for small instances and for k-subset: the Gibbs distribution by
enumeration, chain properties (irreducibility, total variation), and k-subset's log
partition function and marginals by the elementary-symmetric-polynomial recursion."""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["gibbs", "is_irreducible", "tv_distance", "empirical_distribution", "ksubset_log_partition",
           "ksubset_marginals"]


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
