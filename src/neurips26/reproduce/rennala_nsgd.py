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
criterion when no step size reaches ε), then run on the test seeds (quick: 3, full: 5;
``ctx.seed``, ``ctx.seed + 1``, ...). Every tuning and every simulation is a task of
``ctx.map``; the claims are decided over the test seeds with their uncertainty (paired
t intervals; a one-sample t interval against the paper's threshold).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ..distributed import AsynchronousServer, RennalaServer, SynchronousServer, equilibrium_time, simulate
from ..optim import Blocks, L2, Linf, Spectral
from ._common import finite_or_minus_one, pyplot, tune_on_grid
from ._harness import RunContext

SIZES = {
    True: dict(n_workers=8, batch=8, linf_d=64, spec_n=16, seeds=3, mlp_steps=400, synth_steps=800, dims=[16, 64, 256],
               mats=[8, 16, 32], lr_mult=(0.25, 1.0, 4.0), workers_sweep=[1, 2, 4, 8, 16]),
    False: dict(n_workers=16, batch=16, linf_d=64, spec_n=16, seeds=5, mlp_steps=1500, synth_steps=4000, dims=[16, 64, 256, 1024],
                mats=[8, 16, 32, 64], lr_mult=(0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0), workers_sweep=[1, 2, 4, 8, 16, 32]),
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


def _fmt(t):
    return f"{t:.4g}" if math.isfinite(t) else "not reached"


EPS = {"digits-mlp": 0.35, "heavy-tail-linf": 0.1, "heavy-tail-spectral": 0.3}
CURVE_POINTS = 150  # points kept of each criterion curve (for the plot)


def make_problem(pname: str, size: int, seed: int):
    """The problem ``pname`` at ``size`` (d for the vector problem, n for the n × n matrix one;
    ignored for the MLP) and ``seed``."""
    if pname == "digits-mlp":
        return DigitsMLP(seed)
    if pname == "heavy-tail-linf":
        return HeavyTailLinf(seed, d=size)
    if pname == "heavy-tail-spectral":
        return HeavyTailSpectral(seed, n=size)
    raise ValueError(f"unknown problem {pname!r}; expected one of {sorted(EPS)}")


def _problems(cfg) -> dict:
    """Per problem: (its size, its step budget)."""
    return {"digits-mlp": (0, cfg["mlp_steps"]), "heavy-tail-linf": (cfg["linf_d"], cfg["synth_steps"]),
            "heavy-tail-spectral": (cfg["spec_n"], cfg["synth_steps"])}


def _dimension_sweeps(cfg) -> list:
    """(problem, sizes, methods) of the dimension sweep."""
    return [("heavy-tail-linf", cfg["dims"], ["rennala-sgd", "rennala-nsgd-l2", "rennala-nsgd-linf"]),
            ("heavy-tail-spectral", cfg["mats"], ["rennala-sgd", "rennala-nsgd-l2", "rennala-nsgd-spectral"])]


def _parameters(pname: str, d: int) -> int:
    """The number of parameters at size d: d for the vector problem, d² for the matrix one."""
    return d if pname.endswith("linf") else d * d


# --- tasks (run through ctx.map: picklable records, module-level functions) ----------------

@dataclass(frozen=True)
class Tune:
    """Tune one method's step size on one problem and size (τ_i = i, the tuning seed)."""
    problem: str
    size: int
    method: str
    n_workers: int
    batch: int
    steps: int
    eps: float
    mults: tuple
    seed: int


@dataclass(frozen=True)
class Sim:
    """One simulation: a method at a step size on one problem, size, speed setting and seed."""
    problem: str
    size: int
    method: str
    lr: float
    setting: str
    n_workers: int
    batch: int
    steps: int
    eps: float
    seed: int


def tune_task(task: Tune) -> dict:
    lr = tune_lr(lambda s: make_problem(task.problem, task.size, s), task.method, "linear", task.n_workers, task.batch,
                 task.steps, task.eps, task.mults, task.seed)
    return {"lr": lr}


def sim_task(task: Sim) -> dict:
    """Time to ε (None: not reached), the time the run ended (None: diverged) and the criterion
    curve (at most CURVE_POINTS points)."""
    t, times, curve = run_method(make_problem(task.problem, task.size, task.seed), task.method, task.lr, task.setting,
                                 task.n_workers, task.batch, task.steps, task.eps, task.seed)
    k = min(len(times), len(curve))
    keep = np.unique(np.linspace(0, k - 1, min(k, CURVE_POINTS)).round().astype(int)) if k else np.array([], dtype=int)
    return {"t": t if math.isfinite(t) else None, "end": float(times[-1]) if len(times) else None,
            "times": [float(times[i]) for i in keep], "curve": [float(curve[i]) for i in keep]}


# --- the run -------------------------------------------------------------------------------

def run(ctx: RunContext) -> None:
    cfg = SIZES[ctx.quick]
    tune_seed = 100 + ctx.seed
    test_seeds = [ctx.seed + s for s in range(cfg["seeds"])]
    ctx.config.update(n_workers=cfg["n_workers"], batch_size=cfg["batch"], eps=EPS, tune_seed=tune_seed,
                      test_seeds=test_seeds, lr_multipliers=list(cfg["lr_mult"]), student_t_nu=NU,
                      settings=["linear", "random"])
    raw = _run(ctx, cfg, tune_seed, test_seeds)
    summary = summarize(raw, cfg)
    metrics(ctx, raw, summary)
    claims(ctx, raw, summary)
    tables(ctx, raw, summary, cfg)
    plots(ctx, raw, summary, cfg)


def _run(ctx: RunContext, cfg, tune_seed: int, test_seeds: list[int]) -> dict:
    """Every simulation, as tasks: (1) time to ε of every method in both speed settings,
    (2) Rennala-NSGD and synchronous NSGD against the number of workers, (3) time to ε
    against the dimension; each on every test seed. Step sizes are tuned first (one task per
    problem, size and method, on the tuning seed). Returns the raw results, per seed."""
    n, B = cfg["n_workers"], cfg["batch"]
    problems = _problems(cfg)
    methods = {p: [m for m in METHODS if _applicable(make_problem(p, size, 0), m)] for p, (size, _) in problems.items()}

    # Step sizes: tuned once per problem, size and method, with τ_i = i, and kept for the
    # random speeds (a user does not retune when the cluster's speeds change). Identical
    # records (the base size of the dimension sweep) run once.
    def tune(p, size, m, steps):
        return Tune(p, size, m, n, B, steps, EPS[p], tuple(cfg["lr_mult"]), tune_seed)

    tunes = {(p, size, m): tune(p, size, m, steps) for p, (size, steps) in problems.items() for m in methods[p]}
    for p, dims, ms in _dimension_sweeps(cfg):
        tunes.update({(p, d, m): tune(p, d, m, cfg["synth_steps"]) for d in dims for m in ms})
    lr_of = {k: r["lr"] for k, r in zip(tunes, ctx.map(tune_task, list(tunes.values()), description="step-size tuning"))}

    # The simulations on the test seeds; the stages meet the same configurations again (the
    # base size of the dimension sweep, n = n_workers in the workers sweep): each runs once.
    sims = {}
    for s in test_seeds:
        for p, (size, steps) in problems.items():
            for setting in ("linear", "random"):
                for m in methods[p]:
                    sims[("eps", p, setting, m, s)] = Sim(p, size, m, lr_of[(p, size, m)], setting, n, B, steps, EPS[p], s)
        for nw in cfg["workers_sweep"]:
            for m in ("rennala-nsgd-linf", "sync-nsgd-linf"):
                sims[("workers", nw, m, s)] = Sim("heavy-tail-linf", cfg["linf_d"], m,
                                                  lr_of[("heavy-tail-linf", cfg["linf_d"], m)], "linear", nw, B,
                                                  cfg["synth_steps"], EPS["heavy-tail-linf"], s)
        for p, dims, ms in _dimension_sweeps(cfg):
            for m in ms:
                for d in dims:
                    sims[("dim", p, m, d, s)] = Sim(p, d, m, lr_of[(p, d, m)], "linear", n, B, cfg["synth_steps"],
                                                    EPS[p], s)
    out = dict(zip(sims, ctx.map(sim_task, list(sims.values()), description="simulations on the test seeds")))

    # The Rennala server's time per step against t(B) (deterministic τ_i = i: one short run each).
    per_step = {}
    lr = lr_of[("heavy-tail-linf", cfg["linf_d"], "rennala-nsgd-linf")]
    for nw in cfg["workers_sweep"]:
        _, step_times, _ = run_method(HeavyTailLinf(tune_seed, d=cfg["linf_d"]), "rennala-nsgd-linf", lr, "linear", nw,
                                      B, 60, -1.0, tune_seed)
        per_step[nw] = float(np.mean(np.diff(np.concatenate([[0.0], step_times]))[10:]))

    runs = {p: {setting: {m: [out[("eps", p, setting, m, s)] for s in test_seeds] for m in methods[p]}
                for setting in ("linear", "random")} for p in problems}
    workers = [{"n": nw, "rennala": [out[("workers", nw, "rennala-nsgd-linf", s)] for s in test_seeds],
                "sync": [out[("workers", nw, "sync-nsgd-linf", s)] for s in test_seeds], "per_step": per_step[nw],
                "t_B": equilibrium_time(np.arange(1, nw + 1, dtype=float), B)} for nw in cfg["workers_sweep"]]
    dimension = {(p, m): [[out[("dim", p, m, d, s)] for s in test_seeds] for d in dims]
                 for p, dims, ms in _dimension_sweeps(cfg) for m in ms}
    lrs = {(p, m): lr_of[(p, size, m)] for p, (size, _) in problems.items() for m in methods[p]}
    return {"runs": runs, "lrs": lrs, "workers": workers, "dimension": dimension, "seeds": test_seeds}


def _time(r) -> float:
    return r["t"] if r["t"] is not None else math.inf


def _censored(runs: list[dict]) -> list[float]:
    """Per seed, the time to ε, or where ε was not reached the time the run ended (a lower
    bound on its time to ε); a diverged run (no end) counts at the latest end among ``runs``."""
    ends = [r["end"] for r in runs if r["end"] is not None]
    latest = max(ends) if ends else 0.0
    return [r["t"] if r["t"] is not None else (r["end"] if r["end"] is not None else latest) for r in runs]


def _mean_finite(values) -> float:
    values = [v for v in values if math.isfinite(v)]
    return float(np.mean(values)) if values else math.inf


def _rank(runs: list[dict]):
    """How good a method is over the seeds: fewest misses, then the least mean time."""
    times = [_time(r) for r in runs]
    return (sum(not math.isfinite(t) for t in times), _mean_finite(times))


def _slope(pname, dims, times) -> float:
    ok = [(d, t) for d, t in zip(dims, times) if math.isfinite(t)]
    if len(ok) < 2:
        return math.nan
    return float(np.polyfit(np.log([_parameters(pname, d) for d, _ in ok]), np.log([t for _, t in ok]), 1)[0])


def summarize(raw, cfg) -> dict:
    """The numbers the claims test, per seed: the speed-ups over synchronous NSGD per (problem,
    setting, norm) and their median, the best Rennala-NSGD norm and the best baseline per
    (problem, setting), the correlation of time to ε with t(B) across n, and the log-log slopes
    of time to ε against the dimension."""
    seeds = raw["seeds"]
    k = len(seeds)
    # 1. speed-up over synchronous NSGD in the same norm: sync / Rennala per seed; 0 where only
    # synchronous NSGD reached ε, a lower bound (its end time / Rennala's) where only Rennala did,
    # left out where neither did
    speedups, per_seed = [], [[] for _ in seeds]
    for pname, by_setting in raw["runs"].items():
        for setting, d in by_setting.items():
            for geometry in ("l2", "linf", "spectral"):
                r, s = d.get(f"rennala-nsgd-{geometry}"), d.get(f"sync-nsgd-{geometry}")
                if r is None or s is None:
                    continue
                row = []
                for i, (ri, si) in enumerate(zip(r, s)):
                    if ri["t"] is None and si["t"] is None:
                        row.append(math.nan)
                        continue
                    ratio = 0.0 if ri["t"] is None else _censored([si, ri])[0] / ri["t"]
                    row.append(ratio)
                    per_seed[i].append(ratio)
                speedups.append((pname, setting, geometry, row))
    median_speedup = [float(np.median(v)) if v else math.nan for v in per_seed]
    # 2. per (problem, setting): the best Rennala-NSGD norm against the best baseline, each
    # chosen over the seeds (fewest misses, then least mean time), compared seed by seed
    best = {}
    for pname, by_setting in raw["runs"].items():
        for setting, d in by_setting.items():
            ours_m = min((m for m in d if m.startswith("rennala-nsgd")), key=lambda m: _rank(d[m]))
            base_m = min((m for m in d if not m.startswith("rennala-nsgd")), key=lambda m: _rank(d[m]))
            both = _censored(d[ours_m] + d[base_m])
            best[f"{pname}/{setting}"] = {
                "ours_method": ours_m, "baseline_method": base_m, "ours": both[:k], "baseline": both[k:],
                "ours_reached": [r["t"] is not None for r in d[ours_m]],
                "baseline_reached": [r["t"] is not None for r in d[base_m]]}
    # 3. per seed: correlation of log time to ε with log t(B) across n
    corr = []
    for i in range(k):
        ok = [(_time(w["rennala"][i]), w["t_B"]) for w in raw["workers"] if math.isfinite(_time(w["rennala"][i]))]
        corr.append(float(np.corrcoef(np.log([r for r, _ in ok]), np.log([p for _, p in ok]))[0, 1])
                    if len(ok) >= 3 else 0.0)
    # 4. per seed: log-log slope of time to ε against the number of parameters
    slopes = {}
    for pname, dims, methods in _dimension_sweeps(cfg):
        for method in methods:
            per_dim = raw["dimension"][(pname, method)]
            slopes[f"{pname}/{method}"] = [_slope(pname, dims, [_time(per_dim[j][i]) for j in range(len(dims))])
                                           for i in range(k)]
    return {"speedups": speedups, "median_speedup": median_speedup, "best": best, "corr": corr, "slopes": slopes}


def _stats(values) -> tuple[float, float]:
    """Mean and sample standard deviation over seeds (NaN-free finite values only)."""
    v = [x for x in values if math.isfinite(x)]
    if not v:
        return math.inf, math.nan
    return float(np.mean(v)), float(np.std(v, ddof=1)) if len(v) > 1 else 0.0


def _fmt_runs(runs: list[dict]) -> str:
    times = [_time(r) for r in runs]
    reached = sum(math.isfinite(t) for t in times)
    if not reached:
        return "not reached"
    mean, sd = _stats(times)
    return f"{mean:.4g} ± {sd:.2g}" + ("" if reached == len(times) else f" ({reached} of {len(times)} reached)")


def metrics(ctx: RunContext, raw, summary) -> None:
    def per_seed(runs):
        return [finite_or_minus_one(_time(r)) for r in runs]

    def mean_if_all(runs):  # the mean over seeds, -1 unless every seed reached ε
        times = [_time(r) for r in runs]
        return finite_or_minus_one(float(np.mean(times)) if all(map(math.isfinite, times)) else math.inf)

    ctx.metric("time_to_eps", {p: {s: {m: mean_if_all(rs) for m, rs in d.items()} for s, d in v.items()}
                               for p, v in raw["runs"].items()})
    ctx.metric("time_to_eps_seeds", {p: {s: {m: per_seed(rs) for m, rs in d.items()} for s, d in v.items()}
                                     for p, v in raw["runs"].items()})
    ctx.metric("tuned_lr", {f"{p}/{m}": lr for (p, m), lr in raw["lrs"].items()})
    ctx.metric("speedup_vs_sync", {f"{p}/{s}/{g}": [finite_or_minus_one(v) for v in row]
                                   for p, s, g, row in summary["speedups"]})
    ctx.metric("median_speedup_seeds", [finite_or_minus_one(v) for v in summary["median_speedup"]])
    ctx.metric("best_vs_best_baseline", {k: {"rennala_nsgd_method": b["ours_method"],
                                             "rennala_nsgd": float(np.mean(b["ours"])), "rennala_nsgd_seeds": b["ours"],
                                             "best_baseline_method": b["baseline_method"],
                                             "best_baseline": float(np.mean(b["baseline"])),
                                             "best_baseline_seeds": b["baseline"]}
                                         for k, b in summary["best"].items()})
    workers = raw["workers"]
    ctx.metric("workers_sweep", {"n": [w["n"] for w in workers],
                                 "rennala": [finite_or_minus_one(_mean_finite([_time(r) for r in w["rennala"]]))
                                             for w in workers],
                                 "sync": [finite_or_minus_one(_mean_finite([_time(r) for r in w["sync"]]))
                                          for w in workers],
                                 "rennala_seeds": [per_seed(w["rennala"]) for w in workers],
                                 "sync_seeds": [per_seed(w["sync"]) for w in workers],
                                 "per_step": [w["per_step"] for w in workers],
                                 "t_B": [w["t_B"] for w in workers]})
    ctx.metric("t_B_correlation_seeds", summary["corr"])
    ctx.metric("dimension_slopes", {k: finite_or_minus_one(_stats(v)[0]) for k, v in summary["slopes"].items()})
    ctx.metric("dimension_slopes_seeds", {k: [finite_or_minus_one(x) for x in v] for k, v in summary["slopes"].items()})
    ctx.metric("dimension_sweep", {f"{p}/{m}": [finite_or_minus_one(_mean_finite([_time(r) for r in rs])) for rs in per_dim]
                                   for (p, m), per_dim in raw["dimension"].items()})


def claims(ctx: RunContext, raw, summary) -> None:
    k = len(raw["seeds"])
    # 1. Rennala-NSGD beats synchronous NSGD in the same geometry under heterogeneity: per seed,
    # the median speed-up over every (problem, setting, norm), against 1.
    med = summary["median_speedup"]
    ctx.bound(f"Rennala-NSGD reaches ε faster than synchronous minibatch NSGD (same norm): median speed-up over all "
              f"problems, settings and norms, above 1 over {k} seeds (0: only synchronous NSGD reached ε; a "
              f"lower bound where only Rennala-NSGD did)", [m if math.isfinite(m) else 0.0 for m in med], 1.0,
              better="higher", capped=[not math.isfinite(m) for m in med])
    # 2. Against every baseline: the best Rennala-NSGD norm against the best baseline, seed by seed.
    for key, b in summary["best"].items():
        pname, setting = key.split("/")
        ctx.compare(f"{pname}, τ {setting}: the best Rennala-NSGD norm reaches ε no later than the best baseline "
                    f"(simulated time, paired over {k} seeds; {b['ours_method']} vs {b['baseline_method']}; a seed "
                    f"where one misses ε counts at the time its budget ran out, both missing: capped)",
                    b["ours"], b["baseline"], better="lower",
                    capped=[not a and not c for a, c in zip(b["ours_reached"], b["baseline_reached"])])
    # 3. The time complexity's shape across n: per seed, the correlation of logs, against 0.8.
    ctx.bound(f"Rennala-NSGD's time to ε follows t(B) = min_m (B+m)/Σ_{{i≤m}} 1/τ_i across n (correlation of logs "
              f"per seed, above 0.8 over {k} seeds)", summary["corr"], 0.8, better="higher")
    # 4. Dimension dependence in each geometry: per-seed slopes against the best Euclidean method's.
    slopes = summary["slopes"]
    for pname, geometry in (("heavy-tail-linf", "linf"), ("heavy-tail-spectral", "spectral")):
        ours = slopes[f"{pname}/rennala-nsgd-{geometry}"]
        eu_m = min(("rennala-nsgd-l2", "rennala-sgd"), key=lambda m: _stats(slopes[f"{pname}/{m}"])[0])
        eu = slopes[f"{pname}/{eu_m}"]
        capped = [not (math.isfinite(a) and math.isfinite(b)) for a, b in zip(ours, eu)]
        ctx.compare(f"{pname}: time to ε grows more slowly with the dimension in the {geometry} geometry than in "
                    f"the Euclidean one (log-log slope, ours vs best Euclidean ({eu_m}), lower by more than 0.05, "
                    f"paired over {k} seeds)", [a if math.isfinite(a) else 0.0 for a in ours],
                    [b if math.isfinite(b) else 0.0 for b in eu], better="lower", margin=0.05, capped=capped)


def tables(ctx: RunContext, raw, summary, cfg) -> None:
    k = len(raw["seeds"])
    ctx.text(f"Time to ε in simulated time: mean ± standard deviation over {k} test seeds ({raw['seeds']}); "
             "'not reached' when no seed reached ε within the step budget, '(j of k reached)' the mean over the "
             "seeds that did. -1 in results.json means not reached (per-seed values under *_seeds).")
    for pname, by_setting in raw["runs"].items():
        methods = list(next(iter(by_setting.values())))
        ctx.table(f"{pname}: time to ε = {EPS[pname]}", ["setting"] + methods,
                  [[s] + [_fmt_runs(by_setting[s][m]) for m in methods] for s in by_setting])
    ctx.table(f"heavy-tail-linf, τ_i = i: time to ε vs the number of workers n (B = {cfg['batch']}; mean ± sd "
              f"over {k} seeds)",
              ["n", "Rennala-NSGD ℓ∞", "sync NSGD ℓ∞", "Rennala time/step", "t(B) predicted", "sync time/step τ_n"],
              [[w["n"], _fmt_runs(w["rennala"]), _fmt_runs(w["sync"]), w["per_step"], w["t_B"], float(w["n"])]
               for w in raw["workers"]])
    for pname, dims, methods in _dimension_sweeps(cfg):
        ctx.table(f"{pname}: time to ε vs dimension ({'d' if pname.endswith('linf') else 'n, W is n × n'} = {dims})",
                  ["problem", "method"] + [str(d) for d in dims],
                  [[pname, method] + [_fmt_runs(rs) for rs in raw["dimension"][(pname, method)]] for method in methods])
    rows = []
    for key, v in summary["slopes"].items():
        mean, sd = _stats(v)
        rows.append([key, f"{mean:.2f} ± {sd:.2f}", ", ".join(f"{x:.2f}" for x in v)])
    ctx.table("Slope of log(time to ε) against log(number of parameters), per seed", ["problem/method", "mean ± sd",
                                                                                      "per seed"], rows)


def plots(ctx: RunContext, raw, summary, cfg) -> None:
    plt = pyplot()
    import matplotlib.ticker

    # Criterion vs wall-clock, every seed (thin lines, one colour per method).
    fig, axes = plt.subplots(2, 3, figsize=(15, 8))
    for col, pname in enumerate(_problems(cfg)):
        for row, setting in enumerate(("linear", "random")):
            ax = axes[row, col]
            for k, method in enumerate(METHODS):
                rs = raw["runs"][pname][setting].get(method)
                if rs is None:
                    continue
                for i, r in enumerate(rs):
                    if r["curve"]:
                        ax.plot(r["times"], r["curve"], label=method if i == 0 else None, lw=1.0, alpha=0.6,
                                color=f"C{k}", ls="-" if method.startswith("rennala-nsgd") else "--")
            ax.axhline(EPS[pname], color="k", lw=0.6)
            ax.set_yscale("log")
            ax.set_title(f"{pname}, τ {setting}")
            ax.set_xlabel("simulated wall-clock time")
            ax.set_ylabel("training loss" if pname == "digits-mlp" else "dual norm of ∇f")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.tight_layout(rect=(0, 0, 0.86, 1))
    fig.legend(handles, labels, loc="center right", fontsize=8)
    ctx.figure(fig, "loss_vs_time", f"Criterion vs simulated wall-clock time, n = {cfg['n_workers']} workers, "
               f"B = {cfg['batch']}, every test seed (one line each); horizontal line: ε.")
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, (pname, dims, methods) in zip(axes, _dimension_sweeps(cfg)):
        sizes = [_parameters(pname, d) for d in dims]
        drawn = False
        for k, method in enumerate(methods):
            per_dim = raw["dimension"][(pname, method)]
            means = [_mean_finite([_time(r) for r in rs]) for rs in per_dim]
            ax.plot(sizes, [t if math.isfinite(t) else np.nan for t in means], "-", color=f"C{k}", label=method)
            for x, rs in zip(sizes, per_dim):
                ts = [_time(r) for r in rs if math.isfinite(_time(r))]
                ax.plot([x] * len(ts), ts, "o", color=f"C{k}", ms=3, alpha=0.6)
                drawn |= bool(ts)
        if drawn:
            ax.set_xscale("log"), ax.set_yscale("log")
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())  # minor labels collide
        else:
            ax.text(0.5, 0.5, "ε not reached at any size", transform=ax.transAxes, ha="center")
        ax.set_xlabel("number of parameters"), ax.set_ylabel("time to ε"), ax.set_title(pname)
        ax.legend(fontsize=8)
    fig.tight_layout()
    ctx.figure(fig, "time_vs_dimension", "Time to ε against the dimension (τ_i = i, step sizes tuned per dimension): "
               "mean over the test seeds (line) and each seed (points).")
    plt.close(fig)
