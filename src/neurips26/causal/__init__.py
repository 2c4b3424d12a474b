"""Continuous DAG learning for linear SEMs: NOTEARS / GOLEM / DAGMA objectives and DAG-flow,
exact regularization-path following.

Modules: ``objectives`` (smooth score + acyclicity terms), ``path`` (the path tracer),
``graphs`` (acyclicity utilities), ``selection`` (choosing a graph), ``estimator`` (``DagFlow``)."""

from .estimator import CENTRAL_PATH, DAGMA_S, DagFlow
from .graphs import is_acyclic, make_acyclic
from .objectives import DagmaObjective, GolemObjective, NotearsObjective, SEMObjective, check_data, dagma_h, notears_h
from .path import PathEvent, RegularizationPath, anchored_path, default_lambda_min_ratio, follow_path, local_minimum
from .selection import refit_bic, select_by_bic

__all__ = ["CENTRAL_PATH", "DAGMA_S", "DagFlow", "make_acyclic", "refit_bic", "select_by_bic", "PathEvent", "RegularizationPath", "follow_path", "anchored_path",
           "local_minimum", "default_lambda_min_ratio", "is_acyclic", "DagmaObjective", "GolemObjective",
           "NotearsObjective", "SEMObjective", "check_data", "dagma_h", "notears_h"]
