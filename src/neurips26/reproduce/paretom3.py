"""Reproduction: ParetoM³ (preference-guided optimization over the weak Pareto set) against
EPO, PMTL, PNG, linear scalarization, MGDA (torchjd) and pymoo's NSGA-II.

Every gradient method gets the same budget in backward passes (ParetoM³: 2 per iteration,
linear scalarization 1, MGDA / EPO / PMTL m, PNG m + 1). Step sizes: one small grid
(``LR_GRID``), each method's chosen on a separate tuning instance (synthetic tasks; digits
use ``DIGITS_LR`` for every method).

* (a) convex: f_i = ‖x − a_i‖², f₀ = ½‖x − z‖²; the preferred point is the projection of z
  onto the convex hull of the a_i (cvxpy).
* (b) nonconvex two-objective: ZDT1, ZDT2 (pymoo's ``pareto_front()``), Fonseca–Fleming;
  rays r (r_i F_i equal); the preferred point of a ray is where it meets the dense front.
* digits: a MultiMNIST-style task from scikit-learn's digits (two 8×8 digits overlaid on a
  14×14 canvas), a shared MLP with two heads, one ray per run.
* cost: wall time per iteration with m = 2, 5, 10 one-vs-rest digit tasks.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass

import numpy as np
import torch

from ..optim.moo_baselines import EPO, MGDA, PMTL, PNG, LinearScalarization
from ..optim.multiobjective import weak_pareto_merit
from ..optim.paretom3 import ParameterVector, ParetoM3, Ray, TargetPoint
from ._common import pyplot
from ._harness import RunContext

SIZES = {
    True: dict(seeds=3, rays_b=4, rays_digits=3, budget_a=10000, budget_b=1000, budget_digits=1000, n_train=1000,
               n_test=500, cost_steps=10, problems=["zdt1", "zdt2", "fonseca-fleming"], nsga_pop=40, nsga_gen=60,
               a_methods=("ParetoM3", "PNG", "LS")),
    False: dict(seeds=5, rays_b=11, rays_digits=5, budget_a=20000, budget_b=4000, budget_digits=3000, n_train=4000,
                n_test=1000, cost_steps=30, problems=["zdt1", "zdt2", "fonseca-fleming"], nsga_pop=100, nsga_gen=200,
                a_methods=("ParetoM3", "PNG", "MGDA", "LS")),
}
LR_GRID = (1.0, 0.3, 0.1)
DIGITS_LR = 0.1
# ParetoM3's x moves by gamma * (J(x) - J(y))^T lam ~ (curvature / alpha) * gradient: at a near-flat network
# initialisation alpha = 1 barely trains in the quick budget (0.08 accuracy); the certificate u_alpha keeps ALPHA.
DIGITS_ALPHA = 0.1
LR_LAMBDA = 0.05
LR_Y = 0.3  # lr_y (alpha + smoothness) < 1: y does not overshoot (0.5 on the quadratics made lambda flip between vertices)
ALPHA = 1.0
B_METHODS = ("ParetoM3", "EPO", "PMTL", "PNG", "LS")
# (a)'s methods per size (``a_methods``): MGDA (torchjd's aggregator) takes ~60 ms a step on these quadratics
# (200 s per run at the quick budget) and ignores f0, so the quick run leaves it out of (a)
A_METHODS = ("ParetoM3", "PNG", "MGDA", "LS")
DIGIT_METHODS = ("ParetoM3", "EPO", "PMTL", "PNG", "LS", "MGDA")
N_VAR = {"zdt1": 10, "zdt2": 10, "fonseca-fleming": 3}




def one_thread(fn):
    """Run a task on one torch thread (its tensors are tiny: two threads on a shared 2-core machine wait on
    each other at every op, several times slower), and give the caller's setting back."""
    @functools.wraps(fn)
    def wrapped(task):
        n = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return fn(task)
        finally:
            torch.set_num_threads(n)
    return wrapped


# ----------------------------------------------------------------------------- problems

def _decode(x):
    # ZDT's box [0, 1]ⁿ by a reparametrization without spurious stationary points in the way:
    # x₁ = sigmoid(θ₁) (the front's interior), x_j = θ_j² (the Pareto set is θ_j = 0).
    return torch.cat([torch.sigmoid(x[:1]), x[1:] ** 2])


def _zdt1(x):
    x = _decode(x)
    g = 1 + 9 * x[1:].mean()
    return torch.stack([x[0], g * (1 - torch.sqrt(x[0] / g))])


def _zdt2(x):
    x = _decode(x)
    g = 1 + 9 * x[1:].mean()
    return torch.stack([x[0], g * (1 - (x[0] / g) ** 2)])


def _fonseca_fleming(x):
    c = 1 / math.sqrt(x.numel())
    return torch.stack([1 - torch.exp(-((x - c) ** 2).sum()), 1 - torch.exp(-((x + c) ** 2).sum())])


PROBLEMS = {"zdt1": _zdt1, "zdt2": _zdt2, "fonseca-fleming": _fonseca_fleming}


def _front(name: str) -> np.ndarray:
    if name == "fonseca-fleming":
        n = N_VAR[name]
        t = np.linspace(-1, 1, 4000) / math.sqrt(n)
        return np.stack([1 - np.exp(-n * (t - 1 / math.sqrt(n)) ** 2), 1 - np.exp(-n * (t + 1 / math.sqrt(n)) ** 2)], 1)
    from pymoo.problems import get_problem

    return get_problem(name).pareto_front(n_pareto_points=4000)


def _rays(k: int) -> np.ndarray:
    t = np.linspace(0.1, 0.9, k)
    return np.stack([t, 1 - t], 1)


def _preferred(front: np.ndarray, r) -> np.ndarray:
    """The front's point on the ray r_i F_i = const (F ∝ 1/r), by interpolation between the two
    front points whose angles bracket the ray's."""
    d = 1 / np.asarray(r, float)
    ang = np.arctan2(front[:, 1], front[:, 0])
    order = np.argsort(ang)
    return np.array([np.interp(math.atan2(d[1], d[0]), ang[order], front[order, j]) for j in (0, 1)])


def _make(method, mod, obj, ray, lr, rays=None, index=None, steps=None, target=None):
    m = len(ray) if ray is not None else 3
    pref = TargetPoint(target) if target is not None else Ray(ray)
    if method == "ParetoM3":
        return ParetoM3(mod, obj, pref, gamma=10.0, alpha=ALPHA, lr=lr, lr_y=LR_Y, lr_lambda=LR_LAMBDA)
    if method == "EPO":
        return EPO(mod, obj, ray, lr=lr)
    if method == "PMTL":
        return PMTL(mod, obj, 1 / np.asarray(rays), index, lr=lr, init_steps=max(1, steps // 5))
    if method == "PNG":
        return PNG(mod, obj, pref, lr=lr)
    if method == "LS":
        return LinearScalarization(mod, obj, ray if ray is not None else np.ones(m), lr=lr)
    if method == "MGDA":
        return MGDA(mod, obj, lr=lr)
    raise ValueError(method)


def _run_gradient(method, F, x0, budget, lr, schedule, **kw):
    """Run one method on F from x0 until ``budget`` backward passes; ParetoM³ on a γ schedule
    (``schedule``: (γ₀, γ_max, fraction of the run to reach it)) with lr / max(1, γα)."""
    mod = ParameterVector(x0)
    opt = _make(method, mod, lambda fwd, b: F(fwd()), lr=lr, steps=budget // 2, **kw)
    g0, gmax, frac = schedule
    est = budget // 2
    it = 0
    try:
        while opt.backward_passes < budget:
            if method == "ParetoM3":
                g = min(gmax, g0 * (gmax / g0) ** (it / max(1, frac * est)))
                opt.gamma = g
                opt.lr = lr / max(1.0, g * ALPHA)
            opt.step()
            it += 1
    except ValueError:  # a diverged run (non-finite losses): reported as such
        return None
    return mod.x.detach()


# ----------------------------------------------------------------------------- (a) convex

@dataclass(frozen=True)
class ConvexTask:
    """One method on convex instance ``seed`` at step size ``lr``; ``merit`` False on the tuning runs."""
    method: str
    seed: int
    budget: int
    lr: float
    merit: bool = True


SCHED_A = (10.0, 1000.0, 0.5)
SCHED_B = (1.0, 10.0, 0.7)
TUNE_OFFSET = 10**6  # the tuning instance / start of a run with seed s is s + TUNE_OFFSET


def _convex_instance(seed):
    import cvxpy as cp

    g = torch.Generator().manual_seed(seed)
    a = torch.randn(3, 5, generator=g, dtype=torch.float64)
    z = a.mean(0) + 2 * torch.randn(5, generator=g, dtype=torch.float64)
    w = cp.Variable(3)
    cp.Problem(cp.Minimize(cp.sum_squares(a.numpy().T @ w - z.numpy())), [w >= 0, cp.sum(w) == 1]).solve()
    return a, z, torch.from_numpy(a.numpy().T @ w.value)


@one_thread
def run_convex(t: ConvexTask) -> dict:
    """(a): distance to the preferred point and merit u_α at the end. A diverged run counts as not
    having moved from its start x₀ = 0 (its distance and merit there), flagged ``diverged``."""
    a, z, xstar = _convex_instance(t.seed)
    F = lambda x: ((x[None] - a) ** 2).sum(1)  # noqa: E731
    x0 = torch.zeros(5, dtype=torch.float64)
    x = _run_gradient(t.method, F, x0, t.budget, t.lr, SCHED_A, ray=None, target=z)
    diverged = x is None
    x = x0 if diverged else x
    return {"dist": float((x - xstar).norm()), "diverged": diverged,
            "merit": weak_pareto_merit(F, x, ALPHA).value if t.merit else None}


# ----------------------------------------------------------------------------- (b) nonconvex

@dataclass(frozen=True)
class FrontTask:
    """One method on one problem from the start drawn with ``seed``, at step size ``lr``: every ray,
    or (``tune``) the middle ray only, without merits."""
    problem: str
    method: str
    seed: int
    rays: int
    budget: int
    lr: float
    tune: bool = False


@one_thread
def run_front(t: FrontTask) -> dict:
    """(b): per ray, the point reached, its distance to the ray's preferred point and u_α there.
    A diverged run counts as not having moved from its start (flagged in ``diverged``)."""
    F, n = PROBLEMS[t.problem], N_VAR[t.problem]
    front, rays = _front(t.problem), _rays(t.rays)
    g = torch.Generator().manual_seed(t.seed)
    x0 = torch.rand(n, generator=g, dtype=torch.float64) * 2 - 1
    points, dists, merits, diverged = [], [], [], []
    for k in ([len(rays) // 2] if t.tune else range(len(rays))):
        x = _run_gradient(t.method, F, x0, t.budget, t.lr, SCHED_B, ray=tuple(rays[k]), rays=rays, index=k)
        diverged.append(x is None)
        x = x0 if x is None else x
        Fx = F(x).detach().numpy()
        points.append(Fx.tolist())
        dists.append(float(np.linalg.norm(Fx - _preferred(front, rays[k]))))
        if not t.tune:
            merits.append(weak_pareto_merit(F, x, ALPHA, inner_steps=200).value)
    return {"points": points, "dist": dists, "merit": merits, "diverged": diverged}


@dataclass(frozen=True)
class NSGATask:
    problem: str
    seed: int
    rays: int
    pop: int
    gen: int


@one_thread
def run_nsga(t: NSGATask) -> dict:
    """pymoo NSGA-II on the original box problem; per ray, the final population's point closest
    in angle to the ray."""
    from pymoo.algorithms.moo.nsga2 import NSGA2
    from pymoo.optimize import minimize
    from pymoo.problems import get_problem
    from pymoo.core.problem import Problem

    if t.problem == "fonseca-fleming":
        n = N_VAR[t.problem]

        class FF(Problem):
            def __init__(self):
                super().__init__(n_var=n, n_obj=2, xl=-4.0, xu=4.0)

            def _evaluate(self, X, out, *args, **kwargs):
                c = 1 / math.sqrt(n)
                out["F"] = np.stack([1 - np.exp(-((X - c) ** 2).sum(1)), 1 - np.exp(-((X + c) ** 2).sum(1))], 1)

        prob = FF()
    else:
        prob = get_problem(t.problem, n_var=N_VAR[t.problem])
    res = minimize(prob, NSGA2(pop_size=t.pop), ("n_gen", t.gen), seed=t.seed, verbose=False)
    P = np.atleast_2d(res.F)
    front, rays = _front(t.problem), _rays(t.rays)
    points, dists = [], []
    for r in rays:
        d = 1 / r / np.linalg.norm(1 / r)
        cos = P @ d / np.maximum(np.linalg.norm(P, axis=1), 1e-12)
        p = P[int(np.argmax(cos))]
        points.append(p.tolist())
        dists.append(float(np.linalg.norm(p - _preferred(front, r))))
    return {"points": points, "dist": dists, "evaluations": t.pop * t.gen}


# ----------------------------------------------------------------------------- digits

def _multi_digits(n: int, seed: int):
    """Two 8×8 digits overlaid (max) with random offsets on a 14×14 canvas: the left one in
    the upper-left, the right one in the lower-right; labels (left, right)."""
    from sklearn.datasets import load_digits

    d = load_digits()
    imgs, labels = d.images / 16.0, d.target
    rng = np.random.default_rng(seed)
    i, j = rng.integers(0, len(imgs), n), rng.integers(0, len(imgs), n)
    X = np.zeros((n, 14, 14))
    for k in range(n):
        r1, c1 = rng.integers(0, 3, 2)
        r2, c2 = rng.integers(4, 7, 2)
        X[k, r1:r1 + 8, c1:c1 + 8] = imgs[i[k]]
        X[k, r2:r2 + 8, c2:c2 + 8] = np.maximum(X[k, r2:r2 + 8, c2:c2 + 8], imgs[j[k]])
    return torch.tensor(X.reshape(n, -1), dtype=torch.float32), torch.tensor(np.stack([labels[i], labels[j]], 1))


class _TwoHead(torch.nn.Module):
    def __init__(self, heads=2, out=10, hidden=64):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(196, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden),
                                        torch.nn.ReLU())
        self.heads = torch.nn.Linear(hidden, heads * out)
        self.h, self.o = heads, out

    def forward(self, x):
        return self.heads(self.body(x)).view(-1, self.h, self.o)


def _digit_objectives(forward, batch):
    X, Y = batch
    logits = forward(X)
    return torch.stack([torch.nn.functional.cross_entropy(logits[:, i], Y[:, i]) for i in range(2)])


@dataclass(frozen=True)
class DigitsTask:
    method: str
    ray: tuple
    rays: tuple
    index: int
    seed: int
    budget: int
    n_train: int
    n_test: int


@one_thread
def run_digits(t: DigitsTask) -> dict:
    torch.manual_seed(t.seed)
    Xtr, Ytr = _multi_digits(t.n_train, t.seed)
    Xte, Yte = _multi_digits(t.n_test, t.seed + 10**6)
    model = _TwoHead()
    opt = _make(t.method, model, _digit_objectives, ray=list(t.ray), lr=DIGITS_LR, rays=np.asarray(t.rays),
                index=t.index, steps=t.budget // 2)
    if t.method == "ParetoM3":
        opt.gamma, opt.lr_y, opt.alpha = 1.0, DIGITS_LR, DIGITS_ALPHA
    g = torch.Generator().manual_seed(t.seed)
    while opt.backward_passes < t.budget:
        idx = torch.randint(0, t.n_train, (128,), generator=g)
        opt.step((Xtr[idx], Ytr[idx]))
    with torch.no_grad():
        pred = model(Xte).argmax(-1)
        acc = (pred == Yte).float().mean(0).tolist()
        train_loss = _digit_objectives(model, (Xtr, Ytr)).tolist()
    # Merit u_α at the end on the training losses (the flattened parameters).
    names = [n for n, _ in model.named_parameters()]
    shapes = [p.shape for _, p in model.named_parameters()]
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])

    def F(x):
        params, at = {}, 0
        for n, s in zip(names, shapes):
            k = math.prod(s)
            params[n] = x[at:at + k].view(s)
            at += k
        return _digit_objectives(lambda X: torch.func.functional_call(model, params, (X,)), (Xtr, Ytr))

    merit = weak_pareto_merit(F, flat, ALPHA, inner_steps=30, tol=1e-9).value
    inv = 1 / np.asarray(t.ray)
    L = np.asarray(train_loss)
    align = float(L @ inv / (np.linalg.norm(L) * np.linalg.norm(inv)))
    return {"acc": acc, "train_loss": train_loss, "merit": merit, "alignment": align}


@dataclass(frozen=True)
class CostTask:
    m: int
    steps: int
    seed: int


@one_thread
def run_cost(t: CostTask) -> dict:
    """Seconds per iteration with m one-vs-rest digit tasks (binary logistic losses, shared MLP)."""
    from sklearn.datasets import load_digits

    torch.manual_seed(t.seed)
    d = load_digits()
    X = torch.tensor(d.data / 16.0, dtype=torch.float32)[:512]
    Y = torch.tensor(d.target)[:512]
    out = {}
    for method in ("ParetoM3", "MGDA", "EPO"):
        model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                                    torch.nn.ReLU(), torch.nn.Linear(256, t.m))

        def objectives(forward, batch):
            logits = forward(batch[0])
            target = (batch[1][:, None] == torch.arange(t.m)[None]).float()
            return torch.nn.functional.binary_cross_entropy_with_logits(logits, target, reduction="none").mean(0)

        opt = _make(method, model, objectives, ray=[1.0] * t.m, lr=0.05)
        for _ in range(3):
            opt.step((X, Y))
        start = time.perf_counter()
        for _ in range(t.steps):
            opt.step((X, Y))
        out[method] = (time.perf_counter() - start) / t.steps
    return out


# ----------------------------------------------------------------------------- the run

def run(ctx: RunContext) -> None:
    size = SIZES[ctx.quick]
    seeds = [ctx.seed + s for s in range(size["seeds"])]
    tune_seed = ctx.seed + TUNE_OFFSET
    ctx.config.update(size, seed_list=seeds, tuning_seed=tune_seed, lr_grid=list(LR_GRID), digits_lr=DIGITS_LR,
                      alpha=ALPHA,
                      paretom3=dict(schedule_a=list(SCHED_A), schedule_b=list(SCHED_B), lr_y=LR_Y, lr_lambda=LR_LAMBDA,
                                    lr_t="lr / max(1, gamma_t * alpha)", digits=dict(gamma=1.0, lr_y=DIGITS_LR, alpha=DIGITS_ALPHA)),
                      baselines=dict(epo_eps=1e-4, png=dict(alpha=0.5, e=1e-3), pmtl_eps=1e-3))
    # step sizes: each method's (per problem on (b)) chosen once on the tuning instance / start, then run on every seed
    a_methods = tuple(size.get("a_methods", A_METHODS))
    a_tune = [ConvexTask(m, tune_seed, size["budget_a"], lr, merit=False) for m in a_methods for lr in LR_GRID]
    b_tune = [FrontTask(p, m, tune_seed, size["rays_b"], size["budget_b"], lr, tune=True)
              for p in size["problems"] for m in B_METHODS for lr in LR_GRID]
    a_tune_res = ctx.map(run_convex, a_tune, description="(a) convex: step-size tuning")
    b_tune_res = ctx.map(run_front, b_tune, description="(b) nonconvex: step-size tuning")
    lr_a = _choose_lr(a_tune, a_tune_res, lambda t: t.method)
    lr_b = _choose_lr(b_tune, b_tune_res, lambda t: (t.problem, t.method))
    a_tasks = [ConvexTask(m, s, size["budget_a"], lr_a[m]) for m in a_methods for s in seeds]
    b_tasks = [FrontTask(p, m, s, size["rays_b"], size["budget_b"], lr_b[p, m]) for p in size["problems"]
               for m in B_METHODS for s in seeds]
    n_tasks = [NSGATask(p, s, size["rays_b"], size["nsga_pop"], size["nsga_gen"]) for p in size["problems"] for s in seeds]
    rays = _rays(size["rays_digits"])
    d_tasks = [DigitsTask(m, tuple(map(float, r)), tuple(map(tuple, rays.tolist())), k, s, size["budget_digits"],
                          size["n_train"], size["n_test"])
               for m in DIGIT_METHODS for k, r in enumerate(rays) for s in seeds]
    c_tasks = [CostTask(m, size["cost_steps"], s) for s in seeds for m in (2, 5, 10)]
    a_res = ctx.map(run_convex, a_tasks, description="(a) convex")
    b_res = ctx.map(run_front, b_tasks, description="(b) nonconvex fronts")
    n_res = ctx.map(run_nsga, n_tasks, description="NSGA-II")
    d_res = ctx.map(run_digits, d_tasks, description="multi-digit classification")
    c_res = ctx.map(run_cost, c_tasks, description="cost per iteration")
    summary = summarize(size, seeds, lr_a, lr_b, a_tasks, a_res, b_tasks, b_res, n_tasks, n_res, d_tasks, d_res,
                        c_tasks, c_res)
    for name, value in summary.items():
        ctx.metric(name, value)
    claims(ctx, size, summary)
    tables(ctx, size, summary)
    _figures(ctx, size, summary)


def _choose_lr(tasks, results, key) -> dict:
    """Per key, the step size of the grid with the smallest distance on the tuning run (ties: the larger
    step, the grid's order)."""
    best: dict = {}
    for t, r in zip(tasks, results):
        d = float(np.mean(r["dist"]))
        if key(t) not in best or d < best[key(t)][0]:
            best[key(t)] = (d, t.lr)
    return {k: v[1] for k, v in best.items()}


def _stats(v) -> dict:
    v = [float(x) for x in v]
    return {"mean": float(np.mean(v)), "std": float(np.std(v)), "seeds": v}


def summarize(size, seeds, lr_a, lr_b, a_tasks, a_res, b_tasks, b_res, n_tasks, n_res, d_tasks, d_res, c_tasks,
              c_res) -> dict:
    """The metrics: per method the mean, spread (std over seeds) and per-seed values of each figure;
    on (b) also the per-instance distances (seed-major, then ray) that the paired claim uses."""
    from pymoo.indicators.hv import HV

    def rows(tasks, results, **match):
        return [r for t, r in zip(tasks, results) if all(getattr(t, k) == v for k, v in match.items())]

    conv = {}
    for m in (m for m in A_METHODS if m in lr_a):
        rs = rows(a_tasks, a_res, method=m)
        conv[m] = {"dist": _stats([r["dist"] for r in rs]), "merit": _stats([r["merit"] for r in rs]), "lr": lr_a[m],
                   "diverged_runs": int(sum(r["diverged"] for r in rs))}
    hv = HV(ref_point=np.array([1.1, 1.1]))
    fronts: dict = {}
    for p in size["problems"]:
        fronts[p] = {}
        for m in B_METHODS + ("NSGA-II",):
            rs = rows(b_tasks, b_res, problem=p, method=m) if m != "NSGA-II" else rows(n_tasks, n_res, problem=p)
            hvs = [float(hv(np.asarray(r["points"], float))) for r in rs]
            fronts[p][m] = {"dist": _stats([np.mean(r["dist"]) for r in rs]), "hv": _stats(hvs),
                            "dist_instances": [d for r in rs for d in r["dist"]],
                            "points": [r["points"] for r in rs]}
            if m != "NSGA-II":
                fronts[p][m].update(merit=_stats([np.mean(r["merit"]) for r in rs]), lr=lr_b[p, m],
                                    diverged_runs=int(sum(any(r["diverged"]) for r in rs)))
        fronts[p]["front_hv"] = float(hv(_front(p)))
    digits = {}
    for m in DIGIT_METHODS:
        per_ray = []
        for k in range(size["rays_digits"]):
            rs = rows(d_tasks, d_res, method=m, index=k)
            per_ray.append({"acc": np.mean([r["acc"] for r in rs], 0).tolist(),
                            "acc_std": np.std([r["acc"] for r in rs], 0).tolist(),
                            "acc_seeds": [r["acc"] for r in rs],
                            "alignment": _stats([r["alignment"] for r in rs]), "merit": _stats([r["merit"] for r in rs]),
                            "train_loss": np.mean([r["train_loss"] for r in rs], 0).tolist(),
                            "train_loss_seeds": [r["train_loss"] for r in rs]})
        digits[m] = per_ray
    cost = {str(mm): {meth: _stats([r[meth] for r in rows(c_tasks, c_res, m=mm)]) for meth in ("ParetoM3", "MGDA", "EPO")}
            for mm in (2, 5, 10)}
    ratio = {meth: _stats([r10[meth] / r2[meth] for r2, r10 in zip(rows(c_tasks, c_res, m=2), rows(c_tasks, c_res, m=10))])
             for meth in ("ParetoM3", "MGDA", "EPO")}
    return {"seeds": seeds, "convex": conv, "fronts": fronts, "digits": digits, "cost_s_per_iteration": cost,
            "cost_ratio_m10_over_m2": ratio}


def claims(ctx: RunContext, size, summary) -> None:
    conv, fronts, digits = summary["convex"], summary["fronts"], summary["digits"]
    n_seeds = len(summary["seeds"])
    pm = conv["ParetoM3"]
    ctx.bound(f"(a) convex: ParetoM3 reaches the preferred point (projection of z onto the hull), distance <= 1e-2 "
              f"over {n_seeds} seeds (PNG with the same f0 and budget: {conv['PNG']['dist']['mean']:.3g})",
              pm["dist"]["seeds"], 1e-2, better="lower")
    # (b): paired over (problem, seed, ray) instances against the other method with the smallest mean distance
    probs = size["problems"]
    inst = {m: [d for p in probs for d in fronts[p][m]["dist_instances"]] for m in B_METHODS + ("NSGA-II",)}
    others = {m: float(np.mean(v)) for m, v in inst.items() if m != "ParetoM3"}
    best = min(others, key=others.get)
    ctx.compare(f"(b) nonconvex (ZDT1, ZDT2, Fonseca-Fleming): ParetoM3 has the smallest mean distance to the "
                f"preferred point of all methods (best other: {best}; paired over {len(inst[best])} problem x seed x "
                f"ray instances)", inst["ParetoM3"], inst[best], better="lower")
    ctx.bound(f"(a) convex: ParetoM3 is approximately weakly Pareto, u_alpha(x_T) <= 1e-3 over {n_seeds} seeds "
              f"(PNG: {conv['PNG']['merit']['mean']:.3g})", pm["merit"]["seeds"], 1e-3, better="lower")
    n_rays = size["rays_digits"]
    ours_m = [x for k in range(n_rays) for x in digits["ParetoM3"][k]["merit"]["seeds"]]
    mgda_m = [x for k in range(n_rays) for x in digits["MGDA"][k]["merit"]["seeds"]]
    ctx.compare(f"digits: ParetoM3's merit u_alpha at the end is no larger than MGDA's at equal budget (paired over "
                f"{len(ours_m)} ray x seed runs)", ours_m, mgda_m, better="lower")
    # per ray and task, the baseline with the best mean accuracy; paired over (ray, task, seed)
    ours_a, best_a, gaps = [], [], []
    for k in range(n_rays):
        for task in range(2):
            b = max((m for m in DIGIT_METHODS if m != "ParetoM3"), key=lambda m: digits[m][k]["acc"][task])
            ours_a += [a[task] for a in digits["ParetoM3"][k]["acc_seeds"]]
            best_a += [a[task] for a in digits[b][k]["acc_seeds"]]
            gaps.append(digits["ParetoM3"][k]["acc"][task] - digits[b][k]["acc"][task])
    ctx.metric("digits_worst_accuracy_gap", float(min(gaps)))
    ctx.compare(f"digits: per-task accuracy within one point of the best baseline at each ray (paired over "
                f"{len(ours_a)} ray x task x seed runs; the worst mean gap: {min(gaps):.3f})", ours_a, best_a,
                better="higher", margin=-0.01)
    ours_al = [x for k in range(n_rays) for x in digits["ParetoM3"][k]["alignment"]["seeds"]]
    ls_al = [x for k in range(n_rays) for x in digits["LS"][k]["alignment"]["seeds"]]
    ctx.compare(f"digits: the loss vector is better aligned with the ray (cosine with 1/r) than with linear "
                f"scalarization (paired over {len(ours_al)} ray x seed runs)", ours_al, ls_al, better="higher")
    ratio = summary["cost_ratio_m10_over_m2"]
    ctx.bound(f"cost: ParetoM3's time per iteration is flat in m (m=10 over m=2 <= 1.5 over {n_seeds} seeds; "
              f"MGDA's ratio: {ratio['MGDA']['mean']:.2f})", ratio["ParetoM3"]["seeds"], 1.5, better="lower")


def _pm(s: dict) -> str:
    return f"{s['mean']:.4g} ± {s['std']:.2g}"


def tables(ctx: RunContext, size, summary) -> None:
    conv, fronts, digits, cost = (summary[k] for k in ("convex", "fronts", "digits", "cost_s_per_iteration"))
    n = len(summary["seeds"])
    ctx.table(f"(a) convex quadratics (d=5, m=3), mean ± std over {n} seeds",
              ["method", "distance to preferred", "u_alpha", "lr", "diverged runs"],
              [(m, _pm(v["dist"]), _pm(v["merit"]), v["lr"], v["diverged_runs"]) for m, v in conv.items()])
    for p in size["problems"]:
        ctx.table(f"(b) {p}: mean ± std over {n} seeds of the mean over {size['rays_b']} rays "
                  f"(front HV {fronts[p]['front_hv']:.4f})",
                  ["method", "distance to preferred", "u_alpha", "hypervolume", "lr", "diverged runs"],
                  [(m, _pm(v["dist"]), _pm(v["merit"]) if "merit" in v else "-", _pm(v["hv"]), v.get("lr", "-"),
                    v.get("diverged_runs", "-")) for m, v in fronts[p].items() if m != "front_hv"])
    rays = _rays(size["rays_digits"])
    ctx.table(f"digits (two-digit overlay): test accuracy (left, right), alignment, u_alpha per ray; mean ± std over "
              f"{n} seeds", ["method", "ray", "acc left", "acc right", "alignment", "u_alpha"],
              [(m, f"({rays[k][0]:.2f}, {rays[k][1]:.2f})", f"{v['acc'][0]:.3f} ± {v['acc_std'][0]:.2g}",
                f"{v['acc'][1]:.3f} ± {v['acc_std'][1]:.2g}", _pm(v["alignment"]), _pm(v["merit"]))
               for m, rows in digits.items() for k, v in enumerate(rows)])
    ctx.table(f"seconds per iteration, mean ± std over {n} seeds", ["m", "ParetoM3", "MGDA", "EPO"],
              [(m, _pm(v["ParetoM3"]), _pm(v["MGDA"]), _pm(v["EPO"])) for m, v in cost.items()])
    ctx.text("Budget in backward passes: ParetoM3 2 per iteration, LS 1, MGDA/EPO/PMTL m, PNG m+1. "
             "ParetoM3 runs a geometric gamma schedule (config) with lr_t = lr / max(1, gamma_t alpha). "
             "Each method's step size (per problem on (b)) is chosen once from the grid on a separate tuning "
             "instance ((a)) or start ((b), middle ray) and used on every seed. A diverged run (non-finite losses) "
             "counts as not having moved from its start. "
             "(b) uses a reparametrization of ZDT's box (x1 = sigmoid, x_j = theta_j^2) for every gradient method; "
             "NSGA-II runs on the original box problem. Claims are decided over seeds (or paired over seeds x rays "
             "x problems) with 95 % Student-t intervals.")


def _figures(ctx, size, summary):
    fronts, digits = summary["fronts"], summary["digits"]
    rays = _rays(size["rays_digits"])
    plt = pyplot()
    probs = size["problems"]
    fig, axes = plt.subplots(1, len(probs), figsize=(5 * len(probs), 4))
    marks = dict(zip(B_METHODS + ("NSGA-II",), "o^sDvx"))
    for ax, p in zip(np.atleast_1d(axes), probs):
        fr = _front(p)
        ax.plot(fr[:, 0], fr[:, 1], color="k", lw=0.8, label="Pareto front")
        for r in _rays(size["rays_b"]):
            q = _preferred(fr, r)
            ax.plot([0, q[0] * 1.2], [0, q[1] * 1.2], color="0.8", lw=0.5)
        for j, m in enumerate(B_METHODS + ("NSGA-II",)):
            P = np.asarray([q for seed_points in fronts[p][m]["points"] for q in seed_points], float)
            ax.scatter(P[:, 0], P[:, 1], marker=marks[m], s=18, label=m, alpha=0.6, color=f"C{j}")
        ax.set_xlim(-0.05, 1.2)
        ax.set_ylim(-0.05, 1.3)
        ax.set_title(p)
        ax.set_xlabel("F1")
        ax.set_ylabel("F2")
    np.atleast_1d(axes)[0].legend(fontsize=7)
    fig.tight_layout()
    ctx.figure(fig, "fronts", f"Points reached per ray, every seed ({len(summary['seeds'])}); grey lines: the rays; "
                              "black: the front.")
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(5, 4))
    for j, m in enumerate(DIGIT_METHODS):
        S = np.asarray([q for r in digits[m] for q in r["train_loss_seeds"]])
        ax.scatter(S[:, 0], S[:, 1], s=10, alpha=0.35, color=f"C{j}")
        P = np.asarray([r["train_loss"] for r in digits[m]])
        ax.scatter(P[:, 0], P[:, 1], s=40, label=m, color=f"C{j}", edgecolor="k", lw=0.5)
    lim = ax.get_xlim()[1]
    for r in rays:
        d = 1 / r
        ax.plot([0, lim], [0, lim * d[1] / d[0]], color="0.8", lw=0.5)
    ax.set_xlabel("train loss, left digit")
    ax.set_ylabel("train loss, right digit")
    ax.legend(fontsize=7)
    ctx.figure(fig, "digits_losses", "Digits: final training losses per ray and method (large: mean over seeds; "
                                     "small: each seed).")
    plt.close(fig)
