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
    # quick: T = 500 (was 1000 with one seed) so that three seeds fit in about the time one took
    True: dict(n=16, d=20, d_bandit=5, T=500, graphs=["ring", "grid", "erdos_renyi"], seeds=3),
    False: dict(n=64, d=20, d_bandit=5, T=10000, graphs=["ring", "grid", "erdos_renyi"], seeds=5),
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
    seeds = [ctx.seed + i for i in range(size["seeds"])]
    ctx.config.update(size, eta_multipliers=list(ETA_MULTIPLIERS), bandit_eta_multipliers=list(BANDIT_ETA_MULTIPLIERS),
                      gammas=list(GAMMAS), deltas=list(DELTAS),
                      radius=RADIUS, topk_k=max(1, d // 10), run_seeds=seeds)
    horizons, block = _horizons_block(T)
    methods = _methods(d)

    # The sweep, per seed (ctx.seed, ctx.seed + 1, ...): every (problem, graph) in full information, then
    # every (graph, feedback) in bandit feedback; each one an independent task, its data seeds drawn here
    # in the loop's order from that seed (the first seed's tasks are what one seed ran before), the
    # Erdős–Rényi graph drawn from that seed.
    cells = [("full", p, g) for p in PROBLEMS for g in size["graphs"]]
    cells += [("bandit", fb, g) for g, fb in itertools.product(size["graphs"], ("one-point", "two-point"))]
    tasks = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        for kind, p, g in cells:
            tune_seed, test_seed = int(rng.integers(2**31)), int(rng.integers(2**31))
            tasks.append(Setting(kind, p, g, n, d, size["d_bandit"], T, seed, tune_seed, test_seed))
    results = ctx.map(run_setting, tasks, description=f"settings (full information, bandit) x {len(seeds)} seeds")
    full, bandit = {}, {}  # (problem, graph, method) / (feedback, graph, method) -> {key: [value per seed]}
    for s, res in zip(tasks, results):
        table = full if s.kind == "full" else bandit
        for name, v in res.items():
            entry = table.setdefault((s.problem, s.graph, name), {"regret": [], "bits": [], "slope": [], "curve": []})
            for key in entry:
                entry[key].append(v[key])
    nets = {g: [_network(g, n, seed).spectral_gap for seed in seeds] for g in size["graphs"]}
    bandit_methods = _bandit_methods(size["d_bandit"], block)
    _record(ctx, full, bandit, methods, bandit_methods, nets, horizons, block, d, size["d_bandit"], seeds)


def _pairs(table: dict, name: str, key: str = "regret") -> list[float]:
    """``name``'s figure on every instance of ``table``, in one fixed order (instance by instance, seed
    by seed): the pairs of a paired comparison line up across methods."""
    return [x for k, v in sorted(table.items()) if k[-1] == name for x in v[key]]


def _per_seed_mean(table: dict, name: str, key: str) -> list[float]:
    """``name``'s figure averaged over the instances (problems, graphs) of each seed."""
    rows = [v[key] for k, v in sorted(table.items()) if k[-1] == name]
    return [float(np.mean(col)) for col in zip(*rows)]


def _decide_ratio(ctx, claim: str, ours: list[float], base: list[float], tolerance: float) -> str:
    """Ours no worse than ``tolerance`` (a fraction: 0.1 = 10 %) above the baseline, or better than it when
    ``tolerance`` is 0, decided by a paired Student-t interval over instances of the log regret ratio
    log(baseline / ours) against the margin -log(1 + tolerance): regrets of different problems differ in
    scale, their ratios do not."""
    from ._harness import paired_interval

    diff, lo, hi = paired_interval(np.log(ours).tolist(), np.log(base).tolist(), better="lower")
    return ctx.decide(claim, ours=float(np.mean(ours)), baseline=float(np.mean(base)), diff=diff, ci=[lo, hi],
                      n=len(ours), method="paired t over log regret ratios", better="lower",
                      margin=-math.log1p(tolerance))


def _record(ctx, full, bandit, methods, bandit_methods, nets, horizons, block, d, d_bandit, seeds) -> None:
    def stats(table, name):
        out = {}
        for key in ("regret", "bits", "slope"):
            per_seed = _per_seed_mean(table, name, key)
            out[key] = float(np.mean(_pairs(table, name, key)))
            out[key + "_per_seed"] = per_seed
            out[key + "_std"] = float(np.std(per_seed, ddof=1)) if len(per_seed) > 1 else 0.0
        return out

    ctx.metric("spectral_gap", nets)
    for (p, g, name), v in full.items():
        ctx.metric(f"full/{p}/{g}/{name}", {k: v[k] for k in ("regret", "bits", "slope")})
    for (fb, g, name), v in bandit.items():
        ctx.metric(f"bandit/{fb}/{g}/{name}", {k: v[k] for k in ("regret", "bits", "slope")})
    summary = {name: stats(full, name) for name in methods}
    bsummary = {fb: {name: stats({k: v for k, v in bandit.items() if k[0] == fb}, name) for name in bandit_methods}
                for fb in ("one-point", "two-point")}
    ctx.metric("summary_full", summary)
    ctx.metric("summary_bandit", bsummary)
    ctx.metric("horizons", horizons)
    ctx.metric("bandit_block", block)

    n_full = len(_pairs(full, "C-DFTRL top-k"))
    n_problems, n_graphs = len({k[0] for k in full}), len(nets)
    full_pairs = (f"paired over {n_full} instances: {len(seeds)} seeds x {n_problems} problems x {n_graphs} graphs")
    ours, prior, exact = summary["C-DFTRL top-k"], summary["C-DOGD top-k"], summary["D-FTRL"]
    _decide_ratio(ctx, "Full information: compressed D-FTRL (top-k, k=d/10) matches the regret of compressed D-OGD "
                       f"(top-k; within 10% or better; {full_pairs}, log regret ratios)",
                  _pairs(full, "C-DFTRL top-k"), _pairs(full, "C-DOGD top-k"), 0.1)
    bits_ratios = [e / o for e, o in zip(_pairs(full, "D-FTRL", "bits"), _pairs(full, "C-DFTRL top-k", "bits"))]
    ratio = min(bits_ratios)
    ctx.metric("topk_bits_reduction", ratio)
    claim = (f"Top-k compressed D-FTRL stays within 20% of uncompressed D-FTRL's regret with >= 5x fewer bits "
             f"(here {ratio:.1f}x fewer on every instance; regret {full_pairs}, log regret ratios)")
    if ratio >= 5:  # bits are exact counts: the regret decides
        _decide_ratio(ctx, claim, _pairs(full, "C-DFTRL top-k"), _pairs(full, "D-FTRL"), 0.2)
    else:  # the bits part fails, whatever the regret
        ctx.bound(claim + ": the bits part fails (baseline column: 5x)", bits_ratios, 5.0, better="higher")
    ctx.bound(f"Full-information regret grows as sqrt(T): fitted log-log slope of compressed D-FTRL <= 0.6 "
              f"(baseline column: the bound 0.6; compressed D-OGD's mean slope {prior['slope']:.2f}; "
              f"over {n_full} instances: {len(seeds)} seeds x {n_problems} problems x {n_graphs} graphs)",
              _pairs(full, "C-DFTRL top-k", "slope"), 0.6, better="lower")
    for fb in ("one-point", "two-point"):
        table = {k: v for k, v in bandit.items() if k[0] == fb}
        n_b = len(_pairs(table, "C-DOGD top-k"))
        pairs = f"paired over {n_b} instances: {len(seeds)} seeds x {n_graphs} graphs, log regret ratios"
        best = min(("C-DFTRL top-k (blocked)", "C-DFTRL top-k"), key=lambda m: bsummary[fb][m]["regret"])
        _decide_ratio(ctx, f"Bandit ({fb}): compressed D-FTRL improves the regret of compressed bandit D-OGD (Tu et al. "
                           f"style); ours: the better of blocked and unblocked on mean regret ({best}); {pairs}",
                      _pairs(table, best), _pairs(table, "C-DOGD top-k"), 0.0)
        bits_o, bits_b = _pairs(table, "C-DFTRL top-k (blocked)", "bits"), _pairs(table, "C-DOGD top-k", "bits")
        claim = (f"Bandit ({fb}): blocked compressed D-FTRL sends fewer bits than compressed bandit D-OGD "
                 f"with regret no worse than 10% above it (bits {np.mean(bits_o):.0f} vs {np.mean(bits_b):.0f}; "
                 f"regret {pairs})")
        if all(o < b for o, b in zip(bits_o, bits_b)):  # bits are exact counts: the regret decides
            _decide_ratio(ctx, claim, _pairs(table, "C-DFTRL top-k (blocked)"), _pairs(table, "C-DOGD top-k"), 0.1)
        else:
            ctx.compare(claim + ": the bits part fails", bits_o, bits_b, better="lower")

    ctx.text(
        f"{len(nets)} graphs ({', '.join(f'{g}: spectral gap {np.mean(gap):.3f}' for g, gap in nets.items())}; "
        f"the Erdős–Rényi graph is drawn per seed, its gap averaged), "
        f"n = {ctx.config['n']} nodes, d = {d}, horizons {horizons}, seeds {seeds} (each seed draws its own "
        "tuning and test sequences). Step sizes η = c·R/√T "
        "(bandit: c·R/(d·T^{3/4})) with c, the consensus step γ and the exploration radius δ tuned on a "
        "separate sequence of the same distribution. Regret is the worst node's network regret; bits are per node "
        "(one broadcast per gossip round: dense 32d, top-k k(32+⌈log₂d⌉), QSGD and sign with their headers). "
        f"Bandit methods (one- and two-point feedback) run on online least squares with d = {d_bandit}; 'blocked' plays "
        f"one point per block of {block} rounds and communicates once per block; the accelerated-gossip D-FTRL (Wan et al.'s anchor) "
        "runs ⌈1/√δ⌉ accelerated gossip rounds per block, in full information and bandit alike. "
        "Claims on regret pair two methods on the same instance (seed, problem, graph) and decide on the log of "
        "their regret ratio (a Student-t interval over instances), so that problems of different scales weigh alike."
    )

    def row(m, v):
        return (m, f"{v['regret']:.4g} ± {v['regret_std']:.2g}", f"{v['bits']:.4g}",
                f"{v['slope']:.3f} ± {v['slope_std']:.2g}")

    headers = ["method", "final regret", "bits per node", "log-log slope"]
    ctx.table(f"Full information: mean over graphs, problems and {len(seeds)} seeds (± std over seeds of the per-seed "
              "mean)", headers, [row(m, v) for m, v in summary.items()])
    for fb, table in bsummary.items():
        ctx.table(f"Bandit, {fb} feedback: mean over graphs and {len(seeds)} seeds (± std over seeds)", headers,
                  [row(m, v) for m, v in table.items()])
    _figures(ctx, full, bandit, methods, bandit_methods, horizons)


def _log_axes(ax) -> None:
    # log axes spanning under a decade label their minor ticks too, which collide: keep the major ones
    from matplotlib.ticker import NullFormatter

    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())


def _band(ax, horizons, curves, name) -> np.ndarray:
    """Plot the mean regret curve over graphs and seeds, with a band from the lowest to the highest
    seed's curve (each a mean over graphs). ``curves[g][seed]`` is one curve; returns the mean."""
    per_seed = np.mean(np.asarray(curves, float), axis=0)  # seeds x horizons
    mean = per_seed.mean(0)
    (line,) = ax.plot(horizons, mean, marker="o", ms=3, label=name, ls="--" if "OGD" in name else "-")
    if len(per_seed) > 1:
        ax.fill_between(horizons, per_seed.min(0), per_seed.max(0), color=line.get_color(), alpha=0.15, lw=0)
    return mean


def _figures(ctx, full, bandit, methods, bandit_methods, horizons) -> None:
    plt = pyplot()

    problems = sorted({k[0] for k in full})
    graphs = sorted({k[1] for k in full})
    # legends go outside the axes (constrained layout makes room), never over the curves
    fig, axes = plt.subplots(1, len(problems), figsize=(4.2 * len(problems) + 2.2, 3.6), layout="constrained")
    for ax, p in zip(np.atleast_1d(axes), problems):
        for name in methods:
            curve = _band(ax, horizons, [full[(p, g, name)]["curve"] for g in graphs], name)
        ax.plot(horizons, curve[-1] * (np.array(horizons) / horizons[-1]) ** 0.5, color="k", lw=0.6, label="√T slope")
        _log_axes(ax)
        ax.set_title(p)
        ax.set_xlabel("horizon T")
    np.atleast_1d(axes)[0].set_ylabel("regret (mean over graphs and seeds)")
    fig.legend(*np.atleast_1d(axes)[0].get_legend_handles_labels(), loc="outside right upper", fontsize=8)
    ctx.figure(fig, "regret_vs_T", "Full-information regret against the horizon (log-log), mean over graphs and seeds; "
                                     "band: the lowest to the highest seed (mean over graphs); dashed: OGD-type methods.")
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7.5, 4), layout="constrained")
    for name in methods:
        pts = [(b, r) for k, v in full.items() if k[-1] == name for b, r in zip(v["bits"], v["regret"])]
        ax.scatter(*zip(*pts), label=name, marker="s" if "OGD" in name else "o", alpha=0.8)
    _log_axes(ax)
    ax.set_xlabel("bits sent per node")
    ax.set_ylabel("final regret")
    fig.legend(loc="outside right upper", fontsize=8)
    ctx.figure(fig, "regret_vs_bits", "Final regret against communication, every graph, problem and seed (lower left is better).")
    plt.close(fig)

    bgraphs = sorted({k[1] for k in bandit})
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6), layout="constrained")
    for ax, fb in zip(axes, ("one-point", "two-point")):
        for name in bandit_methods:
            _band(ax, horizons, [bandit[(fb, g, name)]["curve"] for g in bgraphs], name)
        _log_axes(ax)
        ax.set_title(f"bandit, {fb} feedback")
        ax.set_xlabel("horizon T")
    axes[0].set_ylabel("regret (mean over graphs and seeds)")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside right upper", fontsize=8)
    ctx.figure(fig, "bandit_regret_vs_T", "Bandit regret against the horizon (log-log), mean over graphs and seeds; band: the lowest "
                                           "to the highest seed; dashed: OGD-type methods.")
    plt.close(fig)
