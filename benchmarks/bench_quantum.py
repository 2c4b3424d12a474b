"""Bench: simulated queries to a target accuracy per mean estimator, and the simulator's own cost
(wall seconds per 10^6 simulated queries, analytic vs statevector backend). Writes
benchmarks/RESULTS_quantum.md. Usage: python benchmarks/bench_quantum.py"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from neurips26.quantum import (
    DiscreteOracle, HeavyTailedMean, MultivariateMean, QueryCounter, amplitude_estimation, student_t,
)


def main() -> None:
    lines = ["# quantum bench (simulated query counts, not seconds on hardware)", "",
             "| estimator | p | eps | planned queries |", "|---|---|---|---|"]
    for p in (1.5, 2.0):
        o = student_t(p + 0.1, K=2**14)
        est = HeavyTailedMean(p, o.moment(p))
        for eps in (0.1, 0.03, 0.01):
            lines.append(f"| HeavyTailedMean (quantum) | {p} | {eps} | {est.plan(eps).queries:.3e} |")
            b = int(np.ceil((2 * o.moment(p) / (0.05 * eps**p)) ** (1 / (p - 1))))
            lines.append(f"| sample mean, von Bahr–Esseen + Markov (classical) | {p} | {eps} | {b:.3e} |")
    lines += ["", "| estimator (p = 2, Student-t(4) per coordinate, ℓ2 eps = 0.01·√tr Σ) | d | planned queries |",
              "|---|---|---|"]
    for d in (1, 16, 256):
        tr = 2.0 * d  # tr Σ of Student-t(4) per coordinate
        eps = 0.01 * np.sqrt(tr)
        lines.append(f"| MultivariateMean (quantum, upper bound) | {d} | {MultivariateMean(2.0, tr).plan(eps, d).queries:.3e} |")
        lines.append(f"| sample mean, Chebyshev (classical) | {d} | {tr / (0.05 * eps**2):.3e} |")
    lines += ["", "| backend | m | seconds per 10^6 simulated queries |", "|---|---|---|"]
    small = DiscreteOracle(np.linspace(0, 1, 16), np.full(16, 1 / 16))
    for backend, m in (("analytic", 8), ("statevector", 8), ("analytic", 20)):
        c = QueryCounter()
        t = time.perf_counter()
        for s in range(20):
            amplitude_estimation(small, lambda v: v[:, 0], m, shots=5, backend=backend, rng=s, counter=c)
        dt = time.perf_counter() - t
        lines.append(f"| {backend} | {m} | {dt / c.queries * 1e6:.3g} |")
    out = Path(__file__).with_name("RESULTS_quantum.md")
    tmp = out.with_suffix(".md.tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(out)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
