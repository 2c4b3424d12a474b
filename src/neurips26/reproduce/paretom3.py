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
    True: dict(seeds=2, rays_b=5, rays_digits=3, budget_a=10000, budget_b=1500, budget_digits=1500, n_train=1000,
               n_test=500, cost_steps=10, problems=["zdt1", "zdt2", "fonseca-fleming"], nsga_pop=40, nsga_gen=60),
    False: dict(seeds=5, rays_b=11, rays_digits=5, budget_a=20000, budget_b=4000, budget_digits=3000, n_train=4000,
                n_test=1000, cost_steps=30, problems=["zdt1", "zdt2", "fonseca-fleming"], nsga_pop=100, nsga_gen=200),
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
A_METHODS = ("ParetoM3", "PNG", "MGDA", "LS")
DIGIT_METHODS = ("ParetoM3", "EPO", "PMTL", "PNG", "LS", "MGDA")
N_VAR = {"zdt1": 10, "zdt2": 10, "fonseca-fleming": 3}


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
    method: str
    seed: int
    budget: int


SCHED_A = (10.0, 1000.0, 0.5)
SCHED_B = (1.0, 10.0, 0.7)


def _convex_instance(seed):
    import cvxpy as cp

    g = torch.Generator().manual_seed(seed)
    a = torch.randn(3, 5, generator=g, dtype=torch.float64)
    z = a.mean(0) + 2 * torch.randn(5, generator=g, dtype=torch.float64)
    w = cp.Variable(3)
    cp.Problem(cp.Minimize(cp.sum_squares(a.numpy().T @ w - z.numpy())), [w >= 0, cp.sum(w) == 1]).solve()
    return a, z, torch.from_numpy(a.numpy().T @ w.value)


def run_convex(t: ConvexTask) -> dict:
    """(a): tune lr on instance seed + 10⁶, run on instance seed; distance and merit at the end."""
    def solve(seed, lr):
        a, z, xstar = _convex_instance(seed)
        F = lambda x: ((x[None] - a) ** 2).sum(1)  # noqa: E731
        x = _run_gradient(t.method, F, torch.zeros(5, dtype=torch.float64), t.budget, lr, SCHED_A, ray=None, target=z)
        if x is None:
            return math.inf, math.inf
        return float((x - xstar).norm()), weak_pareto_merit(F, x, ALPHA).value

    lr = min(LR_GRID, key=lambda lr: solve(t.seed + 10**6, lr)[0])
    dist, merit = solve(t.seed, lr)
    return {"dist": dist, "merit": merit, "lr": lr}


# ----------------------------------------------------------------------------- (b) nonconvex

@dataclass(frozen=True)
class FrontTask:
    problem: str
    method: str
    seed: int
    rays: int
    budget: int


def run_front(t: FrontTask) -> dict:
    """(b): one method on one problem, every ray; lr tuned on the middle ray from another start."""
    F, n = PROBLEMS[t.problem], N_VAR[t.problem]
    front, rays = _front(t.problem), _rays(t.rays)
    g = torch.Generator().manual_seed(t.seed)
    x0 = torch.rand(n, generator=g, dtype=torch.float64) * 2 - 1
    x_tune = torch.rand(n, generator=g, dtype=torch.float64) * 2 - 1

    def solve(x_start, k, lr):
        x = _run_gradient(t.method, F, x_start, t.budget, lr, SCHED_B, ray=tuple(rays[k]), rays=rays, index=k)
        if x is None:
            return None, math.inf
        Fx = F(x).detach().numpy()
        return x, float(np.linalg.norm(Fx - _preferred(front, rays[k])))

    mid = len(rays) // 2
    lr = min(LR_GRID, key=lambda lr: solve(x_tune, mid, lr)[1])
    points, dists, merits = [], [], []
    for k in range(len(rays)):
        x, dist = solve(x0, k, lr)
        if x is None:
            points.append([math.nan, math.nan])
            dists.append(math.inf)
            merits.append(math.inf)
            continue
        points.append(F(x).detach().numpy().tolist())
        dists.append(dist)
        merits.append(weak_pareto_merit(F, x, ALPHA, inner_steps=200).value)
    return {"points": points, "dist": dists, "merit": merits, "lr": lr}


@dataclass(frozen=True)
class NSGATask:
    problem: str
    seed: int
    rays: int
    pop: int
    gen: int


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
    ctx.config.update(size, lr_grid=list(LR_GRID), digits_lr=DIGITS_LR, alpha=ALPHA,
                      paretom3=dict(schedule_a=list(SCHED_A), schedule_b=list(SCHED_B), lr_y=LR_Y, lr_lambda=LR_LAMBDA,
                                    lr_t="lr / max(1, gamma_t * alpha)", digits=dict(gamma=1.0, lr_y=DIGITS_LR, alpha=DIGITS_ALPHA)),
                      baselines=dict(epo_eps=1e-4, png=dict(alpha=0.5, e=1e-3), pmtl_eps=1e-3))
    seeds = [ctx.seed * 100 + s for s in range(size["seeds"])]
    a_tasks = [ConvexTask(m, s, size["budget_a"]) for m in A_METHODS for s in seeds]
    b_tasks = [FrontTask(p, m, s, size["rays_b"], size["budget_b"]) for p in size["problems"] for m in B_METHODS
               for s in seeds]
    n_tasks = [NSGATask(p, s, size["rays_b"], size["nsga_pop"], size["nsga_gen"]) for p in size["problems"] for s in seeds]
    rays = _rays(size["rays_digits"])
    d_tasks = [DigitsTask(m, tuple(map(float, r)), tuple(map(tuple, rays.tolist())), k, s, size["budget_digits"],
                          size["n_train"], size["n_test"])
               for m in DIGIT_METHODS for k, r in enumerate(rays) for s in seeds]
    c_tasks = [CostTask(m, size["cost_steps"], ctx.seed) for m in (2, 5, 10)]
    a_res = ctx.map(run_convex, a_tasks, description="(a) convex")
    b_res = ctx.map(run_front, b_tasks, description="(b) nonconvex fronts")
    n_res = ctx.map(run_nsga, n_tasks, description="NSGA-II")
    d_res = ctx.map(run_digits, d_tasks, description="multi-digit classification")
    c_res = ctx.map(run_cost, c_tasks, description="cost per iteration")
    _record(ctx, size, a_tasks, a_res, b_tasks, b_res, n_tasks, n_res, d_tasks, d_res, c_tasks, c_res)


def _mean(v):
    """Mean over the finite entries (a diverged run counts in ``diverged`` instead); -1 if none."""
    v = np.asarray(v, float)
    return float(np.mean(v[np.isfinite(v)])) if np.isfinite(v).any() else -1.0


def _diverged(rows, key="dist"):
    return int(sum(not np.all(np.isfinite(np.asarray(r[key], float))) for r in rows))


def _record(ctx, size, a_tasks, a_res, b_tasks, b_res, n_tasks, n_res, d_tasks, d_res, c_tasks, c_res):
    from pymoo.indicators.hv import HV

    # (a)
    conv = {m: {"dist": _mean([r["dist"] for t, r in zip(a_tasks, a_res) if t.method == m]),
                "merit": _mean([r["merit"] for t, r in zip(a_tasks, a_res) if t.method == m]),
                "lr": [r["lr"] for t, r in zip(a_tasks, a_res) if t.method == m],
                "diverged_runs": _diverged([r for t, r in zip(a_tasks, a_res) if t.method == m])} for m in A_METHODS}
    ctx.metric("convex", conv)
    # (b)
    hv = HV(ref_point=np.array([1.1, 1.1]))
    fronts: dict = {}
    for p in size["problems"]:
        fronts[p] = {}
        for m in B_METHODS + ("NSGA-II",):
            rows = ([r for t, r in zip(b_tasks, b_res) if t.problem == p and t.method == m] if m != "NSGA-II"
                    else [r for t, r in zip(n_tasks, n_res) if t.problem == p])
            hvs = []
            for r in rows:
                P = np.asarray(r["points"], float)
                P = P[np.all(np.isfinite(P), 1)]
                hvs.append(float(hv(P)) if len(P) else 0.0)
            fronts[p][m] = {"dist": _mean([np.mean(r["dist"]) for r in rows]),
                            "hv": float(np.mean(hvs)), "diverged_runs": _diverged(rows),
                            "points_seed0": [[x if math.isfinite(x) else -1.0 for x in q] for q in rows[0]["points"]]}
            if m != "NSGA-II":
                fronts[p][m].update(merit=_mean([np.mean(r["merit"]) for r in rows]), lr=[r["lr"] for r in rows])
        fronts[p]["front_hv"] = float(hv(_front(p)))
    ctx.metric("fronts", fronts)
    # digits
    rays = _rays(size["rays_digits"])
    digits = {}
    for m in DIGIT_METHODS:
        per_ray = []
        for k in range(len(rays)):
            rows = [r for t, r in zip(d_tasks, d_res) if t.method == m and t.index == k]
            per_ray.append({"acc": np.mean([r["acc"] for r in rows], 0).tolist(),
                            "alignment": float(np.mean([r["alignment"] for r in rows])),
                            "merit": float(np.mean([r["merit"] for r in rows])),
                            "train_loss": np.mean([r["train_loss"] for r in rows], 0).tolist()})
        digits[m] = per_ray
    ctx.metric("digits", digits)
    # cost
    cost = {str(t.m): r for t, r in zip(c_tasks, c_res)}
    ctx.metric("cost_s_per_iteration", cost)

    # ---- claims
    pm = conv["ParetoM3"]
    ctx.claim("(a) convex: ParetoM3 reaches the preferred point (projection of z onto the hull), distance <= 1e-2 "
              "(baseline column: PNG with the same f0 and budget)",
              ours=pm["dist"], baseline=conv["PNG"]["dist"], holds=pm["dist"] <= 1e-2)
    # Mean over finite runs; a method with diverged runs is flagged in its metrics (diverged_runs).
    # A method with no finite run on a problem (its dist recorded as -1) counts as infinitely far there.
    def over_problems(m):
        d = [fronts[p][m]["dist"] for p in size["problems"]]
        return math.inf if min(d) < 0 else float(np.mean(d))

    ours_b = over_problems("ParetoM3")
    others = {m: over_problems(m) for m in B_METHODS[1:] + ("NSGA-II",)}
    best = min(others, key=others.get)
    ctx.claim(f"(b) nonconvex (ZDT1, ZDT2, Fonseca-Fleming): ParetoM3 has the smallest mean distance to the "
              f"preferred point of all methods (best other: {best})",
              ours=ours_b if math.isfinite(ours_b) else -1.0,  # -1: ParetoM3 had no finite run on a problem
              baseline=others[best] if math.isfinite(others[best]) else -1.0,
              holds=bool(math.isfinite(ours_b) and ours_b <= others[best]))
    ctx.claim("(a) convex: ParetoM3 is approximately weakly Pareto, u_alpha(x_T) <= 1e-3 (baseline column: PNG)",
              ours=pm["merit"], baseline=conv["PNG"]["merit"], holds=pm["merit"] <= 1e-3)
    mer_pm = float(np.mean([r["merit"] for r in digits["ParetoM3"]]))
    mer_mgda = float(np.mean([r["merit"] for r in digits["MGDA"]]))
    ctx.claim("digits: ParetoM3's merit u_alpha at the end is no larger than MGDA's at equal budget (mean over rays)",
              ours=mer_pm, baseline=mer_mgda, holds=mer_pm <= mer_mgda)
    gaps = []
    for k in range(len(rays)):
        ours = np.asarray(digits["ParetoM3"][k]["acc"])
        best_acc = np.max([digits[m][k]["acc"] for m in DIGIT_METHODS if m != "ParetoM3"], 0)
        gaps.append(float((ours - best_acc).min()))
    worst = min(gaps)
    ctx.metric("digits_worst_accuracy_gap", worst)
    ctx.claim("digits: per-task accuracy within one point of the best baseline at each ray (ours: the worst gap "
              "over rays and tasks, in accuracy; baseline: -0.01)",
              ours=worst, baseline=-0.01, holds=worst >= -0.01)
    al_pm = float(np.mean([r["alignment"] for r in digits["ParetoM3"]]))
    al_ls = float(np.mean([r["alignment"] for r in digits["LS"]]))
    ctx.claim("digits: the loss vector is better aligned with the ray (cosine with 1/r) than with linear "
              "scalarization", ours=al_pm, baseline=al_ls, holds=al_pm > al_ls)
    ratio = {m: cost["10"][m] / cost["2"][m] for m in ("ParetoM3", "MGDA", "EPO")}
    ctx.metric("cost_ratio_m10_over_m2", ratio)
    ctx.claim("cost: ParetoM3's time per iteration is flat in m (m=10 over m=2 <= 1.5; baseline: MGDA's ratio)",
              ours=ratio["ParetoM3"], baseline=ratio["MGDA"], holds=ratio["ParetoM3"] <= 1.5)

    # ---- tables
    ctx.table("(a) convex quadratics (d=5, m=3), mean over seeds", ["method", "distance to preferred", "u_alpha", "lr"],
              [(m, v["dist"], v["merit"], str(v["lr"])) for m, v in conv.items()])
    for p in size["problems"]:
        ctx.table(f"(b) {p}: mean over {size['rays_b']} rays and seeds (front HV {fronts[p]['front_hv']:.4f})",
                  ["method", "distance to preferred", "u_alpha", "hypervolume"],
                  [(m, v["dist"], v.get("merit", "-"), v["hv"])
                   for m, v in fronts[p].items() if m != "front_hv"])
    ctx.table("digits (two-digit overlay): test accuracy (left, right), alignment, u_alpha, per ray",
              ["method", "ray", "acc left", "acc right", "alignment", "u_alpha"],
              [(m, f"({rays[k][0]:.2f}, {rays[k][1]:.2f})", v["acc"][0], v["acc"][1], v["alignment"], v["merit"])
               for m, rows in digits.items() for k, v in enumerate(rows)])
    ctx.table("seconds per iteration", ["m", "ParetoM3", "MGDA", "EPO"],
              [(m, v["ParetoM3"], v["MGDA"], v["EPO"]) for m, v in cost.items()])
    ctx.text("Budget in backward passes: ParetoM3 2 per iteration, LS 1, MGDA/EPO/PMTL m, PNG m+1. "
             "ParetoM3 runs a geometric gamma schedule (config) with lr_t = lr / max(1, gamma_t alpha). "
             "(b) uses a reparametrization of ZDT's box (x1 = sigmoid, x_j = theta_j^2) for every gradient method; "
             "NSGA-II runs on the original box problem.")
    _figures(ctx, size, fronts, digits, rays)


def _figures(ctx, size, fronts, digits, rays):
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
        for m in B_METHODS + ("NSGA-II",):
            P = np.asarray(fronts[p][m]["points_seed0"], float)
            ax.scatter(P[:, 0], P[:, 1], marker=marks[m], s=22, label=m, alpha=0.8)
        ax.set_xlim(-0.05, 1.2)
        ax.set_ylim(-0.05, 1.3)
        ax.set_title(p)
        ax.set_xlabel("F1")
        ax.set_ylabel("F2")
    np.atleast_1d(axes)[0].legend(fontsize=7)
    fig.tight_layout()
    ctx.figure(fig, "fronts", "Points reached per ray (first seed); grey lines: the rays; black: the front.")
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(5, 4))
    for m in DIGIT_METHODS:
        P = np.asarray([r["train_loss"] for r in digits[m]])
        ax.scatter(P[:, 0], P[:, 1], label=m)
    lim = ax.get_xlim()[1]
    for r in rays:
        d = 1 / r
        ax.plot([0, lim], [0, lim * d[1] / d[0]], color="0.8", lw=0.5)
    ax.set_xlabel("train loss, left digit")
    ax.set_ylabel("train loss, right digit")
    ax.legend(fontsize=7)
    ctx.figure(fig, "digits_losses", "Digits: final training losses per ray and method (mean over seeds).")
    plt.close(fig)
