"""DAG-flow: follow the regularization path of min_W f(W) + λ‖W‖₁ exactly, for a smooth
score + acyclicity objective f (``objectives``), from λ_max (W = 0) down to λ_min.

On a fixed support A with signs s the stationarity condition ∇_A f(W) + λ s_A = 0 defines
W_A(λ) smoothly wherever H_AA = ∇²_AA f is nonsingular, with (implicit function theorem)

    dW_A/dλ = −H_AA⁻¹ s_A.

Each step takes an Euler predictor along it and a corrector back onto the stationarity
condition at the new λ: the chord method on the Cholesky factor of H_AA at the step's start
(the factor the tangent and the definiteness test use too), Newton where the chord stalls. The step is limited by ``max_step`` (a fraction of
λ_max) and by the first event predicted by linearization:

* leave: an active W_a reaches 0 (the edge leaves the support);
* enter: an inactive edge's gradient reaches |∂_j f| = λ (its subgradient condition breaks);
* fold: H_AA stops being positive definite (the branch of local minima ends: located by
  bisection on the step, then the path jumps to the neighbouring local minimum found by a
  descent started along the negative-curvature direction, and goes on from there);

DAGMA's domain (sI − W∘W an M-matrix) is kept by halving any step that would leave it; a
branch on which no step of any size stays in it and converges ends as at a fold.

A predicted event is then located on the corrected path by a secant / bisection search to
``tol``, the support updated, and the event recorded. For least squares (no acyclicity
term) H is constant and each column's path is the lasso path: the predictor is exact, and
``tests`` check it against scikit-learn's ``lars_path``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.linalg import eigh
from scipy.linalg.lapack import dpotrf, dpotrs

from ._checks import check_int, check_real, check_square
from .graphs import is_acyclic
from .objectives import DagmaObjective, SEMObjective

__all__ = ["PathEvent", "RegularizationPath", "follow_path", "anchored_path", "local_minimum",
           "default_lambda_min_ratio"]


@dataclass(frozen=True)
class PathEvent:
    lam: float
    kind: str  # "enter" | "leave" | "fold" | "anchor" (a restart, ``follow_path``'s start) | "end"
    edge: tuple[int, int] | None



@dataclass
class RegularizationPath:
    """The path: knots (every accepted step, λ decreasing; an anchored path repeats the λ of
    each anchor, where it restarts) with W there, the events, and the supports between events.
    ``W_at(λ)`` interpolates linearly between knots (exact
    for least squares, whose path is piecewise linear)."""

    lambdas: np.ndarray  # (K,) knots, non-increasing
    weights: np.ndarray  # (K, d, d)
    events: list = field(default_factory=list)
    stopped: str = "end"  # why the path ended: "end" (λ_min reached), "fold" (no jump found a minimum)
    # or "max_knots" (cut by follow_path's max_knots before λ_min)

    @property
    def breakpoints(self) -> np.ndarray:
        return np.array([e.lam for e in self.events if e.kind in ("enter", "leave")])

    @property
    def lambda_range(self) -> tuple[float, float]:
        return float(self.lambdas[0]), float(self.lambdas[-1])

    def W_at(self, lam: float) -> np.ndarray:
        hi, lo = self.lambda_range
        if not (lo - 1e-12 <= lam <= hi + 1e-12):
            raise ValueError(f"lambda {lam} outside the path's range [{lo}, {hi}]")
        lam_inc, W_inc = self.lambdas[::-1], self.weights[::-1]
        k = int(np.clip(np.searchsorted(lam_inc, lam), 1, len(lam_inc) - 1))
        l0, l1 = lam_inc[k - 1], lam_inc[k]
        t = 0.0 if l1 == l0 else (lam - l0) / (l1 - l0)
        return (1 - t) * W_inc[k - 1] + t * W_inc[k]

    def supports(self) -> list[tuple[float, float, np.ndarray]]:
        """(λ_high, λ_low, support mask) for each stretch between consecutive knots whose support differs."""
        out = []
        for k in range(len(self.lambdas) - 1):
            mask = (self.weights[k] != 0) | (self.weights[k + 1] != 0)
            if out and np.array_equal(out[-1][2], mask):
                out[-1] = (out[-1][0], float(self.lambdas[k + 1]), mask)
            else:
                out.append((float(self.lambdas[k]), float(self.lambdas[k + 1]), mask))
        return out

    def edge_stability(self, threshold: float = 0.0) -> np.ndarray:
        """For each edge, the fraction of the path's log-λ length over which |W_ij| > threshold."""
        logl = np.log(self.lambdas)
        total = logl[0] - logl[-1]
        present = np.abs(self.weights) > threshold  # (K, d, d)
        seg = (logl[:-1] - logl[1:])[:, None, None]
        both = present[:-1] & present[1:]
        return (seg * both).sum(0) / total

    def candidate_dags(self, threshold: float = 0.3) -> list[tuple[float, np.ndarray]]:
        """The distinct acyclic graphs {|W_ij| > threshold} along the path (λ, 0/1 adjacency),
        largest λ first."""
        out, seen = [], set()
        for lam, W in zip(self.lambdas, self.weights):
            A = (np.abs(W) > threshold).astype(int)
            key = A.tobytes()
            if key in seen or not is_acyclic(A):
                continue
            seen.add(key)
            out.append((float(lam), A))
        return out


def _correct(objective: SEMObjective, W: np.ndarray, A: np.ndarray, s: np.ndarray, lam: float,
             tol: float, max_iter: int = 50, factor=None) -> tuple[np.ndarray, bool]:
    """Newton on ∇_A f(W) + λ s_A = 0 with W zero off A; (W, converged).

    With a ``factor`` (``_factor_definite`` of H_AA at a nearby point: the step's start) the
    iteration is the chord method: every step solves with that one factor, two triangular
    solves instead of a Hessian build and an LU per iteration. It converges linearly at a
    rate of about ‖I − H_start⁻¹ H‖, small over a predictor step; where it contracts the
    residual by less than half, or its direction does not decrease it at all, the iteration
    goes on with fresh Hessians (Newton), so a far start still converges as before."""
    W = W.copy()
    rows, cols = A[:, 0], A[:, 1]
    F = objective.grad_on(W, A) + lam * s
    for _ in range(max_iter):
        if np.max(np.abs(F)) <= (tol if factor is None else 1e-2 * tol):
            return W, True
        if factor is not None:
            step = _solve_factored(factor, F)
        else:
            try:
                step = np.linalg.solve(objective.hessian_on(W, A), F)
            except np.linalg.LinAlgError:
                return W, False
        # backtrack on the residual so that a far start does not overshoot
        t, base, W_try = 1.0, np.linalg.norm(F), None
        while True:
            if t < 1e-6:  # no decrease along the direction: a stale chord, round-off floor, or a singular H
                if factor is not None:
                    if np.max(np.abs(F)) <= tol:  # the chord's tighter target sits below round-off here
                        return W, True
                    W_try = None
                    break
                return W, bool(np.max(np.abs(F)) <= 1e3 * tol)
            W_try = W.copy()
            W_try[rows, cols] -= t * step
            if _in_domain(objective, W_try):
                F_try = objective.grad_on(W_try, A) + lam * s
                if np.linalg.norm(F_try) < base:
                    break
            t /= 2
        if W_try is None or np.linalg.norm(F_try) > 0.5 * base:
            factor = None  # the chord contracts too slowly: Newton from here on
        if W_try is not None:
            W, F = W_try, F_try
    return W, bool(np.max(np.abs(F)) <= 1e3 * tol)


def _in_domain(objective, W) -> bool:
    return objective.in_domain(W) if isinstance(objective, DagmaObjective) else True


def _margins(objective, W, A, s, inactive, lam):
    """Leave margins s_a W_a (≥ 0 while active) and enter margins λ − |g_j| (≥ 0 while inactive)."""
    leave = s * W[A[:, 0], A[:, 1]]
    g = objective.grad(W)
    enter = lam - np.abs(g[inactive[:, 0], inactive[:, 1]]) if len(inactive) else np.zeros(0)
    return leave, enter, g


def follow_path(objective: SEMObjective, lambda_min_ratio: float = 1e-3, max_step: float = 0.05,
                tol: float = 1e-10, max_knots: int = 20000, threshold: float | None = None,
                start: tuple[np.ndarray, float] | None = None) -> RegularizationPath:
    """The path of stationary points of ``objective`` + λ‖W‖₁ from λ_max down to
    ``lambda_min_ratio``·λ_max (module docstring). ``max_step`` bounds each step as a
    fraction of λ_max; ``tol`` is the stationarity and event-location tolerance.

    With a ``threshold`` τ, steps also end just past each predicted crossing |W_ij| = τ of
    an active weight, so that every thresholded graph the path passes through is the graph
    at some knot (between knots, steps of up to ``max_step``·λ_max would skip those that last
    a shorter λ-interval). Crossings are not events: they are not located to ``tol``, and a graph
    that lasts less than the overshoot (0.1 % of the step, at least 1e-6·λ_max) may be skipped.

    BLAS runs on one thread inside: the systems are small (one unknown per active edge), and
    threads only contend; beside another busy process a 150 × 150 solve took 37 ms on two
    threads against 0.2 ms on one.

    Settings: ``lambda_min_ratio`` in (0, 1); ``max_step`` finite and > 0; ``tol`` finite and
    > 0; ``max_knots`` an integer >= 2 (a path cut there, before λ_min, has ``stopped ==
    "max_knots"``); ``threshold`` None or finite and > 0. A gradient at W = 0 that is not finite
    raises FloatingPointError.

    ``start`` = (W₀, λ₀) follows the path from a stationary point W₀ at λ₀ (a local minimum
    from ``local_minimum``, say) instead of from W = 0 at λ_max: its support and signs are W₀'s,
    the first event is an ``"anchor"`` at λ₀, and λ_max (the unit of ``max_step``, ``tol``'s
    event location and ``lambda_min_ratio``) is still the gradient's at W = 0. λ₀ must lie in
    (λ_min, λ_max] and W₀ satisfy the stationarity conditions there to 1e3·``tol``, the
    tolerance ``local_minimum`` accepts (ValueError otherwise: a path from a non-stationary
    point would start off its branch)."""
    from threadpoolctl import threadpool_limits

    if not isinstance(objective, SEMObjective):
        raise TypeError(f"objective must be an SEMObjective (NotearsObjective, GolemObjective, DagmaObjective), "
                        f"got {type(objective).__name__}")
    lambda_min_ratio = check_real("lambda_min_ratio", lambda_min_ratio)
    max_step = check_real("max_step", max_step, low=0.0, low_open=True)
    tol = check_real("tol", tol, low=0.0, low_open=True)
    max_knots = check_int("max_knots", max_knots, minimum=2)
    if threshold is not None:
        threshold = check_real("threshold", threshold, low=0.0, low_open=True)

    if start is not None:
        if not (isinstance(start, tuple) and len(start) == 2):
            raise TypeError(f"start must be a tuple (W0, lambda0), got {type(start).__name__}")
        start = (check_square("start[0] (W0)", start[0], objective.d), check_real("start[1] (lambda0)", start[1]))
    with threadpool_limits(limits=1, user_api="blas"):
        return _follow_path(objective, lambda_min_ratio, max_step, tol, max_knots, threshold, start)


def _follow_path(objective, lambda_min_ratio, max_step, tol, max_knots, threshold, start=None) -> RegularizationPath:
    if not 0 < lambda_min_ratio < 1:
        raise ValueError(f"lambda_min_ratio must be in (0, 1), got {lambda_min_ratio}")
    if threshold is not None and not threshold > 0:
        raise ValueError(f"threshold must be positive (or None), got {threshold}")
    d = objective.d
    edges = np.array([(i, j) for i in range(d) for j in range(d) if i != j])
    W = np.zeros((d, d))
    g, lam_max = _gradient_at_zero(objective)
    gE = g[edges[:, 0], edges[:, 1]]
    lam_min = lambda_min_ratio * lam_max
    if start is None:
        first = int(np.abs(gE).argmax())
        in_A = np.zeros(len(edges), dtype=bool)
        in_A[first] = True
        sign = np.zeros(len(edges))
        sign[first] = -np.sign(gE[first])
        lam = lam_max
        events = [PathEvent(lam, "enter", tuple(map(int, edges[first])))]
    else:
        W, lam = _check_start(objective, edges, start, lam_min, lam_max, tol)
        off_diag = W[edges[:, 0], edges[:, 1]]
        in_A, sign = off_diag != 0, np.sign(off_diag)
        g = objective.grad(W)
        events = [PathEvent(lam, "anchor", None)]
    lambdas, weights = [lam], [W.copy()]
    stopped = "end"
    fold_pending = False
    h_max = max_step * lam_max
    carried = None  # the Cholesky factor of H_AA at the current W, from the previous step's fold test
    while lam > lam_min + 1e-15 * lam_max and len(lambdas) < max_knots:
        A, s = edges[in_A], sign[in_A]
        inactive = edges[~in_A]
        factor, carried = carried, None
        if len(A) == 0:  # everything left: continue to the next entry
            dW = np.zeros(0)
        else:
            if factor is None and not fold_pending:
                factor = _factor_definite(objective.hessian_on(W, A))
            if fold_pending or factor is None:
                H = objective.hessian_on(W, A)
                # the branch of minima ends here: jump to the neighbouring local minimum
                fold_pending = False
                lam_past = max(lam - 1e-4 * lam_max, lam_min)
                jumped = _jump(objective, W, A, H, lam_past, tol) if lam_past < lam else None
                if jumped is None:
                    events.append(PathEvent(lam, "fold", None))
                    stopped = "fold"
                    break
                W_j, edge = jumped
                events.append(PathEvent(lam_past, "fold", edge))
                W, lam = W_j, lam_past
                off_diag = W[edges[:, 0], edges[:, 1]]
                in_A, sign = off_diag != 0, np.sign(off_diag)
                g = objective.grad(W)
                lambdas.append(lam)
                weights.append(W.copy())
                continue
            dW = -_solve_factored(factor, s)  # dW_A / dλ
        V = np.zeros((d, d))
        if len(A):
            V[A[:, 0], A[:, 1]] = dW
        c = objective.hvp(W, V)[inactive[:, 0], inactive[:, 1]] if len(inactive) and len(A) else np.zeros(len(inactive))
        gI = g[inactive[:, 0], inactive[:, 1]] if len(inactive) else np.zeros(0)
        # predicted offsets δ > 0 (λ ← λ − δ) of each event, by linearization
        wA = W[A[:, 0], A[:, 1]] if len(A) else np.zeros(0)
        with np.errstate(divide="ignore", invalid="ignore"):
            leave_d = np.where(dW != 0, wA / dW, np.inf)  # W_a − δ dW_a = 0
            enter_p = np.where(1 - c != 0, (lam - gI) / (1 - c), np.inf)  # g − δc = λ − δ
            enter_m = np.where(1 + c != 0, (lam + gI) / (1 + c), np.inf)  # g − δc = −(λ − δ)
        pos = lambda a: np.where(a > 1e-14 * lam_max, a, np.inf)  # noqa: E731
        cand = np.concatenate([pos(leave_d), np.minimum(pos(enter_p), pos(enter_m))])
        limit = min(h_max, lam - lam_min)
        if threshold is not None and len(A):
            # |W_a| − δ·sign(W_a)·dW_a = τ; the step overshoots the prediction a little (0.1 %,
            # and at least 1e-6·λ_max) so that the knot lands past a crossing the linear
            # prediction places slightly early, rather than creeping up on it
            with np.errstate(divide="ignore", invalid="ignore"):
                cross = np.where(dW != 0, (np.abs(wA) - threshold) / (np.sign(wA) * dW), np.inf)
            cross = cross[cross > 0]
            if len(cross):
                to_cross = float(cross.min())
                limit = min(limit, to_cross + max(1e-3 * to_cross, 1e-6 * lam_max))
        k_ev = int(np.argmin(cand)) if len(cand) else -1
        delta = min(limit, float(cand[k_ev])) if len(cand) else limit
        hit = len(cand) and float(cand[k_ev]) <= limit

        def corrected(dl):
            W_p = W.copy()
            if len(A):
                W_p[A[:, 0], A[:, 1]] = wA - dl * dW
            if not _in_domain(objective, W_p):
                return None
            Wc, ok = _correct(objective, W_p, A, s, lam - dl, tol, factor=factor) if len(A) else (W_p, True)
            if not ok or not _in_domain(objective, Wc):
                return None
            # the classical continuation test: a corrector that has to move further than half
            # the predictor step may have jumped to another branch, so the step is refused
            if len(A) and np.linalg.norm(Wc - W_p) > 0.5 * dl * np.linalg.norm(dW) + 1e3 * tol:
                return None
            return Wc

        W_new = corrected(delta)
        if W_new is None:  # left DAGMA's domain, or Newton failed: halve, then give up
            ok = False
            while delta > 1e-9 * lam_max:
                delta /= 2
                hit = False
                W_new = corrected(delta)
                if W_new is not None:
                    ok = True
                    break
            if not ok:  # no step of any size on this branch: it ends here, as at a fold
                fold_pending = True
                continue
        leave_m, enter_m_, g_new = _margins(objective, W_new, A, s, inactive, lam - delta)
        violated = (leave_m < -tol).any() or (enter_m_ < -tol).any()
        located = None
        if violated:  # the linear prediction missed a nonlinear crossing: locate the first one
            def evaluate(dl):
                Wc = corrected(dl)
                return None if Wc is None else (dl, Wc) + _margins(objective, Wc, A, s, inactive, lam - dl)

            start = (0.0, W) + _margins(objective, W, A, s, inactive, lam)
            located = _first_crossing(evaluate, start, (delta, W_new, leave_m, enter_m_, g_new), tol, tol * lam_max)
        if located is not None:
            k_ev, (delta, W_new, leave_m, enter_m_, g_new) = located
            hit = True
        elif violated:  # the corrector failed inside the bracket: bisect, treating a failure as past the crossing
            lo_d, hi_d, W_lo = 0.0, delta, W
            at_hi = (W_new, leave_m, enter_m_, g_new)  # the corrected point at hi_d, kept to avoid a re-solve
            for _ in range(200):
                if hi_d - lo_d <= tol * lam_max:
                    break
                mid = 0.5 * (lo_d + hi_d)
                Wm = corrected(mid)
                if Wm is None:  # Newton failed: treat as beyond the crossing
                    hi_d, at_hi = mid, None
                    continue
                lm, em, gm = _margins(objective, Wm, A, s, inactive, lam - mid)
                if (lm < -tol).any() or (em < -tol).any():
                    hi_d, at_hi = mid, (Wm, lm, em, gm)
                else:
                    lo_d, W_lo = mid, Wm
            if at_hi is not None:
                delta = hi_d
                W_new, leave_m, enter_m_, g_new = at_hi
                hit = True
                k_ev = int(np.argmin(np.concatenate([leave_m, enter_m_])))
            elif lo_d > 0:  # the corrector fails past lo_d: step there, without an event
                delta, W_new, hit = lo_d, W_lo, False
                g_new = objective.grad(W_new)
            else:  # no step at all on this support: treat it as a fold
                fold_pending = True
                continue
        elif hit:  # refine the predicted event's location on the corrected path (secant)
            k_ev, delta, W_new, g_new, hit = _refine(objective, W, A, s, inactive, lam, k_ev, delta, W_new,
                                                     corrected, tol, lam_max)
        grown_factor = None
        if hit and k_ev >= len(A):
            # an edge enters at W_new, where its entry is still 0: the next step factors H on the
            # grown support, and in exact arithmetic that factor's existence implies the fold
            # test's below (H_AA is its principal submatrix, and the shift ε grows with max|H|):
            # one factorization and one Hessian build instead of two of each, at every entry.
            # Paths without folds come out bit for bit as before; at a fold, where H is singular
            # to round-off, the two tests can disagree, and a fold's location moved by up to
            # 6e-6·λ_max on a d = 30 central path (the reference paths' events still agree to 1e-8)
            grown = in_A.copy()
            grown[np.flatnonzero(~in_A)[k_ev - len(A)]] = True
            grown_factor = _factor_definite(objective.hessian_on(W_new, edges[grown]))
        if grown_factor is not None:
            factor_new = None
        else:
            factor_new = _factor_definite(objective.hessian_on(W_new, A)) if len(A) else None
        if len(A) and factor_new is None and grown_factor is None:
            # H_AA lost definiteness within the step (a fold): bisect to its last definite point
            lo_d, hi_d, W_lo = 0.0, delta, W
            while hi_d - lo_d > 1e-9 * lam_max:
                mid = 0.5 * (lo_d + hi_d)
                Wm = corrected(mid)
                if Wm is None or not _positive_definite(objective.hessian_on(Wm, A)):
                    hi_d = mid
                else:
                    lo_d, W_lo = mid, Wm
            delta, W_new, hit, fold_pending = lo_d, W_lo, False, True
            g_new = objective.grad(W_new)
        lam -= delta
        W = W_new
        g = g_new
        if not hit and not fold_pending:  # same support at the new W: its factor serves the next step
            carried = factor_new
        elif grown_factor is not None:  # the entering edge's support at the new W: likewise
            carried = grown_factor
        if hit:
            n_act = len(A)
            if k_ev < n_act:  # leave
                idx = np.flatnonzero(in_A)[k_ev]
                in_A[idx] = False
                sign[idx] = 0.0
                W[edges[idx, 0], edges[idx, 1]] = 0.0
                events.append(PathEvent(lam, "leave", tuple(map(int, edges[idx]))))
            else:  # enter
                idx = np.flatnonzero(~in_A)[k_ev - n_act]
                in_A[idx] = True
                sign[idx] = -np.sign(g[edges[idx, 0], edges[idx, 1]])
                events.append(PathEvent(lam, "enter", tuple(map(int, edges[idx]))))
        lambdas.append(lam)
        weights.append(W.copy())
    if stopped == "end" and lam > lam_min + 1e-15 * lam_max:  # the loop ran out of knots, not of λ
        stopped = "max_knots"
    if stopped == "end":
        events.append(PathEvent(lam, "end", None))
    return RegularizationPath(np.array(lambdas), np.array(weights), events, stopped)


def anchored_path(objectives, anchors: int = 12, lambda_min_ratio: float = 1e-4, max_step: float = 0.05,
                  tol: float = 1e-10, max_knots: int = 20000, threshold: float | None = None) -> RegularizationPath:
    """The λ-path of the last of DAGMA's objectives μ₁ > μ₂ > … > μ_K (its central path) on the
    branch of minima that DAGMA's own μ-continuation selects, restarted on it at ``anchors`` λ.

    A path at small μ followed from W = 0 (``follow_path``) stays on the branch it starts on,
    and where the acyclicity term dominates that branch can be a poor one: on an ER2 SEM at
    d = 20 the μ = 1e-4 path's best graph was at SHD 29 where ``dagma``'s fits reached 0. DAGMA
    itself reaches small μ by continuation at a fixed λ₁: a minimum at μ₁, then at each next μ
    the minimum reached by descent from the previous one. Here, at each anchor λ₁ (geometric
    between λ₁,max and λ₁,min, both ends excluded), that continuation is run with
    ``local_minimum`` (the μ₁ minimum warm-started from the previous anchor's), and the μ_K
    path is followed from it (``follow_path(start=...)``) down to the next anchor; the first
    stretch, from λ_max, starts at W = 0 as usual. Between anchors every knot is an exact
    stationary point of the μ_K objective; at an anchor the path may jump to the continuation's
    branch (an ``"anchor"`` event; the knot before it ends the previous stretch at the same λ).
    An anchor whose continuation finds no minimum is skipped: the previous stretch goes on.

    λ is in the μ_K objective's units, μ_K·λ₁ (λ₁ DAGMA's own ℓ1 weight), as for
    ``follow_path`` on ``objectives[-1]``. ``objectives``: at least two ``DagmaObjective`` on
    the same data with μ strictly decreasing, each with its own log-det parameter s (the
    ``dagma`` package's ``fit`` lowers s along its schedule by default, s = 1, 0.9, …, 0.6;
    ``DagFlow`` keeps s fixed; docs/dag-flow.md says what each does); ``anchors`` an integer
    >= 1 (12 by default, as ``DagFlow``'s); the other settings as ``follow_path``'s
    (``max_knots`` bounds each stretch). ``stopped`` is the last stretch's."""
    objectives = list(objectives)
    if len(objectives) < 2 or not all(isinstance(o, DagmaObjective) for o in objectives):
        raise TypeError("objectives must be at least two DagmaObjective (one per μ of the schedule), got "
                        + ", ".join(type(o).__name__ for o in objectives))
    mus = [o.mu for o in objectives]
    if any(b >= a for a, b in zip(mus, mus[1:])):
        raise ValueError(f"the objectives' mu must decrease strictly, got {mus}")
    first = objectives[0]
    if any(o.d != first.d or not np.array_equal(o.X_np, first.X_np) for o in objectives):
        raise ValueError("the objectives must share their data X (one DAGMA problem, several mu)")
    anchors = check_int("anchors", anchors, minimum=1)
    lambda_min_ratio = check_real("lambda_min_ratio", lambda_min_ratio)
    if not 0 < lambda_min_ratio < 1:
        raise ValueError(f"lambda_min_ratio must be in (0, 1), got {lambda_min_ratio}")
    final = objectives[-1]
    d = final.d
    _, lam_max = _gradient_at_zero(final)  # μ_K·λ₁,max: ∇h vanishes at W = 0
    lam1 = np.geomspace(lam_max / final.mu, lambda_min_ratio * lam_max / final.mu, anchors + 2)[1:-1]
    ratio = lambda lam: lam / lam_max  # noqa: E731  (a stretch's end as follow_path's ratio)
    starts = [None]  # (W, λ) at each anchor whose continuation found a minimum; None: from W = 0
    W1 = np.zeros((d, d))
    for l1 in lam1:
        W = local_minimum(first, W1, first.mu * l1, tol=tol)
        if W is None:
            continue
        W1 = W
        for o in objectives[1:]:
            W = local_minimum(o, W, o.mu * l1, tol=tol)
            if W is None:
                break
        if W is not None:
            starts.append((W, final.mu * l1))
    ends = [st[1] for st in starts[1:]] + [lambda_min_ratio * lam_max]
    lambdas, weights, events, stopped = [], [], [], "end"
    for st, end in zip(starts, ends):
        seg = follow_path(final, ratio(end), max_step, tol, max_knots, threshold, start=st)
        lambdas.append(seg.lambdas)
        weights.append(seg.weights)
        events += [e for e in seg.events if e.kind != "end"]
        stopped = seg.stopped
    if stopped == "end":
        events.append(PathEvent(float(lambdas[-1][-1]), "end", None))
    return RegularizationPath(np.concatenate(lambdas), np.concatenate(weights), events, stopped)


def _gradient_at_zero(objective) -> tuple[np.ndarray, float]:
    """∇f(0) (diagonal zero) and λ_max = max|∂_ij f(0)|, where the first edge enters; FloatingPointError
    / ValueError where no path can start (a gradient that is not finite, or vanishes)."""
    g = objective.grad(np.zeros((objective.d, objective.d)))
    lam_max = float(np.abs(g).max())
    if not np.isfinite(lam_max):
        raise FloatingPointError(f"the objective's gradient at W = 0 is not finite ({lam_max}): check X's scale "
                                 "and the objective's settings")
    if lam_max == 0:
        raise ValueError("the gradient at W = 0 vanishes: no edge ever enters")
    return g, lam_max


def _check_start(objective, edges, start, lam_min, lam_max, tol) -> tuple[np.ndarray, float]:
    """``follow_path``'s start (W₀, λ₀), checked to be a stationary point inside the path's range."""
    W0, lam0 = start
    if not lam_min < lam0 <= lam_max * (1 + 1e-12):
        raise ValueError(f"start: lambda0 = {lam0!r} outside the path's range (lambda_min, lambda_max] = "
                         f"({lam_min!r}, {lam_max!r}]")
    W = np.where(np.eye(objective.d, dtype=bool), 0.0, np.asarray(W0, dtype=np.float64))
    if not _in_domain(objective, W):
        raise ValueError("start: W0 is outside the objective's domain (DAGMA: sI - W∘W is not an M-matrix)")
    g = objective.grad(W)[edges[:, 0], edges[:, 1]]
    w = W[edges[:, 0], edges[:, 1]]
    active = w != 0
    # the stationarity conditions of f + λ‖W‖₁: ∇_a f = −λ sign(w_a) on the support, |∇_j f| ≤ λ off it
    residual = max(np.abs(g[active] + lam0 * np.sign(w[active])).max(initial=0.0),
                   (np.abs(g[~active]) - lam0).max(initial=0.0))
    if not residual <= 1e3 * tol:  # local_minimum's acceptance (``_polish``)
        raise ValueError(f"start: W0 is not a stationary point at lambda0 = {lam0!r} (violation {residual:.3g} > "
                         f"1e3·tol = {1e3 * tol:.3g}); start from a local minimum (local_minimum)")
    return W, float(lam0)


def _factor_definite(H: np.ndarray):
    """A lower Cholesky factor of H − εI when H's smallest eigenvalue
    exceeds ε = 1e-12·max(1, max|H|), else None: the definiteness test and the factor the
    tangent and the chord corrector solve with, from one O(k³/3) factorization instead of an
    eigenvalue solve and an LU. (Solving with H − εI instead of H errs by about ε‖H⁻¹‖
    relatively: negligible away from folds; within a few ε of one the tangent is off by O(1),
    which only costs corrector iterations, as the corrector converges to the exact root.)"""
    hi, lo = (H.max(), H.min()) if H.size else (0.0, 0.0)
    if not (np.isfinite(hi) and np.isfinite(lo)):  # a NaN or an infinity reaches one of them
        return None
    eps = _definite_margin(hi, lo)
    # the shifted symmetric part built in place (no identity, no |H| temporary: at k ≈ 1 000 the
    # k × k passes around the factorization cost a quarter of it)
    S = H + H.T
    S *= 0.5
    S[np.diag_indices_from(S)] -= eps
    # LAPACK directly: scipy's cho_factor / cho_solve wrappers cost more than the
    # factorization itself at these sizes, and the path calls them tens of thousands of times
    L, info = dpotrf(S, lower=1, clean=0, overwrite_a=1)
    return L if info == 0 else None


def _solve_factored(L: np.ndarray, b: np.ndarray) -> np.ndarray:
    x, info = dpotrs(L, b, lower=1)
    if info != 0:
        raise ValueError(f"dpotrs: illegal argument {-info}")
    return x


def _newton_factor(H: np.ndarray, tau_guess: float | None, after_indefinite: bool):
    """(L, τ, shifted) for a Newton step on H: L a Cholesky factor of H (``_factor_definite``)
    where H is positive definite (τ = ``tau_guess`` unchanged, shifted False), else of H + τI
    with τ = 2|λ_min(H)| + 1e-10·max(1, max|H|) (shifted True); where that τ does not factor, τ
    is multiplied by 10 until one does, and L is None where none up to 1e8·max(1, max|H|) does.

    λ_min comes from LAPACK's ``eigh`` (the smallest eigenvalue only), whose tridiagonal
    reduction costs about four Cholesky factorizations: on a dense d = 50 support that was a
    third of the path's time. For k >= ``SHIFT_INVERT_MIN`` unknowns and a ``tau_guess`` (the
    previous shifted step's τ) at which H + τ₀I factors, λ_min is found instead by Lanczos on
    (H + τ₀I)⁻¹ (``_smallest_eigenvalue_shift_invert``). Right after a shifted step
    (``after_indefinite``) H is most likely indefinite again, so λ_min is found first and the
    factorization of H, which would fail, is skipped where λ_min < 0 clearly (below
    −1e-9·max|H|; the definiteness test's margin is 1e-12·max|H|)."""
    k = len(H)
    shift_invert = tau_guess is not None and k >= SHIFT_INVERT_MIN
    S = low = None
    if shift_invert and after_indefinite:
        S, scale = _symmetric_part(H)
        low = _smallest_eigenvalue_shift_invert(S, tau_guess)
    if low is None or low >= -1e-9 * scale:
        L = _factor_definite(H)
        if L is not None:  # no symmetric part built where none is needed: most steps
            return L, tau_guess, False
    if S is None:
        S, scale = _symmetric_part(H)
        if shift_invert:
            low = _smallest_eigenvalue_shift_invert(S, tau_guess)
    if low is None:
        low = float(eigh(S, eigvals_only=True, subset_by_index=(0, 0), driver="evr")[0])
    tau, eye = 2 * max(-low, 0.0) + 1e-10 * scale, np.eye(k)
    while tau <= 1e8 * scale:
        L = _factor_definite(S + tau * eye)
        if L is not None:
            return L, tau, True
        tau *= 10
    return None, tau, True


def _symmetric_part(H: np.ndarray) -> tuple[np.ndarray, float]:
    """(S, scale): S = (H + Hᵀ)/2 and scale = max(1, max|S|)."""
    S = H + H.T
    S *= 0.5
    return S, max(1.0, float(np.abs(S).max()))


SHIFT_INVERT_MIN = 200  # below this many unknowns LAPACK's eigenvalue solve is cheaper than ARPACK's loop


def _smallest_eigenvalue_shift_invert(S: np.ndarray, tau0: float) -> float | None:
    """λ_min(S) for a symmetric S by Lanczos on (S + σ₀I)⁻¹, σ₀ = τ₀ − ε (ε the margin of
    ``_factor_definite``, which factors it); None where S + τ₀I does not factor or ARPACK does
    not converge. The Ritz value's error is about the square of ARPACK's residual tolerance
    (1e-6 relative), and 8 Lanczos vectors took 13-25 solves where ARPACK's default 20 took
    21-31 for the same 1e-12 (dense d = 50 supports)."""
    from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, eigsh

    T = S + tau0 * np.eye(len(S))
    sigma = tau0 - _definite_margin(T.max(), T.min())
    L = _factor_definite(T)
    if L is None:
        return None
    k = len(S)
    op = LinearOperator((k, k), matvec=lambda x: _solve_factored(L, x), dtype=np.float64)
    try:  # a fixed start vector: the same bits on every run
        top = eigsh(op, k=1, which="LA", v0=np.ones(k), ncv=min(8, k), tol=1e-6, maxiter=200,
                    return_eigenvectors=False)[0]
    except ArpackNoConvergence:
        return None
    return float(1.0 / top - sigma) if top > 0 else None


def _definite_margin(hi: float, lo: float) -> float:
    """The ε that ``_factor_definite`` subtracts from the diagonal of a matrix with largest and
    smallest entries ``hi`` and ``lo``."""
    return 1e-12 * max(1.0, float(hi), -float(lo))


def _positive_definite(H: np.ndarray) -> bool:
    return _factor_definite(H) is not None


def _l1_objective(objective, W, lam) -> float:
    return objective.value(W) + lam * float(np.abs(W).sum())


def _jump(objective, W, A, H, lam, tol):
    """At a fold the minima of this support end. Just past the fold, f + λ‖W‖₁ falls away
    along the eigenvector v of H_AA's smallest eigenvalue (the normal form of a fold is a
    cubic in that direction): walk along ±v with doubling steps while the objective falls,
    descend to a local minimum from there (and from W itself), and return (the lowest
    strict local minimum found, the edge leading v), or None when no start reaches one."""
    # past a symmetric (pitchfork) bifurcation the old support still has a stationary point,
    # a saddle: the negative curvature shows there, not at the fold point itself
    signs = np.sign(W[A[:, 0], A[:, 1]])
    W_s, ok = _correct(objective, W, A, signs, lam, tol)
    if ok and _in_domain(objective, W_s) and (signs * W_s[A[:, 0], A[:, 1]] > 0).all():
        W, H = W_s, objective.hessian_on(W_s, A)
    _, vecs = np.linalg.eigh(0.5 * (H + H.T))
    v = np.zeros_like(W)
    v[A[:, 0], A[:, 1]] = vecs[:, 0]
    edge = tuple(map(int, A[int(np.argmax(np.abs(vecs[:, 0])))]))
    F0 = _l1_objective(objective, W, lam)
    starts = [W]
    for sign in (1.0, -1.0):
        t, W_t, F_t = 1e-3 * (1.0 + np.abs(W).max()), W, F0
        for _ in range(40):
            W_try = W + sign * t * v
            if not _in_domain(objective, W_try):
                break
            F_try = _l1_objective(objective, W_try, lam)
            if F_try >= F_t:
                break
            W_t, F_t, t = W_try, F_try, 2 * t
        if W_t is not W:
            starts.append(W_t)
    best = None
    for W0 in starts:
        Wm = local_minimum(objective, W0, lam, tol)
        if Wm is None:
            continue
        Fm = _l1_objective(objective, Wm, lam)
        if best is None or Fm < best[0]:
            best = (Fm, Wm)
    return None if best is None else (best[1], edge)


def local_minimum(objective: SEMObjective, W0: np.ndarray, lam: float, tol: float = 1e-10,
                  max_iter: int = 5000) -> np.ndarray | None:
    """A strict local minimum of f + λ‖W‖₁ reached by descent from ``W0``.

    First an orthant-wise Newton descent (``_orthant_newton``: tens of Newton steps on the free
    entries). Where it does not end at an accepted minimum, the ℓ1 problem is solved as the
    smooth bound-constrained one in W = P − M, P, M ≥ 0, by
    L-BFGS-B (points outside DAGMA's domain get an infinite value, so the line search
    backtracks); its support is polished by Newton on the stationarity condition
    (``_correct``) to ``tol``, every ``POLISH_EVERY`` iterations (8 Newton steps) and once
    more after L-BFGS-B stops. The first polished point accepted is returned: the signs hold,
    every inactive gradient has |∂f| ≤ λ and H_AA is positive definite (a strict local
    minimum, though not necessarily the one L-BFGS-B would have ended at); None otherwise. ``W0``: a finite (d, d) array;
    ``lam`` finite and >= 0; ``tol`` finite and > 0; ``max_iter`` an integer >= 1."""
    from threadpoolctl import threadpool_limits

    if not isinstance(objective, SEMObjective):
        raise TypeError(f"objective must be an SEMObjective, got {type(objective).__name__}")
    check_square("W0", W0, objective.d)
    lam = check_real("lam", lam, low=0.0)
    tol = check_real("tol", tol, low=0.0, low_open=True)
    max_iter = check_int("max_iter", max_iter, minimum=1)
    d = objective.d
    off = ~np.eye(d, dtype=bool)
    W0 = np.where(off, np.asarray(W0, dtype=np.float64), 0.0)
    with threadpool_limits(limits=1, user_api="blas"):  # small systems: threads only contend (follow_path)
        return _local_minimum(objective, W0, lam, tol, max_iter)


def _local_minimum(objective, W0, lam, tol, max_iter):
    from scipy.optimize import minimize

    d = objective.d
    off = ~np.eye(d, dtype=bool)
    W = _orthant_newton(objective, W0, lam, tol)
    if W is not None:
        return W
    # the Newton descent did not end at an accepted minimum (a start outside DAGMA's domain, a
    # stall at a saddle): the first-order descent below, from the same start

    def split(z):
        return (z[: d * d] - z[d * d:]).reshape(d, d) * off

    def fun(z):
        W = split(z)
        if not _in_domain(objective, W):
            return np.inf, np.zeros_like(z)
        g = objective.grad(W)
        value = objective.value(W) + lam * float(z[np.tile(off.ravel(), 2)].sum())
        return value, np.concatenate([((g + lam) * off).ravel(), ((-g + lam) * off).ravel()])

    z0 = np.concatenate([np.maximum(W0, 0).ravel(), np.maximum(-W0, 0).ravel()])
    # L-BFGS-B only has to find the support and signs: Newton on that support (``_polish``)
    # then converges to ``tol`` in a few steps, and its result is accepted only as a strict
    # local minimum (signs, inactive gradients, definite H_AA). At small μ this problem is badly
    # conditioned and L-BFGS-B took 300-1700 iterations to its tolerance, most of them on the
    # last digits of a support it had found long before: so every ``POLISH_EVERY`` iterations
    # a short polish (8 Newton steps: from the right support it converges in 3-5) is tried on its
    # iterate (exact zeros where it sits on a bound), and the first one accepted ends the descent
    found, iterations = [], [0]

    def try_polish(intermediate_result):
        iterations[0] += 1
        if iterations[0] % POLISH_EVERY == 0:
            W = _polish(objective, split(intermediate_result.x), lam, tol, max_iter=8)
            if W is not None:
                found.append(W)
                raise StopIteration

    res = minimize(fun, z0, jac=True, method="L-BFGS-B", bounds=[(0, None)] * (2 * d * d), callback=try_polish,
                   options={"ftol": 1e-16, "gtol": 1e-12, "maxiter": max_iter, "maxcor": 30})
    return found[0] if found else _polish(objective, split(res.x), lam, tol)


POLISH_EVERY = 50  # L-BFGS-B iterations between tries of the Newton polish in ``local_minimum``


def _orthant_newton(objective, W0, lam, tol, max_iter=500):
    """An orthant-wise Newton descent of F = f + λ‖W‖₁ from ``W0`` (the off-diagonal part);
    the strict local minimum it ends at (accepted by ``_polish``), or None.

    Each iteration works on the free entries S: the nonzero ones and the zeros whose gradient
    exceeds λ (|∂_j f| > λ: F decreases as they leave 0), each in the orthant σ of its sign
    (−sign ∂_j f for a zero). There F is smooth with gradient r = ∇_S f + λσ (the minimum-norm
    subgradient, zero at a stationary point), and the step solves (H_SS + τI) p = −r with τ = 0
    where H_SS is positive definite, else τ = 2|λ_min(H_SS)| (H_SS is indefinite past a fold;
    ``_newton_factor``, λ_min by shift-invert Lanczos from the previous step's τ where it can).
    On a dense SF2 support at μ = 1e-3 a ladder of shifts by powers of 10 overshot |λ_min|
    fifty-fold and crawled: 200 steps without reaching the minimum this shift reaches in 300. The
    saddle-free step on |H_SS| took 170, but each costs a full eigendecomposition, about five
    times a smallest eigenvalue plus a Cholesky factor. The trial point W + t·p is projected onto
    the orthant (entries that cross zero stop there) and accepted by an Armijo test on F, halving
    t. Where the free set stops changing, Newton on the support (``_polish``) finishes to ``tol``
    and checks the point is a strict local minimum. It replaces hundreds of L-BFGS-B iterations on the 2d² split
    variables by tens of steps on |S| unknowns (Byrd, Chin, Nocedal & Oztoprak, 2016: the
    orthant-based Newton family for ℓ1 problems; here with a shift for nonconvex f)."""
    d = objective.d
    off = ~np.eye(d, dtype=bool)
    W = np.where(off, W0, 0.0)
    if not _in_domain(objective, W):
        return None
    F = _l1_objective(objective, W, lam)
    if not np.isfinite(F):
        return None
    previous_free, tau, shifted = None, None, False  # the last shift, a guess for the next (``_newton_factor``)
    for _ in range(max_iter):
        g = objective.grad(W)
        nonzero = W != 0
        free = off & (nonzero | (np.abs(g) > lam))
        if not free.any():  # W = 0 with every |∂f| <= λ
            return _polish(objective, W, lam, tol)
        S = np.argwhere(free)
        sigma = np.where(nonzero, np.sign(W), -np.sign(g))[S[:, 0], S[:, 1]]
        r = g[S[:, 0], S[:, 1]] + lam * sigma
        if previous_free is not None and np.array_equal(free, previous_free) and np.abs(r).max() <= 1e-4 * (1 + lam):
            polished = _polish(objective, W, lam, tol, max_iter=8)  # from the right support Newton takes 3-5
            if polished is not None:
                return polished
        previous_free = free
        H = objective.hessian_on(W, S)
        if not np.isfinite(H).all():
            return None
        # shifted by twice the most negative eigenvalue where H_SS is indefinite (past a fold)
        L, tau, shifted = _newton_factor(H, tau, shifted)
        if L is None:
            return None
        p = -_solve_factored(L, r)
        w_S = W[S[:, 0], S[:, 1]]
        t = 1.0
        while t > 1e-12:
            trial = w_S + t * p
            trial = np.where(np.sign(trial) == sigma, trial, 0.0)  # stay in the orthant
            W_t = W.copy()
            W_t[S[:, 0], S[:, 1]] = trial
            if _in_domain(objective, W_t):
                F_t = _l1_objective(objective, W_t, lam)
                if np.isfinite(F_t) and F_t <= F + 1e-4 * float(r @ (trial - w_S)):
                    break
            t /= 2
        else:
            return _polish(objective, W, lam, tol)  # no decrease left along p: round-off floor or a saddle
        W, F = W_t, F_t
    return None


def _polish(objective, W, lam, tol, max_iter=50):
    A = np.argwhere(W != 0)
    if len(A) == 0:
        g = objective.grad(W)
        return W if np.abs(g).max() <= lam + 1e3 * tol else None
    s = np.sign(W[A[:, 0], A[:, 1]])
    Wc, ok = _correct(objective, W, A, s, lam, tol, max_iter=max_iter)
    if not ok or not _in_domain(objective, Wc) or (s * Wc[A[:, 0], A[:, 1]] <= 0).any():
        return None
    g = objective.grad(Wc)
    inactive = (Wc == 0) & ~np.eye(objective.d, dtype=bool)
    if inactive.any() and np.abs(g[inactive]).max() > lam + 1e3 * tol:
        return None
    return Wc if _positive_definite(objective.hessian_on(Wc, A)) else None


def _first_crossing(evaluate, lo, hi, tol, width, max_evaluations=200):
    """The first crossing of any event margin inside a step, where the linear prediction missed
    it: ``lo`` and ``hi`` are corrected points (δ, W, leave margins, enter margins, g), no margin
    below −``tol`` at ``lo``, some at ``hi``; ``evaluate(δ)`` corrects at δ (None where the
    corrector fails). Returns (k, point): margin k (leave margins first, as in ``_margins``)
    within ``tol`` of 0 at the point and no other below −``tol``, or, once the bracket is
    narrower than ``width``, the most negative margin at its violated end; None where the
    corrector fails.

    Regula falsi with the Illinois modification on the margin predicted to cross first (linear
    interpolation between the bracket's ends), superlinear where bisection needed ~33 corrector
    solves per crossing to reach ``width`` = 1e-10·λ_max; a point where another margin is below
    −tol becomes the bracket's new upper end and the margin to follow is chosen again."""
    def margins(pt):
        return np.concatenate([pt[2], pt[3]])

    m_lo, m_hi = margins(lo), margins(hi)
    k, retained = None, 0
    for _ in range(max_evaluations):
        if hi[0] - lo[0] <= width:
            return int(np.argmin(m_hi)), hi
        if k is None:
            bad = np.flatnonzero(m_hi < -tol)
            k = int(bad[np.argmin(m_lo[bad] / (m_lo[bad] - m_hi[bad]))])
            f_lo, f_hi, retained = m_lo[k], m_hi[k], 0
        dm = hi[0] - f_hi * (hi[0] - lo[0]) / (f_hi - f_lo)
        if not lo[0] < dm < hi[0]:
            dm = 0.5 * (lo[0] + hi[0])
        pt = evaluate(dm)
        if pt is None:
            return None
        m_pt = margins(pt)
        below = m_pt < -tol
        below_other = below.copy()
        below_other[k] = False
        if below_other.any():  # another margin crosses first: a new upper end, and the margin chosen again
            hi, m_hi, k = pt, m_pt, None
            continue
        if abs(m_pt[k]) <= tol:
            return k, pt
        if below[k]:
            hi, m_hi, f_hi = pt, m_pt, m_pt[k]
            retained = retained - 1 if retained < 0 else -1
            if retained <= -2:  # the lower end kept twice: halve its value (Illinois)
                f_lo /= 2
        else:
            lo, m_lo, f_lo = pt, m_pt, m_pt[k]
            retained = retained + 1 if retained > 0 else 1
            if retained >= 2:
                f_hi /= 2
    return None


def _refine(objective, W, A, s, inactive, lam, k_ev, delta, W_new, corrected, tol, lam_max):
    """Locate event ``k_ev`` on the corrected path: secant steps on its event function (exact
    already for least squares), and, when they stall, bisection on its sign. Returns
    (k_ev, δ, W, g, hit); hit is False when the event is not reached within δ after all
    (the linear prediction was early), and then (δ, W) is the plain step already checked."""
    n_act = len(A)

    def phi(Wc, dl):
        leave_m, enter_m, g = _margins(objective, Wc, A, s, inactive, lam - dl)
        return (leave_m[k_ev] if k_ev < n_act else enter_m[k_ev - n_act]), g

    f1, g1 = phi(W_new, delta)
    first = (delta, W_new, g1)
    lo, hi = 0.0, None  # φ ≥ 0 at lo; φ < 0 at hi (once seen): the bracket for bisection
    d0, f0 = 0.0, phi(W, 0.0)[0]
    d1 = delta
    for _ in range(60):
        if abs(f1) <= tol:
            return k_ev, d1, W_new, g1, True
        if f1 > 0:
            lo = max(lo, d1) if hi is None or d1 < hi[0] else lo
        elif hi is None or d1 < hi[0]:
            hi = (d1, W_new, g1)
        if f1 == f0:
            break
        d2 = d1 - f1 * (d1 - d0) / (f1 - f0)
        if not (0 < d2 < 2 * delta + tol * lam_max):
            break
        W2 = corrected(d2)
        if W2 is None:
            break
        d0, f0 = d1, f1
        d1, W_new = d2, W2
        f1, g1 = phi(W_new, d1)
    if hi is None:  # never crossed: no event in this step
        return k_ev, first[0], first[1], first[2], False
    while hi[0] - lo > tol * lam_max:
        mid = 0.5 * (lo + hi[0])
        Wm = corrected(mid)
        if Wm is None:
            break
        fm, gm = phi(Wm, mid)
        if abs(fm) <= tol:
            return k_ev, mid, Wm, gm, True
        if fm > 0:
            lo = mid
        else:
            hi = (mid, Wm, gm)
    return k_ev, hi[0], hi[1], hi[2], True


def default_lambda_min_ratio(n: int, d: int) -> float:
    """glmnet's ``lambda.min.ratio``: 1e-4 for more samples than variables, else 0.01 (where
    small λ would overfit an underdetermined regression)."""
    return 1e-4 if n > d else 1e-2
