"""Reproduction: RLNS, regularized large neighbourhood search as an MCMC sampler, and
Fenchel–Young learning through it.

1. The sampler's exactness, measured: on k-subset (n = 10, k = 3; 120 states) and a 5-job,
   3-agent generalized assignment, the exact transition matrix's stationarity residual
   ‖πP − π‖∞ and the total-variation distance of the empirical distribution of RLNS samples
   to the Gibbs distribution.
2. Learning θ from features, end to end, with (a) RLNS-FY (entropic RLNS chains started at
   the label, K moves), (b) PyEPO's perturbed Fenchel–Young loss with an exact global
   solver (sorting for k-subset, a HiGHS MILP via scipy for generalized assignment),
   (c) two-stage regression of θ on the observed costs (MSE). Reported: test decision
   regret, training time, and global-solver calls during training.

   * k-subset selection, n = 25 items, k = 5: item features x ∈ R⁵, θᵢ a degree-4
     polynomial of a fixed projection of xᵢ with multiplicative noise (the data model of
     PyEPO's shortest-path/knapsack generators), label = the top-k set.
   * Generalized assignment (4 agents × 12 jobs quick, 5 × 15 full), Chu–Beasley type D: weights w_ij ~ U{1..100}, capacities
     0.8·Σ_j w_ij / m, costs c_ij = 111 − w_ij + e_ij plus a feature-driven part
     10·((x_ijᵀb)/√p)²; labels by scipy.optimize.milp (HiGHS). The model sees (x_ij, w_ij).
3. Scaling: the time of one exact MILP solve of type-D instances of growing size against
   the time of one RLNS move of the learning chains.

   * Stochastic vehicle scheduling (25 tasks quick, 40 full; :class:`VspInstance` documents
     the generator): arc costs learned from arc features, decisions by the path-cover LP,
     regret measured with the true stochastic (delay-propagating) cost, relative to the
     label (the first-order deterministic optimum; a negative regret beats the label). RLNS
     there is the perturbation form (Gaussian noise, blocks re-optimized by HiGHS).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch

from neurips26.combinatorial import (RLNS, Entropic, FenchelYoungLoss, GeneralizedAssignment, KSubset, RandomBlock,
                                     empirical_distribution, gibbs, is_irreducible, solve_binary_milp, tv_distance)

from ._common import pyplot
from ._harness import RunContext

SIZES = {
    True: dict(vsp_tasks=25, vsp_train=30, vsp_test=20, vsp_epochs=4, vsp_chains=4,
               tv_samples=(1000, 50, 3), ks_train=200, ks_test=100, gap_size=(4, 12), gap_train=60, gap_test=30,
               epochs=8, gap_epochs=6, scaling=((4, 12), (6, 20), (8, 30)), time_limit=10.0, seeds=(0,),
               gap_large=(6, 20), gap_large_train=12, gap_large_test=6,
               rlns_steps=5, chains=8, pfy_samples=4),
    False: dict(vsp_tasks=40, vsp_train=100, vsp_test=50, vsp_epochs=10, vsp_chains=4,
                tv_samples=(2000, 100, 3), ks_train=1000, ks_test=300, gap_size=(5, 15), gap_train=100,
                gap_test=60, epochs=20, gap_epochs=8, scaling=((5, 15), (8, 30), (10, 40), (15, 60)), time_limit=60.0,
                gap_large=(8, 30), gap_large_train=40, gap_large_test=20,
                seeds=(0, 1, 2), rlns_steps=5, chains=8, pfy_samples=4),
}
METHODS = ("rlns-fy", "pfy-exact", "two-stage")


# --- 1. exactness ----------------------------------------------------------------------------

def small_gap() -> GeneralizedAssignment:
    w = np.array([[3, 4, 2, 5, 3], [4, 2, 3, 3, 4], [2, 5, 4, 2, 3]], dtype=float)
    return GeneralizedAssignment(w, [8, 8, 8])


def exactness(problem, block: int, seed: int, samples: tuple[int, int, int]) -> dict:
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=problem.n_vars)
    sampler = RLNS(problem, RandomBlock(block), Entropic(1.0))
    states = problem.enumerate()
    P = sampler.transition_matrix(states, theta)
    pi = gibbs(states, theta)
    chains, snapshots, spacing = samples
    Y = sampler.run(problem.random_feasible(rng, chains), theta, 20 * spacing, rng)
    kept = np.concatenate(sampler.run(Y, theta, snapshots * spacing, rng, every=spacing))
    return {"states": len(states), "irreducible": bool(is_irreducible(P)),
            "stationarity_residual": float(np.abs(pi @ P - pi).max()), "samples": len(kept),
            "tv_distance": tv_distance(empirical_distribution(kept, states), pi)}


# --- 2. learning -------------------------------------------------------------------------------

class ItemModel(torch.nn.Module):
    """θ̂ of every item (or job-agent pair) from its own features, one MLP shared by all."""

    def __init__(self, features: int, hidden: int = 32):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(features, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 1))

    def forward(self, x):  # (batch, items, features) -> (batch, items)
        return self.net(x).squeeze(-1)


def ksubset_data(count: int, seed: int, n: int = 25, k: int = 5, p: int = 5, deg: int = 4, noise: float = 0.5):
    rng = np.random.default_rng(seed)
    b = np.random.default_rng(12345).integers(0, 2, size=p)  # one projection for the whole task
    X = rng.normal(size=(count, n, p))
    theta = ((X @ b) / math.sqrt(p) + 3) ** deg / 3 ** (deg - 1) * rng.uniform(1 - noise, 1 + noise, size=(count, n))
    Y = np.zeros((count, n), dtype=np.int8)
    np.put_along_axis(Y, np.argsort(-theta, axis=1)[:, :k], 1, axis=1)
    return X, theta, Y


def top_k(theta: np.ndarray, k: int) -> np.ndarray:
    Y = np.zeros(theta.shape, dtype=np.int8)
    np.put_along_axis(Y, np.argsort(-theta, axis=-1)[..., :k], 1, axis=-1)
    return Y


class GapInstance:
    """One type-D generalized assignment instance (m agents, J jobs), costs to minimize.
    Type-D capacities are tight and a small draw can be infeasible: such draws are
    redrawn. ``optimal`` is the exact assignment for the true costs."""

    def __init__(self, rng, m: int, J: int, p: int = 4, time_limit: float | None = None, tries: int = 20):
        self.m, self.J = m, J
        b = np.random.default_rng(54321).normal(size=p)
        for _ in range(tries):
            self.w = rng.integers(1, 101, size=(m, J)).astype(float)
            self.cap = np.floor(0.8 * self.w.sum(axis=1) / m)
            self.x = rng.normal(size=(J, m, p))
            self.cost = (111 - self.w.T + rng.integers(-10, 11, size=(J, m)) + 10 * ((self.x @ b) / math.sqrt(p)) ** 2)
            self.problem = GeneralizedAssignment(self.w, self.cap)
            try:
                self.optimal = self.solve(self.cost.reshape(-1), time_limit)
                break
            except RuntimeError:
                continue
        else:
            raise RuntimeError(f"no feasible type-D instance with {m} agents and {J} jobs in {tries} draws")
        # features of the pair (j, i): its x and its weight (known at decision time)
        self.features = np.concatenate([self.x, self.w.T[..., None] / 100.0], axis=-1).reshape(J * m, p + 1)

    def solve(self, cost_flat: np.ndarray, time_limit: float | None = None) -> np.ndarray:
        """The exact assignment minimizing cost (J·m flat, job-major) by HiGHS's MILP."""
        return solve_binary_milp(cost_flat, self.problem.milp(), time_limit)


def make_pyepo_model(solve, n_vars: int, maximize: bool):
    """A PyEPO optModel around an exact solver ``solve(c) -> y``."""
    from pyepo import EPO
    from pyepo.model.opt import optModel

    class Exact(optModel):
        def _getModel(self):
            self.modelSense = EPO.MAXIMIZE if maximize else EPO.MINIMIZE
            return None, list(range(n_vars))

        def setObj(self, c):
            self.c = np.asarray(c, dtype=float)

        def solve(self):
            y = solve(self.c)
            return y.astype(float), float(self.c @ y)

    return Exact()


class CountingSolver:
    def __init__(self, solve):
        self.solve, self.calls, self.seconds = solve, 0, 0.0

    def __call__(self, c):
        self.calls += 1
        t = time.perf_counter()
        try:
            return self.solve(c)
        finally:
            self.seconds += time.perf_counter() - t


def train(method: str, X, make_loss, epochs: int, seed: int, batch: int = 16, lr: float = 1e-2):
    """Train an ItemModel; ``make_loss(method)`` returns loss(theta_hat, idx) for a batch."""
    torch.manual_seed(seed)
    model = ItemModel(X.shape[-1]).double()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    Xt = torch.as_tensor(X)
    loss_fn = make_loss(method)
    rng = np.random.default_rng(seed)
    t = time.perf_counter()
    for _ in range(epochs):
        order = rng.permutation(len(X))
        for start in range(0, len(X), batch):
            idx = order[start: start + batch]
            loss = loss_fn(model(Xt[idx]), idx)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return model, time.perf_counter() - t


def run_ksubset(cfg, seed: int, n: int = 25, k: int = 5) -> dict:
    X, theta, Y = ksubset_data(cfg["ks_train"], seed, n, k)
    Xte, theta_te, Yte = ksubset_data(cfg["ks_test"], seed + 1000, n, k)
    sampler = RLNS(KSubset(n, k), RandomBlock(4), Entropic(1.0))
    solver = CountingSolver(lambda c: top_k(c, k))

    def make_loss(method):
        if method == "rlns-fy":
            fy = FenchelYoungLoss(sampler, steps=cfg["rlns_steps"], chains=cfg["chains"], seed=seed)
            return lambda th, idx: fy(th, Y[idx])
        if method == "pfy-exact":
            import pyepo

            pfy = pyepo.func.perturbedFenchelYoung(make_pyepo_model(solver, n, maximize=True),
                                                   n_samples=cfg["pfy_samples"], sigma=1.0, seed=seed)
            return lambda th, idx: pfy(th, torch.as_tensor(Y[idx], dtype=th.dtype))
        return lambda th, idx: torch.nn.functional.mse_loss(th, torch.as_tensor(theta[idx]))

    out = {}
    for method in METHODS:
        solver.calls = 0
        model, seconds = train(method, X, make_loss, cfg["epochs"], seed)
        with torch.no_grad():
            pred = model(torch.as_tensor(Xte)).numpy()
        best = (theta_te * Yte).sum(1)
        regrets = (best - (theta_te * top_k(pred, k)).sum(1)) / best
        out[method] = {"regret": float(np.mean(regrets)), "train_s": seconds, "global_solver_calls": solver.calls,
                       "regrets": [float(r) for r in regrets]}
    out["rlns-fy"]["local_block_solves"] = cfg["epochs"] * cfg["ks_train"] * cfg["chains"] * cfg["rlns_steps"]
    return out


def run_gap(cfg, seed: int, size=None, n_train=None, n_test=None, methods=METHODS, time_limit=None) -> dict:
    """Learn type-D GAP costs with each of ``methods``; the defaults are the main task's.
    Instances are solved exactly (within ``time_limit``) for labels and test optima."""
    m, J = size or cfg["gap_size"]
    rng = np.random.default_rng(seed)
    t = time.perf_counter()
    train_set = [GapInstance(rng, m, J, time_limit=time_limit) for _ in range(n_train or cfg["gap_train"])]
    label_s = (time.perf_counter() - t) / len(train_set)
    test_set = [GapInstance(rng, m, J, time_limit=time_limit) for _ in range(n_test or cfg["gap_test"])]
    labels = np.stack([inst.optimal for inst in train_set])
    X = np.stack([inst.features for inst in train_set])
    cost = np.stack([inst.cost.reshape(-1) for inst in train_set])
    # one RLNS per instance (its own weights and capacities); chains of a batch run per instance
    samplers = [RLNS(inst.problem, RandomBlock(2), Entropic(1.0)) for inst in train_set]
    current = {"inst": None}
    solver = CountingSolver(lambda c: train_set[current["inst"]].solve(c))

    def make_loss(method):
        if method == "rlns-fy":
            fys = [FenchelYoungLoss(s, steps=cfg["rlns_steps"], chains=cfg["chains"], seed=seed + i)
                   for i, s in enumerate(samplers)]
            # θ = −cost: the sampler maximizes
            return lambda ch, idx: torch.stack([fys[i](-ch[j: j + 1], labels[i: i + 1]) for j, i in enumerate(idx)]).mean()
        if method == "pfy-exact":
            import pyepo

            pfys = []
            for i in range(len(train_set)):
                pfys.append(pyepo.func.perturbedFenchelYoung(make_pyepo_model(solver, m * J, maximize=False),
                                                             n_samples=cfg["pfy_samples"], sigma=5.0, seed=seed + i))

            def loss(ch, idx):
                parts = []
                for j, i in enumerate(idx):
                    current["inst"] = i
                    parts.append(pfys[i](ch[j: j + 1], torch.as_tensor(labels[i: i + 1], dtype=ch.dtype)))
                return torch.stack(parts).mean()

            return loss
        return lambda ch, idx: torch.nn.functional.mse_loss(ch, torch.as_tensor(cost[idx])) / 100.0

    best = [float(inst.cost.reshape(-1) @ inst.optimal) for inst in test_set]
    out = {"label_solve_s": label_s}
    for method in methods:
        solver.calls, solver.seconds = 0, 0.0
        model, seconds = train(method, X, make_loss, cfg["gap_epochs"], seed, lr=3e-3)
        regrets = []
        with torch.no_grad():
            for inst, opt in zip(test_set, best):
                pred = model(torch.as_tensor(inst.features[None])).numpy()[0]
                regrets.append((float(inst.cost.reshape(-1) @ inst.solve(pred, time_limit)) - opt) / opt)
        out[method] = {"regret": float(np.mean(regrets)), "train_s": seconds, "global_solver_calls": solver.calls,
                       "global_solver_s": solver.seconds, "regrets": [float(r) for r in regrets]}
    return out


class VspInstance:
    """A stochastic vehicle scheduling instance (the generator of the benchmark, simplified
    and documented here).

    Tasks: start times uniform over 10 h (minutes), durations U[20, 60], start and end
    places uniform in a 30 × 30 km square, travel at 1 km/min. Arc i → j when task j can
    start after i ends plus the travel and within 2 h of it; slack_ij is the spare time.
    Every task has its source (a new vehicle: cost 100 + 10 travel) and sink (10) arcs.
    Scenarios: each task's own delay is exponential with a task-specific mean U[2, 20] min;
    along a route the delay propagates, D_j = δ_j + max(D_i − slack_ij, 0), and each minute
    of delay costs 2. The true cost of a schedule is vehicles + travel + 2·E[Σ_j D_j] (over
    the scenarios); it is not linear in the arcs. The deterministic problem is the path-cover
    LP with the first-order arc costs c_ij = travel_ij + 2·E[max(δ_i − slack_ij, 0)], whose
    optimum is the label. The model sees per arc (slack, travel, the tail's delay mean,
    is-source, is-sink), not the delay cost itself.
    """

    def __init__(self, rng, n_tasks: int = 25, scenarios: int = 30):
        from neurips26.combinatorial import VehicleScheduling

        start = np.sort(rng.uniform(0, 600, n_tasks))
        end = start + rng.uniform(20, 60, n_tasks)
        p0, p1 = rng.uniform(0, 30, (n_tasks, 2)), rng.uniform(0, 30, (n_tasks, 2))
        travel = np.linalg.norm(p1[:, None, :] - p0[None, :, :], axis=-1)  # end of i to start of j
        slack = start[None, :] - end[:, None] - travel
        ok = (slack >= 0) & (start[None, :] - end[:, None] <= 120)
        ti, tj = np.nonzero(ok)
        self.mean_delay = rng.uniform(2, 20, n_tasks)
        self.delays = rng.exponential(self.mean_delay, size=(scenarios, n_tasks))
        arcs = [(-1, t) for t in range(n_tasks)] + [(t, -2) for t in range(n_tasks)] + list(zip(ti, tj))
        self.problem = VehicleScheduling(n_tasks, arcs)
        self.slack = np.concatenate([np.zeros(2 * n_tasks), slack[ti, tj]])
        self.travel = np.concatenate([np.full(2 * n_tasks, 10.0), travel[ti, tj]])
        is_source = np.r_[np.ones(n_tasks), np.zeros(n_tasks + len(ti))]
        is_sink = np.r_[np.zeros(n_tasks), np.ones(n_tasks), np.zeros(len(ti))]
        tail_delay = np.r_[np.zeros(n_tasks), self.mean_delay, self.mean_delay[ti]]
        expected_late = np.r_[np.zeros(2 * n_tasks),
                              np.maximum(self.delays[:, ti] - slack[ti, tj][None, :], 0).mean(axis=0)]
        self.linear_cost = self.travel + 100 * is_source + 2 * expected_late
        self.features = np.stack([self.slack / 60, self.travel / 30, tail_delay / 10, is_source, is_sink], axis=1)
        self.optimal = self.solve(self.linear_cost)

    def solve(self, cost: np.ndarray) -> np.ndarray:
        """The path cover minimizing a linear arc cost (HiGHS; the LP is integral, solved as a MILP)."""
        return solve_binary_milp(cost, self.problem.milp())

    def true_cost(self, y: np.ndarray) -> float:
        """Vehicles + travel + 2 · E[total propagated delay], routes followed in time order."""
        arcs, used = self.problem.arcs, np.asarray(y).astype(bool)
        pred = np.full(self.problem.n_tasks, -1)
        slack = np.zeros(self.problem.n_tasks)
        for k in np.nonzero(used & (arcs[:, 0] >= 0) & (arcs[:, 1] >= 0))[0]:
            pred[arcs[k, 1]], slack[arcs[k, 1]] = arcs[k, 0], self.slack[k]
        D = np.zeros_like(self.delays)
        for j in range(self.problem.n_tasks):  # tasks are sorted by start: predecessors come first
            carried = np.maximum(D[:, pred[j]] - slack[j], 0) if pred[j] >= 0 else 0.0
            D[:, j] = self.delays[:, j] + carried
        fixed = float(self.travel[used].sum() + 100 * used[: self.problem.n_tasks].sum())
        return fixed + 2 * float(D.sum(axis=1).mean())


def run_vsp(cfg, seed: int) -> dict:
    from neurips26.combinatorial import MILPLocalSolver, Perturbed

    rng = np.random.default_rng(seed)
    train_set = [VspInstance(rng, cfg["vsp_tasks"]) for _ in range(cfg["vsp_train"])]
    test_set = [VspInstance(rng, cfg["vsp_tasks"]) for _ in range(cfg["vsp_test"])]
    current = {"inst": None}
    solver = CountingSolver(lambda c: train_set[current["inst"]].solve(-c))  # PyEPO maximizes θ = −cost

    def make_loss(method, i):
        inst = train_set[i]
        y = torch.as_tensor(inst.optimal[None], dtype=torch.float64)
        if method == "rlns-fy":
            sampler = RLNS(inst.problem, RandomBlock(3), Perturbed(5.0, "gaussian"), local_solver=MILPLocalSolver())
            fy = FenchelYoungLoss(sampler, steps=cfg["rlns_steps"], chains=cfg["vsp_chains"], seed=seed + i)
            return lambda th: fy(th, inst.optimal[None])
        if method == "pfy-exact":
            import pyepo

            pfy = pyepo.func.perturbedFenchelYoung(make_pyepo_model(solver, inst.problem.n_vars, maximize=True),
                                                   n_samples=cfg["pfy_samples"], sigma=5.0, seed=seed + i)
            return lambda th: pfy(th, y)
        target = torch.as_tensor(-inst.linear_cost[None])
        return lambda th: torch.nn.functional.mse_loss(th, target) / 100.0

    out = {}
    for method in METHODS:
        solver.calls, solver.seconds = 0, 0.0
        torch.manual_seed(seed)
        model = ItemModel(5).double()
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        losses = [make_loss(method, i) for i in range(len(train_set))]
        order_rng = np.random.default_rng(seed)
        t = time.perf_counter()
        for _ in range(cfg["vsp_epochs"]):
            for i in order_rng.permutation(len(train_set)):
                current["inst"] = i
                loss = losses[i](model(torch.as_tensor(train_set[i].features[None])))
                opt.zero_grad()
                loss.backward()
                opt.step()
        seconds = time.perf_counter() - t
        regrets = []
        with torch.no_grad():
            for inst in test_set:
                theta_hat = model(torch.as_tensor(inst.features[None])).numpy()[0]
                label = inst.true_cost(inst.optimal)
                regrets.append((inst.true_cost(inst.solve(-theta_hat)) - label) / label)
        out[method] = {"regret": float(np.mean(regrets)), "train_s": seconds, "global_solver_calls": solver.calls,
                       "regrets": [float(r) for r in regrets]}
    return out


def scaling(sizes, seed: int, chains: int = 8, time_limit: float = 30.0) -> list[dict]:
    rows = []
    rng = np.random.default_rng(seed)
    for m, J in sizes:
        for _ in range(5):  # time the solve of the first feasible draw
            t = time.perf_counter()
            try:
                inst = GapInstance(rng, m, J, time_limit=time_limit, tries=1)
            except RuntimeError:
                continue
            milp_s = time.perf_counter() - t
            break
        else:
            raise RuntimeError(f"no feasible {m}x{J} type-D draw within the time limit")
        y = inst.optimal
        sampler = RLNS(inst.problem, RandomBlock(2), Entropic(1.0))
        Y0 = np.repeat(y[None], chains, axis=0)
        t = time.perf_counter()
        sampler.run(Y0, -inst.cost.reshape(-1), 10, rng)
        rows.append({"agents": m, "jobs": J, "milp_s": milp_s, "hit_time_limit": milp_s >= time_limit * 0.99,
                     "rlns_move_s": (time.perf_counter() - t) / 10})
    return rows


# --- the experiment ------------------------------------------------------------------------------

def run(ctx: RunContext) -> None:
    cfg = SIZES[ctx.quick]
    seeds = [ctx.seed + s for s in cfg["seeds"]]
    ctx.config.update(seeds=seeds, rlns_steps=cfg["rlns_steps"], chains=cfg["chains"], pfy_samples=cfg["pfy_samples"],
                      ksubset=dict(n=25, k=5, train=cfg["ks_train"], test=cfg["ks_test"], block=4),
                      gap=dict(agents=cfg["gap_size"][0], jobs=cfg["gap_size"][1], train=cfg["gap_train"],
                               test=cfg["gap_test"], block=2, type="D"), milp_time_limit_s=cfg["time_limit"])
    summary = summarize(_run(ctx, cfg, seeds), cfg)
    for name, value in summary.items():  # the metrics, in results.json's order
        ctx.metric(name, value)
    claims(ctx, summary, cfg)
    tables(ctx, summary, cfg)
    plots(ctx, summary)


@dataclass(frozen=True)
class Step:
    """One task of the sweep: ``kind`` names the measurement (exactness of the sampler on one
    problem, learning one task for one seed, the large GAP, the scaling rows); every task of a
    kind reads its sizes from ``SIZES[quick]``."""

    kind: str
    quick: bool
    seed: int
    target: str = ""  # the exactness problem, or the learning task


EXACTNESS = {"k-subset n=10 k=3": (lambda: KSubset(10, 3), 3), "GAP 5x3": (small_gap, 2)}
LEARNERS = {"k-subset": lambda cfg, s: run_ksubset(cfg, s), "gap": lambda cfg, s: run_gap(cfg, s),
            "vsp": lambda cfg, s: run_vsp(cfg, s)}


def run_step(step: Step) -> dict:
    cfg = SIZES[step.quick]
    if step.kind == "exactness":
        make, block = EXACTNESS[step.target]
        return exactness(make(), block, step.seed, cfg["tv_samples"])
    if step.kind == "learning":
        return LEARNERS[step.target](cfg, step.seed)
    if step.kind == "gap-large":
        # RLNS-FY where the global solver is slow: the exact-solver loss is not run there (its
        # training time is projected in summarize)
        return run_gap(cfg, step.seed, size=cfg["gap_large"], n_train=cfg["gap_large_train"],
                       n_test=cfg["gap_large_test"], methods=("rlns-fy", "two-stage"), time_limit=cfg["time_limit"])
    if step.kind == "scaling":
        return {"rows": scaling(cfg["scaling"], step.seed, time_limit=cfg["time_limit"])}
    raise ValueError(f"unknown step kind {step.kind!r}")


def _run(ctx: RunContext, cfg, seeds: list[int]) -> dict:
    """Every measurement, as tasks of ``ctx.map``: the sampler's exactness, learning on the three
    tasks per seed, learning on the large GAP, and the MILP-vs-RLNS-move scaling."""
    q = ctx.quick
    checks = ctx.map(run_step, [Step("exactness", q, ctx.seed, name) for name in EXACTNESS],
                     "exactness of the sampler")
    learning = {}
    for task, label in (("k-subset", "k-subset"), ("gap", "GAP"), ("vsp", "vehicle scheduling")):
        learning[task] = ctx.map(run_step, [Step("learning", q, s, task) for s in seeds],
                                 f"{label} learning (3 methods)")
    large, rows = ctx.map(run_step, [Step("gap-large", q, ctx.seed), Step("scaling", q, ctx.seed)],
                          "large GAP and scaling")
    return {"exactness": dict(zip(EXACTNESS, checks)), "learning": learning, "gap_large": large,
            "scaling": rows["rows"]}


def summarize(raw, cfg) -> dict:
    """The metrics: the exactness checks; per task and method, the mean (and spread) of the
    test regret, training time and solver calls over seeds, and every seed's run; the large
    GAP with exact-solver FY's projected training time (its solver calls, as counted on the
    main task, times the measured time of one exact solve at this size); the scaling rows."""
    learning = {}
    for task, runs in raw["learning"].items():
        learning[task] = {}
        for method in METHODS:
            vals = [r[method] for r in runs]
            learning[task][method] = {
                "regret": float(np.mean([v["regret"] for v in vals])),
                "regret_std": float(np.std([v["regret"] for v in vals])),
                "train_s": float(np.mean([v["train_s"] for v in vals])),
                "global_solver_calls": int(np.mean([v["global_solver_calls"] for v in vals])),
            }
    large = dict(raw["gap_large"])
    calls = cfg["gap_epochs"] * cfg["gap_large_train"] * cfg["pfy_samples"]
    large["pfy-exact-projected"] = {"global_solver_calls": calls, "train_s": calls * large["label_solve_s"]}
    return {"exactness": raw["exactness"], "learning": learning, "learning_runs": raw["learning"], "gap_large": large,
            "scaling": raw["scaling"]}


def claims(ctx: RunContext, summary, cfg) -> None:
    checks = summary["exactness"]
    worst = max(v["stationarity_residual"] for v in checks.values())
    ctx.claim("RLNS (entropic) leaves the Gibbs distribution invariant: max ‖πP − π‖∞ (baseline: the 1e-12 bound)",
              worst, 1e-12, worst < 1e-12 and all(v["irreducible"] for v in checks.values()))
    tv = max(v["tv_distance"] for v in checks.values())
    n_samples = min(v["samples"] for v in checks.values())
    bound = 0.02 if n_samples >= 200_000 else 0.04
    ctx.claim(f"RLNS samples follow the Gibbs distribution: max TV distance with {n_samples} samples "
              f"(baseline: the bound {bound})", tv, bound, tv < bound)

    learning = summary["learning"]
    for task in learning:
        ours, exact = learning[task]["rlns-fy"], learning[task]["pfy-exact"]
        two = learning[task]["two-stage"]
        # paired over the test instances (of every seed): ours no worse than the exact-solver loss by more
        # than the tolerance, with the whole 95% interval of the paired regret difference beyond -tolerance
        runs = summary["learning_runs"][task]
        tolerance = max(0.1 * exact["regret"], 0.005)
        ctx.compare(f"{task}: RLNS-FY learns as well as exact-solver perturbed FY (test regret within 10 % relative or "
                    f"0.005 absolute = {tolerance:.4f}, paired over test instances; two-stage regression: "
                    f"{two['regret']:.4f})", [x for r in runs for x in r["rlns-fy"]["regrets"]],
                    [x for r in runs for x in r["pfy-exact"]["regrets"]], better="lower", margin=-tolerance)
        ctx.claim(f"{task}: RLNS-FY trains without global solver calls (exact-solver FY: {exact['global_solver_calls']}); "
                  "training seconds, ours vs exact FY", ours["train_s"], exact["train_s"],
                  ours["global_solver_calls"] == 0 and ours["train_s"] <= exact["train_s"])

    large = summary["gap_large"]
    ctx.claim(f"GAP {cfg['gap_large'][0]}x{cfg['gap_large'][1]}: RLNS-FY trains where exact-solver FY is too slow "
              "(training seconds, ours vs exact FY's projection) and still beats two-stage regression "
              f"(regret {large['rlns-fy']['regret']:.4f} vs {large['two-stage']['regret']:.4f})",
              large["rlns-fy"]["train_s"], large["pfy-exact-projected"]["train_s"],
              large["rlns-fy"]["train_s"] * 10 < large["pfy-exact-projected"]["train_s"]
              and large["rlns-fy"]["regret"] <= large["two-stage"]["regret"])

    rows = summary["scaling"]
    ratio_small = rows[0]["milp_s"] / rows[0]["rlns_move_s"]
    ratio_large = rows[-1]["milp_s"] / rows[-1]["rlns_move_s"]
    ctx.claim("RLNS scales where the global solver slows: MILP/RLNS-move time ratio at the largest size "
              f"({rows[-1]['agents']}x{rows[-1]['jobs']}) vs at the smallest", ratio_large, ratio_small,
              ratio_large > ratio_small)


def tables(ctx: RunContext, summary, cfg) -> None:
    ctx.table("RLNS with entropic regularization is exact block Gibbs sampling",
              ["problem", "states", "irreducible", "‖πP − π‖∞", "samples", "TV(empirical, Gibbs)"],
              [(k, v["states"], v["irreducible"], v["stationarity_residual"], v["samples"], v["tv_distance"])
               for k, v in summary["exactness"].items()])
    ctx.table("Decision regret on test instances (relative optimality gap), training time, solver calls",
              ["task", "method", "test regret", "± std", "train s", "global solver calls in training"],
              [(t, m, v["regret"], v["regret_std"], v["train_s"], v["global_solver_calls"])
               for t, d in summary["learning"].items() for m, v in d.items()])
    large = summary["gap_large"]
    calls = large["pfy-exact-projected"]["global_solver_calls"]
    ctx.table(f"Type-D GAP at {cfg['gap_large'][0]}×{cfg['gap_large'][1]} (one exact solve: "
              f"{large['label_solve_s']:.2f} s)", ["method", "test regret", "train s", "global solver calls in training"],
              [("rlns-fy", large["rlns-fy"]["regret"], large["rlns-fy"]["train_s"], 0),
               ("two-stage", large["two-stage"]["regret"], large["two-stage"]["train_s"], 0),
               ("pfy-exact (projected, not run)", "—", large["pfy-exact-projected"]["train_s"], calls)])
    ctx.table("Type-D GAP: one exact MILP solve (HiGHS) vs one RLNS move of 8 chains",
              ["agents", "jobs", "MILP s", "hit the time limit", "RLNS move s", "ratio"],
              [(r["agents"], r["jobs"], r["milp_s"], r["hit_time_limit"], r["rlns_move_s"], r["milp_s"] / r["rlns_move_s"])
               for r in summary["scaling"]])


def plots(ctx: RunContext, summary) -> None:
    plt = pyplot()
    learning = summary["learning"]
    fig, axes = plt.subplots(1, 3, figsize=(16, 4))
    for ax, task in zip(axes, learning):
        vals = learning[task]
        ax.bar(list(vals), [v["regret"] for v in vals.values()], yerr=[v["regret_std"] for v in vals.values()],
               color=["tab:purple", "tab:orange", "tab:gray"])
        ax.set_title(f"{task}: test decision regret")
        ax.set_ylabel("relative regret")
        for i, v in enumerate(vals.values()):
            ax.annotate(f"{v['global_solver_calls']} solves", (i, v["regret"]), ha="center", va="bottom", fontsize=8)
    ctx.figure(fig, "regret", "Test decision regret per method (annotated: global solver calls during training).")
    plt.close(fig)
    rows = summary["scaling"]
    fig, ax = plt.subplots(figsize=(5.5, 4))
    size = [r["agents"] * r["jobs"] for r in rows]
    ax.loglog(size, [r["milp_s"] for r in rows], "o-", label="exact MILP solve (HiGHS)")
    ax.loglog(size, [r["rlns_move_s"] for r in rows], "s-", label="one RLNS move (8 chains)")
    ax.set_xlabel("agents × jobs")
    ax.set_ylabel("seconds")
    ax.legend()
    ctx.figure(fig, "scaling", "Time of a global solve vs an RLNS move on type-D generalized assignment.")
    plt.close(fig)
