"""Reproduction: AdaSGDA and AdaSGDA-VR (orthogonalized, parameter-free single-loop minimax)
against SGDA, Adam-GDA, TiAda, NeAda-AdaGrad, AdaGO-GDA and Muon-GDA.

(a) the nonconvex–strongly-concave LogBilinearGame with closed-form ∇Φ, deterministic and with
Gaussian gradient noise: initial-stepsize robustness and measured rates; (b) distributionally
robust learning on scikit-learn's digits (Sinha et al.'s penalty form); (c) at full size only, a
WGAN-GP on a 2-D mixture of 8 Gaussians (outside the NC-SC theory: modes covered and MMD², no
claim). Every method gets the same number of gradient evaluations (a VR step costs two, a NeAda
inner step one).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ..optim.minimax import GDA, AdaSGDA, AdaSGDAVR, LogBilinearGame, NeAda, TiAda
from ._harness import RunContext

METHODS = ("AdaSGDA", "AdaSGDA-VR", "SGDA", "Adam-GDA", "TiAda", "NeAda-AdaGrad", "AdaGO-GDA", "Muon-GDA")
OURS = ("AdaSGDA", "AdaSGDA-VR")
CLOSURE_METHODS = ("AdaSGDA-VR", "NeAda-AdaGrad")  # they evaluate the gradient themselves

ETAS = [float(10.0 ** e) for e in np.arange(-3, 1.01, 0.5)]  # 10^-3 .. 10^1 in half decades
SIZES = {
    True: dict(m=20, n=10, calls=1000, seeds=3, det_seeds=1, etas=ETAS, noise=1.0, dro_calls=300,
               dro_etas=[1e-3, 1e-2, 1e-1, 1.0, 10.0], dro_seeds=3, grid=[1e-2, 1e-1, 1.0, 10.0], grid_calls=1000),  # (c) skipped
    False: dict(m=20, n=10, calls=20000, seeds=5, det_seeds=5, etas=ETAS, noise=1.0, dro_calls=2000,
                dro_etas=ETAS, dro_seeds=3, grid=[float(10.0 ** e) for e in range(-3, 3)], grid_calls=5000,
                gan=dict(calls=5000, etas=[1e-3, 1e-2, 1e-1, 1.0, 10.0], seeds=3)),
}
GAMMA = 5.0  # DRO penalty (Sinha et al.): meant to exceed the input curvature of the MLP's loss
DET_FLOOR = 1e-8  # deterministic game: a final ‖∇Φ‖ below this counts as converged (ties in the decade count)
# the test-time ℓ2 PGD radius (inputs in [0, 1], ‖x‖ ≈ 3 to 5). The penalty γ = 5 trains against perturbations
# of norm ≈ 0.1 to 0.4 (the inner maximizer's ‖Δ*‖ on the training set); at radius 1 every trained model falls to
# chance or below (an undefended one to 0 %), and the figure only rewarded gradient masking and undertrained
# models. Radius 0.5 is where the undefended model has fallen (to ≈ 20 %) and the DRO-trained ones have not.
ATTACK_EPS = 0.5
ATTACK_EPS_WIDE = 1.0  # reported beside it (the earlier radius)


def make_optimizer(method: str, xs: list, ys: list, eta: float):
    """The pair optimizer of ``method`` with initial stepsize ``eta`` for both players."""
    if method == "AdaSGDA":
        return AdaSGDA(xs, ys, lr_x=eta, lr_y=eta)
    if method == "AdaSGDA-VR":
        return AdaSGDAVR(xs, ys, lr_x=eta, lr_y=eta)
    if method == "SGDA":
        return GDA(torch.optim.SGD(xs, lr=eta), torch.optim.SGD(ys, lr=eta, maximize=True))
    if method == "Adam-GDA":
        return GDA(torch.optim.Adam(xs, lr=eta), torch.optim.Adam(ys, lr=eta, maximize=True))
    if method == "TiAda":
        return TiAda(xs, ys, lr_x=eta, lr_y=eta)
    if method == "NeAda-AdaGrad":
        return NeAda(xs, ys, lr_x=eta, lr_y=eta, inner="gradient", max_inner=20)
    if method == "AdaGO-GDA":
        from pytorch_optimizer import AdaGO

        def adago(params):
            groups = [dict(params=[p for p in params if p.ndim >= 2], use_muon=True)]
            vec = [p for p in params if p.ndim < 2]
            groups += [dict(params=vec, use_muon=False, lr=eta)] if vec else []
            return AdaGO(groups, lr=eta, momentum=0.0)
        return GDA(adago(xs), adago(ys), ascent="negate")
    if method == "Muon-GDA":
        xopt = [torch.optim.Muon([p for p in xs if p.ndim == 2], lr=eta, weight_decay=0.0)]
        vec = [p for p in xs if p.ndim != 2]
        xopt += [torch.optim.SGD(vec, lr=eta)] if vec else []
        return GDA(xopt, torch.optim.SGD(ys, lr=eta, maximize=True))
    raise ValueError(f"unknown method {method!r}")


@dataclass(frozen=True)
class GameRun:
    """One run on the LogBilinearGame: ``method`` at initial stepsizes (``eta``, ``eta_y``; None:
    the same) for ``calls`` gradient evaluations; ``seed`` draws B, X₀ and the noise."""

    method: str
    eta: float
    seed: int
    noise: float
    calls: int
    m: int
    n: int
    eta_y: float | None = None


def _checkpoints(calls: int) -> list[int]:
    return sorted({int(round(c)) for c in np.geomspace(10, calls, 25)})


def _finite_or_none(v: float):
    return v if math.isfinite(v) else None


def run_game(task: GameRun) -> dict:
    """‖∇Φ(X)‖ (and its running minimum), ‖Y − y*(X)‖ and the stepsize ratio at log-spaced
    gradient-call counts (a task of ``RunContext.map``). A run whose iterate overflows is cut
    there and marked ``diverged`` (its remaining values are None)."""
    prob = LogBilinearGame(task.m, task.n, c=1.0, mu=1.0, seed=task.seed)
    X0, Y0 = prob.initial_point(seed=task.seed + 10_000)
    X, Y = X0.clone(), Y0.clone()
    eta_y = task.eta if task.eta_y is None else task.eta_y
    opt = make_optimizer(task.method, [X], [Y], task.eta)
    if eta_y != task.eta:
        _set_max_lr(opt, eta_y)
    gen = torch.Generator().manual_seed(task.seed + 20_000)
    calls = 0
    xi = None

    def set_grads(fresh: bool):
        nonlocal calls, xi
        if task.noise > 0 and (fresh or xi is None):
            xi = (torch.randn(X.shape, generator=gen, dtype=X.dtype), torch.randn(Y.shape, generator=gen, dtype=Y.dtype))
        gx, gy = prob.gradients(X, Y)
        if task.noise > 0:
            gx, gy = gx + task.noise * xi[0], gy + task.noise * xi[1]
        X.grad, Y.grad = gx, gy
        calls += 1
        return 0.0

    marks = _checkpoints(task.calls)
    curve, best_curve, track, ratio = [], [], [], []
    best = math.inf
    k = 0
    diverged = False
    with np.errstate(all="ignore"):
        while calls < task.calls:
            try:
                if task.method == "AdaSGDA-VR":
                    xi = None  # one minibatch (noise draw) per step, used at both points
                    opt.step(lambda: set_grads(False))
                elif task.method == "NeAda-AdaGrad":
                    opt.step(lambda: set_grads(True))
                else:
                    set_grads(True)
                    opt.step()
            except FloatingPointError:
                diverged = True
                break
            g = float(prob.grad_phi(X).norm())
            if not math.isfinite(g):
                diverged = True
                break
            best = min(best, g)
            while k < len(marks) and calls >= marks[k]:
                curve.append(g)
                best_curve.append(best)
                track.append(float((Y - prob.y_star(X)).norm()))
                ratio.append(_finite_or_none(opt.diagnostics()["ratio"]))
                k += 1
    pad = lambda v: v + [None] * (len(marks) - len(v))  # noqa: E731
    return dict(marks=marks, grad_phi=pad(curve), min_grad_phi=pad(best_curve), tracking=pad(track),
                ratio=pad(ratio), final=curve[-1] if not diverged and curve else None,
                best=best if math.isfinite(best) else None, diverged=diverged)


def _set_max_lr(opt, lr: float) -> None:
    """Give the max player its own initial stepsize (the sensitivity map)."""
    if isinstance(opt, GDA):
        for o in opt.max_optimizers:
            for g in o.param_groups:
                g["lr"] = lr
    else:
        opt.param_groups[1]["lr"] = lr


# --- (b) distributionally robust learning on digits -------------------------------------------

@dataclass(frozen=True)
class DroRun:
    """Sinha et al.'s penalty DRO on scikit-learn's digits: x = a 64-64-10 MLP, y = the perturbation
    Δ (N × 64) of the training inputs, f = mean CE(x_i + Δ_i) − (γ/2) mean ‖Δ_i‖²; full batch,
    ``calls`` gradient evaluations."""

    method: str
    eta: float
    seed: int
    calls: int
    gamma: float = GAMMA


def _digits(seed: int):
    from sklearn.datasets import load_digits

    data = load_digits()
    X = torch.tensor(data.data / 16.0, dtype=torch.float32)
    y = torch.tensor(data.target, dtype=torch.long)
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
    tr, te = perm[:1200], perm[1200:]
    return X[tr], y[tr], X[te], y[te]


def _attack(model, X, y, eps: float = ATTACK_EPS, steps: int = 20):
    """ℓ2 PGD on the cross-entropy within a ball of radius ``eps`` per test input (step eps/4):
    (accuracy, mean cross-entropy) on the attacked inputs."""
    delta = torch.zeros_like(X, requires_grad=True)
    step = eps / 4
    for _ in range(steps):
        loss = torch.nn.functional.cross_entropy(model(X + delta), y, reduction="sum")
        (g,) = torch.autograd.grad(loss, delta)
        with torch.no_grad():
            delta += step * g / g.norm(dim=1, keepdim=True).clamp_min(1e-12)
            delta *= (eps / delta.norm(dim=1, keepdim=True).clamp_min(eps))  # back into the ball
    with torch.no_grad():
        logits = model(X + delta)
        return float((logits.argmax(1) == y).float().mean()), float(torch.nn.functional.cross_entropy(logits, y))


def run_dro(task: DroRun) -> dict:
    """Train with ``method``; robust test accuracy and robust test loss (cross-entropy) under ℓ2 PGD
    of radius ``ATTACK_EPS``, clean test accuracy (a task of ``RunContext.map``)."""
    Xtr, ytr, Xte, yte = _digits(task.seed)
    torch.manual_seed(task.seed)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 10))
    delta = torch.zeros_like(Xtr, requires_grad=True)
    opt = make_optimizer(task.method, list(model.parameters()), [delta], task.eta)
    calls = 0

    def closure():
        nonlocal calls
        for p in list(model.parameters()) + [delta]:
            p.grad = None
        loss = torch.nn.functional.cross_entropy(model(Xtr + delta), ytr) \
            - 0.5 * task.gamma * (delta ** 2).sum(1).mean()
        loss.backward()
        calls += 1
        return float(loss.detach())

    diverged = False
    while calls < task.calls:
        try:
            if task.method in CLOSURE_METHODS:
                opt.step(closure)
            else:
                closure()
                opt.step()
        except FloatingPointError:
            diverged = True
            break
        if not all(bool(torch.isfinite(p).all()) for p in model.parameters()):
            diverged = True
            break
    if diverged:
        return dict(robust_acc=None, robust_loss=None, clean_acc=None, robust_acc_wide=None, train_delta_norm=None,
                    diverged=True)
    robust_acc, robust_loss = _attack(model, Xte, yte)
    wide_acc, _ = _attack(model, Xte, yte, eps=ATTACK_EPS_WIDE)
    with torch.no_grad():
        clean = float((model(Xte).argmax(1) == yte).float().mean())
        # the training perturbation's size: the transport budget the DRO actually trained against
        delta_norm = float(delta.detach().norm(dim=1).mean())
    return dict(robust_acc=robust_acc, robust_loss=robust_loss, clean_acc=clean, robust_acc_wide=wide_acc,
                train_delta_norm=delta_norm, diverged=False)


# --- (c) a WGAN-GP on a 2-D mixture of 8 Gaussians (outside the NC-SC theory) --------------------

GAN_MODES = 8
GAN_RADIUS = 2.0
GAN_SD = 0.05
GAN_GP = 1.0  # gradient-penalty weight λ
GAN_NEAR = 3 * GAN_SD  # a generated point counts for a mode within 3 sd of its centre


@dataclass(frozen=True)
class GanRun:
    """WGAN-GP on 8 Gaussians (radius 2, sd 0.05) with x = a 2-64-64-2 ReLU generator and y = a
    2-64-64-1 ReLU critic, f = E D(real) − E D(G(z)) − λ E(‖∇D(x̂)‖ − 1)², ``batch`` real and
    ``batch`` fake points per minibatch, ``calls`` gradient evaluations."""

    method: str
    eta: float
    seed: int
    calls: int
    batch: int = 256


def gan_centres() -> torch.Tensor:
    ang = torch.arange(GAN_MODES, dtype=torch.float32) * (2 * math.pi / GAN_MODES)
    return GAN_RADIUS * torch.stack([ang.cos(), ang.sin()], 1)


def gan_real(n: int, gen: torch.Generator) -> torch.Tensor:
    k = torch.randint(GAN_MODES, (n,), generator=gen)
    return gan_centres()[k] + GAN_SD * torch.randn(n, 2, generator=gen)


def gan_quality(fake: torch.Tensor, real: torch.Tensor) -> dict:
    """Modes covered (a mode counts when ≥ 1/(4·8) of the fake points lie within 3 sd of its
    centre), the share of such high-quality points, and the squared MMD between ``fake`` and
    ``real`` with a Gaussian kernel of bandwidth 0.5 (biased V-statistic)."""
    d = torch.cdist(fake, gan_centres())
    near, k = d.min(1)
    good = near <= GAN_NEAR
    counts = torch.bincount(k[good], minlength=GAN_MODES)
    modes = int((counts >= len(fake) / (4 * GAN_MODES)).sum())

    def kern(a, b):
        return torch.exp(-torch.cdist(a, b) ** 2 / (2 * 0.5 ** 2)).mean()

    mmd2 = float(kern(fake, fake) + kern(real, real) - 2 * kern(fake, real))
    return dict(modes=modes, high_quality=float(good.float().mean()), mmd2=max(mmd2, 0.0))


def run_gan(task: GanRun) -> dict:
    """Train the WGAN-GP with ``method``; modes covered and MMD² of 2000 generated points against
    2000 fresh real ones (a task of ``RunContext.map``). Diverged: non-finite parameters or outputs."""
    torch.manual_seed(task.seed)
    mlp = lambda out: torch.nn.Sequential(torch.nn.Linear(2, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64),  # noqa: E731
                                          torch.nn.ReLU(), torch.nn.Linear(64, out))
    G, D = mlp(2), mlp(1)
    opt = make_optimizer(task.method, list(G.parameters()), list(D.parameters()), task.eta)
    gen = torch.Generator().manual_seed(task.seed + 30_000)
    batch = {}
    calls = 0

    def draw():
        batch.update(real=gan_real(task.batch, gen), z=torch.randn(task.batch, 2, generator=gen),
                     t=torch.rand(task.batch, 1, generator=gen))

    def closure():
        nonlocal calls
        for p in list(G.parameters()) + list(D.parameters()):
            p.grad = None
        fake = G(batch["z"])
        mix = (batch["t"] * batch["real"] + (1 - batch["t"]) * fake).requires_grad_(True)
        (gd,) = torch.autograd.grad(D(mix).sum(), mix, create_graph=True)
        f = D(batch["real"]).mean() - D(fake).mean() - GAN_GP * ((gd.norm(dim=1) - 1) ** 2).mean()
        f.backward()
        calls += 1
        return float(f.detach())

    def fresh_closure():
        draw()
        return closure()

    diverged = False
    while calls < task.calls:
        try:
            if task.method == "AdaSGDA-VR":
                draw()  # one minibatch, used at the previous and at the current iterate
                opt.step(closure)
            elif task.method == "NeAda-AdaGrad":
                opt.step(fresh_closure)
            else:
                fresh_closure()
                opt.step()
        except FloatingPointError:
            diverged = True
            break
    with torch.no_grad():
        ev = torch.Generator().manual_seed(task.seed + 40_000)
        fake = G(torch.randn(2000, 2, generator=ev))
        if diverged or not bool(torch.isfinite(fake).all()):
            return dict(modes=None, high_quality=None, mmd2=None, diverged=True)
        return dict(**gan_quality(fake, gan_real(2000, ev)), diverged=False)


# --- the experiment ----------------------------------------------------------------------------

def run(ctx: RunContext) -> None:
    size = SIZES[ctx.quick]
    ctx.config.update(size, methods=list(METHODS), gamma=GAMMA, attack_eps=ATTACK_EPS, attack_eps_wide=ATTACK_EPS_WIDE,
                      c=1.0, mu=1.0)
    m, n = size["m"], size["n"]
    base = 1000 * ctx.seed
    stoch = [GameRun(meth, eta, base + s, size["noise"], size["calls"], m, n)
             for meth in METHODS for eta in size["etas"] for s in range(size["seeds"])]
    det = [GameRun(meth, eta, base + s, 0.0, size["calls"], m, n)
           for meth in METHODS for eta in size["etas"] for s in range(size["det_seeds"])]
    grid = [GameRun(meth, ex, base, 0.0, size["grid_calls"], m, n, eta_y=ey)
            for meth in ("AdaSGDA", "SGDA") for ex in size["grid"] for ey in size["grid"]]
    dro = [DroRun(meth, eta, base + s, size["dro_calls"])
           for meth in METHODS for eta in size["dro_etas"] for s in range(size["dro_seeds"])]
    game_tasks = stoch + det + grid
    game_results = ctx.map(run_game, game_tasks, description="LogBilinearGame runs")
    dro_results = ctx.map(run_dro, dro, description="DRO on digits")
    res = dict(zip(game_tasks, game_results))
    summary = summarize(size, stoch, det, grid, dro, res, dict(zip(dro, dro_results)))
    gan_size = size.get("gan")
    if gan_size:  # (c): the full size only (a few minutes more on 2 CPUs than --quick allows)
        gan = [GanRun(meth, eta, base + s, gan_size["calls"])
               for meth in METHODS for eta in gan_size["etas"] for s in range(gan_size["seeds"])]
        summary["gan"] = summarize_gan(gan_size, gan, dict(zip(gan, ctx.map(run_gan, gan, description="WGAN-GP"))))
    for k, v in summary.items():
        ctx.metric(k, _jsonable(v))
    _claims(ctx, summary, size)
    _tables(ctx, summary, size)
    _figures(ctx, summary, size)


def _jsonable(v):
    """Metrics hold finite numbers and strings: a diverged run's value (None or inf) is "diverged"."""
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "diverged"
    return v


def _median(values):
    vals = [math.inf if v is None else v for v in values]
    return float(np.median(vals))


def robust_decades(etas, finals, factor: float = 10.0, floor: float = 0.0) -> float:
    """Decades (log10 span) of the longest run of consecutive η₀ whose final value is within
    ``factor`` of the best over the grid (0 when only one point is); inf/None count as failures.
    Values below ``floor`` count as ``floor`` (converged: 1e-90 is not "100× worse" than 1e-92)."""
    vals = np.maximum(np.array([math.inf if v is None else v for v in finals], float), floor)
    best = np.min(vals)
    if not np.isfinite(best):
        return 0.0
    ok = vals <= factor * max(best, 1e-300)
    span, start = 0.0, None
    for i, good in enumerate(ok):
        if good and start is None:
            start = i
        if good:
            span = max(span, math.log10(etas[i] / etas[start]))
        else:
            start = None
    return float(span)


def _slope_fit(marks, curves, calls):
    """Per-seed least-squares slopes of log min‖∇Φ‖ against log calls over [calls/16, calls] (None for a
    seed whose curve is not finite and positive there: a diverged run), their mean and a 95% t-interval
    over the finite ones."""
    marks = np.asarray(marks, float)
    sel = marks >= calls / 16
    slopes = []
    for c in curves:
        y = np.array([math.nan if v is None else v for v in c], float)[sel]
        ok = np.all(np.isfinite(y)) and np.all(y > 0)
        slopes.append(float(np.polyfit(np.log(marks[sel]), np.log(y), 1)[0]) if ok else None)
    fin = [v for v in slopes if v is not None]
    if not fin:
        return dict(slope=None, ci=[None, None], per_seed=slopes)
    mean = float(np.mean(fin))
    if len(fin) > 1:
        from scipy import stats

        half = float(stats.t.ppf(0.975, len(fin) - 1) * np.std(fin, ddof=1) / math.sqrt(len(fin)))
    else:
        half = math.nan
    return dict(slope=mean, ci=[mean - half, mean + half] if math.isfinite(half) else [None, None], per_seed=slopes)


def summarize(size, stoch, det, grid, dro, res, dro_res) -> dict:
    etas = size["etas"]
    out: dict = {}
    for label, tasks in (("stochastic", stoch), ("deterministic", det)):
        finals = {meth: [_median([res[t]["final"] for t in tasks if t.method == meth and t.eta == eta])
                         for eta in etas] for meth in METHODS}
        out[f"{label}_final_grad_phi"] = {k: [v if math.isfinite(v) else None for v in vals]
                                          for k, vals in finals.items()}
        floor = DET_FLOOR if label == "deterministic" else 0.0
        out[f"{label}_decades"] = {meth: robust_decades(etas, finals[meth], floor=floor) for meth in METHODS}
        seeds = sorted({t.seed for t in tasks})
        out[f"{label}_decades_per_seed"] = {
            meth: [robust_decades(etas, [next(res[t]["final"] for t in tasks if t.method == meth and t.eta == eta
                                             and t.seed == sd) for eta in etas], floor=floor) for sd in seeds]
            for meth in METHODS}
        curves = {}
        for meth in METHODS:
            runs = [res[t] for t in tasks if t.method == meth and t.eta == 1.0]
            curves[meth] = dict(marks=runs[0]["marks"],
                                min_grad_phi=[_median(col) if all(v is not None for v in col) else None
                                              for col in zip(*[r["min_grad_phi"] for r in runs])],
                                min_grad_phi_lo=[min(col) if all(v is not None for v in col) else None
                                                 for col in zip(*[r["min_grad_phi"] for r in runs])],
                                min_grad_phi_hi=[max(col) if all(v is not None for v in col) else None
                                                 for col in zip(*[r["min_grad_phi"] for r in runs])],
                                tracking=[_median(col) if all(v is not None for v in col) else None
                                          for col in zip(*[r["tracking"] for r in runs])],
                                ratio=[_median(col) if all(v is not None for v in col) else None
                                       for col in zip(*[r["ratio"] for r in runs])])
            for key in ("min_grad_phi", "min_grad_phi_lo", "min_grad_phi_hi", "tracking", "ratio"):
                curves[meth][key] = [v if v is not None and math.isfinite(v) else None for v in curves[meth][key]]
        out[f"{label}_curves_eta1"] = curves
    rates = {}
    for meth in METHODS:
        runs = [res[t] for t in stoch if t.method == meth and t.eta == 1.0]
        rates[meth] = _slope_fit(runs[0]["marks"], [r["min_grad_phi"] for r in runs], size["calls"])
    out["stochastic_slopes_eta1"] = rates
    out["sensitivity"] = {meth: [[res[t]["final"] for t in grid if t.method == meth and t.eta == ex]
                                 for ex in size["grid"]] for meth in ("AdaSGDA", "SGDA")}
    out["sensitivity_grid"] = list(size["grid"])
    detas = size["dro_etas"]
    dseeds = sorted({t.seed for t in dro})
    table = {}
    for meth in METHODS:
        rows = []
        for eta in detas:
            rs = [dro_res[t] for t in sorted((t for t in dro if t.method == meth and t.eta == eta), key=lambda t: t.seed)]
            ok = [r for r in rs if not r["diverged"]]
            rows.append(dict(eta=eta, robust_acc=float(np.mean([r["robust_acc"] for r in ok])) if ok else None,
                             robust_loss=float(np.mean([r["robust_loss"] for r in ok])) if ok else None,
                             clean_acc=float(np.mean([r["clean_acc"] for r in ok])) if ok else None,
                             robust_acc_wide=float(np.mean([r["robust_acc_wide"] for r in ok])) if ok else None,
                             train_delta_norm=float(np.mean([r["train_delta_norm"] for r in ok])) if ok else None,
                             # per seed; a diverged run counts as accuracy 0 (chance is 0.1) and loss None
                             robust_acc_seeds=[0.0 if r["diverged"] else r["robust_acc"] for r in rs],
                             robust_loss_seeds=[None if r["diverged"] else r["robust_loss"] for r in rs]))
        accs = [r["robust_acc"] if r["robust_acc"] is not None else -1.0 for r in rows]
        best = int(np.argmax(accs))
        at1 = [r for r in rows if r["eta"] == 1.0]
        table[meth] = dict(per_eta=rows, best_eta=rows[best]["eta"], best_robust_acc=rows[best]["robust_acc"],
                           best_robust_acc_seeds=rows[best]["robust_acc_seeds"],
                           robust_acc_eta1=at1[0]["robust_acc"] if at1 else None,
                           robust_acc_eta1_seeds=at1[0]["robust_acc_seeds"] if at1 else None,
                           loss_decades=robust_decades(detas, [r["robust_loss"] for r in rows], factor=10.0),
                           loss_decades_seeds=[robust_decades(detas, [r["robust_loss_seeds"][i] for r in rows],
                                                              factor=10.0) for i in range(len(dseeds))])
    out["dro"] = table
    return out


def summarize_gan(gan_size: dict, tasks: list, res: dict) -> dict:
    """Per method and η₀: mean modes covered, high-quality share and MMD² over seeds (None where
    every seed diverged); the η₀ with the lowest MMD² and the values there and at η₀ = 1."""
    out = {}
    for meth in METHODS:
        rows = []
        for eta in gan_size["etas"]:
            ok = [res[t] for t in tasks if t.method == meth and t.eta == eta and not res[t]["diverged"]]
            mean = (lambda k: float(np.mean([r[k] for r in ok])) if ok else None)  # noqa: E731
            rows.append(dict(eta=eta, modes=mean("modes"), high_quality=mean("high_quality"), mmd2=mean("mmd2"),
                             diverged=sum(res[t]["diverged"] for t in tasks if t.method == meth and t.eta == eta)))
        best = min(range(len(rows)), key=lambda i: math.inf if rows[i]["mmd2"] is None else rows[i]["mmd2"])
        at1 = [r for r in rows if r["eta"] == 1.0]
        out[meth] = dict(per_eta=rows, best_eta=rows[best]["eta"], best_mmd2=rows[best]["mmd2"],
                         modes_at_best=rows[best]["modes"], mmd2_eta1=at1[0]["mmd2"] if at1 else None,
                         modes_eta1=at1[0]["modes"] if at1 else None)
    return out


def _decades_threshold(etas) -> float:
    """">= 4 decades" on a grid of log-spaced η₀: 4 less half a grid step (the decade counts are
    multiples of the step, so a value above this is the whole 4 decades)."""
    return 4.0 - 0.5 * math.log10(etas[1] / etas[0])


def _claims(ctx: RunContext, s: dict, size: dict) -> None:
    dec = s["stochastic_decades_per_seed"]
    n = len(dec["AdaSGDA"])
    thr = _decades_threshold(size["etas"])
    ctx.bound(f"(1) Initial-stepsize robustness on the stochastic NC-SC game: over eta0 in 10^-3..10^1 (9 points, "
              f"both players) AdaSGDA's final ||grad Phi|| stays within 10x of its best over >= 4 decades (per seed, "
              f"over {n} seeds; threshold {thr:g}: the counts are multiples of the grid step; SGDA's mean "
              f"{np.mean(dec['SGDA']):.2f})", dec["AdaSGDA"], thr, better="higher")
    ddec = {k: v["loss_decades_seeds"] for k, v in s["dro"].items()}
    dthr = _decades_threshold(size["dro_etas"])
    ctx.bound(f"(1b) Initial-stepsize robustness on DRO (digits): robust test loss within 10x of AdaSGDA's best over "
              f">= 4 decades of eta0 (per seed, over {len(ddec['AdaSGDA'])} seeds; threshold {dthr:g}; SGDA's mean "
              f"{np.mean(ddec['SGDA']):.2f})", ddec["AdaSGDA"], dthr, better="higher")
    r = s["stochastic_slopes_eta1"]

    def slopes(meth):  # a diverged seed has no rate: counted as slope 0 (no decrease)
        return [0.0 if v is None else v for v in r[meth]["per_seed"]]

    plain, vr, tiada = slopes("AdaSGDA"), slopes("AdaSGDA-VR"), slopes("TiAda")
    ctx.bound(f"(2a) Rate O(T^-1/4): fitted log-log slope of min_t ||grad Phi|| against gradient calls for AdaSGDA "
              f"(eta0 = 1, noise) <= -1/4 + 0.08 (per seed, over {n} seeds; TiAda's mean slope {np.mean(tiada):.3f})",
              plain, -0.25 + 0.08, better="lower")
    ctx.bound(f"(2b) Rate O(T^-1/3): AdaSGDA-VR's slope <= -1/3 + 0.08 (per seed, over {n} seeds)", vr, -1 / 3 + 0.08,
              better="lower")
    ctx.compare(f"(2c) AdaSGDA-VR's slope is at least as steep as AdaSGDA's (eta0 = 1, noise; paired over {n} seeds)",
                vr, plain, better="lower")
    dro = s["dro"]
    nd = len(dro["AdaSGDA"]["best_robust_acc_seeds"])
    rival = max(("TiAda", "NeAda-AdaGrad"), key=lambda m: dro[m]["best_robust_acc"] or 0.0)
    ctx.compare(f"(3a) DRO on digits, same gradient budget, each method at its own best eta0 (by the mean over seeds): "
                f"AdaSGDA's robust test accuracy >= the best of TiAda / NeAda ({rival}) - 1 point (paired over {nd} "
                f"seeds)", dro["AdaSGDA"]["best_robust_acc_seeds"], dro[rival]["best_robust_acc_seeds"],
                better="higher", margin=-0.01)
    if dro["AdaSGDA"]["robust_acc_eta1_seeds"] is not None:
        rival1 = max(("TiAda", "NeAda-AdaGrad"), key=lambda m: dro[m]["robust_acc_eta1"] or 0.0)
        ctx.compare(f"(3b) DRO on digits at eta0 = 1 untuned: AdaSGDA's robust test accuracy >= the best of TiAda / "
                    f"NeAda ({rival1}) - 1 point (paired over {nd} seeds)", dro["AdaSGDA"]["robust_acc_eta1_seeds"],
                    dro[rival1]["robust_acc_eta1_seeds"], better="higher", margin=-0.01)


def _fmt(v):
    return "diverged" if v is None else v


def _mean_sd(values) -> str:
    v = np.asarray(values, float)
    return f"{v.mean():.3g} ± {v.std(ddof=1):.2g}" if v.size > 1 else f"{v.mean():.3g}"


def _tables(ctx: RunContext, s: dict, size: dict) -> None:
    ctx.text(
        f"LogBilinearGame f = c·Σlog(1+X²) + tr(XᵀBY) − (μ/2)‖Y‖², X, Y ∈ R^{size['m']}×{size['n']}, c = μ = 1, "
        f"{size['calls']} gradient calls per run (an AdaSGDA-VR step costs 2, a NeAda inner step 1), "
        f"Gaussian gradient noise σ = {size['noise']} in the stochastic runs ({size['seeds']} seeds, medians). "
        f"DRO: 64-64-10 tanh MLP on scikit-learn's digits (1200 train / 597 test), y = the perturbation of the "
        f"training inputs, penalty γ = {GAMMA}, {size['dro_calls']} full-batch gradient calls, {size['dro_seeds']} "
        f"seeds (split, initialization); robust accuracy under ℓ2 PGD of radius {ATTACK_EPS} (20 steps; radius "
        f"{ATTACK_EPS_WIDE} beside it). Figures with ± are mean ± standard deviation over seeds; claims are "
        f"decided over seeds with a 95% t interval.")
    etas = size["etas"]
    ctx.table(f"Robustness: decades of η₀ (of 4) with final ‖∇Φ‖ within 10× of the method's best (deterministic: "
              f"values below {DET_FLOOR:g} count as {DET_FLOOR:g})",
              ["method", "stochastic (of the median)", "stochastic (per seed)", "deterministic", "DRO robust loss",
               "DRO robust loss (per seed)"],
              [(m, s["stochastic_decades"][m], _mean_sd(s["stochastic_decades_per_seed"][m]),
                s["deterministic_decades"][m], s["dro"][m]["loss_decades"], _mean_sd(s["dro"][m]["loss_decades_seeds"]))
               for m in METHODS])
    ctx.table("Final ‖∇Φ‖, stochastic (median over seeds)", ["method"] + [f"η₀={e:.3g}" for e in etas],
              [(m, *[_fmt(v) for v in s["stochastic_final_grad_phi"][m]]) for m in METHODS])
    ctx.table("Final ‖∇Φ‖, deterministic", ["method"] + [f"η₀={e:.3g}" for e in etas],
              [(m, *[_fmt(v) for v in s["deterministic_final_grad_phi"][m]]) for m in METHODS])
    r = s["stochastic_slopes_eta1"]
    ctx.table("Fitted slopes of min_t ‖∇Φ‖ vs gradient calls (η₀ = 1, stochastic; 95% CI over seeds)",
              ["method", "slope", "CI low", "CI high"],
              [(m, _fmt(r[m]["slope"]), _fmt(r[m]["ci"][0]), _fmt(r[m]["ci"][1])) for m in METHODS])
    def at_best(v, key):
        return _fmt(next(r[key] for r in v["per_eta"] if r["eta"] == v["best_eta"]))

    ctx.table(f"DRO on digits: robust test accuracy (ℓ2 PGD, radius {ATTACK_EPS}), same gradient budget; best η₀ by "
              f"the mean over seeds",
              ["method", "best η₀", "robust acc (best η₀)", "robust acc (η₀ = 1)", "clean acc (best η₀)",
               f"robust acc at radius {ATTACK_EPS_WIDE} (best η₀)", "training ‖Δ‖ (best η₀)"],
              [(m, v["best_eta"], _mean_sd(v["best_robust_acc_seeds"]),
                _mean_sd(v["robust_acc_eta1_seeds"]) if v["robust_acc_eta1_seeds"] else "-",
                at_best(v, "clean_acc"), at_best(v, "robust_acc_wide"), at_best(v, "train_delta_norm"))
               for m, v in s["dro"].items()])
    if "gan" in s:
        ctx.table(f"WGAN-GP on 8 Gaussians (outside the NC-SC theory; no claim): modes covered of {GAN_MODES} and "
                  "MMD² to the data (mean over seeds)",
                  ["method", "best η₀ (MMD²)", "MMD² (best η₀)", "modes (best η₀)", "MMD² (η₀ = 1)", "modes (η₀ = 1)"],
                  [(m, v["best_eta"], _fmt(v["best_mmd2"]), _fmt(v["modes_at_best"]), _fmt(v["mmd2_eta1"]),
                    _fmt(v["modes_eta1"])) for m, v in s["gan"].items()])


def _figures(ctx: RunContext, s: dict, size: dict) -> None:
    from ._common import pyplot

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, label in zip(axes, ("deterministic", "stochastic")):
        for m in METHODS:
            c = s[f"{label}_curves_eta1"][m]
            y = [math.nan if v is None else v for v in c["min_grad_phi"]]
            line, = ax.loglog(c["marks"], y, label=m, ls="-" if m in OURS else "--")
            if label == "stochastic" and m in OURS + ("TiAda",):
                lo = [math.nan if v is None else v for v in c["min_grad_phi_lo"]]
                hi = [math.nan if v is None else v for v in c["min_grad_phi_hi"]]
                ax.fill_between(c["marks"], lo, hi, color=line.get_color(), alpha=0.15, lw=0)
        ax.set_title(f"{label}, η₀ = 1")
        ax.set_xlabel("gradient calls")
        ax.set_ylabel("min_t ‖∇Φ(X_t)‖ (median)")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    ctx.figure(fig, "grad_phi_vs_calls", "Stationarity against gradient calls at η₀ = 1 (median over seeds; band: "
                                         "their range for AdaSGDA, AdaSGDA-VR and TiAda); solid: ours.")
    plt.close(fig)

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for ax, label in zip(axes[:2], ("deterministic", "stochastic")):
        for m in METHODS:
            y = [math.nan if v is None else v for v in s[f"{label}_final_grad_phi"][m]]
            ax.loglog(size["etas"], y, marker="o", label=m, ls="-" if m in OURS else "--")
        ax.set_title(f"{label}: final ‖∇Φ‖ against η₀")
        ax.set_xlabel("η₀ (both players)")
    for m in METHODS:
        rows = s["dro"][m]["per_eta"]
        line, = axes[2].semilogx([r["eta"] for r in rows], [math.nan if r["robust_acc"] is None else r["robust_acc"]
                                                            for r in rows], marker="o", label=m,
                                 ls="-" if m in OURS else "--")
        for r in rows:  # every seed as a dot
            axes[2].scatter([r["eta"]] * len(r["robust_acc_seeds"]), r["robust_acc_seeds"], s=6,
                            color=line.get_color(), alpha=0.5)
    axes[2].set_title(f"DRO: robust test accuracy (radius {ATTACK_EPS}) against η₀", fontsize=9)
    axes[2].set_ylabel("mean over seeds (dots: each seed)")
    axes[2].set_xlabel("η₀")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    ctx.figure(fig, "eta_robustness", "η₀ robustness curves (missing points: diverged).")
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    for m in ("AdaSGDA", "AdaSGDA-VR", "TiAda", "NeAda-AdaGrad"):
        c = s["stochastic_curves_eta1"][m]
        ax.loglog(c["marks"], [math.nan if v is None else v for v in c["ratio"]], label=m)
    ax.set_xlabel("gradient calls")
    ax.set_ylabel("effective stepsize ratio η_x / η_y")
    ax.legend(fontsize=7)
    ctx.figure(fig, "stepsize_ratio", "Effective stepsize ratio over time (stochastic, η₀ = 1, median).")
    plt.close(fig)

    grid = s["sensitivity_grid"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, m in zip(axes, ("AdaSGDA", "SGDA")):
        z = np.log10(np.array([[1e6 if v is None else max(v, 1e-16) for v in row] for row in s["sensitivity"][m]]))
        im = ax.imshow(z.T, origin="lower", cmap="viridis", vmin=-16, vmax=6)
        ax.set_xticks(range(len(grid)), [f"{g:.0e}" for g in grid])
        ax.set_yticks(range(len(grid)), [f"{g:.0e}" for g in grid])
        ax.set_xlabel("η_x")
        ax.set_ylabel("η_y")
        ax.set_title(f"{m}: log10 final ‖∇Φ‖ (1e6: diverged)")
        fig.colorbar(im, ax=ax)
    fig.tight_layout()
    ctx.figure(fig, "sensitivity_map", "2-D (η_x, η_y) map of final stationarity, deterministic game.")
    plt.close(fig)
