"""Reproduction: FTRL-type decentralized online convex optimization with compressed
communication, against the OGD-type compressed method and the uncompressed ones.

Every method's step size (and consensus step γ, exploration radius δ) is tuned on a
separate sequence drawn from the same distribution, then run on the test sequence.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from ..online import (
    DFTRL, DOGD, QSGD, AcceleratedDFTRL, Ball, CompressedDFTRL, CompressedDOGD, LeastSquaresLosses, LinearLosses, LogisticLosses,
    ScaledSign, TopK,
    gossip_matrix, run_doco,
)
from ._common import pyplot
from ._harness import RunContext

SIZES = {
    True: dict(n=16, d=20, d_bandit=5, T=1000, graphs=["ring", "grid", "erdos_renyi"]),
    False: dict(n=64, d=20, d_bandit=5, T=10000, graphs=["ring", "grid", "erdos_renyi"]),
}
ETA_MULTIPLIERS = (0.25, 0.5, 1.0, 2.0, 4.0)
BANDIT_ETA_MULTIPLIERS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
GAMMAS = (0.2, 0.5, 1.0)
DELTAS = (0.1, 0.25, 0.5)
RADIUS = 1.0


def _least_squares(T, n, d, rng):
    x_star = rng.standard_normal(d)
    x_star *= 0.6 * RADIUS / np.linalg.norm(x_star)
    local = x_star + 0.3 * rng.standard_normal((n, d)) / math.sqrt(d)  # heterogeneous nodes
    A = rng.standard_normal((T, n, d)) / math.sqrt(d)
    b = np.einsum("tnd,nd->tn", A, local) + 0.1 * rng.standard_normal((T, n))
    return LeastSquaresLosses(A, b)


def _adversarial_linear(T, n, d, rng):
    # A drift v that every node sees, plus a component w whose sign alternates every
    # round (large, zero-mean: an algorithm that chases the last gradient pays for it),
    # node-specific directions and noise.
    v, w = rng.standard_normal((2, d))
    v /= np.linalg.norm(v)
    w -= (w @ v) * v
    w /= np.linalg.norm(w)
    local = rng.standard_normal((n, d)) / math.sqrt(d)
    sign = np.where(np.arange(T) % 2 == 0, 1.0, -1.0)
    G = v[None, None, :] + 2.0 * sign[:, None, None] * w[None, None, :] + 0.5 * local[None] + 0.3 * rng.standard_normal((T, n, d)) / math.sqrt(d)
    return LinearLosses(G)


def _bandit_least_squares(T, n, d, rng):
    # Unnormalized features: a loss gap large enough against the exploration noise of
    # zeroth-order feedback that learning shows within the quick horizon.
    x_star = rng.standard_normal(d)
    x_star *= 0.6 * RADIUS / np.linalg.norm(x_star)
    local = x_star + 0.3 * rng.standard_normal((n, d)) / math.sqrt(d)
    A = rng.standard_normal((T, n, d))
    b = np.einsum("tnd,nd->tn", A, local) + 0.1 * rng.standard_normal((T, n))
    return LeastSquaresLosses(A, b)


def _logistic(T, n, d, rng):
    w = rng.standard_normal(d)
    w *= 3.0 / np.linalg.norm(w)
    local = 0.5 * rng.standard_normal((n, d))  # each node's data leans its own way
    A = rng.standard_normal((T, n, d)) / math.sqrt(d) + 0.1 * local[None] / math.sqrt(d)
    p = 1 / (1 + np.exp(-np.einsum("tnd,d->tn", A, w)))
    y = np.where(rng.random((T, n)) < p, 1.0, -1.0)
    return LogisticLosses(A, y)


PROBLEMS = {"least-squares": _least_squares, "logistic": _logistic, "adversarial-linear": _adversarial_linear}


ACCEL = "D-FTRL accel. gossip (blocked)"


def _methods(d: int):
    k = max(1, d // 10)
    return {
        "D-FTRL": (lambda eta, gamma, dom: DFTRL(eta, dom), False),
        "D-OGD": (lambda eta, gamma, dom: DOGD(eta, dom), False),
        "C-DFTRL top-k": (lambda eta, gamma, dom: CompressedDFTRL(eta, dom, TopK(k), gamma=gamma), True),
        "C-DOGD top-k": (lambda eta, gamma, dom: CompressedDOGD(eta, dom, TopK(k), gamma=gamma), True),
        "C-DFTRL qsgd": (lambda eta, gamma, dom: CompressedDFTRL(eta, dom, QSGD(4), gamma=gamma), True),
        "C-DFTRL sign": (lambda eta, gamma, dom: CompressedDFTRL(eta, dom, ScaledSign(), gamma=gamma), True),
        "C-DOGD qsgd": (lambda eta, gamma, dom: CompressedDOGD(eta, dom, QSGD(4), gamma=gamma), True),
        # Wan et al.'s anchor: exact D-FTRL, one block of rounds per decision, accelerated gossip.
        ACCEL: (lambda eta, gamma, dom: AcceleratedDFTRL(eta, dom), False),
    }


def _tune(make, compressed, prob, net, eta0, bandit=None, block=1, seed=0):
    """The (eta multiplier, gamma, delta) with the least regret on the tuning sequence.
    The (eta, gamma) grid runs as one batched pass; delta (bandit) is looped over."""
    grid = list(itertools.product(BANDIT_ETA_MULTIPLIERS if bandit else ETA_MULTIPLIERS,
                                  GAMMAS if compressed else (1.0,)))
    cs = np.array([c for c, _ in grid])
    gammas = np.array([g for _, g in grid])
    best, best_r = None, math.inf
    for delta in DELTAS if bandit else (None,):
        kw = dict(feedback=bandit, delta=delta) if bandit else {}
        alg = make(cs * eta0, gammas, Ball(RADIUS))
        with np.errstate(over="ignore", invalid="ignore"):
            res = run_doco(prob, net, alg, block=block, seed=seed, check_finite=False, **kw)
        regrets = np.where(np.isfinite(res.final_regret), res.final_regret, np.inf)
        i = int(np.argmin(regrets))
        if regrets[i] < best_r:
            best, best_r = (float(cs[i]), float(gammas[i]), delta), float(regrets[i])
    if best is None:
        raise FloatingPointError("every tuning configuration diverged")
    return best


def _slope(Ts, regrets) -> float:
    r = np.maximum(np.asarray(regrets, float), 1e-12)
    return float(np.polyfit(np.log(Ts), np.log(r), 1)[0])


def _prefix(prob, T):
    if isinstance(prob, LinearLosses):
        return LinearLosses(prob.G[:T])
    if isinstance(prob, LogisticLosses):
        return LogisticLosses(prob.A[:T], prob.y[:T])
    return LeastSquaresLosses(prob.A[:T], prob.b[:T])


@dataclass(frozen=True)
class Setting:
    """One task of the sweep: a (problem, graph) pair in full information (``kind="full"``) or a
    (feedback, graph) pair in bandit feedback (``kind="bandit"``, ``problem`` is the feedback),
    every method tuned and run on it. ``seed`` is the run seed (the Erdős–Rényi graph's and
    ``run_doco``'s, as before the sweep became tasks); ``tune_seed`` / ``test_seed`` are the data
    seeds, drawn in the run in the order the loop once drew them, so the numbers are the same."""

    kind: str
    problem: str
    graph: str
    n: int
    d: int
    d_bandit: int
    T: int
    seed: int
    tune_seed: int
    test_seed: int


def _network(g: str, n: int, seed: int):
    return gossip_matrix(g, n, **({"p": 0.3, "seed": seed} if g == "erdos_renyi" else {}))


def _horizons_block(T: int) -> tuple[list[int], int]:
    return [T // 8, T // 4, T // 2, T], max(1, round(math.sqrt(T) / 4))


def _bandit_methods(d_bandit: int, block: int):
    bmethods = _methods(d_bandit)
    return {
        "D-FTRL": (bmethods["D-FTRL"][0], False, 1),
        ACCEL: (bmethods[ACCEL][0], False, block),
        "C-DFTRL top-k": (bmethods["C-DFTRL top-k"][0], True, 1),
        "C-DFTRL top-k (blocked)": (bmethods["C-DFTRL top-k"][0], True, block),
        "C-DOGD top-k": (bmethods["C-DOGD top-k"][0], True, 1),
        "C-DOGD top-k (blocked)": (bmethods["C-DOGD top-k"][0], True, block),
    }


def run_setting(s: Setting) -> dict:
    """Tune and run every method on one setting: ``{method: {regret, curve, bits, slope, eta_mult,
    gamma[, delta]}}`` (a task of ``RunContext.map``)."""
    n, T = s.n, s.T
    horizons, block = _horizons_block(T)
    net = _network(s.graph, n, s.seed)
    out = {}
    if s.kind == "full":
        d = s.d
        tune_prob = PROBLEMS[s.problem](T, n, d, np.random.default_rng(s.tune_seed))
        test_prob = PROBLEMS[s.problem](T, n, d, np.random.default_rng(s.test_seed))
        prefixes = {Th: _prefix(test_prob, Th) for Th in horizons}  # shared: comparators are cached per object
        for name, (make, compressed) in _methods(d).items():
            blk = block if name == ACCEL else 1
            c, gamma, _ = _tune(make, compressed, tune_prob, net, RADIUS / math.sqrt(T), block=blk, seed=s.seed)
            regrets, bits = [], None
            for Th in horizons:
                res = run_doco(prefixes[Th], net, make(c * RADIUS / math.sqrt(Th), gamma, Ball(RADIUS)),
                               block=blk, seed=s.seed)
                regrets.append(res.final_regret)
                bits = res.final_bits
            out[name] = dict(regret=regrets[-1], curve=regrets, bits=bits, slope=_slope(horizons, regrets),
                             eta_mult=c, gamma=gamma)
        return out
    db, fb = s.d_bandit, s.problem
    tune_prob = _bandit_least_squares(T, n, db, np.random.default_rng(s.tune_seed))
    test_prob = _bandit_least_squares(T, n, db, np.random.default_rng(s.test_seed))
    prefixes = {Th: _prefix(test_prob, Th) for Th in horizons}
    rate = 0.75 if fb == "one-point" else 0.5  # eta ~ T^-3/4 (one-point), T^-1/2 (two-point)
    for name, (make, compressed, blk) in _bandit_methods(db, block).items():
        c, gamma, delta = _tune(make, compressed, tune_prob, net, RADIUS / (db * T**rate), bandit=fb,
                                block=blk, seed=s.seed)
        regrets, bits = [], None
        for Th in horizons:
            res = run_doco(prefixes[Th], net, make(c * RADIUS / (db * Th**rate), gamma, Ball(RADIUS)),
                           feedback=fb, delta=delta, block=blk, seed=s.seed)
            regrets.append(res.final_regret)
            bits = res.final_bits
        out[name] = dict(regret=regrets[-1], curve=regrets, bits=bits,
                         slope=_slope(horizons, regrets), eta_mult=c, gamma=gamma, delta=delta)
    return out


def run(ctx: RunContext) -> None:
    size = SIZES[ctx.quick]
    n, d, T = size["n"], size["d"], size["T"]
    ctx.config.update(size, eta_multipliers=list(ETA_MULTIPLIERS), bandit_eta_multipliers=list(BANDIT_ETA_MULTIPLIERS),
                      gammas=list(GAMMAS), deltas=list(DELTAS),
                      radius=RADIUS, topk_k=max(1, d // 10))
    horizons, block = _horizons_block(T)
    methods = _methods(d)
    rng = np.random.default_rng(ctx.seed)
    nets = {g: _network(g, n, ctx.seed) for g in size["graphs"]}
    ctx.metric("spectral_gap", {g: net.spectral_gap for g, net in nets.items()})

    # The sweep: every (problem, graph) in full information, then every (graph, feedback) in
    # bandit feedback; each one independent task, its data seeds drawn here in the loop's order.
    cells = [("full", p, g) for p in PROBLEMS for g in nets]
    cells += [("bandit", fb, g) for g, fb in itertools.product(nets, ("one-point", "two-point"))]
    tasks = []
    for kind, p, g in cells:
        tune_seed, test_seed = int(rng.integers(2**31)), int(rng.integers(2**31))
        tasks.append(Setting(kind, p, g, n, d, size["d_bandit"], T, ctx.seed, tune_seed, test_seed))
    results = ctx.map(run_setting, tasks, description="settings (full information, bandit)")
    full, bandit = {}, {}  # (problem, graph, method) / (feedback, graph, method) -> dict
    for s, res in zip(tasks, results):
        for name, v in res.items():
            (full if s.kind == "full" else bandit)[(s.problem, s.graph, name)] = v
    bandit_methods = _bandit_methods(size["d_bandit"], block)
    _record(ctx, full, bandit, methods, bandit_methods, nets, horizons, block, d, size["d_bandit"])


def _record(ctx, full, bandit, methods, bandit_methods, nets, horizons, block, d, d_bandit) -> None:
    def mean_over(key, name, table):
        vals = [v[key] for k, v in table.items() if k[-1] == name]
        return float(np.mean(vals))

    for (p, g, name), v in full.items():
        tag = f"{p}/{g}/{name}"
        ctx.metric(f"full/{tag}/regret", v["regret"])
        ctx.metric(f"full/{tag}/bits", v["bits"])
        ctx.metric(f"full/{tag}/slope", v["slope"])
    for (fb, g, name), v in bandit.items():
        ctx.metric(f"bandit/{fb}/{g}/{name}/regret", v["regret"])
        ctx.metric(f"bandit/{fb}/{g}/{name}/bits", v["bits"])
        ctx.metric(f"bandit/{fb}/{g}/{name}/slope", v["slope"])
    summary = {name: {k: mean_over(k, name, full) for k in ("regret", "bits", "slope")} for name in methods}
    bsummary = {
        fb: {
            name: {k: mean_over(k, name, {kk: v for kk, v in bandit.items() if kk[0] == fb}) for k in ("regret", "bits", "slope")}
            for name in bandit_methods
        }
        for fb in ("one-point", "two-point")
    }
    ctx.metric("summary_full", summary)
    ctx.metric("summary_bandit", bsummary)
    ctx.metric("horizons", horizons)
    ctx.metric("bandit_block", block)

    ours, prior, exact = summary["C-DFTRL top-k"], summary["C-DOGD top-k"], summary["D-FTRL"]
    ctx.claim("Full information: compressed D-FTRL (top-k, k=d/10) matches the regret of compressed D-OGD "
              "(top-k; within 10% or better, mean over graphs and problems)",
              ours=ours["regret"], baseline=prior["regret"], holds=ours["regret"] <= 1.1 * prior["regret"])
    ratio = exact["bits"] / ours["bits"]
    ctx.metric("topk_bits_reduction", ratio)
    ctx.claim(f"Top-k compressed D-FTRL stays within 20% of uncompressed D-FTRL's regret with >= 5x fewer bits "
              f"(here {ratio:.1f}x fewer)",
              ours=ours["regret"], baseline=exact["regret"], holds=ours["regret"] <= 1.2 * exact["regret"] and ratio >= 5)
    ctx.claim("Full-information regret grows as sqrt(T): fitted log-log slope of compressed D-FTRL <= 0.6 "
              "(baseline column: compressed D-OGD's slope)",
              ours=ours["slope"], baseline=prior["slope"], holds=ours["slope"] <= 0.6)
    for fb in ("one-point", "two-point"):
        bo, bb, bp = (bsummary[fb][m] for m in ("C-DFTRL top-k (blocked)", "C-DFTRL top-k", "C-DOGD top-k"))
        ctx.claim(f"Bandit ({fb}): compressed D-FTRL improves the regret of compressed bandit D-OGD (Tu et al. style); "
                  "ours: the better of blocked and unblocked",
                  ours=min(bo["regret"], bb["regret"]), baseline=bp["regret"],
                  holds=min(bo["regret"], bb["regret"]) < bp["regret"])
        ctx.claim(f"Bandit ({fb}): blocked compressed D-FTRL sends fewer bits than compressed bandit D-OGD "
                  "with regret no worse than 10% above it",
                  ours=bo["bits"], baseline=bp["bits"], holds=bo["bits"] < bp["bits"] and bo["regret"] <= 1.1 * bp["regret"])

    ctx.text(
        f"{len(nets)} graphs ({', '.join(f'{g}: spectral gap {net.spectral_gap:.3f}' for g, net in nets.items())}), "
        f"n = {next(iter(nets.values())).n} nodes, d = {d}, horizons {horizons}. Step sizes η = c·R/√T "
        "(bandit: c·R/(d·T^{3/4})) with c, the consensus step γ and the exploration radius δ tuned on a "
        "separate sequence of the same distribution. Regret is the worst node's network regret; bits are per node "
        "(one broadcast per gossip round: dense 32d, top-k k(32+⌈log₂d⌉), QSGD and sign with their headers). "
        f"Bandit methods (one- and two-point feedback) run on online least squares with d = {d_bandit}; 'blocked' plays "
        f"one point per block of {block} rounds and communicates once per block; the accelerated-gossip D-FTRL (Wan et al.'s anchor) "
        "runs ⌈1/√δ⌉ accelerated gossip rounds per block, in full information and bandit alike."
    )
    ctx.table("Full information (mean over graphs and problems)", ["method", "final regret", "bits per node", "log-log slope"],
              [(m, v["regret"], v["bits"], v["slope"]) for m, v in summary.items()])
    for fb, table in bsummary.items():
        ctx.table(f"Bandit, {fb} feedback (mean over graphs)", ["method", "final regret", "bits per node", "log-log slope"],
                  [(m, v["regret"], v["bits"], v["slope"]) for m, v in table.items()])
    _figures(ctx, full, bandit, methods, bandit_methods, horizons)


def _log_axes(ax) -> None:
    # log axes spanning under a decade label their minor ticks too, which collide: keep the major ones
    from matplotlib.ticker import NullFormatter

    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())


def _figures(ctx, full, bandit, methods, bandit_methods, horizons) -> None:
    plt = pyplot()

    problems = sorted({k[0] for k in full})
    graphs = sorted({k[1] for k in full})
    # legends go outside the axes (constrained layout makes room), never over the curves
    fig, axes = plt.subplots(1, len(problems), figsize=(4.2 * len(problems) + 2.2, 3.6), layout="constrained")
    for ax, p in zip(np.atleast_1d(axes), problems):
        for name in methods:
            curve = np.mean([full[(p, g, name)]["curve"] for g in graphs], 0)
            ax.plot(horizons, curve, marker="o", ms=3, label=name, ls="--" if "OGD" in name else "-")
        ax.plot(horizons, curve[-1] * (np.array(horizons) / horizons[-1]) ** 0.5, color="k", lw=0.6, label="√T slope")
        _log_axes(ax)
        ax.set_title(p)
        ax.set_xlabel("horizon T")
    np.atleast_1d(axes)[0].set_ylabel("regret (mean over graphs)")
    fig.legend(*np.atleast_1d(axes)[0].get_legend_handles_labels(), loc="outside right upper", fontsize=8)
    ctx.figure(fig, "regret_vs_T", "Full-information regret against the horizon (log-log); dashed: OGD-type methods.")
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7.5, 4), layout="constrained")
    for name in methods:
        pts = [(v["bits"], v["regret"]) for k, v in full.items() if k[-1] == name]
        ax.scatter(*zip(*pts), label=name, marker="s" if "OGD" in name else "o", alpha=0.8)
    _log_axes(ax)
    ax.set_xlabel("bits sent per node")
    ax.set_ylabel("final regret")
    fig.legend(loc="outside right upper", fontsize=8)
    ctx.figure(fig, "regret_vs_bits", "Final regret against communication, every graph and problem (lower left is better).")
    plt.close(fig)

    bgraphs = sorted({k[1] for k in bandit})
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6), layout="constrained")
    for ax, fb in zip(axes, ("one-point", "two-point")):
        for name in bandit_methods:
            curve = np.mean([bandit[(fb, g, name)]["curve"] for g in bgraphs], 0)
            ax.plot(horizons, curve, marker="o", ms=3, label=name, ls="--" if "OGD" in name else "-")
        _log_axes(ax)
        ax.set_title(f"bandit, {fb} feedback")
        ax.set_xlabel("horizon T")
    axes[0].set_ylabel("regret (mean over graphs)")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside right upper", fontsize=8)
    ctx.figure(fig, "bandit_regret_vs_T", "Bandit regret against the horizon (log-log); dashed: OGD-type methods.")
    plt.close(fig)
