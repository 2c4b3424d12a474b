"""Reproduction: quantum mean estimation under heavy tails and QNSGD, in *simulated query
counts* (no quantum hardware; every use of the oracle or its inverse is one query).

Claims are scaling exponents fitted by least squares on log–log data (90% error quantile over
seeds for the mean estimators, median queries for the optimizers), each with a seed-bootstrap
CI and the exponent the paper's bounds predict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..quantum import (
    GradientOracle, HeavyTailedMean, QueryCounter, classical_mean, minibatch_estimator, normalized_sgd, qnsgd,
    student_t,
)
from ..quantum.qae import AnalyticBackend, StatevectorBackend
from ._common import pyplot
from ._harness import RunContext

SIZES = {
    True: dict(ps=[1.5, 2.0], ds=[1, 4], seeds=10, K=2**16, K_opt=2**12,
               n_quantum=[10**5, 10**6, 10**7, 10**8], n_classical=[10**4, 10**5, 10**6, 10**7],
               eps=[0.4, 0.2, 0.1, 0.04], opt_d=4, d_sweep=[1, 2, 4, 8], d_sweep_eps=0.2, opt_seeds=5, boot=1000),
    False: dict(ps=[1.25, 1.5, 1.75, 2.0], ds=[1, 4, 16], seeds=30, K=2**18, K_opt=2**14,
                n_quantum=[10**5, 10**6, 10**7, 10**8, 10**9], n_classical=[10**4, 10**5, 10**6, 10**7, 10**8],
                eps=[0.4, 0.2, 0.1, 0.04], opt_d=4, d_sweep=[1, 2, 4, 8, 16], d_sweep_eps=0.2, opt_seeds=30, boot=2000),
}
DELTA = 0.05
TOL_MEAN = 0.1   # the tolerance on the mean-estimation slopes
TOL_OPT = 0.25   # on the optimizer exponents (one decade of eps, 4 points): fixed before the run
SHIFT = 1.0      # the estimated mean is SHIFT in every coordinate (so that centring matters)


def _df(p: float) -> float:
    """Tail index just above p: the p-th moment is finite (it is the bound the estimators get),
    moments above the tail index grow with the number of atoms K."""
    return p + 0.1


def _law(p, d, K, seed=0):
    return student_t(_df(p), K=K, d=d, seed=seed)


def _nu(o, p) -> float:
    return max(float(o.probs @ np.abs(o.values[:, i] - o.mean[i]) ** p) for i in range(o.d))


@dataclass(frozen=True)
class MeanTask:
    """All seeds of one (p, d, estimator, budget) cell of the mean-estimation sweep."""

    p: float
    d: int
    kind: str  # "quantum" | "median_of_means" | "sample_mean"
    n: int
    seeds: int
    K: int
    seed: int


def run_mean(t: MeanTask) -> dict:
    o = _law(t.p, t.d, t.K).shifted(np.full(t.d, SHIFT))
    errs, qs = [], []
    est = HeavyTailedMean(t.p, _nu(o, t.p), delta=DELTA) if t.kind == "quantum" else None
    for s in range(t.seeds):
        rng = np.random.default_rng([t.seed, s])
        c = QueryCounter()
        if est is not None:
            mu = est(o, n=t.n, rng=rng, counter=c).estimate
        else:
            mu = classical_mean(o, t.n, t.kind, delta=DELTA, rng=rng, counter=c)
        errs.append(float(np.linalg.norm(mu - o.mean)))
        qs.append(c.queries)
    return dict(errors=errs, queries=qs)


def _test_problem(d: int, K: int, p: float, seed: int = 0) -> GradientOracle:
    """f(x) = Σ x_i²/(1 + x_i²) + ½ xᵀHx with H = R diag(0.1..0.5) Rᵀ (a rotated quadratic), smooth
    and nonconvex, ∇f known; Student-t(p + 0.1) noise per coordinate."""
    rng = np.random.default_rng(1000 + d)
    R = np.linalg.qr(rng.standard_normal((d, d)))[0]
    H = R @ np.diag(np.linspace(0.1, 0.5, d)) @ R.T
    return GradientOracle(lambda x: 2 * x / (1 + x**2) ** 2 + H @ x, _law(p, d, K, seed),
                          lambda x: float(np.sum(x**2 / (1 + x**2)) + 0.5 * x @ H @ x))


def classical_batch(p: float, nu: float, acc: float, d: int, delta: float = DELTA) -> int:
    """Minibatch size for ℓ2 accuracy ``acc`` w.p. 1 − δ from the von Bahr–Esseen bound
    E|mean − μ|^p ≤ 2ν b^{1−p} per coordinate (accuracy acc/√d, failure δ/d each) and Markov."""
    t = acc / math.sqrt(d)
    return max(1, math.ceil((2 * nu * d / (delta * t**p)) ** (1 / (p - 1))))


@dataclass(frozen=True)
class OptTask:
    p: float
    d: int
    method: str  # "qnsgd" | "nsgd"
    eps: float
    seeds: int
    K: int
    seed: int


def run_opt(t: OptTask) -> dict:
    o = _test_problem(t.d, t.K, t.p)
    nu = _nu(o.noise, t.p)
    x0 = np.full(t.d, 2.0 / math.sqrt(t.d))
    eta = t.eps / 4
    out = dict(queries=[], steps=[], reached=[])
    for s in range(t.seeds):
        rng = np.random.default_rng([t.seed, s])
        if t.method == "qnsgd":
            tr = qnsgd(o, x0, eta=eta, eps=t.eps, max_queries=10**18, estimator=HeavyTailedMean(t.p, nu, DELTA),
                       max_steps=4000, rng=rng)
        else:
            b = classical_batch(t.p, nu, t.eps / 4, t.d)
            tr = normalized_sgd(o, x0, eta=eta, estimator=minibatch_estimator(b), max_queries=10**18, stop_eps=t.eps,
                                max_steps=4000, rng=rng)
        out["queries"].append(float(tr.queries[-1]))
        out["steps"].append(len(tr.queries) - 1)
        out["reached"].append(bool(tr.reached))
    return out


def fit_slope(x, samples, stat, boot: int, rng) -> tuple[float, float, float]:
    """Least-squares slope of log stat(samples[i]) on log x[i]; 90% CI by resampling the seeds of
    every size with replacement (``boot`` times)."""
    lx = np.log(np.asarray(x, float))
    y = np.log([stat(np.asarray(s)) for s in samples])
    slope = float(np.polyfit(lx, y, 1)[0])
    bs = []
    for _ in range(boot):
        yb = np.log([stat(np.asarray(s)[rng.integers(0, len(s), len(s))]) for s in samples])
        bs.append(np.polyfit(lx, yb, 1)[0])
    lo, hi = np.quantile(bs, [0.05, 0.95])
    return slope, float(lo), float(hi)


def q90(e):
    return float(np.quantile(e, 0.9))


def run(ctx: RunContext) -> None:
    S = SIZES[ctx.quick]
    ctx.config.update(S, delta=DELTA, tol_mean=TOL_MEAN, tol_opt=TOL_OPT, shift=SHIFT, backend="analytic",
                      df="p + 0.1 (Student-t, quantile-discretized)")
    rng = np.random.default_rng(ctx.seed)
    kinds = {"quantum": S["n_quantum"], "median_of_means": S["n_classical"], "sample_mean": S["n_classical"]}
    mtasks = [MeanTask(p, d, k, n, S["seeds"], S["K"], ctx.seed) for p in S["ps"] for d in S["ds"]
              for k, ns in kinds.items() for n in ns]
    otasks = [OptTask(p, S["opt_d"], m, e, S["opt_seeds"], S["K_opt"], ctx.seed) for p in S["ps"]
              for m in ("qnsgd", "nsgd") for e in S["eps"]]
    otasks += [OptTask(p, d, m, S["d_sweep_eps"], S["opt_seeds"], S["K_opt"], ctx.seed) for p in S["ps"]
               for m in ("qnsgd", "nsgd") for d in S["d_sweep"] if d != S["opt_d"] or S["d_sweep_eps"] not in S["eps"]]
    res = ctx.map(run_mean, mtasks, description="mean estimation cells")
    ores = ctx.map(run_opt, otasks, description="optimizer cells")
    mean = {(t.p, t.d, t.kind, t.n): r for t, r in zip(mtasks, res)}
    opt = {(t.p, t.d, t.method, t.eps): r for t, r in zip(otasks, ores)}
    _record(ctx, S, mean, opt, kinds, rng)
    _spot_check(ctx)


def _record(ctx, S, mean, opt, kinds, rng) -> None:
    slopes = {}
    rows = []
    for p in S["ps"]:
        for d in S["ds"]:
            for kind, ns in kinds.items():
                cells = [mean[(p, d, kind, n)] for n in ns]
                qmean = [float(np.mean(c["queries"])) for c in cells]
                s, lo, hi = fit_slope(qmean, [c["errors"] for c in cells], q90, S["boot"], rng)
                pred = -2 * (p - 1) / p if kind == "quantum" else -(p - 1) / p
                slopes[(p, d, kind)] = dict(slope=s, ci=[lo, hi], predicted=pred, queries=qmean,
                                            q90=[q90(c["errors"]) for c in cells])
                ctx.metric(f"mean/p{p}/d{d}/{kind}", slopes[(p, d, kind)])
                rows.append((p, d, kind, s, f"[{lo:.3f}, {hi:.3f}]", pred, abs(s - pred) <= TOL_MEAN))
    for p in S["ps"]:
        for d in S["ds"]:
            q, c = slopes[(p, d, "quantum")], slopes[(p, d, "median_of_means")]
            ctx.claim(f"Mean estimation, p = {p}, d = {d}: the quantum heavy-tailed estimator's error slope in the "
                      f"query count is {q['predicted']:.3f} ± {TOL_MEAN} (90% error quantile; fitted CI "
                      f"[{q['ci'][0]:.3f}, {q['ci'][1]:.3f}]; baseline column: the predicted slope)",
                      ours=q["slope"], baseline=q["predicted"], holds=abs(q["slope"] - q["predicted"]) <= TOL_MEAN)
            ctx.claim(f"Mean estimation, p = {p}, d = {d}: classical median-of-means error slope is "
                      f"{c['predicted']:.3f} ± {TOL_MEAN} (CI [{c['ci'][0]:.3f}, {c['ci'][1]:.3f}]; baseline: predicted)",
                      ours=c["slope"], baseline=c["predicted"], holds=abs(c["slope"] - c["predicted"]) <= TOL_MEAN)
            ctx.claim(f"Mean estimation, p = {p}, d = {d}: the quantum slope is steeper than median-of-means' "
                      "(upper end of the quantum CI below the lower end of the classical CI)",
                      ours=q["slope"], baseline=c["slope"], holds=q["ci"][1] < c["ci"][0])
    ctx.claim("High-dimensional regime: the quantum estimator beats median-of-means only for d ≲ n, crossover within "
              "a factor 4 of d = n — not tested: the Cornelissen–Hamoudi–Jerbi multivariate phase-estimation "
              "estimator is not implemented (ours is coordinate-wise, whose crossover sits near d ≈ √n by design)",
              ours=float("nan"), baseline=float("nan"), holds=None)
    ctx.table("Mean estimation: fitted slope of the 90% error quantile in the query count",
              ["p", "d", "estimator", "slope", "90% CI", "predicted", f"within {TOL_MEAN}"], rows)

    # --- optimizers ----------------------------------------------------------------------
    orows = []
    d0 = S["opt_d"]
    ofits = {}
    for p in S["ps"]:
        for method in ("qnsgd", "nsgd"):
            cells = [opt[(p, d0, method, e)] for e in S["eps"]]
            reached = all(all(c["reached"]) for c in cells)
            s, lo, hi = fit_slope([1 / e for e in S["eps"]], [c["queries"] for c in cells], np.median, S["boot"], rng)
            st, _, _ = fit_slope([1 / e for e in S["eps"]], [c["steps"] for c in cells], np.median, 1, rng)
            pred = (5 * p - 4) / (2 * p - 2) if method == "qnsgd" else (3 * p - 2) / (p - 1)
            ofits[(p, method)] = dict(slope=s, ci=[lo, hi], predicted=pred, steps_slope=st, reached=reached,
                                      median_queries=[float(np.median(c["queries"])) for c in cells])
            ctx.metric(f"opt/p{p}/d{d0}/{method}", ofits[(p, method)])
            orows.append((p, method, s, f"[{lo:.2f}, {hi:.2f}]", pred, st, reached))
        q, c = ofits[(p, "qnsgd")], ofits[(p, "nsgd")]
        for name, f in (("QNSGD", q), ("minibatch NSGD", c)):
            ctx.claim(f"Nonconvex, p = {p}, d = {d0}: {name}'s queries to ‖∇f‖ ≤ ε grow as ε^-{f['predicted']:.2f} "
                      f"(fitted on ε = {S['eps']}, ± {TOL_OPT}; CI [{f['ci'][0]:.2f}, {f['ci'][1]:.2f}]; baseline: predicted)",
                      ours=f["slope"], baseline=f["predicted"],
                      holds=(abs(f["slope"] - f["predicted"]) <= TOL_OPT) if f["reached"] else None)
        gap_pred = -p / (2 * p - 2)
        ctx.claim(f"Nonconvex, p = {p}: the exponent gap QNSGD − classical is {gap_pred:.2f} ± {TOL_OPT} "
                  "(the per-step estimator's share of the exponent; ours: QNSGD slope, baseline: NSGD slope)",
                  ours=q["slope"], baseline=c["slope"],
                  holds=abs((q["slope"] - c["slope"]) - gap_pred) <= TOL_OPT if q["reached"] and c["reached"] else None)
        dq = [opt[(p, d, "qnsgd", S["d_sweep_eps"])] for d in S["d_sweep"]]
        sd, lo, hi = fit_slope(S["d_sweep"], [c_["queries"] for c_ in dq], np.median, S["boot"], rng)
        dpred = p / (4 * (p - 1))
        ctx.metric(f"opt/p{p}/d_exponent", dict(slope=sd, ci=[lo, hi], predicted=dpred, ds=S["d_sweep"],
                                                 median_queries=[float(np.median(c_["queries"])) for c_ in dq]))
        ctx.claim(f"Nonconvex, p = {p}: QNSGD's queries grow as d^{dpred:.2f} at ε = {S['d_sweep_eps']} (± {TOL_OPT}; "
                  f"CI [{lo:.2f}, {hi:.2f}]; our multivariate estimator is coordinate-wise)",
                  ours=sd, baseline=dpred, holds=abs(sd - dpred) <= TOL_OPT)
    ctx.claim("Convex: QPSGD's queries to ε-optimality grow as ε^-(3p-2)/(2p-2) vs classical ε^-p/(p-1) — not tested "
              "in this run (QPSGD and the unbiased MLMC estimator are implemented and unit-tested; the convex sweep is not)",
              ours=float("nan"), baseline=float("nan"), holds=None)
    ctx.table(f"Nonconvex (d = {d0}): fitted exponent of the median queries to ‖∇f‖ ≤ ε in 1/ε",
              ["p", "method", "exponent", "90% CI", "predicted", "steps exponent", "all seeds reached ε"], orows)
    ctx.text("All numbers are **simulated query counts** (analytic backend: each amplitude-estimation call is "
             "drawn from its exact outcome law; every use of the sampling oracle or its inverse counts as one query, "
             "a classical sample as one). Laws: Student-t with df = p + 0.1, quantile-discretized on K atoms, "
             f"shifted to mean {SHIFT}; the moment bound given to the estimators is the exact p-th central moment "
             "of the discretized law. Mean-estimation slopes use the 90% quantile of the ℓ2 error over seeds; "
             "optimizer exponents the median queries; CIs are 90% seed-bootstrap intervals. QNSGD takes "
             "η = ε/4 and gradient accuracy ε/4 (quantum estimator planned for that accuracy w.p. 1 − δ); the "
             "classical minibatch NSGD takes the minibatch that the von Bahr–Esseen bound needs for the same "
             "accuracy and δ.")
    _figures(ctx, S, slopes, ofits, opt, kinds)


def _spot_check(ctx) -> None:
    """The analytic law against the statevector simulation of the circuit on a small instance of
    each law used (20 atoms, m = 1..8)."""
    worst = 0.0
    for p in SIZES[ctx.quick]["ps"]:
        o = _law(p, 1, 20)
        for k in range(4):
            z = np.clip(np.abs(o.values[:, 0]) / (2.0**k), 0, 1) * (o.values[:, 0] > 0)
            for m in range(1, 9):
                a = AnalyticBackend().law(o.probs, z, m)
                b = StatevectorBackend().law(o.probs, z, m)
                worst = max(worst, 0.5 * float(np.abs(a - b).sum()))
    ctx.metric("statevector_spot_check_tv", worst)
    try:
        from ..quantum.qae import QiskitBackend

        o = _law(2.0, 1, 6)
        z = np.clip(o.values[:, 0] / 4 + 0.5, 0, 1)
        tv = max(0.5 * float(np.abs(AnalyticBackend().law(o.probs, z, m) - QiskitBackend().law(o.probs, z, m)).sum())
                 for m in (2, 4))
        ctx.metric("qiskit_cross_check_tv", tv)
    except ImportError:  # the quantum extra is not installed
        pass


def _figures(ctx, S, slopes, ofits, opt, kinds) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(len(S["ps"]), len(S["ds"]), figsize=(4.2 * len(S["ds"]), 3.4 * len(S["ps"])), squeeze=False)
    for i, p in enumerate(S["ps"]):
        for j, d in enumerate(S["ds"]):
            ax = axes[i, j]
            for kind, style in zip(kinds, ("o-", "s--", "^:")):
                f = slopes[(p, d, kind)]
                ax.loglog(f["queries"], f["q90"], style, label=f"{kind} (slope {f['slope']:.2f}, pred. {f['predicted']:.2f})")
            ax.set_title(f"p = {p}, d = {d}")
            ax.set_xlabel("queries n (simulated)")
            ax.set_ylabel("90% quantile of ℓ2 error")
            ax.legend(fontsize=6)
    fig.tight_layout()
    ctx.figure(fig, "mean_error_vs_queries", "Mean estimation: error against simulated queries, log–log.")
    plt.close(fig)
    fig, axes = plt.subplots(1, len(S["ps"]), figsize=(4.6 * len(S["ps"]), 3.6), squeeze=False)
    for ax, p in zip(axes[0], S["ps"]):
        for method, style in (("qnsgd", "o-"), ("nsgd", "s--")):
            f = ofits[(p, method)]
            ax.loglog([1 / e for e in S["eps"]], f["median_queries"], style,
                      label=f"{method} (exp. {f['slope']:.2f}, pred. {f['predicted']:.2f})")
        ax.set_title(f"nonconvex, p = {p}, d = {S['opt_d']}")
        ax.set_xlabel("1/ε")
        ax.set_ylabel("median queries to ‖∇f‖ ≤ ε")
        ax.legend(fontsize=7)
    fig.tight_layout()
    ctx.figure(fig, "queries_vs_inv_eps", "Nonconvex: simulated queries to an ε-stationary point, log–log.")
    plt.close(fig)
