"""The DAG-flow estimator: a scikit-learn estimator over ``path.follow_path`` and ``selection``."""

from __future__ import annotations

import numbers
import re

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted, validate_data

from ._checks import check_real
from .graphs import make_acyclic
from .objectives import DagmaObjective, GolemObjective, NotearsObjective
from .path import anchored_path, default_lambda_min_ratio, follow_path
from .selection import select_by_bic

__all__ = ["DagFlow"]


FORMULATIONS = ("dagma", "notears", "golem", "lasso")
# DAGMA's default central path (its mu_init = 1, mu_factor = 0.1, T = 5): the default μ schedule
CENTRAL_PATH = (1.0, 0.1, 0.01, 0.001, 0.0001)
# the dagma package's default log-det parameter along that path (DagmaLinear.fit's s), one per μ
DAGMA_S = (1.0, 0.9, 0.8, 0.7, 0.6)
CRITERIA = ("bic", "stability")


class DagFlow(BaseEstimator):
    """DAG learning by following the exact regularization path of a linear SEM objective
    (``path`` module): ``DagFlow(formulation).fit(X)`` follows the path from λ_max down to
    ``lambda_min_ratio``·λ_max and selects one DAG on it (``adjacency_``).

    A scikit-learn estimator: ``__init__`` only stores its arguments, ``fit`` validates them
    and the data, ``get_params`` / ``set_params`` / ``clone`` work. It learns a graph, not a
    predictor: ``fit(X)`` takes no target, and there is no ``predict`` / ``transform``.

    Parameters
    ----------
    formulation : "dagma" (μ, s), "notears" (ρ, α), "golem" (λ₂) or "lasso" (least squares
        alone: each column's lasso path, no acyclicity).
    lambda_min_ratio : where the paths end, as a fraction of λ_max, in (0, 1). None: glmnet's
        rule, 1e-4 when there are more samples than variables, else 0.01. The path must reach
        λ small against the data's scale: on unstandardized SEMs λ_max grows with the
        variances (hundreds on a scale-free SEM), and ending at 0.01·λ_max left every edge of a
        true graph out of reach there.
    max_step : the largest step along the path, as a fraction of λ_max (finite, > 0).
    threshold : τ > 0, finite; a graph on the path is {|W_ij| > τ}, made acyclic by removing the
        weakest edge of each cycle.
    mu : for "dagma", μ of DAGMA's objective (finite, > 0), or a schedule of them, decreasing.
        None (default): DAGMA's central path ``CENTRAL_PATH`` = (1, 0.1, 0.01, 0.001, 0.0001),
        through which each of DAGMA's own fits passes. A path at μ is in units λ = μ·λ₁ of
        DAGMA's own ℓ1 weight λ₁. Ignored by the other formulations.
    anchors : for a schedule of μ (the default), how it is followed. An integer k >= 1 (default
        12, about one per halving of λ over glmnet's 1e-4 range): one path, of the last μ, on the
        branch DAGMA's own continuation selects, restarted on it at k anchor λ
        (``path.anchored_path``: at each, the μ-continuation of DAGMA's fits by ``local_minimum``,
        then the exact path down to the next anchor). None: one path per
        μ, each from W = 0 at λ_max (``paths_`` in the schedule's order), the selection choosing
        among the graphs of all of them; at small μ such a path can stay on a poor branch.

    What the knobs cost: a path's time grows with its number of knots (edges entering or
    leaving) and about as d³ per knot. ER2 SEMs, n = 1000, one thread (the bench of
    ``docs/dag-flow.md``): at d = 20 the anchored central path took 3.6 s for a best graph at
    SHD 0, the five independent paths (``anchors=None``) 13.5 s for SHD 5, a 20-point grid of
    ``dagma`` fits 61 s for SHD 0; at d = 50 1.7 minutes for SHD 0, against 6 minutes for SHD 16
    and 3.6 minutes for SHD 0 (one seed; on SF2 at d = 50, over three seeds, the path took 1.1
    times the grid's time on average, 1.6 at most, and was behind it on every seed). More anchors
    follow DAGMA's own fits more closely at the price of one continuation each (tens of seconds
    at the densest anchors, d = 50); ``mu=1.0`` follows one path, the cheap preview, which stops
    where the likelihood still dominates. A smaller ``lambda_min_ratio`` adds knots at the dense
    end; a smaller ``max_step`` adds predictor steps between knots (not knots).
    s : DAGMA's log-det parameter (sI − W∘W must stay an M-matrix); finite, > 0: one value for
        every μ (default 1.0), or one per μ of the schedule (``DAGMA_S`` = (1, 0.9, 0.8, 0.7,
        0.6) is the ``dagma`` package's own default along ``CENTRAL_PATH``; the anchored path
        then follows the μ = 1e-4, s = 0.6 objective). Measured (ER2 / SF2, n = 1000, 3 seeds,
        docs/dag-flow.md): with ``DAGMA_S`` the best graph matched or beat a 20-point grid of
        ``dagma`` fits on every seed at d = 10 and 20, where s = 1 was up to 3 edges behind on 5 of
        the 12 cells, at the same cost (≤ 0.11× the grid); on ER2 at d = 50 it matched the grid on
        all 3 seeds (s = 1: 1 edge behind on one) at 0.35× its time (0.51× at most); on SF2 at d = 50
        it took 392, 400 and 1 152 s, 1.3-4.3× the grid (fold jumps whose descents crawl for
        minutes before failing), better than s = 1 on one seed and worse on two. So the default
        stays s = 1; at d ≤ 20, and on sparse ER-like graphs at d = 50, pass ``s=DAGMA_S``.
    rho, alpha : NOTEARS' augmented-Lagrangian weights, fixed along the path; rho finite and
        >= 0, alpha finite.
    lambda2 : GOLEM's weight of the acyclicity term; finite, >= 0.

    Every setting is checked by ``fit`` (ValueError / TypeError naming it), and so is X: a
    finite (n, d) array, n >= 2, d >= 2, no constant column, and column standard deviations
    within [1e-100, 1e100] (``objectives.check_data``; data beyond that is reported as badly
    scaled).
    criterion : how ``fit`` selects ``adjacency_`` (``select``): "bic", the candidate graph
        of lowest BIC after a least-squares refit, or "stability", the edges present over at
        least ``min_stability`` of the paths' log-λ length.
    min_stability : the stability criterion's cut, in [0, 1].

    Attributes
    ----------
    adjacency_ : (d, d) 0/1 int array, the selected DAG (adjacency_[i, j] = 1: edge i → j).
    paths_ : list of :class:`RegularizationPath`: the anchored path of the last μ alone, or
        (``anchors=None`` or a single μ) one per μ; ``path_`` is the first.
    mus_ : tuple of the μ values of the schedule (one for the formulations other than "dagma").
    lambda1_range_ : (λ₁,max, λ₁,min), the paths' range in DAGMA's own ℓ1 units λ₁ = λ/μ (for
        the other formulations, the path's λ range itself): a grid of ``dagma`` fits over the
        same range takes these.
    lambda_min_ratio_ : the path end used.
    objective_ : the objective of the last path; ``X_`` its centred (n, d) data.
    n_evaluations_ : dict, the derivative evaluations of every path together (gradients,
        Hessian-vector products, support Hessians, values), for comparing compute.
    n_features_in_ : d.
    """

    def __init__(self, formulation: str = "dagma", lambda_min_ratio: float | None = None, max_step: float = 0.05,
                 threshold: float = 0.3, mu: float | tuple | None = None, s: float = 1.0, rho: float = 1.0,
                 alpha: float = 0.0, lambda2: float = 5.0, criterion: str = "bic", min_stability: float = 0.5,
                 anchors: int | None = 12):
        self.formulation = formulation
        self.lambda_min_ratio = lambda_min_ratio
        self.max_step = max_step
        self.threshold = threshold
        self.mu = mu
        self.s = s
        self.rho = rho
        self.alpha = alpha
        self.lambda2 = lambda2
        self.criterion = criterion
        self.min_stability = min_stability
        self.anchors = anchors

    def _check_params(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """Validate the hyper-parameters; the μ schedule and the s of each μ, as tuples of floats."""
        if self.formulation not in FORMULATIONS:
            raise ValueError(f"formulation must be 'dagma', 'notears', 'golem' or 'lasso', got {self.formulation!r}")
        if self.mu is None:
            mus = CENTRAL_PATH if self.formulation == "dagma" else (1.0,)
        else:
            try:
                mus = tuple(np.atleast_1d(np.asarray(self.mu, dtype=float)).tolist())
            except (TypeError, ValueError):
                mus = ()
        if not mus or np.ndim(self.mu) > 1 or not min(mus) > 0 or not np.isfinite(mus).all():
            raise ValueError(f"mu must be a positive finite number or a non-empty schedule of them, got {self.mu!r}")
        if len(mus) > 1 and self.formulation != "dagma":
            raise ValueError(f"a schedule of mu values applies to the 'dagma' formulation only, not {self.formulation!r}")
        if self.anchors is not None:
            if isinstance(self.anchors, bool) or not isinstance(self.anchors, numbers.Integral):
                raise TypeError(f"anchors must be an integer >= 1 or None, got {self.anchors!r}")
            if self.anchors < 1:
                raise ValueError(f"anchors must be an integer >= 1 or None, got {self.anchors!r}")
            if len(mus) > 1 and any(b >= a for a, b in zip(mus, mus[1:])):
                raise ValueError(f"an anchored path follows a decreasing mu schedule, got {mus!r} "
                                 "(or pass anchors=None: one path per mu)")
        for name in ("max_step", "threshold", "min_stability") + (() if self.lambda_min_ratio is None else ("lambda_min_ratio",)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise TypeError(f"{name} must be a real number, got {value!r}")
        if self.lambda_min_ratio is not None and not 0 < self.lambda_min_ratio < 1:
            raise ValueError(f"lambda_min_ratio must be in (0, 1) or None, got {self.lambda_min_ratio!r}")
        if not (self.max_step > 0 and np.isfinite(self.max_step)):
            raise ValueError(f"max_step must be finite and > 0, got {self.max_step!r}")
        if not (self.threshold > 0 and np.isfinite(self.threshold)):
            raise ValueError(f"threshold must be finite and > 0, got {self.threshold!r}")
        if self.criterion not in CRITERIA:
            raise ValueError(f"criterion must be 'bic' or 'stability', got {self.criterion!r}")
        _check_min_stability(self.min_stability)
        s_values = self._s_schedule(mus)
        check_real("rho", self.rho, low=0.0)
        check_real("alpha", self.alpha)
        check_real("lambda2", self.lambda2, low=0.0)
        return mus, s_values

    def _s_schedule(self, mus) -> tuple[float, ...]:
        """``s`` as one value per μ: a number repeated, or a sequence as long as the schedule."""
        if np.ndim(self.s) == 0:
            return (check_real("s", self.s, low=0.0, low_open=True),) * len(mus)
        if np.ndim(self.s) != 1 or len(self.s) != len(mus):
            raise ValueError(f"s must be a number or one value per mu of the schedule ({len(mus)}: {mus!r}), "
                             f"got {self.s!r}")
        return tuple(check_real(f"s[{i}]", v, low=0.0, low_open=True) for i, v in enumerate(self.s))

    def _objective(self, X, mu, s):
        if self.formulation == "dagma":
            return DagmaObjective(X, mu=mu, s=s)
        if self.formulation == "notears":
            return NotearsObjective(X, rho=self.rho, alpha=self.alpha)
        if self.formulation == "golem":
            return GolemObjective(X, lambda2=self.lambda2)
        return NotearsObjective(X, rho=0.0)

    def fit(self, X, y=None) -> "DagFlow":
        """Follow the path (``anchors``, ``mu``) on the (n, d) data X (n ≥ 2, d ≥ 2, finite, no
        constant column; centred here) and select ``adjacency_``. ``y`` is ignored (there for the
        scikit-learn API)."""
        mus, s_values = self._check_params()
        try:
            X = validate_data(self, X, dtype=np.float64, ensure_min_samples=2, ensure_min_features=2)
        except (TypeError, ValueError) as e:  # scikit-learn's message, naming the argument where it does not
            if re.search(r"\bX\b", str(e)):
                raise
            raise type(e)(f"X: {e}") from e
        objectives = [self._objective(X, mu, s) for mu, s in zip(mus, s_values)]
        n, d = objectives[0].X_np.shape
        ratio = default_lambda_min_ratio(n, d) if self.lambda_min_ratio is None else self.lambda_min_ratio
        if len(objectives) > 1 and self.anchors is not None:
            paths = [anchored_path(objectives, self.anchors, ratio, self.max_step, threshold=self.threshold)]
            scale = mus[-1]
        else:
            paths = [follow_path(o, ratio, self.max_step, threshold=self.threshold) for o in objectives]
            scale = mus[0]
        calls = {}
        for objective in objectives:
            for k, v in objective.calls.items():
                calls[k] = calls.get(k, 0) + v
        hi, lo = paths[0].lambda_range
        self.lambda1_range_ = (hi / scale, lo / scale) if self.formulation == "dagma" else (hi, lo)
        self.mus_ = mus
        self.lambda_min_ratio_ = ratio
        self.paths_ = paths
        self.path_ = paths[0]
        self.objective_ = objective
        self.X_ = objective.X_np
        self.n_evaluations_ = calls
        self.adjacency_ = self._select(self.criterion, self.min_stability)
        return self

    def graph_at(self, lam: float, path: int = 0) -> np.ndarray:
        """The thresholded acyclic graph at λ on ``paths_[path]``: (d, d) 0/1."""
        check_is_fitted(self)
        if isinstance(path, bool) or not isinstance(path, numbers.Integral) or not -len(self.paths_) <= path < len(self.paths_):
            raise ValueError(f"path must be an index into paths_ (0 to {len(self.paths_) - 1}), got {path!r}")
        return make_acyclic(self.paths_[path].W_at(lam), self.threshold)

    def candidate_graphs(self) -> list[np.ndarray]:
        """The distinct thresholded, acyclic graphs at the knots of every path, each (d, d) 0/1."""
        check_is_fitted(self)
        out, seen = [], set()
        for p in self.paths_:
            for W in p.weights:
                A = make_acyclic(W, self.threshold)
                if A.tobytes() not in seen:
                    seen.add(A.tobytes())
                    out.append(A)
        return out

    def select(self, criterion: str | None = None, min_stability: float | None = None) -> np.ndarray:
        """One (d, d) 0/1 graph from the paths by ``criterion`` ("bic" or "stability"; None:
        the estimator's own, which gave ``adjacency_``)."""
        check_is_fitted(self)
        if min_stability is not None:
            _check_min_stability(min_stability)
        return self._select(self.criterion if criterion is None else criterion,
                            self.min_stability if min_stability is None else min_stability)

    def _select(self, criterion: str, min_stability: float) -> np.ndarray:
        if criterion == "bic":
            return select_by_bic(self.X_, self.candidate_graphs())
        if criterion == "stability":
            stab = np.mean([p.edge_stability(self.threshold) for p in self.paths_], axis=0)
            return make_acyclic(np.where(stab >= min_stability, stab, 0.0), 0.0)
        raise ValueError(f"criterion must be 'bic' or 'stability', got {criterion!r}")


def _check_min_stability(value) -> None:
    if not 0 <= check_real("min_stability", value) <= 1:
        raise ValueError(f"min_stability must be in [0, 1], got {value!r}")
