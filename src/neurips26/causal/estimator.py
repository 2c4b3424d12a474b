"""The DAG-flow estimator: a scikit-learn estimator over ``path.follow_path``."""

from __future__ import annotations

import numpy as np

from .graphs import make_acyclic
from .objectives import DagmaObjective
from .path import default_lambda_min_ratio, follow_path
from .selection import select_by_bic

__all__ = ["DagFlow"]


class DagFlow:
    """Scikit-learn-style estimator: ``DagFlow(formulation).fit(X)`` follows the path;
    ``path_`` is the :class:`RegularizationPath`, ``graph_at(λ)`` the thresholded acyclic
    graph there, ``select("bic" | "stability")`` one graph from the path.

    ``formulation``: "dagma" (μ, s), "notears" (ρ, α), "golem" (λ₂) or "lasso" (least squares
    alone: each column's lasso path, no acyclicity).

    For "dagma", ``mu`` may be a schedule, e.g. DAGMA's central path (1, 0.1, 0.01, 0.001):
    one path is followed per μ (``paths_``, in the schedule's order; ``path_`` is the first),
    and ``select`` chooses among the candidate graphs of all of them. A path at μ is in
    units λ = μ·λ₁ of DAGMA's own ℓ1 weight λ₁.

    ``lambda_min_ratio``: where the paths end, as a fraction of λ_max. By default glmnet's
    rule: 1e-4 when there are more samples than variables, else 0.01. The path must reach λ
    small against the data's scale: on unstandardized SEMs λ_max grows with the variances
    (hundreds on a scale-free SEM), and ending at 0.01·λ_max left every edge of a true graph
    out of reach there. ``lambda_min_ratio_`` is the value used."""

    def __init__(self, formulation: str = "dagma", lambda_min_ratio: float | None = None, max_step: float = 0.05,
                 threshold: float = 0.3, mu: float | tuple = 1.0, s: float = 1.0, rho: float = 1.0,
                 alpha: float = 0.0, lambda2: float = 5.0):
        if formulation not in ("dagma", "notears", "golem", "lasso"):
            raise ValueError(f"formulation must be 'dagma', 'notears', 'golem' or 'lasso', got {formulation!r}")
        mus = tuple(np.atleast_1d(np.asarray(mu, dtype=float)).tolist())
        if not mus or min(mus) <= 0:
            raise ValueError(f"mu must be a positive number or a non-empty schedule of them, got {mu!r}")
        if len(mus) > 1 and formulation != "dagma":
            raise ValueError(f"a schedule of mu values applies to the 'dagma' formulation only, not {formulation!r}")
        self.formulation, self.lambda_min_ratio, self.max_step = formulation, lambda_min_ratio, max_step
        self.threshold, self.mu, self.s, self.rho, self.alpha, self.lambda2 = threshold, mu, s, rho, alpha, lambda2
        self._mus = mus

    def _objective(self, X, mu):
        from .objectives import GolemObjective, NotearsObjective

        if self.formulation == "dagma":
            return DagmaObjective(X, mu=mu, s=self.s)
        if self.formulation == "notears":
            return NotearsObjective(X, rho=self.rho, alpha=self.alpha)
        if self.formulation == "golem":
            return GolemObjective(X, lambda2=self.lambda2)
        return NotearsObjective(X, rho=0.0)

    def fit(self, X) -> "DagFlow":
        self.paths_, calls = [], {}
        for mu in self._mus:
            objective = self._objective(X, mu)
            n, d = objective.X_np.shape
            self.lambda_min_ratio_ = default_lambda_min_ratio(n, d) if self.lambda_min_ratio is None else self.lambda_min_ratio
            self.paths_.append(follow_path(objective, self.lambda_min_ratio_, self.max_step, threshold=self.threshold))
            for k, v in objective.calls.items():
                calls[k] = calls.get(k, 0) + v
        self.objective_ = objective
        self.X_ = objective.X_np
        self.path_ = self.paths_[0]
        self.n_evaluations_ = calls
        return self

    def graph_at(self, lam: float, path: int = 0) -> np.ndarray:
        """The thresholded acyclic graph at λ on ``paths_[path]``."""
        return make_acyclic(self.paths_[path].W_at(lam), self.threshold)

    def candidate_graphs(self) -> list[np.ndarray]:
        """The distinct thresholded, acyclic graphs at the knots of every path."""
        out, seen = [], set()
        for p in self.paths_:
            for W in p.weights:
                A = make_acyclic(W, self.threshold)
                if A.tobytes() not in seen:
                    seen.add(A.tobytes())
                    out.append(A)
        return out

    def select(self, criterion: str = "bic", min_stability: float = 0.5) -> np.ndarray:
        if criterion == "bic":
            return select_by_bic(self.X_, self.candidate_graphs())
        if criterion == "stability":
            stab = np.mean([p.edge_stability(self.threshold) for p in self.paths_], axis=0)
            return make_acyclic(np.where(stab >= min_stability, stab, 0.0), 0.0)
        raise ValueError(f"criterion must be 'bic' or 'stability', got {criterion!r}")
