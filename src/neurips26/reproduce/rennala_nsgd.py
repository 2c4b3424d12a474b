"""Reproduction: Rennala-NSGD against synchronous minibatch NSGD, asynchronous SGD and
Rennala SGD, in simulated wall-clock time with heterogeneous workers.

Three problems, every one smooth and non-convex:

* ``digits-mlp``: a 64-32-10 tanh MLP on scikit-learn's bundled digits (1797 images),
  each gradient on a minibatch of 4; ε is a training cross-entropy.
* ``heavy-tail-linf``: f(x) = (1/d) Σ_i ψ(x_i − a_i), ψ(z) = z²/2 + 1.5 cos z, with Student-t (ν = 2.5)
  gradient noise; ε is the ℓ1 norm of ∇f (the dual of ℓ∞).
* ``heavy-tail-spectral``: the same function of the singular values of W − W*
  (n × n), with Student-t noise on every entry; ε is the nuclear norm of ∇f (the
  dual of the spectral norm).

Every method's step size is tuned on a separate seed (the time-to-ε, or the final
criterion when no step size reaches ε), then run on the test seeds.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..distributed import AsynchronousServer, RennalaServer, SynchronousServer, equilibrium_time, simulate
from ..optim import Blocks, L2, Linf, Spectral
from ._common import finite_or_minus_one, pyplot, tune_on_grid
from ._harness import RunContext

SIZES = {
    True: dict(n_workers=8, batch=8, linf_d=64, spec_n=16, seeds=[0, 1], mlp_steps=400, synth_steps=800, dims=[16, 64, 256],
               mats=[8, 16, 32], lr_mult=(0.25, 1.0, 4.0), workers_sweep=[2, 4, 8, 16]),
    False: dict(n_workers=16, batch=16, linf_d=64, spec_n=16, seeds=[0, 1, 2], mlp_steps=1500, synth_steps=4000, dims=[16, 64, 256, 1024],
                mats=[8, 16, 32, 64], lr_mult=(0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0), workers_sweep=[2, 4, 8, 16, 32]),
}
NU = 2.5  # Student-t tail index: finite variance, heavy tails


# --- problems ------------------------------------------------------------------------------

class DigitsMLP:
    """Flat-parameter MLP; ``grad`` on a minibatch, ``criterion`` the full training loss."""

    name = "digits-mlp"
    matrix_geometry = True

    def __init__(self, seed: int, hidden: int = 32, batch: int = 4):
        from sklearn.datasets import load_digits

        data = load_digits()
        self.X = torch.tensor(data.data / 16.0, dtype=torch.float32)
        self.y = torch.tensor(data.target, dtype=torch.long)
        self.shapes = [(hidden, 64), (hidden,), (10, hidden), (10,)]
        self.sizes = [math.prod(s) for s in self.shapes]
        generator = torch.Generator().manual_seed(1000 + seed)
        parts = [torch.randn(s, generator=generator) / math.sqrt(s[-1]) if len(s) == 2 else torch.zeros(s) for s in self.shapes]
        self.x0 = torch.cat([p.reshape(-1) for p in parts])
        self.batch = batch
        self.key = (self.name, seed, hidden, batch)

    def _loss(self, x, X, y):
        W1, b1, W2, b2 = (p.reshape(s) for p, s in zip(torch.split(x, self.sizes), self.shapes))
        return torch.nn.functional.cross_entropy(torch.tanh(X @ W1.T + b1) @ W2.T + b2, y)

    def grad(self, x, worker, rng):
        idx = torch.as_tensor(rng.integers(0, len(self.y), self.batch))
        x = x.detach().requires_grad_(True)
        (g,) = torch.autograd.grad(self._loss(x, self.X[idx], self.y[idx]), x)
        return g

    @torch.no_grad()
    def criterion(self, x):
        return float(self._loss(x, self.X, self.y))

    def norms(self):
        return {"l2": L2(), "linf": Linf(), "spectral": Blocks(self.shapes, [Spectral(), L2(), Spectral(), L2()])}


def _psi_prime(z):
    # ψ(z) = z²/2 + 1.5 cos z: even (so Σ ψ(σ_k) is a smooth function of a matrix),
    # non-convex near 0 (ψ''(0) = −0.5), and its slope grows at infinity, so a small
    # gradient means a point near a stationary one, not a far-away plateau.
    return z - 1.5 * torch.sin(z)


class HeavyTailLinf:
    """f(x) = (1/d) Σ ψ(x_i − a_i); stochastic gradient ∇f + (σ/d)·t_ν noise."""

    name = "heavy-tail-linf"
    matrix_geometry = False

    def __init__(self, seed: int, d: int = 64, sigma: float = 2.0):
        rng = np.random.default_rng(2000 + seed)
        self.a = torch.as_tensor(rng.uniform(-3, 3, d))
        self.d, self.sigma = d, sigma
        self.x0 = torch.zeros(d, dtype=torch.float64)
        self.key = (self.name, seed, d, sigma)

    def true_grad(self, x):
        return _psi_prime(x - self.a) / self.d

    def grad(self, x, worker, rng):
        return self.true_grad(x) + torch.as_tensor(rng.standard_t(NU, self.d)) * (self.sigma / self.d)

    def criterion(self, x):
        return float(self.true_grad(x).abs().sum())  # ‖∇f‖₁, the dual of ℓ∞

    def norms(self):
        return {"l2": L2(), "linf": Linf()}


class HeavyTailSpectral:
    """f(W) = (1/n) Σ_k ψ(σ_k(W − W*)) on n × n matrices (flattened), noise (σ/n)·t_ν."""

    name = "heavy-tail-spectral"
    matrix_geometry = True

    def __init__(self, seed: int, n: int = 16, sigma: float = 2.0):
        rng = np.random.default_rng(3000 + seed)
        U, _ = np.linalg.qr(rng.standard_normal((n, n)))
        V, _ = np.linalg.qr(rng.standard_normal((n, n)))
        self.target = torch.as_tensor(U @ np.diag(rng.uniform(0, 6, n)) @ V.T)
        self.n, self.sigma = n, sigma
        self.x0 = torch.zeros(n * n, dtype=torch.float64)
        self.key = (self.name, seed, n, sigma)

    def true_grad(self, x):
        U, s, Vh = torch.linalg.svd(x.reshape(self.n, self.n) - self.target)
        return ((U * _psi_prime(s)) @ Vh).reshape(-1) / self.n

    def grad(self, x, worker, rng):
        return self.true_grad(x) + torch.as_tensor(rng.standard_t(NU, self.n * self.n)) * (self.sigma / self.n)

    def criterion(self, x):
        # ∇f = U diag(ψ'(σ)) Vᵀ / n, so its singular values are |ψ'(σ_k)| / n: one SVD, no second.
        s = torch.linalg.svdvals(x.reshape(self.n, self.n) - self.target)
        return float(_psi_prime(s).abs().sum()) / self.n

    def norms(self):
        return {"l2": L2(), "spectral": Blocks([(self.n, self.n)], [Spectral()])}


# --- worker speeds -------------------------------------------------------------------------

def compute_times(setting: str, n: int, seed: int):
    """``linear``: τ_i = i (deterministic); ``random``: exponential times with per-worker
    means drawn log-uniformly in [1, 20]. Returns (compute_time, mean times)."""
    if setting == "linear":
        taus = np.arange(1, n + 1, dtype=float)
        return (lambda w, rng: taus[w]), taus
    means = np.exp(np.random.default_rng(4000 + seed).uniform(0, math.log(20), n))
    return (lambda w, rng: float(rng.exponential(means[w])) + 1e-6), means


# --- methods -------------------------------------------------------------------------------

def _base_lr(problem, method: str) -> float:
    """A starting step size per geometry; the tuning grid multiplies it."""
    if problem.name == "digits-mlp":
        return {"sgd": 0.5, "l2": 0.8, "linf": 0.032, "spectral": 0.32}[method]
    d = problem.x0.numel()
    # The ℓ2 step is scaled by √d (the distance to cover grows as √d); ℓ∞ steps move
    # every coordinate and need no scaling; the SGD step is found by the tuning grid,
    # which extends itself past its edges.
    return {"sgd": 1.0, "l2": 0.02 * math.sqrt(d), "linf": 0.02, "spectral": 0.02 * math.sqrt(math.sqrt(d))}[method]


METHODS = {
    # name: (server kind, geometry)
    "sync-nsgd-l2": ("sync", "l2"),
    "sync-nsgd-linf": ("sync", "linf"),
    "sync-nsgd-spectral": ("sync", "spectral"),
    "async-sgd": ("async", "sgd"),
    "rennala-sgd": ("rennala", "sgd"),
    "rennala-nsgd-l2": ("rennala", "l2"),
    "rennala-nsgd-linf": ("rennala", "linf"),
    "rennala-nsgd-spectral": ("rennala", "spectral"),
}


def _applicable(problem, method):
    geometry = METHODS[method][1]
    return geometry == "sgd" or geometry in problem.norms()


def _server(problem, method, lr, n_workers, batch):
    kind, geometry = METHODS[method]
    norm = None if geometry == "sgd" else problem.norms()[geometry]
    if kind == "sync":
        return SynchronousServer(problem.x0, n_workers, lr, norm)
    if kind == "async":
        return AsynchronousServer(problem.x0, lr, norm)
    return RennalaServer(problem.x0, batch, lr, norm)


def run_method(problem, method, lr, setting, n_workers, batch, steps, eps, seed):
    """Simulate until the criterion is ≤ eps (or ``steps`` steps); returns
    (time to eps or inf, times, criterion curve)."""
    server = _server(problem, method, lr, n_workers, batch)
    ct, _ = compute_times(setting, n_workers, seed)
    curve = []

    def reached(x):
        value = problem.criterion(x)
        if not math.isfinite(value):
            raise FloatingPointError(f"{method} diverged (lr={lr:g})")
        curve.append(value)
        return value <= eps

    try:
        # The budget is in gradients: an asynchronous step spends one, a Rennala step B.
        budget = steps * batch if METHODS[method][0] == "async" else steps
        res = simulate(server, problem.grad, ct, n_workers, budget, seed=seed, until=reached)
    except (FloatingPointError, torch.linalg.LinAlgError):  # diverged: this step size is out
        return math.inf, np.array([]), np.array([])
    hit = curve[-1] <= eps if curve else False
    return (float(res.times[-1]) if hit else math.inf), res.times, np.array(curve)


def tune_lr(problem_at, method, setting, n_workers, batch, steps, eps, mults, seed, max_extend=3, run=None):
    """The step size with the least time to eps on the tuning seed (ties and misses: the
    least final criterion), over ``base · mults``; when the best lies on an edge of the
    grid, the grid extends past that edge by its own ratio, up to ``max_extend`` times
    (:func:`~neurips26.reproduce._common.tune_on_grid`). ``run`` replaces
    :func:`run_method` (a cached one)."""
    run = run or run_method
    problem = problem_at(seed)
    base = _base_lr(problem, METHODS[method][1])
    ratio = mults[-1] / mults[-2] if len(mults) > 1 else 4.0

    def score(m):
        t, _, curve = run(problem, method, base * m, setting, n_workers, batch, steps, eps, seed)
        return t, curve[-1] if len(curve) else math.inf

    best, _ = tune_on_grid(score, mults, lambda m, direction: m * ratio if direction > 0 else m / ratio,
                           max_extend=max_extend)
    return base * best


def _median_finite(values):
    values = [v for v in values if math.isfinite(v)]
    return float(np.median(values)) if values else math.inf


def _fmt(t):
    return f"{t:.4g}" if math.isfinite(t) else "not reached"


EPS = {"digits-mlp": 0.35, "heavy-tail-linf": 0.1, "heavy-tail-spectral": 0.3}


def _problems(cfg) -> dict:
    """Per problem: (its constructor by seed, its step budget)."""
    return {
        "digits-mlp": (lambda s: DigitsMLP(s), cfg["mlp_steps"]),
        "heavy-tail-linf": (lambda s: HeavyTailLinf(s, d=cfg["linf_d"]), cfg["synth_steps"]),
        "heavy-tail-spectral": (lambda s: HeavyTailSpectral(s, n=cfg["spec_n"]), cfg["synth_steps"]),
    }


def _dimension_sweeps(cfg) -> list:
    """(problem, sizes, constructor by (seed, size), methods) of the dimension sweep."""
    return [("heavy-tail-linf", cfg["dims"], lambda s, d: HeavyTailLinf(s, d=d),
             ["rennala-sgd", "rennala-nsgd-l2", "rennala-nsgd-linf"]),
            ("heavy-tail-spectral", cfg["mats"], lambda s, d: HeavyTailSpectral(s, n=d),
             ["rennala-sgd", "rennala-nsgd-l2", "rennala-nsgd-spectral"])]


def _parameters(pname: str, d: int) -> int:
    """The number of parameters at size d: d for the vector problem, d² for the matrix one."""
    return d if pname.endswith("linf") else d * d


def run(ctx: RunContext) -> None:
    cfg = SIZES[ctx.quick]
    tune_seed = 100 + ctx.seed
    test_seeds = [ctx.seed + s for s in cfg["seeds"]]
    ctx.config.update(n_workers=cfg["n_workers"], batch_size=cfg["batch"], eps=EPS, tune_seed=tune_seed,
                      test_seeds=test_seeds, lr_multipliers=list(cfg["lr_mult"]), student_t_nu=NU,
                      settings=["linear", "random"])
    raw = _run(ctx, cfg, tune_seed, test_seeds)
    summary = summarize(raw, cfg)
    metrics(ctx, raw, summary)
    claims(ctx, raw, summary)
    tables(ctx, raw, summary, cfg)
    plots(ctx, raw, cfg)


def _run(ctx: RunContext, cfg, tune_seed: int, test_seeds: list[int]) -> dict:
    """Every simulation, in order: (1) time to ε of every method in both speed settings,
    (2) Rennala-NSGD and synchronous NSGD against the number of workers, (3) time to ε
    against the dimension. Returns the raw results."""
    n, B = cfg["n_workers"], cfg["batch"]
    problems = _problems(cfg)
    # The three stages meet the same configurations again (the base dimension of the
    # dimension sweep, n = n_workers in the workers sweep): each is simulated once.
    cache = {}

    def run_cached(problem, method, lr, *rest):
        key = (problem.key, method, lr) + tuple(rest)
        if key not in cache:
            cache[key] = run_method(problem, method, lr, *rest)
        return cache[key]

    # 1. Time to ε, every method, both speed settings.
    time_to_eps: dict[str, dict[str, dict[str, float]]] = {}
    curves = {}
    jobs = [(p, m, s) for p in problems for s in ("linear", "random") for m in METHODS
            if _applicable(problems[p][0](0), m)]
    lrs = {}
    for pname, method, setting in ctx.track(jobs, "time to ε per method"):
        make, steps = problems[pname]
        # Step sizes are tuned once per problem and method, with τ_i = i, and kept for
        # the random speeds (a user does not retune when the cluster's speeds change).
        lr = lrs.get((pname, method))
        if lr is None:
            lr = lrs[(pname, method)] = tune_lr(make, method, "linear", n, B, steps, EPS[pname], cfg["lr_mult"],
                                                tune_seed, run=run_cached)
        runs = [run_cached(make(s), method, lr, setting, n, B, steps, EPS[pname], s) for s in test_seeds]
        t = _median_finite([r[0] for r in runs])
        reached = sum(math.isfinite(r[0]) for r in runs)
        time_to_eps.setdefault(pname, {}).setdefault(setting, {})[method] = t if reached == len(runs) else math.inf
        curves[(pname, setting, method)] = runs[0][1:]

    # 2. The time complexity's shape: time per step vs t(B), and time to ε vs n.
    problem = HeavyTailLinf(tune_seed, d=cfg["linf_d"])
    lr = lrs[("heavy-tail-linf", "rennala-nsgd-linf")]
    lr_sync = lrs[("heavy-tail-linf", "sync-nsgd-linf")]
    workers = []
    for nw in ctx.track(cfg["workers_sweep"], "time to ε vs number of workers"):
        taus = np.arange(1, nw + 1, dtype=float)
        t_r = _median_finite([run_cached(HeavyTailLinf(s, d=cfg["linf_d"]), "rennala-nsgd-linf", lr, "linear", nw, B,
                                         cfg["synth_steps"], EPS["heavy-tail-linf"], s)[0] for s in test_seeds])
        t_s = _median_finite([run_cached(HeavyTailLinf(s, d=cfg["linf_d"]), "sync-nsgd-linf", lr_sync, "linear", nw, B,
                                         cfg["synth_steps"], EPS["heavy-tail-linf"], s)[0] for s in test_seeds])
        _, step_times, _ = run_method(problem, "rennala-nsgd-linf", lr, "linear", nw, B, 60, -1.0, tune_seed)
        per_step = float(np.mean(np.diff(np.concatenate([[0.0], step_times]))[10:]))
        workers.append({"n": nw, "rennala": t_r, "sync": t_s, "per_step": per_step,
                        "t_B": equilibrium_time(taus, B)})

    # 3. Dimension dependence: time to ε vs d in each geometry, step sizes tuned per size.
    dim_curves = {}
    for pname, dims, make_d, methods in _dimension_sweeps(cfg):
        for method in methods:
            ts = []
            for d in ctx.track(dims, f"{pname}: {method} vs dimension"):
                make = lambda s, d=d: make_d(s, d)
                lr = tune_lr(make, method, "linear", n, B, cfg["synth_steps"], EPS[pname], cfg["lr_mult"], tune_seed,
                             run=run_cached)
                ts.append(_median_finite([run_cached(make(s), method, lr, "linear", n, B, cfg["synth_steps"],
                                                     EPS[pname], s)[0] for s in test_seeds]))
            dim_curves[(pname, method)] = ts
    return {"time_to_eps": time_to_eps, "curves": curves, "lrs": lrs, "workers": workers,
            "dimension": dim_curves}


def summarize(raw, cfg) -> dict:
    """The numbers the claims test: speed-ups over synchronous NSGD per (problem, setting,
    norm), the best Rennala-NSGD norm against the best baseline, the correlation of time to
    ε with t(B) across n, and the log-log slopes of time to ε against the dimension."""
    ratios = []
    for pname, by_setting in raw["time_to_eps"].items():
        for setting, d in by_setting.items():
            for geometry in ("l2", "linf", "spectral"):
                r, s = d.get(f"rennala-nsgd-{geometry}"), d.get(f"sync-nsgd-{geometry}")
                if r is not None and s is not None:
                    ratios.append((pname, setting, geometry, s / r if math.isfinite(r) else 0.0))
    # against every baseline, not only the synchronous one: per problem, the best
    # Rennala-NSGD norm against the best baseline, in each speed setting
    best = {}
    for pname, by_setting in raw["time_to_eps"].items():
        for setting, d in by_setting.items():
            other_m = min((m for m in d if not m.startswith("rennala-nsgd")), key=d.get)
            best[f"{pname}/{setting}"] = {"ours": min(v for m, v in d.items() if m.startswith("rennala-nsgd")),
                                          "baseline": d[other_m], "baseline_method": other_m}
    ok = [(w["rennala"], w["t_B"]) for w in raw["workers"] if math.isfinite(w["rennala"])]
    corr = float(np.corrcoef(np.log([r for r, _ in ok]), np.log([p for _, p in ok]))[0, 1]) if len(ok) >= 3 else 0.0
    slopes = {}
    for pname, dims, _, methods in _dimension_sweeps(cfg):
        for method in methods:
            ok = [(d, t) for d, t in zip(dims, raw["dimension"][(pname, method)]) if math.isfinite(t)]
            sizes = [_parameters(pname, d) for d, _ in ok]
            slopes[f"{pname}/{method}"] = (float(np.polyfit(np.log(sizes), np.log([t for _, t in ok]), 1)[0])
                                           if len(ok) >= 2 else math.nan)
    return {"speedups": ratios, "best": best, "corr": corr, "slopes": slopes}


def metrics(ctx: RunContext, raw, summary) -> None:
    ctx.metric("time_to_eps", {p: {s: {m: finite_or_minus_one(t) for m, t in d.items()}
                                   for s, d in v.items()} for p, v in raw["time_to_eps"].items()})
    ctx.metric("tuned_lr", {f"{p}/{m}": lr for (p, m), lr in raw["lrs"].items()})
    ctx.metric("speedup_vs_sync", {f"{p}/{s}/{g}": finite_or_minus_one(v) for p, s, g, v in summary["speedups"]})
    ctx.metric("best_vs_best_baseline", {k: {"rennala_nsgd": finite_or_minus_one(b["ours"]),
                                             "best_baseline": finite_or_minus_one(b["baseline"]),
                                             "best_baseline_method": b["baseline_method"]}
                                         for k, b in summary["best"].items()})
    workers = raw["workers"]
    ctx.metric("workers_sweep", {"n": [w["n"] for w in workers],
                                 "rennala": [finite_or_minus_one(w["rennala"]) for w in workers],
                                 "sync": [finite_or_minus_one(w["sync"]) for w in workers],
                                 "t_B": [w["t_B"] for w in workers]})
    ctx.metric("dimension_slopes", {k: finite_or_minus_one(v) for k, v in summary["slopes"].items()})
    ctx.metric("dimension_sweep", {f"{p}/{m}": [finite_or_minus_one(t) for t in ts]
                                   for (p, m), ts in raw["dimension"].items()})


def claims(ctx: RunContext, raw, summary) -> None:
    # 1. Rennala-NSGD beats synchronous NSGD in the same geometry under heterogeneity.
    speedups = [x[3] for x in summary["speedups"]]
    ctx.claim("Rennala-NSGD reaches ε faster than synchronous minibatch NSGD (same norm): median speed-up, "
              "all problems, settings, norms (-1: only Rennala-NSGD reached ε)", finite_or_minus_one(float(np.median(speedups))), 1.0,
              bool(np.median(speedups) > 1.0 and min(speedups) > 1.0))
    # 2. Against every baseline: the best Rennala-NSGD norm against the best baseline.
    for key, b in summary["best"].items():
        pname, setting = key.split("/")
        ctx.claim(f"{pname}, τ {setting}: the best Rennala-NSGD norm reaches ε no later than the best baseline "
                  f"({b['baseline_method']}); simulated time, -1 = not reached", finite_or_minus_one(b["ours"]),
                  finite_or_minus_one(b["baseline"]), bool(math.isfinite(b["ours"]) and b["ours"] <= b["baseline"]))
    # 3. The time complexity's shape across n.
    corr = summary["corr"]
    ctx.claim("Rennala-NSGD's time to ε follows t(B) = min_m (B+m)/Σ_{i≤m} 1/τ_i across n (correlation of logs)",
              corr, 0.0, bool(corr > 0.8))
    # 4. Dimension dependence in each geometry.
    slopes = summary["slopes"]
    for pname, geometry in (("heavy-tail-linf", "linf"), ("heavy-tail-spectral", "spectral")):
        ours = slopes[f"{pname}/rennala-nsgd-{geometry}"]
        eu = min(slopes[f"{pname}/rennala-nsgd-l2"], slopes[f"{pname}/rennala-sgd"])
        if math.isfinite(ours) and math.isfinite(eu):
            ctx.claim(f"{pname}: time to ε grows more slowly with the dimension in the {geometry} geometry than in "
                      "the Euclidean one (log-log slope, ours vs best Euclidean)", ours, eu, bool(ours < eu - 0.05))


def tables(ctx: RunContext, raw, summary, cfg) -> None:
    ctx.text("Time to ε in simulated time (median over the test seeds; 'not reached' when a seed misses ε "
             "within the step budget); -1 in results.json means not reached.")
    for pname, by_setting in raw["time_to_eps"].items():
        methods = list(next(iter(by_setting.values())))
        ctx.table(f"{pname}: time to ε = {EPS[pname]}", ["setting"] + methods,
                  [[s] + [_fmt(by_setting[s][m]) for m in methods] for s in by_setting])
    ctx.table(f"heavy-tail-linf, τ_i = i: time to ε vs the number of workers n (B = {cfg['batch']})",
              ["n", "Rennala-NSGD ℓ∞", "sync NSGD ℓ∞", "Rennala time/step", "t(B) predicted", "sync time/step τ_n"],
              [[w["n"], _fmt(w["rennala"]), _fmt(w["sync"]), w["per_step"], w["t_B"], float(w["n"])]
               for w in raw["workers"]])
    for pname, dims, _, methods in _dimension_sweeps(cfg):
        ctx.table(f"{pname}: time to ε vs dimension ({'d' if pname.endswith('linf') else 'n, W is n × n'} = {dims})",
                  ["problem", "method"] + [str(d) for d in dims],
                  [[pname, method] + [_fmt(t) for t in raw["dimension"][(pname, method)]] for method in methods])
    ctx.text("Slope of log(time to ε) against log(number of parameters): "
             + ", ".join(f"{k}: {v:.2f}" for k, v in summary["slopes"].items()))


def plots(ctx: RunContext, raw, cfg) -> None:
    plt = pyplot()
    import matplotlib.ticker

    # Loss vs wall-clock.
    curves = raw["curves"]
    fig, axes = plt.subplots(2, 3, figsize=(15, 8))
    for col, pname in enumerate(_problems(cfg)):
        for row, setting in enumerate(("linear", "random")):
            ax = axes[row, col]
            for k, method in enumerate(METHODS):
                if (pname, setting, method) not in curves:
                    continue
                times, curve = curves[(pname, setting, method)]
                if len(curve):
                    ax.plot(times, curve, label=method, lw=1.2, color=f"C{k}",
                            ls="-" if method.startswith("rennala-nsgd") else "--")
            ax.axhline(EPS[pname], color="k", lw=0.6)
            ax.set_yscale("log")
            ax.set_title(f"{pname}, τ {setting}")
            ax.set_xlabel("simulated wall-clock time")
            ax.set_ylabel("training loss" if pname == "digits-mlp" else "dual norm of ∇f")
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    ctx.figure(fig, "loss_vs_time", f"Criterion vs simulated wall-clock time, n = {cfg['n_workers']} workers, "
               f"B = {cfg['batch']}, first test seed.")
    plt.close(fig)

    dim_curves = raw["dimension"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, (pname, dims, _, methods) in zip(axes, _dimension_sweeps(cfg)):
        sizes = [_parameters(pname, d) for d in dims]
        for method in methods:
            ts = dim_curves[(pname, method)]
            ax.plot(sizes, [t if math.isfinite(t) else np.nan for t in ts], "o-", label=method)
        if any(math.isfinite(t) for method in methods for t in dim_curves[(pname, method)]):
            ax.set_xscale("log"), ax.set_yscale("log")
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())  # minor labels collide
        else:
            ax.text(0.5, 0.5, "ε not reached at any size", transform=ax.transAxes, ha="center")
        ax.set_xlabel("number of parameters"), ax.set_ylabel("time to ε"), ax.set_title(pname)
        ax.legend(fontsize=8)
    fig.tight_layout()
    ctx.figure(fig, "time_vs_dimension", "Time to ε against the dimension (τ_i = i, step sizes tuned per dimension).")
    plt.close(fig)
