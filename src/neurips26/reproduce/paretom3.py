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

SIZES = {
    True: dict(seeds=3, rays_b=4, rays_digits=3, budget_a=10000, budget_b=1000, budget_digits=1000, n_train=1000,
               n_test=500, cost_steps=10, problems=["zdt1", "zdt2", "fonseca-fleming"], nsga_pop=40, nsga_gen=60,
               a_methods=("ParetoM3", "PNG", "LS"), rays_reg=3, budget_reg=1000, reg_methods=B_METHODS,
               gammas=(10.0, 100.0, 1000.0), gamma_seeds=1),  # no math task: minutes per run (full only)
    False: dict(seeds=5, rays_b=11, rays_digits=5, budget_a=20000, budget_b=4000, budget_digits=3000, n_train=4000,
                n_test=1000, cost_steps=30, problems=["zdt1", "zdt2", "fonseca-fleming"], nsga_pop=100, nsga_gen=200,
                a_methods=("ParetoM3", "PNG", "MGDA", "LS"), rays_reg=5, budget_reg=4000,
                reg_methods=B_METHODS + ("MGDA",), gammas=(1.0, 10.0, 100.0, 1000.0, 10000.0), gamma_seeds=5,
                math=dict(config="cpu", rays=5, budget=3000, n_train=2000, n_test=300, batch=32, merit_steps=20)),
}


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
SCHED_REG = SCHED_B  # the regression tasks take a Ray preference, like (b): the ray tasks' schedule
TUNE_OFFSET = 10**6  # the tuning instance / start of a run with seed s is s + TUNE_OFFSET


def _convex_instance(seed):
    import cvxpy as cp

    g = torch.Generator().manual_seed(seed)
    a = torch.randn(3, 5, generator=g, dtype=torch.float64)
    z = a.mean(0) + 2 * torch.randn(5, generator=g, dtype=torch.float64)
    w = cp.Variable(3)
    cp.Problem(cp.Minimize(cp.sum_squares(a.numpy().T @ w - z.numpy())), [w >= 0, cp.sum(w) == 1]).solve()
    return a, z, torch.from_numpy(a.numpy().T @ w.value)


def _convex_run(method, seed, budget, lr, schedule, merit) -> dict:
    a, z, xstar = _convex_instance(seed)
    F = lambda x: ((x[None] - a) ** 2).sum(1)  # noqa: E731
    x0 = torch.zeros(5, dtype=torch.float64)
    x = _run_gradient(method, F, x0, budget, lr, schedule, ray=None, target=z)
    diverged = x is None
    x = x0 if diverged else x
    return {"dist": float((x - xstar).norm()), "diverged": diverged,
            "merit": weak_pareto_merit(F, x, ALPHA).value if merit else None}


@one_thread
def run_convex(t: ConvexTask) -> dict:
    """(a): distance to the preferred point and merit u_α at the end. A diverged run counts as not
    having moved from its start x₀ = 0 (its distance and merit there), flagged ``diverged``."""
    return _convex_run(t.method, t.seed, t.budget, t.lr, SCHED_A, t.merit)


@dataclass(frozen=True)
class GammaTask:
    """ParetoM³ on convex instance ``seed`` with the penalty held at ``gamma`` for the whole run (the
    γ-sensitivity sweep; the default schedule's run is (a)'s own), lr_t = lr / max(1, γα) as in (a)."""
    seed: int
    gamma: float
    budget: int
    lr: float


@one_thread
def run_gamma(t: GammaTask) -> dict:
    return _convex_run("ParetoM3", t.seed, t.budget, t.lr, (t.gamma, t.gamma, 1.0), True)


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


def _on_flat_parameters(model, objectives):
    """``(F, x)``: the objective vector as a function of the model's parameters flattened into one
    vector (what :func:`weak_pareto_merit` takes), and their current value. ``objectives(call)``
    computes the losses with ``call(*args, **kwargs)``, the model run on the parameters x."""
    names = [n for n, _ in model.named_parameters()]
    shapes = [p.shape for _, p in model.named_parameters()]
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])

    def F(x):
        params, at = {}, 0
        for n, s in zip(names, shapes):
            k = math.prod(s)
            params[n] = x[at:at + k].view(s)
            at += k
        return objectives(lambda *args, **kwargs: torch.func.functional_call(model, params, args, kwargs))

    return F, flat


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
    F, flat = _on_flat_parameters(model, lambda call: _digit_objectives(call, (Xtr, Ytr)))
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


# ----------------------------------------------------------------------------- regression (diabetes, Linnerud)

REG_TASKS = ("diabetes", "linnerud")
# the ray of a regression run: r ∝ 1/F(x*(λ)) for the scalarized optimum x*(λ) of Σ λ_i F_i (closed form), so
# the ray meets the front, at F(x*(λ)): rays through the origin at fixed angles mostly miss these short fronts
REG_LAMBDAS = {2: None,  # m = 2: λ₁ on linspace(0.2, 0.8, k)
               3: [(0.6, 0.2, 0.2), (0.2, 0.6, 0.2), (0.2, 0.2, 0.6), (1 / 3, 1 / 3, 1 / 3), (0.45, 0.45, 0.1),
                   (0.45, 0.1, 0.45), (0.1, 0.45, 0.45)]}


def _whiten(X: np.ndarray) -> np.ndarray:
    """Centered, PCA-whitened features: the same linear model class, with the pooled least-squares Hessian
    2I (diabetes' raw features have condition number ~470, which no method undoes in the budget)."""
    Xc = X - X.mean(0)
    U, S, _ = np.linalg.svd(Xc, full_matrices=False)
    return U * math.sqrt(len(X))


def _regression_data(name: str, seed: int) -> dict:
    """The least-squares objectives F_k(x) = mean over the rows of group k of (A_k x − y_k)², as
    ``A`` (list of (n_k, p) designs), ``y`` (list of targets) and their held-out counterparts.

    * diabetes (scikit-learn's bundled raw data): a linear model with intercept on the 10 whitened features
      (sex included), target standardized; F₁, F₂: the squared error over the two sex groups (a fairness
      trade-off). Seed s draws the 80/20 train/test split (statistics from the training part).
    * linnerud: one shared linear score w of the 3 whitened exercise features predicts each of the 3
      standardized physiological outputs (weight, waist, pulse): F_j(w) = mean (X w − y_j)², m = 3. All
      20 rows train (``A_test`` is empty); the seed only moves the start.
    """
    if name == "diabetes":
        from sklearn.datasets import load_diabetes

        d = load_diabetes(scaled=False)
        X, y = d.data, d.target
        perm = np.random.default_rng(seed).permutation(len(y))
        tr, te = perm[: int(0.8 * len(y))], perm[int(0.8 * len(y)):]
        mu, sd = X[tr].mean(0), X[tr].std(0)
        Xtr = (X[tr] - mu) / sd
        _, S, Vt = np.linalg.svd(Xtr - Xtr.mean(0), full_matrices=False)
        T = Vt.T / S * math.sqrt(len(tr))  # whitening of the training features, applied to both parts

        def design(idx):
            return np.c_[((X[idx] - mu) / sd - Xtr.mean(0)) @ T, np.ones(len(idx))]

        ym, ys = y[tr].mean(), y[tr].std()
        sex_tr, sex_te = X[tr, 1], X[te, 1]
        A, At = design(tr), design(te)
        yt, yte = (y[tr] - ym) / ys, (y[te] - ym) / ys
        groups = (1.0, 2.0)
        return {"A": [A[sex_tr == g] for g in groups], "y": [yt[sex_tr == g] for g in groups],
                "A_test": [At[sex_te == g] for g in groups], "y_test": [yte[sex_te == g] for g in groups],
                "names": ["sex group 1", "sex group 2"]}
    if name == "linnerud":
        from sklearn.datasets import load_linnerud

        d = load_linnerud()
        X = _whiten(d.data)
        Y = (d.target - d.target.mean(0)) / d.target.std(0)
        return {"A": [X] * 3, "y": [Y[:, j] for j in range(3)], "A_test": [], "y_test": [],
                "names": list(d.target_names)}
    raise ValueError(f"name must be one of {REG_TASKS}, got {name!r}")


def _ls_losses(A, y, x: np.ndarray) -> np.ndarray:
    return np.array([np.mean((Ak @ x - yk) ** 2) for Ak, yk in zip(A, y)])


def _ls_scalarized(A, y, lam) -> np.ndarray:
    """argmin_x Σ λ_k F_k(x), by the normal equations (Σ λ_k A_kᵀA_k/n_k) x = Σ λ_k A_kᵀy_k/n_k."""
    H = sum(l * Ak.T @ Ak / len(Ak) for l, Ak in zip(lam, A))
    b = sum(l * Ak.T @ yk / len(Ak) for l, Ak, yk in zip(lam, A, y))
    return np.linalg.solve(H, b)


FRONT_FLOOR = 0.005


def _reg_lambdas(m: int, k: int) -> np.ndarray:
    if m == 2:
        t = np.linspace(0.2, 0.8, k)
        return np.stack([t, 1 - t], 1)
    return np.asarray(REG_LAMBDAS[m][:k], float)


def _reg_problem(name: str, seed: int, k: int) -> dict:
    """The data, the torch objectives and, per ray, r (sum 1) and its preferred point F(x*(λ)) on the front."""
    data = _regression_data(name, seed)
    A = [torch.from_numpy(a) for a in data["A"]]
    y = [torch.from_numpy(v) for v in data["y"]]
    F = lambda x: torch.stack([((Ak @ x - yk) ** 2).mean() for Ak, yk in zip(A, y)])  # noqa: E731
    pref = np.stack([_ls_losses(data["A"], data["y"], _ls_scalarized(data["A"], data["y"], lam))
                     for lam in _reg_lambdas(len(A), k)])
    rays = (1 / pref) / (1 / pref).sum(1, keepdims=True)
    return {"data": data, "F": F, "preferred": pref, "rays": rays, "p": data["A"][0].shape[1]}


def _reg_front(data: dict, n: int) -> np.ndarray:
    """The Pareto front of the convex least-squares objectives: F(x*(λ)) over a grid of the simplex (every
    Pareto point of strictly convex objectives is some scalarized optimum), its interior only (weights ≥
    FRONT_FLOOR): one sex group alone does not determine the model (its sex column is constant, collinear
    with the intercept), so the ends λ = e_i are not unique minimizers."""
    m = len(data["A"])
    if m == 2:
        t = np.linspace(0, 1, n)
        lams = np.stack([t, 1 - t], 1)
    else:
        i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
        keep = i + j <= n - 1
        lams = np.stack([i[keep], j[keep], n - 1 - i[keep] - j[keep]], 1) / (n - 1)
    lams = FRONT_FLOOR + (1 - m * FRONT_FLOOR) * lams
    return np.stack([_ls_losses(data["A"], data["y"], _ls_scalarized(data["A"], data["y"], lam)) for lam in lams])


@dataclass(frozen=True)
class RegressionTask:
    """One method on regression task ``name`` (split / start drawn with ``seed``), ray ``index`` of ``rays``,
    at step size ``lr``; ``tune`` runs skip the merit."""
    name: str
    method: str
    seed: int
    index: int
    rays: int
    budget: int
    lr: float
    tune: bool = False


@one_thread
def run_regression(t: RegressionTask) -> dict:
    """The point reached on the ray: training losses, distance to the ray's preferred point F(x*(λ)) in loss
    space, cosine of F with 1/r, u_α there and the held-out group losses (diabetes). A diverged run counts as
    not having moved from its start."""
    prob = _reg_problem(t.name, t.seed, t.rays)
    F, rays = prob["F"], prob["rays"]
    g = torch.Generator().manual_seed(t.seed)
    x0 = 0.1 * torch.randn(prob["p"], generator=g, dtype=torch.float64)
    x = _run_gradient(t.method, F, x0, t.budget, t.lr, SCHED_REG, ray=tuple(map(float, rays[t.index])), rays=rays,
                      index=t.index)
    diverged = x is None or not bool(torch.isfinite(F(x)).all())
    x = x0 if diverged else x
    L = F(x).detach().numpy()
    inv = 1 / rays[t.index]
    data = prob["data"]
    return {"losses": L.tolist(), "dist": float(np.linalg.norm(L - prob["preferred"][t.index])),
            "alignment": float(L @ inv / (np.linalg.norm(L) * np.linalg.norm(inv))), "diverged": diverged,
            "merit": None if t.tune else weak_pareto_merit(F, x, ALPHA, inner_steps=200).value,
            "test_losses": _ls_losses(data["A_test"], data["y_test"], x.numpy()).tolist()}


# ----------------------------------------------------------------------------- math word problems (tiny Llama)

MATH_FAMILIES = ("addsub", "mul")
# Llama configurations: "tiny" checks the code in seconds, "cpu" is the full run's, "gpu100m" (~99 M
# parameters) is scripts/paretom3_gpu.py's
MATH_CONFIGS = {"tiny": dict(hidden=32, ffn=64, layers=1, heads=2),
                "cpu": dict(hidden=64, ffn=256, layers=2, heads=4),
                "gpu100m": dict(hidden=768, ffn=2560, layers=12, heads=12)}
MATH_METHODS = ("ParetoM3", "EPO", "LS", "MGDA")
MATH_LR = 0.3
NAMES = ("tom", "ann", "sam", "lea", "max", "eva", "ben", "ida", "joe", "kim", "ray", "zoe")
MUL_ITEMS = ("eggs", "nuts", "pens", "cups")
ADDSUB_RANGE, MUL_RANGE = (1, 40), (2, 9)  # the operands' ranges (inclusive)


def math_family_size(family: str) -> int:
    """How many distinct problems ``family`` has (``_math_problems`` draws at most this many)."""
    if family not in MATH_FAMILIES:
        raise ValueError(f"family must be one of {MATH_FAMILIES}, got {family!r}")
    if family == "addsub":  # a, b in the range, c in 0 .. a + b
        lo, hi = ADDSUB_RANGE
        ab = np.arange(lo, hi + 1)
        return len(NAMES) * int((ab[:, None] + ab[None, :] + 1).sum())
    lo, hi = MUL_RANGE
    return len(NAMES) * len(MUL_ITEMS) * (hi - lo + 1) ** 3


def _math_problems(family: str, n: int, rng) -> list:
    """n distinct generated word problems of one family (``random.Random`` rng): addition/subtraction chains
    ("tom has 12 apples, buys 5 and gives 3 away. how many now?") or multiplication chains ("ann has 3 boxes
    of 4 rows of 5 eggs. how many eggs?"). n above ``math_family_size(family)`` is refused (the draw would
    never end: the full size once asked for 2 300 of the 1 536 multiplication problems there were then)."""
    from ._common import QA

    size = math_family_size(family)
    if n > size:
        raise ValueError(f"n = {n} problems asked of family {family!r}, which has {size} distinct ones")
    seen, out = set(), []
    while len(out) < n:
        who = rng.choice(NAMES)
        if family == "addsub":
            a, b = rng.randint(*ADDSUB_RANGE), rng.randint(*ADDSUB_RANGE)
            c = rng.randint(0, a + b)
            qa = QA(f"{who} has {a} apples, buys {b} and gives {c} away. how many now? ", str(a + b - c))
        else:
            a, b, c = rng.randint(*MUL_RANGE), rng.randint(*MUL_RANGE), rng.randint(*MUL_RANGE)
            item = rng.choice(MUL_ITEMS)
            qa = QA(f"{who} has {c} boxes of {a} rows of {b} {item}. how many {item}? ", str(a * b * c))
        if qa.prompt not in seen:
            seen.add(qa.prompt)
            out.append(qa)
    return out


def _math_model(vocab: int, config: dict) -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    from ._common import BOS, EOS

    cfg = LlamaConfig(vocab_size=vocab, hidden_size=config["hidden"], intermediate_size=config["ffn"],
                      num_hidden_layers=config["layers"], num_attention_heads=config["heads"],
                      num_key_value_heads=config["heads"], max_position_embeddings=128, tie_word_embeddings=False,
                      pad_token_id=0, bos_token_id=BOS, eos_token_id=EOS)
    return LlamaForCausalLM(cfg)


def _math_objectives(forward, batch):
    """The two answer losses (cross-entropy on the answer tokens and EOS of each family's batch)."""
    return torch.stack([forward(input_ids=ids, labels=labels).loss for ids, labels in batch])


@dataclass(frozen=True)
class MathTask:
    """One method on the two problem families at one ray; ``config`` names a ``MATH_CONFIGS`` entry."""
    method: str
    ray: tuple
    rays: tuple
    index: int
    seed: int
    budget: int
    config: str
    n_train: int
    n_test: int
    batch: int
    lr: float = MATH_LR
    merit_steps: int = 0
    device: str = "cpu"


def math_run(t: MathTask) -> dict:
    """Train the tiny Llama from scratch with ``t.method`` until ``t.budget`` backward passes (mini-batches of
    ``t.batch`` problems per family), then the held-out exact match per family (teacher-forced greedy decoding,
    ``_common.exact_match``), the training losses on a fixed subset, their cosine with 1/r, and (``merit_steps``
    > 0) u_α on that subset. Runs on ``t.device`` (scripts/paretom3_gpu.py: a GPU). A run whose losses turn
    non-finite stops there and is measured at its start, the untrained model (``diverged``, ``diverged_at``
    backward passes), as the other problems count a diverged run."""
    import random

    from ._common import CharTokenizer, exact_match, qa_tensors

    if t.config not in MATH_CONFIGS:
        raise ValueError(f"config must be one of {sorted(MATH_CONFIGS)}, got {t.config!r}")
    rng = random.Random(t.seed)
    tok = CharTokenizer()
    data = []
    for fam in MATH_FAMILIES:
        items = _math_problems(fam, t.n_train + t.n_test, rng)
        data.append((qa_tensors(tok, items[: t.n_train]), qa_tensors(tok, items[t.n_train:])))
    dev = torch.device(t.device)
    torch.manual_seed(t.seed)
    model = _math_model(tok.vocab_size, MATH_CONFIGS[t.config]).to(dev)
    opt = _make(t.method, model, _math_objectives, ray=list(t.ray), lr=t.lr, rays=np.asarray(t.rays),
                index=t.index, steps=t.budget // 2)
    if t.method == "ParetoM3":
        opt.gamma, opt.lr_y, opt.alpha = 1.0, t.lr, DIGITS_ALPHA
    g = torch.Generator().manual_seed(t.seed)
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    diverged_at = None
    while opt.backward_passes < t.budget:
        batch = []
        for (ids, labels), _ in data:
            idx = torch.randint(0, len(ids), (t.batch,), generator=g)
            batch.append((ids[idx].to(dev), labels[idx].to(dev)))
        try:
            opt.step(batch)
        except ValueError:  # non-finite losses (the only ValueError a valid task's step raises): diverged
            diverged_at = opt.backward_passes
            model.load_state_dict(start)  # counted as not having moved, as on the other problems
            break
    model.eval()
    fixed = [(ids[:256].to(dev), labels[:256].to(dev)) for (ids, labels), _ in data]
    with torch.no_grad():
        train_loss = _math_objectives(model, fixed).float().cpu().numpy()
        acc = [exact_match(model, te[0].to(dev), te[1].to(dev)) for _, te in data]
    inv = 1 / np.asarray(t.ray)
    out = {"acc": acc, "train_loss": train_loss.tolist(), "backward_passes": opt.backward_passes,
           "diverged": diverged_at is not None, "diverged_at": diverged_at,
           "alignment": float(train_loss @ inv / (np.linalg.norm(train_loss) * np.linalg.norm(inv)))}
    if t.merit_steps > 0:
        F, flat = _on_flat_parameters(model, lambda call: _math_objectives(call, fixed))
        out["merit"] = weak_pareto_merit(F, flat, ALPHA, inner_steps=t.merit_steps, tol=1e-9).value
    return out


@one_thread
def run_math(t: MathTask) -> dict:
    return math_run(t)


# ----------------------------------------------------------------------------- the run

def run(ctx: RunContext) -> None:
    size = SIZES[ctx.quick]
    seeds = [ctx.seed + s for s in range(size["seeds"])]
    tune_seed = ctx.seed + TUNE_OFFSET
    ctx.config.update(size, seed_list=seeds, tuning_seed=tune_seed, lr_grid=list(LR_GRID), digits_lr=DIGITS_LR,
                      alpha=ALPHA,
                      paretom3=dict(schedule_a=list(SCHED_A), schedule_b=list(SCHED_B), lr_y=LR_Y, lr_lambda=LR_LAMBDA,
                                    lr_t="lr / max(1, gamma_t * alpha)", digits=dict(gamma=1.0, lr_y=DIGITS_LR, alpha=DIGITS_ALPHA),
                                    schedule_regression=list(SCHED_REG)),
                      baselines=dict(epo_eps=1e-4, png=dict(alpha=0.5, e=1e-3), pmtl_eps=1e-3))
    # step sizes: each method's (per problem on (b)) chosen once on the tuning instance / start, then run on every seed
    a_methods = tuple(size.get("a_methods", A_METHODS))
    a_tune = [ConvexTask(m, tune_seed, size["budget_a"], lr, merit=False) for m in a_methods for lr in LR_GRID]
    b_tune = [FrontTask(p, m, tune_seed, size["rays_b"], size["budget_b"], lr, tune=True)
              for p in size["problems"] for m in B_METHODS for lr in LR_GRID]
    r_methods = tuple(size["reg_methods"])
    r_tune = [RegressionTask(p, m, tune_seed, size["rays_reg"] // 2, size["rays_reg"], size["budget_reg"], lr, tune=True)
              for p in REG_TASKS for m in r_methods for lr in LR_GRID]
    a_tune_res = ctx.map(run_convex, a_tune, description="(a) convex: step-size tuning")
    b_tune_res = ctx.map(run_front, b_tune, description="(b) nonconvex: step-size tuning")
    r_tune_res = ctx.map(run_regression, r_tune, description="regression: step-size tuning")
    lr_a = _choose_lr(a_tune, a_tune_res, lambda t: t.method)
    lr_b = _choose_lr(b_tune, b_tune_res, lambda t: (t.problem, t.method))
    lr_r = _choose_lr(r_tune, r_tune_res, lambda t: (t.name, t.method))
    a_tasks = [ConvexTask(m, s, size["budget_a"], lr_a[m]) for m in a_methods for s in seeds]
    b_tasks = [FrontTask(p, m, s, size["rays_b"], size["budget_b"], lr_b[p, m]) for p in size["problems"]
               for m in B_METHODS for s in seeds]
    n_tasks = [NSGATask(p, s, size["rays_b"], size["nsga_pop"], size["nsga_gen"]) for p in size["problems"] for s in seeds]
    rays = _rays(size["rays_digits"])
    d_tasks = [DigitsTask(m, tuple(map(float, r)), tuple(map(tuple, rays.tolist())), k, s, size["budget_digits"],
                          size["n_train"], size["n_test"])
               for m in DIGIT_METHODS for k, r in enumerate(rays) for s in seeds]
    c_tasks = [CostTask(m, size["cost_steps"], s) for s in seeds for m in (2, 5, 10)]
    r_tasks = [RegressionTask(p, m, s, k, size["rays_reg"], size["budget_reg"], lr_r[p, m]) for p in REG_TASKS
               for m in r_methods for s in seeds for k in range(size["rays_reg"])]
    g_tasks = [GammaTask(s, float(g), size["budget_a"], lr_a["ParetoM3"]) for s in seeds[: size["gamma_seeds"]]
               for g in size["gammas"]]
    a_res = ctx.map(run_convex, a_tasks, description="(a) convex")
    b_res = ctx.map(run_front, b_tasks, description="(b) nonconvex fronts")
    n_res = ctx.map(run_nsga, n_tasks, description="NSGA-II")
    d_res = ctx.map(run_digits, d_tasks, description="multi-digit classification")
    c_res = ctx.map(run_cost, c_tasks, description="cost per iteration")
    r_res = ctx.map(run_regression, r_tasks, description="regression (diabetes, Linnerud)")
    g_res = ctx.map(run_gamma, g_tasks, description="(a) convex: gamma sensitivity")
    summary = summarize(size, seeds, lr_a, lr_b, a_tasks, a_res, b_tasks, b_res, n_tasks, n_res, d_tasks, d_res,
                        c_tasks, c_res)
    summary["regression"] = summarize_regression(size, seeds, lr_r, r_tasks, r_res)
    summary["gamma_sweep"] = summarize_gamma(size, seeds, a_tasks, a_res, g_tasks, g_res)
    if size.get("math"):  # the full run only (minutes per run on 2 cores)
        mz = size["math"]
        m_rays = _rays(mz["rays"])
        m_tasks = [MathTask(m, tuple(map(float, r)), tuple(map(tuple, m_rays.tolist())), k, s, mz["budget"],
                            mz["config"], mz["n_train"], mz["n_test"], mz["batch"], merit_steps=mz["merit_steps"])
                   for m in MATH_METHODS for k, r in enumerate(m_rays) for s in seeds]
        m_res = ctx.map(run_math, m_tasks, description="math word problems (tiny Llama)")
        summary["math"] = {m: [{"acc": np.mean([r["acc"] for t, r in zip(m_tasks, m_res) if t.method == m
                                                and t.index == k], 0).tolist(),
                                "acc_seeds": [r["acc"] for t, r in zip(m_tasks, m_res) if t.method == m and t.index == k],
                                "alignment": _stats([r["alignment"] for t, r in zip(m_tasks, m_res)
                                                     if t.method == m and t.index == k]),
                                "merit": _stats([r["merit"] for t, r in zip(m_tasks, m_res)
                                                 if t.method == m and t.index == k]),
                                # runs cached before the flag existed all finished (a divergence raised then)
                                "diverged_runs": int(sum(r.get("diverged", False) for t, r in zip(m_tasks, m_res)
                                                         if t.method == m and t.index == k))}
                               for k in range(mz["rays"])] for m in MATH_METHODS}
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


def summarize_regression(size, seeds, lr_r, tasks, results) -> dict:
    """Per task and method: the distance to the preferred point (per seed, the mean over rays; and per
    seed x ray instance), u_α, the alignment, the hypervolume of the points over the rays relative to the
    front's (reference point: 1.1 x the largest loss of the rays' preferred points, per seed and objective),
    the points per seed and ray, the held-out group losses (diabetes)."""
    from pymoo.indicators.hv import HV

    out: dict = {}
    for p in REG_TASKS:
        out[p] = {"front_hv": [], "ref_point": []}
        hvs = {}
        for s in seeds:
            data = _regression_data(p, s)
            front = _reg_front(data, 400 if len(data["A"]) == 2 else 30)
            ref = 1.1 * _reg_problem(p, s, size["rays_reg"])["preferred"].max(0)
            hvs[s] = HV(ref_point=ref)
            out[p]["front_hv"].append(float(hvs[s](front)))
            out[p]["ref_point"].append(ref.tolist())
        for m in size["reg_methods"]:
            per_seed = [[r for t, r in zip(tasks, results) if t.name == p and t.method == m and t.seed == s]
                        for s in seeds]
            hv_rel = [float(hvs[s](np.asarray([r["losses"] for r in rs]))) / fh
                      for s, rs, fh in zip(seeds, per_seed, out[p]["front_hv"])]
            row = {"dist": _stats([np.mean([r["dist"] for r in rs]) for rs in per_seed]),
                   "dist_instances": [r["dist"] for rs in per_seed for r in rs],
                   "merit": _stats([np.mean([r["merit"] for r in rs]) for rs in per_seed]),
                   "alignment": _stats([np.mean([r["alignment"] for r in rs]) for rs in per_seed]),
                   "hv_relative": _stats(hv_rel), "lr": lr_r[p, m],
                   "diverged_runs": int(sum(r["diverged"] for rs in per_seed for r in rs)),
                   "points": [[r["losses"] for r in rs] for rs in per_seed]}
            if p == "diabetes":
                row["test_worst_group"] = _stats([np.mean([max(r["test_losses"]) for r in rs]) for rs in per_seed])
            out[p][m] = row
        out[p]["preferred"] = [_reg_problem(p, s, size["rays_reg"])["preferred"].tolist() for s in seeds]
    return out


def summarize_gamma(size, seeds, a_tasks, a_res, g_tasks, g_res) -> dict:
    """ParetoM³ on (a) per fixed γ and with the default schedule (the (a) runs of the same seeds)."""
    sweep_seeds = seeds[: size["gamma_seeds"]]
    rows = {}
    for g in size["gammas"]:
        rs = [r for t, r in zip(g_tasks, g_res) if t.gamma == g]
        rows[f"{g:g}"] = {"gamma": float(g), "dist": _stats([r["dist"] for r in rs]),
                          "merit": _stats([r["merit"] for r in rs]), "diverged_runs": int(sum(r["diverged"] for r in rs))}
    rs = [r for t, r in zip(a_tasks, a_res) if t.method == "ParetoM3" and t.seed in sweep_seeds]
    rows["schedule"] = {"schedule": list(SCHED_A), "dist": _stats([r["dist"] for r in rs]),
                        "merit": _stats([r["merit"] for r in rs]), "diverged_runs": int(sum(r["diverged"] for r in rs))}
    return {"seeds": sweep_seeds, "rows": rows}


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
    reg = summary["regression"]
    for p in REG_TASKS:
        m_obj = len(reg[p]["ParetoM3"]["points"][0][0])
        head = ["method", "distance to preferred", "u_alpha", "alignment (cos F, 1/r)", "HV / front HV", "lr",
                "diverged runs"] + (["held-out worst-group MSE"] if p == "diabetes" else [])
        ctx.table(f"regression {p} (m={m_obj}, linear model): mean ± std over {n} seeds of the mean over "
                  f"{size['rays_reg']} rays, {size['budget_reg']} backward passes",
                  head, [(m, _pm(v["dist"]), _pm(v["merit"]), _pm(v["alignment"]), _pm(v["hv_relative"]), v["lr"],
                          v["diverged_runs"]) + ((_pm(v["test_worst_group"]),) if p == "diabetes" else ())
                         for m, v in reg[p].items() if m in size["reg_methods"]])
    if "math" in summary:
        m_rays = _rays(size["math"]["rays"])
        ctx.table(f"math word problems (tiny Llama, config {size['math']['config']}): held-out exact match per family, "
                  f"alignment, u_alpha per ray; mean ± std over {n} seeds (a diverged run counts as the untrained model)",
                  ["method", "ray", "exact match add/sub", "exact match mul", "alignment", "u_alpha", "diverged runs"],
                  [(m, f"({m_rays[k][0]:.2f}, {m_rays[k][1]:.2f})", f"{v['acc'][0]:.3f}", f"{v['acc'][1]:.3f}",
                    _pm(v["alignment"]), _pm(v["merit"]), v["diverged_runs"]) for m, rows in summary["math"].items()
                   for k, v in enumerate(rows)])
    gs = summary["gamma_sweep"]
    ctx.table(f"(a) convex: ParetoM3 with the penalty gamma held fixed vs the default schedule "
              f"{list(SCHED_A)} (gamma_0, gamma_max, fraction of the run), {size['budget_a']} backward passes, "
              f"mean ± std over {len(gs['seeds'])} seed(s)",
              ["gamma", "distance to preferred", "u_alpha", "diverged runs"],
              [(k if k != "schedule" else "schedule", _pm(v["dist"]), _pm(v["merit"]), v["diverged_runs"])
               for k, v in gs["rows"].items()])
    ctx.text("Budget in backward passes: ParetoM3 2 per iteration, LS 1, MGDA/EPO/PMTL m, PNG m+1. "
             "ParetoM3 runs a geometric gamma schedule (config) with lr_t = lr / max(1, gamma_t alpha). "
             "Each method's step size (per problem on (b)) is chosen once from the grid on a separate tuning "
             "instance ((a)) or start ((b), middle ray) and used on every seed. A diverged run (non-finite losses) "
             "counts as not having moved from its start. "
             "(b) uses a reparametrization of ZDT's box (x1 = sigmoid, x_j = theta_j^2) for every gradient method; "
             "NSGA-II runs on the original box problem. Claims are decided over seeds (or paired over seeds x rays "
             "x problems) with 95 % Student-t intervals. Regression: the ray of a run is r ∝ 1/F(x*(λ)) for the "
             "scalarized least-squares optimum x*(λ), so it meets the front at its preferred point F(x*(λ)); "
             "features PCA-whitened; the diabetes seed draws the 80/20 split, Linnerud's only the start.")


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

    _regression_figure(ctx, size, summary)
    _gamma_figure(ctx, size, summary)


def _regression_figure(ctx, size, summary):
    """Diabetes: the front (seed 0's split) with every method's points per ray; Linnerud: the same in 3-D."""
    reg = summary["regression"]
    methods = tuple(size["reg_methods"])
    plt = pyplot()
    fig = plt.figure(figsize=(11, 4.5))
    marks = dict(zip(methods, "o^sDvx"))
    for col, p in enumerate(REG_TASKS):
        data = _regression_data(p, summary["seeds"][0])
        m_obj = len(data["A"])
        ax = fig.add_subplot(1, 2, col + 1, **({"projection": "3d"} if m_obj == 3 else {}))
        front = _reg_front(data, 200 if m_obj == 2 else 25)
        pref = np.asarray(reg[p]["preferred"][0])
        if m_obj == 2:
            ax.plot(front[:, 0], front[:, 1], color="k", lw=0.8, label="Pareto front")
            for q in pref:
                ax.plot([q[0] * 0.97, q[0] * 1.03], [q[1] * 0.97, q[1] * 1.03], color="0.7", lw=0.6)
            ax.scatter(pref[:, 0], pref[:, 1], marker="*", s=90, color="k", label="preferred (ray x front)")
        else:
            ax.scatter(front[:, 0], front[:, 1], front[:, 2], s=2, color="0.75", label="Pareto front")
            ax.scatter(pref[:, 0], pref[:, 1], pref[:, 2], marker="*", s=90, color="k", label="preferred")
        for j, m in enumerate(methods):
            P = np.asarray(reg[p][m]["points"][0], float)  # seed 0: one point per ray
            if m_obj == 2:
                ax.scatter(P[:, 0], P[:, 1], marker=marks[m], s=22, alpha=0.7, color=f"C{j}", label=m)
            else:
                ax.scatter(P[:, 0], P[:, 1], P[:, 2], marker=marks[m], s=22, alpha=0.7, color=f"C{j}", label=m)
        names = data["names"]
        ax.set_xlabel(f"MSE {names[0]}")
        ax.set_ylabel(f"MSE {names[1]}")
        if m_obj == 3:
            ax.set_zlabel(f"MSE {names[2]}")
        ax.set_title(f"{p} (m = {m_obj})")
        ax.legend(fontsize=6)
    fig.tight_layout()
    ctx.figure(fig, "regression_fronts", f"Regression, seed {summary['seeds'][0]}: the point each method reaches per "
                                         "ray (training losses), the front and the rays' preferred points (stars).")
    plt.close(fig)


def _gamma_figure(ctx, size, summary):
    gs = summary["gamma_sweep"]["rows"]
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5, 4))
    fixed = [v for k, v in gs.items() if k != "schedule"]
    g = [v["gamma"] for v in fixed]
    ax.errorbar(g, [v["dist"]["mean"] for v in fixed], yerr=[v["dist"]["std"] for v in fixed], marker="o",
                label="distance, gamma fixed")
    ax.errorbar(g, [v["merit"]["mean"] for v in fixed], yerr=[v["merit"]["std"] for v in fixed], marker="s",
                label="u_alpha, gamma fixed")
    ax.axhline(gs["schedule"]["dist"]["mean"], color="C0", ls="--", label="distance, default schedule")
    ax.axhline(max(gs["schedule"]["merit"]["mean"], 1e-16), color="C1", ls="--", label="u_alpha, default schedule")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("gamma")
    ax.set_ylabel("at the end of the run")
    ax.legend(fontsize=7)
    ctx.figure(fig, "gamma_sensitivity", "(a) convex: ParetoM3's final distance to the preferred point and merit "
                                         "u_alpha with gamma held fixed (mean over the sweep's seeds), against "
                                         "the default schedule (dashed).")
    plt.close(fig)
