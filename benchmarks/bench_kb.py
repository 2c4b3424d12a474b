"""Cost of a batch as the batch size Q grows: randomized kriging believer (KB) against joint
batch acquisitions, and simple regret so that speed is not bought with quality.

Timing grid: seconds to propose one batch of Q points from a fitted SingleTaskGP on n
noisy Hartmann-6 observations, for Q in {2, 4, 8, 16, 32} and n in {100, 500, 2000}
(``--quick``: Q in {2, 8, 32}, n in {100, 500}). Methods, all with the same ``optimize_acqf``
budget (num_restarts, raw_samples) per call (KB makes one call per pick):

* randomized KB: analytic UCB (beta = 4), one pick at a time on a ``CholeskyGP``
  (rank-one conditioning on a y-fantasy), batched warm-started L-BFGS-B per pick;
* qLogNEI: BoTorch's qLogNoisyExpectedImprovement, the Q points optimized jointly;
* qUCB: BoTorch's qUpperConfidenceBound (beta = 4), jointly;
* batch TS: BoTorch's pathwise Thompson sampling (``PathwiseThompsonSampling``, Matheron
  paths), Q independent samples maximized together.

Every GP computation is exact (GPyTorch's Cholesky limit raised above n), so no method
runs on CG / Lanczos approximations at n = 2000. A cell's time is the best of up to 3
runs (1 run when it takes over 2 s); a run longer than ``--cap`` seconds is stopped and the
cell reads "> cap", and a cell whose extrapolation from smaller Q (at the method's own
slope so far, at least 1) exceeds the cap is skipped and reads "> cap (skipped)". The
slope in Q is the least-squares slope of log time on log Q over the measured cells.

Regret: ``--iters`` BO iterations (default 3; quick 2) of batch Q = 8 after 12 Sobol points
(the same per seed for every method), on Hartmann-6 and two functions drawn from a GP prior
on [0, 1]^4 (RBF, lengthscale 0.2, random Fourier features; quick: one of them), the GP
refitted (warm-started) before each batch; simple regret f* − max f(evaluated) after the
last batch, mean ± standard error over ``--seeds`` seeds (default 4; quick 2).

Also: the KB proposal on the fast path against the reference path (``fast=False``, BoTorch
model and ``optimize_acqf`` per pick) at Q = 8, n = 200. Writes Markdown to ``--out``.
"""

from __future__ import annotations

import argparse
import math
import platform
import signal
import time

import gpytorch
import numpy as np
import torch
from botorch.acquisition import UpperConfidenceBound, qUpperConfidenceBound
from botorch.test_functions import Hartmann
from tqdm import tqdm

from neurips26._atomic import atomic_write_text
from neurips26.bayesopt import BatchThompson, KrigingBeliever, QLogNEI, SearchSpace, fit_gp

from _timing import best_of

METHODS = ("randomized KB", "qLogNEI", "qUCB", "batch TS")
KB_REF = "randomized KB, reference path"
REGRET_METHODS = METHODS + (KB_REF,)  # the reference path too: the fast path must not lose quality
BETA = 4.0


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout


class QUCB:
    """qUpperConfidenceBound optimized jointly over the Q points (the bench's own proposer)."""

    def __init__(self, space, beta=BETA):
        self.space, self.beta = space, beta

    def propose(self, model, q=1, pending=None):
        return self.space.maximize(qUpperConfidenceBound(model, beta=self.beta), q=q)


def proposers(space, seed=0):
    return {"randomized KB": KrigingBeliever(lambda m: UpperConfidenceBound(m, beta=BETA), space, fantasy="y",
                                             seed=seed),
            "qLogNEI": QLogNEI(space), "qUCB": QUCB(space), "batch TS": BatchThompson(space),
            KB_REF: KrigingBeliever(lambda m: UpperConfidenceBound(m, beta=BETA), space, fantasy="y", seed=seed,
                                    fast=False)}


# ---------------------------------------------------------------- test functions
class GPDraw:
    """A function drawn from a GP prior with an RBF kernel (lengthscale ``ls``, unit variance)
    on [0, 1]^d, by ``m`` random Fourier features; its maximum f* by multi-start L-BFGS-B."""

    def __init__(self, d, ls, seed, m=2048):
        g = torch.Generator().manual_seed(seed)
        self.dim = d
        self.W = torch.randn(d, m, generator=g, dtype=torch.float64) / ls
        self.b = 2 * math.pi * torch.rand(m, generator=g, dtype=torch.float64)
        self.a = torch.randn(m, generator=g, dtype=torch.float64) * math.sqrt(2.0 / m)
        self.optimal_value = self._maximum(seed)

    def __call__(self, X):
        return torch.cos(X @ self.W + self.b) @ self.a

    def _maximum(self, seed):
        from scipy.optimize import minimize
        from torch.quasirandom import SobolEngine

        X = SobolEngine(self.dim, scramble=True, seed=seed).draw(2 ** 12, dtype=torch.float64)
        starts = X[self(X).topk(16).indices]

        def negf(x):
            t = torch.tensor(x, requires_grad=True)
            v = -self(t[None])[0]
            v.backward()
            return v.item(), t.grad.numpy()

        best = -math.inf
        for x0 in starts:
            r = minimize(negf, x0.numpy(), jac=True, method="L-BFGS-B", bounds=[(0, 1)] * self.dim)
            best = max(best, -float(r.fun))
        return best


def hartmann6():
    f = Hartmann(dim=6, negate=True)
    fn = lambda X: f(X)  # noqa: E731
    fn.dim, fn.optimal_value = 6, float(f.optimal_value)
    return fn


# ---------------------------------------------------------------- timing grid
def make_model(n, state=None):
    """A SingleTaskGP on n noisy Hartmann-6 points; hyperparameters fitted on (up to) the
    first 500 points and reused for larger n (the fit is not what is timed)."""
    f = Hartmann(dim=6, negate=True)
    gen = torch.Generator().manual_seed(n)
    X = torch.rand(n, 6, generator=gen, dtype=torch.float64)
    Y = f(X) + 0.01 * torch.randn(n, generator=gen, dtype=torch.float64)
    bounds = torch.stack([torch.zeros(6), torch.ones(6)]).double()
    if n > 500:
        state = make_model(500).state_dict()
        return fit_gp(X, Y, bounds, state=state, fit=False)
    return fit_gp(X, Y, bounds)


def time_cell(fn, cap):
    """Best of up to 3 runs of fn (1 when a run takes over 2 s); None when a run exceeds cap."""
    times = []
    for _ in range(3):
        signal.setitimer(signal.ITIMER_REAL, cap)
        try:
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        except _Timeout:
            return None
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        if times[-1] > 2.0:
            break
    return min(times)


def slope(qs, ts):
    """Least-squares slope of log t on log Q (None with fewer than 2 points)."""
    pts = [(math.log(q), math.log(t)) for q, t in zip(qs, ts) if t is not None]
    if len(pts) < 2:
        return None
    x, y = np.array(pts).T
    return float(np.polyfit(x, y, 1)[0])


def timing_grid(Qs, ns, cap, space_kw, bar):
    res = {}  # (method, n, Q) -> seconds | None (over cap) | "skipped"
    for n in ns:
        model = make_model(n)
        space = SearchSpace(model.train_inputs[0].new_tensor([[0.0] * 6, [1.0] * 6]), **space_kw)
        props = proposers(space)
        for name in METHODS:
            p = props[name]
            done = []  # (Q, t) measured
            for Q in Qs:
                if len(done) >= 1:
                    s = max(1.0, slope([q for q, _ in done], [t for _, t in done]) or 1.0)
                    q0, t0 = done[-1]
                    if t0 * (Q / q0) ** s > cap:
                        res[name, n, Q] = "skipped"
                        bar.update(1)
                        bar.write(f"{name:14s} n={n:5d} Q={Q:3d}: skipped (predicted {t0 * (Q / q0) ** s:.0f} s > cap)")
                        continue
                if res.get((name, n, Qs[Qs.index(Q) - 1])) in (None, "skipped") and Q != Qs[0]:
                    res[name, n, Q] = "skipped"  # a smaller Q already over the cap
                    bar.update(1)
                    continue
                t = time_cell(lambda: p.propose(model, q=Q), cap)
                res[name, n, Q] = t
                if t is not None:
                    done.append((Q, t))
                bar.update(1)
                bar.write(f"{name:14s} n={n:5d} Q={Q:3d}: " + (f"{t:.3f} s" if t is not None else f"> {cap:.0f} s"))
    return res


# ---------------------------------------------------------------- regret
def bo_regret(fn, name, seed, n0, iters, q, space_kw):
    from torch.quasirandom import SobolEngine

    d = fn.dim
    bounds = torch.stack([torch.zeros(d), torch.ones(d)]).double()
    space = SearchSpace(bounds, **space_kw)
    torch.manual_seed(seed)  # BoTorch's optimize_acqf draws its Sobol seeds from the global generator
    X = SobolEngine(d, scramble=True, seed=seed).draw(n0, dtype=torch.float64)
    Y = fn(X)
    p = proposers(space, seed)[name]
    state = None
    for _ in range(iters):
        model = fit_gp(X, Y, bounds, state=state)
        state = model.state_dict()
        Xn = p.propose(model, q=q)
        X, Y = torch.cat([X, Xn]), torch.cat([Y, fn(Xn)])
    return fn.optimal_value - float(Y.max())


def regret_table(fns, seeds, n0, iters, q, space_kw, bar):
    out = {}
    for fname, fn in fns.items():
        for name in REGRET_METHODS:
            r = []
            for s in range(seeds):
                t = time.perf_counter()
                r.append(bo_regret(fn, name, s, n0, iters, q, space_kw))
                bar.update(1)
                bar.write(f"regret {fname:12s} {name:14s} seed {s}: {r[-1]:.4f} ({time.perf_counter() - t:.1f} s)")
            r = np.array(r)
            out[fname, name] = (r.mean(), r.std(ddof=1) / math.sqrt(len(r)) if len(r) > 1 else float("nan"))
    return out


# ---------------------------------------------------------------- report
def fmt(t, cap):
    if t is None:
        return f"> {cap:.0f}"
    if t == "skipped":
        return f"> {cap:.0f} (skipped)"
    return f"{t:.2f}" if t >= 0.1 else f"{t:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="benchmarks/RESULTS_kb.md")
    ap.add_argument("--quick", action="store_true", help="Q in {2, 8, 32}, n in {100, 500}, fewer regret runs")
    ap.add_argument("--cap", type=float, default=None, help="seconds a single run may take (default 30; quick 10)")
    ap.add_argument("--num-restarts", type=int, default=10)
    ap.add_argument("--raw-samples", type=int, default=512)
    ap.add_argument("--no-regret", action="store_true", help="timing only")
    ap.add_argument("--qs", type=int, nargs="+", help="batch sizes of the grid (overrides the default)")
    ap.add_argument("--ns", type=int, nargs="+", help="numbers of observations of the grid (overrides the default)")
    ap.add_argument("--seeds", type=int, help="regret: seeds per function and method (default 4; quick 2)")
    ap.add_argument("--iters", type=int, help="regret: batches per run (default 3; quick 2)")
    args = ap.parse_args()
    cap = args.cap or (10.0 if args.quick else 30.0)
    Qs = args.qs or ([2, 8, 32] if args.quick else [2, 4, 8, 16, 32])
    ns = args.ns or ([100, 500] if args.quick else [100, 500, 2000])
    seeds = args.seeds or (2 if args.quick else 4)
    iters = args.iters or (2 if args.quick else 3)
    n0, q_regret = 12, 8
    space_kw = {"num_restarts": args.num_restarts, "raw_samples": args.raw_samples}
    signal.signal(signal.SIGALRM, _alarm)
    t_start = time.perf_counter()
    with gpytorch.settings.max_cholesky_size(100_000):
        fns = {"Hartmann-6": hartmann6(), "GP draw A (d=4)": GPDraw(4, 0.2, seed=11)}
        if not args.quick:
            fns["GP draw B (d=4)"] = GPDraw(4, 0.2, seed=12)
        n_regret = 0 if args.no_regret else len(fns) * len(REGRET_METHODS) * seeds
        with tqdm(total=len(Qs) * len(ns) * len(METHODS) + n_regret + 2, desc="bench_kb") as bar:
            # before / after: KB on the fast path vs the reference path, Q = 8, n = 200
            model = make_model(200)
            space = SearchSpace(torch.tensor([[0.0] * 6, [1.0] * 6], dtype=torch.float64), **space_kw)
            ucb = lambda m: UpperConfidenceBound(m, beta=BETA)  # noqa: E731
            ba = {}
            for label, fast in (("reference path (BoTorch model, optimize_acqf per pick)", False),
                                ("fast path (CholeskyGP, batched warm-started L-BFGS-B)", None)):
                kb = KrigingBeliever(ucb, space, fantasy="y", fast=fast)
                ba[label] = best_of(lambda: kb.propose(model, q=8))
                bar.update(1)
                bar.write(f"KB {label}: {ba[label]:.3f} s")
            nei = QLogNEI(space)
            t_nei200 = best_of(lambda: nei.propose(model, q=8))
            bar.write(f"qLogNEI n=200 Q=8: {t_nei200:.3f} s")
            grid = timing_grid(Qs, ns, cap, space_kw, bar)
            regret = {} if args.no_regret else regret_table(fns, seeds, iters=iters, n0=n0, q=q_regret,
                                                             space_kw=space_kw, bar=bar)
    wall = time.perf_counter() - t_start
    atomic_write_text(args.out, report(args, Qs, ns, cap, ba, t_nei200, grid, regret, fns, seeds, iters, n0,
                                       q_regret, wall))
    print(open(args.out).read())


def report(args, Qs, ns, cap, ba, t_nei200, grid, regret, fns, seeds, iters, n0, q_regret, wall):
    L = ["# Proposing a batch: randomized kriging believer vs joint batch acquisitions", "",
         f"Measured by `python benchmarks/bench_kb.py{' --quick' if args.quick else ''}` on {platform.machine()}, "
         f"torch {torch.__version__} ({torch.get_num_threads()} threads), {time.strftime('%Y-%m-%d')}; "
         f"{wall / 60:.1f} min in all. Hartmann-6 with n noisy observations, a fitted SingleTaskGP; every method "
         f"with optimize_acqf's budget num_restarts = {args.num_restarts}, raw_samples = {args.raw_samples} "
         "(KB: per pick). Exact GP algebra throughout (GPyTorch's Cholesky limit raised above n). "
         f"Seconds per batch, best of up to 3 runs (1 run when one takes over 2 s); a run over {cap:.0f} s is "
         f"stopped (\"> {cap:.0f}\"), and a cell whose extrapolation from smaller Q exceeds that is not run "
         "(\"skipped\").", ""]
    L += ["## Before / after (Q = 8, n = 200)", "", "| randomized KB | seconds per batch |", "|---|---|"]
    L += [f"| {k} | {v:.3f} |" for k, v in ba.items()]
    L += [f"| qLogNEI (joint), same model | {t_nei200:.3f} |", ""]
    ref, fast = list(ba.values())
    L += [f"Fast path {ref / fast:.1f}× faster than the reference path; {t_nei200 / fast:.1f}× faster than "
          "qLogNEI at Q = 8, n = 200 (the previous RESULTS: KB 1.32 s vs qLogNEI 3.48 s, 2.6×).", ""]
    L += ["## Seconds per batch", ""]
    for n in ns:
        L += [f"n = {n}:", "", "| method | " + " | ".join(f"Q = {Q}" for Q in Qs) + " | slope in Q |",
              "|---|" + "---|" * (len(Qs) + 1)]
        for m in METHODS:
            ts = [grid[m, n, Q] for Q in Qs]
            s = slope(Qs, [t if isinstance(t, float) else None for t in ts])
            L.append(f"| {m} | " + " | ".join(fmt(t, cap) for t in ts) + f" | {'—' if s is None else f'{s:.2f}'} |")
        kb = [grid["randomized KB", n, Q] for Q in Qs]
        for m in METHODS[1:]:
            cells = []
            for Q, a in zip(Qs, kb):
                b = grid[m, n, Q]
                if not isinstance(a, float):
                    cells.append("—")
                elif isinstance(b, float):
                    cells.append(f"{b / a:.1f}×")
                else:
                    cells.append(f"> {cap / a:.0f}×")
            L.append(f"| *KB speed-up vs {m}* | " + " | ".join(cells) + " | |")
        L.append("")
    L += ["Slope: least squares of log seconds on log Q over the measured cells (cells over the cap left out, "
          "so a baseline's slope is then an underestimate).", ""]
    missing = [f"{m} n={n} Q={Q}" for (m, n, Q), t in grid.items() if not isinstance(t, float)]
    L += ["Not measured (over the cap): " + (", ".join(missing) if missing else "none") + ".", ""]
    if regret:
        L += [f"## Simple regret after {iters} batches of Q = {q_regret} ({n0} Sobol points first, "
              f"{n0 + iters * q_regret} evaluations), mean ± standard error over {seeds} seeds", "",
              "| function | " + " | ".join(REGRET_METHODS) + " |", "|---|" + "---|" * len(REGRET_METHODS)]
        for f in fns:
            L.append(f"| {f} | " + " | ".join(f"{regret[f, m][0]:.3f} ± {regret[f, m][1]:.3f}" for m in REGRET_METHODS)
                     + " |")
        L.append("")
    L += ["## Goal", ""]
    L += goal_lines(Qs, ns, grid, regret, fns, cap, ba, t_nei200)
    return "\n".join(L) + "\n"


def goal_lines(Qs, ns, grid, regret, fns, cap, ba, t_nei200):
    fast = list(ba.values())[1]
    L = ["Goal (issue 33 §2): randomized KB at least 10× faster than qLogNEI at Q = 8, a slope in Q below 1.1, "
         "at equal regret within one standard error.", ""]
    sp = []
    for n in ns:
        a, b = grid["randomized KB", n, 8] if 8 in Qs else None, grid["qLogNEI", n, 8] if 8 in Qs else None
        if isinstance(a, float) and isinstance(b, float):
            sp.append((n, b / a))
    sp_txt = "; ".join([f"{r:.1f}× at n = {n}" for n, r in sp] + [f"{t_nei200 / fast:.1f}× at n = 200"])
    ok_speed = all(r >= 10 for _, r in sp) and t_nei200 / fast >= 10
    L.append(f"- Speed-up at Q = 8: {sp_txt} — **{'reached' if ok_speed else 'not reached'}**"
             + ("" if ok_speed else f" (short by {10 / min([r for _, r in sp] + [t_nei200 / fast]):.1f}× at worst)")
             + ".")
    sl = [(n, slope(Qs, [grid["randomized KB", n, Q] if isinstance(grid["randomized KB", n, Q], float) else None
                         for Q in Qs])) for n in ns]
    ok_slope = all(s is not None and s < 1.1 for _, s in sl)
    L.append("- KB slope in Q: " + ", ".join(f"{s:.2f} at n = {n}" for n, s in sl if s is not None)
             + f" — **{'reached' if ok_slope else 'not reached'}**.")
    if regret:
        parts, ok_reg = [], True
        for f in fns:
            (ma, sa), (mb, sb) = regret[f, "randomized KB"], regret[f, "qLogNEI"]
            se = math.sqrt(sa ** 2 + sb ** 2)
            good = ma <= mb + se
            ok_reg &= good
            parts.append(f"{f}: KB {ma:.3f} vs qLogNEI {mb:.3f} (difference {ma - mb:+.3f}, se {se:.3f})")
        L.append("- Regret (KB no worse than qLogNEI by more than one standard error of the difference): "
                 + "; ".join(parts) + f" — **{'reached' if ok_reg else 'not reached'}**. With this few seeds the "
                 "standard errors are wide, so this guards against a large loss only.")
    return L


if __name__ == "__main__":
    main()
