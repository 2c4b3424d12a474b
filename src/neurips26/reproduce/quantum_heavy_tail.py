"""Reproduction: quantum mean estimation under heavy tails and QNSGD, in *simulated query
counts* (no quantum hardware; every use of the oracle or its inverse is one query).

Claims are scaling exponents fitted by least squares on log–log data (90% error quantile over
seeds for the mean estimators, median queries for the optimizers), each decided from its 95 %
seed-bootstrap interval (``RunContext.decide``): "the slope is the predicted one ± tol" holds when
the whole interval lies within the band, does not hold when it lies wholly outside it, and is
inconclusive otherwise; "steeper than" compares the bootstrap draws of the two slopes.

Four sweeps: mean estimation (error vs queries), the high-dimensional crossover, nonconvex QNSGD
(queries to ‖∇f‖ ≤ ε) and convex QPSGD (queries to f(x̄) − f* ≤ ε on a strongly convex quadratic on a
ball, QPSGD on the unbiased MLMC estimator against classical projected minibatch SGD; at p = 2 both
predicted exponents are 2 and the claim made is the tie). The full size runs the convex sweep a second
time on ℓ2-regularized logistic regression on generated data (f* from Newton's method); the quick size
runs the quadratic only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from ..quantum import (
    Ball, GradientOracle, HeavyTailedMean, MultivariateMean, QueryCounter, UnbiasedMLMC, classical_mean, clipped_sgd,
    minibatch_estimator, normalized_sgd, projected_sgd, qnsgd, qpsgd, student_t,
)
from ..quantum.qae import AnalyticBackend, StatevectorBackend
from ._common import pyplot
from ._harness import RunContext

SIZES = {
    True: dict(ps=[1.5, 2.0], ds=[1, 4], seeds=10, K=2**16, K_opt=2**12,
               n_quantum=[10**5, 10**6, 10**7, 10**8], n_classical=[10**4, 10**5, 10**6, 10**7],
               eps=[0.4, 0.2, 0.1, 0.04], opt_d=4, d_sweep=[1, 2, 4, 8], d_sweep_eps=0.2, opt_seeds=5, boot=1000,
               cross_n=[10**10, 3 * 10**10, 10**11, 3 * 10**11], cross_d=[1, 4, 16, 64, 256, 1024, 4096], cross_seeds=10, cross_K=1024,
               cvx_eps=[0.4, 0.2, 0.1, 0.04], cvx_d=2, cvx_seeds=10, K_cvx=2**12),
    False: dict(ps=[1.25, 1.5, 1.75, 2.0], ds=[1, 4, 16], seeds=30, K=2**18, K_opt=2**14,
                n_quantum=[10**5, 10**6, 10**7, 10**8, 10**9], n_classical=[10**4, 10**5, 10**6, 10**7, 10**8],
                eps=[0.4, 0.2, 0.1, 0.04], opt_d=4, d_sweep=[1, 2, 4, 8, 16], d_sweep_eps=0.2, opt_seeds=30, boot=2000,
                cross_n=[10**10, 10**11, 10**12, 10**13], cross_d=[1, 4, 16, 64, 256, 1024, 4096, 16384], cross_seeds=30,
                cross_K=4096, cvx_eps=[0.4, 0.2, 0.1, 0.04, 0.02], cvx_d=4, cvx_seeds=30, K_cvx=2**14,
                cvx_logistic=True),  # the convex sweep also on logistic regression (full size only)
}
DELTA = 0.05
TOL_MEAN = 0.1   # the tolerance on the mean-estimation slopes
TOL_OPT = 0.25   # on the optimizer exponents (one decade of eps, 4 points): fixed before the run
SHIFT = 1.0      # the estimated mean is SHIFT in every coordinate (so that centring matters)
CROSS_DF = 4.0   # the crossover sweep's law: Student-t(4) per coordinate (finite covariance, tr Σ = 2d)
SGD_LR = 0.2     # plain / clipped SGD step: 1/(2L), L = 2.5 bounds the test function's Hessian
CLIP = 1.0       # clipped SGD's level λ (torch.nn.utils.clip_grad_norm_)
CONVEX_METHODS = ("qpsgd", "psgd")  # psgd: classical projected minibatch SGD
OPT_METHODS = ("qnsgd", "qnsgd_mv", "nsgd", "sgd", "clipped_sgd")  # qnsgd_mv: QNSGD on MultivariateMean
TOL_CROSS = 0.25  # on the exponent of the crossover dimension in n (3 budgets): fixed before the run
CVX_EIG = (1.0, 3.0)  # the convex quadratic's Hessian spectrum (μ = 1, L = 3)
CVX_RADIUS = 1.0      # the ball the convex methods project onto (diameter D = 2)
CVX_LR = 1 / (2 * CVX_EIG[1])  # classical projected minibatch SGD's step 1/(2L)
CVX_MAX_STEPS = 4000
LOGI_N = 400       # samples of the generated logistic-regression data
LOGI_STD = 2.0     # features N(0, LOGI_STD² I): L ≈ 1, μ ≈ 0.5 at d ≤ 8 (the quadratic's 3 and 1)
LOGI_NORM = 0.5    # ‖w₀‖ of the model that draws the labels (the minimizer lands near it, in the ball)
LOGI_RIDGE = 0.01  # λ of the ridge term λ/2 ‖x‖²: f strongly convex, its minimizer unique and computed exactly


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


@dataclass(frozen=True)
class CrossTask:
    """All seeds of one (n, d) cell of the high-dimensional sweep. ``kind`` "multivariate": the
    quantum estimator at planned budget n; a classical kind: ``n`` samples per seed (the quantum
    cell's median actual queries)."""

    n: int
    d: int
    kind: str  # "multivariate" | "sample_mean" | "geometric_median_of_means"
    seeds: int
    K: int
    seed: int


def _cross_law(d, K):
    return student_t(CROSS_DF, K=K, d=d, seed=1).shifted(np.full(d, SHIFT))


def run_cross(t: CrossTask) -> dict:
    o = _cross_law(t.d, t.K)
    est = MultivariateMean(2.0, o.moment(2), delta=DELTA) if t.kind == "multivariate" else None
    errs, qs = [], []
    for s in range(t.seeds):
        rng = np.random.default_rng([t.seed, 7, s])
        c = QueryCounter()
        mu = est(o, n=t.n, rng=rng, counter=c).estimate if est is not None else \
            classical_mean(o, t.n, t.kind, delta=DELTA, rng=rng, counter=c)
        errs.append(float(np.linalg.norm(mu - o.mean)))
        qs.append(c.queries)
    return dict(errors=errs, queries=qs)


def crossover(ds, ratios) -> float | None:
    """The dimension where ``ratio(d) = quantum error / classical error`` crosses 1 upwards, by
    log–log interpolation between the grid points around the first crossing; None when the ratio
    does not cross 1 on the grid (below 1 at the largest d or at least 1 at the smallest)."""
    lr = np.log(np.asarray(ratios, float))
    ld = np.log(np.asarray(ds, float))
    for i in range(len(ds) - 1):
        if lr[i] < 0 <= lr[i + 1]:
            return float(np.exp(ld[i] + (ld[i + 1] - ld[i]) * (-lr[i]) / (lr[i + 1] - lr[i])))
    return None


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
    method: str  # one of OPT_METHODS
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
    mv = MultivariateMean(t.p, o.noise.moment(t.p), DELTA) if t.method == "qnsgd_mv" else None
    for s in range(t.seeds):
        rng = np.random.default_rng([t.seed, s])
        if mv is not None:
            tr = qnsgd(o, x0, eta=eta, eps=t.eps, max_queries=10**18, estimator=mv, max_steps=4000, rng=rng)
        elif t.method == "qnsgd":
            tr = qnsgd(o, x0, eta=eta, eps=t.eps, max_queries=10**18, estimator=HeavyTailedMean(t.p, nu, DELTA),
                       max_steps=4000, rng=rng)
        elif t.method in ("sgd", "clipped_sgd"):
            b = classical_batch(t.p, nu, t.eps / 4, t.d)
            tr = clipped_sgd(o, x0, eta=SGD_LR, clip=CLIP if t.method == "clipped_sgd" else None,
                             estimator=minibatch_estimator(b), max_queries=10**18, stop_eps=t.eps, max_steps=4000, rng=rng)
        else:
            b = classical_batch(t.p, nu, t.eps / 4, t.d)
            tr = normalized_sgd(o, x0, eta=eta, estimator=minibatch_estimator(b), max_queries=10**18, stop_eps=t.eps,
                                max_steps=4000, rng=rng)
        out["queries"].append(float(tr.queries[-1]))
        out["steps"].append(len(tr.queries) - 1)
        out["reached"].append(bool(tr.reached))
    return out


def _convex_problem(d: int, K: int, p: float) -> tuple[GradientOracle, np.ndarray]:
    """f(x) = ½ (x − x*)ᵀ A (x − x*) with A = R diag(linspace(1, 3, d)) Rᵀ (strongly convex, L = 3), x* = 0.5·1/√d
    inside the unit ball (f* = 0, attained in the set); Student-t(p + 0.1) gradient noise per coordinate."""
    rng = np.random.default_rng(2000 + d)
    R = np.linalg.qr(rng.standard_normal((d, d)))[0]
    A = R @ np.diag(np.linspace(*CVX_EIG, d)) @ R.T
    xs = np.full(d, 0.5 / math.sqrt(d))
    return GradientOracle(lambda x: A @ (x - xs), _law(p, d, K),
                          lambda x: float(0.5 * (x - xs) @ A @ (x - xs))), xs


def logistic_data(d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Generated data of a well-specified logistic model: features a_i ~ N(0, LOGI_STD² I) (i < LOGI_N),
    labels y_i = ±1 with P(y_i = 1) = σ(a_iᵀw₀), ‖w₀‖ = LOGI_NORM; fixed by (d, seed). Returns (A, y, w₀)."""
    d = int(d)
    if d < 1:
        raise ValueError(f"d must be a positive integer, got {d}")
    rng = np.random.default_rng([3000 + d, int(seed)])
    w0 = rng.standard_normal(d)
    w0 *= LOGI_NORM / np.linalg.norm(w0)
    A = LOGI_STD * rng.standard_normal((LOGI_N, d))
    y = np.where(rng.random(LOGI_N) < expit(A @ w0), 1.0, -1.0)
    return A, y, w0


def logistic_loss(x, A, y, ridge: float = LOGI_RIDGE) -> float:
    """f(x) = mean_i log(1 + exp(−y_i a_iᵀx)) + ridge/2 ‖x‖² (log-sum-exp form: no overflow)."""
    return float(np.mean(np.logaddexp(0.0, -y * (A @ x))) + 0.5 * ridge * (x @ x))


def logistic_grad(x, A, y, ridge: float = LOGI_RIDGE) -> np.ndarray:
    return -(A.T @ (y * expit(-y * (A @ x)))) / len(y) + ridge * x


def logistic_minimizer(A, y, ridge: float = LOGI_RIDGE, tol: float = 1e-14, max_iter: int = 100) -> np.ndarray:
    """The minimizer of :func:`logistic_loss` by damped Newton's method (Armijo backtracking), to a Newton
    decrement below ``tol``: f is strongly convex (ridge > 0) and smooth, so Newton converges quadratically and f*
    is exact to rounding — the stopping rule f(x̄) − f* ≤ ε needs f* far more accurately than ε."""
    x = np.zeros(A.shape[1])
    for _ in range(max_iter):
        g = logistic_grad(x, A, y, ridge)
        s = expit(A @ x)
        H = (A.T * (s * (1 - s))) @ A / len(y) + ridge * np.eye(A.shape[1])
        step = np.linalg.solve(H, g)
        dec = float(g @ step)
        if dec <= tol**2:
            return x
        t, fx = 1.0, logistic_loss(x, A, y, ridge)
        while logistic_loss(x - t * step, A, y, ridge) > fx - 0.25 * t * dec and t > 1e-10:
            t /= 2
        x = x - t * step
    raise RuntimeError(f"Newton's method did not converge in {max_iter} iterations (decrement {dec:.3g})")


def _logistic_problem(d: int, K: int, p: float) -> tuple[GradientOracle, np.ndarray, float, float]:
    """f = :func:`logistic_loss` on :func:`logistic_data` (d, seed 0) with the same Student-t(p + 0.1) gradient
    noise as the quadratic. Returns (oracle, x*, f*, L) with L = λ_max(AᵀA)/(4n) + λ the smoothness bound
    (σ' ≤ 1/4), for the classical step 1/(2L). Refuses data whose minimizer is not inside the unit ball."""
    A, y, _ = logistic_data(d)
    xs = logistic_minimizer(A, y)
    if not np.linalg.norm(xs) < CVX_RADIUS:
        raise ValueError(f"the logistic minimizer (norm {np.linalg.norm(xs):.3g}) is not inside the ball of radius "
                         f"{CVX_RADIUS}")
    L = float(np.linalg.eigvalsh(A.T @ A)[-1]) / (4 * len(y)) + LOGI_RIDGE
    return (GradientOracle(lambda x: logistic_grad(x, A, y), _law(p, d, K), lambda x: logistic_loss(x, A, y)),
            xs, logistic_loss(xs, A, y), L)


def mlmc_rate(p: float) -> float:
    """The MLMC level rate r: the midpoint of (1, 4(p−1)/p), where the expected cost (r > 1) and the variance
    (``2^{rj} E Δ_j² → 0`` with the quantum error ``n^{−2(p−1)/p}``: r < 4(p−1)/p) are both finite."""
    return (1 + 4 * (p - 1) / p) / 2


def qpsgd_mlmc(est: HeavyTailedMean, acc: float, d: int) -> UnbiasedMLMC:
    """The unbiased MLMC gradient estimator of QPSGD: base = ``est`` at budget n (its smallest eps within n),
    n₀ = the cheapest plan, levels capped at the first J whose base accuracy is ≤ ``acc`` (so the estimator is
    unbiased for a gradient within acc), rate :func:`mlmc_rate`."""
    eps_of = {}

    def eps_for(n):
        if n not in eps_of:  # deterministic in n: bisected once per budget
            eps_of[n] = est.eps_for_budget(n, d)
        return eps_of[n]

    def base(o, n, rng, counter):
        return est(o, eps=eps_for(n), rng=rng, counter=counter).estimate

    n0 = est.plan(1e6, d).queries  # eps this large: one level at m = 1, the cheapest plan there is
    J = 1
    while eps_for(n0 * 2**J) > acc:
        J += 1
    return UnbiasedMLMC(base, n0=n0, rate=mlmc_rate(est.p), max_level=J)


@dataclass(frozen=True)
class ConvexTask:
    """All seeds of one (p, method, eps) cell of the convex sweep (method "qpsgd" or "psgd": classical
    projected minibatch SGD)."""

    p: float
    d: int
    method: str
    eps: float
    seeds: int
    K: int
    seed: int


@dataclass(frozen=True)
class LogisticTask(ConvexTask):
    """The same cell on the logistic-regression problem (a record type of its own rather than a field of
    ConvexTask: the quadratic's task records, so its task seeds and cache keys, stay what they were)."""


def _convex_setup(t: ConvexTask) -> tuple[GradientOracle, float, np.ndarray, float]:
    """(oracle, f*, x₀ on the sphere opposite x*, the classical step 1/(2L)) of the cell's problem."""
    if isinstance(t, LogisticTask):
        o, xs, f_star, L = _logistic_problem(t.d, t.K, t.p)
        return o, f_star, -CVX_RADIUS * xs / np.linalg.norm(xs), 1 / (2 * L)
    o, _ = _convex_problem(t.d, t.K, t.p)
    return o, 0.0, np.full(t.d, -CVX_RADIUS / math.sqrt(t.d)), CVX_LR


def run_convex(t: ConvexTask) -> dict:
    """Queries until the averaged iterate is ε-optimal (f(x̄) − f* ≤ ε). Both methods aim at gradient accuracy
    ε/(2D) (D = 2R the diameter: a gradient error a costs at most aD in f): QPSGD through the MLMC level cap
    (its bias), step η = ε (convex SGD's η ∝ ε for unbiased gradients of bounded second moment); the
    classical method through the von Bahr–Esseen minibatch, step 1/(2L)."""
    o, f_star, x0, lr = _convex_setup(t)
    nu = _nu(o.noise, t.p)
    acc = t.eps / (4 * CVX_RADIUS)
    dom = Ball(CVX_RADIUS)
    mlmc = qpsgd_mlmc(HeavyTailedMean(t.p, nu, DELTA), acc, t.d) if t.method == "qpsgd" else None
    out = dict(queries=[], steps=[], reached=[])
    for s in range(t.seeds):
        rng = np.random.default_rng([t.seed, 11, s])
        if mlmc is not None:
            tr = qpsgd(o, x0, eta=t.eps, domain=dom, mlmc=mlmc, max_queries=10**18, f_star=f_star, stop_eps=t.eps,
                       max_steps=CVX_MAX_STEPS, rng=rng)
        else:
            tr = projected_sgd(o, x0, eta=lr, domain=dom, estimator=minibatch_estimator(classical_batch(t.p, nu, acc, t.d)),
                               max_queries=10**18, f_star=f_star, stop_eps=t.eps, max_steps=CVX_MAX_STEPS, rng=rng)
        out["queries"].append(float(tr.queries[-1]))
        out["steps"].append(len(tr.queries) - 1)
        out["reached"].append(bool(tr.reached))
    return out


LEVEL = 0.95  # the seed-bootstrap intervals' level
BOOT_METHOD = "seed bootstrap of the fitted log-log slope (95 % percentile)"


def fit_slope_draws(x, samples, stat, boot: int, rng) -> tuple[float, np.ndarray]:
    """Least-squares slope of log stat(samples[i]) on log x[i], and its ``boot`` bootstrap draws (the
    seeds of every size resampled with replacement)."""
    lx = np.log(np.asarray(x, float))
    y = np.log([stat(np.asarray(s)) for s in samples])
    slope = float(np.polyfit(lx, y, 1)[0])
    bs = []
    for _ in range(boot):
        yb = np.log([stat(np.asarray(s)[rng.integers(0, len(s), len(s))]) for s in samples])
        bs.append(np.polyfit(lx, yb, 1)[0])
    return slope, np.asarray(bs, float)


def percentile_ci(draws, level: float = LEVEL) -> tuple[float, float]:
    lo, hi = np.quantile(np.asarray(draws, float), [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def fit_slope(x, samples, stat, boot: int, rng) -> tuple[float, float, float]:
    """Least-squares slope of log stat(samples[i]) on log x[i]; its 95% CI by resampling the seeds of
    every size with replacement (``boot`` times)."""
    slope, bs = fit_slope_draws(x, samples, stat, boot, rng)
    return (slope, *percentile_ci(bs))


def within(estimate: float, ci, target: float, tol: float) -> tuple[float, list[float]]:
    """An equivalence claim |estimate − target| <= tol as a one-sided figure: ``tol − |x − target|``
    (positive inside the band), with the interval it takes over x ∈ ci (widened to contain the
    estimate): its low end is positive when the whole ci lies within the band, its high end negative
    when the whole ci lies outside it on one side."""
    lo, hi = min(ci[0], estimate), max(ci[1], estimate)
    far = max(abs(lo - target), abs(hi - target))
    near = 0.0 if lo <= target <= hi else min(abs(lo - target), abs(hi - target))
    return tol - abs(estimate - target), [tol - far, tol - near]


def decide_within(ctx, claim: str, slope: float, ci, predicted: float, tol: float, n: int) -> str:
    diff, interval = within(slope, ci, predicted, tol)
    return ctx.decide(claim, ours=slope, baseline=predicted, diff=diff, ci=interval, n=n, better="higher",
                      method=f"{BOOT_METHOD}; figure: {tol} - |slope - predicted|")


def decide_steeper(ctx, claim: str, ours: float, ours_draws, base: float, base_draws, n: int,
                   steeper: str = "lower") -> str:
    """ours' slope below (``steeper="lower"``) the baseline's: the interval of the difference from the two
    fits' independent bootstrap draws."""
    sign = 1.0 if steeper == "lower" else -1.0
    d = sign * (base - ours)
    lo, hi = percentile_ci(sign * (np.asarray(base_draws) - np.asarray(ours_draws)))
    return ctx.decide(claim, ours=ours, baseline=base, diff=d, ci=[min(lo, d), max(hi, d)], n=n, better="lower",
                      method=f"{BOOT_METHOD}, difference of two independent fits' draws")


def q90(e):
    return float(np.quantile(e, 0.9))


def run(ctx: RunContext) -> None:
    S = SIZES[ctx.quick]
    ctx.config.update(S, delta=DELTA, tol_mean=TOL_MEAN, tol_opt=TOL_OPT, shift=SHIFT, backend="analytic",
                      df="p + 0.1 (Student-t, quantile-discretized)")
    if S.get("cvx_logistic", False):
        ctx.config.update(logistic=dict(n=LOGI_N, feature_std=LOGI_STD, w0_norm=LOGI_NORM, ridge=LOGI_RIDGE))
    rng = np.random.default_rng(ctx.seed)
    kinds = {"quantum": S["n_quantum"], "median_of_means": S["n_classical"], "sample_mean": S["n_classical"]}
    mtasks = [MeanTask(p, d, k, n, S["seeds"], S["K"], ctx.seed) for p in S["ps"] for d in S["ds"]
              for k, ns in kinds.items() for n in ns]
    otasks = [OptTask(p, S["opt_d"], m, e, S["opt_seeds"], S["K_opt"], ctx.seed) for p in S["ps"]
              for m in OPT_METHODS for e in S["eps"]]
    otasks += [OptTask(p, d, m, S["d_sweep_eps"], S["opt_seeds"], S["K_opt"], ctx.seed) for p in S["ps"]
               for m in ("qnsgd", "qnsgd_mv", "nsgd") for d in S["d_sweep"] if d != S["opt_d"] or S["d_sweep_eps"] not in S["eps"]]
    res = ctx.map(run_mean, mtasks, description="mean estimation cells")
    ctasks = [CrossTask(n, d, "multivariate", S["cross_seeds"], S["cross_K"], ctx.seed) for n in S["cross_n"]
              for d in S["cross_d"]]
    cq = {(t.n, t.d): r for t, r in zip(ctasks, ctx.map(run_cross, ctasks, description="high-dimensional quantum cells"))}
    ktasks = [CrossTask(int(np.median(cq[(n, d)]["queries"])), d, k, S["cross_seeds"], S["cross_K"], ctx.seed)
              for n in S["cross_n"] for d in S["cross_d"] for k in ("sample_mean", "geometric_median_of_means")]
    kres = ctx.map(run_cross, ktasks, description="high-dimensional classical cells")
    cross = {(n, d, "multivariate"): cq[(n, d)] for n in S["cross_n"] for d in S["cross_d"]}
    for (n, d), t, r in zip([(n, d) for n in S["cross_n"] for d in S["cross_d"] for _ in range(2)], ktasks, kres):
        cross[(n, d, t.kind)] = r
    ores = ctx.map(run_opt, otasks, description="optimizer cells")
    vtasks = [ConvexTask(p, S["cvx_d"], m, e, S["cvx_seeds"], S["K_cvx"], ctx.seed) for p in S["ps"]
              for m in CONVEX_METHODS for e in S["cvx_eps"]]
    vres = ctx.map(run_convex, vtasks, description="convex cells")
    ltasks = [LogisticTask(p, S["cvx_d"], m, e, S["cvx_seeds"], S["K_cvx"], ctx.seed) for p in S["ps"]
              for m in CONVEX_METHODS for e in S["cvx_eps"]] if S.get("cvx_logistic", False) else []
    lres = ctx.map(run_convex, ltasks, description="convex cells (logistic regression)") if ltasks else []
    mean = {(t.p, t.d, t.kind, t.n): r for t, r in zip(mtasks, res)}
    opt = {(t.p, t.d, t.method, t.eps): r for t, r in zip(otasks, ores)}
    _record(ctx, S, mean, opt, kinds, rng)
    _record_cross(ctx, S, cross, rng)
    _record_convex(ctx, S, {(t.p, t.method, t.eps): r for t, r in zip(vtasks, vres)}, rng)
    if ltasks:
        _record_convex(ctx, S, {(t.p, t.method, t.eps): r for t, r in zip(ltasks, lres)}, rng, problem="logistic")
    _spot_check(ctx)


def _record(ctx, S, mean, opt, kinds, rng) -> None:
    slopes, draws_of = {}, {}
    rows = []
    for p in S["ps"]:
        for d in S["ds"]:
            for kind, ns in kinds.items():
                cells = [mean[(p, d, kind, n)] for n in ns]
                qmean = [float(np.mean(c["queries"])) for c in cells]
                s, draws = fit_slope_draws(qmean, [c["errors"] for c in cells], q90, S["boot"], rng)
                lo, hi = percentile_ci(draws)
                pred = -2 * (p - 1) / p if kind == "quantum" else -(p - 1) / p
                slopes[(p, d, kind)] = dict(slope=s, ci=[lo, hi], predicted=pred, queries=qmean,
                                            q90=[q90(c["errors"]) for c in cells])
                ctx.metric(f"mean/p{p}/d{d}/{kind}", slopes[(p, d, kind)])
                draws_of[(p, d, kind)] = draws
                rows.append((p, d, kind, s, f"[{lo:.3f}, {hi:.3f}]", pred, abs(s - pred) <= TOL_MEAN))
    for p in S["ps"]:
        for d in S["ds"]:
            q, c = slopes[(p, d, "quantum")], slopes[(p, d, "median_of_means")]
            n = S["seeds"]
            decide_within(ctx, f"Mean estimation, p = {p}, d = {d}: the quantum heavy-tailed estimator's error slope "
                          f"in the query count is {q['predicted']:.3f} ± {TOL_MEAN} (90% error quantile over {n} seeds; "
                          f"95% bootstrap CI [{q['ci'][0]:.3f}, {q['ci'][1]:.3f}] within the band; baseline column: the "
                          "predicted slope)", q["slope"], q["ci"], q["predicted"], TOL_MEAN, n)
            decide_within(ctx, f"Mean estimation, p = {p}, d = {d}: classical median-of-means error slope is "
                          f"{c['predicted']:.3f} ± {TOL_MEAN} (CI [{c['ci'][0]:.3f}, {c['ci'][1]:.3f}] within the band; "
                          "baseline: predicted)", c["slope"], c["ci"], c["predicted"], TOL_MEAN, n)
            decide_steeper(ctx, f"Mean estimation, p = {p}, d = {d}: the quantum slope is steeper than median-of-means' "
                           "(95% bootstrap interval of the slope difference below 0)", q["slope"],
                           draws_of[(p, d, "quantum")], c["slope"], draws_of[(p, d, "median_of_means")], n)
    ctx.table("Mean estimation: fitted slope of the 90% error quantile in the query count",
              ["p", "d", "estimator", "slope", "95% CI", "predicted", f"within {TOL_MEAN}"], rows)

    # --- optimizers ----------------------------------------------------------------------
    orows = []
    d0 = S["opt_d"]
    ofits, odraws = {}, {}
    for p in S["ps"]:
        for method in OPT_METHODS:
            cells = [opt[(p, d0, method, e)] for e in S["eps"]]
            reached = all(all(c["reached"]) for c in cells)
            s, draws = fit_slope_draws([1 / e for e in S["eps"]], [c["queries"] for c in cells], np.median, S["boot"], rng)
            lo, hi = percentile_ci(draws)
            odraws[(p, method)] = draws
            st, _, _ = fit_slope([1 / e for e in S["eps"]], [c["steps"] for c in cells], np.median, 1, rng)
            pred = (5 * p - 4) / (2 * p - 2) if method.startswith("qnsgd") else (3 * p - 2) / (p - 1)
            ofits[(p, method)] = dict(slope=s, ci=[lo, hi], predicted=pred, steps_slope=st, reached=reached,
                                      median_queries=[float(np.median(c["queries"])) for c in cells])
            ctx.metric(f"opt/p{p}/d{d0}/{method}", ofits[(p, method)])
            orows.append((p, method, s, f"[{lo:.2f}, {hi:.2f}]", pred, st, reached))
        q, c = ofits[(p, "qnsgd")], ofits[(p, "nsgd")]
        n = S["opt_seeds"]
        for name, key, f in (("QNSGD", "qnsgd", q), ("minibatch NSGD", "nsgd", c)):
            text = (f"Nonconvex, p = {p}, d = {d0}: {name}'s queries to ‖∇f‖ ≤ ε grow as ε^-{f['predicted']:.2f} "
                    f"(fitted on ε = {S['eps']}, ± {TOL_OPT}; 95% bootstrap CI [{f['ci'][0]:.2f}, {f['ci'][1]:.2f}] "
                    "within the band; baseline: predicted)")
            if f["reached"]:
                decide_within(ctx, text, f["slope"], f["ci"], f["predicted"], TOL_OPT, n)
            else:  # a seed stopped at the step cap: its query count is a cap, not a measurement
                ctx.claim(text + " — not tested: a seed hit the step cap before ‖∇f‖ ≤ ε", ours=f["slope"],
                          baseline=f["predicted"], holds=None)
        best = min(("nsgd", "sgd", "clipped_sgd"), key=lambda m_: ofits[(p, m_)]["slope"])
        allr = all(ofits[(p, m_)]["reached"] for m_ in OPT_METHODS)
        text = (f"Nonconvex, p = {p}, d = {d0}: QNSGD's query exponent in 1/ε is below every classical baseline's "
                f"(minibatch NSGD, plain SGD, clipped SGD; the best here: {best}; 95% bootstrap interval of the "
                "exponent difference)")
        if allr:
            decide_steeper(ctx, text, q["slope"], odraws[(p, "qnsgd")], ofits[(p, best)]["slope"], odraws[(p, best)], n)
        else:
            ctx.claim(text + " — not tested: a seed hit the step cap before ‖∇f‖ ≤ ε", ours=q["slope"],
                      baseline=ofits[(p, best)]["slope"], holds=None)
        gap_pred = -p / (2 * p - 2)
        text = (f"Nonconvex, p = {p}: the exponent gap QNSGD − classical is {gap_pred:.2f} ± {TOL_OPT} "
                "(the per-step estimator's share of the exponent; ours: QNSGD slope, baseline: NSGD slope; 95% "
                "bootstrap interval of the gap within the band)")
        if q["reached"] and c["reached"]:
            gap = q["slope"] - c["slope"]
            diff, interval = within(gap, percentile_ci(odraws[(p, "qnsgd")] - odraws[(p, "nsgd")]), gap_pred, TOL_OPT)
            ctx.decide(text, ours=q["slope"], baseline=c["slope"], diff=diff, ci=interval, n=n, better="higher",
                       method=f"{BOOT_METHOD}, difference of two independent fits' draws; figure: {TOL_OPT} - "
                              "|gap - predicted gap|")
        else:
            ctx.claim(text + " — not tested: a seed hit the step cap before ‖∇f‖ ≤ ε", ours=q["slope"],
                      baseline=c["slope"], holds=None)
        dpred = p / (4 * (p - 1))
        for method, key, how in (("qnsgd", "d_exponent", "QNSGD on the coordinate-wise HeavyTailedMean"),
                                 ("qnsgd_mv", "d_exponent_multivariate",
                                  "QNSGD on the multivariate phase-estimation estimator")):
            dq = [opt[(p, d, method, S["d_sweep_eps"])] for d in S["d_sweep"]]
            sd, lo, hi = fit_slope(S["d_sweep"], [c_["queries"] for c_ in dq], np.median, S["boot"], rng)
            ctx.metric(f"opt/p{p}/{key}", dict(slope=sd, ci=[lo, hi], predicted=dpred, ds=S["d_sweep"],
                                               median_queries=[float(np.median(c_["queries"])) for c_ in dq]))
            decide_within(ctx, f"Nonconvex, p = {p}: QNSGD's queries grow as d^{dpred:.2f} at ε = {S['d_sweep_eps']} "
                          f"(± {TOL_OPT}; 95% bootstrap CI [{lo:.2f}, {hi:.2f}] within the band; {how})",
                          sd, [lo, hi], dpred, TOL_OPT, n)
    ctx.table(f"Nonconvex (d = {d0}): fitted exponent of the median queries to ‖∇f‖ ≤ ε in 1/ε",
              ["p", "method", "exponent", "95% CI", "predicted", "steps exponent", "all seeds reached ε"], orows)
    ctx.text("All numbers are **simulated query counts** (analytic backend: each amplitude-estimation call is "
             "drawn from its exact outcome law; every use of the sampling oracle or its inverse counts as one query, "
             "a classical sample as one). Laws: Student-t with df = p + 0.1, quantile-discretized on K atoms, "
             f"shifted to mean {SHIFT}; the moment bound given to the estimators is the exact p-th central moment "
             "of the discretized law. Mean-estimation slopes use the 90% quantile of the ℓ2 error over seeds; "
             "optimizer exponents the median queries; CIs are 95% seed-bootstrap intervals, and each claim is "
             "decided from them (holds: the whole interval within the stated band or beyond the other side; "
             "does not hold: wholly outside; inconclusive otherwise). QNSGD takes "
             "η = ε/4 and gradient accuracy ε/4 (quantum estimator planned for that accuracy w.p. 1 − δ); the "
             "classical minibatch NSGD takes the minibatch that the von Bahr–Esseen bound needs for the same "
             f"accuracy and δ; plain SGD and clipped SGD (torch.optim.SGD, clip_grad_norm_ at λ = {CLIP}) take the "
             f"same minibatch and the step 1/(2L) = {SGD_LR}.")
    _figures(ctx, S, slopes, ofits, opt, kinds)


def _cross_stats(S, cross, pick):
    """Per planned budget: the ratio of the quantum 90% error quantile to the best classical one at each
    d, the crossover dimension d*, and the queries n* actually spent there (the median quantum queries,
    log–log interpolated at d*; the classical side got the same count); ``pick(errors)`` resamples a
    cell's seeds (identity for the point value)."""
    out = {}
    ld = np.log(S["cross_d"])
    for n in S["cross_n"]:
        ratios = []
        for d in S["cross_d"]:
            qq = q90(pick(cross[(n, d, "multivariate")]["errors"]))
            qc = min(q90(pick(cross[(n, d, k)]["errors"])) for k in ("sample_mean", "geometric_median_of_means"))
            ratios.append(qq / qc)
        dstar = crossover(S["cross_d"], ratios)
        lq = np.log([np.median(cross[(n, d, "multivariate")]["queries"]) for d in S["cross_d"]])
        nstar = None if dstar is None else float(np.exp(np.interp(math.log(dstar), ld, lq)))
        out[n] = (ratios, dstar, nstar)
    return out


def _record_cross(ctx, S, cross, rng) -> None:
    ns, ds = S["cross_n"], S["cross_d"]
    point = _cross_stats(S, cross, lambda e: np.asarray(e))
    rows = []
    for n in ns:
        ratios, dstar, nstar = point[n]
        qmed = [float(np.median(cross[(n, d, "multivariate")]["queries"])) for d in ds]
        ctx.metric(f"cross/n{n:.0e}", dict(ds=ds, ratio=ratios, d_star="not on the grid" if dstar is None else dstar,
                                           n_star="not on the grid" if nstar is None else nstar,
                                           quantum_queries=qmed,
                                           quantum_q90=[q90(cross[(n, d, "multivariate")]["errors"]) for d in ds],
                                           sample_mean_q90=[q90(cross[(n, d, "sample_mean")]["errors"]) for d in ds],
                                           gmom_q90=[q90(cross[(n, d, "geometric_median_of_means")]["errors"]) for d in ds]))
        rows.append((f"{n:.0e}", " ".join(f"{r:.2f}" for r in ratios), "—" if dstar is None else f"{dstar:.3g}",
                     "—" if nstar is None else f"{nstar:.3g}", "—" if dstar is None else f"{dstar / nstar:.2e}"))
    dstars = [point[n][1] for n in ns]
    nstars = [point[n][2] for n in ns]
    ok = all(x is not None for x in dstars)
    ratio_n = [x / m for x, m in zip(dstars, nstars)] if ok else []
    # one seed bootstrap for both claims: per resample the largest |log(d*/n*)| and the exponent of d* in n*;
    # a resample that loses a crossover off the grid counts against the factor-4 claim (infinitely far)
    far, bs = [], []
    if ok:
        for _ in range(S["boot"]):
            st = _cross_stats(S, cross, lambda e: np.asarray(e)[rng.integers(0, len(e), len(e))])
            if all(st[n][1] is not None for n in ns):
                far.append(max(abs(math.log(st[n][1] / st[n][2])) for n in ns))
                if len(ns) >= 2:
                    bs.append(np.polyfit(np.log([st[n][2] for n in ns]), np.log([st[n][1] for n in ns]), 1)[0])
            else:
                far.append(math.inf)
    text = ("High-dimensional regime: the multivariate quantum estimator beats the best classical estimator "
            "(sample mean, geometric median-of-means, given the quantum run's actual query count) only for d below "
            "a crossover d* within a factor 4 of the query count n* (ours: the largest d*/n* over the planned "
            f"budgets {ns}; baseline: the smallest; figure: log 4 - max |log(d*/n*)|, its interval from "
            f"{S['boot']} seed-bootstrap resamples)")
    if ok:
        d = math.log(4) - max(abs(math.log(r)) for r in ratio_n)
        # a resample that lost a crossover stands at -1e6 (no finite figure): when more than 2.5 % did, the
        # interval's low end is that stand-in and the claim cannot hold
        lo, hi = percentile_ci(math.log(4) - np.minimum(np.asarray(far), 1e6))
        ctx.decide(text, ours=max(ratio_n), baseline=min(ratio_n), diff=d, ci=[min(lo, d), max(hi, d)],
                   n=S["cross_seeds"], better="higher", method="seed bootstrap (95 % percentile)")
    else:
        ctx.claim(text + " — not tested: a budget's crossover is not on the d grid", ours=float("nan"),
                  baseline=float("nan"), holds=None)
    # the exponent of d* in n*, with the same seed bootstrap
    if ok and len(ns) >= 2:
        slope = float(np.polyfit(np.log(nstars), np.log(dstars), 1)[0])
        lo, hi = percentile_ci(bs) if len(bs) >= 2 else (float("nan"),) * 2
    else:
        slope, lo, hi = float("nan"), float("nan"), float("nan")
    if math.isfinite(slope):
        ctx.metric("cross/d_star_exponent", dict(slope=slope, ci=[lo, hi] if math.isfinite(lo) else "no bootstrap "
                                                 "resample had every crossover on the grid", predicted=1.0,
                                                 d_star=dstars, n_star=nstars))
    text = (f"High-dimensional regime: the crossover dimension grows linearly in the query count (exponent of d* "
            f"in n* is 1 ± {TOL_CROSS}; 95% bootstrap CI [{lo:.2f}, {hi:.2f}] within the band; a coordinate-wise "
            "estimator's is 1/2; baseline: predicted)")
    if math.isfinite(slope) and math.isfinite(lo):
        decide_within(ctx, text, slope, [lo, hi], 1.0, TOL_CROSS, S["cross_seeds"])
    else:
        ctx.claim(text + " — not tested: the crossovers are not on the d grid", ours=slope, baseline=1.0, holds=None)
    ctx.table("High-dimensional regime: quantum / best-classical 90% error quantile at each d (d = "
              f"{ds}), and the crossover dimension d*",
              ["planned budget n", "ratio per d", "d*", "queries n* at d*", "d*/n*"], rows)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.2, 3.8))
    for n in ns:
        ax.loglog(ds, point[n][0], "o-", label=f"planned n = {n:.0e}")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xlabel("dimension d")
    ax.set_ylabel("quantum / best classical error (q90)")
    ax.set_title("multivariate estimator vs classical")
    ax.legend(fontsize=7)
    fig.tight_layout()
    ctx.figure(fig, "crossover_vs_d", "High-dimensional regime: error ratio against d at fixed budgets.")
    plt.close(fig)


def _record_convex(ctx, S, cvx, rng, problem: str = "quadratic") -> None:
    """Convex claims: at p < 2 QPSGD's exponent in 1/ε is (3p−2)/(2p−2) ± TOL_OPT, the classical one p/(p−1)
    ± TOL_OPT, and QPSGD's is the lower; at p = 2 both predictions are 2, so the claim there is the tie (the
    exponent gap within ± TOL_OPT of 0). ``problem`` "quadratic" (names as they were before logistic regression
    was added) or "logistic" (the same claims, tables and figure with the problem's name in them)."""
    if problem not in ("quadratic", "logistic"):
        raise ValueError(f"problem must be 'quadratic' or 'logistic', got {problem!r}")
    logi = problem == "logistic"
    head = "Convex, logistic regression" if logi else "Convex"
    what = "ℓ2-regularized logistic regression on generated data, on a ball" if logi else \
        "strongly convex quadratic on a ball"
    inv = [1 / e for e in S["cvx_eps"]]
    n, d = S["cvx_seeds"], S["cvx_d"]
    fits, draws, rows = {}, {}, []
    for p in S["ps"]:
        for m in CONVEX_METHODS:
            cells = [cvx[(p, m, e)] for e in S["cvx_eps"]]
            sl, dr = fit_slope_draws(inv, [c["queries"] for c in cells], np.median, S["boot"], rng)
            lo, hi = percentile_ci(dr)
            st, _, _ = fit_slope(inv, [c["steps"] for c in cells], np.median, 1, rng)
            pred = (3 * p - 2) / (2 * p - 2) if m == "qpsgd" else p / (p - 1)
            fits[(p, m)] = dict(slope=sl, ci=[lo, hi], predicted=pred, steps_slope=st,
                                reached=all(all(c["reached"]) for c in cells),
                                median_queries=[float(np.median(c["queries"])) for c in cells],
                                median_steps=[float(np.median(c["steps"])) for c in cells])
            draws[(p, m)] = dr
            ctx.metric(f"convex/logistic/p{p}/d{d}/{m}" if logi else f"convex/p{p}/d{d}/{m}", fits[(p, m)])
            rows.append((p, "QPSGD (MLMC)" if m == "qpsgd" else "projected minibatch SGD", sl, f"[{lo:.2f}, {hi:.2f}]",
                         pred, st, fits[(p, m)]["reached"]))
        q, c = fits[(p, "qpsgd")], fits[(p, "psgd")]
        both = q["reached"] and c["reached"]
        capped = f" — not tested: a seed hit the {CVX_MAX_STEPS}-step cap before f(x̄) − f* ≤ ε"
        if q["predicted"] != c["predicted"]:
            for name, f in (("QPSGD", q), ("classical projected minibatch SGD", c)):
                text = (f"{head}, p = {p}, d = {d}: {name}'s queries to f(x̄) − f* ≤ ε grow as ε^-{f['predicted']:.2f} "
                        f"({what}, ε = {S['cvx_eps']}, ± {TOL_OPT}; 95% bootstrap CI "
                        f"[{f['ci'][0]:.2f}, {f['ci'][1]:.2f}] within the band; baseline: predicted)")
                if f["reached"]:
                    decide_within(ctx, text, f["slope"], f["ci"], f["predicted"], TOL_OPT, n)
                else:
                    ctx.claim(text + capped, ours=f["slope"], baseline=f["predicted"], holds=None)
            text = (f"{head}, p = {p}, d = {d}: QPSGD's query exponent in 1/ε is below classical projected minibatch "
                    "SGD's (95% bootstrap interval of the exponent difference)")
            if both:
                decide_steeper(ctx, text, q["slope"], draws[(p, "qpsgd")], c["slope"], draws[(p, "psgd")], n)
            else:
                ctx.claim(text + capped, ours=q["slope"], baseline=c["slope"], holds=None)
        else:
            text = (f"{head}, p = {p}, d = {d}: no ε-speedup is predicted (both exponents {q['predicted']:.0f}): the "
                    f"exponent gap QPSGD − classical is 0 ± {TOL_OPT} (ours: QPSGD, baseline: classical projected "
                    "minibatch SGD; 95% bootstrap interval of the gap within the band)")
            if both:
                gap = q["slope"] - c["slope"]
                diff, interval = within(gap, percentile_ci(draws[(p, "qpsgd")] - draws[(p, "psgd")]), 0.0, TOL_OPT)
                ctx.decide(text, ours=q["slope"], baseline=c["slope"], diff=diff, ci=interval, n=n, better="higher",
                           method=f"{BOOT_METHOD}, difference of two independent fits' draws; figure: {TOL_OPT} - |gap|")
            else:
                ctx.claim(text + capped, ours=q["slope"], baseline=c["slope"], holds=None)
    ctx.table(f"{head} (d = {d}): fitted exponent of the median queries to f(x̄) − f* ≤ ε in 1/ε",
              ["p", "method", "exponent", "95% CI", "predicted", "steps exponent", "all seeds reached ε"], rows)
    if logi:
        ctx.text(f"Convex sweep on logistic regression: f(x) = mean_i log(1 + exp(−y_i a_iᵀx)) + {LOGI_RIDGE}/2 ‖x‖² on "
                 f"{LOGI_N} generated samples (a_i ~ N(0, {LOGI_STD}² I), y_i = ±1 from a logistic model with ‖w₀‖ = "
                 f"{LOGI_NORM}), on the unit ball (the minimizer inside; f* by Newton's method), the same Student-t(p + 0.1) "
                 "gradient noise, x₀ on the sphere opposite x*, the same stopping rule and schedules as the quadratic; "
                 "the classical step is 1/(2L) with L = λ_max(AᵀA)/(4n) + λ.")
    else:
        ctx.text("Convex sweep: f(x) = ½ (x − x*)ᵀA(x − x*) on the unit ball (A's spectrum 1..3, rotated; x* inside, "
                 "f* = 0), Student-t(p + 0.1) gradient noise, x₀ on the sphere opposite x*; stopping at the first averaged "
                 "iterate with f(x̄) − f* ≤ ε. Both methods aim at gradient accuracy ε/(2D), D = 2: QPSGD through the "
                 "MLMC level cap (rate r = (1 + 4(p−1)/p)/2, unbiased for the top level), step η = ε; the classical "
                 f"projected minibatch SGD through the von Bahr–Esseen minibatch, step 1/(2L) = {CVX_LR:.3g}.")
    plt = pyplot()
    fig, axes = plt.subplots(1, len(S["ps"]), figsize=(4.6 * len(S["ps"]), 3.6), squeeze=False)
    for ax, p in zip(axes[0], S["ps"]):
        for m, style in (("qpsgd", "o-"), ("psgd", "s--")):
            f = fits[(p, m)]
            ax.loglog(inv, f["median_queries"], style, label=f"{m} (exp. {f['slope']:.2f}, pred. {f['predicted']:.2f})")
        ax.set_title(f"{'logistic' if logi else 'convex'}, p = {p}, d = {d}")
        ax.set_xlabel("1/ε")
        ax.set_ylabel("median queries to f(x̄) − f* ≤ ε")
        ax.legend(fontsize=7)
    fig.tight_layout()
    if logi:
        ctx.figure(fig, "convex_logistic_queries_vs_inv_eps", "Convex, logistic regression: simulated queries to an "
                   "ε-optimal averaged iterate, log–log.")
    else:
        ctx.figure(fig, "convex_queries_vs_inv_eps", "Convex: simulated queries to an ε-optimal averaged iterate, log–log.")
    plt.close(fig)


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
    # multivariate phase estimation: the product-Fejér law the estimator samples against the FFT of the grid state
    from ..quantum.multivariate import directional_pe_law, product_fejer_law

    r = np.random.default_rng(0)
    tv_pe = 0.0
    for d, G in ((2, 8), (3, 5)):
        Z = r.normal(size=(6, d))
        Z /= np.linalg.norm(Z, axis=1).max()
        P = r.dirichlet(np.ones(6))
        tv_pe = max(tv_pe, 0.5 * float(np.abs(directional_pe_law(Z, P, G) - product_fejer_law(G * (P @ Z) / 2, G)).sum()))
    ctx.metric("multivariate_pe_fft_check_tv", tv_pe)
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
        for method, style in (("qnsgd", "o-"), ("qnsgd_mv", "D-"), ("nsgd", "s--"), ("sgd", "^:"), ("clipped_sgd", "v-.")):
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
