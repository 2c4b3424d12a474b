"""Consensus rounds on all nodes at once (rows of an (..., n, d) array): CHOCO-gossip with a
compressor, and accelerated (two-step) gossip."""

from __future__ import annotations

import math

import numpy as np

from .compressors import Compressor
from .network import second_eigenvalue_modulus

__all__ = ["choco_gossip", "accelerated_gossip", "acceleration_theta"]


def choco_gossip(
    x: np.ndarray, x_hat: np.ndarray, W: np.ndarray, compressor: Compressor, gamma: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """One CHOCO-gossip round on all nodes: q = Q(x − x̂); x̂ ← x̂ + q; x ← x + γ(W − I)x̂."""
    x_hat = x_hat + compressor(x - x_hat, rng)
    x = x + gamma * (W @ x_hat - x_hat)
    return x, x_hat


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
