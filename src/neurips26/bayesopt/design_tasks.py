"""A procedural robot-design task for LSBO: planar serial arms from a small grammar.

A design is a string of 2–8 segments ``"L{a}{b}"``: link length a ∈ {1..4} (× 0.25) and
joint angle b ∈ {0..8} (× 22.5° − 90°) relative to the previous link, e.g. ``"L24L38L10"``.
Its fitness (maximized) is analytic: the arm, drawn from the origin along the x-axis, should
reach a target point T with its tip, stay clear of a disc obstacle O, and be cheap:

    fitness = −‖tip − T‖ − 2·Σ_links max(0, r_O − dist(link, O)) − 0.05·Σ lengths − 0.02·#links

(dist(link, O): the distance from O's centre to the segment). The best designs need a bend
round the obstacle, so the landscape has a narrow, structured optimum.
"""

from __future__ import annotations

import re

import numpy as np

__all__ = ["ARM_VOCAB", "arm_tokens", "arm_from_tokens", "arm_fitness", "random_arms", "ARM_MAX_TOKENS"]

ARM_VOCAB = [f"L{a}{b}" for a in range(1, 5) for b in range(9)]
ARM_MAX_TOKENS = 8
TARGET = np.array([1.2, 1.6])
OBSTACLE, RADIUS = np.array([0.9, 0.7]), 0.35
_TOKEN = re.compile(r"L[1-4][0-8]")


def arm_tokens(design: str) -> list[str]:
    toks = _TOKEN.findall(design)
    if "".join(toks) != design:
        raise ValueError(f"{design!r} is not a sequence of L<length 1-4><angle 0-8> segments")
    return toks


def arm_from_tokens(tokens: list[str]) -> str | None:
    """The design, or None if it has fewer than 2 or more than 8 segments."""
    if not (2 <= len(tokens) <= ARM_MAX_TOKENS) or not all(_TOKEN.fullmatch(t) for t in tokens):
        return None
    return "".join(tokens)


def _segments(design: str) -> np.ndarray:
    toks = arm_tokens(design)
    lengths = np.array([0.25 * int(t[1]) for t in toks])
    turns = np.radians(np.array([22.5 * int(t[2]) - 90.0 for t in toks]))
    heading = np.cumsum(turns)
    steps = lengths[:, None] * np.stack([np.cos(heading), np.sin(heading)], 1)
    joints = np.vstack([np.zeros(2), np.cumsum(steps, 0)])
    return joints


def _point_segment_distance(p, a, b):
    ab = b - a
    t = np.clip(((p - a) * ab).sum(-1) / np.maximum((ab * ab).sum(-1), 1e-12), 0, 1)
    closest = a + t[:, None] * ab
    return np.linalg.norm(closest - p, axis=-1)


def arm_fitness(design: str) -> float:
    joints = _segments(design)
    n = len(joints) - 1
    tip_error = float(np.linalg.norm(joints[-1] - TARGET))
    d = _point_segment_distance(OBSTACLE, joints[:-1], joints[1:])
    collision = float(np.maximum(0.0, RADIUS - d).sum())
    length = float(np.linalg.norm(np.diff(joints, axis=0), axis=1).sum())
    return -tip_error - 2.0 * collision - 0.05 * length - 0.02 * n


def random_arms(n: int, rng: np.random.Generator) -> list[str]:
    """``n`` procedural designs, the VAE's training set: 2–8 segments, a base link length
    that changes with probability 0.2 per segment, and joint angles from a random walk
    around a base bend (so arms are smooth curves with occasional kinks, not token noise)."""
    out = []
    for _ in range(n):
        k = int(rng.integers(2, ARM_MAX_TOKENS + 1))
        length = int(rng.integers(1, 5))
        bend = int(rng.integers(2, 7))
        toks = []
        for _ in range(k):
            if rng.random() < 0.2:
                length = int(rng.integers(1, 5))
            bend = int(np.clip(bend + rng.integers(-1, 2), 0, 8))
            toks.append(f"L{length}{bend}")
        out.append("".join(toks))
    return out
