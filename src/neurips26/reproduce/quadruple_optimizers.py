"""Reproduction: optimizers as controlled dynamical systems, the quadruple (M, g, Φ, η).

Side by side, same step budget, a learning rate tuned per optimizer and task on a log grid
(chosen on validation): SGD with momentum and AdamW (torch.optim), Lion and Shampoo (our
quadruples), and the three new instances (spectral steepest metric, contracting tracked
velocity, descent-aligned momentum) on

(a) geometric diagnostics: an ill-conditioned quadratic on a 20×10 matrix (condition 10³)
    and the Rosenbrock function; here every optimizer runs as a quadruple (SGD and AdamW are
    the quadruples checked equal to torch) so that the NAIM diagnostics can be logged;
(b) image classification: scikit-learn's bundled digits, a 64-128-10 MLP;
(c) language modelling: a two-layer character-level transformer on the docstrings of the
    Python standard library (bytes, ASCII).

Also measured: each classical quadruple's maximum relative deviation from its reference
(torch.optim SGD, Adam, AdamW, Muon; lion-pytorch when installed) over 200 float64 steps.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from neurips26.optim import (quadruple_adam, quadruple_adamw, quadruple_aligned, quadruple_lion, quadruple_muon,
                             quadruple_sgd, quadruple_shampoo, quadruple_spectral, quadruple_tracking)

from ._common import STDLIB_MODULES, finite_or_minus_one, pyplot, stdlib_text, tune_on_grid
from ._harness import RunContext

NEW = ("spectral", "tracking", "aligned")
# What a diverging run raises instead of returning NaN (Shampoo's and the spectral metric's
# decompositions of non-finite matrices): such a run counts as diverged.
DIVERGED = (FloatingPointError, torch.linalg.LinAlgError)
TRACKING_GAIN = 0.1


def make_optimizer(name: str, params, lr: float, quadruple_baselines: bool = False, diagnostics: bool = False):
    """The seven optimizers. ``quadruple_baselines`` takes SGD and AdamW as our quadruples
    (trajectories equal to torch's) so that their diagnostics exist."""
    d = dict(track_diagnostics=diagnostics)
    if name == "sgd-momentum":
        return (quadruple_sgd(params, lr=lr, momentum=0.9, **d) if quadruple_baselines
                else torch.optim.SGD(params, lr=lr, momentum=0.9))
    if name == "adamw":
        return (quadruple_adamw(params, lr=lr, weight_decay=0.0, **d) if quadruple_baselines
                else torch.optim.AdamW(params, lr=lr, weight_decay=0.0))
    if name == "lion":
        return quadruple_lion(params, lr=lr, **d)
    if name == "shampoo":
        return quadruple_shampoo(params, lr=lr, eps=1e-4, **d)
    if name == "spectral":
        return quadruple_spectral(params, lr=lr, **d)
    if name == "tracking":
        return quadruple_tracking(params, lr=lr, gain=TRACKING_GAIN, start="zero", **d)
    if name == "aligned":
        return quadruple_aligned(params, lr=lr, **d)
    raise KeyError(name)


OPTIMIZERS = ("sgd-momentum", "adamw", "lion", "shampoo", "spectral", "tracking", "aligned")
# Centre of each optimizer's log grid (decades around it are tried, and the grid extends
# itself when the best value lies on an edge).
LR_CENTRE = {"sgd-momentum": 1e-2, "adamw": 1e-3, "lion": 1e-4, "shampoo": 1e-2, "spectral": 1e-2,
             "tracking": 1e-3, "aligned": 1e-2}

SIZES = {
    True: dict(decades=(-2, -1, 0, 1), quad_steps=200, rosen_steps=600, digits_steps=250, lm_steps=120,
               lm_context=48, lm_width=48, refine=False, seeds=(0, 1, 2), dev_steps=200),
    False: dict(decades=(-2, -1, 0, 1, 2), quad_steps=500, rosen_steps=2000, digits_steps=800, lm_steps=500,
                lm_context=64, lm_width=64, refine=True, seeds=(0, 1, 2, 3, 4), dev_steps=200),
}


# --- (a) geometric problems -----------------------------------------------------------------

class Quadratic:
    """f(X) = ½ tr((X − X*)ᵀ H (X − X*)), H with eigenvalues log-spaced in [1, 10³]."""

    name, f_star = "quadratic", 0.0

    def __init__(self, seed: int, rows: int = 20, cols: int = 10, cond: float = 1e3):
        generator = torch.Generator().manual_seed(1000 + seed)
        Q, _ = torch.linalg.qr(torch.randn(rows, rows, generator=generator, dtype=torch.float64))
        self.H = Q @ torch.diag(torch.logspace(0, math.log10(cond), rows, dtype=torch.float64)) @ Q.T
        self.X_star = torch.randn(rows, cols, generator=generator, dtype=torch.float64)
        self.x0 = torch.zeros(rows, cols, dtype=torch.float64)

    def __call__(self, X):
        E = X - self.X_star
        return 0.5 * (E * (self.H @ E)).sum()


class Rosenbrock:
    """f(x, y) = (1 − x)² + 100 (y − x²)², from (−1.2, 1); minimum 0 at (1, 1)."""

    name, f_star = "rosenbrock", 0.0

    def __init__(self, seed: int):
        self.x0 = torch.tensor([-1.2, 1.0], dtype=torch.float64)

    def __call__(self, x):
        return (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2


def run_geometric(problem, name: str, lr: float, steps: int) -> dict:
    X = torch.nn.Parameter(problem.x0.clone())
    opt = make_optimizer(name, [X], lr, quadruple_baselines=True, diagnostics=True)

    def closure():
        opt.zero_grad()
        loss = problem(X)
        loss.backward()
        return loss

    gap, dist, lyap, drift = [], [], [], []
    for _ in range(steps):
        try:
            loss = float(opt.step(closure).detach())
        except DIVERGED:
            break
        d = opt.diagnostics(f_star=problem.f_star)
        if not math.isfinite(loss) or not all(math.isfinite(v) for v in (d["distance"], d["lyapunov"])):
            break
        gap.append(loss - problem.f_star)
        dist.append(d["distance"])
        lyap.append(d["lyapunov"])
        drift.append(d["drift"] if d["drift"] is not None else 0.0)
    final = gap[-1] if len(gap) == steps else math.inf
    return {"lr": lr, "gap": gap, "distance": dist, "lyapunov": lyap, "drift": drift, "final": final}


def _stepped(opt) -> bool:
    try:
        opt.step()
        return True
    except DIVERGED:
        return False


# --- (b) digits -----------------------------------------------------------------------------

def digits_data():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(0)
    perm = rng.permutation(len(y))
    X = torch.tensor(X[perm] / 16.0, dtype=torch.float32)
    y = torch.tensor(y[perm], dtype=torch.long)
    return (X[:1200], y[:1200]), (X[1200:1500], y[1200:1500]), (X[1500:], y[1500:])


def run_digits(data, name: str, lr: float, steps: int, seed: int) -> dict:
    (Xtr, ytr), (Xva, yva), (Xte, yte) = data
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = make_optimizer(name, model.parameters(), lr)
    generator = torch.Generator().manual_seed(seed)
    losses = []
    for _ in range(steps):
        idx = torch.randint(0, len(ytr), (64,), generator=generator)
        loss = torch.nn.functional.cross_entropy(model(Xtr[idx]), ytr[idx])
        opt.zero_grad()
        loss.backward()
        losses.append(float(loss.detach()))
        if not _stepped(opt) or not math.isfinite(losses[-1]):
            return {"lr": lr, "losses": losses, "val": 0.0, "test": 0.0, "train_loss": math.inf}
    with torch.no_grad():
        acc = lambda X, y: float((model(X).argmax(1) == y).float().mean())  # noqa: E731
        train_loss = float(torch.nn.functional.cross_entropy(model(Xtr), ytr))
        return {"lr": lr, "losses": losses, "val": acc(Xva, yva), "test": acc(Xte, yte), "train_loss": train_loss}


# --- (c) a character-level transformer on the standard library's docstrings ----------------

class TinyTransformer(torch.nn.Module):
    def __init__(self, vocab: int, width: int, context: int, layers: int = 2, heads: int = 4):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width)
        self.position = torch.nn.Parameter(torch.randn(context, width) * 0.02)
        layer = torch.nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0, batch_first=True,
                                                 norm_first=True)
        self.blocks = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = torch.nn.Linear(width, vocab)
        self.register_buffer("mask", torch.nn.Transformer.generate_square_subsequent_mask(context), persistent=False)

    def forward(self, ids):
        t = ids.shape[1]
        h = self.embed(ids) + self.position[:t]
        return self.head(self.blocks(h, mask=self.mask[:t, :t], is_causal=True))


def lm_data(context: int):
    data = torch.tensor(list(stdlib_text()), dtype=torch.long)
    n = len(data)
    return data[: int(0.9 * n)], data[int(0.9 * n): int(0.95 * n)], data[int(0.95 * n):]


def _lm_loss(model, data, context, starts):
    ids = torch.stack([data[s: s + context + 1] for s in starts.tolist()])
    logits = model(ids[:, :-1])
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))


def run_lm(data, name: str, lr: float, steps: int, seed: int, context: int, width: int) -> dict:
    train, val, test = data
    torch.manual_seed(seed)
    model = TinyTransformer(128, width, context)
    opt = make_optimizer(name, model.parameters(), lr)
    generator = torch.Generator().manual_seed(seed)
    losses = []
    for _ in range(steps):
        starts = torch.randint(0, len(train) - context - 1, (32,), generator=generator)
        loss = _lm_loss(model, train, context, starts)
        opt.zero_grad()
        loss.backward()
        losses.append(float(loss.detach()))
        if not _stepped(opt) or not math.isfinite(losses[-1]):
            return {"lr": lr, "losses": losses, "val": math.inf, "test": math.inf}

    @torch.no_grad()
    def perplexity(split):
        starts = torch.arange(0, len(split) - context - 1, context)[:256]
        loss = float(_lm_loss(model, split, context, starts))
        return math.exp(loss) if loss < 700 else math.inf  # a diverged run: no finite perplexity

    return {"lr": lr, "losses": losses, "val": perplexity(val), "test": perplexity(test)}


# --- tuning ----------------------------------------------------------------------------------

def tune(run_at, name: str, decades, score, refine: bool):
    """Try lr = centre · 10^k over ``decades``; extend past an edge when the best lies on it
    (:func:`~neurips26.reproduce._common.tune_on_grid`, up to three decades); with
    ``refine``, also try the half decades beside the best. ``score`` is minimized. Returns
    the best run and the sorted learning rates tried."""
    centre = LR_CENTRE[name]

    def at(k):
        return run_at(centre * 10.0**k)

    best, tried = tune_on_grid(at, [float(k) for k in decades], lambda k, direction: k + direction, score=score)
    if refine:
        for k in (best - 0.5, best + 0.5):
            if k not in tried:
                tried[k] = at(k)
        best = min(tried, key=lambda k: score(tried[k]))
    return tried[best], sorted(centre * 10.0**k for k in tried)


def steps_to(curve, target) -> int:
    """First step at which the running mean over 10 steps is at or below ``target``; -1 if never."""
    c = np.asarray(curve, dtype=float)
    if len(c) < 10:
        return -1
    smooth = np.convolve(c, np.ones(10) / 10, mode="valid")
    hit = np.nonzero(smooth <= target)[0]
    return int(hit[0]) + 10 if len(hit) else -1


# --- deviation from the reference implementations -------------------------------------------

def max_rel_dev_vs_references(steps: int = 200) -> dict:
    """Each classical quadruple against its reference on a seeded float64 problem: the
    largest relative deviation of the parameters over the trajectory, across settings."""

    def trajectory(make_opt, matrices_only=False):
        generator = torch.Generator().manual_seed(0)
        shapes = [(7, 5), (3, 7)] if matrices_only else [(7, 5), (7,), (3, 7), (3,)]
        ps = [torch.nn.Parameter(torch.randn(s, generator=generator, dtype=torch.float64) * 0.5) for s in shapes]
        X = torch.randn(64, 5, generator=generator, dtype=torch.float64)
        Y = torch.randn(64, 3, generator=generator, dtype=torch.float64)
        opt = make_opt(ps)
        out = []
        for k in range(steps):
            idx = slice((k * 8) % 64, (k * 8) % 64 + 8)
            h = X[idx]
            for i, w in enumerate(p for p in ps if p.ndim == 2):
                h = h @ w.T
                if not matrices_only:
                    h = h + ps[2 * i + 1]
                h = torch.tanh(h) if i == 0 else h
            opt.zero_grad()
            torch.nn.functional.mse_loss(h, Y[idx]).backward()
            opt.step()
            out.append(torch.cat([p.detach().reshape(-1) for p in ps]))
        return out

    def dev(ours, ref, **kw):
        a, b = trajectory(ours, **kw), trajectory(ref, **kw)
        return max(float((x - y).norm() / y.norm()) for x, y in zip(a, b))

    settings = {
        "sgd": [(dict(lr=0.05), quadruple_sgd, torch.optim.SGD), (dict(lr=0.02, momentum=0.9, weight_decay=1e-3), quadruple_sgd, torch.optim.SGD),
                (dict(lr=0.02, momentum=0.8, nesterov=True), quadruple_sgd, torch.optim.SGD)],
        "adam": [(dict(lr=1e-2), quadruple_adam, torch.optim.Adam), (dict(lr=1e-2, amsgrad=True, weight_decay=0.05), quadruple_adam, torch.optim.Adam)],
        "adamw": [(dict(lr=1e-2), quadruple_adamw, torch.optim.AdamW), (dict(lr=5e-3, amsgrad=True, weight_decay=0.1), quadruple_adamw, torch.optim.AdamW)],
    }
    out = {name: max(dev(lambda p: ours(p, **kw), lambda p: ref(p, **kw)) for kw, ours, ref in cases)
           for name, cases in settings.items()}
    out["muon"] = max(dev(lambda p: quadruple_muon(p, **kw), lambda p: torch.optim.Muon(p, **kw), matrices_only=True)
                      for kw in (dict(lr=0.02), dict(lr=0.01, nesterov=False, adjust_lr_fn="match_rms_adamw")))
    try:
        from lion_pytorch import Lion
    except ImportError:  # an optional reference (the dev extra installs it)
        Lion = None
    if Lion is not None:
        out["lion"] = max(dev(lambda p: quadruple_lion(p, **kw), lambda p: Lion(p, **kw))
                          for kw in (dict(lr=1e-3), dict(lr=3e-4, betas=(0.95, 0.98), weight_decay=0.1)))
    return out


# --- the experiment ----------------------------------------------------------------------------

def _log_linear_rate(values) -> tuple[float, float]:
    """(ρ, R²) of the fit log V_t ≈ a + t log ρ: V's per-step geometric rate, and how linear
    log V is. (1, 0) when there is nothing to fit."""
    v = np.asarray(values, dtype=float)
    if len(v) < 3 or not np.all(v > 0):
        return 1.0, 0.0
    t, y = np.arange(len(v)), np.log(v)
    slope, intercept = np.polyfit(t, y, 1)
    resid = y - (slope * t + intercept)
    total = float(((y - y.mean()) ** 2).sum())
    return float(math.exp(slope)), (1.0 - float((resid**2).sum()) / total) if total > 0 else 0.0


def run(ctx: RunContext) -> None:
    cfg = SIZES[ctx.quick]
    seeds = [ctx.seed + s for s in cfg["seeds"]]
    ctx.config.update(optimizers=list(OPTIMIZERS), lr_centre=LR_CENTRE, lr_decades=list(cfg["decades"]),
                      tracking_gain=TRACKING_GAIN, seeds=seeds,
                      steps={k: cfg[k] for k in ("quad_steps", "rosen_steps", "digits_steps", "lm_steps")},
                      lm_modules=list(STDLIB_MODULES))
    raw = _run(ctx, cfg, seeds)
    summary = summarize(raw)
    for name, value in summary.items():  # the metrics, in results.json's order
        ctx.metric(name, value)
    claims(ctx, raw, summary)
    tables(ctx, raw, summary, cfg)
    plots(ctx, raw)


SEEDED = ("quadratic", "digits", "lm")  # the tasks run again at the tuned learning rate on every other seed


def _runner(task: str, cfg: dict, seed: int):
    """``(run_at(lr), score)`` of one task on one seed; ``score`` is minimized (the final gap for the
    geometric problems, which are deterministic; validation accuracy or perplexity otherwise)."""
    if task == "quadratic":
        problem = Quadratic(seed)
        return (lambda name, lr: run_geometric(problem, name, lr, cfg["quad_steps"])), (lambda r: r["final"])
    if task == "rosenbrock":
        problem = Rosenbrock(seed)
        return (lambda name, lr: run_geometric(problem, name, lr, cfg["rosen_steps"])), (lambda r: r["final"])
    if task == "digits":
        digits = digits_data()
        return (lambda name, lr: run_digits(digits, name, lr, cfg["digits_steps"], seed)), (lambda r: -r["val"])
    if task == "lm":
        lm = lm_data(cfg["lm_context"])
        return (lambda name, lr: run_lm(lm, name, lr, cfg["lm_steps"], seed, cfg["lm_context"], cfg["lm_width"]),
                lambda r: r["val"])
    raise KeyError(task)


def tune_task(t: dict) -> dict:
    """One task of ``ctx.map``: tune optimizer ``t["name"]`` on ``t["task"]`` with seed ``t["seed"]``;
    returns the best run with ``grid``, the learning rates tried."""
    run_at, score = _runner(t["task"], t["cfg"], t["seed"])
    best, grid = tune(lambda lr: run_at(t["name"], lr), t["name"], t["cfg"]["decades"], score, t["cfg"]["refine"])
    return dict(best, grid=grid)


def rerun_task(t: dict) -> dict:
    """One task of ``ctx.map``: optimizer ``t["name"]`` on ``t["task"]`` with seed ``t["seed"]`` at the
    learning rate tuned on the first seed."""
    run_at, _ = _runner(t["task"], t["cfg"], t["seed"])
    return run_at(t["name"], t["lr"])


def _run(ctx: RunContext, cfg, seeds: list[int]) -> dict:
    """Every run: the classical quadruples against their references, then each optimizer tuned on the
    first seed of (a) the quadratic and Rosenbrock, (b) digits, (c) the language model, then run again
    at its tuned learning rate on every other seed (the quadratic: another random instance; digits and
    the language model: another initialization and batch order; Rosenbrock has no randomness).
    Returns the deviations, the tuned runs per task and optimizer (``seed_runs``: one run per seed),
    and the grids tried."""
    devs = max_rel_dev_vs_references(cfg["dev_steps"])
    tcfg = {k: (list(v) if isinstance(v, tuple) else v) for k, v in cfg.items() if k != "seeds"}
    tasks = [dict(task=task, name=name, seed=seeds[0], cfg=tcfg) for task in ("quadratic", "rosenbrock", "digits", "lm")
             for name in OPTIMIZERS]
    tuned = ctx.map(tune_task, tasks, description=f"tuning each optimizer on every task (seed {seeds[0]})")
    reruns = [dict(task=t["task"], name=t["name"], seed=s, cfg=tcfg, lr=r["lr"])
              for t, r in zip(tasks, tuned) if t["task"] in SEEDED for s in seeds[1:]]
    again = iter(ctx.map(rerun_task, reruns, description=f"tuned runs on seeds {seeds[1:]}"))
    results: dict[str, dict[str, dict]] = {}
    lr_grids: dict[str, dict[str, list]] = {}
    for t, best in zip(tasks, tuned):
        grid = best.pop("grid")
        runs = [best] + ([next(again) for _ in seeds[1:]] if t["task"] in SEEDED else [])
        if t["task"] in ("digits", "lm"):
            best = dict(best, test_seeds=[r["test"] for r in runs], test_mean=float(np.mean([r["test"] for r in runs])),
                        test_std=float(np.std([r["test"] for r in runs])))
        results.setdefault(t["task"], {})[t["name"]] = dict(best, seed_runs=runs)
        lr_grids.setdefault(t["task"], {})[t["name"]] = grid
    return {"devs": devs, "results": results, "lr_grids": lr_grids, "seeds": seeds}


def _theory(r) -> dict:
    """The NAIM diagnostics of one tuned run on the quadratic: the fast state's worst
    contraction ratio, the Lyapunov function's per-step rate and how often it decreased up
    to the drift term."""
    dist, drift, lyap = r["distance"], r["drift"], r["lyapunov"]
    ratios = [dist[t] / (dist[t - 1] + drift[t]) for t in range(1, len(dist)) if dist[t - 1] + drift[t] > 1e-12]
    paid = [lyap[t + 1] - lyap[t] <= r["lr"] * drift[t + 1] ** 2 + 1e-12 * abs(lyap[t]) for t in range(len(lyap) - 1)]
    rate, r2 = _log_linear_rate(lyap[len(lyap) // 2:])
    return {"max_contraction_ratio": max(ratios) if ratios else 0.0, "lyapunov_rate": rate, "rate_r2": r2,
            "lyapunov_decrease_fraction": float(np.mean(paid)) if paid else 0.0,
            "lyapunov_final_over_initial": lyap[-1] / lyap[0] if lyap and lyap[0] > 0 else -1.0,
            "final_distance": dist[-1] if dist else -1.0}


def summarize(raw) -> dict:
    """The metrics: the deviations from the references, the tuned learning rates and the
    grids tried, steps to a target (10⁻⁶ of the start for (a); AdamW's final training loss
    for (b), (c)), on the first seed, the per-task figures (digits and the language model: mean,
    std and each seed), and the theory's predictions on the quadratic (first seed, and per seed)."""
    results = raw["results"]
    targets = {"quadratic": 1e-6 * results["quadratic"]["adamw"]["gap"][0], "rosenbrock": 1e-6}
    for task in ("digits", "lm"):
        curve = results[task]["adamw"]["losses"]
        targets[task] = float(np.mean(curve[-max(10, len(curve) // 10):]))
    steps_to_target = {}
    for task, d in results.items():
        key = "gap" if task in ("quadratic", "rosenbrock") else "losses"
        steps_to_target[task] = {n: steps_to(r[key], targets[task]) for n, r in d.items()}
    per_task = {
        "quadratic": {n: {"final_gap": finite_or_minus_one(r["final"])} for n, r in results["quadratic"].items()},
        "rosenbrock": {n: {"final_gap": finite_or_minus_one(r["final"])} for n, r in results["rosenbrock"].items()},
        "digits": {n: {"test_accuracy": r["test_mean"], "test_accuracy_std": r["test_std"],
                       "test_accuracy_per_seed": r["test_seeds"], "val_accuracy": r["val"],
                       "train_loss": finite_or_minus_one(r["train_loss"])} for n, r in results["digits"].items()},
        "lm": {n: {"test_perplexity": finite_or_minus_one(r["test_mean"]), "test_perplexity_std": r["test_std"]
                   if math.isfinite(r["test_std"]) else -1.0,
                   "test_perplexity_per_seed": [finite_or_minus_one(v) for v in r["test_seeds"]],
                   "val_perplexity": finite_or_minus_one(r["val"])}
               for n, r in results["lm"].items()},
    }
    return {"max_rel_dev_vs_torch": raw["devs"],
            "tuned_lr": {t: {n: r["lr"] for n, r in d.items()} for t, d in results.items()},
            "lr_grid": raw["lr_grids"], "steps_to_target": steps_to_target, "targets": targets, "per_task": per_task,
            "theory_quadratic": {n: _theory(r) for n, r in results["quadratic"].items()},
            "theory_quadratic_per_seed": {n: {k: [_theory(x)[k] for x in r["seed_runs"]] for k in _theory(r)}
                                          for n, r in results["quadratic"].items()},
            "seeds": raw["seeds"]}


_ORDER = {"does not hold": 0, "inconclusive": 1, "not tested": 1, "holds": 2}
DECREASE_SHARE = 0.99  # "decreases at every step", decided as: on >= 99 % of steps (a share cannot exceed 1)
R2_MIN = 0.9           # "converges linearly": the log-linear fit explains >= 90 % of log V's variance
ACC_MARGIN = 0.01      # "reaches AdamW's test accuracy": no worse than 1 point below it
PPL_MARGIN = 0.02      # "reaches AdamW's test perplexity": no worse than 2 % above it


def bound_all(ctx: RunContext, claim: str, parts: list[tuple[str, list, float, str]]) -> str:
    """A claim that is a conjunction of thresholds, each part ``(label, values per seed, threshold, better)``
    decided as :meth:`RunContext.bound` decides it; the claim takes the verdict of its weakest part (one
    part that does not hold sinks it; else one inconclusive part leaves it inconclusive), and records that
    part's interval."""
    from ._harness import paired_interval

    def verdict(values, threshold, better):
        _, lo, hi = paired_interval(values, [threshold] * len(values), better=better)
        return "holds" if lo > 0 else "does not hold" if hi < 0 else "inconclusive"

    label, values, threshold, better = min(parts, key=lambda p: _ORDER[verdict(*p[1:])])
    suffix = f"; decided by its {label} part" if len(parts) > 1 else ""
    return ctx.bound(claim + suffix, values, threshold, better=better)


def claims(ctx: RunContext, raw, summary) -> None:
    """Every claim decided over the seeds: the quadratic's NAIM predictions by a one-sample Student-t
    interval of each seed's figure against the theory's bound; the new instances against AdamW on
    digits and the language model by a paired comparison over seeds (same seed: same initialization
    and batches)."""
    results, theory = raw["results"], summary["theory_quadratic_per_seed"]
    seeds = raw["seeds"]
    n = len(seeds)
    adamw = theory["adamw"]
    mean = lambda v: float(np.mean(v))  # noqa: E731
    tr = theory["tracking"]
    ctx.bound(f"tracking instance: the fast state contracts at the proven rate, max δ_t/(δ_(t−1)+Δ_t) ≤ 1 − α = "
              f"{1 - TRACKING_GAIN:g} (each seed's worst step on its own quadratic, over {n} seeds; baseline column: "
              f"the bound; AdamW's mean ratio {mean(adamw['max_contraction_ratio']):.3g})",
              tr["max_contraction_ratio"], (1 - TRACKING_GAIN) * (1 + 1e-9), better="lower")
    for name in NEW:
        t = theory[name]
        ctx.bound(f"{name} instance: the Lyapunov function decreases at every step up to the drift term ηΔ² "
                  f"(decided as: on ≥ {DECREASE_SHARE:.0%} of steps, the share per seed over {n} seeds; baseline "
                  f"column: {DECREASE_SHARE}; AdamW's mean share {mean(adamw['lyapunov_decrease_fraction']):.3f})",
                  t["lyapunov_decrease_fraction"], DECREASE_SHARE, better="higher")
        bound_all(ctx, f"{name} instance: V converges linearly on the quadratic (per-step rate ρ of a log-linear fit "
                       f"over the second half, per seed over {n} seeds, mean R² = {mean(t['rate_r2']):.3f}; holds when "
                       f"ρ < 1 and R² ≥ {R2_MIN}; AdamW's mean ρ {mean(adamw['lyapunov_rate']):.4f})",
                  [("ρ < 1", t["lyapunov_rate"], 1.0, "lower"), (f"R² ≥ {R2_MIN}", t["rate_r2"], R2_MIN, "higher")])
    digits, lm = results["digits"], results["lm"]
    best_digits = max(NEW, key=lambda m: digits[m]["test_mean"])
    ctx.compare(f"digits: the best new instance ({best_digits}, best mean over seeds) reaches AdamW's test accuracy "
                f"(no worse than {ACC_MARGIN * 100:g} point below it; paired over {n} seeds)",
                digits[best_digits]["test_seeds"], digits["adamw"]["test_seeds"], better="higher", margin=-ACC_MARGIN)
    best_lm = min(NEW, key=lambda m: lm[m]["test_mean"])
    ours_lm, base_lm = lm[best_lm]["test_seeds"], lm["adamw"]["test_seeds"]
    claim = (f"language model: the best new instance ({best_lm}, best mean over seeds) reaches AdamW's test perplexity "
             f"(no worse than {PPL_MARGIN:.0%} above AdamW's mean; paired over {n} seeds")
    if all(map(math.isfinite, ours_lm + base_lm)):
        ctx.compare(claim + ")", ours_lm, base_lm, better="lower", margin=-PPL_MARGIN * mean(base_lm))
    else:  # a diverged run has no perplexity: compare the test losses (log perplexity, a diverged run at the cap)
        cap = 700.0
        logs = lambda v: [math.log(x) if math.isfinite(x) else cap for x in v]  # noqa: E731
        ctx.compare(claim + "; on log perplexity, a diverged run counted at 700)", logs(ours_lm), logs(base_lm),
                    better="lower", margin=-math.log1p(PPL_MARGIN))


def tables(ctx: RunContext, raw, summary, cfg) -> None:
    references = {"sgd": "SGD", "adam": "Adam", "adamw": "AdamW", "muon": "Muon"}
    ctx.table(f"Classical quadruples against their references ({cfg['dev_steps']} float64 steps, max relative deviation)",
              ["optimizer", "reference", "max rel. deviation"],
              [(k, "lion-pytorch" if k == "lion" else f"torch.optim.{references[k]}", v) for k, v in raw["devs"].items()])
    results, steps_to_target = raw["results"], summary["steps_to_target"]
    fmt_steps = lambda s: "not reached" if s < 0 else s  # noqa: E731
    seeds = raw["seeds"]

    def pm(values, fmt=".4g") -> str:
        v = np.asarray(values, float)
        if not np.all(np.isfinite(v)):
            return f"{np.mean(v):{fmt}} ({int(np.sum(~np.isfinite(v)))} diverged)"
        return f"{v.mean():{fmt}} ± {v.std(ddof=1) if len(v) > 1 else 0.0:.2g}"

    ctx.table(f"Results (learning rate tuned per optimizer and task on seed {seeds[0]}; quadratic, Rosenbrock and "
              f"steps: seed {seeds[0]}; digits and LM: mean ± std over seeds {seeds} at the tuned rate)",
              ["optimizer", "quadratic f−f*", "steps", "Rosenbrock f−f*", "steps", "digits test acc.", "steps",
               "LM test ppl.", "steps"],
              [(n, results["quadratic"][n]["final"], fmt_steps(steps_to_target["quadratic"][n]),
                results["rosenbrock"][n]["final"], fmt_steps(steps_to_target["rosenbrock"][n]),
                pm(results["digits"][n]["test_seeds"]), fmt_steps(steps_to_target["digits"][n]),
                pm(results["lm"][n]["test_seeds"]), fmt_steps(steps_to_target["lm"][n])) for n in OPTIMIZERS])
    ctx.table(f"NAIM diagnostics on the quadratic (tuned runs; mean ± std over seeds {seeds}, one random "
              "quadratic each)",
              ["optimizer", "max δ_t/(δ_{t−1}+Δ_t)", "steps with V_{t+1} − V_t ≤ ηΔ²", "V_T / V_0",
               "rate ρ of V (2nd half)", "R²", "final δ"],
              [(n, pm(t["max_contraction_ratio"]), pm(t["lyapunov_decrease_fraction"]),
                pm(t["lyapunov_final_over_initial"]), pm(t["lyapunov_rate"], ".5g"), pm(t["rate_r2"]),
                pm(t["final_distance"])) for n, t in summary["theory_quadratic_per_seed"].items()])


def plots(ctx: RunContext, raw) -> None:
    plt = pyplot()
    results = raw["results"]
    colors = dict(zip(OPTIMIZERS, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    style = lambda n: dict(color=colors[n], lw=2.0 if n in NEW else 1.2, ls="-" if n in NEW else "--")  # noqa: E731
    fig, axes = plt.subplots(1, 4, figsize=(19, 4))
    for ax, (key, title) in zip(axes, (("gap", "quadratic: f − f*"), ("distance", "quadratic: δ = ‖u − u*‖"),
                                       ("lyapunov", "quadratic: Lyapunov V"), ("rosenbrock", "Rosenbrock: f − f*"))):
        source = results["rosenbrock"] if key == "rosenbrock" else results["quadratic"]
        for n, r in source.items():
            y = np.asarray(r["gap" if key == "rosenbrock" else key], dtype=float)
            if not np.any(y > 0):
                continue  # δ ≡ 0: no fast state (Shampoo), nothing to draw on a log axis
            y[y <= 0] = np.nan
            ax.semilogy(np.arange(1, len(y) + 1), y, label=n, **style(n))
        ax.set_ylim(bottom=max(ax.get_ylim()[0], 1e-16))  # crossings of the minimum dip to round-off
        ax.set_title(title)
        ax.set_xlabel("step")
    axes[0].legend(fontsize=8)
    ctx.figure(fig, "geometric_diagnostics", "Geometric diagnostics at the tuned learning rates (first seed's quadratic): "
               "the gap, the velocity's "
               "distance to the NAIM target manifold (Shampoo has no fast state: δ ≡ 0, not drawn), and the "
               "Lyapunov function (solid: the new instances).")
    plt.close(fig)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for ax, task, title in ((axes[0], "digits", "digits MLP: training loss"), (axes[1], "lm", "char transformer: training loss")):
        for n, r in results[task].items():
            for i, run in enumerate(r["seed_runs"]):  # every seed; the first opaque and labelled
                c = np.asarray(run["losses"])
                w = max(1, len(c) // 25)
                ax.plot(np.convolve(c, np.ones(w) / w, mode="valid"), label=n if i == 0 else None,
                        **(style(n) | ({} if i == 0 else dict(alpha=0.35, lw=0.8))))
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.set_yscale("log")
    axes[0].legend(fontsize=8)
    ctx.figure(fig, "training_curves", "Training loss at the tuned learning rates (running mean), every seed: the "
               "first seed opaque, the others pale.")
    plt.close(fig)
